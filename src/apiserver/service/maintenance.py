"""The store's periodic maintenance (TTL sweeper, compaction) as child services of the tree.

The backend keeps the policy (what one sweep or one compaction round does) and declares the
loops in :meth:`~apiserver.storage.interface.Store.maintenance`; the server adds one
:class:`PeriodicTaskService` per declared task right after the ``store`` child, so the loops
start once the store can serve and stop (waiting for a round in progress) before the store
closes. kube-apiserver starts its compactor (k8s.io/apiserver/pkg/storage/etcd3/compact.go)
with the storage it maintains and stops it with the server's stop channel.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from apiserver.storage.interface import PeriodicTask
from apiserver.storage.periodic import PeriodicRunner


class PeriodicTaskService(Service):
    """Runs ``task`` on ``clock`` from when ``after()`` fires (the store is up) until stop.

    The service's name is the task's (``ttl-sweeper``, ``compaction``). ``stopService``
    cancels the next round and fires once a round in progress has ended, so the store that
    stops next never has a sweep or a compaction running against it.
    """

    def __init__(
        self,
        task: PeriodicTask,
        clock: IReactorTime,
        after: Callable[[], Deferred[None]] | None = None,
    ) -> None:
        self.name = task.name
        self.task = task
        self.after = after
        self.runner = PeriodicRunner(task, clock)

    def startService(self) -> None:
        super().startService()
        if self.after is None:
            self._start()
            return
        self.after().addCallback(lambda _: self._start())

    def _start(self) -> None:
        # The store may become ready only after this service was stopped (or never).
        if self.running:
            self.runner.start()

    def stopService(self) -> Deferred[None]:
        super().stopService()
        return self.runner.stop()
