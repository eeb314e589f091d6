"""The profiler's state: sessions and their call trees, the scope stack of each thread, the
timing of launches and scopes, and the launch hook that observes kernel launches.

A session's tree is Proton's "tree" data: one node per path of scope names (and, for a launch,
the kernel's name last), each with its own (exclusive) metrics. A launch node carries Proton's
kernel metrics (count, time (ns), device_id, device_type) and, for a session started with
hook="triton", the numbers the kernel's launch_metadata returned. A scope node carries the
metrics given to the scope. Times: a launch on the GPU is timed with CUDA events around it on
the launch stream; an interpreter launch with the host clock. A scope in which no launch and no
inner scope was timed (torch operations, host code) is itself timed, with CUDA events when
torch's CUDA is initialized and the host clock otherwise, so that its own metrics (flops, bytes)
meet a time in the viewer; scopes around timed launches take their time from those launches, as
in Proton, and are not timed twice.

Nothing here runs while no session is active: the launch hook is installed into
knobs.runtime.launch_enter_hook / launch_exit_hook only then.
"""

from __future__ import annotations

import json
import numbers
import sys
import threading
import time

from .. import knobs

FLOPS_WIDTHS = (8, 16, 32, 64)
# Proton's roofline metrics have fixed types whatever the launch_metadata returned.
_ROOFLINE_TYPES = {"flops": float, **{f"flops{w}": float for w in FLOPS_WIDTHS}, "bytes": int}
# Keys of the launch metadata that are never metrics.
_RESERVED_KEYS = frozenset(("name", "function", "stream"))

_lock = threading.RLock()
_local = threading.local()


# ------------------------------------------------------------------------------------------------
# Trees
# ------------------------------------------------------------------------------------------------


class Node:
    __slots__ = ("name", "children", "metrics", "count", "time_ns", "device")

    def __init__(self, name: str):
        self.name = name
        self.children: dict[str, Node] = {}  # in the order first seen, as Proton's tree
        self.metrics: dict = {}
        self.count = 0  # timed invocations; 0: no kernel metrics
        self.time_ns = 0
        self.device = None  # (device_type, device_id) of its timed invocations

    def at(self, path) -> "Node":
        node = self
        for name in path:
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = Node(name)
            node = child
        return node

    def add_metrics(self, metrics: dict):
        for key, value in metrics.items():
            old = self.metrics.get(key)
            if old is None or isinstance(value, str) or isinstance(old, str):
                self.metrics[key] = value
            elif isinstance(value, list) or isinstance(old, list):
                if not (isinstance(value, list) and isinstance(old, list)) or \
                        len(value) != len(old):
                    raise ValueError(f"metric '{key}' of '{self.name}': a vector of "
                                     f"{_length(value)} values cannot add to {_length(old)}")
                self.metrics[key] = [a + b for a, b in zip(old, value)]
            else:
                self.metrics[key] = old + value

    def has_kernel_metrics(self) -> bool:
        return self.count > 0 or any(c.has_kernel_metrics() for c in self.children.values())

    def to_json(self, devices: set) -> dict:
        metrics = dict(self.metrics)
        if self.count:
            device_type, device_id = self.device
            metrics["count"] = self.count
            metrics["time (ns)"] = self.time_ns
            metrics["device_id"] = str(device_id)
            metrics["device_type"] = device_type
            devices.add(self.device)
        return {"frame": {"name": self.name, "type": "function"}, "metrics": metrics,
                "children": [c.to_json(devices) for c in self.children.values()]}


def _length(v):
    return len(v) if isinstance(v, list) else "a scalar, not"


