"""Per-shape tuning of warpweave.ops's GPU configurations: which kernel variant and which tiles,
stages, warps and clusters an op launches for a call's device, dtypes and shape.

Each tuned op lists its candidates for a call (ops/_matmul.py, _scaled_mm.py, _grouped_mm.py,
_attention.py): Candidate(kernel variant, constexprs and launch options), only those the
kernels take for the call's shape and that fit the device's shared memory, today's fixed
configuration (the default) always among them. choose() then picks one:

  - WARPWEAVE_OPS_CONFIG (knobs.ops.config) names it: "op=SPEC;op=SPEC", SPEC a candidate's
    kernel variant with, optionally, values its configuration must have, as candidates print:
    "matmul=tlx_pingpong", "matmul=tl(BLOCK_K=64, num_stages=4)", "scaled_mm=default". A SPEC
    that matches none of the call's candidates is a ValueError listing them.
  - WARPWEAVE_OPS_TUNING=0 (knobs.ops.tuning = False), a call in the interpreter (NumPy arrays,
    WARPWEAVE_INTERPRET=1) or a single candidate: the default, untimed.
  - Otherwise, the first call on a new key (op, device, dtypes, shape key, candidates) times
    every candidate with the autotuner's timing path (autotuner.time_call: ww.testing.do_bench,
    knobs.ops.warmup / rep ms, L2 flushed, the median kept) after compiling them in parallel,
    and keeps the fastest in memory and in the disk cache (the autotuner's _TuningRecord, under
    WARPWEAVE_CACHE_DIR/autotune: keyed by the op, the key, the candidates, the device's name
    and compute capability, the compiler build and the sources of every kernel the candidates
    launch), so that later processes launch it without timing. A candidate that cannot compile
    or launch is timed as infinitely slow.

Shape keys: exact M, N, K for the GEMMs; power-of-two buckets of the ragged dimension for
grouped_mm and of batch * heads and the sequence lengths for attention (the candidates are part
of the key, so shapes of one bucket that allow different candidates are tuned apart).

Timing runs launch directly (not through the call's _Place), so a _planned wrapper's launch
plan records only the chosen candidate's launch and later calls with that signature replay it
untuned. Inside a CUDA graph capture nothing is timed: a key with no stored result launches the
default, and that call is not recorded as a plan (a later call tunes).
"""

from __future__ import annotations

import os
import re
import threading

from .. import knobs
from ..jit import _ENV_DATA

# ------------------------------------------------------------------------------------------------
# Candidates and how to launch them
# ------------------------------------------------------------------------------------------------


class Candidate:
    """One configuration an op may launch: a kernel variant (a name the op's launch function
    understands) and its constexprs and launch options. Printed as `kernel(K=V, ...)`, the
    form WARPWEAVE_OPS_CONFIG takes and the disk cache hashes."""

    __slots__ = ("kernel", "config", "_text")

    def __init__(self, kernel: str, **config):
        self.kernel = kernel
        self.config = config
        self._text = f"{kernel}({', '.join(f'{k}={v!r}' for k, v in sorted(config.items()))})"

    def __repr__(self):
        return self._text

    def __eq__(self, other):
        return isinstance(other, Candidate) and self._text == other._text

    def __hash__(self):
        return hash(self._text)

    def __getitem__(self, name):
        return self.config[name]

    def get(self, name, default=None):
        return self.config.get(name, default)

    def meta(self, *names) -> dict:
        """The configuration without the entries `names` (those the launch spells itself)."""
        return {k: v for k, v in self.config.items() if k not in names}


def direct(kernel, grid, /, *args, **meta):
    """kernel[grid](*args, **meta) outside the call's _Place: not recorded in a launch plan (a
    grid function is called with `meta`, as _Place.launch does)."""
    if callable(grid):
        grid = grid(meta)
    kernel[grid](*args, **meta)


def compile_only(kernel, grid, /, *args, **meta):
    """Compiles what the launch would launch, without launching it."""
    kernel.warmup(*args, grid=grid if not callable(grid) else (1,), **meta)


