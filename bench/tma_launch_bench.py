"""Host cost per call of launching a TMA GEMM from host TensorDescriptors, the way the TLX
tutorials' wrappers do it (three new descriptors per call, an autotuner whose configs' pre_hook
sets each descriptor's block_shape, a grid function), beside a plain pointer-kernel launch.

    python bench/tma_launch_bench.py            # on an sm_90 GPU (H200): 4096^3 fp16
    python bench/tma_launch_bench.py --stub     # no GPU: the stand-in driver of tools/cuda_stub

Cases (us per call, host time):
  plain_jit          add[(1,)](x, y, out, n, BLOCK=1024): four plain arguments
  desc_prebuilt      gemm_ws_kernel[grid](a_desc, b_desc, c_desc, M, N, K, ...), descriptors
                     built once
  desc_new           three new TensorDescriptors per call, then the same launch
  autotune_prehook   three new descriptors with a dummy [1, 1] block, launched through
                     @autotune(key=[M, N, K]) whose configs' pre_hook sets the block shapes,
                     and a grid function (the tutorials' wrapper, autotuning already done)
  build_3_descs      the three TensorDescriptor(...) constructions alone
  encode_3_new       building them and their tensor maps (encode(); the map cache serves them)
On the GPU also wrapper_full: autotune_prehook plus the tutorial's torch.zeros for C and
torch.cuda.get_device_properties per call.

`general` is the share of calls whose launch left the native fast path for the Python one (0 for
every case here when the fast path serves them). With --stub the driver's entry points return at once and tensors are stand-ins, so the numbers
are warpweave's own Python and C++ cost. On the GPU each case runs in bursts queued behind a GPU
kept busy (torch.cuda._sleep), so launches only enqueue: the host's own cost with the real
driver; then the GPU times of the wrapper: do_bench (CUDA events around each call after an L2
flush, as the tutorials' benchmark), do_bench of the kernel alone (descriptors prebuilt), and
do_bench_cudagraph (replays: no host cost at all), with torch.matmul beside them. A wrapper whose
do_bench time exceeds its graph time while its host cost per call stays far below the GPU time is
not host-bound: the difference is then on the GPU (launch gaps, L2 state).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time

import warpweave as ww
import warpweave.language as tl

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
M = N = K = 4096
# ops.matmul's fixed cooperative configuration (ops/_matmul.py TLX_GEMM_CONFIGS["ws"]) and a
# second candidate for the autotuner.
WS = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=16, NUM_STAGES=4, SMEM_EPILOGUE=True,
          EPI_SUBTILE=4)
CANDIDATES = [WS, dict(WS, NUM_STAGES=3, GROUP_M=8)]


def block_shapes(meta):
    """(a, b, c) descriptor block shapes of gemm_ws_kernel under constexprs `meta`."""
    half = meta["BLOCK_M"] // 2
    c_cols = meta["BLOCK_N"] // meta["EPI_SUBTILE"] if meta["SMEM_EPILOGUE"] else meta["BLOCK_N"]
    return [half, meta["BLOCK_K"]], [meta["BLOCK_K"], meta["BLOCK_N"]], [half, c_cols]


def set_block_shapes(nargs):
    """The tutorials' pre_hook: block shapes from the chosen config's constexprs."""
    a, b, c = block_shapes(nargs)
    nargs["a_desc"].block_shape = a
    nargs["b_desc"].block_shape = b
    nargs["c_desc"].block_shape = c


def make_cases(a, b, c, x, y, out, n, num_sms, new_c=None, device_props=None,
               bench=None):
    """The timed cases as argument-less callables, and the autotuned kernel."""
    from warpweave.ops.kernels.hopper.gemm_ws import gemm_ws_kernel

    TD = ww.TensorDescriptor
    configs = [ww.Config(dict(cfg), num_warps=4, num_stages=1, pre_hook=set_block_shapes)
               for cfg in CANDIDATES]
    tuned = ww.autotune(configs=configs, key=["M", "N", "K"], use_cuda_graph=bench is None,
                        do_bench=bench)(gemm_ws_kernel)
    blocks = block_shapes(WS)
    tiles = ww.cdiv(M, WS["BLOCK_M"]) * ww.cdiv(N, WS["BLOCK_N"])
    grid = (min(num_sms, tiles),)
    pre = [TD(t, [r, k], [k, 1], bs) for t, (r, k), bs in
           zip((a, b, c), ((M, K), (K, N), (M, N)), blocks)]

    def descs(cc, bs):
        return (TD(a, [M, K], [K, 1], bs[0]), TD(b, [K, N], [N, 1], bs[1]),
                TD(cc, [M, N], [N, 1], bs[2]))

    def desc_new():
        gemm_ws_kernel[grid](*descs(c, blocks), M, N, K, **WS, NUM_SMS=num_sms, num_warps=4)

    def tutorial(cc, sms):
        dummy = [1, 1]

        def grid_fn(meta):
            return (min(sms, ww.cdiv(M, meta["BLOCK_M"]) * ww.cdiv(N, meta["BLOCK_N"])),)

        tuned[grid_fn](*descs(cc, (dummy, dummy, dummy)), M, N, K, NUM_SMS=sms)
        return cc

    cases = {
        "python_lambda_floor": lambda: None,
        "plain_jit": lambda: add_kernel[(1,)](x, y, out, n, BLOCK=1024),
        "desc_prebuilt": lambda: gemm_ws_kernel[grid](*pre, M, N, K, **WS, NUM_SMS=num_sms,
                                                      num_warps=4),
        "desc_new": desc_new,
        "autotune_prehook": lambda: tutorial(c, num_sms),
        "build_3_descs": lambda: descs(c, blocks),
        "encode_3_new": lambda: [d.encode(s) for d, s in zip(descs(c, blocks), swizzles)],
    }
    if new_c is not None:
        cases["wrapper_full"] = lambda: tutorial(
            new_c(), device_props().multi_processor_count)
    # The swizzle each descriptor parameter declares: what the launch encodes them with.
    desc_new()
    compiled = next(iter(gemm_ws_kernel.cache.values()))
    swizzles = [compiled.swizzles.get(p) for p in ("a_desc", "b_desc", "c_desc")]
    return cases, tuned, gemm_ws_kernel, pre, grid


@ww.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


def burst_times(cases, bursts, per_burst, before_burst=None):
    """Median and minimum us per call of each case over interleaved bursts, and how many of its
    launches per call left the native fast path for JITFunction's general (Python) one."""
    jit = importlib.import_module("warpweave.jit")
    general = jit.JITFunction._launch_general
    counts = {name: 0 for name in cases}
    current = [None]

    def counting(self, *args):
        counts[current[0]] += 1
        return general(self, *args)

    jit.JITFunction._launch_general = counting
    samples = {name: [] for name in cases}
    try:
        for _ in range(bursts):
            for name, fn in cases.items():
                if before_burst:
                    before_burst()
                current[0] = name
                t = time.perf_counter_ns()
                for _ in range(per_burst):
                    fn()
                samples[name].append((time.perf_counter_ns() - t) / per_burst / 1e3)
    finally:
        jit.JITFunction._launch_general = general
    return {name: {"median_us": statistics.median(v), "min_us": min(v),
                   "general_path_per_call": counts[name] / (bursts * per_burst)}
            for name, v in samples.items()}


