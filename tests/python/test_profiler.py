"""warpweave.profiler (Proton's surface) in the interpreter: sessions, scopes, launch_metadata
names and metrics, the hatchet file's tree, the viewer's derived metrics and its command line,
and the errors Proton gives for misuse."""

import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import warpweave as ww
import warpweave.language as tl
import warpweave.profiler as proton
import warpweave.profiler.viewer as viewer
from warpweave import knobs

pytest.importorskip("warpweave._native")


def _metadata(grid, kernel, args):
    n = args["n"]
    return {"name": f"{kernel.name} [n={n}]", "flops16": 2.0 * n, "bytes": 3 * 4 * n,
            "note": "not a number: not a metric"}


@ww.jit(launch_metadata=_metadata)
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
             mask=mask)


@ww.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def _add(n=100):
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    add_kernel[(ww.cdiv(n, 64),)](x, x, out, n, BLOCK=64)
    assert np.array_equal(out, 2 * x)


def _copy(n=50):
    x = np.arange(n, dtype=np.float32)
    out = np.zeros(n, dtype=np.float32)
    copy_kernel[(1,)](x, out, n, BLOCK=64)


@pytest.fixture(autouse=True)
def clean_profiler(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    yield
    proton.finalize()  # never leave a session (and its hook) to the next test


def _load(path):
    with open(path) as f:
        data = json.load(f)
    assert isinstance(data, list) and len(data) == 2
    return data


def _child(node, name):
    names = [c["frame"]["name"] for c in node["children"]]
    assert name in names, names
    return node["children"][names.index(name)]


def test_scopes_and_launch_metadata_make_the_hatchet_tree(tmp_path):
    sid = proton.start(str(tmp_path / "prof"), hook="triton")
    assert isinstance(sid, int)
    with proton.scope("outer", {"bytes": 10, "flops16": 5.0}):
        _add(100)
        with proton.scope("inner"):
            _add(100)
            _add(40)
        _add(100)
    proton.finalize()
    root, devices = _load(tmp_path / "prof.hatchet")
    assert devices == {}  # no CUDA device ran anything
    assert root["frame"] == {"name": "ROOT", "type": "function"}
    assert root["metrics"] == {"count": 0, "time (ns)": 0}
    outer = _child(root, "outer")
    assert [c["frame"]["name"] for c in outer["children"]] == ["add_kernel [n=100]", "inner"]
    assert outer["metrics"] == {"bytes": 10, "flops16": 5.0}  # its time is its launches'
    k = _child(outer, "add_kernel [n=100]")["metrics"]
    assert k["count"] == 2 and k["flops16"] == 400.0 and k["bytes"] == 2400
    assert isinstance(k["flops16"], float) and isinstance(k["bytes"], int)
    assert k["device_type"] == "CPU" and k["device_id"] == "0" and k["time (ns)"] > 0
    assert "note" not in k
    inner = _child(outer, "inner")
    assert [c["frame"]["name"] for c in inner["children"]] == ["add_kernel [n=100]",
                                                                "add_kernel [n=40]"]
    assert _child(inner, "add_kernel [n=40]")["metrics"]["flops16"] == 80.0


def test_hook_warpweave_is_the_triton_hook(tmp_path):
    # A Triton script whose word `triton` was replaced asks for hook="warpweave" (tutorial 09).
    proton.start(str(tmp_path / "ww"), hook="warpweave")
    _add(100)
    proton.finalize()
    root, _ = _load(tmp_path / "ww.hatchet")
    k = _child(root, "add_kernel [n=100]")["metrics"]
    assert k["count"] == 1 and k["flops16"] == 200.0


def test_without_the_triton_hook_launches_keep_their_kernel_names(tmp_path):
    proton.start(str(tmp_path / "plain"))
    _add()
    _copy()
    proton.finalize()
    root, _ = _load(tmp_path / "plain.hatchet")
    names = [c["frame"]["name"] for c in root["children"]]
    assert names == ["add_kernel", "copy_kernel"]
    assert set(root["children"][0]["metrics"]) == {"count", "time (ns)", "device_id",
                                                   "device_type"}


def test_a_scope_without_launches_is_timed_itself(tmp_path):
    proton.start(str(tmp_path / "host"), hook="triton")
    for _ in range(3):
        with proton.scope("host work", {"bytes": 8}):
            sum(range(1000))
    with proton.scope("outer"):
        with proton.scope("leaf"):
            pass
    proton.finalize()
    root, _ = _load(tmp_path / "host.hatchet")
    m = _child(root, "host work")["metrics"]
    assert m["count"] == 3 and m["bytes"] == 24 and m["time (ns)"] > 0
    outer = _child(root, "outer")
    assert "count" not in outer["metrics"]  # its time is the inner scope's, not counted twice
    assert _child(outer, "leaf")["metrics"]["count"] == 1


def test_deactivate_excludes_launches_and_activate_resumes(tmp_path):
    sid = proton.start(str(tmp_path / "act"), hook="triton")
    proton.deactivate(sid)
    _add(100)
    with proton.scope("while off", {"bytes": 1}):
        _add(100)
    proton.activate(sid)
    with proton.scope("on"):
        _add(100)
    proton.deactivate()  # all sessions
    _add(100)
    proton.activate()
    _copy()
    proton.finalize()
    root, _ = _load(tmp_path / "act.hatchet")
    assert [c["frame"]["name"] for c in root["children"]] == ["on", "copy_kernel"]
    assert _child(_child(root, "on"), "add_kernel [n=100]")["metrics"]["count"] == 1


def test_a_scope_entered_while_inactive_still_nests_launches_made_after_activate(tmp_path):
    sid = proton.start(str(tmp_path / "nest"))
    proton.deactivate(sid)
    with proton.scope("A"):
        proton.activate(sid)
        _copy()
    proton.finalize()
    root, _ = _load(tmp_path / "nest.hatchet")
    assert _child(_child(root, "A"), "copy_kernel")["metrics"]["count"] == 1


def test_sessions_ids_paths_and_two_sessions_at_once(tmp_path):
    a = proton.start(str(tmp_path / "a"), hook="triton")
    assert proton.start(str(tmp_path / "a")) == a  # same name: the same session
    b = proton.start(str(tmp_path / "b"))
    assert b == a + 1
    _add(100)
    proton.deactivate(a)
    _copy()
    proton.finalize(b)
    assert os.path.exists(tmp_path / "b.hatchet") and not os.path.exists(tmp_path / "a.hatchet")
    root_b, _ = _load(tmp_path / "b.hatchet")
    assert [c["frame"]["name"] for c in root_b["children"]] == ["add_kernel", "copy_kernel"]
    proton.finalize()
    root_a, _ = _load(tmp_path / "a.hatchet")
    assert [c["frame"]["name"] for c in root_a["children"]] == ["add_kernel [n=100]"]


def test_the_launch_hook_is_installed_only_while_a_session_is_active(tmp_path, monkeypatch):
    native = sys.modules["warpweave._native"]
    calls = []
    real = native.set_launch_hooks
    monkeypatch.setattr(native, "set_launch_hooks", lambda on: (calls.append(on), real(on)))
    assert not knobs.runtime.launch_enter_hook and not knobs.runtime.launch_exit_hook
    sid = proton.start(str(tmp_path / "hooks"))
    assert knobs.runtime.launch_enter_hook and knobs.runtime.launch_exit_hook
    proton.deactivate(sid)
    assert not knobs.runtime.launch_enter_hook
    proton.activate(sid)
    proton.finalize()
    assert not knobs.runtime.launch_enter_hook and not knobs.runtime.launch_exit_hook
    assert calls and calls[-1] is False and True in calls  # the native path was told


def test_knobs_launch_hooks_see_each_launch_with_its_metadata():
    seen = []
    enter = lambda md: seen.append(("enter", md.data["name"], md.data["stream"], md.get()))
    leave = lambda md: seen.append(("exit", md.data["name"]))
    knobs.runtime.launch_enter_hook.add(enter)
    knobs.runtime.launch_exit_hook.add(leave)
    try:
        _add(7)
    finally:
        knobs.runtime.launch_enter_hook.remove(enter)
        knobs.runtime.launch_exit_hook.remove(leave)
    (tag, name, stream, full), last = seen
    assert (tag, stream, last) == ("enter", None, ("exit", "add_kernel [n=7]"))
    assert name == "add_kernel" and full["name"] == "add_kernel [n=7]" and full["bytes"] == 84


def test_profile_decorator_and_enter_exit_scope(tmp_path):
    @proton.profile(name=str(tmp_path / "deco"), hook="triton")
    def work():
        assert proton.enter_scope("phase", metrics={"bytes": 4}) is not None
        _add(100)
        assert proton.exit_scope("phase", metrics={"flops16": 1.0}) is not None

    work()
    assert not knobs.runtime.launch_enter_hook  # deactivated after the call
    proton.finalize()
    root, _ = _load(tmp_path / "deco.hatchet")
    phase = _child(root, "phase")
    assert phase["metrics"] == {"bytes": 4, "flops16": 1.0}
    assert _child(phase, "add_kernel [n=100]")["metrics"]["count"] == 1


def test_cpu_timed_scope_records_host_time(tmp_path):
    proton.start(str(tmp_path / "cpu"))
    with proton.cpu_timed_scope("t"):
        _copy()
    proton.finalize()
    root, _ = _load(tmp_path / "cpu.hatchet")
    assert _child(root, "t")["metrics"]["cpu_time (ns)"] > 0
    with pytest.raises(ValueError, match="reserved"):
        proton.cpu_timed_scope("x", {"cpu_time": 1})


def test_scopes_do_nothing_when_not_profiling(tmp_path):
    with proton.scope("nothing", {"bytes": 1}):
        _add()
    assert proton.enter_scope("x") is None and proton.exit_scope("x") is None
    proton.finalize()  # no session: nothing written, no error
    assert os.listdir(tmp_path) == []


def test_misuse_errors_as_proton():
    with pytest.raises(IndexError, match="not been initialized"):
        proton.activate(12345)
    with pytest.raises(IndexError, match="not been initialized"):
        proton.deactivate(12345)
    proton.finalize(12345)  # an unknown session: ignored, as Proton does
    with pytest.raises(ValueError, match="Unsupported hook"):
        proton.start("x", hook="torch")
    with pytest.raises(ValueError, match="context"):
        proton.start("x", context="python")
    with pytest.raises(ValueError, match="data"):
        proton.start("x", data="trace")
    with pytest.raises(ValueError, match="profiler"):
        proton.start("x", backend="instrumentation")
    assert not proton.flags.profiling_on  # a refused start starts nothing
    proton.start("x")
    with pytest.raises(ValueError, match="output format"):
        proton.finalize(output_format="chrome_trace")
    proton.enter_scope("a")
    with pytest.raises(ValueError, match="Scope name mismatch"):
        proton.exit_scope("b")
    proton.exit_scope("a")
    with pytest.raises(IndexError):
        proton.exit_scope()
    with pytest.raises(TypeError, match="metric 'bytes'"):
        with proton.scope("bad", {"bytes": object()}):
            pass
    proton.finalize()
    assert os.path.exists("x.hatchet")


# ------------------------------------------------------------------------------------------------
# The viewer, on a profile with known numbers
# ------------------------------------------------------------------------------------------------


def _kernel(name, time_ns, count=1, **metrics):
    return {"frame": {"name": name, "type": "function"},
            "metrics": {"count": count, "time (ns)": time_ns, "device_id": "0",
                        "device_type": "CUDA", **metrics}, "children": []}


def _scope(name, children, **metrics):
    return {"frame": {"name": name, "type": "function"}, "metrics": metrics,
            "children": children}


@pytest.fixture
def profile_file(tmp_path):
    root = _scope("ROOT", [
        _scope("cublas [M=8]", [_kernel("gemm_sm90", 2_000_000, count=2)],
               bytes=3_000_000, flops16=8e12),
        _kernel("matmul_kernel [M=8]", 4_000_000, count=4, bytes=6_000_000, flops16=16e12),
        _scope("empty", []),
    ], count=0)
    root["metrics"]["time (ns)"] = 0
    path = tmp_path / "known.hatchet"
    path.write_text(json.dumps([root, {"CUDA": {"0": {"arch": "90", "num_sms": 132}}}]))
    return str(path)


def _values(tree, column):
    return {f.name: f.values[column] for f in tree.nodes()}


def test_viewer_derives_tflops_and_times_from_inclusive_metrics(profile_file, capsys):
    tree, metrics = viewer.parse(["tflop16/s", "time/ms"], profile_file)
    assert metrics == ["tflop16/s (inc)", "time/ms (inc)"]
    t = _values(tree, "time/ms (inc)")
    assert t == {"ROOT": 6.0, "cublas [M=8]": 2.0, "gemm_sm90": 2.0, "matmul_kernel [M=8]": 4.0}
    f = _values(tree, "tflop16/s (inc)")
    assert f["cublas [M=8]"] == pytest.approx(4000.0)  # 8e12 flop in 2 ms
    assert f["matmul_kernel [M=8]"] == pytest.approx(4000.0)
    assert f["ROOT"] == pytest.approx(4000.0)
    assert math.isnan(f["gemm_sm90"])  # no flops of its own
    viewer.print_tree(tree, metrics)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "4000.000 6.000 ROOT"
    assert out[1] == "├─ 4000.000 2.000 cublas [M=8]"
    assert out[2] == "│  └─ nan 2.000 gemm_sm90"
    assert out[3] == "└─ 4000.000 4.000 matmul_kernel [M=8]"


def test_viewer_other_derived_metrics(profile_file):
    tree, m = viewer.parse(["avg_time/us", "gbyte/s", "time/%", "bytes", "count"], profile_file)
    assert m == ["avg_time/us (inc)", "gbyte/s (inc)", "time/% (inc)", "bytes (inc)",
                 "count (inc)"]
    assert _values(tree, "avg_time/us (inc)")["matmul_kernel [M=8]"] == pytest.approx(1000.0)
    assert _values(tree, "gbyte/s (inc)")["cublas [M=8]"] == pytest.approx(1.5)
    assert _values(tree, "time/% (inc)")["cublas [M=8]"] == pytest.approx(100 / 3)
    assert _values(tree, "bytes (inc)")["ROOT"] == 9_000_000
    assert _values(tree, "count (inc)")["ROOT"] == 6


def test_viewer_filters_and_errors(profile_file):
    tree, m = viewer.parse(["time/ms"], profile_file, include="cublas.*")
    assert [f.name for f in tree.nodes()] == ["ROOT", "cublas [M=8]", "gemm_sm90"]
    tree, m = viewer.parse(["time/ms"], profile_file, exclude="cublas.*")
    assert [f.name for f in tree.nodes()] == ["ROOT", "matmul_kernel [M=8]"]
    tree, m = viewer.parse(["time/ms"], profile_file, threshold=3.0)
    assert [f.name for f in tree.nodes()] == ["ROOT", "matmul_kernel [M=8]"]
    with pytest.raises(RuntimeError, match="Metric flops8 is not found"):
        viewer.parse(["tflop8/s"], profile_file)
    with pytest.raises(ValueError, match="util"):
        viewer.parse(["util"], profile_file)
    with pytest.raises(ValueError, match="Unsupported unit"):
        viewer.parse(["time/fortnight"], profile_file)


def test_viewer_command_line(profile_file):
    run = lambda *a: subprocess.run([sys.executable, "-m", "warpweave.profiler.viewer", *a],
                                    capture_output=True, text=True, env=dict(os.environ))
    r = run("-m", "tflop16/s,time/ms", profile_file)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == ["4000.000 6.000 ROOT", "├─ 4000.000 2.000 cublas [M=8]"]
    r = run("-l", profile_file)
    assert r.returncode == 0 and "- flops16" in r.stdout and "- time" in r.stdout
    r = run("-d", "1", profile_file)  # default metric: time/ms
    assert r.stdout.split() == ["6.000", "ROOT"]
    r = run("-m", "tflop8/s", profile_file)
    assert r.returncode == 1 and "not found" in r.stderr


def test_profile_written_by_the_profiler_reads_back_in_the_viewer(tmp_path, capsys):
    proton.start(str(tmp_path / "rt"), hook="triton")
    with proton.scope("s", {"flops16": 1e6}):
        _add(100)
    proton.finalize()
    tree, metrics = viewer.parse(["tflop16/s", "time/ms"], str(tmp_path / "rt.hatchet"))
    values = _values(tree, "tflop16/s (inc)")
    assert values["s"] > 0 and values["add_kernel [n=100]"] > 0
    viewer.print_tree(tree, metrics)
    assert "add_kernel [n=100]" in capsys.readouterr().out


def test_native_fast_path_steps_aside_while_profiling(tmp_path):
    """With launches recorded instead of reaching a GPU (test_fast_launch's stand-ins): a kernel
    the fast path already serves is seen by the profiler on each launch while a session is
    active, and is served natively again once it is finalized."""
    fast = pytest.importorskip("test_fast_launch")
    env_fixture = getattr(fast.env, "__wrapped__", None)
    if env_fixture is None:
        pytest.skip("test_fast_launch's env fixture is not reachable")
    mp = pytest.MonkeyPatch()
    gen = env_fixture(mp)
    rec, slow = next(gen)
    try:
        x = fast.tensor(0x10000)
        launch = lambda: fast.add_kernel[(2,)](x, x, x, 1000, BLOCK=256)
        launch()
        launch()
        assert len(slow) == 1  # the second launch was native
        proton.start(str(tmp_path / "fast"))
        launch()
        launch()
        assert len(slow) == 3  # both through the hooked general path
        proton.finalize()
        launch()
        assert len(slow) == 3 and len(rec.launches) == 5
    finally:
        proton.finalize()
        next(gen, None)
        mp.undo()
    root, _ = _load(tmp_path / "fast.hatchet")
    m = _child(root, "add_kernel")["metrics"]
    assert m["count"] == 2 and m["device_type"] == "CPU"  # no CUDA here: host-timed


def test_a_plain_callable_launch_hook_is_kept_beside_the_profiler(tmp_path):
    seen = []
    with knobs.runtime.scope():
        knobs.runtime.launch_enter_hook = lambda md: seen.append(md.data["name"])
        proton.start(str(tmp_path / "plain_hook"))
        _copy()
        proton.finalize()
        assert seen == ["copy_kernel"]
        assert isinstance(knobs.runtime.launch_enter_hook, knobs.HookChain)
    assert not knobs.runtime.launch_enter_hook  # scope() put the empty chain back
    _copy()
    assert seen == ["copy_kernel"]
    root, _ = _load(tmp_path / "plain_hook.hatchet")
    assert _child(root, "copy_kernel")["metrics"]["count"] == 1


def test_data_get_and_context_depth(tmp_path):
    assert proton.context.depth() is None  # not profiling
    sid = proton.start(str(tmp_path / "mem"))
    with proton.scope("a"):
        with proton.scope("b"):
            assert proton.context.depth(sid) == 2
            _copy()
    assert proton.context.depth(sid) == 0
    root, devices = proton.data.get(sid)
    b = _child(_child(root, "a"), "b")
    assert _child(b, "copy_kernel")["metrics"]["count"] == 1
    assert proton.data.get(None) is None
    with pytest.raises(IndexError):
        proton.data.get(sid + 100)
    with pytest.raises(IndexError):
        proton.context.depth(sid + 100)
    proton.finalize()
    assert json.loads((tmp_path / "mem.hatchet").read_text())[0] == root


class _FakeEvent:
    """torch.cuda.Event's surface on a fake clock that advances 1000 ns per record."""
    clock = 0
    made = 0

    def __init__(self, enable_timing=False):
        assert enable_timing
        type(self).made += 1
        self.t = None
        self.device = None

    def record(self):
        type(self).clock += 1000
        self.t = type(self).clock
        self.device = type("Device", (), {"index": 0})()

    def query(self):
        return True

    def synchronize(self):
        pass

    def elapsed_time(self, end):
        return (end.t - self.t) / 1e6  # ms


def test_gpu_timing_reads_cuda_events_and_reuses_them(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from warpweave.compiler import LazyDict
    from warpweave.profiler import _data

    fake = SimpleNamespace(cuda=SimpleNamespace(Event=_FakeEvent, current_device=lambda: 0))
    monkeypatch.setattr(_data, "_cuda", lambda: fake)
    _FakeEvent.made = 0
    launch = LazyDict({"name": "k", "function": None, "stream": 7})
    for name in ("one", "two"):
        proton.start(str(tmp_path / name))
        with proton.scope("torch work"):  # 2 records: 1000 ns
            pass
        with proton.scope("around"):  # its start event goes unused: back to the pool
            _data.launch_enter(launch)
            _data.launch_exit(launch)  # 1000 ns
        assert _data._pending  # GPU timings are read at finalize
        proton.finalize()
        root, _ = _load(tmp_path / f"{name}.hatchet")
        t = _child(root, "torch work")["metrics"]
        assert (t["count"], t["time (ns)"], t["device_type"]) == (1, 1000, "CUDA")
        k = _child(_child(root, "around"), "k")["metrics"]
        assert (k["count"], k["time (ns)"], k["device_id"]) == (1, 1000, "0")
        assert "count" not in _child(root, "around")["metrics"]
    assert _FakeEvent.made == 5  # the second session recorded into the first one's events
