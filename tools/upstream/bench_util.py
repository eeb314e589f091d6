"""Timing for the side-by-side benchmarks of tools/upstream: medians of interleaved rounds (CUDA
events) and the GPU time of the kernels a call launches (torch.profiler)."""

from __future__ import annotations

import statistics


def time_rounds(fns, rounds, inner):
    """Median milliseconds of each callable, timed in interleaved rounds with CUDA events."""
    import torch
    times = [[] for _ in fns]
    for f in fns:  # warm-up (compiles, autotunes)
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for i, f in enumerate(fns):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                f()
            end.record()
            end.synchronize()
            times[i].append(start.elapsed_time(end) / inner)
    return [statistics.median(t) for t in times]


def kernel_ms(fn, calls=10):
    """GPU time per call of the kernels a callable launches (torch.profiler): (all kernels, the
    longest one alone). A wall time above the first means the GPU waited for the host; the
    second leaves out what the caller launches beside the GEMM (a tutorial's torch.zeros)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per_name = [e.device_time_total for e in prof.key_averages() if e.device_time_total > 0
                and e.device_type == torch.autograd.DeviceType.CUDA]
    return sum(per_name) / 1000.0 / calls, max(per_name, default=0) / 1000.0 / calls


def print_table(header, rows):
    """A Markdown table: the header's cells, then one line per row."""
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")
