"""The tuned ops of warpweave.ops on the GPU beside PyTorch, measured in one process on the same
inputs: matmul beside torch.matmul (cuBLAS); fp8 scaled_mm beside torch._scaled_mm (cuBLASLt),
each with its default use_fast_accum=False and, in rows marked "fast_accum", both with True;
MoE grouped_mm beside torch._grouped_mm (CUTLASS) and a loop of cuBLAS matmuls (torch.mm per
group, group sizes known on the host: the loop's host work is timed, its size bookkeeping is
not), in its ragged-M form (the layer's forward) and, as "grouped_mm_k", its ragged-K form (the
weight gradient, torch._grouped_mm(x.t(), dy, offs)); attention forward and backward beside
scaled_dot_product_attention (cuDNN where torch has it).

    python bench/bench_gemms.py [--quick]
                                [--only matmul,scaled_mm,grouped_mm,grouped_mm_k,attention]
                                [--tuning both|on|off] [--rounds 5] [--json out.json]
                                [--plot out.png]

--tuning: each warpweave column runs with per-shape tuning on ("tuned": the first call on a
shape times the candidate configurations, warpweave.ops._tuning, outside the timed rounds),
off ("fixed": WARPWEAVE_OPS_TUNING=0, the fixed configurations), or both side by side (the
default); the summary prints each against PyTorch and the configuration tuning chose. The
tuning results land in the disk cache (WARPWEAVE_CACHE_DIR/autotune): a second run reuses them.

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
DEV = "cuda"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer cases and rounds")
    p.add_argument("--only", default="matmul,scaled_mm,grouped_mm,grouped_mm_k,attention",
                   help="comma-separated: matmul, scaled_mm, grouped_mm, grouped_mm_k (the "
                        "ragged-K form: the MoE weight gradient), attention")
    p.add_argument("--tuning", choices=("both", "on", "off"), default="both",
                   help="warpweave's columns with per-shape tuning on, off, or both")
    p.add_argument("--rounds", type=int, default=None, help="interleaved rounds per case")
    p.add_argument("--json", metavar="PATH", help="write the results as JSON here")
    p.add_argument("--plot", metavar="PATH",
                   help="draw each case's speed against PyTorch's fastest way as a PNG here "
                        "(needs matplotlib); with --json alone, beside the JSON")
    return p.parse_args(argv)


def tuning_columns(name, fn, tuning):
    """{column: callable} for warpweave column `name`: fn with WARPWEAVE_OPS_TUNING=0 ("name
    fixed") and / or with tuning on ("name tuned")."""
    def under(value):
        def call():
            saved = os.environ.get("WARPWEAVE_OPS_TUNING")
            os.environ["WARPWEAVE_OPS_TUNING"] = value
            try:
                return fn()
            finally:
                if saved is None:
                    del os.environ["WARPWEAVE_OPS_TUNING"]
                else:
                    os.environ["WARPWEAVE_OPS_TUNING"] = saved
        return call

    out = {}
    if tuning in ("off", "both"):
        out[f"{name} fixed"] = under("0")
    if tuning in ("on", "both"):
        out[f"{name} tuned"] = under("1")
    return out


def checked(columns, error, limit, tuned_ops):
    """Runs each warpweave column once, outside the timed rounds (a tuned column's first call
    on the shape tunes it): notes of results off PyTorch's by more than `limit` (error(result)
    -> relative error) and of the configurations tuning chose for the ops `tuned_ops`."""
    from warpweave.ops import _tuning

    notes = []
    for name, fn in columns.items():
        if not name.startswith("ww"):
            continue
        err = error(fn())
        if err > limit:
            notes.append(f"{name} WRONG (rel err {err:.1e})")
        if name.endswith("tuned"):
            for op in tuned_ops:
                d = _tuning.decisions.get(op)
                if d is not None:
                    notes.append(f"{name} {op}: {d.chosen!r} ({d.how}, of "
                                 f"{len(d.candidates)})")
    return notes


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


def measure(rows, op, case, columns, error, limit, tuned_ops, flops, rounds, ww):
    """Checks and times `columns` (the references first, then warpweave's "ww..." ones), adds
    the row (ratios against the fastest reference) to `rows` and prints it."""
    notes = checked(columns, error, limit, tuned_ops)
    times = time_columns(columns, rounds, ww)
    refs = [k for k in columns if not k.startswith("ww")]
    baseline = min(refs, key=lambda k: statistics.median(times[k]))
    row = {"op": op, "case": case,
           "ms": {k: statistics.median(v) for k, v in times.items()},
           "tflops": {k: tflops(flops, statistics.median(v)) for k, v in times.items()},
           "ratio": {k: ratio(times, k, baseline) for k in columns if k.startswith("ww")},
           "baseline": baseline, "notes": notes}
    rows.append(row)
    print_row(row)


def scaled_mm_cases(quick):
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 8192, 1024),
              (2048, 28672, 8192), (8192, 1024, 8192), (512, 8192, 8192)]
    return shapes[:3] if quick else shapes


