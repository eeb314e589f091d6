"""warpweave.ops's per-shape tuning (warpweave.ops._tuning) on a faked GPU: NumPy arrays stand in
for CUDA tensors (the wrappers believe they run on a 132-SM sm_90 GPU and that do_bench can time
them), every launch is recorded instead of run, and ww.testing.do_bench is a fake timer that
runs the candidate's launch once and returns a time the test chose for what it launched.

Checked: the fastest candidate is launched, every valid candidate timed once after being
compiled; the winner is kept on disk (WARPWEAVE_CACHE_DIR/autotune) and a fresh in-memory cache
reads it instead of timing again, per device; candidates invalid for the shape (TLX without TMA
operands or with an activation, tiles over the GPU's shared memory, TMA fp8 loads with K not a
multiple of 16, the TLX attention with N_CTX not a multiple of 128) are never timed;
WARPWEAVE_OPS_TUNING=0 launches today's fixed configurations; WARPWEAVE_OPS_CONFIG forces one (a
spec that matches none is an error listing them); interpreter calls never tune; a launch plan
replays the tuned choice; a CUDA graph capture times nothing. And, run for real in the
interpreter with the GPU configurations, every candidate of every op computes the right result.
"""

import importlib
import math
import types

import pytest

np = pytest.importorskip("numpy")
native_loader = importlib.import_module("warpweave._native_loader")
pytestmark = pytest.mark.skipif(not native_loader.available(),
                                reason="warpweave._native is not built (pip install .)")

import warpweave as ww  # noqa: E402
import warpweave.ops as ops  # noqa: E402
from warpweave import testing  # noqa: E402
from warpweave.ops import (_attention, _common, _grouped_mm, _matmul, _scaled_mm,  # noqa: E402
                           _tuning)

jit_module = importlib.import_module("warpweave.jit")


class Launch:
    def __init__(self, name, meta, grid):
        self.name = name
        self.meta = meta
        self.grid = grid

    def __repr__(self):
        return f"{self.name}{self.meta}"


class FakeGpu:
    """launches: every launch in order; compiles: kernels compiled without launching; timed:
    the launches each do_bench call made; cost(launch) -> ms decides the timings."""

    def __init__(self):
        self.launches = []
        self.compiles = []
        self.timed = []
        self.cost = lambda launch: 1.0

    def final(self, name=None):
        """The last launch (of kernel `name`)."""
        return [x for x in self.launches if name is None or x.name == name][-1]


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    gpu = FakeGpu()
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    for var in ("WARPWEAVE_CACHE_DISABLE", "WARPWEAVE_OPS_TUNING", "WARPWEAVE_OPS_CONFIG",
                "WARPWEAVE_INTERPRET", "WARPWEAVE_TARGET"):
        monkeypatch.delenv(var, raising=False)
    # Tuning is opt-in (knobs.ops.tuning defaults to off): these tests switch it on.
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    monkeypatch.setattr(_common._Place, "num_sms", lambda self: 132)
    monkeypatch.setattr(_common, "_is_sm90", lambda place: True)
    monkeypatch.setattr(_tuning, "_can_time", lambda place: True)
    monkeypatch.setattr(_tuning, "_capturing", lambda: False)
    monkeypatch.setattr(_tuning, "_chosen", {})
    monkeypatch.setattr(_tuning, "decisions", {})

    def recorded_run(self, *args, grid, warmup=False, **kwargs):
        if warmup:
            gpu.compiles.append(self.__name__)
            return None
        meta = {k: v for k, v in kwargs.items() if k[0].isupper() or k.startswith("num_")}
        gpu.launches.append(Launch(self.__name__, meta, grid))
        return None

    def fake_do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None,
                      return_mode="mean", flush="write"):
        first = len(gpu.launches)
        fn()
        made = gpu.launches[first:]
        assert made
        # A candidate of several launches (attention_bwd's tl pair, its TLX kernel with its
        # pre- and postprocess) costs their sum.
        gpu.timed.extend(made)
        t = sum(gpu.cost(x) for x in made)
        return [t] * len(quantiles) if quantiles else t

    monkeypatch.setattr(jit_module.JITFunction, "run", recorded_run)
    monkeypatch.setattr(testing, "do_bench", fake_do_bench)
    return gpu


def fresh_process(monkeypatch):
    """What a new process starts without: tuned choices in memory and launch plans."""
    monkeypatch.setattr(_tuning, "_chosen", {})
    _common._launch_plans.clear()


def no_timing(*args, **kwargs):
    raise AssertionError("do_bench called: the configuration was timed")


def h(*shape):
    return np.ones(shape, np.float16)


def fp8(*shape):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    return np.ones(shape, ml_dtypes.float8_e4m3fn)


def s(*shape):
    return np.ones(shape, np.float32)


def call_scaled_mm(M, N, K, **kw):
    """scaled_mm with use_fast_accum=True unless `kw` says otherwise (the tests of tiles and
    tuning below are about its configurations; promoted accumulation has its own tests)."""
    kw.setdefault("use_fast_accum", True)
    return ops.scaled_mm(fp8(M, K), fp8(N, K).T, s(1), s(1), out_dtype=np.float16, **kw)


# ------------------------------------------------------------------------------------------------
# Choosing, keeping, reusing
# ------------------------------------------------------------------------------------------------


def test_the_fastest_candidate_is_launched_after_each_is_timed_once(fake_gpu):
    # The tl kernel with 64-deep K steps in 4 stages is "fastest".
    fake_gpu.cost = lambda x: 0.5 if x.meta.get("BLOCK_K") == 64 and \
        x.meta.get("num_stages") == 4 and x.name == "matmul_kernel" else 1.0
    ops.matmul(h(512, 256), h(256, 384))
    decision = _tuning.decisions["matmul"]
    assert decision.how == "timed"
    assert decision.chosen == _tuning.Candidate("tl", BLOCK_M=128, BLOCK_N=128, BLOCK_K=64,
                                                GROUP_M=8, num_warps=8, num_stages=4)
    # Every candidate compiled (in parallel) and timed once, then the winner launched.
    assert len(fake_gpu.timed) == len(decision.candidates) == len(fake_gpu.compiles)
    kernels = {x.name for x in fake_gpu.timed}
    assert kernels == {"matmul_kernel", "gemm_ws_kernel", "gemm_ws_pingpong_kernel",
                       "gemm_pipelined_kernel"}
    final = fake_gpu.launches[-1]
    assert final.name == "matmul_kernel" and final.meta["BLOCK_K"] == 64
    assert len(fake_gpu.launches) == len(fake_gpu.timed) + 1
    # The fixed configuration (the TLX warp-specialized GEMM; on 128x64 tiles, since 128x256
    # and 128x128 ones would leave most SMs idle) leads the candidates.
    assert decision.candidates[0] == _tuning.Candidate("tlx_ws", **_matmul._TLX_WS_128x64)
    assert _tuning.Candidate("tlx_ws", **ops.TLX_GEMM_CONFIGS["ws"]) in decision.candidates


@pytest.mark.parametrize("M, N, tile_n", [(256, 4096, 64), (128, 8192, 64), (512, 4096, 128),
                                           (256, 8192, 128), (1024, 4096, 256),
                                           (8192, 8192, 256)])
