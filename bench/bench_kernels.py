"""Benchmarks of the kernel library on the GPU: each kernel of warpweave.ops beside its PyTorch
counterpart (cuBLAS, cuDNN, ATen) and our Triton port of it (bench/triton_ref.py), measured in one
process on the same inputs, plus the device-to-device copy bandwidth of the same run.

    python bench/bench_kernels.py [--quick] [--json out.json] [--plot out.png] [--only softmax,...]

Prints a table (median time, achieved TB/s or TFLOP/s, ratio to torch and to Triton) and writes
JSON (and a PNG when matplotlib is present). Outputs are checked against torch once per case and a
wrong result is marked in the table; timings are never asserted (this is not a test). Every
case's columns are timed in ROUNDS interleaved rounds (each a do_bench median); a ratio is the
median of the per-round ratios, so that the GPU's clock drift moves both sides of it together, and
the 'spread' column is the range of a column's rounds relative to its fastest, below which a ratio
is noise. Memory-bound cases use inputs well past the 60 MB L2, and the timer
flushes L2 before every run.

Memory-bound cases (unit TB/s) carry two copy columns that move the same number of bytes (half
read, half written), timed in the same rounds: 'copy', torch's device-to-device copy_ (a
cudaMemcpyAsync), and 'copy-kernel', torch's elementwise kernel writing -src (captured in a CUDA
graph, a memcpy of 512 MB or more runs at 2.7 TB/s where the kernel keeps 4.2). 'vs copy' is the
median of the per-round ratios against the faster of the two in each round, so that what a run's
flush and size cost every kernel (see --flush) is charged to the copy too; 'vs large copy' is
the rate over the large copy of the header line (the faster of the two as well).
`--only copy` times the copy alone at several sizes under each flush mode.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import time
import traceback

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="fewer and smaller cases, shorter timing (whole run in ~3 minutes)")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--plot", metavar="PATH",
                   help="write a PNG bar chart here (default: the JSON path with .png)")
    p.add_argument("--only", metavar="NAMES",
                   help="comma-separated kernel names: " + ", ".join(KERNELS))
    p.add_argument("--shapes", metavar="RxC,...",
                   help="softmax's and layer norm's shapes instead of the run's (e.g. 32768x4096)")
    p.add_argument("--no-triton", action="store_true", help="skip the Triton column")
    p.add_argument("--timer", choices=("warpweave", "triton"), default="warpweave",
                   help="which do_bench times every column (default: ww.testing.do_bench)")
    p.add_argument("--graph", action="store_true",
                   help="time replays of a CUDA graph of each call (ww.testing.do_bench_cudagraph): "
                        "the GPU's time alone, without the host's cost per call or L2 flushes")
    p.add_argument("--flush", choices=("write", "read", "none"), default="write",
                   help="how ww.testing.do_bench empties L2 before each run (default 'write', "
                        "Triton's: zeroing a buffer, whose dirty lines the timed run writes back)")
    args = p.parse_args(argv)
    if args.shapes:
        try:
            args.shapes = [parse_shape(s) for s in args.shapes.split(",")]
        except ValueError:
            p.error("--shapes takes ROWSxCOLS[,ROWSxCOLS...], e.g. 32768x4096,8192x16384")
    return args


def parse_shape(text: str) -> tuple:
    """(rows, cols) from "ROWSxCOLS", both at least 1 (the bench tools' --shape / --shapes);
    ValueError otherwise."""
    shape = tuple(int(v) for v in text.lower().split("x"))
    if len(shape) != 2 or min(shape) < 1:
        raise ValueError(f"not ROWSxCOLS: {text!r}")
    return shape


def gpu_torch(tool: str, hint: str = ""):
    """PyTorch with a CUDA GPU visible, or None after saying on stderr which is missing (the
    bench tools then exit with 2); `hint` ends both messages."""
    try:
        import torch
    except ImportError:
        print(f"{tool}: PyTorch is not installed; it needs PyTorch and a CUDA GPU{hint}",
              file=sys.stderr)
        return None
    if not torch.cuda.is_available():
        print(f"{tool}: no CUDA GPU visible to PyTorch{hint}", file=sys.stderr)
        return None
    return torch


ROUNDS = 3  # interleaved timing rounds per case
# The TMA row-streaming kernels (python/warpweave/ops/kernels/hopper/*_tma.py) at the configurations that were best in
# bench/sweep_memory.py on the H200 at 4096 columns (tests compile them; ops takes its own defaults
# per width, see warpweave.ops _tma_row_defaults). REGISTERS: the configuration that keeps the
# register kernels, a column of its own where the TMA kernels are the default.
REGISTERS = {"tma": False}
TMA_CONFIGS = {
    "softmax": dict(tma=True, num_warps=4, num_stages=2, programs_per_sm=8),
    "layernorm_fwd": dict(tma=True, num_warps=4, num_stages=2),
    "layernorm_bwd": dict(tma=True, tma_store=True, num_warps=8, num_stages=2, programs_per_sm=2),
}
COPY_COLUMNS = ("copy", "copy-kernel")
KERNELS = ("copy", "add", "softmax", "layernorm_fwd", "layernorm_bwd", "matmul", "attention",
           "embedding_bag", "row_sum", "row_max")


# ------------------------------------------------------------------------------------------------
# Cases: (kernel, label, work, unit, {column: callable}, check) built lazily on the GPU
# ------------------------------------------------------------------------------------------------


class Case:
    def __init__(self, kernel, label, amount, unit, fns, check=None):
        self.kernel = kernel
        self.label = label
        self.amount = amount  # bytes moved (unit "TB/s") or FLOPs (unit "TFLOP/s")
        self.unit = unit
        self.fns = fns  # column name -> zero-argument callable
        self.check = check  # column name -> None or an error string, given its output


def rel_err(torch, out, ref):
    out, ref = out.double(), ref.double()
    if torch.isnan(out).any():
        return math.inf
    d = ref.norm().item()
    return (out - ref).norm().item() / (d if d > 0 else 1.0)


def make_cases(torch, ops, tref, quick, only, row_shapes=None):
    """Yields Cases one at a time, so that each case's buffers are freed before the next."""
    F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32
    dev = "cuda"
    F = torch.nn.functional

    def randn(*shape, dtype=F32):
        return torch.randn(*shape, device=dev, dtype=torch.float32).to(dtype)

    def checker(ref, tol):
        def check(out):
            if isinstance(out, tuple):
                out = out[0]
            err = rel_err(torch, out, ref)
            return None if err <= tol else f"rel err {err:.2g}"
        return check

    tol = {F32: 1e-5, F16: 2e-3, BF16: 1e-2}
    # The TLX kernels (wgmma, TMA, setmaxnreg) are Hopper-only.
    hopper = torch.cuda.get_device_capability()[0] == 9

    def cols(ww_fn, torch_fn, triton_fn):
        out = {"warpweave": ww_fn, "torch": torch_fn}
        if tref is not None and triton_fn:
            out["triton"] = triton_fn
        return out

    def want(name):
        return name in only

    if want("add"):
        n = (1 << 26) if quick else (1 << 28)
        for dt in ((F32,) if quick else (F32, F16)):
            x, y = randn(n, dtype=dt), randn(n, dtype=dt)
            yield Case("add", f"{dt_name(dt)} n={n}", 3 * n * x.element_size(), "TB/s",
                       cols(lambda: ops.add(x, y), lambda: torch.add(x, y),
                            tref and (lambda: tref.add(x, y))), checker(x + y, 0))
            del x, y

    if want("softmax"):
        shapes = row_shapes or ([(16384, 4096)] if quick else [
            (32768, 4096), (65536, 1024), (4096, 32768), (2048, 100_000)])
        for m, n in shapes:
            for dt in ((F16,) if quick else (F16, F32)):
                x = randn(m, n, dtype=dt)
                ref = torch.softmax(x.float(), -1)
                fns = cols(lambda: ops.softmax(x), lambda: torch.softmax(x, -1),
                           tref and n <= 32768 and (lambda: tref.softmax(x)))
                fns["warpweave-regs"] = lambda: ops.softmax(x, config=REGISTERS)
                yield Case("softmax", f"{dt_name(dt)} {m}x{n}", 2 * x.numel() * x.element_size(),
                           "TB/s", fns, checker(ref, tol[dt]))
                del x, ref

    if want("layernorm_fwd") or want("layernorm_bwd"):
        shapes = row_shapes or ([(16384, 4096)] if quick else [
            (32768, 4096), (65536, 1024), (8192, 16384)])
        for m, n in shapes:
            dt = F16
            x, w, b, dy = randn(m, n, dtype=dt), randn(n, dtype=dt), randn(n, dtype=dt), randn(
                m, n, dtype=dt)
            size = x.element_size()
            y_ref = F.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
            if want("layernorm_fwd"):
                fns = cols(lambda: ops.layernorm_fwd(x, w, b, 1e-5),
                           lambda: F.layer_norm(x, (n,), w, b, 1e-5),
                           tref and (lambda: tref.layernorm_fwd(x, w, b, 1e-5)))
                fns["warpweave-regs"] = lambda: ops.layernorm_fwd(x, w, b, 1e-5,
                                                                  config=REGISTERS)
                yield Case("layernorm_fwd", f"{dt_name(dt)} {m}x{n}", 2 * x.numel() * size,
                           "TB/s", fns, checker(y_ref, tol[dt]))
            if want("layernorm_bwd"):
                # Statistics from torch: a failing warpweave forward must not stop the run.
                x32 = x.float()
                mean = x32.mean(-1)
                rstd = torch.rsqrt(x32.var(-1, unbiased=False) + 1e-5)
                del x32
                xr = x.float().requires_grad_()
                F.layer_norm(xr, (n,), w.float(), b.float(), 1e-5).backward(dy.float())
                dx_ref = xr.grad
                del xr

                def aten_bwd():
                    return torch.ops.aten.native_layer_norm_backward(
                        dy, x, [n], mean[:, None], rstd[:, None], w, b, [True, True, True])

                fns = cols(lambda: ops.layernorm_bwd(dy, x, w, mean, rstd), aten_bwd,
                           tref and (lambda: tref.layernorm_bwd(dy, x, w, mean, rstd)))
                fns["warpweave-regs"] = lambda: ops.layernorm_bwd(dy, x, w, mean, rstd,
                                                                  config=REGISTERS)
                yield Case("layernorm_bwd", f"{dt_name(dt)} {m}x{n}", 3 * x.numel() * size,
                           "TB/s", fns, checker(dx_ref, tol[dt]))
                del dx_ref
            del x, w, b, dy, y_ref

    if want("matmul"):
        if quick:
            shapes = [(F16, 4096, 4096, 4096), (BF16, 4096, 4096, 4096), (F16, 8192, 8192, 8192),
                      (BF16, 8192, 8192, 8192)]
        else:
            shapes = [(F16, 2048, 2048, 2048), (F16, 4096, 4096, 4096), (F16, 8192, 8192, 8192),
                      (BF16, 4096, 4096, 4096), (BF16, 8192, 8192, 8192),
                      (BF16, 8192, 8192, 1024), (BF16, 16384, 4096, 4096),
                      (BF16, 1024, 8192, 8192)]
        for dt, m, n, k in shapes:
            a, b = randn(m, k, dtype=dt), randn(k, n, dtype=dt)
            ref = a @ b
            fns = cols(lambda: ops.matmul(a, b), lambda: a @ b,
                       tref and (lambda: tref.matmul(a, b)))
            if hopper:
                fns["warpweave-ws"] = lambda: ops.matmul_tlx(a, b, "ws")
                # The cooperative kernel in 2-CTA clusters multicasting A (N-neighbour tiles)
                # or B (M-neighbour tiles).
                fns["warpweave-wsmcA"] = lambda: ops.matmul_tlx(a, b, "ws_cluster")
                fns["warpweave-wsmcB"] = lambda: ops.matmul_tlx(a, b, "ws_cluster_m")
                fns["warpweave-pp"] = lambda: ops.matmul_tlx(a, b, "pingpong")
                fns["warpweave-pipe"] = lambda: ops.matmul_tlx(a, b, "pipelined")
            yield Case("matmul", f"{dt_name(dt)} {m}x{n}x{k}", 2 * m * n * k, "TFLOP/s", fns,
                       checker(ref, tol[dt]))
            del a, b, ref

    if want("attention"):
        if quick:
            shapes = [(F16, 4, 32, 4096, 128, False), (F16, 4, 32, 4096, 128, True),
                      (F16, 4, 32, 4096, 64, False), (F16, 4, 32, 4096, 64, True),
                      (F16, 1, 16, 16384, 128, False), (F16, 1, 16, 16384, 128, True)]
        else:
            shapes = [(F16, 1, 16, 16384, 128, False), (F16, 1, 16, 16384, 128, True),
                      (BF16, 1, 16, 16384, 128, False), (BF16, 1, 16, 16384, 128, True),
                      (F16, 1, 32, 16384, 64, False), (F16, 16, 16, 1024, 128, False),
                      (F16, 4, 16, 4096, 128, True)]
        for dt, z, h, n_ctx, d, causal in shapes:
            q, k, v = (randn(z, h, n_ctx, d, dtype=dt) for _ in range(3))
            scale = 1 / math.sqrt(d)
            flops = 4 * z * h * n_ctx * n_ctx * d * (0.5 if causal else 1.0)
            sdpa = sdpa_fn(torch)
            ref = sdpa(q, k, v, is_causal=causal, scale=scale)
            fns = cols(lambda: ops.attention(q, k, v, causal, scale),
                       lambda: sdpa(q, k, v, is_causal=causal, scale=scale),
                       tref and (lambda: tref.attention(q, k, v, causal, scale)))
            if hopper:
                fns["warpweave-ws"] = lambda: ops.attention_tlx(q, k, v, scale, causal=causal)
            yield Case("attention",
                       f"{dt_name(dt)} Z{z} H{h} S{n_ctx} D{d}{' causal' if causal else ''}",
                       flops, "TFLOP/s", fns, checker(ref, tol[dt]))
            del q, k, v, ref

    if want("embedding_bag"):
        shapes = [(1 << 20, 128, 32768, 32)] if quick else [(1 << 21, 128, 65536, 32),
                                                          (1 << 20, 256, 16384, 64)]
        for num_emb, dim, bags, per_bag in shapes:
            dt = F16
            weight = randn(num_emb, dim, dtype=dt)
            indices = torch.randint(0, num_emb, (bags * per_bag,), device=dev)
            offsets = torch.arange(0, bags * per_bag + 1, per_bag, device=dev)
            ref = F.embedding_bag(indices, weight.float(), offsets, mode="sum",
                                  include_last_offset=True)
            moved = (indices.numel() * dim + bags * dim) * weight.element_size() + \
                indices.numel() * 8
            yield Case("embedding_bag", f"{dt_name(dt)} {num_emb}x{dim} {bags} bags of {per_bag}",
                       moved, "TB/s",
                       cols(lambda: ops.embedding_bag(weight, indices, offsets),
                            lambda: F.embedding_bag(indices, weight, offsets, mode="sum",
                                                    include_last_offset=True),
                            tref and (lambda: tref.embedding_bag(weight, indices, offsets))),
                       checker(ref, tol[dt]))
            del weight, indices, offsets, ref

    for name, ww_op, torch_op, tr in (("row_sum", ops.row_sum, lambda x: x.sum(1, dtype=F32),
                                       tref and tref.row_sum),
                                      ("row_max", ops.row_max, lambda x: x.max(1),
                                       tref and tref.row_max)):
        if not want(name):
            continue
        shapes = [(16384, 4096)] if quick else [(32768, 8192), (1 << 20, 128), (64, 4 << 20)]
        for m, n in shapes:
            x = randn(m, n)
            ref = x.sum(1, dtype=F32) if name == "row_sum" else x.max(1).values
            yield Case(name, f"fp32 {m}x{n}", x.numel() * 4, "TB/s",
                       cols(lambda: ww_op(x), lambda: torch_op(x),
                            tr and (lambda: tr(x))), checker(ref, 1e-5))
            del x, ref


def dt_name(dt):
    return {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}[str(dt)]


def sdpa_fn(torch):
    """torch's scaled_dot_product_attention pinned to cuDNN when this torch has it (the
    reference PERFORMANCE.md names), else torch's own choice."""
    F = torch.nn.functional
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        def cudnn(q, k, v, is_causal, scale):
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale)

        return cudnn
    except ImportError:
        return F.scaled_dot_product_attention


