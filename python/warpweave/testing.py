"""`ww.testing`: timing kernels on the GPU (`do_bench`, `do_bench_cudagraph`), with Triton's
conventions: times in milliseconds, CUDA events, the L2 cache flushed before every run; and
Triton's benchmark reports (`perf_report`, `Benchmark`) and `assert_close`.

Without a CUDA GPU (or without PyTorch), do_bench and do_bench_cudagraph time `fn` with the
host's clock instead (no L2 flush, no graph): the interpreter's speed, useful only to check that a
benchmark script runs."""

from __future__ import annotations

import math
import os
import time

__all__ = ["do_bench", "do_bench_cudagraph", "quantiles_of", "perf_report", "Benchmark", "Mark",
           "assert_close"]

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


def _flush_buffer(torch, device):
    # 256 MB is well beyond the L2 of any current GPU (60 MB on H200). Allocated per benchmark, as
    # Triton's do_bench does, so that no tensor outlives it (torch's caching allocator keeps the
    # memory for the next one); a module-level cache held 256 MB of live tensors forever.
    return torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device=device)


_FLUSH_MODES = ("write", "read", "none")


def _check_bench_args(fn, **times):
    """TypeError / ValueError naming a bad do_bench argument, before anything runs."""
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be callable, got {type(fn).__name__}")
    for name, value in times.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"do_bench: {name} is a time in ms, got {type(value).__name__}")
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"do_bench: {name}={value!r} must be a finite time >= 0 ms")


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean",
             flush="write"):
    """Runs `fn` for about `warmup` ms, then about `rep` ms of timed runs, each after an L2 flush
    and each timed alone with CUDA events; returns ms per run summarized by `return_mode`
    ('min', 'max', 'mean', 'median', 'all') or the requested `quantiles`.

    flush: how L2 is emptied before each run. 'write' (Triton's convention) zeroes a 256 MB
    buffer, which leaves L2 full of dirty lines that the timed run then writes back to memory (up
    to the L2's size of extra traffic, charged to `fn`); 'read' sums the buffer instead, leaving
    clean lines that `fn` evicts for free; 'none' times with whatever L2 holds."""
    _check_bench_args(fn, warmup=warmup, rep=rep)
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: expected one of {_RETURN_MODES}")
    if flush not in _FLUSH_MODES:
        raise ValueError(f"flush={flush!r}: expected one of {_FLUSH_MODES}")
    torch = _cuda_torch()
    if torch is None:
        return _host_bench(fn, warmup, rep, grad_to_none, quantiles, return_mode)
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
    _check_bench_args(fn, rep=rep)
    if return_mode not in _RETURN_MODES:
        raise ValueError(f"return_mode={return_mode!r}: expected one of {_RETURN_MODES}")
    torch = _cuda_torch()
    if torch is None:
        return _host_bench(fn, 0, rep, grad_to_none, quantiles, return_mode)
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


# ------------------------------------------------------------------------------------------------
# Without a GPU: the host's clock
# ------------------------------------------------------------------------------------------------


def _cuda_torch():
    """PyTorch when it is installed and sees a CUDA GPU, else None."""
    try:
        import torch
    except ImportError:
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except Exception:  # a broken driver: time on the host rather than fail the script
        return None


def _host_bench(fn, warmup, rep, grad_to_none, quantiles, return_mode):
    """do_bench's contract timed by time.perf_counter: about `warmup` ms of untimed runs, then
    runs timed one by one for about `rep` ms (at least one each)."""
    fn()
    start = time.perf_counter()
    fn()
    estimate = max((time.perf_counter() - start) * 1e3, 1e-6)
    for _ in range(min(max(0, int(warmup / estimate)), 1000)):
        fn()
    times = []
    for _ in range(min(max(1, int(rep / estimate)), 1000)):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return _summarize(times, quantiles, return_mode)


# ------------------------------------------------------------------------------------------------
# assert_close
# ------------------------------------------------------------------------------------------------


def _to_numpy(x):
    import numpy as np

    if type(x).__module__.startswith("torch") and hasattr(x, "detach"):
        t = x.detach()
        if str(t.dtype) in ("torch.bfloat16",) or str(t.dtype).startswith("torch.float8"):
            t = t.float()
        return t.cpu().numpy()
    return np.asarray(x)