def test_matmul_tiles_narrow_while_the_product_would_leave_half_the_sms_idle(M, N, tile_n):
    # 132 SMs (an H100 / H200): 128x256 tiles where they give more than 66 programs, else
    # 128x128 where those do, else 128x64 (256x4096: 32 tiles of 128x256, 64 of 128x128).
    place = types.SimpleNamespace(num_sms=lambda: 132, kind="numpy", torch_device=None)
    fixed = _matmul._candidates(place, "float16", M, N, tl=True, tlx=True)[0]
    assert fixed.kernel == "tlx_ws" and fixed["BLOCK_M"] == 128 and fixed["BLOCK_N"] == tile_n
    expected = {64: _matmul._TLX_WS_128x64, 128: _matmul._TLX_WS_128x128,
                256: ops.TLX_GEMM_CONFIGS["ws"]}[tile_n]
    assert fixed == _tuning.Candidate("tlx_ws", **expected)


def test_the_winner_is_kept_on_disk_and_read_by_a_fresh_memory_cache(fake_gpu, tmp_path,
                                                                      monkeypatch):
    fake_gpu.cost = lambda x: 0.3 if x.name == "gemm_ws_pingpong_kernel" else 1.0
    ops.matmul(h(256, 256), h(256, 256))
    assert _tuning.decisions["matmul"].chosen.kernel == "tlx_pingpong"
    files = list((tmp_path / "autotune").glob("*.json"))
    assert len(files) == 1
    # The same call again: its launch plan replays the winner, nothing timed or chosen.
    monkeypatch.setattr(testing, "do_bench", no_timing)
    launches = len(fake_gpu.launches)
    ops.matmul(h(256, 256), h(256, 256))
    assert len(fake_gpu.launches) == launches + 1
    assert fake_gpu.final().name == "gemm_ws_pingpong_kernel"
    # Without the plan, the same process chooses from memory.
    _common._launch_plans.clear()
    ops.matmul(h(256, 256), h(256, 256))
    assert _tuning.decisions["matmul"].how == "memory"
    # A fresh process's memory cache: the disk record, no timing.
    fresh_process(monkeypatch)
    ops.matmul(h(256, 256), h(256, 256))
    assert _tuning.decisions["matmul"].how == "disk"
    assert fake_gpu.final().name == "gemm_ws_pingpong_kernel"
    # Another shape is another key.
    with pytest.raises(AssertionError, match="was timed"):
        ops.matmul(h(256, 264), h(264, 256))


def test_records_are_per_device_and_per_kernel_source(fake_gpu, tmp_path, monkeypatch):
    ops.grouped_mm(h(300, 64), h(4, 64, 128), np.array([50, 100, 250, 300], np.int32))
    first = len(fake_gpu.timed)
    assert first > 1 and _tuning.decisions["grouped_mm"].how == "timed"
    fresh_process(monkeypatch)
    monkeypatch.setattr(_tuning, "device", lambda place: _tuning.Device("another GPU", 232448))
    ops.grouped_mm(h(300, 64), h(4, 64, 128), np.array([50, 100, 250, 300], np.int32))
    assert _tuning.decisions["grouped_mm"].how == "timed"
    assert len(list((tmp_path / "autotune").glob("*.json"))) == 2
    # Within one power-of-two bucket of the ragged rows: the same key.
    ops.grouped_mm(h(290, 64), h(4, 64, 128), np.array([50, 100, 250, 290], np.int32))
    assert _tuning.decisions["grouped_mm"].how == "memory"
    # The kernel's sources are part of the record's name.
    from warpweave.ops.kernels import grouped_mm as kernels

    env = kernels.grouped_mm_kernel.environment()
    changed = type(env)([(p, t + "\n# edited\n") for p, t in env.files], env.names,
                        env.globals, env.guards)
    monkeypatch.setattr(type(kernels.grouped_mm_kernel), "environment",
                        lambda self: changed)
    fresh_process(monkeypatch)
    ops.grouped_mm(h(300, 64), h(4, 64, 128), np.array([50, 100, 250, 300], np.int32))
    assert _tuning.decisions["grouped_mm"].how == "timed"


# ------------------------------------------------------------------------------------------------
# Candidates invalid for the shape are never tried
# ------------------------------------------------------------------------------------------------


def timed_kernels(gpu):
    return {x.name for x in gpu.timed}


def test_matmul_takes_tlx_candidates_only_where_tma_and_no_activation_allow(fake_gpu):
    ops.matmul(h(256, 256), h(256, 256), activation="relu")
    assert timed_kernels(fake_gpu) == {"matmul_kernel"}
    fake_gpu.timed.clear()
    ops.matmul(h(256, 256), h(256, 250))  # rows of 500 bytes: no TMA descriptor
    assert timed_kernels(fake_gpu) == {"matmul_kernel"}
    fake_gpu.timed.clear()
    ops.matmul(h(256, 256), h(256, 256), kernel="tl")
    assert timed_kernels(fake_gpu) == {"matmul_kernel"}
    fake_gpu.timed.clear()
    ops.matmul(h(256, 256), h(256, 256), kernel="tlx")
    assert "matmul_kernel" not in timed_kernels(fake_gpu)


def test_grouped_mm_takes_tlx_candidates_only_where_tma_and_k_allow(fake_gpu):
    ops.grouped_mm(h(3000, 128), h(4, 128, 1408), np.array([500, 1000, 2500, 3000], np.int32))
    decision = _tuning.decisions["grouped_mm"]
    # The TLX kernel's fixed configuration leads; both kernels are timed.
    assert decision.candidates[0] == _tuning.Candidate(
        "tlx_ws", **_grouped_mm.GROUPED_MM_TLX_CONFIGS[0])
    assert timed_kernels(fake_gpu) == {"grouped_mm_ws_kernel", "grouped_mm_kernel"}
    tlx = [x for x in fake_gpu.timed if x.name == "grouped_mm_ws_kernel"]
    assert len(tlx) == len(_grouped_mm.GROUPED_MM_TLX_CONFIGS)
    # A persistent grid: at most one program per SM, at most one per work item.
    assert {x.grid for x in tlx} == {(132,)}
    fake_gpu.timed.clear()
    ops.grouped_mm(h(40, 128), h(2, 128, 64), np.array([10, 40], np.int32))
    # (cdiv(40, 128) + 2 groups) x 1 tile-column: 3 work items at most, 3 programs.
    assert {x.grid for x in fake_gpu.timed if x.name == "grouped_mm_ws_kernel"} == {(3,)}
    # No 256-wide tiles but the fixed one where N <= 128.
    offs = np.array([50, 100, 250, 300], np.int32)
    assert [c["BLOCK_N"] for c in _tuning.decisions["grouped_mm"].candidates
            if c.kernel == "tlx_ws"] == [256, 128]
    for call in (lambda: ops.grouped_mm(h(300, 96), h(4, 96, 128), offs),  # K % 64
                 lambda: ops.grouped_mm(h(300, 128), h(4, 128, 132), offs),  # N % 8
                 lambda: ops.grouped_mm(h(300, 128), h(4, 128, 256)[:, :, ::2], offs),
                 lambda: ops.grouped_mm(h(300, 100), h(4, 128, 100).transpose(0, 2, 1), offs),
                 lambda: ops.grouped_mm(h(300, 256)[:, ::2], h(4, 128, 128), offs),
                 lambda: ops.grouped_mm(s(300, 128), s(4, 128, 128), offs),
                 lambda: ops.grouped_mm(h(300, 128), h(4, 128, 128), offs, kernel="tl")):
        call()
        assert {c.kernel for c in _tuning.decisions["grouped_mm"].candidates} == {"tl"}
        assert fake_gpu.final().name == "grouped_mm_kernel"
    ops.grouped_mm(h(300, 128), h(4, 128, 128), offs, kernel="tlx")
    assert {c.kernel for c in _tuning.decisions["grouped_mm"].candidates} == {"tlx_ws"}
    assert fake_gpu.final().name == "grouped_mm_ws_kernel"
    assert fake_gpu.final().meta["B_KMAJOR"] is False


