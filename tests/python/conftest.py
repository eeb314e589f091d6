"""Test set-up: use the installed warpweave (with its C++ extension) when there is one; else the
source tree, whose pure-Python parts are tested on their own and whose native tests skip."""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

try:
    import warpweave  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))

# tools/cuda_stub: the stand-in CUDA driver and torch tensors (StandInTensor) that the tests of the
# launch paths share with the host-cost tools.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools", "cuda_stub"))


@pytest.fixture
def rng():
    """A NumPy generator with a fresh seed, printed so a failing run can be replayed."""
    import numpy as np

    seed = int.from_bytes(os.urandom(4), "little")
    print(f"random seed {seed}")
    return np.random.default_rng(seed)


# ---- ptxas: one helper for every test that assembles PTX ----

NO_PTXAS = ("no ptxas (CUDA toolkit) to assemble the PTX: set WARPWEAVE_PTXAS or CUDA_HOME, or put "
            "ptxas on PATH")


def find_ptxas():
    """The ptxas warpweave's own compiles run (src/runtime/Ptxas.cpp looks in the same places, in
    this order): $WARPWEAVE_PTXAS, $CUDA_HOME/bin, $CUDA_PATH/bin, /usr/local/cuda/bin, then PATH;
    None when there is none."""
    candidates = [os.environ.get("WARPWEAVE_PTXAS")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "ptxas"))
    candidates += ["/usr/local/cuda/bin/ptxas", shutil.which("ptxas")]
    return next((p for p in candidates if p and os.path.isfile(p) and os.access(p, os.X_OK)), None)


class PtxasRun:
    """What one ptxas run gave: its exit status, its log (stdout and stderr), the object file."""

    def __init__(self, returncode, log, output):
        self.returncode = returncode
        self.log = log
        self.output = output

    @property
    def registers(self):
        """Registers per thread of the (last) kernel in the -v log."""
        return int(re.findall(r"Used (\d+) registers", self.log)[-1])

    @property
    def spill_bytes(self):
        """Spill stores plus spill loads in the -v log."""
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", self.log)
        return int(m.group(1)) + int(m.group(2))


class Ptxas:
    """Runs ptxas on PTX text: ptxas(ptx, arch="sm_90a", verbose=False) assembles it in a fresh
    folder and fails the test with ptxas's log when ptxas refuses it (check=False returns the
    failed run instead). Where there is no ptxas the call skips the test, saying why, so that the
    test's checks of the PTX text before it still run."""

    def __init__(self, path, folders):
        self.path = path
        self._folders = folders

    def __call__(self, ptx, arch="sm_90a", verbose=False, check=True, timeout=600):
        if self.path is None:
            pytest.skip(NO_PTXAS)
        folder = str(self._folders.mktemp("ptxas"))
        src = os.path.join(folder, "k.ptx")
        out = os.path.join(folder, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        cmd = [self.path, "--gpu-name", arch] + (["-v"] if verbose else []) + ["-o", out, src]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        run = PtxasRun(r.returncode, r.stdout + r.stderr, out)
        if check:
            assert r.returncode == 0, f"ptxas --gpu-name {arch} refused the PTX:\n{run.log}"
        return run


@pytest.fixture
def ptxas(tmp_path_factory):
    """A Ptxas runner for the test (it skips the test when it is called without a ptxas)."""
    return Ptxas(find_ptxas(), tmp_path_factory)


@pytest.fixture
def requires_ptxas():
    """Skips the test, saying why, where there is no ptxas: for tests whose compiles run it
    themselves (a cubin, wwc --emit cubin); mark a whole module with
    pytestmark = pytest.mark.usefixtures("requires_ptxas")."""
    path = find_ptxas()
    if path is None:
        pytest.skip(NO_PTXAS)
    return path


def find_cuobjdump():
    """cuobjdump on PATH, in the CUDA toolkit, or from NVIDIA's wheels (nvidia/cu*/bin), with
    nvdisasm beside it; None where there is none."""
    candidates = [shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"]
    try:
        import nvidia

        for root in nvidia.__path__:
            candidates += sorted(glob.glob(os.path.join(root, "cu*", "bin", "cuobjdump")))
    except ImportError:
        pass
    for tool in candidates:
        if tool and os.path.exists(tool) and (
                shutil.which("nvdisasm") or os.path.exists(os.path.join(os.path.dirname(tool),
                                                                        "nvdisasm"))):
            return tool
    return None


@pytest.fixture
def sass(tmp_path):
    """cubin bytes -> cuobjdump's SASS text; skips the rest of the test where there is no
    cuobjdump (when called, so that the test's checks before it still run)."""

    def disassemble(cubin):
        tool = find_cuobjdump()
        if tool is None:
            pytest.skip("no cuobjdump (CUDA toolkit, or the nvidia-cuda-cuobjdump and "
                        "nvidia-cuda-nvdisasm wheels scripts/lib/setup.sh installs) to "
                        "disassemble the cubin")
        path = tmp_path / "k.cubin"
        path.write_bytes(cubin)
        # cuobjdump runs nvdisasm, which lies beside it.
        env = dict(os.environ, PATH=os.path.dirname(tool) + os.pathsep + os.environ["PATH"])
        return subprocess.run([tool, "--dump-sass", str(path)], capture_output=True, text=True,
                              check=True, timeout=120, env=env).stdout

    return disassemble


class CompiledLaunches:
    """What gpu_compiles records: `kernels`, the compiled kernels in launch order, each compiled
    for `target` (a test may change it, or reset `kernels`, between calls)."""

    def __init__(self, target):
        self.target = target
        self.kernels = []


@pytest.fixture
def gpu_compiles(monkeypatch, requires_ptxas):
    """warpweave.ops wrappers believe they run on a GPU of 132 SMs; each launch compiles (to a
    cubin: codegen and ptxas) for gpu_compiles.target, sm_90a unless the test sets another,
    instead of running."""
    import importlib

    jit_module = importlib.import_module("warpweave.jit")
    from warpweave.ops import _common

    record = CompiledLaunches("sm_90a")

    def compile_instead_of_launch(self, *args, grid, num_warps=None, num_stages=None,
                                  ctas_per_cga=None, num_ctas=None, warmup=False, **kwargs):
        values = self.bind(args, kwargs)
        options = self._options(num_warps, num_stages, ctas_per_cga, num_ctas)
        record.kernels.append(self.compile_for(values, False, options, target=record.target))

    monkeypatch.setattr(jit_module.JITFunction, "run", compile_instead_of_launch)
    monkeypatch.setattr(_common._Place, "on_gpu", property(lambda self: True))
    monkeypatch.setattr(_common._Place, "num_sms", lambda self: 132)
    return record


@pytest.fixture
def sm90_compiles(monkeypatch, gpu_compiles):
    """gpu_compiles on an sm_90 device (the TLX library kernels' routing) with no tuning
    decisions from earlier tests: returns the list of compiled kernels."""
    from warpweave.ops import _common, _tuning

    monkeypatch.setattr(_common, "_is_sm90", lambda place: True)
    monkeypatch.setattr(_tuning, "decisions", {})
    return gpu_compiles.kernels
