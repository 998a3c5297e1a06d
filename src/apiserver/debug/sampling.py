"""Sampling profilers that run in a thread of their own, only while a profile is asked for.

Python has no per-thread profiling timer signal, so the CPU profile is a sampler thread: every
``interval`` it reads every thread's stack (``sys._current_frames``) and CPU clock
(``time.pthread_getcpuclockid``); a thread whose CPU clock moved since the previous sample
was running, and its stack is counted with the CPU time it used. A thread whose clock did
not move was waiting: with ``--contention-profiling`` those stacks make the block profile
(``delay`` in nanoseconds of waiting), Go's ``SetBlockProfileRate`` counterpart. Each sample
holds the interpreter lock only while it copies the stacks, so the reactor is never held up
longer than one sample; when no profile is running nothing runs at all.

The heap profile is tracemalloc's: tracing is switched on for the window asked for (it costs
on every allocation, so never otherwise), the allocations still alive at its end are the
profile, and tracing is switched off again; a process started with ``PYTHONTRACEMALLOC`` is
answered at once from its traces.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from types import CodeType, FrameType

from apiserver.debug.profile_proto import ProfileBuilder

#: Go's CPU profile rate, 100 Hz.
DEFAULT_INTERVAL = 0.01
MAX_DEPTH = 64

Stack = tuple[tuple[CodeType, int], ...]


def stack_of(frame: FrameType | None) -> Stack:
    """A frame's stack, innermost first, as (code, line) pairs."""
    out: list[tuple[CodeType, int]] = []
    while frame is not None and len(out) < MAX_DEPTH:
        out.append((frame.f_code, frame.f_lineno or 0))
        frame = frame.f_back
    return tuple(out)


def function_name(code: CodeType, filename: str) -> str:
    """``module.Qualified.name`` the way Go names functions (``pkg.Type.Method``)."""
    module = _module_of(filename)
    return f"{module}.{code.co_qualname}" if module else code.co_qualname


_MODULES: dict[str, str] = {}


def _module_of(filename: str) -> str:
    module = _MODULES.get(filename)
    if module is None:
        module = ""
        best = ""
        for path in sys.path:
            if path and filename.startswith(path.rstrip("/") + "/") and len(path) > len(best):
                best = path
        if best:
            relative = filename[len(best.rstrip("/")) + 1 :]
            module = relative.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        else:
            module = os.path.basename(filename).removesuffix(".py")
        _MODULES[filename] = module
    return module


def add_stack(builder: ProfileBuilder, stack: Stack) -> list[int]:
    return [
        builder.location(
            function_name(code, code.co_filename), code.co_filename, code.co_firstlineno, line
        )
        for code, line in stack
    ]


def _cpu_clock(ident: int) -> int | None:
    try:
        return time.clock_gettime_ns(time.pthread_getcpuclockid(ident))
    except (OSError, OverflowError, ValueError):
        return None


def sample_cpu(
    seconds: float,
    interval: float = DEFAULT_INTERVAL,
    contention: bool = False,
    stop: threading.Event | None = None,
) -> tuple[bytes, bytes | None]:
    """Sample for ``seconds`` (less if ``stop`` is set); the CPU profile and (with
    ``contention``) the block profile, each gzip-compressed pprof bytes."""
    tick = stop if stop is not None else threading.Event()
    own = threading.get_ident()
    names = {t.ident: t.name for t in threading.enumerate()}
    running: dict[tuple[str, Stack], list[int]] = {}
    waiting: dict[tuple[str, Stack], list[int]] = {}
    last: dict[int, int] = {}
    started_wall = time.time_ns()
    started = time.monotonic()
    deadline = started + seconds
    interval_ns = int(interval * 1e9)
    while True:
        now = time.monotonic()
        if now >= deadline or tick.wait(min(interval, deadline - now)):
            break
        frames = sys._current_frames()
        for ident, frame in frames.items():
            if ident == own:
                continue
            clock = _cpu_clock(ident)
            if clock is None:
                continue
            before = last.get(ident)
            last[ident] = clock
            if before is None:
                continue
            name = names.get(ident)
            if name is None:
                names.update({t.ident: t.name for t in threading.enumerate()})
                name = names.get(ident, str(ident))
            used = clock - before
            if used > 0:
                entry = running.setdefault((name, stack_of(frame)), [0, 0])
                entry[0] += 1
                entry[1] += used
            elif contention:
                entry = waiting.setdefault((name, stack_of(frame)), [0, 0])
                entry[0] += 1
                entry[1] += interval_ns
        del frames
    duration = int((time.monotonic() - started) * 1e9)
    cpu = ProfileBuilder(
        [("samples", "count"), ("cpu", "nanoseconds")], ("cpu", "nanoseconds"), interval_ns
    )
    for (name, stack), values in running.items():
        cpu.sample(add_stack(cpu, stack), values, {"thread": name})
    block: bytes | None = None
    if contention:
        builder = block_builder()
        for (name, stack), values in waiting.items():
            builder.sample(add_stack(builder, stack), values, {"thread": name})
        block = builder.encode(started_wall, duration)
    return cpu.encode(started_wall, duration), block


def block_builder() -> ProfileBuilder:
    """An empty block/mutex profile (what Go answers while the rate is 0)."""
    return ProfileBuilder(
        [("contentions", "count"), ("delay", "nanoseconds")], ("contentions", "count"), 1
    )


def threads_profile() -> bytes:
    """``goroutine`` in pprof form: one sample per distinct stack of the live threads."""
    builder = ProfileBuilder([("goroutine", "count")], ("goroutine", "count"), 1)
    counts: dict[Stack, int] = {}
    for frame in sys._current_frames().values():
        stack = stack_of(frame)
        counts[stack] = counts.get(stack, 0) + 1
    for stack, count in counts.items():
        builder.sample(add_stack(builder, stack), [count])
    return builder.encode(time.time_ns())


def heap_profile(seconds: float, frames: int = 32, stop: threading.Event | None = None) -> bytes:
    """tracemalloc's live allocations, after a window of ``seconds`` unless tracing was on
    already (see the module docstring)."""
    started_here = not tracemalloc.is_tracing()
    started = time.time_ns()
    if started_here:
        tracemalloc.start(frames)
        (stop if stop is not None else threading.Event()).wait(seconds)
    try:
        snapshot = tracemalloc.take_snapshot()
    finally:
        if started_here:
            tracemalloc.stop()
    builder = ProfileBuilder(
        [
            ("alloc_objects", "count"),
            ("alloc_space", "bytes"),
            ("inuse_objects", "count"),
            ("inuse_space", "bytes"),
        ],
        ("space", "bytes"),
        1,
    )
    for stat in snapshot.statistics("traceback"):
        # tracemalloc keeps file and line, not the function: the location is named after
        # its module and line. Its traceback is outermost first; pprof wants the leaf first.
        locations = [
            builder.location(
                f"{_module_of(frame.filename)}:{frame.lineno}", frame.filename, 0, frame.lineno
            )
            for frame in reversed(stat.traceback)
        ]
        builder.sample(locations, [stat.count, stat.size, stat.count, stat.size])
    return builder.encode(started, time.time_ns() - started)