def stub_run():
    sys.path.insert(0, os.path.join(REPO, "tools", "cuda_stub"))
    import cuda_stub

    cuda_stub.use_stub_driver()
    jit = importlib.import_module("warpweave.jit")

    cuda_stub.stand_in_torch(jit)
    DType, Tensor = cuda_stub.StandInDType, cuda_stub.StandInTensor
    f16, f32 = DType("float16"), DType("float32")
    a, b, c = (Tensor(0x7F0000000000 + i * (1 << 32), f16) for i in range(3))
    x, y, out = (Tensor(0x7F1000000000 + i * (1 << 24), f32) for i in range(3))

    def fixed_times(fn, quantiles=None):  # the autotuner's timing: run once, report a constant
        fn()
        return [1.0, 1.0, 1.0]

    cases, tuned, _, _, _ = make_cases(a, b, c, x, y, out, 1024, 132, bench=fixed_times)
    stub = cuda_stub.Stub(os.environ["WARPWEAVE_LIBCUDA"])
    for fn in cases.values():  # compile, tune and load
        fn()
    # Checked: the autotuned launch passes the maps of the pre_hook's block shapes.
    stub.record_params([128, 128, 128])
    cases["autotune_prehook"]()
    got = stub.last_param_bytes()
    TD = ww.TensorDescriptor
    sw = next(iter(tuned.base.cache.values())).swizzles
    want = [TD(t, [M, M], [M, 1], bs).encode(sw.get(p)) for t, bs, p in
            zip((a, b, c), block_shapes(tuned.best_config.kwargs), ("a_desc", "b_desc", "c_desc"))]
    assert list(got) == want, "the autotuned launch did not pass the pre_hook's tensor maps"
    stub.record_params([])
    return cases


