"""The loop that runs one :class:`~apiserver.storage.interface.PeriodicTask` on a clock.

Shared by the server's maintenance services (``apiserver.service.maintenance``, one child of
the service tree per task) and by a backend used on its own (``run_maintenance=True``, as in
tests and benchmarks), so both run a task the same way. kube-apiserver's periodic storage
loops (the compactor of k8s.io/apiserver/pkg/storage/etcd3/compact.go) wait for one round to
end before the next, keep going after a failed round, and end with their owner.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.storage.interface import PeriodicTask, StorageError

log = Logger()


class PeriodicRunner:
    """Runs ``task`` every ``task.interval`` seconds on ``clock``.

    A ``LoopingCall`` underneath: a round that returns a Deferred is waited for before the
    next is scheduled (rounds never overlap; rounds missed meanwhile are skipped, not
    bunched), and each round's failure is logged here, so the loop never ends on an error.
    """

    def __init__(self, task: PeriodicTask, clock: IReactorTime) -> None:
        self.task = task
        self.loop = LoopingCall(self._round)
        self.loop.clock = clock
        self._ended: Deferred[Any] | None = None

    @property
    def running(self) -> bool:
        return self.loop.running

    def start(self) -> None:
        """Start the loop (the first round now when ``task.now``); no-op if running."""
        if self._ended is not None:
            return
        self._ended = self.loop.start(self.task.interval, now=self.task.now)

    def stop(self) -> Deferred[None]:
        """Cancel the next round; fires once a round in progress (if any) has ended."""
        ended, self._ended = self._ended, None
        if ended is None:
            return succeed(None)
        if self.loop.running:
            self.loop.stop()
        return ended.addCallback(lambda _: None)

    def _round(self) -> Deferred[None]:
        d: Deferred[None] = maybeDeferred(self.task.run)
        return d.addErrback(self._failed)

    def _failed(self, failure: Failure) -> None:
        if failure.check(StorageError):
            # The store could not do it this time (etcd unreachable, store stopping): no
            # traceback, the next round tries again.
            log.warn("{task} failed: {error}", task=self.task.name, error=failure.getErrorMessage())
            return
        log.failure("{task} failed", failure, task=self.task.name)
