"""fp8 scaled GEMM and MoE grouped GEMM on the GPU: warpweave.ops.scaled_mm beside
torch._scaled_mm (cuBLASLt), and warpweave.ops.grouped_mm beside torch._grouped_mm (CUTLASS) and
a loop of cuBLAS matmuls (torch.mm per group, group sizes known on the host: the loop's host
work is timed, its size bookkeeping is not), measured in one process on the same inputs.

    python bench/bench_gemms.py [--quick] [--only scaled_mm,grouped_mm] [--rounds 5]
                                [--json out.json]

Each case's columns are timed in ROUNDS interleaved rounds (each a ww.testing.do_bench median,
L2 flushed before each run); a ratio is the median of the per-round ratios (ours / theirs in
speed: > 1 is faster than PyTorch), so clock drift moves both sides together. Outputs are
checked against PyTorch's once per case; a wrong result is marked in the table. Timings are
never asserted (this is not a test). Issue 21's targets: scaled_mm >= 0.95x torch._scaled_mm,
grouped_mm >= 1.0x the best PyTorch way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer cases and rounds")
    p.add_argument("--only", default="scaled_mm,grouped_mm",
                   help="comma-separated: scaled_mm, grouped_mm")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds per case")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    return p.parse_args(argv)


def rel_err(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()


def time_columns(columns, rounds, ww):
    """{name: [ms per round]} for callables timed in interleaved rounds."""
    times = {name: [] for name in columns}
    for fn in columns.values():  # compile / warm outside the rounds
        fn()
    for _ in range(rounds):
        for name, fn in columns.items():
            times[name].append(ww.testing.do_bench(fn, warmup=10, rep=50, return_mode="median"))
    return times


def ratio(times, ours, theirs):
    """Median over rounds of theirs / ours (speed ratio: > 1 means ours is faster)."""
    return statistics.median(t / o for o, t in zip(times[ours], times[theirs]))


def tflops(flops, ms):
    return flops / (ms * 1e-3) / 1e12


def scaled_mm_cases(quick):
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 1024),
              (2048, 28672, 8192), (8192, 1024, 8192), (512, 8192, 8192)]
    return shapes[:3] if quick else shapes


def bench_scaled_mm(torch, ww, ops, rounds, quick, rows):
    dev = "cuda"
    e4m3 = torch.float8_e4m3fn
    for (M, N, K) in scaled_mm_cases(quick):
        a = (torch.randn(M, K, device=dev) * 0.5).to(e4m3)
        bt = (torch.randn(N, K, device=dev) * 0.5).to(e4m3)
        b = bt.t()
        for recipe in ("tensorwise", "rowwise"):
            if recipe == "tensorwise":
                sa = torch.tensor(0.5, device=dev)
                sb = torch.tensor(2.0, device=dev)
            else:
                sa = torch.rand(M, 1, device=dev) + 0.5
                sb = torch.rand(1, N, device=dev) + 0.5
            out = torch.bfloat16
            columns = {
                "torch._scaled_mm": lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=out),
                "ww tl": lambda: ops.scaled_mm(a, b, sa, sb, out_dtype=out),
                "ww tma": lambda: ops.scaled_mm(a, b, sa, sb, out_dtype=out, kernel="tma"),
            }
            ref = columns["torch._scaled_mm"]()
            notes = []
            for name in ("ww tl", "ww tma"):
                err = rel_err(columns[name](), ref)
                if err > 5e-3:
                    notes.append(f"{name} WRONG (rel err {err:.1e})")
            times = time_columns(columns, rounds, ww)
            flops = 2 * M * N * K
            row = {"op": "scaled_mm", "case": f"{M}x{N}x{K} {recipe}",
                   "ms": {k: statistics.median(v) for k, v in times.items()},
                   "tflops": {k: tflops(flops, statistics.median(v)) for k, v in times.items()},
                   "ratio": {k: ratio(times, k, "torch._scaled_mm") for k in ("ww tl", "ww tma")},
                   "baseline": "torch._scaled_mm", "notes": notes}
            rows.append(row)
            print_row(row)


def moe_cases(quick):
    """(name, G, K, N, sizes): Mixtral-like (8 experts, 4096 -> 14336) and DeepSeek-like (64 small
    experts, 2048 -> 1408) with uniform, skewed and some-empty token splits."""
    import random

    rng = random.Random(0)

    def skewed(G, total):
        w = [rng.paretovariate(1.2) for _ in range(G)]
        sizes = [int(total * x / sum(w)) for x in w]
        sizes[0] += total - sum(sizes)
        return sizes

    def some_empty(G, total):
        live = [g for g in range(G) if g % 4 != 1]  # every 4th expert gets no tokens
        sizes = [total // len(live) if g in live else 0 for g in range(G)]
        sizes[0] += total - sum(sizes)
        return sizes

    cases = [("mixtral uniform", 8, 4096, 14336, [2048] * 8),
             ("mixtral skewed", 8, 4096, 14336, skewed(8, 16384)),
             ("deepseek uniform", 64, 2048, 1408, [512] * 64),
             ("deepseek skewed", 64, 2048, 1408, skewed(64, 32768)),
             ("deepseek some empty", 64, 2048, 1408, some_empty(64, 32768)),
             ("small tokens", 64, 2048, 1408, [64] * 64)]
    return cases[::2] if quick else cases


def bench_grouped_mm(torch, ww, ops, rounds, quick, rows):
    dev = "cuda"
    bf16 = torch.bfloat16
    for name, G, K, N, sizes in moe_cases(quick):
        M = sum(sizes)
        offs = torch.tensor(sizes, device=dev).cumsum(0).to(torch.int32)
        a = torch.randn(M, K, device=dev, dtype=bf16)
        b = torch.randn(G, K, N, device=dev, dtype=bf16) / K ** 0.5
        bounds = []
        start = 0
        for s in sizes:
            bounds.append((start, start + s))
            start += s
        out_loop = torch.empty(M, N, device=dev, dtype=bf16)

        def loop():
            for g, (s, e) in enumerate(bounds):
                if e > s:
                    torch.mm(a[s:e], b[g], out=out_loop[s:e])
            return out_loop

        columns = {
            "torch._grouped_mm": lambda: torch._grouped_mm(a, b, offs),
            "cuBLAS loop": loop,
            "ww": lambda: ops.grouped_mm(a, b, offs),
        }
        ref = columns["torch._grouped_mm"]()
        notes = []
        err = rel_err(columns["ww"](), ref)
        if err > 1e-2:
            notes.append(f"ww WRONG (rel err {err:.1e})")
        times = time_columns(columns, rounds, ww)
        best = min(("torch._grouped_mm", "cuBLAS loop"),
                   key=lambda k: statistics.median(times[k]))
        flops = 2 * M * N * K
        row = {"op": "grouped_mm", "case": f"{name} G={G} M={M} K={K} N={N}",
               "ms": {k: statistics.median(v) for k, v in times.items()},
               "tflops": {k: tflops(flops, statistics.median(v)) for k, v in times.items()},
               "ratio": {"ww": ratio(times, "ww", best)}, "baseline": best, "notes": notes}
        rows.append(row)
        print_row(row)


def print_row(row):
    cols = "  ".join(f"{k} {row['ms'][k]:.3f} ms ({row['tflops'][k]:.0f} TF/s)"
                     for k in row["ms"])
    ratios = "  ".join(f"{k} {v:.2f}x" for k, v in row["ratio"].items())
    print(f"{row['op']:<11} {row['case']:<48} {cols}\n{'':<11} vs {row['baseline']}: {ratios}"
          f"{'  ' + '; '.join(row['notes']) if row['notes'] else ''}", flush=True)


def main(argv=None):
    args = parse_args(argv)
    import torch

    import warpweave as ww
    from warpweave import ops

    if not torch.cuda.is_available():
        sys.exit("bench_gemms.py needs a CUDA GPU")
    rounds = args.rounds or (3 if args.quick else 5)
    print(f"{torch.cuda.get_device_name()}  torch {torch.__version__}  rounds {rounds}")
    rows = []
    only = set(args.only.split(","))
    if "scaled_mm" in only:
        bench_scaled_mm(torch, ww, ops, rounds, args.quick, rows)
    if "grouped_mm" in only:
        bench_grouped_mm(torch, ww, ops, rounds, args.quick, rows)
    print("\nsummary (speed ratio, median of rounds; > 1: warpweave faster)")
    print(f"{'op':<11} {'case':<48} {'ratio':>16}  baseline")
    for row in rows:
        r = "  ".join(f"{k} {v:.2f}" for k, v in row["ratio"].items())
        print(f"{row['op']:<11} {row['case']:<48} {r:>16}  {row['baseline']}"
              f"{'  ' + '; '.join(row['notes']) if row['notes'] else ''}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