def assert_close(x, y, atol=None, rtol=None, err_msg=""):
    """Asserts |x - y| <= atol + rtol * |y| elementwise (NaNs equal), as Triton's: atol defaults
    to 1e-2 and rtol to 0; either may be a function of x's dtype. x and y may be scalars, lists,
    NumPy arrays or torch tensors (bfloat16 / float8 compared as float32)."""
    import numpy as np

    dtype = getattr(x, "dtype", None)
    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    atol = atol(dtype) if callable(atol) else atol
    rtol = rtol(dtype) if callable(rtol) else rtol
    a, b = _to_numpy(x), _to_numpy(y)
    if a.size > 1 or b.size > 1:
        np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, equal_nan=True, err_msg=err_msg)
        return
    if not np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True):
        raise AssertionError(f"{err_msg} {a} is not close to {b} (atol={atol}, rtol={rtol})")


# ------------------------------------------------------------------------------------------------
# perf_report / Benchmark
# ------------------------------------------------------------------------------------------------


class Benchmark:
    """One benchmark table (and plot) of `perf_report`: for each x in `x_vals` (a value for all
    `x_names`, or a tuple of one value per name) and each line value in `line_vals` (passed as
    `line_arg`), the decorated function is called with those and `args`; it returns a number or a
    (mean, min, max) triple, tabulated under `line_names`."""

    def __init__(self, x_names, x_vals, line_arg, line_vals, line_names, plot_name, args,
                 xlabel="", ylabel="", x_log=False, y_log=False, styles=None):
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args or {})
        self.xlabel = xlabel
        self.ylabel = ylabel
        self.x_log = x_log
        self.y_log = y_log
        self.styles = styles


