"""Process-wide switches of `warpweave.profiler` (Proton's `flags`): whether any session was
started and not yet finalized, and whether the profiler runs from a command line (always False:
warpweave has no profiling command yet)."""

from dataclasses import dataclass


@dataclass
class ProfilerFlags:
    profiling_on: bool = False
    instrumentation_on: bool = False
    command_line: bool = False


flags = ProfilerFlags()
