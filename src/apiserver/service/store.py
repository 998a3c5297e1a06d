"""The store and its watch cache as two services: start with retries, stop last.

kube-apiserver keeps retrying its etcd client in the background (its ``etcd`` check says
``etcd client connection not yet established`` meanwhile) rather than failing start-up; we do
the same for both backends, so a server started before its etcd becomes ready on its own.

The backends' periodic maintenance (the SQLite TTL sweeper, the compactor of
k8s.io/apiserver/pkg/storage/etcd3/compact.go) is not run by the store in a server: the
store declares it (``Store.maintenance``) and the server runs each task as a child service
right after this one (:mod:`apiserver.service.maintenance`). The watch cache
(k8s.io/apiserver/pkg/storage/cacher/cacher.go) comes next, :class:`CacherService`: it
starts once the store is up and stops before it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.storage.cacher import Cacher
from apiserver.storage.interface import Store, UnavailableError

log = Logger()


class _Readiness:
    """Deferreds waiting for a service to become ready."""

    def __init__(self) -> None:
        self.ready = False
        self._waiting: list[Deferred[None]] = []

    def wait(self) -> Deferred[None]:
        if self.ready:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._waiting.append(d)
        return d

    def mark(self) -> None:
        self.ready = True
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(None)


class StoreService(Service):
    """Owns one :class:`Store`; ``wait_ready`` fires once it started.

    ``prepare`` runs at start, before the first attempt (the SQLite backend creates
    ``--data-dir`` there, so building the server writes nothing).
    """

    name = "store"

    def __init__(
        self,
        store: Store,
        clock: IReactorTime,
        retry_interval: float = 1.0,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.retry_interval = retry_interval
        self.prepare = prepare
        self._ready = _Readiness()
        self._retry: IDelayedCall | None = None
        self._attempt: Deferred[None] | None = None
        self._store_running = False

    @property
    def started(self) -> bool:
        return self._ready.ready

    def startService(self) -> None:
        super().startService()
        if self.prepare is not None:
            self.prepare()
        self._try_start()

    def _try_start(self) -> None:
        self._retry = None
        if not self.running:
            return
        self._attempt = self.store.start()
        self._attempt.addCallbacks(self._on_started, self._on_failed)

    def _on_started(self, _: object) -> None:
        self._attempt = None
        self._store_running = True
        log.info("storage is ready")
        self._ready.mark()

    def _on_failed(self, failure: Failure) -> None:
        self._attempt = None
        if not self.running:
            return
        log.warn(
            "storage did not start ({error}); retrying in {interval}s",
            error=failure.getErrorMessage(),
            interval=self.retry_interval,
        )
        self._retry = self.clock.callLater(self.retry_interval, self._try_start)

    def wait_ready(self) -> Deferred[None]:
        """Fires when the store has started."""
        return self._ready.wait()

    def check(self, ready: bool, serving: Callable[[], bool] | None = None) -> Any:
        """A probe for the health checks: the store's own check once started (and, with
        ``serving``, once that says the storage layer above the store serves too)."""

        def probe(timeout: float) -> Deferred[None]:
            if not self._ready.ready or (serving is not None and not serving()):
                raise UnavailableError("client connection not yet established")
            if ready:
                return self.store.check_ready(timeout)
            return self.store.check_health(timeout)

        return probe

    def stopService(self) -> Deferred[None]:
        super().stopService()
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        if self._attempt is not None:
            self._attempt.cancel()
        if not self._store_running:
            return succeed(None)
        self._store_running = False
        self._ready.ready = False
        return self.store.stop()


class CacherService(Service):
    """Owns the watch cache: starts it once ``store`` is up; ``wait_ready`` fires once the
    cache has its initial list (kube-apiserver's cacher ``ready`` state, ready.go)."""

    name = "watch-cache"

    def __init__(self, cacher: Cacher, store: StoreService) -> None:
        self.cacher = cacher
        self.store = store
        self._ready = _Readiness()
        self._waiting: Deferred[None] | None = None
        self._cacher_running = False

    @property
    def started(self) -> bool:
        return self._ready.ready

    def startService(self) -> None:
        super().startService()
        self._waiting = self.store.wait_ready()
        self._waiting.addCallback(self._store_ready)

    def _store_ready(self, _: object) -> None:
        self._waiting = None
        if not self.running:
            return
        self._cacher_running = True
        self.cacher.start()
        self.cacher.ready.addCallbacks(lambda _: self._ready.mark(), self._not_ready)

    def _not_ready(self, failure: Failure) -> None:
        # Only when the cache stops before its first list: nothing waits any more.
        log.debug("watch cache stopped before ready: {e}", e=failure.getErrorMessage())

    def wait_ready(self) -> Deferred[None]:
        """Fires when the cache has listed the store once."""
        return self._ready.wait()

    def stopService(self) -> Deferred[None]:
        super().stopService()
        # A store that never started leaves ``_waiting`` pending; ``_store_ready`` then sees
        # that this service no longer runs and starts nothing.
        self._waiting = None
        if not self._cacher_running:
            return succeed(None)
        self._cacher_running = False
        self._ready.ready = False
        return self.cacher.stop()