def test_grouped_mm_ragged_k_takes_tlx_candidates_only_where_tma_allows(fake_gpu):
    # The weight gradient: a = x.t() of x [T, M] (columns contiguous), b [T, N], T ragged.
    offs = np.array([500, 1000, 2500, 3000], np.int32)
    ops.grouped_mm(h(3000, 2048).T, h(3000, 1408), offs)
    decision = _tuning.decisions["grouped_mm_ragged_k"]
    assert decision.candidates[0] == _tuning.Candidate(
        "tlx_ws", **_grouped_mm.GROUPED_MM_TLX_CONFIGS[0])
    assert timed_kernels(fake_gpu) == {"grouped_mm_ragged_k_ws_kernel",
                                       "grouped_mm_ragged_k_kernel"}
    tlx = [x for x in fake_gpu.timed if x.name == "grouped_mm_ragged_k_ws_kernel"]
    assert len(tlx) == len(_grouped_mm.GROUPED_MM_TLX_CONFIGS)
    assert {x.grid for x in tlx} == {(132,)}  # persistent
    assert {x.meta["A_MMAJOR"] for x in tlx} == {True}
    fake_gpu.timed.clear()
    # a with contiguous rows (K_total any multiple of 8; groups starting anywhere: the kernel
    # starts its boxes at multiples of 8 columns); G * 1 tile = 4 work items, 4 programs.
    ops.grouped_mm(h(64, 3000), h(3000, 64), offs)
    tlx = [x for x in fake_gpu.timed if x.name == "grouped_mm_ragged_k_ws_kernel"]
    assert {x.grid for x in tlx} == {(4,)} and {x.meta["A_MMAJOR"] for x in tlx} == {False}
    for call in (lambda: ops.grouped_mm(h(64, 3004), h(3004, 64), offs),  # a's pitch % 16 B
                 lambda: ops.grouped_mm(h(3004, 60).T, h(3004, 64), offs),  # x's pitch
                 lambda: ops.grouped_mm(h(64, 3000), h(3000, 132), offs),  # N % 8
                 lambda: ops.grouped_mm(h(64, 3000), h(3000, 256)[:, ::2], offs),
                 lambda: ops.grouped_mm(h(128, 6000)[::2, ::2], h(3000, 64), offs),
                 lambda: ops.grouped_mm(s(64, 3000), s(3000, 64), offs),
                 lambda: ops.grouped_mm(h(64, 3000), h(3000, 64), offs, kernel="tl")):
        call()
        assert {c.kernel for c in _tuning.decisions["grouped_mm_ragged_k"].candidates} == {"tl"}
        assert fake_gpu.final().name == "grouped_mm_ragged_k_kernel"
    ops.grouped_mm(h(64, 3000), h(3000, 64), offs, kernel="tlx")
    assert {c.kernel for c in _tuning.decisions["grouped_mm_ragged_k"].candidates} == {"tlx_ws"}
    assert fake_gpu.final().name == "grouped_mm_ragged_k_ws_kernel"
    # Expert-major weights (b the transpose of [G, N, K]), K any multiple of 8: K-major B.
    ops.grouped_mm(h(300, 72), h(4, 128, 72).transpose(0, 2, 1), offs)
    assert _tuning.decisions["grouped_mm"].candidates[0].kernel == "tlx_ws"
    assert fake_gpu.final().name == "grouped_mm_ws_kernel"
    assert fake_gpu.final().meta["B_KMAJOR"] is True


def test_tiles_larger_than_the_product_are_not_tried(fake_gpu):
    ops.matmul(h(48, 256), h(256, 96))  # M <= 64 and N <= 128
    decision = _tuning.decisions["matmul"]
    for c in decision.candidates[1:]:
        assert c["BLOCK_M"] <= 64 and c["BLOCK_N"] <= 128, c
    assert [x.meta["BLOCK_M"] for x in fake_gpu.timed[1:]] == [64] * (len(fake_gpu.timed) - 1)


def test_candidates_over_the_shared_memory_are_not_tried(fake_gpu, monkeypatch):
    small = _tuning.Device("a GPU with 100 KB of shared memory", 100 * 1024)
    monkeypatch.setattr(_tuning, "device", lambda place: small)
    ops.matmul(h(512, 512), h(512, 512))
    candidates = _tuning.decisions["matmul"].candidates
    assert len(candidates) > 1
    for c in candidates[1:]:
        assert _matmul._shared_bytes(c, 2) <= small.shared, c
    # scaled_mm on 160 KB: the TLX kernel's stages cut to fit (its chunk buffers and scratch
    # included), the tl kernels' configurations that fit.
    mid = _tuning.Device("a GPU with 160 KB of shared memory", 160 * 1024)
    monkeypatch.setattr(_tuning, "device", lambda place: mid)
    call_scaled_mm(512, 512, 256)
    candidates = _tuning.decisions["scaled_mm"].candidates
    assert {c.kernel for c in candidates} == {"tlx", "tl", "tma"}
    assert candidates[0].kernel == "tlx" and candidates[0]["NUM_STAGES"] == 4  # of 6
    for c in candidates:
        if c.kernel == "tlx":
            assert _scaled_mm._tlx_shared_bytes(c.config, 2) <= mid.shared, c
        else:
            assert c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] <= mid.shared


def test_scaled_mm_accumulation_settings_never_share_candidates_or_tunings(fake_gpu, monkeypatch):
    # use_fast_accum=False (torch's default): every candidate promotes (FAST_ACCUM=False) and
    # has 128x128 tiles, or the TLX kernel's 128x256 split into column halves (SPLIT_N); True:
    # every candidate accumulates in the wgmma registers, 128x256 tiles among them, none split.
    # The tuning keys differ, so neither reuses the other's choice.
    fake_gpu.cost = lambda x: 0.1 if x.meta.get("BLOCK_N") == 256 else 1.0
    call_scaled_mm(4096, 4096, 256, use_fast_accum=False)
    promoted = _tuning.decisions["scaled_mm"]
    assert {c.kernel for c in promoted.candidates} == {"tlx", "tl", "tma"}
    assert promoted.candidates[0].kernel == "tlx" and promoted.candidates[0]["BLOCK_N"] == 128
    assert all(c["FAST_ACCUM"] is False for c in promoted.candidates)
    split = [c for c in promoted.candidates if c.config.get("SPLIT_N")]
    assert split and all(c.kernel == "tlx" and c["BLOCK_N"] == 256 for c in split)
    assert all(c["BLOCK_M"] * c["BLOCK_N"] <= 128 * 128 for c in promoted.candidates
               if c not in split)
    assert promoted.chosen in split
    assert {l.meta["FAST_ACCUM"] for l in fake_gpu.launches} == {False}
    call_scaled_mm(4096, 4096, 256)  # use_fast_accum=True
    fast = _tuning.decisions["scaled_mm"]
    assert fast.how == "timed" and fast.key != promoted.key
    assert all(c["FAST_ACCUM"] is True for c in fast.candidates)
    assert not any(c.config.get("SPLIT_N") for c in fast.candidates)
    assert fast.chosen["BLOCK_N"] == 256 and fast.chosen["FAST_ACCUM"] is True
    assert fake_gpu.launches[-1].meta["FAST_ACCUM"] is True
    # The default is use_fast_accum=False, as torch._scaled_mm's: the first call's launch plan.
    ops.scaled_mm(fp8(4096, 256), fp8(4096, 256).T, s(1), s(1), out_dtype=np.float16)
    assert fake_gpu.launches[-1].meta["FAST_ACCUM"] is False
    assert fake_gpu.launches[-1].meta["SPLIT_N"] is True
    # A forced configuration of the other setting is none of the call's candidates.
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "scaled_mm=tlx(BLOCK_N=256, FAST_ACCUM=True)")
    with pytest.raises(ValueError, match="none of this call's configurations"):
        call_scaled_mm(4096, 4096, 256, use_fast_accum=False)


