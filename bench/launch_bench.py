"""Host-side costs of warpweave beside Triton and PyTorch, in one process where they can share
one (launch overhead, driver floor, disk-cache hit) and in fresh processes where the cost is a
process's first use (import, cold compile, first launch from a warm disk cache).

    python bench/launch_bench.py [--quick] [--json launch.json]

Launch overhead is host time per call of kernel[grid](x, y, out, n, BLOCK=1024) (a 4-argument
vector add) in bursts of 200, short enough that the GPU's launch queue never fills, median over
bursts: each burst either queued behind a busy GPU (torch.cuda._sleep first, so launches only
enqueue: the host's own cost) or started right after a synchronize. The same for Triton's
identical kernel, torch.add, an empty kernel of each, torch.cuda._sleep(0), and the bare driver
call from C++ (cuLaunchKernel and cuLaunchKernelEx without attributes). A steady loop (many
launches, one synchronize, as in bench_kernels.py; bound by the GPU for kernels that do work)
is reported beside them. Needs PyTorch and a CUDA GPU; Triton is optional.

The decomposition table breaks one kernel[(1,)] launch into its pieces, each timed in the same
bursts: (a) C++ loops of the bare driver call in each form (cuLaunchKernel with a pointer per
param, cuLaunchKernelEx, cuLaunchKernel with the packed buffer in `extra`), with a
cuCtxGetCurrent before each, and through GpuKernel::launchPacked; (b) the runtime's launch
called from Python (prepacked, and Kernel.launch with ints); (c) torch's stream and device
queries; (d) the tensor reads; (e) the whole kernel[grid] call in each launch form.
--no-fresh skips the fresh-process measurements.

    python bench/launch_bench.py --stub [--quick] [--json stub.json]

needs neither: the runtime loads the stand-in driver of tools/cuda_stub (WARPWEAVE_LIBCUDA),
whose entry points return at once, and tensors are stand-ins with torch's attributes, so the
table is warpweave's own host cost per launch (ns), with the driver's taken out. With
--instructions it counts instructions per call under valgrind (callgrind) instead: exact, and
unmoved by whatever else the host is running.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WW_KERNELS = '''
import warpweave as ww
import warpweave.language as tl


@ww.jit
def add4(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@ww.jit
def empty(x_ptr):
    pass
'''

TRITON_KERNELS = WW_KERNELS.replace("import warpweave as ww\nimport warpweave.language as tl",
                                    "import triton\nimport triton.language as tl").replace(
                                        "@ww.jit", "@triton.jit")

# One fresh process's first launch: timestamps from the script's first line (after the
# interpreter started) to the kernel having run, printed as JSON.
CHILD = r'''
import time
t = {"start": time.perf_counter()}
import json, sys
which, kernels_dir, block = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, kernels_dir)
import torch
t["torch_imported"] = time.perf_counter()
n = 4096
x = torch.randn(n, device="cuda")
y = torch.randn(n, device="cuda")
out = torch.zeros(n, device="cuda")
out2 = torch.zeros(n, device="cuda")
torch.cuda.synchronize()
t["cuda_ready"] = time.perf_counter()
if which == "warpweave":
    import warpweave
    t["imported"] = time.perf_counter()
    from ww_launch_kernels import add4
else:
    import triton
    t["imported"] = time.perf_counter()
    from triton_launch_kernels import add4
add4[((n + block - 1) // block,)](x, y, out, n, BLOCK=block)
t["launched"] = time.perf_counter()
torch.cuda.synchronize()
t["done"] = time.perf_counter()
# A second specialization in the same process: a compile without any first-use cost. (Checking
# the result first would time the lazy loading of torch's own kernels here.)
add4[((n + 255) // 256,)](x, y, out2, n, BLOCK=256)
torch.cuda.synchronize()
t["second_compile_done"] = time.perf_counter()
assert torch.equal(out, x + y) and torch.equal(out2, x + y), "wrong result"
print(json.dumps(t))
'''


def median(xs):
    return statistics.median(xs)


def run_child(which, kernels_dir, env, block=1024):
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", CHILD, which, kernels_dir, str(block)], env=env,
                       capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - start
    if r.returncode != 0:
        raise RuntimeError(f"{which} child failed:\n{r.stderr[-3000:]}")
    t = json.loads(r.stdout.strip().splitlines()[-1])
    return {
        "wall_s": wall,
        "after_interpreter_start_s": t["done"] - t["start"],
        "import_torch_s": t["torch_imported"] - t["start"],
        "cuda_init_s": t["cuda_ready"] - t["torch_imported"],
        "import_s": t["imported"] - t["cuda_ready"],
        "first_launch_call_s": t["launched"] - t["imported"],
        # What the library adds to a process: its import and the first launch, run to the end.
        "library_to_first_kernel_done_s": t["done"] - t["cuda_ready"],
        "second_specialization_s": t["second_compile_done"] - t["done"],
    }


def time_import(module, runs, env):
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    out = []
    for _ in range(runs):
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError(f"import {module} failed:\n{r.stderr[-2000:]}")
        out.append(float(r.stdout.strip().splitlines()[-1]))
    return median(out)


def process_start_s(runs, env):
    out = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        out.append(time.perf_counter() - t)
    return median(out)


def fresh_process_costs(kernels_dir, have_triton, runs):
    """Import time, cold compile (empty caches) and first launch from a warm disk cache, each
    in new processes, medians over `runs`."""
    base_env = dict(os.environ)
    base_env.pop("WARPWEAVE_CACHE_DISABLE", None)
    res = {"python_start_s": process_start_s(runs, base_env)}
    libs = ["warpweave"] + (["triton"] if have_triton else [])
    for lib in libs:
        res[f"import_{lib}_s"] = time_import(lib, runs, base_env)
    for lib in libs:
        cold, cached = [], []
        for _ in range(runs):
            with tempfile.TemporaryDirectory() as cache:
                env = dict(base_env, WARPWEAVE_CACHE_DIR=cache, TRITON_CACHE_DIR=cache)
                cold.append(run_child(lib, kernels_dir, env))  # empty cache: a cold compile
                cached.append(run_child(lib, kernels_dir, env))  # the cache it just filled
        res[f"cold_{lib}"] = {k: median([c[k] for c in cold]) for k in cold[0]}
        res[f"cached_{lib}"] = {k: median([c[k] for c in cached]) for k in cached[0]}
    return res


def launch_overheads(torch, ww, ww_mod, tr_mod, quick):
    n = 1024
    x = torch.randn(n, device="cuda")
    y = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    add4, empty = ww_mod.add4, ww_mod.empty
    grid_fn = lambda meta: (ww.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    cases = {
        "python_lambda_floor": lambda: None,
        "warpweave_kernel_grid_tuple": lambda: add4[(1,)](x, y, out, n, BLOCK=1024),
        "warpweave_kernel_grid_fn": lambda: add4[grid_fn](x, y, out, n, BLOCK=1024),
        "warpweave_empty_kernel": lambda: empty[(1,)](x),
        "torch_add": lambda: torch.add(x, y, out=out),
        "torch_cuda_sleep0": lambda: torch.cuda._sleep(0),
    }
    if tr_mod is not None:
        cases["triton_kernel_grid_tuple"] = lambda: tr_mod.add4[(1,)](x, y, out, n, BLOCK=1024)
        cases["triton_empty_kernel"] = lambda: tr_mod.empty[(1,)](x)
    for fn in cases.values():  # compile, load and check every path once
        for _ in range(3):
            fn()
    torch.cuda.synchronize()
    add4[(1,)](x, y, out, n, BLOCK=1024)
    torch.cuda.synchronize()
    assert torch.equal(out, x + y), "warpweave add4 gave a wrong result"
    if tr_mod is not None:
        out.zero_()
        tr_mod.add4[(1,)](x, y, out, n, BLOCK=1024)
        torch.cuda.synchronize()
        assert torch.equal(out, x + y), "Triton add4 gave a wrong result"

    per_burst, bursts = 200, (30 if quick else 100)
    compiled = add4.warmup(x, y, out, n, BLOCK=1024, grid=(1,))
    args = (x.data_ptr(), y.data_ptr(), out.data_ptr(), n)
    stream = torch.cuda.current_stream().cuda_stream
    native = _native_module()
    get_device, get_raw_stream = _torch_stream_functions(torch)
    device = get_device()
    torch_get_device = torch._C._cuda_getDevice
    packed = compiled.kernel._packed_launch(1, stream, args)
    kernel_launch = compiled.kernel.launch
    # The decomposition of one launch (DECOMPOSITION below): every piece in the same bursts.
    timed = dict(cases)
    timed.update({
        "Kernel_launch_raw_py": lambda: kernel_launch(1, 1, 1, stream, args),
        "launchPacked_prepacked_py": packed,
        "torch_raw_stream_query": lambda: get_raw_stream(device),
        "torch_device_query": lambda: torch_get_device(),
        "launch_path_device_query": lambda: get_device(),
        "three_data_ptr_reads": lambda: (x.data_ptr(), y.data_ptr(), out.data_ptr()),
        "three_tensor_reads": lambda: (x.is_cuda, x.dtype, x.data_ptr(), y.is_cuda, y.dtype,
                                       y.data_ptr(), out.is_cuda, out.dtype, out.data_ptr()),
    })
    grid_tuple = cases["warpweave_kernel_grid_tuple"]
    forms = {f"warpweave_kernel_grid_tuple[{f}]": f for f in LAUNCH_FORMS}
    for name in forms:
        timed[name] = grid_tuple
    # C++ loops over the same packed arguments: (form, query_context) or the runtime's path.
    cpp_loops = {"driver_cuLaunchKernel_cpp": ("params", False),
                 "driver_cuLaunchKernelEx_cpp": ("ex", False),
                 "driver_param_buffer_cpp": ("buffer", False),
                 "driver_ctx_query_cuLaunchKernel_cpp": ("params", True),
                 "launcher_launchPacked_cpp": ("launcher", False)}
    for name in cpp_loops:
        timed[name] = None
    default_form = native._launch_form()
    # Two ways to start a burst: right after a synchronize (the thread has just woken from a
    # blocking wait), and queued behind a GPU kept busy by torch.cuda._sleep (launches only
    # enqueue; the queue holds far more than one burst). The second is the host's own cost.
    busy_cycles = 3_000_000  # ~1.5 ms at H200 clocks: longer than any burst
    samples = {mode: {name: [] for name in timed} for mode in ("after_sync", "behind_busy_gpu")}
    for _ in range(bursts):  # interleaved, so that drift affects every case alike
        for mode, per_mode in samples.items():
            for name, fn in timed.items():
                torch.cuda.synchronize()
                if mode == "behind_busy_gpu":
                    torch.cuda._sleep(busy_cycles)
                if fn is None:
                    form, query = cpp_loops[name]
                    s = compiled.kernel._time_launches(1, stream, args, per_burst, form, query)
                    per_mode[name].append(s / per_burst * 1e6)
                    continue
                native._set_launch_form(forms.get(name, default_form))
                t = time.perf_counter_ns()
                for _ in range(per_burst):
                    fn()
                per_mode[name].append((time.perf_counter_ns() - t) / per_burst / 1e3)
                native._set_launch_form(default_form)
    torch.cuda.synchronize()
    burst = {mode: {name: median(v) for name, v in per_mode.items()}
             for mode, per_mode in samples.items()}
    for form in (*LAUNCH_FORMS, "launcher"):  # the C++ loops and every form run the kernel
        out.zero_()
        compiled.kernel._time_launches(1, stream, args, 1, form)
        torch.cuda.synchronize()
        assert torch.equal(out, x + y), f"the {form} driver-loop launch gave a wrong result"
    for form in LAUNCH_FORMS:
        out.zero_()
        native._set_launch_form(form)
        add4[(1,)](x, y, out, n, BLOCK=1024)
        native._set_launch_form(default_form)
        torch.cuda.synchronize()
        assert torch.equal(out, x + y), f"kernel[grid] with launch form {form} gave a wrong result"

    iters = 2000 if quick else 10000
    steady = {}
    for name, fn in cases.items():
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        steady[name] = (time.perf_counter() - t) / iters * 1e6
    return {"burst_us": burst, "steady_loop_us": steady, "burst_size": per_burst,
            "bursts": bursts, "steady_iters": iters, "launch_form": default_form}


LAUNCH_FORMS = ("params", "ex", "buffer")

# Where one kernel[(1,)](x, y, out, n) launch's host time goes, each piece timed in the same
# bursts: (label, case, subtract the Python loop's own cost).
DECOMPOSITION = (
    ("(a) bare cuLaunchKernel, C++ loop", "driver_cuLaunchKernel_cpp", False),
    ("(a) bare cuLaunchKernelEx, C++ loop", "driver_cuLaunchKernelEx_cpp", False),
    ("(a) bare cuLaunchKernel, extra=param buffer, C++", "driver_param_buffer_cpp", False),
    ("(a) cuCtxGetCurrent + cuLaunchKernel, C++ loop", "driver_ctx_query_cuLaunchKernel_cpp",
     False),
    ("(a) GpuKernel::launchPacked, C++ loop", "launcher_launchPacked_cpp", False),
    ("(b) launchPacked per Python call, prepacked", "launchPacked_prepacked_py", True),
    ("(b) Kernel.launch(ints) from Python", "Kernel_launch_raw_py", True),
    ("(c) torch raw-stream query", "torch_raw_stream_query", True),
    ("(c) torch current-device query", "torch_device_query", True),
    ("(c) the launch path's device query (one GPU: 0)", "launch_path_device_query", True),
    ("(d) three data_ptr() reads", "three_data_ptr_reads", True),
    ("(d) three tensors' is_cuda, dtype, data_ptr()", "three_tensor_reads", True),
    ("(e) kernel[(1,)](...), cuLaunchKernel", "warpweave_kernel_grid_tuple[params]", True),
    ("(e) kernel[(1,)](...), cuLaunchKernelEx", "warpweave_kernel_grid_tuple[ex]", True),
    ("(e) kernel[(1,)](...), param buffer", "warpweave_kernel_grid_tuple[buffer]", True),
)


def _native_module():
    from warpweave import _native_loader

    return _native_loader.native()


def _torch_stream_functions(torch):
    """The current-device and raw-stream functions warpweave's launch path calls."""
    import importlib

    return importlib.import_module("warpweave.jit")._stream_source()