def bench_scaled_mm(torch, ww, ops, rounds, quick, rows, tuning):
    dev = DEV
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
            # Like with like: torch's default (use_fast_accum=False: fp8 partial sums promoted
            # into fp32) beside ours (the same default), then a row of fast accumulation on
            # both sides ("fast_accum": one wgmma accumulator across K).
            for fast in (False, True):
                columns = {
                    "torch._scaled_mm": lambda fast=fast: torch._scaled_mm(
                        a, b, sa, sb, out_dtype=out, use_fast_accum=fast),
                    **tuning_columns("ww", lambda fast=fast: ops.scaled_mm(
                        a, b, sa, sb, out_dtype=out, use_fast_accum=fast), tuning),
                    **tuning_columns("ww tma", lambda fast=fast: ops.scaled_mm(
                        a, b, sa, sb, out_dtype=out, kernel="tma", use_fast_accum=fast), tuning),
                }
                ref = columns["torch._scaled_mm"]()
                case = f"{M}x{N}x{K} {recipe}" + (" fast_accum" if fast else "")
                measure(rows, "scaled_mm", case, columns, lambda got, ref=ref: rel_err(got, ref),
                        5e-3, ("scaled_mm",), 2 * M * N * K, rounds, ww)


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


def bench_grouped_mm(torch, ww, ops, rounds, quick, rows, tuning):
    dev = DEV
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
            **tuning_columns("ww", lambda: ops.grouped_mm(a, b, offs), tuning),
        }
        ref = columns["torch._grouped_mm"]()
        measure(rows, "grouped_mm", f"{name} G={G} M={M} K={K} N={N}", columns,
                lambda got: rel_err(got, ref), 1e-2, ("grouped_mm",), 2 * M * N * K, rounds, ww)


def bench_grouped_mm_ragged_k(torch, ww, ops, rounds, quick, rows, tuning):
    """The MoE layer's weight gradient, the ragged-K form: dW[g] = x[tokens of g]^T @
    dy[tokens of g] (x [T, K] the layer's input, dy [T, N] its output's gradient), as
    torch._grouped_mm(x.t(), dy, offs) [G, K, N] with the tokens (T, the ragged K) split by
    moe_cases' sizes: Mixtral-like G=8, M=4096, K_total=16384, N=14336; DeepSeek-like G=64,
    M=2048, K_total=32768, N=1408."""
    dev = DEV
    bf16 = torch.bfloat16
    for name, G, M, N, sizes in moe_cases(quick):
        T = sum(sizes)
        offs = torch.tensor(sizes, device=dev).cumsum(0).to(torch.int32)
        x = torch.randn(T, M, device=dev, dtype=bf16)
        dy = torch.randn(T, N, device=dev, dtype=bf16) / T ** 0.5
        bounds = []
        start = 0
        for s in sizes:
            bounds.append((start, start + s))
            start += s
        out_loop = torch.zeros(G, M, N, device=dev, dtype=bf16)  # (empty groups stay zero)

        def loop():
            for g, (s, e) in enumerate(bounds):
                if e > s:
                    torch.mm(x[s:e].t(), dy[s:e], out=out_loop[g])
            return out_loop

        columns = {
            "torch._grouped_mm": lambda: torch._grouped_mm(x.t(), dy, offs),
            "cuBLAS loop": loop,
            **tuning_columns("ww", lambda: ops.grouped_mm(x.t(), dy, offs), tuning),
        }
        ref = columns["torch._grouped_mm"]()
        measure(rows, "grouped_mm_k", f"{name} dW G={G} M={M} K={T} N={N}", columns,
                lambda got: rel_err(got, ref), 1e-2, ("grouped_mm_ragged_k",), 2 * M * N * T,
                rounds, ww)


