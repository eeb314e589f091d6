"""driver.active.get_current_target() as wrappers call it: several times per call (tutorial 06's
is_cuda / is_hopper / is_blackwell ask it five times a forward). With a GPU, the device comes from
the launch path's own query and each device's capability is asked of torch once; the target is
one frozen GPUTarget per architecture. Without one, WARPWEAVE_TARGET is still read every time.
torch's CUDA queries are stand-ins here (no GPU is needed)."""

import importlib

import pytest

import warpweave as ww
from warpweave.backends.compiler import GPUTarget

torch = pytest.importorskip("torch")
driver_mod = importlib.import_module("warpweave.runtime.driver")
jitmod = importlib.import_module("warpweave.jit")


@pytest.fixture
def gpu_driver(monkeypatch):
    """A fresh CudaDriver that believes a GPU is there; devices and capabilities by the lists."""
    asked = []
    current = [0]
    caps = {0: (9, 0), 1: (10, 0)}

    def capability(device=None):
        asked.append(device)
        return caps[current[0] if device is None else device]

    monkeypatch.setattr(torch.cuda, "get_device_capability", capability)
    monkeypatch.setattr(jitmod, "_stream_source", lambda: (lambda: current[0], lambda dev: 0))
    d = driver_mod.CudaDriver()
    d._gpu = True
    return d, asked, current


def test_the_target_is_one_object_and_the_capability_asked_once(gpu_driver):
    d, asked, current = gpu_driver
    first = d.get_current_target()
    assert first == GPUTarget("cuda", 90, 32)
    for _ in range(5):
        assert d.get_current_target() is first
    assert asked == [0]


def test_another_current_device_gives_its_own_target(gpu_driver):
    d, asked, current = gpu_driver
    assert d.get_current_target().arch == 90
    current[0] = 1
    assert d.get_current_device() == 1
    assert d.get_current_target().arch == 100
    current[0] = 0
    assert d.get_current_target().arch == 90
    assert asked == [0, 1]


def test_no_device_still_asks_torch_for_the_current_one(gpu_driver):
    d, asked, current = gpu_driver
    current[0] = 1
    assert d.get_device_capability() == (10, 0)
    assert d.get_device_capability() == (10, 0)
    assert asked == [None, None]  # not cached: the current device may change


def test_without_a_gpu_the_forced_target_is_read_each_time(monkeypatch):
    d = driver_mod.CudaDriver()
    d._gpu = False
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_100a")
    assert d.get_current_target().arch == 100
    monkeypatch.setenv("WARPWEAVE_TARGET", "sm_80")
    assert d.get_current_target().arch == 80
    monkeypatch.delenv("WARPWEAVE_TARGET")
    monkeypatch.delenv("TRITON_TARGET", raising=False)
    assert d.get_current_target() is d.get_current_target()
    assert d.get_current_target().arch == 90


def test_the_autotuner_key_spells_tensor_dtypes_as_before():
    class DType:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return f"torch.{self.name}"

    class Tensor:
        is_cuda = True

        def __init__(self, dtype):
            self.dtype = dtype

        def data_ptr(self):
            return 0

    @ww.jit
    def k(x, n, BLOCK: ww.language.constexpr):
        pass

    tuned = ww.autotune(configs=[ww.Config({"BLOCK": 1})], key=["n", "x"])(k)
    f16, f32 = DType("float16"), DType("float32")
    assert tuned._key({"x": Tensor(f16), "n": 3}) == (3, "torch.float16", "torch.float16")
    assert tuned._key({"x": Tensor(f32), "n": 3}) == (3, "torch.float32", "torch.float32")
    assert tuned._key({"x": Tensor(f16), "n": 3}) == (3, "torch.float16", "torch.float16")
