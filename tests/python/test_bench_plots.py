"""bench/bench_gemms.py's --plot: the figure of each op's speed against PyTorch's fastest way,
drawn from the rows the benchmark measures (here made up, so no GPU is needed)."""

import builtins
import importlib.util
import os

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def load_bench():
    spec = importlib.util.spec_from_file_location(
        "bench_gemms", os.path.join(ROOT, "bench", "bench_gemms.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ROWS = [
    {"op": "matmul", "case": "fp16 4096x4096x4096", "baseline": "torch",
     "ratio": {"ww fixed": 0.93, "ww tuned": 0.97}},
    {"op": "attention", "case": "fwd D128 S4096", "baseline": "sdpa",
     "ratio": {"ww tuned": 1.04}},
]


def test_the_plot_has_a_bar_per_column_and_case(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed: no plot to draw")
    import matplotlib.image

    bench = load_bench()
    path = tmp_path / "gemms.png"
    assert bench.write_plot(ROWS, "test GPU", str(path))
    image = matplotlib.image.imread(str(path))
    assert image.shape[0] > 100 and image.shape[1] > 100
    # The bars' heights are the rows' ratios: redraw into a figure we can inspect.
    import matplotlib.pyplot as plt

    drawn = []
    real_savefig = plt.Figure.savefig

    def keep(fig, *args, **kwargs):
        drawn.append(sorted(round(p.get_height(), 2) for p in fig.axes[0].patches))
        return real_savefig(fig, *args, **kwargs)

    plt.Figure.savefig = keep
    try:
        bench.write_plot(ROWS, "test GPU", str(tmp_path / "again.png"))
    finally:
        plt.Figure.savefig = real_savefig
    # Two columns over two cases: four bars, the attention row having no "ww fixed" (0).
    assert drawn == [[0.0, 0.93, 0.97, 1.04]]


def test_without_matplotlib_the_benchmark_says_so(monkeypatch, capsys, tmp_path):
    bench = load_bench()
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.split(".")[0] == "matplotlib":
            raise ImportError("no matplotlib here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert not bench.write_plot(ROWS, "test GPU", str(tmp_path / "x.png"))
    assert "matplotlib is not installed" in capsys.readouterr().out
    assert not (tmp_path / "x.png").exists()


def test_the_plot_option_is_parsed():
    bench = load_bench()
    args = bench.parse_args(["--only", "matmul", "--plot", "out.png"])
    assert args.plot == "out.png"
    assert bench.parse_args([]).plot is None