class Session:
    def __init__(self, sid: int, path: str, hook: bool):
        self.id = sid
        self.path = path
        self.hook = hook  # launch_metadata names and metrics (hook="triton")
        self.active = False
        self.root = Node("ROOT")

    def hatchet(self) -> list:
        devices: set = set()
        root = self.root.to_json(devices)
        if self.root.has_kernel_metrics():
            root["metrics"].update({"count": 0, "time (ns)": 0})
        return [root, _device_info(devices)]

    def write(self, output_format: str):
        text = json.dumps(self.hatchet())
        if self.path in ("", "-"):
            sys.stdout.write(text + "\n")
            return
        with open(f"{self.path}.hatchet", "w") as f:
            f.write(text)


def _device_info(devices: set) -> dict:
    """Proton's second hatchet entry: the properties of each CUDA device that ran a timed
    launch (what the viewer's `util` would need); clock rates torch does not report are 0."""
    info: dict = {}
    torch = sys.modules.get("torch")
    for device_type, device_id in sorted(devices):
        if device_type != "CUDA" or torch is None:
            continue
        try:
            p = torch.cuda.get_device_properties(device_id)
        except Exception:  # noqa: BLE001 - device info is optional
            continue
        info.setdefault("CUDA", {})[str(device_id)] = {
            "clock_rate": int(getattr(p, "clock_rate", 0) or 0),
            "memory_clock_rate": int(getattr(p, "memory_clock_rate", 0) or 0),
            "bus_width": int(getattr(p, "memory_bus_width", 0) or 0),
            "arch": f"{p.major}{p.minor}",
            "num_sms": int(p.multi_processor_count),
        }
    return info


_sessions: dict[int, Session] = {}
_paths: dict[str, int] = {}
_next_id = 0


def add_session(path: str, hook: bool) -> int:
    """Proton's addSession: a path already profiled gives its session back, activated."""
    global _next_id
    with _lock:
        sid = _paths.get(path)
        if sid is None:
            sid = _next_id
            _next_id += 1
            _sessions[sid] = Session(sid, path, hook)
            _paths[path] = sid
        elif hook:
            _sessions[sid].hook = True
        set_active(sid, True)
        return sid


def _session(sid: int) -> Session:
    try:
        return _sessions[sid]
    except (KeyError, TypeError):
        raise IndexError(f"Session has not been initialized: {sid}") from None


def set_active(sid, on: bool):
    """Activates or deactivates one session (sid) or all (None); an unknown one: IndexError."""
    with _lock:
        targets = list(_sessions.values()) if sid is None else [_session(sid)]
        for s in targets:
            s.active = on
        _update_hook()


def finalize(sid, output_format: str):
    with _lock:
        if sid is None:
            targets = list(_sessions.values())
        elif sid in _sessions:
            targets = [_sessions[sid]]
        else:
            return  # as Proton: finalizing a session that is not there does nothing
        resolve_pending(wait=True)
        for s in targets:
            s.active = False
            del _sessions[s.id]
            del _paths[s.path]
        _update_hook()
        for s in targets:
            s.write(output_format)
        if sid is None:
            _local.__dict__.pop("stack", None)


def active_sessions() -> list:
    return [s for s in _sessions.values() if s.active]


# ------------------------------------------------------------------------------------------------
# Clocks: host time, or CUDA events on the current stream
# ------------------------------------------------------------------------------------------------