# ------------------------------------------------------------------------------------------------
# The device a call runs on: what its candidates are timed on and must fit
# ------------------------------------------------------------------------------------------------


class Device:
    """text: name and compute capability (the disk cache's key); shared: bytes of shared
    memory one block may use."""

    def __init__(self, text: str, shared: int):
        self.text = text
        self.shared = shared


_devices: dict = {}

# Shared memory a block may use where no device answers (GPU placement faked over NumPy arrays,
# by the compile target): sm_90a and sm_100a 227 KB, sm_80 163 KB.
_TARGET_SHARED = {"sm_90a": 232448, "sm_100a": 232448, "sm_80": 166912}


def device(place) -> Device:
    """The Device of a call placed on the GPU."""
    if place.kind == "torch" and place.torch_device.type == "cuda":
        import torch

        index = place.torch_device.index
        if index is None:
            index = torch.cuda.current_device()
        found = _devices.get(index)
        if found is None:
            from ..autotuner import cuda_device_text

            props = torch.cuda.get_device_properties(index)
            shared = getattr(props, "shared_memory_per_block_optin", 0) or 49152
            found = _devices[index] = Device(cuda_device_text(index), shared)
        return found
    target = os.environ.get("WARPWEAVE_TARGET") or "sm_90a"
    return Device(f"interpreter as {target}", _TARGET_SHARED.get(target, 232448))


def fits(place, shared_bytes: int) -> bool:
    """Whether a candidate using `shared_bytes` of shared memory (an estimate of its buffers;
    the compiler adds barriers and scratch) fits the call's device."""
    return shared_bytes <= device(place).shared


# ------------------------------------------------------------------------------------------------
# Choosing
# ------------------------------------------------------------------------------------------------


class Decision:
    """How one op's configuration was chosen at its latest call (tests and benchmarks read
    `decisions[op]`): how is "forced", "fixed" (tuning off, untimeable, one candidate),
    "provisional" (a CUDA graph capture before any timing), "memory", "disk" or "timed"."""

    def __init__(self, key, candidates, chosen, how, timings=None):
        self.key = key
        self.candidates = candidates
        self.chosen = chosen
        self.how = how
        self.timings = timings

    def __repr__(self):
        return f"Decision({self.how}: {self.chosen!r} of {len(self.candidates)} for {self.key})"


decisions: dict = {}  # op -> its latest Decision
_chosen: dict = {}  # (op, device text, key, candidates) -> the fastest Candidate
_lock = threading.Lock()


# Every replayed call reads these two from os.environ's backing dict (jit's _ENV_DATA): two
# os.environ.get calls cost more than the rest of the plan's key.
_PLAN_ENV = (b"WARPWEAVE_OPS_TUNING", b"WARPWEAVE_OPS_CONFIG")


def plan_key() -> tuple:
    """What a launch plan's key holds of the tuning settings (their raw values): a plan recorded
    with tuning on (or a forced configuration) is not replayed with it off (or another one)."""
    if type(_ENV_DATA) is dict:
        return (_ENV_DATA.get(_PLAN_ENV[0]), _ENV_DATA.get(_PLAN_ENV[1]))
    return (os.environ.get("WARPWEAVE_OPS_TUNING"), os.environ.get("WARPWEAVE_OPS_CONFIG"))


def _tuning_on() -> bool:
    return bool(knobs.ops.tuning)


def _forced_spec(op: str):
    text = knobs.ops.config
    if not text:
        return None
    for entry in text.split(";"):
        name, _, spec = entry.partition("=")
        if name.strip() == op:
            return spec.strip()
    return None


def _match(op: str, spec: str, candidates: list, default: Candidate) -> Candidate:
    """The first candidate that SPEC describes (see the module docstring)."""
    if spec == "default":
        return default
    m = re.fullmatch(r"(\w+)\s*(?:\((.*)\))?", spec)
    wanted = {}
    if m and m.group(2):
        for part in m.group(2).split(","):
            k, eq, v = part.partition("=")
            if not eq:
                m = None
                break
            wanted[k.strip()] = v.strip()
    if m:
        for c in candidates:
            if c.kernel == m.group(1) and all(k in c.config and repr(c.config[k]) == v
                                              for k, v in wanted.items()):
                return c
    listed = "; ".join(map(repr, candidates))
    raise ValueError(f"{op}: WARPWEAVE_OPS_CONFIG asks for {spec!r}, which is none of this "
                     f"call's configurations: {listed}")


