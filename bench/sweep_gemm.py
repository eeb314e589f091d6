"""Sweep of the Hopper TLX GEMM configurations (python/warpweave/ops/kernels/hopper, through ops.matmul_tlx) on the GPU:
tile order (GROUP_M, raster along N), NUM_STAGES, tile shape, 2-CTA clusters sharing A or B
through multicast TMA, and the epilogue (direct store, whole tile or column chunks through
shared memory), for fp16 and bf16 at 4096^3 and 8192^3, timed beside cuBLAS in one process.

    python bench/sweep_gemm.py [--json out.json] [--sizes 4096,8192] [--dtypes float16,bfloat16]
                               [--only NAME,...]

Every configuration is compiled first (in parallel threads), then per case checked against a
float32 cuBLAS product (output memory poisoned with NaN first) and timed with
ww.testing.do_bench (median, L2 flushed before each run) in ROUNDS rounds, each timing cuBLAS
right before the configuration: the H200's clock moves by up to 25% over a sweep (seen on
2026-11-30: cuBLAS 1.44 ms at the start of a case and 1.75 ms at its end), so a configuration is
compared with the cuBLAS time next to it, and the table gives the median of those ratios and
their spread. Timings are never asserted (this is not a test).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

# (name, variant of ops.TLX_GEMM_CONFIGS, overrides). Each configuration spells out what it
# tries on top of WS (the cooperative kernel's tile and schedule before this sweep), so that the
# sweep means the same whatever the defaults are; "... default" rows run ops' current defaults.
# "mcA" / "mcB": 2-CTA clusters sharing A / B; "sN": NUM_STAGES; "subN": the epilogue in N
# column chunks (sub4 leaves shared memory for 4 stages at 128x256x64); "direct": C stored
# without a shared-memory buffer; "gN": GROUP_M; "rN": tiles rastered along N.
WS = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, NUM_STAGES=3, SMEM_EPILOGUE=True,
          EPI_SUBTILE=1, RASTER_N=False)
S4 = dict(WS, NUM_STAGES=4, EPI_SUBTILE=4)
CONFIGS = [
    ("ws s3", "ws", WS),
    ("ws s4 sub4", "ws", S4),
    ("ws sub4", "ws", dict(WS, EPI_SUBTILE=4)),
    ("ws direct", "ws", dict(WS, SMEM_EPILOGUE=False)),
    ("ws g16", "ws", dict(WS, GROUP_M=16)),
    ("ws rN", "ws", dict(WS, RASTER_N=True)),
    ("ws s4 sub4 g16", "ws", dict(S4, GROUP_M=16)),
    ("ws 256x128", "ws", dict(WS, BLOCK_M=256, BLOCK_N=128)),
    ("pp s5", "pingpong", dict(GROUP_M=8, NUM_STAGES=5)),
    ("pipe", "pipelined", {}),
    # Fewer persistent programs: if 66 2-CTA clusters cannot all be resident at once, the
    # cluster variants get faster with 60 clusters, while "ws" gets slower by 120/132.
    ("ws s3 n120", "ws", dict(WS, NUM_SMS=120)),
    ("mcA s3", "ws_cluster", dict(WS, CLUSTER_N=2)),
    ("mcA s3 n120", "ws_cluster", dict(WS, CLUSTER_N=2, NUM_SMS=120)),
    ("mcB s3", "ws_cluster_m", dict(WS, CLUSTER_M=2)),
    ("mcB s3 n120", "ws_cluster_m", dict(WS, CLUSTER_M=2, NUM_SMS=120)),
    ("mcB s4 sub4", "ws_cluster_m", dict(S4, CLUSTER_M=2)),
]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--sizes", default="4096,8192", help="square sizes M = N = K (default "
                   "4096,8192)")
    p.add_argument("--dtypes", default="float16,bfloat16")
    p.add_argument("--only", metavar="NAMES", help="comma-separated configuration names")
    p.add_argument("--warmup", type=float, default=5, help="do_bench warm-up, ms")
    p.add_argument("--rep", type=float, default=15, help="do_bench measurement, ms")
    p.add_argument("--rounds", type=int, default=3,
                   help="timings of each configuration, each beside one of cuBLAS")
    return p.parse_args(argv)


def rel_err(out, ref):
    out, ref = out.double(), ref.double()
    if not bool(out.isfinite().all()):
        return math.inf
    return ((out - ref).norm() / ref.norm()).item()


def compile_all(torch, ops, configs, dtypes, size):
    """Compiles every (configuration, dtype) in parallel; returns {(name, dtype): error}."""
    errors = {}

    def build(job):
        (name, variant, overrides), dt = job
        a = torch.empty(size, size, device="cuda", dtype=dt)
        try:
            ops.compile_matmul_tlx(a, a, variant, overrides)
        except Exception as e:  # reported in the table; the sweep goes on
            errors[(name, dt)] = f"{type(e).__name__}: {str(e)[:2000]}"

    jobs = [(c, dt) for c in configs for dt in dtypes]
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        list(pool.map(build, jobs))
    return errors


def measure(torch, ops, bench, row, variant, overrides, tol, compile_error, rounds):
    """Checks one configuration on one case, then, if it is right, times it `rounds` times, each
    right after a timing of cuBLAS on the same inputs."""
    entry = {"variant": variant, "overrides": overrides}
    if compile_error:
        entry["error"] = compile_error
        return entry
    a, b, size = row["a"], row["b"], row["a"].shape[0]
    try:
        # The allocator hands this block to matmul_tlx's output next: an element the kernel
        # does not write stays NaN and fails the check.
        poison = torch.full((size, size), math.nan, device="cuda", dtype=a.dtype)
        del poison
        out = ops.matmul_tlx(a, b, variant, overrides)
        torch.cuda.synchronize()
        entry["rel_err"] = rel_err(out, row["ref"])
        del out
        if entry["rel_err"] > tol:
            entry["wrong"] = True
            return entry
        entry["cublas_ms"], entry["ms"] = [], []
        for _ in range(rounds):
            entry["cublas_ms"].append(bench(lambda: a @ b))
            entry["ms"].append(bench(lambda: ops.matmul_tlx(a, b, variant, overrides)))
        ratios = sorted(c / t for c, t in zip(entry["cublas_ms"], entry["ms"]))
        entry["vs_cublas"] = ratios[len(ratios) // 2]
        entry["ratio_spread"] = ratios[-1] - ratios[0]
        entry["tflops"] = row["flops"] / (sorted(entry["ms"])[len(ratios) // 2] * 1e-3) / 1e12
    except Exception as e:  # a launch failure is a result, not a crash
        entry["error"] = f"{type(e).__name__}: {str(e)[:2000]}"
        torch.cuda.synchronize()
    return entry


def run(args):
    import torch

    import warpweave as ww
    from warpweave import ops

    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        print("sweep_gemm: needs an sm_90 GPU (the TLX GEMMs use wgmma, TMA, setmaxnreg)",
              file=sys.stderr)
        return 2
    only = set(args.only.split(",")) if args.only else None
    configs = [c for c in CONFIGS if only is None or c[0] in only]
    dtypes = [getattr(torch, d) for d in args.dtypes.split(",")]
    sizes = [int(s) for s in args.sizes.split(",")]
    tol = {torch.float16: 2e-3, torch.bfloat16: 1e-2}

    def bench(fn):
        return ww.testing.do_bench(fn, warmup=args.warmup, rep=args.rep, return_mode="median")

    props = torch.cuda.get_device_properties(0)
    print(f"# {props.name} ({props.multi_processor_count} SMs), torch {torch.__version__}")
    t0 = time.time()
    compile_errors = compile_all(torch, ops, configs, dtypes, sizes[0])
    print(f"# compiled {len(configs) * len(dtypes)} kernels in {time.time() - t0:.1f} s "
          f"({len(compile_errors)} failed)")

    # Every case's inputs stay resident and the configurations are the outer loop, so the
    # progress lines already hold whole configurations if a later one fails or hangs.
    results = []
    for size in sizes:
        for dt in dtypes:
            a = torch.randn(size, size, device="cuda", dtype=torch.float32).to(dt)
            b = torch.randn(size, size, device="cuda", dtype=torch.float32).to(dt)
            results.append({"case": f"{str(dt).replace('torch.', '')} {size}^3",
                            "flops": 2 * size ** 3, "dtype": dt, "a": a, "b": b,
                            "ref": a.float() @ b.float(), "configs": {}})
    for name, variant, overrides in configs:
        for row in results:
            row["configs"][name] = entry = measure(
                torch, ops, bench, row, variant, overrides, tol[row["dtype"]],
                compile_errors.get((name, row["dtype"])), args.rounds)
            if "vs_cublas" in entry:
                note = (f"{entry['tflops']:.0f} TFLOP/s, {entry['vs_cublas']:.3f}x cuBLAS "
                        f"(ratios spread {entry['ratio_spread']:.3f}; cuBLAS "
                        f"{min(entry['cublas_ms']):.3f}-{max(entry['cublas_ms']):.3f} ms)")
            else:
                note = "WRONG" if entry.get("wrong") else entry.get("error", "?")[:200]
            print(f"  {name:<18} {row['case']:<16} {note}", flush=True)
    for row in results:
        del row["a"], row["b"], row["ref"], row["dtype"]
        cublas = [t for e in row["configs"].values() for t in e.get("cublas_ms", [])]
        if cublas:
            row["cublas_tflops"] = row["flops"] / (sorted(cublas)[len(cublas) // 2] * 1e-3) / 1e12
            print(f"# {row['case']}: cuBLAS median {row['cublas_tflops']:.0f} TFLOP/s over "
                  f"{len(cublas)} timings, {min(cublas):.3f} to {max(cublas):.3f} ms")

    print_table(results, configs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": props.name, "sms": props.multi_processor_count,
                       "torch": torch.__version__, "results": results}, f, indent=1)
        print(f"# wrote {args.json}")
    return 0


def print_table(results, configs):
    """Median TFLOP/s (median ratio to the cuBLAS timings beside it) per configuration and case;
    the last column is the geomean of the ratios over the cases where the configuration ran
    correctly."""
    width = 18
    print(f"{'config':<18}" + "".join(f"{r['case']:>{width}}" for r in results) + "  geomean")
    print(f"{'cuBLAS':<18}" + "".join(f"{r.get('cublas_tflops', math.nan):>{width}.0f}"
                                        for r in results))
    for name, _, _ in configs:
        cells, ratios = [], []
        for r in results:
            e = r["configs"].get(name, {})
            if "tflops" in e:
                cells.append(f"{e['tflops']:.0f} ({e['vs_cublas']:.3f}x)")
                ratios.append(e["vs_cublas"])
            elif e.get("wrong"):
                cells.append(f"WRONG {e['rel_err']:.1e}")
            else:
                cells.append("error" if "error" in e else "-")
        geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")
        print(f"{name:<18}" + "".join(f"{c:>{width}}" for c in cells) + f"  {geo:.3f}")
    for r in results:
        for name, e in r["configs"].items():
            if "error" in e:
                print(f"# {name} {r['case']}: {e['error'].splitlines()[0][:300]}")


if __name__ == "__main__":
    sys.exit(run(parse_args()))