def disk_cache_hit_ms(torch, ww_mod, runs):
    """A compile served by the disk cache: memory caches cleared, warmup() to a launchable
    kernel, and separately loading it into the context (cuModuleLoadData)."""
    x = torch.randn(1024, device="cuda")
    add4 = ww_mod.add4
    add4.warmup(x, x, x, 1024, BLOCK=128, grid=(1,))  # fills the disk cache
    hits, loads = [], []
    for _ in range(runs):
        add4.cache.clear()
        t = time.perf_counter()
        compiled = add4.warmup(x, x, x, 1024, BLOCK=128, grid=(1,))
        hits.append((time.perf_counter() - t) * 1e3)
        t = time.perf_counter()
        compiled.kernel.prepare()
        loads.append((time.perf_counter() - t) * 1e3)
    return {"warmup_from_disk_ms": median(hits), "module_load_ms": median(loads),
            "compiles_during_hits": add4.compile_count - 1}


class StubFloat32(type):
    """The stand-in tensors' class is their dtype: it prints as torch.float32."""

    def __str__(cls):
        return "torch.float32"


class StubTensor(int, metaclass=StubFloat32):
    """A CUDA float32 tensor (its address) as the launch path reads one, at about torch's cost:
    is_cuda and dtype are data descriptors that run C code (torch's are getsets), data_ptr() is
    a C method that returns a new int."""

    __slots__ = ()
    is_cuda = property(bool)
    dtype = property(type)
    data_ptr = int.conjugate


