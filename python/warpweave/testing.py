"""`ww.testing`: timing kernels on the GPU (`do_bench`, `do_bench_cudagraph`), with Triton's
conventions: times in milliseconds, CUDA events, the L2 cache flushed before every run."""

from __future__ import annotations


__all__ = ["do_bench", "do_bench_cudagraph", "quantiles_of"]

_RETURN_MODES = ("min", "max", "mean", "median", "all")


def quantiles_of(times, quantiles):
    """Linear-interpolated quantiles of `times` (like torch.quantile), one per q in [0, 1]."""
    xs = sorted(times)
    out = []
    for q in quantiles:
        if not 0 <= q <= 1:
            raise ValueError(f"quantile {q} is not in [0, 1]")
        pos = q * (len(xs) - 1)
        lo = int(pos)
        hi = min(lo + 1, len(xs) - 1)
        out.append(xs[lo] + (xs[hi] - xs[lo]) * (pos - lo))
    return out


def _summarize(times, quantiles, return_mode):
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: expected one of {_RETURN_MODES}")
    if quantiles is not None:
        qs = quantiles_of(times, quantiles)
        return qs[0] if len(qs) == 1 else qs
    if return_mode == "all":
        return list(times)
    import statistics  # here, not at import: it costs `import warpweave` a few ms

    return {"min": min, "max": max, "mean": statistics.fmean,
            "median": statistics.median}[return_mode](times)


_l2_flush = {}


def _flush_buffer(torch, device):
    buf = _l2_flush.get(device)
    if buf is None:
        # 256 MB is well beyond the L2 of any current GPU (60 MB on H200).
        buf = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=device)
        _l2_flush[device] = buf
    return buf


_FLUSH_MODES = ("write", "read", "none")


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean",
             flush="write"):
    """Runs `fn` for about `warmup` ms, then about `rep` ms of timed runs, each after an L2 flush
    and each timed alone with CUDA events; returns ms per run summarized by `return_mode`
    ('min', 'max', 'mean', 'median', 'all') or the requested `quantiles`.

    flush: how L2 is emptied before each run. 'write' (Triton's convention) zeroes a 256 MB
    buffer, which leaves L2 full of dirty lines that the timed run then writes back to memory (up
    to the L2's size of extra traffic, charged to `fn`); 'read' sums the buffer instead, leaving
    clean lines that `fn` evicts for free; 'none' times with whatever L2 holds."""
    import torch

    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: expected one of {_RETURN_MODES}")
    if flush not in _FLUSH_MODES:
        raise ValueError(f"flush={flush!r}: expected one of {_FLUSH_MODES}")
    fn()
    torch.cuda.synchronize()
    buf = _flush_buffer(torch, torch.cuda.current_device())

    def flush_l2():
        if flush == "write":
            buf.zero_()
        elif flush == "read":
            torch.sum(buf)

    # Estimate one run's time to size the warm-up and measurement loops.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        flush_l2()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate = max(start.elapsed_time(end) / 5, 1e-6)
    n_warmup = max(1, int(warmup / estimate))
    n_repeat = max(1, int(rep / estimate))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_repeat)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_repeat):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        flush_l2()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    return _summarize(times, quantiles, return_mode)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Like do_bench, but captures `fn` in a CUDA graph (on a side stream) and times replays of
    the graph, which removes launch overhead from the measurement."""
    import torch

    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: expected one of {_RETURN_MODES}")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()  # compile and load outside the capture
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate = max(start.elapsed_time(end) / 5, 1e-6)
        n_inner = max(1, int(rep / estimate))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(n_inner):
                if grad_to_none is not None:
                    for x in grad_to_none:
                        x.grad = None
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            graph.replay()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e) / n_inner)
    return _summarize(times, quantiles, return_mode)