# ------------------------------------------------------------------------------------------------
# Measurement
# ------------------------------------------------------------------------------------------------


def copy_bandwidth(torch, bench, quick):
    n = (1 << 28) if quick else (1 << 30)  # bytes per buffer: 256 MB or 1 GB
    copies = copies_of(torch, 2 * n)
    # Each round's faster copy (the two, as in the per-case columns).
    times = [min(bench(fn) for fn in copies.values()) for _ in range(2)]
    del copies
    return 2 * n, times


def copies_of(torch, moved):
    """{'copy': torch's copy_, 'copy-kernel': an elementwise kernel}: zero-argument functions
    that each move `moved` bytes (half read, half written) between the same two buffers."""
    src = torch.empty(max(1, moved // 8), device="cuda", dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    return {"copy": lambda: dst.copy_(src), "copy-kernel": lambda: torch.neg(src, out=dst)}



def copy_study(torch, ww, warmup, rep):
    """Copy bandwidth by size and flush mode: what a timed run's size and the L2 flush cost."""
    sizes = [1 << 27, 1 << 28, 1 << 29, 1 << 30, 1 << 31]  # bytes moved
    print(f"# copy by bytes moved (TB/s) under each flush mode of ww.testing.do_bench")
    print(f"{'moved':>10} " + " ".join(f"{m:>8}" for m in ("write", "read", "none")))
    rows = []
    for moved in sizes:
        fn = copies_of(torch, moved)["copy"]
        rates = {}
        for mode in ("write", "read", "none"):
            ms = ww.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median",
                                     flush=mode)
            rates[mode] = moved / (ms * 1e-3) / 1e12
        rows.append({"moved": moved, "TBps": rates})
        print(f"{moved / 1e9:>8.2f}GB " + " ".join(f"{rates[m]:>8.3f}" for m in rates))
        del fn
        torch.cuda.empty_cache()
    return rows


def overheads(torch, ww, ops, quick):
    """Host-side costs PERFORMANCE.md sets targets for: a cold compile of the vector add (source
    to a loaded kernel, memory and disk caches off), a compile served by the disk cache, and the
    per-call cost of launching from Python (ops.add on 1024 elements; the raw kernel[grid]
    launch; torch.add), each loop timed on the host and ended with one synchronize."""
    from warpweave.ops.kernels import vector_add

    out = {}
    x = torch.randn(1024, device="cuda")
    kernel = vector_add.add_kernel
    saved_env = os.environ.get("WARPWEAVE_CACHE_DISABLE")
    try:
        os.environ["WARPWEAVE_CACHE_DISABLE"] = "1"
        kernel.cache.clear()
        t0 = time.perf_counter()
        ops.add(x, x)
        torch.cuda.synchronize()
        out["compile_cold_s"] = time.perf_counter() - t0
    finally:
        if saved_env is None:
            os.environ.pop("WARPWEAVE_CACHE_DISABLE", None)
        else:
            os.environ["WARPWEAVE_CACHE_DISABLE"] = saved_env
    kernel.cache.clear()  # the cold compile left it in memory: compile again to fill the disk
    ops.add(x, x)  # stores the cubin in the disk cache
    kernel.cache.clear()
    t0 = time.perf_counter()
    ops.add(x, x)
    torch.cuda.synchronize()
    out["compile_disk_cached_s"] = time.perf_counter() - t0

    iters = 2000 if quick else 10000
    y = torch.empty_like(x)

    def per_call(fn):
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / iters * 1e6

    out["launch_ops_add_us"] = per_call(lambda: ops.add(x, x))
    out["launch_kernel_us"] = per_call(
        lambda: kernel[(1,)](x, x, y, 1024, BLOCK=1024, num_warps=4))
    out["launch_torch_add_us"] = per_call(lambda: torch.add(x, x, out=y))
    # The row kernels' wrappers on a small input, whose GPU time is below the host's: a wrapper
    # whose host cost exceeds the time the GPU spends on the flush before each timed run (about
    # 60 us for 256 MB) shows up in do_bench's per-launch times.
    rows = torch.randn(256, 4096, device="cuda", dtype=torch.float16)
    w, b = rows[0].clone(), rows[1].clone()
    mean, rstd = rows.float().mean(-1), torch.ones(256, device="cuda")
    iters = iters // 10
    for name, fn in (("softmax", lambda c: ops.softmax(rows, config=c)),
                     ("layernorm_fwd", lambda c: ops.layernorm_fwd(rows, w, b, config=c)),
                     ("layernorm_bwd", lambda c: ops.layernorm_bwd(rows, rows, w, mean, rstd,
                                                                   config=c))):
        out[f"host_{name}_us"] = per_call(lambda: fn(REGISTERS))
        out[f"host_{name}_tma_us"] = per_call(lambda: fn(TMA_CONFIGS[name]))
    return out


def run(args):
    torch = gpu_torch("bench_kernels", "; nothing to measure")
    if torch is None:
        return 2
    import warpweave as ww

    from warpweave import ops

    tref, triton_note = None, "not requested"
    if not args.no_triton:
        try:
            import triton

            import triton_ref as tref

            triton_note = triton.__version__
        except Exception as e:  # ImportError, or a Triton too old for the refs
            triton_note = f"unavailable: {type(e).__name__}: {e}"
            tref = None

    warmup, rep = (10, 40) if args.quick else (25, 100)
    if args.timer == "triton" and tref is not None:
        import triton.testing

        def bench(fn):
            return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median")
    elif args.graph:
        # Ten replays of a graph of rep/5 ms of calls: a full run of every memory-bound case at
        # rep ms per graph took over two minutes on the H200.
        def bench(fn):
            return ww.testing.do_bench_cudagraph(fn, rep=rep / 5, return_mode="median")
    else:
        def bench(fn):
            return ww.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median",
                                       flush=args.flush)

    only = set(KERNELS if not args.only else args.only.split(","))
    unknown = only - set(KERNELS)
    if unknown:
        print(f"bench_kernels: unknown kernels {sorted(unknown)}; known: {', '.join(KERNELS)}",
              file=sys.stderr)
        return 2

    props = torch.cuda.get_device_properties(0)
    meta = {"gpu": props.name, "sms": props.multi_processor_count, "torch": torch.__version__,
            "cuda": torch.version.cuda, "triton": triton_note, "warpweave": ww.__version__,
            "quick": args.quick, "timer": "cuda graph replays" if args.graph else args.timer,
            "flush": "none" if args.graph else args.flush, "python": platform.python_version(),
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print(f"# {meta['gpu']} ({meta['sms']} SMs), torch {meta['torch']}, CUDA {meta['cuda']}, "
          f"Triton {triton_note}, timer {meta['timer']}, flush {meta['flush']}, "
          f"{'quick' if args.quick else 'full'} run")

    results = []
    copy_bytes, copy_times = copy_bandwidth(torch, bench, args.quick)
    results.append({"kernel": "copy", "case": f"fp32 {copy_bytes // 8} elements", "unit": "TB/s",
                    "amount": copy_bytes, "columns": {"torch": {
                        "ms": min(copy_times), "ms_runs": copy_times,
                        "rate": copy_bytes / (min(copy_times) * 1e-3) / 1e12}}})
    copy_tbs = copy_bytes / (min(copy_times) * 1e-3) / 1e12
    meta["copy_TBps"] = copy_tbs
    print(f"# device-to-device copy: {copy_tbs:.2f} TB/s (read + write), "
          f"{copy_times[0]:.3f} / {copy_times[1]:.3f} ms for {copy_bytes / 1e9:.2f} GB")

    if "copy" in only:
        meta["copy_study"] = copy_study(torch, ww, warmup, rep)
    try:
        meta["overheads"] = overheads(torch, ww, ops, args.quick)
        o = meta["overheads"]
        print(f"# vector add compile: cold {o['compile_cold_s'] * 1e3:.0f} ms, from the disk cache "
              f"{o['compile_disk_cached_s'] * 1e3:.1f} ms; launch from Python: ops.add "
              f"{o['launch_ops_add_us']:.1f} us, kernel[grid] {o['launch_kernel_us']:.1f} us, "
              f"torch.add {o['launch_torch_add_us']:.1f} us per call")
        print("# row wrappers per call on 256x4096 fp16 (host-bound), register / TMA kernels: " +
              ", ".join(f"{k} {o[f'host_{k}_us']:.1f} / {o[f'host_{k}_tma_us']:.1f} us"
                        for k in ("softmax", "layernorm_fwd", "layernorm_bwd")))
    except Exception as e:
        meta["overheads"] = {"error": f"{type(e).__name__}: {e}"}
        print(f"# overheads not measured: {type(e).__name__}: {(str(e).splitlines() or [''])[0]}")

    header = (f"{'kernel':<14} {'case':<36} {'column':<14} {'ms':>9} {'rate':>9} {'unit':<8} "
              f"{'spread':>6} {'vs torch':>8} {'vs triton':>9} {'vs copy':>7} "
              f"{'vs large copy':>13}  note")
    print(header)
    print("-" * len(header))
    t_start = time.time()
    for kernel in (k for k in KERNELS if k in only and k != "copy"):
        # One kernel at a time, so that a failure while setting up its inputs or references
        # is reported and the run goes on with the next kernel.
        cases = make_cases(torch, ops, tref, args.quick, {kernel}, args.shapes)
        while True:
            try:
                case = next(cases)
            except StopIteration:
                break
            except Exception as e:
                print(f"{kernel:<14} set-up failed: {type(e).__name__}: {e}")
                results.append({"kernel": kernel, "setup_error": f"{type(e).__name__}: {e}"})
                break
            if case.unit == "TB/s":
                case.fns.update(copies_of(torch, case.amount))
            row = {"kernel": case.kernel, "case": case.label, "unit": case.unit,
                   "amount": case.amount, "columns": {}}
            for column, fn in case.fns.items():
                entry = {}
                try:
                    out = fn()
                    torch.cuda.synchronize()
                    # The copy columns move the case's bytes; they compute nothing to check.
                    problem = (case.check(out) if case.check and column not in COPY_COLUMNS
                               else None)
                    if problem:
                        entry["wrong"] = problem
                    entry["ms_runs"] = []
                except Exception as e:  # a compile or launch failure is a result, not a crash
                    entry["error"] = f"{type(e).__name__}: {str(e)[:4000]}"
                    if os.environ.get("WW_BENCH_TRACEBACK"):
                        traceback.print_exc()
                    torch.cuda.synchronize()
                row["columns"][column] = entry
            # The GPU's clock drifts by up to a quarter within a minute under sustained load, so
            # columns are timed in interleaved rounds (the order rotating each round) and ratios
            # are taken per round: a drift then moves both sides of a ratio together.
            timed = [c for c, e in row["columns"].items() if "error" not in e]
            for r in range(ROUNDS):
                turn = r % max(1, len(timed))
                for column in timed[turn:] + timed[:turn]:
                    entry = row["columns"][column]
                    if "error" in entry:
                        continue
                    try:
                        entry["ms_runs"].append(bench(case.fns[column]))
                    except Exception as e:
                        entry["error"] = f"{type(e).__name__}: {str(e)[:4000]}"
                        torch.cuda.synchronize()
            for column, entry in row["columns"].items():
                if "error" in entry:
                    continue
                runs = entry["ms_runs"]
                entry["ms"] = statistics.median(runs)
                entry["spread"] = (max(runs) - min(runs)) / min(runs)
                entry["rate"] = case.amount / (entry["ms"] * 1e-3) / 1e12
            # Each round's faster copy is the one the kernels are held to.
            copy_runs = [min(times) for times in zip(*(
                row["columns"][c]["ms_runs"] for c in COPY_COLUMNS
                if "ms" in row["columns"].get(c, {})))]
            for column, entry in row["columns"].items():
                if "ms" in entry and column.startswith("warpweave"):
                    for other in ("torch", "triton", "copy"):
                        runs = (copy_runs if other == "copy"
                                else row["columns"].get(other, {}).get("ms_runs"))
                        if runs:  # > 1: warpweave is faster; the median of per-round ratios
                            entry[f"vs_{other}"] = statistics.median(
                                a / b for a, b in zip(runs, entry["ms_runs"]))
                    if case.unit == "TB/s":
                        entry["vs_large_copy"] = entry["rate"] / copy_tbs
                print(format_row(case, column, entry))
            results.append(row)
            for column in COPY_COLUMNS:
                case.fns.pop(column, None)  # frees the copies' buffers
            torch.cuda.empty_cache()
    meta["seconds"] = time.time() - t_start
    print(f"# {len(results)} cases in {meta['seconds']:.0f} s; ratios > 1 mean warpweave is "
          f"faster (time of the other column / warpweave's)")
    report = {"meta": meta, "results": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"# wrote {args.json}")
    plot_path = args.plot or (os.path.splitext(args.json)[0] + ".png" if args.json else None)
    if plot_path:
        write_plot(report, plot_path)
    return 0


def format_row(case, column, entry):
    if "error" in entry:
        return f"{case.kernel:<14} {case.label:<36} {column:<14} {'-':>9} {'-':>9} {'':<8} " \
               f"{'':>6} {'':>8} {'':>9} {'':>7} {'':>13}  FAILED " \
               f"{entry['error'].splitlines()[0][:120]}"
    ratios = [f"{entry[k]:.2f}x" if k in entry else "" for k in ("vs_torch", "vs_triton",
                                                                  "vs_copy", "vs_large_copy")]
    note = f"WRONG ({entry['wrong']})" if "wrong" in entry else ""
    return (f"{case.kernel:<14} {case.label:<36} {column:<14} {entry['ms']:>9.4f} "
            f"{entry['rate']:>9.3f} {case.unit:<8} {entry['spread'] * 100:>5.1f}% "
            f"{ratios[0]:>8} {ratios[1]:>9} {ratios[2]:>7} {ratios[3]:>13}  {note}")


def write_plot(report, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# matplotlib is not installed: no plot")
        return
    rows = [r for r in report["results"] if "columns" in r]
    labels = [f"{r['kernel']}\n{r['case']}" for r in rows]
    columns = []
    for r in rows:
        columns += [c for c in r["columns"] if c not in columns]
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(rows)), 5))
    width = 0.8 / len(columns)
    for i, column in enumerate(columns):
        # Rate relative to torch's, so TB/s and TFLOP/s cases share one axis.
        vals = []
        for r in rows:
            mine = r["columns"].get(column, {}).get("rate")
            base = r["columns"].get("torch", {}).get("rate")
            vals.append(mine / base if mine and base else 0.0)
        ax.bar([j + (i - (len(columns) - 1) / 2) * width for j in range(len(rows))], vals, width,
               label=column)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("throughput relative to torch")
    ax.set_title(f"{report['meta']['gpu']}: copy {report['meta']['copy_TBps']:.2f} TB/s")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"# wrote {path}")


def main(argv=None):
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