def gpu_run(quick):
    import torch

    from warpweave import testing

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        sys.exit("tma_launch_bench: needs an sm_90 GPU (or --stub)")
    dev = torch.device("cuda")
    a = torch.randn(M, K, device=dev, dtype=torch.float16)
    b = torch.randn(K, N, device=dev, dtype=torch.float16)
    c = torch.empty(M, N, device=dev, dtype=torch.float16)
    x, y = torch.randn(1024, device=dev), torch.randn(1024, device=dev)
    out = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    cases, tuned, kernel, pre, grid = make_cases(
        a, b, c, x, y, out, 1024, sms,
        new_c=lambda: torch.zeros(M, N, device=dev, dtype=torch.float16),
        device_props=lambda: torch.cuda.get_device_properties(dev))
    for fn in cases.values():
        fn()
    torch.cuda.synchronize()
    ref = a @ b
    for name in ("desc_prebuilt", "desc_new", "autotune_prehook"):
        c.zero_()
        cases[name]()
        torch.cuda.synchronize()
        torch.testing.assert_close(c, ref, atol=0.5, rtol=0.02, msg=lambda m: f"{name}: {m}")
    res = cases["wrapper_full"]()
    torch.testing.assert_close(res, ref, atol=0.5, rtol=0.02)
    # Bursts short enough to stay far from the launch queue's depth, each queued behind a busy
    # GPU: launches only enqueue.
    per_burst = 50

    def busy():
        torch.cuda.synchronize()
        torch.cuda._sleep(40_000_000)  # ~20 ms, longer than any burst's host time

    host = burst_times(cases, 10 if quick else 30, per_burst, busy)
    torch.cuda.synchronize()
    q = (0.5, 0.2, 0.8)
    gpu = {
        "wrapper_full_do_bench_ms": testing.do_bench(cases["wrapper_full"], quantiles=q),
        # L2 left clean instead of full of the flush's dirty lines (see do_bench's flush).
        "wrapper_full_do_bench_flush_read_ms": testing.do_bench(cases["wrapper_full"],
                                                                quantiles=q, flush="read"),
        "autotune_prehook_do_bench_ms": testing.do_bench(cases["autotune_prehook"],
                                                         quantiles=q),
        "desc_prebuilt_do_bench_ms": testing.do_bench(cases["desc_prebuilt"], quantiles=q),
        "wrapper_full_cudagraph_ms": testing.do_bench_cudagraph(cases["wrapper_full"],
                                                                quantiles=q),
        "desc_prebuilt_cudagraph_ms": testing.do_bench_cudagraph(cases["desc_prebuilt"],
                                                                 quantiles=q),
        "torch_matmul_do_bench_ms": testing.do_bench(lambda: a @ b, quantiles=q),
    }
    # A steady loop: many calls, one synchronize (bound by the GPU when the host keeps up).
    iters = 200 if quick else 1000
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(iters):
        cases["wrapper_full"]()
    torch.cuda.synchronize()
    gpu["wrapper_full_steady_loop_ms"] = (time.perf_counter() - t) / iters * 1e3
    return host, gpu, {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "best_config": str(tuned.best_config)}


def report(host, gpu=None):
    floor = host["python_lambda_floor"]
    print(f"{'case (host us per call)':28s} {'median':>8s} {'min':>8s} {'general':>8s}   (Python "
          f"loop's own cost {floor['median_us']:.2f} us, not taken out)")
    for name, t in host.items():
        if name != "python_lambda_floor":
            print(f"{name:28s} {t['median_us']:8.2f} {t['min_us']:8.2f} "
                  f"{t['general_path_per_call']:8.2f}")
    for name, v in (gpu or {}).items():
        shown = (f"{v[0]:.4f} (20%-80%: {v[1]:.4f}-{v[2]:.4f})" if isinstance(v, list)
                 else f"{v:.4f}")
        print(f"{name:36s} {shown}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stub", action="store_true", help="no GPU: the stand-in driver")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.stub:
        cases = stub_run()
        host, gpu, meta = (burst_times(cases, 10 if args.quick else 30,
                                       500 if args.quick else 2000), None, {"mode": "stub"})
    else:
        host, gpu, meta = gpu_run(args.quick)
    meta["python"] = sys.version.split()[0]
    report(host, gpu)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "host": host, "gpu": gpu}, f, indent=2)


if __name__ == "__main__":
    main()