def matmul_cases(quick):
    """Issue 21's shapes for ops.matmul (square, and the long / wide products of an MLP)."""
    shapes = [(4096, 4096, 4096), (8192, 8192, 8192), (2048, 2048, 2048),
              (16384, 4096, 1024), (4096, 14336, 4096), (512, 4096, 4096)]
    return shapes[:2] if quick else shapes


def bench_matmul(torch, ww, ops, rounds, quick, rows, tuning):
    dev = DEV
    for dtype in (torch.float16, torch.bfloat16):
        for (M, N, K) in matmul_cases(quick):
            a = torch.randn(M, K, device=dev, dtype=dtype)
            b = torch.randn(K, N, device=dev, dtype=dtype)
            columns = {"cuBLAS": lambda: torch.matmul(a, b),
                       **tuning_columns("ww", lambda: ops.matmul(a, b), tuning)}
            ref = columns["cuBLAS"]()
            measure(rows, "matmul", f"{M}x{N}x{K} {str(dtype)[6:]}", columns,
                    lambda got: rel_err(got, ref), 1e-2, ("matmul",), 2 * M * N * K, rounds, ww)


def attention_cases(quick):
    """(Z, H, N_CTX, HEAD_DIM, causal): issue 21's backward targets (S >= 4k, D 64 / 128)."""
    cases = [(4, 32, 4096, 128, False), (4, 32, 4096, 128, True), (4, 32, 4096, 64, False),
             (4, 32, 4096, 64, True), (1, 16, 16384, 128, True), (8, 16, 1024, 64, True)]
    return cases[:2] if quick else cases


def bench_attention(torch, ww, ops, rounds, quick, rows, tuning):
    dev = DEV
    F = torch.nn.functional
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backends = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]
    except ImportError:
        sdpa_kernel = backends = None
    if dev != "cuda":
        sdpa_kernel = None
    for (Z, H, S, D, causal) in attention_cases(quick):
        q, k, v, do = (torch.randn(Z, H, S, D, device=dev, dtype=torch.float16)
                       for _ in range(4))
        qr, kr, vr = (t.clone().requires_grad_() for t in (q, k, v))

        def sdpa():
            if sdpa_kernel is None:
                return F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)
            with sdpa_kernel(backends):
                return F.scaled_dot_product_attention(qr, kr, vr, is_causal=causal)

        ref_out = sdpa()
        ref_grads = torch.autograd.grad(ref_out, (qr, kr, vr), do, retain_graph=True)
        out, lse = ops.attention(q, k, v, causal=causal, return_lse=True)
        for direction in ("fwd", "bwd"):
            if direction == "fwd":
                columns = {"SDPA": sdpa, **tuning_columns(
                    "ww", lambda: ops.attention(q, k, v, causal=causal), tuning)}
                error = lambda got: rel_err(got, ref_out)  # noqa: E731
                names = ("attention",)
            else:
                columns = {"SDPA": lambda: torch.autograd.grad(ref_out, (qr, kr, vr), do,
                                                               retain_graph=True),
                           **tuning_columns("ww", lambda: ops.attention_bwd(
                               do, q, k, v, out, lse, causal=causal), tuning)}
                if torch.cuda.get_device_capability() == (9, 0) and D in (64, 128) and \
                        S % 128 == 0:
                    # The Hopper warp-specialized backward alone (kernels/hopper/
                    # attention_bwd_ws.py), its fixed ring depth and tuned among its depths.
                    columns.update(tuning_columns("ww tlx", lambda: ops.attention_bwd(
                        do, q, k, v, out, lse, causal=causal, kernel="tlx"), tuning))
                error = lambda got: max(rel_err(g, r) for g, r in zip(got, ref_grads))  # noqa
                names = ("attention_bwd_dkdv", "attention_bwd_dq", "attention_bwd_kernel",
                         "attention_bwd_tlx")
            flops = 4 * Z * H * S * S * D * (0.5 if causal else 1) * (2.5 if direction == "bwd"
                                                                       else 1)
            measure(rows, f"attn {direction}",
                    f"Z={Z} H={H} S={S} D={D}{' causal' if causal else ''}", columns, error,
                    2e-2, names, flops, rounds, ww)


