"""Host time of the row wrappers of warpweave.ops (softmax, layer norm forward and backward) on
the GPU machine: per call, with the GPU kept busy, then cProfile's heaviest entries. The TMA row
wrappers cost 60-170 us per call on the H200 host (session 5), enough to make per-launch timings
of small rows host-bound; this says where that time goes, with and without launch plans (the
cProfile entries are of calls with them).

    python bench/profile_wrappers.py [--shape 65536x1024] [--calls 300] [--top 18] [--only softmax]
"""

import argparse
import cProfile
import io
import os
import pstats
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
for path in (ROOT, os.path.join(ROOT, "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench_kernels import gpu_torch, parse_shape  # noqa: E402

WRAPPERS = ("softmax", "layernorm_fwd", "layernorm_bwd")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", default="65536x1024", help="ROWSxCOLS of the fp16 input")
    p.add_argument("--calls", type=int, default=300, help="calls timed and profiled per wrapper")
    p.add_argument("--top", type=int, default=18, help="cProfile entries printed per wrapper")
    p.add_argument("--only", help="comma-separated wrappers (default: all)")
    args = p.parse_args(argv)
    try:
        args.shape = parse_shape(args.shape)
    except ValueError:
        p.error("--shape takes ROWSxCOLS, e.g. 65536x1024")
    args.only = tuple(args.only.split(",")) if args.only else WRAPPERS
    unknown = set(args.only) - set(WRAPPERS)
    if unknown:
        p.error(f"unknown wrappers {sorted(unknown)}; known: {', '.join(WRAPPERS)}")
    if args.calls < 1:
        p.error("--calls must be at least 1")
    return args


def calls(torch, ops, shape, names):
    """{label: zero-argument call}: each wrapper with its default (TMA on sm_90+) and with the
    register kernels (config tma=False)."""
    rows, cols = shape
    x = torch.randn(rows, cols, device="cuda", dtype=torch.float16)
    w = torch.randn(cols, device="cuda", dtype=torch.float16)
    b = torch.randn_like(w)
    dy = torch.randn_like(x)
    _, mean, rstd = ops.layernorm_fwd(x, w, b, 1e-5)
    made = {
        "softmax": lambda c: (lambda: ops.softmax(x, config=c)),
        "layernorm_fwd": lambda c: (lambda: ops.layernorm_fwd(x, w, b, 1e-5, config=c)),
        "layernorm_bwd": lambda c: (lambda: ops.layernorm_bwd(dy, x, w, mean, rstd, config=c)),
    }
    out = {}
    for name in names:
        out[name] = made[name](None)
        out[f"{name} (register kernels)"] = made[name](dict(tma=False))
    return out


def main(argv=None):
    args = parse_args(argv)
    torch = gpu_torch("profile_wrappers")
    if torch is None:
        return 2
    from warpweave import ops
    from warpweave.ops import _common

    for label, fn in calls(torch, ops, args.shape, args.only).items():
        for plans in (False, True):
            # Without launch plans every call takes the wrapper's full path.
            _common.LAUNCH_PLANS = plans
            for _ in range(10):
                fn()
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(args.calls):
                fn()
            host = (time.perf_counter() - start) / args.calls * 1e6
            torch.cuda.synchronize()
            total = (time.perf_counter() - start) / args.calls * 1e6
            print(f"## {label} at {args.shape[0]}x{args.shape[1]} fp16, "
                  f"{'launch plans' if plans else 'full path'}: {host:.1f} us of host time per "
                  f"call, {total:.1f} us per call with the GPU's")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.calls):
            fn()
        profile.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        stats = pstats.Stats(profile, stream=text)
        # Own time first (where the host spends it), then cumulative (which wrapper step).
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)
        print(text.getvalue().strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