def test_scaled_mm_tma_and_tlx_only_where_tma_can_address_the_operands(fake_gpu):
    call_scaled_mm(256, 256, 40)  # rows of 40 bytes
    assert timed_kernels(fake_gpu) == {"scaled_mm_kernel"}
    assert _tuning.decisions["scaled_mm"].candidates[0].kernel == "tl"
    fake_gpu.timed.clear()
    call_scaled_mm(256, 256, 64)
    assert timed_kernels(fake_gpu) == {"scaled_mm_ws_kernel", "scaled_mm_kernel",
                                       "scaled_mm_tma_kernel"}
    assert _tuning.decisions["scaled_mm"].candidates[0].kernel == "tlx"
    fake_gpu.timed.clear()
    call_scaled_mm(256, 252, 64)  # fp16 rows of C of 504 bytes: no TMA store
    assert timed_kernels(fake_gpu) == {"scaled_mm_kernel", "scaled_mm_tma_kernel"}
    fake_gpu.timed.clear()
    call_scaled_mm(256, 256, 64, kernel="tma")
    assert timed_kernels(fake_gpu) == {"scaled_mm_tma_kernel"}
    fake_gpu.timed.clear()
    call_scaled_mm(256, 256, 64, kernel="tlx")
    assert timed_kernels(fake_gpu) == {"scaled_mm_ws_kernel"}
    with pytest.raises(ValueError, match=r"scaled_mm: kernel='tlx' needs K a multiple of 16"):
        call_scaled_mm(256, 256, 40, kernel="tlx")


def test_scaled_mm_tlx_tiles_fill_the_gpu_and_its_shared_memory(fake_gpu, monkeypatch):
    monkeypatch.setattr(testing, "do_bench", no_timing)
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    call_scaled_mm(4096, 4096, 128)  # 512 tiles of 128x256: one persistent program per SM
    launch = fake_gpu.launches[-1]
    assert launch.name == "scaled_mm_ws_kernel" and launch.grid == (132,)
    assert {k: launch.meta[k] for k in ("BLOCK_N", "NUM_STAGES", "NUM_SMS", "num_warps")} == \
        dict(BLOCK_N=256, NUM_STAGES=4, NUM_SMS=132, num_warps=4)
    call_scaled_mm(256, 512, 128)  # 8 tiles of 128x128: one program each
    launch = fake_gpu.launches[-1]
    assert launch.meta["BLOCK_N"] == 128 and launch.grid == (8,)
    # fp32 C: its chunk buffers are twice as large; a stage fewer.
    ops.scaled_mm(fp8(4096, 128), fp8(4096, 128).T, s(1), s(1), out_dtype=np.float32,
                  use_fast_accum=True)
    assert fake_gpu.launches[-1].meta["NUM_STAGES"] == 3


def test_attention_tlx_only_where_n_ctx_is_a_multiple_of_128(fake_gpu):
    x = h(1, 2, 200, 64)
    ops.attention(x, x, x)
    assert timed_kernels(fake_gpu) == {"attention_fwd_kernel"}
    for c in _tuning.decisions["attention"].candidates:
        assert c["BLOCK_M"] % c["BLOCK_N"] == 0
    fake_gpu.timed.clear()
    x = h(1, 2, 256, 64)
    ops.attention(x, x, x)
    assert timed_kernels(fake_gpu) == {"attention_fwd_kernel", "attention_ws_kernel"}
    assert _tuning.decisions["attention"].candidates[0].kernel == "tlx"
    fake_gpu.timed.clear()
    x = h(1, 2, 256, 32)  # HEAD_DIM 32: the tl kernel only
    ops.attention(x, x, x)
    assert timed_kernels(fake_gpu) == {"attention_fwd_kernel"}


def test_attention_backward_tunes_both_kernels_apart(fake_gpu):
    fake_gpu.cost = lambda x: 0.2 if x.meta.get("BLOCK_N") == 32 or (
        x.name == "attention_bwd_dkdv_kernel" and x.meta["BLOCK_M"] == 32
        and x.meta["num_warps"] == 4) else 1.0
    x = h(1, 2, 256, 64)
    lse = s(1, 2, 256)
    ops.attention_bwd(x, x, x, x, x, lse)
    # On sm_90 at HEAD_DIM 64, N_CTX 256 the TLX backward competes with the tl pair, which is
    # tuned first (each of its kernels apart) and timed as one candidate with its preprocess.
    assert timed_kernels(fake_gpu) == {
        "attention_bwd_dkdv_kernel", "attention_bwd_dq_kernel",
        "attention_bwd_preprocess_kernel", "attention_bwd_ws_preprocess_kernel",
        "attention_bwd_ws_kernel", "attention_bwd_ws_postprocess_kernel"}
    decision = _tuning.decisions["attention_bwd_kernel"]
    # The TLX kernel's configurations first: untimed (tuning off) it is the one launched.
    default = _attention._BWD_TLX_DEFAULTS[64]
    tlx_configs = [default] + [c for c in _attention._BWD_TLX_CONFIGS if c != default]
    assert [c.kernel for c in decision.candidates] == ["tlx"] * len(tlx_configs) + ["tl"]
    assert [c.config for c in decision.candidates[:-1]] == tlx_configs
    assert decision.chosen.kernel == "tl"  # 1 + 0.2 + 0.2 against three launches at 1
    assert fake_gpu.final().name == "attention_bwd_dq_kernel"
    dkdv = fake_gpu.final("attention_bwd_dkdv_kernel").meta
    dq = fake_gpu.final("attention_bwd_dq_kernel").meta
    assert (dkdv["BLOCK_M"], dkdv["BLOCK_N"], dkdv["num_warps"]) == (32, 64, 4)
    assert dq["BLOCK_N"] == 32
    assert _tuning.decisions["attention_bwd_dkdv"].how == "timed"
    # Where the TLX kernel is faster it is chosen, and launched with its pre- and postprocess.
    fake_gpu.cost = lambda x: 0.1 if x.name.startswith("attention_bwd_ws") else 1.0
    fake_gpu.launches.clear()
    ops.attention_bwd(x, x, x, x, x, lse, causal=True)
    assert _tuning.decisions["attention_bwd_kernel"].chosen.kernel == "tlx"
    assert [x.name for x in fake_gpu.launches[-3:]] == [
        "attention_bwd_ws_preprocess_kernel", "attention_bwd_ws_kernel",
        "attention_bwd_ws_postprocess_kernel"]
    assert fake_gpu.final("attention_bwd_ws_kernel").grid == (2, 2)
    # HEAD_DIM 256: the candidates that fit its registers.
    x = h(1, 1, 128, 256)
    ops.attention_bwd(x, x, x, x, x, s(1, 1, 128))
    assert [c.config for c in _tuning.decisions["attention_bwd_dkdv"].candidates] == [
        dict(BLOCK_M=64, BLOCK_N=64, num_warps=8), dict(BLOCK_M=32, BLOCK_N=64, num_warps=8)]


