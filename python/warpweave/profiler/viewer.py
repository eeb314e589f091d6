"""`warpweave.profiler.viewer`: Proton's viewer for hatchet profiles, without hatchet or pandas.

    python -m warpweave.profiler.viewer -m tflop16/s,time/ms matmul.hatchet
    tree, metrics = viewer.parse(["tflop16/s", "time/ms"], "matmul.hatchet")
    viewer.print_tree(tree, metrics)

A profile's nodes carry exclusive metrics; each metric's inclusive value (the node's own plus
its descendants') is what derived metrics use, as in Proton:

    time/s, time/ms, time/us, time/ns            time (ns), scaled
    avg_time/s ... avg_time/ns                   time / count
    cpu_time/..., avg_cpu_time/...               cpu_time (ns) (cpu_timed_scope)
    flop/s, gflop/s, tflop/s (and flop8/s ...)   flops (flops8, flops16, ...) / time
    byte/s, gbyte/s, tbyte/s                     bytes / time
    <metric>/%                                   share of the root's value
    <metric>                                     a raw metric (inclusive)

`util` (Proton's roofline utilisation, from per-architecture peak rates) is not available.
"""

from __future__ import annotations

import argparse
import json
import math
import re

from ._data import FLOPS_WIDTHS

COMPUTE_METADATA_SCOPE_NAME = "__proton_launch_metadata"