def print_row(row):
    cols = "  ".join(f"{k} {row['ms'][k]:.3f} ms ({row['tflops'][k]:.0f} TF/s)"
                     for k in row["ms"])
    ratios = "  ".join(f"{k} {v:.2f}x" for k, v in row["ratio"].items())
    print(f"{row['op']:<11} {row['case']:<48} {cols}\n{'':<11} vs {row['baseline']}: {ratios}"
          f"{'  ' + '; '.join(row['notes']) if row['notes'] else ''}", flush=True)


BENCHES = {"matmul": bench_matmul, "scaled_mm": bench_scaled_mm,
           "grouped_mm": bench_grouped_mm, "grouped_mm_k": bench_grouped_mm_ragged_k,
           "attention": bench_attention}


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
    unknown = only - set(BENCHES)
    if unknown:
        sys.exit(f"--only: unknown {sorted(unknown)}; expected some of {', '.join(BENCHES)}")
    for name, bench in BENCHES.items():
        if name in only:
            bench(torch, ww, ops, rounds, args.quick, rows, args.tuning)
    print("\nsummary (speed ratio, median of rounds; > 1: warpweave faster)")
    print(f"{'op':<11} {'case':<40} {'ratio':>34}  baseline")
    for row in rows:
        r = "  ".join(f"{k} {v:.2f}" for k, v in row["ratio"].items())
        print(f"{row['op']:<11} {row['case']:<40} {r:>34}  {row['baseline']}")
        for note in row["notes"]:
            print(f"{'':<11}   {note}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    plot_path = args.plot or (os.path.splitext(args.json)[0] + ".png" if args.json else None)
    if plot_path:
        write_plot(rows, f"{torch.cuda.get_device_name()}, torch {torch.__version__}", plot_path)


def write_plot(rows, title, path):
    """One bar per warpweave column and case: its speed over the fastest PyTorch way's (the
    row's baseline), grouped by op; a line at 1.0 marks parity. Returns whether it was drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("# matplotlib is not installed: no plot")
        return False
    columns = []
    for row in rows:
        columns += [c for c in row["ratio"] if c not in columns]
    if not rows or not columns:
        print("# nothing measured: no plot")
        return False
    fig, ax = plt.subplots(figsize=(max(8, 0.7 * len(rows)), 5.5))
    width = 0.8 / len(columns)
    for i, column in enumerate(columns):
        xs = [j + (i - (len(columns) - 1) / 2) * width for j in range(len(rows))]
        ax.bar(xs, [row["ratio"].get(column, 0.0) for row in rows], width, label=column)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{row['op']}\n{row['case']}\n(vs {row['baseline']})" for row in rows],
                       rotation=60, ha="right", fontsize=6)
    ax.set_ylabel("speed relative to PyTorch's fastest way")
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"# wrote {path}")
    return True


if __name__ == "__main__":
    main()