# ------------------------------------------------------------------------------------------------
# Tuning off, forced configurations, the interpreter
# ------------------------------------------------------------------------------------------------

# Today's fixed GPU configurations (on a 132-SM sm_90 GPU), which WARPWEAVE_OPS_TUNING=0 keeps.
FIXED = {
    "matmul": ("gemm_ws_kernel", dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16,
                                      NUM_STAGES=4, SMEM_EPILOGUE=True, EPI_SUBTILE=4)),
    # At most half as many 128x256 tiles as SMs: 128x128 ones.
    "matmul_small": ("gemm_ws_kernel", dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=16,
                                            NUM_STAGES=5, SMEM_EPILOGUE=True, EPI_SUBTILE=2)),
    # At most half as many 128x128 tiles as SMs too: 128x64 ones.
    "matmul_narrow": ("gemm_ws_kernel", dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, GROUP_M=16,
                                             NUM_STAGES=8, SMEM_EPILOGUE=True, EPI_SUBTILE=1)),
    "matmul_relu": ("matmul_kernel", dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, GROUP_M=8,
                                          num_warps=8, num_stages=5)),
    "scaled_mm_big": ("scaled_mm_ws_kernel", dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128,
                                                  GROUP_M=16, NUM_STAGES=4, EPI_SUBTILE=8)),
    "scaled_mm_small": ("scaled_mm_ws_kernel", dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128,
                                                    GROUP_M=16, NUM_STAGES=6, EPI_SUBTILE=4)),
    "scaled_mm_tl_big": ("scaled_mm_kernel", dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=128,
                                                  GROUP_M=8, num_warps=8, num_stages=4)),
    "scaled_mm_tl_small": ("scaled_mm_kernel", dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=128,
                                                    GROUP_M=8, num_warps=8, num_stages=4)),
    # use_fast_accum=False (the default): 128x128 tiles at any size (a partial accumulator
    # beside the fp32 one).
    "scaled_mm_promoted_big": ("scaled_mm_ws_kernel", dict(
        BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=16, NUM_STAGES=6, EPI_SUBTILE=4,
        FAST_ACCUM=False)),
    "scaled_mm_promoted_tl_big": ("scaled_mm_kernel", dict(
        BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8, num_warps=8, num_stages=4,
        FAST_ACCUM=False)),
    "grouped_mm": ("grouped_mm_ws_kernel", dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
                                                GROUP_M=16, NUM_STAGES=4, EPI_SUBTILE=4,
                                                NUM_SMS=132, num_warps=4)),
    "grouped_mm_tl": ("grouped_mm_kernel", dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=32,
                                                num_warps=8, num_stages=5)),
    "grouped_mm_ragged_k": ("grouped_mm_ragged_k_kernel", dict(
        BLOCK_M=128, BLOCK_N=256, BLOCK_K=32, num_warps=8, num_stages=5)),
    "grouped_mm_ragged_k_tlx": ("grouped_mm_ragged_k_ws_kernel", dict(
        BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_STAGES=4, EPI_SUBTILE=4,
        NUM_SMS=132, A_MMAJOR=True, num_warps=4)),
    "attention_tlx": ("attention_ws_kernel", dict(BLOCK_M=64, BLOCK_N=128, NUM_STAGES=2)),
    "attention_tl": ("attention_fwd_kernel", dict(BLOCK_M=128, BLOCK_N=64, num_warps=8,
                                                  num_stages=4)),
    "attention_bwd_dkdv": ("attention_bwd_dkdv_kernel", dict(BLOCK_M=64, BLOCK_N=64,
                                                             num_warps=4)),
    "attention_bwd_dq": ("attention_bwd_dq_kernel", dict(BLOCK_M=64, BLOCK_N=64,
                                                         num_warps=8)),
    "attention_varlen": ("attention_varlen_fwd_kernel", dict(BLOCK_M=128, BLOCK_N=32,
                                                             num_warps=8, num_stages=3)),
    "attention_varlen_bwd_dkdv": ("attention_varlen_bwd_dkdv_kernel", dict(
        BLOCK_M=64, BLOCK_N=64, num_warps=4)),
    "attention_varlen_bwd_dq": ("attention_varlen_bwd_dq_kernel", dict(
        BLOCK_M=64, BLOCK_N=64, num_warps=4)),
}


def varlen_args(total=300, heads=2, head_dim=64):
    cu = np.array([0, 100, 300], np.int32)
    x = h(total, heads, head_dim)
    return x, cu


def call_every_op(gpu):
    """One call of each tuned op; returns {FIXED name: the launch it made}."""
    def last(name):
        return gpu.final(name)

    out = {}
    launches = gpu.launches
    ops.matmul(h(2048, 64), h(64, 4096))  # 256 tiles of 128x256: more than the SMs
    out["matmul"] = launches[-1]
    ops.matmul(h(512, 64), h(64, 4096))  # 64 tiles of 128x256, 128 of 128x128
    out["matmul_small"] = launches[-1]
    ops.matmul(h(256, 256), h(256, 256))
    out["matmul_narrow"] = launches[-1]
    ops.matmul(h(256, 256), h(256, 256), activation="relu")
    out["matmul_relu"] = launches[-1]
    call_scaled_mm(4096, 4096, 128)  # 512 tiles of 128x256: more than the SMs
    out["scaled_mm_big"] = launches[-1]
    call_scaled_mm(256, 256, 128)
    out["scaled_mm_small"] = launches[-1]
    call_scaled_mm(4096, 4096, 120)  # K not a multiple of 16: the tl kernel
    out["scaled_mm_tl_big"] = launches[-1]
    call_scaled_mm(256, 256, 120)
    out["scaled_mm_tl_small"] = launches[-1]
    call_scaled_mm(4096, 4096, 128, use_fast_accum=False)
    out["scaled_mm_promoted_big"] = launches[-1]
    call_scaled_mm(4096, 4096, 120, use_fast_accum=False)
    out["scaled_mm_promoted_tl_big"] = launches[-1]
    offs = np.array([50, 100, 250, 300], np.int32)
    ops.grouped_mm(h(300, 64), h(4, 64, 128), offs)
    out["grouped_mm"] = launches[-1]
    ops.grouped_mm(h(300, 48), h(4, 48, 128), offs)  # K not a multiple of 64: the tl kernel
    out["grouped_mm_tl"] = launches[-1]
    ops.grouped_mm(h(64, 300), h(300, 128), offs)  # a's rows 600 bytes apart: the tl kernel
    out["grouped_mm_ragged_k"] = launches[-1]
    ops.grouped_mm(h(300, 64).T, h(300, 128), offs)  # the weight gradient's x.t()
    out["grouped_mm_ragged_k_tlx"] = launches[-1]
    x = h(1, 2, 256, 64)
    ops.attention(x, x, x)
    out["attention_tlx"] = launches[-1]
    x = h(1, 2, 200, 64)
    ops.attention(x, x, x)
    out["attention_tl"] = launches[-1]
    ops.attention_bwd(x, x, x, x, x, s(1, 2, 200))
    out["attention_bwd_dkdv"] = last("attention_bwd_dkdv_kernel")
    x128 = h(1, 2, 200, 128)
    ops.attention_bwd(x128, x128, x128, x128, x128, s(1, 2, 200))
    out["attention_bwd_dq"] = last("attention_bwd_dq_kernel")
    q, cu = varlen_args(head_dim=256)
    ops.attention_varlen(q, q, q, cu, cu, 200, 200)
    out["attention_varlen"] = launches[-1]
    q, cu = varlen_args()
    ops.attention_varlen_bwd(q, q, q, q, q, s(2, 300), cu, cu, 200, 200)
    out["attention_varlen_bwd_dkdv"] = last("attention_varlen_bwd_dkdv_kernel")
    out["attention_varlen_bwd_dq"] = last("attention_varlen_bwd_dq_kernel")
    return out


