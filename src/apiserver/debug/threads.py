"""Running a blocking piece of debugging work (a profile, reading a log file) in a thread of
its own, with its result delivered on the reactor thread.

A thread per request rather than the reactor's pool: a CPU profile runs for as long as it is
asked to, and must not take a pool thread that the server's other work (DNS look-ups,
``deferToThread`` callers) may be waiting for.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

T = TypeVar("T")


class Runner(Protocol):
    def __call__(self, name: str, work: Callable[[], T], /) -> Deferred[T]: ...


def thread_runner(reactor: Any) -> Runner:
    """A :class:`Runner` that starts a daemon thread and fires on ``reactor``."""

    def run_in_thread(name: str, work: Callable[[], T]) -> Deferred[T]:
        d: Deferred[T] = Deferred()

        def run() -> None:
            try:
                result = work()
            except BaseException:
                reactor.callFromThread(d.errback, Failure())
            else:
                reactor.callFromThread(d.callback, result)

        threading.Thread(target=run, name=name, daemon=True).start()
        return d

    return run_in_thread