def stub_cases(cache_dir=None):
    """The stub driver loaded, kernels compiled, every case run once and checked against what
    the stub received: (cases, compiled add4, its launch values, stream)."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(repo, "tools", "cuda_stub"))
    import cuda_stub

    lib = cuda_stub.build()
    os.environ["WARPWEAVE_LIBCUDA"] = lib  # read at the runtime's first driver call
    os.environ.setdefault("WARPWEAVE_TARGET", "sm_90a")
    if cache_dir:
        os.environ["WARPWEAVE_CACHE_DIR"] = cache_dir
        os.environ.pop("WARPWEAVE_CACHE_DISABLE", None)
    else:
        os.environ["WARPWEAVE_CACHE_DISABLE"] = "1"
    import importlib

    import warpweave as ww
    jit = importlib.import_module("warpweave.jit")
    stub = cuda_stub.Stub(lib)
    kernels_dir = tempfile.mkdtemp(prefix="ww-launch-bench-")
    with open(os.path.join(kernels_dir, "ww_launch_kernels.py"), "w") as f:
        f.write(WW_KERNELS)
    sys.path.insert(0, kernels_dir)
    import ww_launch_kernels as ww_mod

    # torch's tensor type and its current-device / raw-stream functions, as C callables.
    jit._tensor_type = StubTensor
    stream = 0x5000
    # torch._C._cuda_getDevice (no arguments) and _cuda_getCurrentRawStream (one): C functions.
    jit._stream_source = lambda: ((0).conjugate, {0: stream}.get)
    n = 1024
    x, y, out = (StubTensor(a) for a in (0x7f0000010000, 0x7f0000020000, 0x7f0000030000))
    add4, empty = ww_mod.add4, ww_mod.empty
    grid_fn = lambda meta: (ww.cdiv(n, meta["BLOCK"]),)  # noqa: E731
    bound = add4[(1,)]
    compiled = add4.warmup(x, y, out, n, BLOCK=1024, grid=(1,))
    args = (x.data_ptr(), y.data_ptr(), out.data_ptr(), n)
    cases = {
        "python_lambda_floor": lambda: None,
        "warpweave_kernel_grid_tuple": lambda: add4[(1,)](x, y, out, n, BLOCK=1024),
        "warpweave_bound_kernel_call": lambda: bound(x, y, out, n, BLOCK=1024),
        "warpweave_kernel_grid_fn": lambda: add4[grid_fn](x, y, out, n, BLOCK=1024),
        "warpweave_empty_kernel": lambda: empty[(1,)](x),
        "warpweave_Kernel_launch_ints": lambda: compiled.kernel.launch(1, 1, 1, stream, args),
    }
    for fn in cases.values():  # compile and load every kernel
        fn()
    # Every add4 case once more, checked: the stub keeps the last launch's grid, stream and
    # values (of 4 params: it must not be asked for more than the kernel passes).
    stub.record_params([8, 8, 8, 4])
    for name, fn in cases.items():
        if name in ("python_lambda_floor", "warpweave_empty_kernel"):
            continue
        before = stub.record.launches
        fn()
        r = stub.record
        assert r.launches == before + 1, f"{name}: {r.launches - before} launches, expected 1"
        assert tuple(r.grid) == (1, 1, 1) and r.stream == stream and tuple(r.block) == (128, 1, 1)
        assert stub.last_params() == args, f"{name}: the stub got {stub.last_params()}"
    stub.record_params([])
    return cases, compiled, args, stream


def stub_launch_overheads(quick):
    """Host ns per launch with the stub driver: warpweave's own cost, nothing of the GPU's."""
    cases, compiled, args, stream = stub_cases()
    per_burst, bursts = 1000, (20 if quick else 60)
    timed = dict(cases)
    timed["driver_cuLaunchKernel_cpp"] = None
    samples = {name: [] for name in timed}
    for _ in range(bursts):
        for name, fn in timed.items():
            if fn is None:
                s = compiled.kernel._time_driver_launches(1, stream, args, per_burst, False)
                samples[name].append(s / per_burst * 1e9)
                continue
            t = time.perf_counter_ns()
            for _ in range(per_burst):
                fn()
            samples[name].append((time.perf_counter_ns() - t) / per_burst)
    # The minimum as well: the work is the same every burst, so on a busy host the fastest burst
    # is the one least disturbed.
    return {"ns_per_call": {name: median(v) for name, v in samples.items()},
            "min_ns_per_call": {name: min(v) for name, v in samples.items()},
            "burst_size": per_burst, "bursts": bursts}


STUB_CALLS = 5000  # calls per case under callgrind


def stub_run_one(case, cache_dir):
    """Runs one case STUB_CALLS times inside itertools.starmap, which callgrind is told to
    count alone (--toggle-collect=starmap_next): the set-up is not counted."""
    import collections
    import itertools

    fn = stub_cases(cache_dir)[0][case]
    collections.deque(itertools.starmap(fn, itertools.repeat((), STUB_CALLS)), maxlen=0)


def stub_instructions():
    """Instructions per call of each case under valgrind's callgrind: exact and unaffected by
    other load on the host (its wall-clock time is not)."""
    import re
    import shutil

    if not shutil.which("valgrind"):
        sys.exit("launch_bench --instructions: needs valgrind")
    cache = tempfile.mkdtemp(prefix="ww-launch-bench-cache-")
    names = list(stub_cases(cache)[0])  # compiles into the disk cache the runs below read
    out = {}
    for name in names:
        r = subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=starmap_next",
                            "--callgrind-out-file=/dev/null", sys.executable,
                            os.path.abspath(__file__), "--stub-one", name, "--cache-dir", cache],
                           capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, PYTHONHASHSEED="0"))
        m = re.search(r"Collected : (\d+)", r.stderr)
        if r.returncode != 0 or not m:
            raise RuntimeError(f"callgrind run of {name} failed:\n{r.stderr[-3000:]}")
        out[name] = int(m.group(1)) / STUB_CALLS
    shutil.rmtree(cache, ignore_errors=True)
    return out


def report_stub(r):
    med, low = r["ns_per_call"], r["min_ns_per_call"]
    print(f"# stub driver (tools/cuda_stub): host ns per call over {r['bursts']} bursts of "
          f"{r['burst_size']}; '- floor' takes out the Python loop and lambda call")
    print(f"{'case':36s} {'median':>8s} {'- floor':>8s} {'min':>8s} {'- floor':>8s}")
    for name in med:
        print(f"{name:36s} {med[name]:8.0f} {med[name] - med['python_lambda_floor']:8.0f} "
              f"{low[name]:8.0f} {low[name] - low['python_lambda_floor']:8.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--runs", type=int, default=None, help="fresh processes per measurement")
    ap.add_argument("--stub", action="store_true",
                    help="no GPU: warpweave's own host cost per launch, with the stub driver")
    ap.add_argument("--instructions", action="store_true",
                    help="with --stub: instructions per call under valgrind instead of time")
    ap.add_argument("--no-fresh", action="store_true",
                    help="skip the fresh-process costs (import, cold compile, first launch)")
    ap.add_argument("--stub-one", help=argparse.SUPPRESS)  # one case, for --instructions
    ap.add_argument("--cache-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 5)
    if args.stub_one:
        stub_run_one(args.stub_one, args.cache_dir)
        return
    if args.stub and args.instructions:
        ins = stub_instructions()
        print("# stub driver: instructions per call (callgrind); '- floor' takes out the loop")
        for name, v in ins.items():
            print(f"{name:36s} {v:8.0f} {v - ins['python_lambda_floor']:8.0f}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"stub_instructions_per_call": ins}, f, indent=2)
        return
    if args.stub:
        results = {"meta": {"python": sys.version.split()[0], "quick": args.quick},
                   "stub": stub_launch_overheads(args.quick)}
        report_stub(results["stub"])
        if args.json:
            with open(args.json, "w") as f:
                json.dump(results, f, indent=2)
        return

    import torch

    if not torch.cuda.is_available():
        sys.exit("launch_bench: needs a CUDA GPU")
    kernels_dir = tempfile.mkdtemp(prefix="ww-launch-bench-")
    with open(os.path.join(kernels_dir, "ww_launch_kernels.py"), "w") as f:
        f.write(WW_KERNELS)
    with open(os.path.join(kernels_dir, "triton_launch_kernels.py"), "w") as f:
        f.write(TRITON_KERNELS)
    sys.path.insert(0, kernels_dir)
    try:
        import triton
        import triton_launch_kernels as tr_mod
        triton_version = triton.__version__
    except ImportError as e:
        print(f"# Triton not measured: {e}")
        tr_mod, triton_version = None, None
    import warpweave as ww
    import ww_launch_kernels as ww_mod

    results = {"meta": {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                        "triton": triton_version, "python": sys.version.split()[0],
                        "quick": args.quick, "runs": runs}}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["WARPWEAVE_CACHE_DIR"] = cache
        results["launch"] = launch_overheads(torch, ww, ww_mod, tr_mod, args.quick)
        results["disk_cache"] = disk_cache_hit_ms(torch, ww_mod, 20)
    if not args.no_fresh:
        results["fresh_process"] = fresh_process_costs(kernels_dir, tr_mod is not None, runs)
    report(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


def report_decomposition(launch):
    """The DECOMPOSITION table: each piece's us per call, queued and post-sync, with the Python
    loop's own cost (python_lambda_floor) taken out of the pieces called from Python."""
    bursts = launch["burst_us"]
    busy, after = bursts["behind_busy_gpu"], bursts["after_sync"]
    print(f"# decomposition of one launch (us per call; default launch form "
          f"{launch['launch_form']}; Python pieces minus the loop's own cost)")
    print(f"{'piece':52s} {'queued':>8s} {'post-sync':>9s}")
    for label, name, minus_floor in DECOMPOSITION:
        q, p = busy[name], after[name]
        if minus_floor:
            q -= busy["python_lambda_floor"]
            p -= after["python_lambda_floor"]
        print(f"{label:52s} {q:8.2f} {p:9.2f}")