def test_tuning_off_launches_todays_fixed_configurations(fake_gpu, monkeypatch):
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    monkeypatch.setattr(testing, "do_bench", no_timing)
    launched = call_every_op(fake_gpu)
    for name, (kernel, config) in FIXED.items():
        assert launched[name].name == kernel, name
        assert {k: launched[name].meta[k] for k in config} == config, name
    assert {d.how for d in _tuning.decisions.values()} == {"fixed"}
    # The knob says the same.
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    ww.knobs.ops.tuning = False
    try:
        assert call_every_op(fake_gpu)["matmul"].meta["BLOCK_N"] == 256
    finally:
        ww.knobs.ops.tuning = None
    assert ww.knobs.ops.tuning is False  # reset: the default, off


def test_forced_configurations(fake_gpu, monkeypatch):
    monkeypatch.setattr(testing, "do_bench", no_timing)
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "matmul=tl(BLOCK_K=64, num_stages=3);"
                       "scaled_mm=tma(BLOCK_M=256); attention=tlx(BLOCK_N=64, NUM_STAGES=3)")
    ops.matmul(h(256, 256), h(256, 256))
    assert fake_gpu.launches[-1].name == "matmul_kernel"
    assert fake_gpu.launches[-1].meta["BLOCK_N"] == 256
    call_scaled_mm(512, 512, 128)
    assert fake_gpu.launches[-1].name == "scaled_mm_tma_kernel"
    assert fake_gpu.launches[-1].meta["BLOCK_M"] == 256
    x = h(1, 2, 256, 64)
    ops.attention(x, x, x)
    assert fake_gpu.launches[-1].meta == dict(HEAD_DIM=64, CAUSAL=False, num_warps=4,
                                              BLOCK_M=64, BLOCK_N=64, NUM_STAGES=3)
    assert _tuning.decisions["attention"].how == "forced"
    # A candidate's printed form forces it; "default" the fixed one.
    for c in _tuning.decisions["matmul"].candidates:
        monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", f"matmul={c!r}")
        ops.matmul(h(256, 256), h(256, 256))
        assert _tuning.decisions["matmul"].chosen == c
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "matmul=default")
    ops.matmul(h(256, 256), h(256, 256))
    assert fake_gpu.launches[-1].name == "gemm_ws_kernel"
    # Not a configuration of the call: an error that lists them.
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "matmul=tlx_ws(BLOCK_K=32)")
    with pytest.raises(ValueError, match=r"matmul: WARPWEAVE_OPS_CONFIG asks for "
                                         r"'tlx_ws\(BLOCK_K=32\)'.*tlx_pingpong\("):
        ops.matmul(h(256, 256), h(256, 256))
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "matmul=tlx_ws")
    with pytest.raises(ValueError, match="none of this call's configurations"):
        ops.matmul(h(256, 256), h(256, 256), activation="relu")


