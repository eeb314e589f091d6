"""Launch-configuration sweep of the memory-bound kernels (issue 4): one GPU process times every
configuration of CONFIGS at bench_kernels.py's --quick sizes, beside the copy bandwidth measured in
the same process, and reports TB/s, x-copy and the best configuration per kernel.

    python bench/sweep_memory.py [--json out.json] [--only softmax,layernorm_bwd] [--dry-run]
        [--graph] [--kernel-budget 30] [--total-budget 100] [--shape 4096x32768]

--shape sets softmax's and layer norm's rows and columns (bench_kernels.py's full sizes include
4096x32768, 2048x100000 and 8192x16384: the wide rows; the TMA configurations fall back to the
register kernels on rows they do not take).

Each configuration is a `config` dict of the warpweave.ops wrapper (None: the wrapper's default),
checked against torch (max error and norm-wise relative error) before it is timed with
ww.testing.do_bench (L2 flushed, median), or with --graph as replays of a CUDA graph of the call
(the GPU's own time). Kernels are time-boxed: configurations left when a kernel's budget runs out
are reported as skipped. --dry-run only prints the configurations."""

import argparse
import json
import math
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
for path in (ROOT, os.path.join(ROOT, "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench_kernels import copies_of, gpu_torch, parse_shape  # noqa: E402


def _product(**axes):
    """Every combination of the axes' values, as config dicts (in the order given)."""
    configs = [{}]
    for name, values in axes.items():
        configs = [{**c, name: v} for c in configs for v in values]
    return configs


# programs_per_sm None: as many as the compiled kernel's registers and shared memory allow.
# tma: rows streamed through a ring of num_stages shared buffers by TMA (python/warpweave/ops/kernels/hopper/*_tma.py;
# ptxas at 4096 fp16 columns: softmax 48 / 40 / 32 registers on 4 / 8 / 16 warps; layernorm
# forward 121 / 80 / 50; backward 128 on 8 warps, 64-78 on 16); tma_store: rows written back by
# TMA copies out of two shared buffers; store_evict: the plain stores' L2 policy. Their timings
# scattered between runs on the H200 (e.g. softmax 4 warps 2 stages 8 per SM: 3.55, 3.60 and
# 2.66-2.82 TB/s), hence --graph. The default comes first and again last: the two timings give
# the run's noise.
TMA_STAGES = _product(num_warps=[4, 8], num_stages=[2, 3])
CONFIGS = {
    "softmax": [None] + [dict(tma=True, **c) for c in TMA_STAGES]
    + [dict(tma=True, programs_per_sm=8), dict(tma=True, tma_store=True),
       dict(tma=True, num_warps=8, num_stages=4), dict(num_warps=16), dict(num_warps=32),
       dict(rows_ahead=0), dict(rows_ahead=1), None],
    "layernorm_fwd": [None] + [dict(tma=True, **c) for c in TMA_STAGES]
    + [dict(tma=True, tma_store=True)]
    + _product(num_warps=[8, 16, 32], programs_per_sm=[1, 2]) + [None],
    # block_p / block_n: the dw/db sum's partial rows per step and columns per program.
    "layernorm_bwd": [None]
    + [dict(num_warps=8, prefetch=0, accumulate_early=False, block_p=32, block_n=32),
       dict(block_p=64, block_n=16), dict(num_warps=16, prefetch=2), dict(prefetch=0)]
    + _product(num_warps=[2, 4, 8], prefetch=[1, 2, 3])
    + [dict(num_warps=4, prefetch=3, accumulate_early=True),
       dict(num_warps=4, prefetch=3, programs_per_sm=4)]
    + [dict(tma=True, num_warps=8, num_stages=s) for s in (1, 2)]
    + [dict(tma=True, tma_store=True, num_warps=w, num_stages=s, programs_per_sm=p)
       for w, s, p in ((8, 2, 2), (16, 3, 1))] + [None],
    "row_sum": [None] + [dict(BLOCK_M=m, BLOCK_N=n, num_warps=w) for m, n, w in (
        (1, 4096, 4), (2, 2048, 4), (8, 512, 4), (16, 256, 4), (2, 2048, 8), (4, 1024, 8),
        (8, 1024, 8), (2, 4096, 8), (1, 2048, 2))],
    "embedding_bag": [None] + _product(BLOCK_I=[16, 32], num_warps=[1, 2, 4])
    + [dict(BLOCK_I=32, BLOCK_D=64, num_warps=1), dict(BLOCK_I=8, num_warps=1)],
}
CONFIGS["row_max"] = list(CONFIGS["row_sum"])
# Rows split over the CTAs of a thread-block cluster (python/warpweave/ops/kernels/hopper/rows_cluster.py, sm_90+):
# cluster=C CTAs a row (0: the one-CTA kernels), num_warps per CTA, rows_per_cluster consecutive
# rows a cluster takes, rows_ahead (0-2) rows a CTA keeps loading, defer_store a row's output
# stored after the next row's cluster barrier. For the wide --shape runs (4096x32768,
# 2048x100000, 8192x16384); slices are cdiv(cols, C) columns in the next power of two of lanes.
CLUSTER_CONFIGS = {
    "softmax": [dict(cluster=0)]
    + [dict(cluster=c, num_warps=w, rows_ahead=a, rows_per_cluster=r, defer_store=d)
       for c, w, a, r, d in ((13, 8, 0, 1, False), (16, 8, 0, 1, False), (8, 16, 0, 1, False),
                             (13, 8, 2, 8, True), (13, 8, 1, 8, True), (8, 16, 1, 8, True),
                             (16, 8, 2, 4, True), (2, 32, 2, 8, True), (4, 16, 2, 8, True))],
    "layernorm_fwd": [dict(cluster=0)]
    + [dict(cluster=c, num_warps=w, rows_ahead=a, rows_per_cluster=r, defer_store=d)
       for c, w, a, r, d in ((2, 16, 0, 1, False), (4, 8, 0, 1, False), (8, 4, 0, 1, False),
                             (2, 16, 2, 8, True), (4, 8, 2, 8, True), (4, 8, 1, 16, True))],
    # Each cluster of the backward leaves one row of dw / db partials.
    "layernorm_bwd": [dict(cluster=0)]
    + [dict(cluster=c, num_warps=w, rows_ahead=a, rows_per_cluster=r, defer_store=d)
       for c, w, a, r, d in ((2, 32, 1, 64, False), (2, 32, 0, 64, False), (2, 32, 1, 32, True),
                             (2, 32, 0, 128, True), (4, 16, 1, 64, True), (4, 16, 2, 64, True),
                             (8, 8, 1, 32, True))]
    # The row sums pushed into the peers' shared memory (dsmem=True) instead of global scratch
    # and a cluster barrier a row: the default cluster size and more, rows ahead.
    + [dict(dsmem=True), dict(dsmem=True, rows_ahead=1), dict(dsmem=True, rows_per_cluster=64)]
    + [dict(cluster=c, num_warps=w, rows_ahead=a, dsmem=True)
       for c, w, a in ((16, 32, 0), (16, 16, 0), (8, 32, 0), (13, 32, 1))],
}
# The TMA row kernels with each row split over the CTAs of a cluster (config split=C): at rows
# of 32 KB (layer norm backward, 16384 16-bit columns: 2 CTAs of 8 warps, 3 stages is the default)
# and 64 KB (softmax: not a default, 0.78x at 4096x32768 fp16 against 0.86x for the register kernel).
SPLIT_CONFIGS = {
    "softmax": [dict(tma=True, split=s, num_warps=w, num_stages=n)
                for s, w, n in ((2, 8, 2), (2, 8, 3), (2, 16, 2), (4, 4, 2), (4, 8, 2), (4, 4, 3))],
    "layernorm_bwd": [dict(tma=True, split=s, num_warps=w, num_stages=n, **extra)
                      for s, w, n, extra in ((2, 8, 2, {}), (2, 16, 3, {}),
                                             (4, 8, 2, dict(tma_store=True, programs_per_sm=2)),
                                             (4, 8, 3, {}), (4, 4, 2, {}), (4, 4, 3, {}),
                                             (8, 8, 3, {}), (8, 4, 3, {}), (2, 8, 3, {}))],
}
# Softmax with each row's slices in shared memory (python/warpweave/ops/kernels/hopper/rows_smem.py, config smem=True):
# split CTAs of a cluster per row, chunks of `block` columns, a ring of num_stages slices per CTA,
# the partials exchanged through the peers' shared memory (dsmem=False: global scratch and a
# cluster barrier); the grid is the clusters that fit at once (an explicit `clusters` above that
# runs a second wave: 4-CTA clusters of 200 KB, 30 fit on the H200, 32 ran at 0.28x of copy).
# Configurations whose ring does not fit at the shape's width are reported as errors.
SMEM_CONFIGS = {
    "softmax": [dict(smem=True, split=c, block=b, num_stages=n, num_warps=w, dsmem=d)
                for c, b, n, w, d in (
                    (1, 4096, 3, 8, True), (1, 4096, 3, 16, True),
                    (2, 4096, 2, 8, False), (2, 4096, 2, 8, True), (2, 4096, 2, 16, True),
                    (2, 2048, 2, 8, True), (2, 4096, 4, 8, True), (2, 2048, 6, 8, True),
                    (4, 1024, 2, 8, False), (4, 1024, 2, 8, True), (4, 2048, 2, 16, True),
                    (4, 2048, 4, 8, True), (4, 2048, 3, 8, True), (8, 2048, 3, 8, True),
                    (8, 1024, 3, 8, True), (8, 4096, 3, 16, True), (8, 4096, 2, 8, True),
                    (16, 2048, 3, 8, True), (16, 4096, 3, 8, True), (16, 2048, 4, 16, True))],
    # The layer norm forward over the same slices (an option, not yet timed on the GPU).
    "layernorm_fwd": [dict(smem=True, split=c, block=b, num_stages=n, num_warps=w)
                      for c, b, n, w in ((1, 4096, 3, 8), (1, 4096, 3, 16), (2, 4096, 2, 8),
                                         (2, 4096, 4, 8), (4, 2048, 2, 16), (4, 4096, 3, 8),
                                         (16, 4096, 3, 8))]
    # wb_smem: each CTA keeps its w and b slices in shared memory beside the ring (2 x 32 KB at
    # 32768 fp16 columns over 2 CTAs; 2 x 52 KB at 100000 over 4, where 3 stages do not fit).
    + [dict(smem=True, wb_smem=True, split=c, block=b, num_stages=n, num_warps=w)
       for c, b, n, w in ((2, 4096, 2, 8), (2, 4096, 2, 16), (4, 4096, 2, 8), (4, 4096, 3, 8),
                          (4, 2048, 2, 16))],
}
# The smem kernels' passes over whole chunks unrolled (unroll=U): at 2048x100000 fp16 (2 CTAs a
# row) unroll=4 ran 0.88x of copy against the default's 0.86x; the others are the defaults of
# 4096x32768 fp16 (1 CTA a row), 1024x262144 (16 CTAs; fp32 in 2048-column chunks) and
# 2048x100000 fp32 (4 CTAs of 16 warps) unrolled.
SMEM_CONFIGS["softmax"] += [dict(smem=True, split=c, block=b, num_stages=n, num_warps=w, unroll=u)
                            for c, b, n, w, u in (
                                (2, 4096, 2, 8, 2), (2, 4096, 2, 8, 4), (2, 4096, 2, 8, 13),
                                (2, 4096, 2, 16, 4), (1, 4096, 3, 8, 2), (1, 4096, 3, 8, 4),
                                (1, 4096, 3, 8, 8), (16, 4096, 3, 8, 2), (16, 4096, 3, 8, 4),
                                (4, 2048, 2, 16, 2), (4, 2048, 2, 16, 4), (16, 2048, 3, 8, 4))]
SMEM_CONFIGS["layernorm_fwd"] += [dict(smem=True, wb_smem=True, split=c, block=4096, num_stages=2,
                                       num_warps=8, unroll=u)
                                  for c, u in ((2, 2), (2, 4), (4, 2), (4, 7))]
# More CTAs a row, so that two or three CTAs (w and b slices beside the ring) fit an SM at
# 2048x100000: 8 CTAs in 1024-column chunks (104 KB each), 16 in 2048 (80 / 64 KB). All ran
# slower than 4 CTAs of one per SM (0.75x of copy): 0.38-0.58x on the H200 (session 7).
SMEM_CONFIGS["layernorm_fwd"] += [dict(smem=True, wb_smem=True, split=c, block=b, num_stages=n,
                                       num_warps=w)
                                  for c, b, n, w in ((8, 1024, 2, 8), (8, 2048, 2, 8),
                                                     (16, 2048, 3, 8), (16, 2048, 2, 8),
                                                     (16, 2048, 2, 4), (8, 1024, 3, 8))]
# The one-CTA TMA row kernels at narrow rows (the layer norm backward at 65536x1024 ran 0.89x on 4
# warps, 2 stages, as many programs per SM as fit; 8 fit): stages, TMA stores, programs per SM
# (each program leaves one row of dw / db partials). Two to six programs per SM with deeper rings
# ran 0.43-0.82x in session 7: the rows' reductions want the warps more than the bytes in flight.
TMA_CONFIGS = {
    "layernorm_bwd": [dict(tma=True, num_warps=w, num_stages=n, tma_store=t, programs_per_sm=p)
                      for w, n, t, p in ((4, 2, False, 0), (4, 4, False, 0), (4, 2, True, 0),
                                         (2, 3, False, 0), (4, 2, False, 4), (4, 2, False, 8),
                                         (4, 2, False, 10), (4, 2, False, 12), (4, 3, False, 8),
                                         (4, 3, False, 12), (4, 4, False, 4), (4, 6, False, 4),
                                         (8, 4, False, 4), (8, 6, False, 2), (4, 8, False, 2),
                                         (4, 3, False, 6), (4, 4, False, 6))]
    # dw / db partial rows summed with other blocks (_layernorm_bwd_dwdb).
    + [dict(tma=True, num_warps=4, num_stages=2, block_p=p, block_n=n)
       for p, n in ((512, 8), (1024, 8), (2048, 8), (1024, 4), (2048, 4))],
    "layernorm_fwd": [dict(tma=True, num_warps=w, num_stages=n, tma_store=t)
                      for w, n, t in ((4, 2, False), (4, 3, False), (4, 4, False), (4, 2, True),
                                      (8, 3, False), (2, 3, False))],
}
TABLES = {"cluster": CLUSTER_CONFIGS, "split": SPLIT_CONFIGS, "smem": SMEM_CONFIGS,
          "tma": TMA_CONFIGS}
for _table in (CLUSTER_CONFIGS, SPLIT_CONFIGS, SMEM_CONFIGS, TMA_CONFIGS):
    for _name, _configs in _table.items():
        CONFIGS[_name][-1:-1] = _configs  # before the default's second timing
# The kernel furthest behind the copy first, so that a budget cut falls on the others.
KERNELS = ("layernorm_bwd", "softmax", "layernorm_fwd", "row_max", "row_sum", "embedding_bag")


def uses_tma(name, config):
    """Whether `config` of kernel `name` takes the TMA row kernels (on rows one copy moves)."""
    return name in ("softmax", "layernorm_fwd", "layernorm_bwd") and bool((config or {}).get("tma"))


def config_label(config):
    if config is None:
        return "default"
    return " ".join(f"{k}={v}" for k, v in config.items())


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", help="write the results here")
    p.add_argument("--only", help="comma-separated kernels (default: all)")
    p.add_argument("--dry-run", action="store_true", help="print the configurations and stop")
    p.add_argument("--graph", action="store_true",
                   help="time replays of a CUDA graph of the call (ww.testing.do_bench_cudagraph: "
                        "the GPU's time alone, without the host's launch cost or L2 flushes)")
    p.add_argument("--flush", choices=("write", "read", "none"), default="write",
                   help="how do_bench empties L2 before each run (ww.testing.do_bench's flush)")
    p.add_argument("--kernel-budget", type=float, default=30.0,
                   help="seconds per kernel before its remaining configurations are skipped")
    p.add_argument("--total-budget", type=float, default=100.0,
                   help="seconds for the whole sweep before remaining kernels are skipped")
    p.add_argument("--table", choices=("all",) + tuple(TABLES), default="all",
                   help="time only one table's configurations (and the default) instead of all")
    p.add_argument("--kernel-times", action="store_true",
                   help="also print each configuration's kernels and their mean GPU time "
                        "(torch.profiler over 20 calls): where a multi-kernel call spends it")
    p.add_argument("--dtype", choices=("float16", "float32"), default="float16",
                   help="softmax's and layer norm's element type (default float16)")
    p.add_argument("--shape", default="16384x4096",
                   help="ROWSxCOLS of softmax's and layer norm's fp16 input (default 16384x4096)")
    args = p.parse_args(argv)
    try:
        args.shape = parse_shape(args.shape)
    except ValueError:
        p.error("--shape takes ROWSxCOLS, e.g. 4096x32768")
    return args


def make_case(torch, ops, name, shape=(16384, 4096), dtype="float16"):
    """(bytes moved, {label: fn(config)}, check(out) -> (max error, rel error), tolerance) at
    bench_kernels.py's --quick size of kernel `name` (softmax and layer norm: `shape`); bytes are
    counted as the bench counts them."""
    F16, F32 = getattr(torch, dtype), torch.float32
    F = torch.nn.functional

    def randn(*shape, dtype=F32):
        return torch.randn(*shape, device="cuda", dtype=torch.float32).to(dtype)

    def errors(out, ref):
        out, ref = out.double(), ref.double()
        if torch.isnan(out).any():
            return math.inf, math.inf
        norm = ref.norm().item()
        return ((out - ref).abs().max().item(),
                (out - ref).norm().item() / (norm if norm > 0 else 1.0))

    label = f"{dtype} {shape[0]}x{shape[1]}"
    if name == "softmax":
        x = randn(*shape, dtype=F16)
        ref = torch.softmax(x.float(), -1)
        # 16-bit outputs of rows past ~100000 columns are mostly subnormal (1 / n_cols < 6e-5
        # in fp16): rounding alone leaves 2.7e-3 norm-wise at 262144 columns, torch's too.
        tol = 2e-3 if dtype == "float32" or shape[1] < 100000 else 5e-3
        return (2 * x.numel() * x.element_size(), lambda c: ops.softmax(x, config=c),
                lambda out: errors(out, ref), tol, label)
    if name in ("layernorm_fwd", "layernorm_bwd"):
        m, n = shape
        x, w, b, dy = randn(m, n, dtype=F16), randn(n, dtype=F16), randn(n, dtype=F16), randn(
            m, n, dtype=F16)
        if name == "layernorm_fwd":
            ref = F.layer_norm(x.float(), (n,), w.float(), b.float(), 1e-5)
            return (2 * x.numel() * 2, lambda c: ops.layernorm_fwd(x, w, b, 1e-5, config=c),
                    lambda out: errors(out[0], ref), 2e-3, label)
        x32 = x.float()
        mean = x32.mean(-1)
        rstd = torch.rsqrt(x32.var(-1, unbiased=False) + 1e-5)
        xr = x32.requires_grad_()
        wr = w.float().requires_grad_()
        F.layer_norm(xr, (n,), wr, b.float(), 1e-5).backward(dy.float())
        dx_ref, dw_ref = xr.grad.detach(), wr.grad.detach()
        del xr, x32

        def check(out):
            dx_err = errors(out[0], dx_ref)
            dw_err = errors(out[1], dw_ref)
            return max(dx_err[0], dw_err[0]), max(dx_err[1], dw_err[1])

        return (3 * x.numel() * 2, lambda c: ops.layernorm_bwd(dy, x, w, mean, rstd, config=c),
                check, 2e-3, label)
    if name in ("row_sum", "row_max"):
        x = randn(16384, 4096)
        if name == "row_sum":
            ref = x.double().sum(1)
            return (x.numel() * 4, lambda c: ops.row_sum(x, config=c),
                    lambda out: errors(out, ref), 1e-5, "fp32 16384x4096")
        ref = x.max(1).values
        return (x.numel() * 4, lambda c: ops.row_max(x, config=c),
                lambda out: errors(out[0], ref), 0.0, "fp32 16384x4096")
    if name == "embedding_bag":
        num_emb, dim, bags, per_bag = 1 << 20, 128, 32768, 32
        weight = randn(num_emb, dim, dtype=F16)
        indices = torch.randint(0, num_emb, (bags * per_bag,), device="cuda")
        offsets = torch.arange(0, bags * per_bag + 1, per_bag, device="cuda")
        ref = F.embedding_bag(indices, weight.float(), offsets, mode="sum",
                              include_last_offset=True)
        moved = (indices.numel() * dim + bags * dim) * weight.element_size() + indices.numel() * 8
        return (moved, lambda c: ops.embedding_bag(weight, indices, offsets, config=c),
                lambda out: errors(out, ref), 2e-3, f"fp16 {num_emb}x{dim} {bags} bags of 32")
    raise ValueError(name)


def dwdb_alone(torch, ops, bench, n_cols):
    """The time of layernorm backward's second kernel (the sum of the per-program dw/db partials)
    alone at n_cols columns, for the partial counts that one, two and eight programs per SM
    give: the part of the backward's time that moves few bytes."""
    rows = []
    for partials in (132, 264, 1056):
        pdw = torch.randn(partials, n_cols, device="cuda")
        pdb = torch.randn(partials, n_cols, device="cuda")
        dw = torch.empty(n_cols, device="cuda", dtype=torch.float16)
        db = torch.empty_like(dw)
        for block_p, block_n in ((64, 16), (256, 8), (512, 8), (1024, 8), (2048, 8), (1024, 4),
                                 (2048, 4)):
            config = dict(block_p=block_p, block_n=block_n)
            ms = bench(lambda: _layernorm._layernorm_bwd_dwdb(_common._Place("dwdb", {"p": pdw}), config,
                                                      pdw, pdb, dw, db, partials, n_cols))
            rows.append(dict(partials=partials, block_p=block_p, block_n=block_n, us=ms * 1e3))
            print(f"   dw/db sum alone: {partials} partials of {n_cols}, block_p={block_p} "
                  f"block_n={block_n}: {ms * 1e3:.1f} us")
    return rows


def kernel_times(torch, fn, calls=20):
    """[(kernel name, mean us per call)] of the GPU kernels that fn launches, from CUPTI through
    torch.profiler, in launch order."""
    fn()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    totals = {}
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            totals[event.name] = totals.get(event.name, 0.0) + event.time_range.elapsed_us()
    return [(name, us / calls) for name, us in totals.items()]


def table_configs(table, name):
    """The configurations of kernel `name` to time: all of CONFIGS, or the default and one
    table's (TABLES)."""
    if table == "all":
        return CONFIGS[name]
    return [None] + TABLES[table].get(name, [])


def copy_tbps(torch, bench, n=1 << 28):
    """TB/s of the faster of bench_kernels.copies_of's copies of n bytes per buffer, counting
    reads and writes (default 256 MB: bench_kernels.py's --quick copy)."""
    copies = copies_of(torch, 2 * n)
    ms = min(bench(fn) for fn in copies.values() for _ in range(2))
    del copies
    return 2 * n / (ms * 1e-3) / 1e12


def main(argv=None):
    args = parse_args(argv)
    only = KERNELS if not args.only else tuple(args.only.split(","))
    unknown = set(only) - set(KERNELS)
    if unknown:
        print(f"sweep_memory: unknown kernels {sorted(unknown)}; known: {', '.join(KERNELS)}",
              file=sys.stderr)
        return 2
    if args.dry_run:
        for name in only:
            configs = table_configs(args.table, name)
            print(f"{name}: {len(configs)} configurations")
            for config in configs:
                print(f"    {config_label(config)}")
        return 0

    torch = gpu_torch("sweep_memory", " (try --dry-run)")
    if torch is None:
        return 2
    import warpweave as ww

    from warpweave import ops
    from warpweave.ops import _common, _layernorm

    started = time.perf_counter()

    def bench(fn):
        if args.graph:
            return ww.testing.do_bench_cudagraph(fn, rep=20, return_mode="median")
        return ww.testing.do_bench(fn, warmup=5, rep=25, return_mode="median",
                                   flush=args.flush)

    props = torch.cuda.get_device_properties(0)
    copy_before = copy_tbps(torch, bench)
    print(f"# {props.name} ({props.multi_processor_count} SMs); copy {copy_before:.2f} TB/s"
          + (" (CUDA graph replays)" if args.graph else ""))
    report = {"gpu": props.name, "sms": props.multi_processor_count, "copy_TBps": copy_before,
              "kernels": {}}
    for name in only:
        if time.perf_counter() - started > args.total_budget:
            print(f"## {name}: skipped (total budget of {args.total_budget:.0f} s spent)")
            report["kernels"][name] = {"skipped": True}
            continue
        kernel_start = time.perf_counter()
        amount, run, check, tol, case = make_case(torch, ops, name, args.shape, args.dtype)
        same_size = copy_tbps(torch, bench, amount // 2)
        print(f"## {name} {case} (a copy of the same bytes: {same_size:.2f} TB/s)")
        rows = []
        for config in table_configs(args.table, name):
            label = config_label(config)
            spent = time.perf_counter() - kernel_start
            if spent > args.kernel_budget or time.perf_counter() - started > args.total_budget:
                rows.append({"config": config, "label": label, "status": "skipped"})
                print(f"   {label:<55} skipped (budget)")
                continue
            row = {"config": config, "label": label}
            try:
                out = run(config)
                torch.cuda.synchronize()
                max_err, rel_err = check(out)
                row.update(max_err=max_err, rel_err=rel_err)
                del out
                if not rel_err <= tol:
                    row["status"] = "wrong"
                else:
                    ms = bench(lambda: run(config))
                    row.update(status="ok", ms=ms, TBps=amount / (ms * 1e-3) / 1e12)
                    row["x_copy"] = row["TBps"] / copy_before
                    row["x_same_size_copy"] = row["TBps"] / same_size
            except Exception as e:  # a configuration that does not compile or launch
                row.update(status="error", error=f"{type(e).__name__}: {e}"[:300])
            rows.append(row)
            if row["status"] == "ok":
                print(f"   {label:<55} {row['TBps']:5.2f} TB/s {row['x_copy']:5.2f}x copy "
                      f"{row['x_same_size_copy']:5.2f}x same-size "
                      f"({row['ms'] * 1e3:7.1f} us, max err {row['max_err']:.2g})")
                if args.kernel_times:
                    row["kernels"] = kernel_times(torch, lambda: run(config))
                    print("      " + ", ".join(f"{kernel[:40]} {us:.1f} us"
                                               for kernel, us in row["kernels"]))
            else:
                print(f"   {label:<55} {row['status']}: {row.get('error') or row.get('rel_err')}")
        ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: -r["TBps"])
        defaults = [r for r in rows if r["config"] is None and r["status"] == "ok"]
        default = defaults[0] if defaults else None
        if len(defaults) > 1:
            times = [r["TBps"] for r in defaults]
            print(f"## {name} default timed {len(times)} times: "
                  f"{', '.join(f'{t:.2f}' for t in times)} TB/s (spread "
                  f"{(max(times) - min(times)) / min(times) * 100:.1f}%: the run's noise)")
        print(f"## {name} sorted:")
        for r in ok:
            print(f"   {r['TBps']:5.2f} TB/s {r['x_copy']:5.2f}x  {r['label']}")
        if ok:
            gain = f", {ok[0]['TBps'] / default['TBps']:.3f}x the default" if default else ""
            print(f"## {name} best: {ok[0]['label']} {ok[0]['TBps']:.2f} TB/s "
                  f"{ok[0]['x_copy']:.2f}x copy{gain}")
        report["kernels"][name] = {"case": case, "bytes": amount, "rows": rows,
                                   "best": ok[0] if ok else None, "default": default,
                                   "seconds": time.perf_counter() - kernel_start}
        if name == "layernorm_bwd":
            report["dwdb_alone"] = dwdb_alone(torch, ops, bench, args.shape[1])
        del run, check
        torch.cuda.empty_cache()
    copy_after = copy_tbps(torch, bench)
    report["copy_TBps_after"] = copy_after
    report["seconds"] = time.perf_counter() - started
    print(f"# copy {copy_after:.2f} TB/s at the end; sweep took {report['seconds']:.0f} s")
    print("# best per kernel (x-copy against the copy measured first):")
    for name, entry in report["kernels"].items():
        best = entry.get("best")
        if best:
            print(f"   {name:<14} {best['TBps']:5.2f} TB/s {best['x_copy']:5.2f}x  {best['label']}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