def _can_time(place) -> bool:
    """Whether the call's kernels run on a GPU that do_bench can time (CUDA tensors outside the
    interpreter): NumPy arrays and the interpreter never tune."""
    return place.on_gpu and place.kind == "torch"


def _capturing() -> bool:
    import torch

    return torch.cuda.is_current_stream_capturing()


def _bench(call) -> list:
    """[median, 20th, 80th percentile] ms of one candidate's launch."""
    from ..autotuner import time_call

    return time_call(call, knobs.ops.warmup, knobs.ops.rep)


def _time_all(candidates, launch) -> dict:
    """Each candidate's timings: all compiled first, in parallel threads (the C++ compiler
    releases the GIL), then timed one after another."""
    import concurrent.futures

    def build(c):
        try:
            launch(c, compile_only)
        except Exception:  # timed below, where a failure to compile counts as infinitely slow
            pass

    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(candidates),
                                                               os.cpu_count() or 1)) as pool:
        list(pool.map(build, candidates))
    return {c: _bench(lambda c=c: launch(c, direct)) for c in candidates}


def _print(op, key, timings, chosen, how):
    from ..autotuner import _print_autotuning

    if not _print_autotuning():
        return
    if timings:
        for c in sorted(timings, key=lambda c: timings[c][0]):
            print(f"  {op} [{c!r}]: {timings[c][0]:.4f} ms")
    print(f"warpweave.ops {op} for key {key}: {chosen!r} ({how})")


def choose(place, op: str, key: tuple, candidates: list, default: Candidate, launch,
           kernels) -> Candidate:
    """The candidate `op` launches for a call on the GPU (see the module docstring).
    candidates: those valid for the call, default among them; launch(candidate, go) launches
    one through go(kernel, grid, *args, **meta) (the place's launch, direct or compile_only);
    kernels: every JIT function the candidates launch (their sources key the disk cache)."""
    assert default in candidates, (op, default)
    spec = _forced_spec(op)
    if spec is not None:
        chosen, how = _match(op, spec, candidates, default), "forced"
    elif len(candidates) < 2 or not _tuning_on() or not _can_time(place):
        chosen, how = default, "fixed"
    else:
        chosen, how, timings = _tuned(place, op, key, candidates, default, launch, kernels)
        decisions[op] = Decision(key, candidates, chosen, how, timings)
        return chosen
    decisions[op] = Decision(key, candidates, chosen, how)
    return chosen


def _tuned(place, op, key, candidates, default, launch, kernels):
    dev = device(place).text
    memory_key = (op, dev, key, tuple(candidates))
    chosen = _chosen.get(memory_key)
    if chosen is not None:
        return chosen, "memory", None
    with _lock:  # one thread times a key; the others wait for its answer
        chosen = _chosen.get(memory_key)
        if chosen is not None:
            return chosen, "memory", None
        from ..autotuner import _TuningRecord

        record = _TuningRecord(f"warpweave.ops.{op}", [k.environment() for k in kernels], key,
                               candidates, dev)
        timings = record.load()
        how = "disk"
        if timings is None:
            if _capturing():
                # No timing inside a graph capture; nor a plan that would keep this choice.
                if place.recorder is not None:
                    place.recorder.traceable = False
                return default, "provisional", None
            timings = _time_all(candidates, launch)
            record.save(timings)
            how = "timed"
        chosen = min(candidates, key=lambda c: timings[c][0])
        if timings[chosen][0] == float("inf"):
            chosen = default  # nothing ran: the default's launch reports why
        _chosen[memory_key] = chosen
        _print(op, key, timings, chosen, how)
        return chosen, how, timings


def pow2_bucket(n: int) -> int:
    """n rounded up to a power of two (0 stays 0): the shape keys' buckets."""
    return 0 if n <= 0 else 1 << (int(n) - 1).bit_length()