def _cuda():
    """torch, when its CUDA is initialized (the profiler never initializes CUDA itself)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        return torch if torch.cuda.is_initialized() else None
    except Exception:  # noqa: BLE001 - a torch without CUDA
        return None


_free_events: dict = {}  # CUDA device -> events whose timing was read, to record again
_pending: list = []  # (nodes, start event, end event) of GPU timings not read yet
_RESOLVE_AT = 4096  # pending GPU timings that make the profiler read the finished ones
_WAIT_AT = 65536  # ... and that make it wait for all


def _mark(gpu):
    """A start or end mark: a recorded CUDA event (gpu is torch) or the host clock in ns."""
    if gpu is None:
        return time.perf_counter_ns()
    free = _free_events.get(gpu.cuda.current_device())
    event = free.pop() if free else gpu.cuda.Event(enable_timing=True)
    event.record()
    return event


def _release(*events):
    for event in events:
        index = getattr(getattr(event, "device", None), "index", None)  # where it was recorded
        if index is not None:
            _free_events.setdefault(index, []).append(event)


def _device_of(gpu):
    return ("CUDA", gpu.cuda.current_device()) if gpu is not None else ("CPU", 0)


def _record(nodes, device, start, end):
    """Credits one timed invocation to nodes; a GPU one once its end event has completed."""
    for node in nodes:
        node.count += 1
        node.device = device
    if isinstance(start, int):
        for node in nodes:
            node.time_ns += end - start
        return
    _pending.append((nodes, start, end))
    if len(_pending) >= _RESOLVE_AT:
        resolve_pending(wait=len(_pending) >= _WAIT_AT)


def resolve_pending(wait: bool):
    """Reads the GPU timings whose end event completed (all of them, waiting, with `wait`)."""
    done = 0
    for nodes, start, end in _pending:
        if wait:
            end.synchronize()
        elif not end.query():
            break
        ns = round(start.elapsed_time(end) * 1e6)
        for node in nodes:
            node.time_ns += ns
        _release(start, end)
        done += 1
    del _pending[:done]


# ------------------------------------------------------------------------------------------------
# Scopes
# ------------------------------------------------------------------------------------------------


class Frame:
    """One entered scope on a thread's stack. `timed_inside`: a launch or an inner scope was
    timed while it was open, so its time is theirs; `start`: its own start mark, taken when a
    session was active at entry."""

    __slots__ = ("id", "name", "start", "gpu", "timed_inside")

    def __init__(self, sid, name):
        self.id = sid
        self.name = name
        self.start = None
        self.gpu = None
        self.timed_inside = False


def stack() -> list:
    s = getattr(_local, "stack", None)
    if s is None:
        s = _local.stack = []
    return s


_scope_ids = iter(range(1, 1 << 62))


def enter_scope(name: str, metrics) -> int:
    frame = Frame(next(_scope_ids), name)
    stack().append(frame)
    with _lock:
        active = active_sessions()
        if active and metrics:
            path = [f.name for f in stack()]
            values = scope_metrics(metrics)
            for s in active:
                s.root.at(path).add_metrics(values)
    if active:
        frame.gpu = _cuda()
        frame.start = _mark(frame.gpu)
    return frame.id


def exit_scope(scope_id: int, metrics=None):
    """Closes the scope scope_id, which must be the innermost open one. Scopes opened before a
    finalize (whose stack it cleared) close quietly."""
    frames = stack()
    if not frames or frames[-1].id != scope_id:
        if any(f.id == scope_id for f in frames):
            raise RuntimeError(f"profiler scope '{frames[-1].name}' is still open inside the "
                               f"scope being closed: scopes must close innermost first")
        return
    path = [f.name for f in frames]
    frame = frames.pop()
    with _lock:
        active = active_sessions()
        if active and metrics:
            values = scope_metrics(metrics)
            for s in active:
                s.root.at(path).add_metrics(values)
        timed = frame.timed_inside
        if timed:
            if frame.start is not None and not isinstance(frame.start, int):
                _release(frame.start)  # its time is its launches': the event is unused
        elif frame.start is not None and active:
            end = _mark(frame.gpu)
            _record([s.root.at(path) for s in active], _device_of(frame.gpu), frame.start, end)
            timed = True
        if timed and frames:
            frames[-1].timed_inside = True


def scope_metrics(metrics: dict) -> dict:
    """A scope's metrics as stored: tensors read to numbers or lists, roofline metrics
    (flops*, bytes) converted to their fixed types."""
    if not isinstance(metrics, dict):
        raise TypeError(f"profiler scope metrics must be a dict of name to value, got "
                        f"{type(metrics).__name__}")
    out = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"profiler metric names must be strings, got {key!r}")
        out[_metric_name(key)] = _metric_value(key, value)
    return out


def _metric_name(key: str) -> str:
    # Proton's "(exc)" / "(pty)" suffixes mark how a metric aggregates; the stored name drops them.
    return key.replace("(exc)", "").replace("(pty)", "").strip()


def _metric_value(key, value):
    if hasattr(value, "data_ptr") and hasattr(value, "tolist"):  # a tensor: read it back
        value = value.tolist()
    convert = _ROOFLINE_TYPES.get(key)
    if isinstance(value, (list, tuple)):
        if not all(isinstance(v, numbers.Number) for v in value):
            raise TypeError(f"profiler metric '{key}': a vector metric holds numbers only")
        return [convert(v) if convert else v for v in value]
    if isinstance(value, numbers.Number):
        if isinstance(value, numbers.Integral) and convert is None:
            return int(value)
        return convert(value) if convert else float(value)
    if isinstance(value, str) and convert is None:
        return value
    raise TypeError(f"profiler metric '{key}' must be a number, a list of numbers or a tensor, "
                    f"got {type(value).__name__}")


# ------------------------------------------------------------------------------------------------
# The launch hook
# ------------------------------------------------------------------------------------------------


def _launch_metrics(lazy: dict) -> dict:
    """The metrics in a launch_metadata dict: numbers and tensors under non-reserved keys."""
    out = {}
    for key, value in lazy.items():
        if key in _RESERVED_KEYS or value is None:
            continue
        if isinstance(value, numbers.Number) or hasattr(value, "data_ptr"):
            out[_metric_name(key)] = _metric_value(key, value)
    return out


def _launches() -> list:
    s = getattr(_local, "launches", None)
    if s is None:
        s = _local.launches = []
    return s


def launch_enter(metadata):
    open_launches = _launches()
    if getattr(_local, "in_hook", False):  # a launch made by a launch_metadata function
        open_launches.append(None)
        return
    with _lock:
        active = active_sessions()
    if not active:
        open_launches.append(None)
        return
    raw_name = metadata.data.get("name")
    name, metrics = raw_name, {}
    if any(s.hook for s in active):
        _local.in_hook = True
        try:
            lazy = metadata.get()
        finally:
            _local.in_hook = False
        name = lazy.get("name", raw_name)
        metrics = _launch_metrics(lazy)
    frames = stack()
    path = [f.name for f in frames]
    with _lock:
        nodes = []
        for s in active:
            node = s.root.at(path + [str(name) if s.hook else str(raw_name)])
            if s.hook and metrics:
                node.add_metrics(metrics)
            nodes.append(node)
    for f in frames:
        f.timed_inside = True
    gpu = _cuda() if metadata.data.get("stream") is not None else None
    open_launches.append((nodes, gpu, _mark(gpu)))


def launch_exit(metadata):
    open_launches = _launches()
    if not open_launches:
        return
    entry = open_launches.pop()
    if entry is None:
        return
    nodes, gpu, start = entry
    end = _mark(gpu)
    with _lock:
        _record(nodes, _device_of(gpu), start, end)


def _update_hook():
    """Installs the launch hook while a session is active, and removes it otherwise."""
    runtime = knobs.runtime
    chains = []
    for name, reverse in (("launch_enter_hook", False), ("launch_exit_hook", True)):
        chain = getattr(runtime, name)
        if not isinstance(chain, knobs.HookChain):  # a plain callable (or None) set by hand
            old, chain = chain, knobs.HookChain(reversed=reverse)
            if callable(old):
                chain.add(old)
            setattr(runtime, name, chain)
        chains.append(chain)
    enter, leave = chains
    if any(s.active for s in _sessions.values()):
        enter.add(launch_enter)
        leave.add(launch_exit)
    else:
        enter.remove(launch_enter)
        leave.remove(launch_exit)