def report(r):
    bursts, s = r["launch"]["burst_us"], r["launch"]["steady_loop_us"]
    busy, after = bursts["behind_busy_gpu"], bursts["after_sync"]
    print(f"# {r['meta']['gpu']}, torch {r['meta']['torch']}, triton {r['meta']['triton']}")
    print(f"{'launch (us per call)':36s} {'queued':>8s} {'post-sync':>9s} {'steady':>8s}")
    for name in busy:
        print(f"{name:36s} {busy[name]:8.2f} {after[name]:9.2f} "
              f"{s.get(name, float('nan')):8.2f}")
    for label, b in (("queued", busy), ("post-sync", after)):
        ww_us = b["warpweave_kernel_grid_tuple"]
        print(f"{label}: warpweave / torch.add {ww_us / b['torch_add']:.2f}x", end="")
        if "triton_kernel_grid_tuple" in b:
            print(f", warpweave / Triton {ww_us / b['triton_kernel_grid_tuple']:.2f}x", end="")
        print(f", warpweave - bare cuLaunchKernel {ww_us - b['driver_cuLaunchKernel_cpp']:.2f} us")
    report_decomposition(r["launch"])
    d = r["disk_cache"]
    print(f"disk cache hit to a launchable kernel: {d['warmup_from_disk_ms']:.3f} ms "
          f"(+ module load {d['module_load_ms']:.3f} ms)")
    f = r.get("fresh_process")
    if f is None:
        return
    print(f"python start {f['python_start_s'] * 1e3:.0f} ms; import warpweave "
          f"{f['import_warpweave_s'] * 1e3:.0f} ms"
          + (f", import triton {f['import_triton_s'] * 1e3:.0f} ms" if "import_triton_s" in f
             else ""))
    for lib in ("warpweave", "triton"):
        for phase in ("cold", "cached"):
            c = f.get(f"{phase}_{lib}")
            if c is None:
                continue
            print(f"{phase:6s} {lib:9s}: wall {c['wall_s'] * 1e3:6.0f} ms, after interpreter "
                  f"start {c['after_interpreter_start_s'] * 1e3:6.0f} ms (torch "
                  f"{c['import_torch_s'] * 1e3:.0f}, CUDA {c['cuda_init_s'] * 1e3:.0f}, import "
                  f"{c['import_s'] * 1e3:.0f}, first launch to done "
                  f"{(c['library_to_first_kernel_done_s'] - c['import_s']) * 1e3:.1f}); second "
                  f"specialization {c['second_specialization_s'] * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