_TIME_FACTORS = {"s": 1, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_BYTE_FACTORS = {"byte/s": 1, "gbyte/s": 1e9, "tbyte/s": 1e12}
_FLOP_FACTORS = {}  # derived name -> (source metric, factor)
for _w in ("",) + tuple(str(w) for w in FLOPS_WIDTHS):
    for _prefix, _factor in (("", 1), ("g", 1e9), ("t", 1e12)):
        _FLOP_FACTORS[f"{_prefix}flop{_w}/s"] = (f"flops{_w}", _factor)


class Frame:
    """One node of a profile: its name, exclusive metrics (`exc`), inclusive ones (`inc`),
    the derived values print_tree shows (`values`, by column name) and its children."""

    __slots__ = ("name", "exc", "inc", "values", "children")

    def __init__(self, name, exc, children):
        self.name = name
        self.exc = exc
        self.inc = {}
        self.values = {}
        self.children = children


class Tree:
    """A parsed profile (what Proton's viewer holds as a hatchet GraphFrame): `roots`, the
    metric columns (`inc_metrics`, `exc_metrics`) and the devices the profile names."""

    def __init__(self, roots, device_info):
        self.roots = roots
        self.device_info = device_info
        self.inc_metrics: list = []
        self.exc_metrics: list = []

    def nodes(self):
        """Every frame, parents before children, in file order."""
        todo = list(reversed(self.roots))
        while todo:
            node = todo.pop()
            yield node
            todo.extend(reversed(node.children))


def remove_frames(database: list) -> list:
    """Proton's clean-up: drops metadata frames and frames with neither metrics nor children
    (and parents left without any of their children)."""

    def keep(node):
        if "frame" not in node:
            return node
        name = node["frame"]["name"]
        if name == COMPUTE_METADATA_SCOPE_NAME or name.startswith(
                f"{COMPUTE_METADATA_SCOPE_NAME}:"):
            return None
        children = node.get("children", [])
        if not node.get("metrics") and not children:
            return None
        kept = [c for c in (keep(c) for c in children) if c is not None]
        if kept or not children:
            node["children"] = kept
            return node
        return None

    return [n for n in (keep(n) for n in database) if n is not None]


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _build(node) -> Frame:
    metrics = {k: float(v) for k, v in node.get("metrics", {}).items() if _number(v)}
    return Frame(node["frame"]["name"], metrics, [_build(c) for c in node.get("children", [])])


def _inclusive(frame: Frame):
    for child in frame.children:
        _inclusive(child)
    inc = dict(frame.exc)
    for child in frame.children:
        for k, v in child.inc.items():
            inc[k] = inc.get(k, 0.0) + v
    frame.inc = inc


def get_raw_metrics(database):
    """(tree, inclusive metric names, exclusive metric names, device info) of a loaded file."""
    if not isinstance(database, list) or not database or not isinstance(database[0], dict):
        raise ValueError("not a hatchet profile: expected a JSON list whose first entry is the "
                         "root frame")
    database = remove_frames(database)
    device_info = {} if len(database) < 2 else database.pop(1)
    tree = Tree([_build(n) for n in database if "frame" in n], device_info)
    names: list = []
    for node in tree.nodes():
        for k in node.exc:
            if k not in names:
                names.append(k)
    for root in tree.roots:
        _inclusive(root)
    tree.inc_metrics = list(names)
    return tree, names, [], device_info


def read(filename):
    with open(filename) as f:
        database = json.load(f)
    tree, inclusive, exclusive, device_info = get_raw_metrics(database)
    if not inclusive + exclusive:
        raise RuntimeError(f"No metrics found in the input file {filename}")
    return tree, inclusive, exclusive, device_info


def match_available_metrics(metrics, inclusive_metrics, exclusive_metrics):
    """The raw metric each name asks for (case-insensitive, with or without its unit); inclusive
    ones get " (inc)". RuntimeError when one is not in the profile."""
    if not isinstance(metrics, list):
        metrics = [metrics]
    ret = []
    for metric in metrics:
        metric = metric.lower()
        for raw in inclusive_metrics + exclusive_metrics:
            suffix = " (inc)" if raw in inclusive_metrics else ""
            if metric in (raw, raw.split("(")[0].strip().lower()):
                ret.append(raw + suffix)
                break
        else:
            raise RuntimeError(f"Metric {metric} is not found. Use the --list flag to list "
                               f"available metrics")
    return ret


def _value(frame, column):
    """A frame's value of a matched column (`name (inc)` or an exclusive name); NaN if absent."""
    if column.endswith(" (inc)"):
        v = frame.inc.get(column[:-6])
    else:
        v = frame.exc.get(column)
    return math.nan if v is None else v


def _div(a, b):
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if b == 0:
        return math.nan if a == 0 else math.copysign(math.inf, a)
    return a / b


def derive_metrics(gf, metrics, inclusive_metrics, exclusive_metrics, device_info=None):
    """Computes each requested metric on every frame (into frame.values) and returns the column
    names print_tree shows, e.g. "tflop16/s (inc)"."""
    derived = []
    nodes = list(gf.nodes())

    def time_column(name):
        column = match_available_metrics(name, inclusive_metrics, exclusive_metrics)[0]
        unit = column.split("(")[1].split(")")[0]
        if unit not in _TIME_FACTORS:
            raise ValueError(f"metric {column}: unknown time unit {unit}")
        return column, _TIME_FACTORS[unit]

    def seconds(frame, name="time"):
        column, factor = time_column(name)
        return _value(frame, column) * factor

    for metric in metrics:
        if metric == "util":
            raise ValueError("util is not available in warpweave.profiler.viewer: it needs "
                             "per-architecture peak rates")
        if metric in _BYTE_FACTORS or metric in _FLOP_FACTORS:
            source, factor = ((("bytes", _BYTE_FACTORS[metric])) if metric in _BYTE_FACTORS
                              else _FLOP_FACTORS[metric])
            column = match_available_metrics(source, inclusive_metrics, exclusive_metrics)[0]
            name = f"{metric} (inc)"
            for f in nodes:
                f.values[name] = _div(_value(f, column), seconds(f)) / factor
        elif "/" in metric and not metric.endswith("/%") and metric.split("/")[0] in (
                "time", "avg_time", "cpu_time", "avg_cpu_time"):
            kind, unit = metric.split("/", 1)
            if unit not in _TIME_FACTORS:
                raise ValueError(f"Unsupported unit {unit}")
            base = "cpu_time" if "cpu_time" in kind else "time"
            count = (match_available_metrics("count", inclusive_metrics, exclusive_metrics)[0]
                     if kind.startswith("avg_") else None)
            name = f"{metric} (inc)"
            for f in nodes:
                v = seconds(f, base) / _TIME_FACTORS[unit]
                f.values[name] = _div(v, _value(f, count)) if count else v
        else:
            parts = metric.split("/")
            column = match_available_metrics(parts[0], inclusive_metrics, exclusive_metrics)[0]
            if len(parts) > 1:
                if parts[1] != "%":
                    raise ValueError(f"Unsupported unit {parts[1]}")
                inclusive = column.endswith(" (inc)")
                total = (_value(nodes[0], column) if inclusive
                         else sum(v for v in (_value(f, column) for f in nodes)
                                  if not math.isnan(v)))
                name = metric + (" (inc)" if inclusive else "")
                for f in nodes:
                    f.values[name] = _div(_value(f, column), total) * 100.0
            else:
                name = column
                for f in nodes:
                    f.values[name] = _value(f, column)
        derived.append(name)
    for name in derived:
        (gf.inc_metrics if name.endswith("(inc)") else gf.exc_metrics).append(name)
    return derived


def format_frames(gf, format):
    """Shortens Python frame names (file:function@line forms) as Proton's -f options do."""
    def fix(x):
        if format == "file_function_line":
            return x.split("/")[-1]
        if format == "function_line":
            return x.split(":")[-1]
        return f"{x.split('/')[-1].split(':')[0]}@{x.split('@')[-1].split(':')[0]}"

    if format in ("file_function_line", "function_line", "file_function"):
        for f in gf.nodes():
            f.name = fix(f.name)
    return gf


def filter_frames(gf, include=None, exclude=None, threshold=None, metric=None):
    """include: keeps the paths through frames whose name matches the regular expression;
    exclude: drops matching frames with their subtrees; threshold: keeps frames whose `metric`
    is at least that, and their ancestors."""
    if include:
        pattern = re.compile(include)

        def through(f, matched):
            matched = matched or pattern.fullmatch(f.name) is not None
            f.children = [c for c in f.children if through(c, matched)]
            return matched or bool(f.children)

        gf.roots = [r for r in gf.roots if through(r, False)]
    if exclude:
        pattern = re.compile(exclude)

        def drop(frames):
            kept = [f for f in frames if pattern.fullmatch(f.name) is None]
            for f in kept:
                f.children = drop(f.children)
            return kept

        gf.roots = drop(gf.roots)
    if threshold is not None:

        def above(f):
            f.children = [c for c in f.children if above(c)]
            v = f.values.get(metric, math.nan)
            return bool(f.children) or (not math.isnan(v) and v >= threshold)

        gf.roots = [r for r in gf.roots if above(r)]
    return gf


def parse(metrics, filename, include=None, exclude=None, threshold=None):
    """Reads a profile and derives `metrics` (names as listed above); returns (tree, the
    columns to print)."""
    if isinstance(metrics, str):
        metrics = [metrics]
    gf, inclusive, exclusive, device_info = read(filename)
    derived = derive_metrics(gf, metrics, inclusive, exclusive, device_info)
    gf = filter_frames(gf, include, exclude, threshold, derived[0])
    return gf, derived


def _fmt(v):
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return f"{v:.3f}"


def render(gf, metrics, depth=100) -> str:
    """The tree as print_tree prints it: each frame's values then its name, children indented
    under tree lines."""
    lines = []

    def visit(f, prefix, child_prefix, level):
        values = " ".join(_fmt(f.values.get(m, math.nan)) for m in metrics)
        lines.append(f"{prefix}{values} {f.name}")
        if level + 1 >= depth:
            return
        for i, c in enumerate(f.children):
            last = i == len(f.children) - 1
            visit(c, child_prefix + ("└─ " if last else "├─ "),
                  child_prefix + ("   " if last else "│  "), level + 1)

    for root in gf.roots:
        visit(root, "", "", 0)
    return "\n".join(lines) + "\n"


def print_tree(gf, metrics, depth=100, format=None, print_sorted=False):
    gf = format_frames(gf, format)
    print(render(gf, metrics, depth))
    if print_sorted:
        print("Sorted kernels by metric " + metrics[0])
        rows = sorted(list(gf.nodes())[1:], key=lambda f: f.values.get(metrics[0], math.nan),
                      reverse=True)
        for f in rows:
            name = f.name[:100] + "..." if len(f.name) > 100 else f.name
            print("{:105} {:.4}".format(name, f.values.get(metrics[0], math.nan)))
    if "bytes (inc)" in metrics:
        values = [f.values.get("bytes (inc)", math.nan) for f in gf.nodes()]
        if any(v < 0 for v in values if not math.isnan(v)):
            print("Warning: Negative byte values detected, this is usually the result of a "
                  "datatype overflow\n")


def show_metrics(file_name):
    _, inclusive, exclusive, _ = read(file_name)
    print("Available inclusive metrics:")
    for raw in inclusive:
        print(f"- {raw.split('(')[0].strip().lower()}")
    print("Available exclusive metrics:")
    for raw in exclusive:
        print(f"- {raw.split('(')[0].strip().lower()}")


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m warpweave.profiler.viewer",
                                description="Prints a warpweave (Proton) hatchet profile as a "
                                "tree.", formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("-l", "--list", action="store_true", help="list the available metrics")
    p.add_argument("-m", "--metrics", default=None,
                   help="metrics to show, comma-separated (default time/ms); derived ones:\n"
                   "time/s|ms|us|ns, avg_time/..., [g|t]flop[8|16|32|64]/s, [g|t]byte/s,\n"
                   "<metric>/%%")
    p.add_argument("-i", "--include", default=None,
                   help="keep the paths through frames matching this regular expression")
    p.add_argument("-e", "--exclude", default=None,
                   help="drop frames matching this regular expression, with their children")
    p.add_argument("-t", "--threshold", type=float, default=None,
                   help="drop frames whose first metric is below this value")
    p.add_argument("-d", "--depth", type=int, default=100, help="depth of the tree shown")
    p.add_argument("-f", "--format", default="full",
                   choices=["full", "file_function_line", "function_line", "file_function"],
                   help="how frame names are shortened")
    p.add_argument("--print-sorted", action="store_true", default=False,
                   help="also list the frames sorted by the first metric")
    p.add_argument("file", help="the .hatchet file")
    args = p.parse_args(argv)
    if args.include and args.exclude:
        p.error("Cannot specify both include and exclude")
    try:
        if args.list:
            show_metrics(args.file)
            return 0
        metrics = args.metrics.split(",") if args.metrics else ["time/ms"]
        gf, derived = parse(metrics, args.file, args.include, args.exclude, args.threshold)
        print_tree(gf, derived, args.depth, args.format, args.print_sorted)
    except (OSError, ValueError, RuntimeError) as e:
        p.exit(1, f"error: {e}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