class _Table:
    """The results of one Benchmark when pandas is not installed: `columns`, `rows` (lists),
    `to_string()`, `to_csv(path)`, and column access by name."""

    def __init__(self, columns):
        self.columns = list(columns)
        self.rows = []

    def __getitem__(self, name):
        i = self.columns.index(name)
        return [r[i] for r in self.rows]

    def __len__(self):
        return len(self.rows)

    @staticmethod
    def _cell(v, precision=None):
        if v is None:
            return "NaN"
        if isinstance(v, float):
            return f"{v:.{precision}f}" if precision is not None else f"{v:.6g}"
        return str(v)

    def to_string(self):
        cells = [[""] + self.columns]
        cells += [[str(i)] + [self._cell(v) for v in r] for i, r in enumerate(self.rows)]
        widths = [max(len(row[j]) for row in cells) for j in range(len(cells[0]))]
        return "\n".join("  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells)

    def to_csv(self, path, float_format=None, index=False):
        precision = None
        if float_format:
            digits = "".join(ch for ch in float_format if ch.isdigit())
            precision = int(digits) if digits else None
        with open(path, "w", encoding="utf-8") as f:
            f.write(",".join(self.columns) + "\n")
            for r in self.rows:
                f.write(",".join(self._cell(v, precision) for v in r) + "\n")

    def __repr__(self):
        return self.to_string()


def _make_table(columns, rows):
    try:
        import pandas as pd
    except ImportError:
        t = _Table(columns)
        t.rows = [list(r) for r in rows]
        return t
    return pd.DataFrame(rows, columns=columns)


def _bench_points(x_vals):
    # WARPWEAVE_BENCH_POINTS=N keeps the first N sizes of every table: harnesses that run whole
    # tutorials to check that they work need not time every size.
    limit = os.environ.get("WARPWEAVE_BENCH_POINTS")
    return list(x_vals)[:int(limit)] if limit else list(x_vals)


class Mark:
    """A function decorated with perf_report: `.run(...)` runs its benchmarks."""

    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def _measure(self, bench: Benchmark, **kwargs):
        means = [f"{n} ({bench.ylabel})" for n in bench.line_names]
        mins = [f"{n}-min ({bench.ylabel})" for n in bench.line_names]
        maxs = [f"{n}-max ({bench.ylabel})" for n in bench.line_names]
        rows = []
        for x in _bench_points(bench.x_vals):
            xs = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            if len(xs) != len(bench.x_names):
                raise ValueError(f"benchmark '{bench.plot_name}': x value {x!r} does not give one "
                                 f"value for each of {bench.x_names}")
            x_args = dict(zip(bench.x_names, xs))
            mean_row, min_row, max_row = [], [], []
            for y in bench.line_vals:
                ret = self.fn(**x_args, **{bench.line_arg: y}, **bench.args, **kwargs)
                if isinstance(ret, (tuple, list)) and len(ret) == 3:
                    mean, lo, hi = ret
                else:
                    mean, lo, hi = ret, None, None
                mean_row.append(mean)
                min_row.append(lo)
                max_row.append(hi)
            rows.append(xs + mean_row + min_row + max_row)
        return bench.x_names + means + mins + maxs, rows, means, mins, maxs

    def _plot(self, bench, columns, rows, means, mins, maxs, show_plots, save_path):
        try:
            import matplotlib.pyplot as plt
        except ImportError:
            return  # plots need matplotlib; the table is still printed and saved
        col = {c: [r[i] for r in rows] for i, c in enumerate(columns)}
        x = col[bench.x_names[0]]
        plt.figure()
        ax = plt.subplot()
        for i, (m, lo, hi) in enumerate(zip(means, mins, maxs)):
            color = bench.styles[i][0] if bench.styles else None
            style = bench.styles[i][1] if bench.styles else None
            ax.plot(x, col[m], label=m, color=color, ls=style)
            if all(v is not None for v in col[lo] + col[hi]):
                ax.fill_between(x, [float(v) for v in col[lo]], [float(v) for v in col[hi]],
                                alpha=0.15, color=color)
        ax.legend()
        ax.set_xlabel(bench.xlabel or bench.x_names[0])
        ax.set_ylabel(bench.ylabel)
        ax.set_xscale("log" if bench.x_log else "linear")
        ax.set_yscale("log" if bench.y_log else "linear")
        if show_plots:
            plt.show()
        if save_path:
            plt.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
        plt.close()

    def _run(self, bench, save_path, show_plots, print_data, diff_col=False, save_precision=6,
             **kwargs):
        columns, rows, means, mins, maxs = self._measure(bench, **kwargs)
        if bench.plot_name and (show_plots or save_path):
            self._plot(bench, columns, rows, means, mins, maxs, show_plots, save_path)
        keep = bench.x_names + means
        idx = [columns.index(c) for c in keep]
        shown = [[r[i] for i in idx] for r in rows]
        if diff_col and len(keep) == 2:
            keep = keep + ["Diff"]
            shown = [r + [None if None in r else r[1] - r[0]] for r in shown]
        table = _make_table(keep, shown)
        if print_data:
            print(bench.plot_name + ":")
            print(table.to_string())
        if save_path:
            table.to_csv(os.path.join(save_path, f"{bench.plot_name}.csv"),
                         float_format=f"%.{save_precision}f", index=False)
        return table

    def run(self, show_plots=False, print_data=False, save_path="", return_df=False, **kwargs):
        """Runs every benchmark: prints each table when `print_data`, shows plots when
        `show_plots` (with matplotlib), and writes <plot_name>.csv (and .png, and a results.html
        listing them) into `save_path`; returns the tables when `return_df` (pandas DataFrames
        when pandas is installed). Other keyword arguments go to the benchmarked function, except
        `diff_col` (add a Diff column to two-column tables) and `save_precision`."""
        single = isinstance(self.benchmarks, Benchmark)
        benches = [self.benchmarks] if single else list(self.benchmarks)
        if save_path:
            os.makedirs(save_path, exist_ok=True)
        tables = []
        try:
            for bench in benches:
                tables.append(self._run(bench, save_path, show_plots, print_data, **kwargs))
        finally:
            if save_path:
                with open(os.path.join(save_path, "results.html"), "w", encoding="utf-8") as f:
                    f.write("<html><body>\n")
                    for bench in benches[:len(tables)]:
                        f.write(f'<image src="{bench.plot_name}.png"/>\n')
                    f.write("</body></html>\n")
        if return_df:
            return tables[0] if single else tables
        return None


def perf_report(benchmarks):
    """Decorator: `@perf_report(Benchmark(...) or [Benchmark, ...])` turns a function returning a
    measurement into a Mark whose `.run(print_data=True)` tabulates it."""
    return lambda fn: Mark(fn, benchmarks)