def test_interpreter_calls_never_tune(monkeypatch, tmp_path, rng):
    monkeypatch.setenv("WARPWEAVE_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    monkeypatch.setattr(testing, "do_bench", no_timing)
    monkeypatch.setattr(_tuning, "decisions", {})
    a = rng.standard_normal((40, 24)).astype(np.float16)
    b = rng.standard_normal((24, 56)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    # NumPy arrays: the interpreter and its small blocks, no tuning.
    np.testing.assert_allclose(ops.matmul(a, b), ref, rtol=2e-2, atol=2e-2)
    assert "matmul" not in _tuning.decisions
    # GPU placement faked over NumPy arrays (the GPU configurations in the interpreter): no
    # timing either, the fixed configuration.
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    # (A real process cannot move one signature's arrays to the GPU: the interpreter call's
    # launch plan would answer this one.)
    _common._launch_plans.clear()
    np.testing.assert_allclose(ops.matmul(a, b), ref, rtol=2e-2, atol=2e-2)
    assert _tuning.decisions["matmul"].how == "fixed"
    assert not (tmp_path / "autotune").exists()


def test_interpreter_env_with_torch_cpu_tensors_never_tunes(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("WARPWEAVE_INTERPRET", "1")
    monkeypatch.setattr(testing, "do_bench", no_timing)
    monkeypatch.setattr(_tuning, "decisions", {})
    a, b = torch.randn(20, 16, dtype=torch.float16), torch.randn(16, 24, dtype=torch.float16)
    torch.testing.assert_close(ops.matmul(a, b).float(), a.float() @ b.float(), atol=2e-2,
                               rtol=2e-2)
    assert _tuning.decisions == {}


# ------------------------------------------------------------------------------------------------
# Launch plans and graph capture
# ------------------------------------------------------------------------------------------------


def test_a_launch_plan_replays_the_tuned_choice(fake_gpu, monkeypatch):
    fake_gpu.cost = lambda x: 0.1 if x.meta.get("BLOCK_K") == 64 else 1.0
    call_scaled_mm(512, 512, 256)
    chosen = _tuning.decisions["scaled_mm"].chosen
    assert chosen["BLOCK_K"] == 64
    plans = [p for key, p in _common._launch_plans.items() if key[0] == "_scaled_mm"]
    assert len(plans) == 1 and len(plans[0].launches) == 1  # the timing runs are not in it
    assert plans[0].launches[0].meta["BLOCK_K"] == 64
    # The next call with that signature replays it: one launch, nothing timed or chosen.
    monkeypatch.setattr(testing, "do_bench", no_timing)
    monkeypatch.setattr(_tuning, "choose", no_timing)
    before = len(fake_gpu.launches)
    call_scaled_mm(512, 512, 256)
    assert len(fake_gpu.launches) == before + 1
    assert fake_gpu.launches[-1].meta["BLOCK_K"] == 64


def test_plans_are_keyed_by_the_tuning_settings(fake_gpu, monkeypatch):
    fake_gpu.cost = lambda x: 0.1 if x.meta.get("BLOCK_K") == 64 else 1.0
    call_scaled_mm(512, 512, 256)
    assert fake_gpu.launches[-1].meta["BLOCK_K"] == 64
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    call_scaled_mm(512, 512, 256)
    assert fake_gpu.launches[-1].meta["BLOCK_K"] == 128  # the fixed one, not the plan
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "scaled_mm=tl(BLOCK_M=256)")
    call_scaled_mm(512, 512, 256)
    assert fake_gpu.launches[-1].meta["BLOCK_M"] == 256


def test_no_timing_inside_a_graph_capture(fake_gpu, monkeypatch):
    monkeypatch.setattr(_tuning, "_capturing", lambda: True)
    monkeypatch.setattr(testing, "do_bench", no_timing)
    call_scaled_mm(512, 512, 256)
    assert _tuning.decisions["scaled_mm"].how == "provisional"
    assert fake_gpu.launches[-1].meta["BLOCK_K"] == 128
    assert not [key for key in _common._launch_plans if key[0] == "_scaled_mm"]
    assert not _tuning._chosen
    # Once a result is stored, a capture uses it.
    monkeypatch.setattr(_tuning, "_capturing", lambda: False)
    monkeypatch.setattr(testing, "do_bench", lambda fn, quantiles=None, **kw: (
        fn(), [0.1 if fake_gpu.launches[-1].meta["BLOCK_M"] == 256 else 1.0] * 3)[1])
    call_scaled_mm(512, 512, 256)
    monkeypatch.setattr(_tuning, "_capturing", lambda: True)
    fresh_process(monkeypatch)
    call_scaled_mm(512, 512, 256)
    assert _tuning.decisions["scaled_mm"].how == "disk"
    assert fake_gpu.launches[-1].meta["BLOCK_M"] == 256


# ------------------------------------------------------------------------------------------------
# Every candidate computes the right result (the interpreter runs the GPU configurations)
# ------------------------------------------------------------------------------------------------


@pytest.fixture
def gpu_configs_in_interpreter(monkeypatch):
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    monkeypatch.setattr(_common._Place, "num_sms", lambda self: 132)
    monkeypatch.setattr(_common, "_is_sm90", lambda place: True)
    monkeypatch.setattr(testing, "do_bench", no_timing)
    monkeypatch.setattr(_tuning, "decisions", {})
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")


def each_candidate(monkeypatch, op, call):
    """Calls call() once per candidate of `op` (forced); yields (candidate, result)."""
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", f"{op}=default")
    call()
    for c in _tuning.decisions[op].candidates:
        monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", f"{op}={c!r}")
        yield c, call()


def rel_error(out, ref):
    out = np.asarray(out, np.float64)
    assert np.isfinite(out).all()
    return np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30)


def test_every_matmul_candidate_computes_the_product(gpu_configs_in_interpreter, monkeypatch,
                                                     rng):
    a = rng.standard_normal((72, 136)).astype(np.float16)
    b = rng.standard_normal((136, 264)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    seen = set()
    for c, out in each_candidate(monkeypatch, "matmul", lambda: ops.matmul(a, b)):
        assert rel_error(out, ref) < 2e-3, c
        seen.add(c.kernel)
    assert seen == {"tl", "tlx_ws", "tlx_pingpong", "tlx_pipelined"}


def test_every_scaled_mm_candidate_computes_the_product(gpu_configs_in_interpreter,
                                                        monkeypatch, rng):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = rng.standard_normal((40, 64)).astype(ml_dtypes.float8_e4m3fn)
    bt = rng.standard_normal((48, 64)).astype(ml_dtypes.float8_e4m3fn)
    sa, sb = rng.random((40, 1), np.float32) + 0.5, np.float32([0.5])
    ref = (a.astype(np.float64) @ bt.astype(np.float64).T) * sa * sb
    seen = set()
    for c, out in each_candidate(monkeypatch, "scaled_mm", lambda: ops.scaled_mm(
            a, bt.T, sa, sb, out_dtype=np.float32)):
        assert rel_error(out, ref) < 1e-6, c
        seen.add(c.kernel)
    assert seen == {"tl", "tma", "tlx"}


def test_every_grouped_mm_candidate_computes_the_groups(gpu_configs_in_interpreter,
                                                        monkeypatch, rng):
    # K = 64: the TLX kernel's candidates too (at their GPU tiles).
    a = rng.standard_normal((150, 64)).astype(np.float16)
    b = rng.standard_normal((3, 64, 40)).astype(np.float16)
    offs = np.array([20, 20, 140], np.int32)
    ref = np.zeros((150, 40))
    for g, (lo, hi) in enumerate([(0, 20), (20, 20), (20, 140)]):
        ref[lo:hi] = a[lo:hi].astype(np.float64) @ b[g].astype(np.float64)
    seen = set()
    for c, out in each_candidate(monkeypatch, "grouped_mm", lambda: ops.grouped_mm(a, b, offs)):
        assert rel_error(out, ref) < 2e-3, c
        seen.add(c.kernel)
    assert seen == {"tl", "tlx_ws"}
    # Ragged K with a = x.t() (the weight gradient): the TLX kernel's candidates too, groups
    # ending inside their 64-deep K steps.
    bk = rng.standard_normal((150, 40)).astype(np.float16)
    at = rng.standard_normal((150, 24)).astype(np.float16).T
    refk = np.stack([at[:, lo:hi].astype(np.float64) @ bk[lo:hi].astype(np.float64)
                     for lo, hi in [(0, 20), (20, 20), (20, 140)]])
    # And a with contiguous rows (152 apart: TMA's 16-byte pitch): the third group starts at
    # column 20, not a multiple of 8; the TLX kernel's boxes start at column 16 and the first
    # group's 4 columns they read are zeroed.
    ak = np.zeros((24, 152), np.float16)
    ak[:, :150] = at
    for a in (at, ak[:, :150]):
        seen = set()
        for c, out in each_candidate(monkeypatch, "grouped_mm_ragged_k",
                                     lambda: ops.grouped_mm(a, bk, offs)):
            assert rel_error(out, refk) < 2e-3, c
            seen.add(c.kernel)
        assert seen == {"tl", "tlx_ws"}


def attention_ref(q, k, v, causal, sm_scale):
    s_ = np.einsum("zhmd,zhnd->zhmn", q.astype(np.float64), k.astype(np.float64)) * sm_scale
    if causal:
        n = s_.shape[-1]
        s_ = np.where(np.tril(np.ones((n, n), bool)), s_, -np.inf)
    p = np.exp(s_ - s_.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("zhmn,zhnd->zhmd", p, v.astype(np.float64)), p, s_


@pytest.mark.parametrize("causal", [False, True])
def test_every_attention_candidate_computes_attention(gpu_configs_in_interpreter, monkeypatch,
                                                      rng, causal):
    q, k, v = (rng.standard_normal((1, 1, 256, 64)).astype(np.float16) for _ in range(3))
    ref = attention_ref(q, k, v, causal, 0.125)[0]
    seen = set()
    for c, out in each_candidate(monkeypatch, "attention",
                                 lambda: ops.attention(q, k, v, causal=causal)):
        assert rel_error(out, ref) < 2e-3, c
        seen.add(c.kernel)
    assert seen == {"tl", "tlx"}


@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_attention_backward_candidate_computes_the_gradients(
        gpu_configs_in_interpreter, monkeypatch, rng, head_dim):
    shape = (1, 1, 150, head_dim)
    q, k, v, do = (rng.standard_normal(shape).astype(np.float16) for _ in range(4))
    sm_scale = 1 / math.sqrt(head_dim)
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "")
    out, lse = ops.attention(q, k, v, causal=True, return_lse=True)
    ref = None
    for op in ("attention_bwd_dkdv", "attention_bwd_dq"):
        for c, grads in each_candidate(monkeypatch, op, lambda: ops.attention_bwd(
                do, q, k, v, out, lse, causal=True)):
            if ref is None:
                ref = attention_bwd_ref(q, k, v, do, sm_scale)
            for got, want, name in zip(grads, ref, ("dq", "dk", "dv")):
                assert rel_error(got, want) < 1e-2, (c, name)


def attention_bwd_ref(q, k, v, do, sm_scale):
    _, p, _ = attention_ref(q, k, v, True, sm_scale)
    q64, k64, v64, do64 = (t.astype(np.float64) for t in (q, k, v, do))
    dv = np.einsum("zhmn,zhmd->zhnd", p, do64)
    dp = np.einsum("zhmd,zhnd->zhmn", do64, v64)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
    dq = np.einsum("zhmn,zhnd->zhmd", ds, k64) * sm_scale
    dk = np.einsum("zhmn,zhmd->zhnd", ds, q64) * sm_scale
    return dq, dk, dv


def test_every_varlen_candidate_matches_the_fixed_configuration(gpu_configs_in_interpreter,
                                                                monkeypatch, rng):
    cu = np.array([0, 70, 70, 200], np.int32)
    q = rng.standard_normal((200, 2, 64)).astype(np.float16)
    kv = rng.standard_normal((200, 1, 64)).astype(np.float16)
    do = rng.standard_normal((200, 2, 64)).astype(np.float16)
    monkeypatch.setenv("WARPWEAVE_OPS_CONFIG", "attention_varlen=default")
    out, lse = ops.attention_varlen(q, kv, kv, cu, cu, 130, 130, True, return_lse=True)
    grads = ops.attention_varlen_bwd(do, q, kv, kv, out, lse, cu, cu, 130, 130, True)
    for c, got in each_candidate(monkeypatch, "attention_varlen", lambda: ops.attention_varlen(
            q, kv, kv, cu, cu, 130, 130, True)):
        assert rel_error(got, out.astype(np.float64)) < 2e-3, c
    for op in ("attention_varlen_bwd_dkdv", "attention_varlen_bwd_dq"):
        for c, got in each_candidate(monkeypatch, op, lambda: ops.attention_varlen_bwd(
                do, q, kv, kv, out, lse, cu, cu, 130, 130, True)):
            for g, want in zip(got, grads):
                assert rel_error(g, want.astype(np.float64)) < 1e-2, c


# ------------------------------------------------------------------------------------------------
# One argument check for dense and packed attention
# ------------------------------------------------------------------------------------------------


def test_dense_and_varlen_attention_share_one_argument_check():
    x = h(1, 1, 16, 16)
    with pytest.raises(ValueError, match="attention: 'sm_scale' must be a finite number, got "
                                         "True"):
        ops.attention(x, x, x, sm_scale=True)
    q, cu = varlen_args(head_dim=16)
    with pytest.raises(ValueError, match="attention_varlen: 'sm_scale' must be a finite "
                                         "number, got True"):
        ops.attention_varlen(q, q, q, cu, cu, 200, 200, sm_scale=True)
    with pytest.raises(ValueError, match="attention_varlen: 'q' has HEAD_DIM 24; the kernel "
                                         "takes 16, 32, 64, 128 or 256"):
        ops.attention_varlen(h(300, 2, 24), h(300, 2, 24), h(300, 2, 24), cu, cu, 200, 200)
    assert not hasattr(_attention, "_check_varlen_args")


# ------------------------------------------------------------------------------------------------
# Every candidate compiles for sm_90a (codegen + ptxas) within the shared memory, without spills
# ------------------------------------------------------------------------------------------------


def _varlen(head_dim, backward):
    q, cu = varlen_args(head_dim=head_dim)
    if backward:
        return lambda: ops.attention_varlen_bwd(q, q, q, q, q, s(2, 300), cu, cu, 200, 200)
    return lambda: ops.attention_varlen(q, q, q, cu, cu, 200, 200)


def _dense(head_dim, backward, n_ctx=1024):
    x = h(1, 2, n_ctx, head_dim)
    if backward:
        # The tl pair's candidates (on sm_90 the TLX backward is launched where it applies).
        return lambda: ops.attention_bwd(x, x, x, x, x, s(1, 2, n_ctx), kernel="tl")
    return lambda: ops.attention(x, x, x)


COMPILED_CALLS = {
    "matmul": ("matmul", lambda: ops.matmul(h(512, 512), h(512, 512))),
    "scaled_mm": ("scaled_mm", lambda: call_scaled_mm(512, 512, 512)),
    # The TLX kernel's epilogue vectors (per-row / per-column scales, bias) need scratch too.
    "scaled_mm-rowwise-bias": ("scaled_mm", lambda: ops.scaled_mm(
        fp8(4096, 512), fp8(4096, 512).T, s(4096, 1), s(1, 4096), out_dtype=np.float16,
        bias=h(4096))),
    "grouped_mm": ("grouped_mm", lambda: ops.grouped_mm(
        h(512, 256), h(4, 256, 512), np.array([1, 2, 3, 512], np.int32))),
    "grouped_mm_ragged_k": ("grouped_mm_ragged_k", lambda: ops.grouped_mm(
        h(256, 512), h(512, 256), np.array([1, 2, 3, 512], np.int32))),
    "grouped_mm_ragged_k-xt": ("grouped_mm_ragged_k", lambda: ops.grouped_mm(
        h(512, 256).T, h(512, 256), np.array([1, 2, 3, 512], np.int32))),
    **{f"attention-d{d}": ("attention", _dense(d, False)) for d in (64, 128)},
    "attention-d256": ("attention", _dense(256, False, 1000)),
    **{f"attention_bwd_{k}-d{d}": (f"attention_bwd_{k}", _dense(d, True))
       for d in (64, 128, 256) for k in ("dkdv", "dq")},
    "attention_varlen-d256": ("attention_varlen", _varlen(256, False)),
    **{f"attention_varlen_bwd_{k}-d256": (f"attention_varlen_bwd_{k}", _varlen(256, True))
       for k in ("dkdv", "dq")},
}

_OP_KERNELS = {"attention_bwd_dkdv": "attention_bwd_dkdv_kernel",
               "attention_bwd_dq": "attention_bwd_dq_kernel",
               "attention_varlen_bwd_dkdv": "attention_varlen_bwd_dkdv_kernel",
               "attention_varlen_bwd_dq": "attention_varlen_bwd_dq_kernel"}


@pytest.mark.parametrize("name", list(COMPILED_CALLS))
def test_every_candidate_compiles_for_sm90a(monkeypatch, requires_ptxas, sm90_compiles, name):
    op, call = COMPILED_CALLS[name]
    compiled = sm90_compiles
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "1")
    for c, _ in each_candidate(monkeypatch, op, lambda: compiled.clear() or call()):
        kernel = [k for k in compiled if k.fn.__name__ == _OP_KERNELS.get(op, k.fn.__name__)][-1]
        print(f"{op} {c!r}: {kernel.n_regs} registers, {kernel.n_spills} spill bytes, "
              f"{kernel.shared} B shared")
        assert kernel.shared <= _tuning._TARGET_SHARED["sm_90a"], c
        if c != _tuning.decisions[op].candidates[0]:
            assert kernel.n_spills == 0, c  # (the fixed HEAD_DIM 256 ones spill, as today)


def test_a_routing_switch_flipped_between_calls_is_followed(fake_gpu, monkeypatch):
    # The op modules' routing switches are part of a launch plan's key: the second call of the
    # same signature replays the first's plan, the third, with the switch flipped, takes the full
    # path and its routing, and flipping it back replays the first plan again.
    monkeypatch.setenv("WARPWEAVE_OPS_TUNING", "0")
    a, b = h(256, 256), h(256, 256)
    launched = []
    for on in (True, True, False, True):
        monkeypatch.setattr(_matmul, "MATMUL_TLX_ON_SM90", on)
        ops.matmul(a, b)
        launched.append(fake_gpu.launches[-1].name)
    assert launched == ["gemm_ws_kernel", "gemm_ws_kernel", "matmul_kernel", "gemm_ws_kernel"]
    assert sum(key[0] == "matmul" for key in _common._launch_plans) == 2
