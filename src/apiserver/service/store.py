"""Runs the configured store as a service: start with retries, stop last.

kube-apiserver keeps retrying its etcd client in the background (its ``etcd`` check says
``etcd client connection not yet established`` meanwhile) rather than failing start-up; we do
the same for both backends, so a server started before its etcd becomes ready on its own.
"""

from __future__ import annotations

from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.storage.interface import Store, UnavailableError

log = Logger()


class StoreService(Service):
    """Owns one :class:`Store`; ``ready`` fires once it has started."""

    name = "store"

    def __init__(
        self,
        store: Store,
        clock: IReactorTime,
        retry_interval: float = 1.0,
        cacher: Any = None,
    ) -> None:
        self.store = store
        self.cacher = cacher
        self.clock = clock
        self.retry_interval = retry_interval
        self.started = False
        self._waiting: list[Deferred[None]] = []
        self._retry: Any = None
        self._attempt: Deferred[None] | None = None

    def startService(self) -> None:
        super().startService()
        self._try_start()

    def _try_start(self) -> None:
        self._retry = None
        if not self.running:
            return
        self._attempt = self.store.start()
        self._attempt.addCallbacks(self._on_started, self._on_failed)

    def _on_started(self, _: object) -> None:
        self._attempt = None
        if self.cacher is not None:
            # The watch cache lists and watches the store it wraps: start it once the store is
            # up; the store counts as ready once the cache has its initial list.
            self.cacher.start()
            self.cacher.ready.addCallbacks(self._mark_ready, self._on_failed)
            return
        self._mark_ready(None)

    def _mark_ready(self, _: object) -> None:
        self.started = True
        log.info("storage is ready")
        waiting, self._waiting = self._waiting, []
        for d in waiting:
            d.callback(None)

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
        if self.started:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._waiting.append(d)
        return d

    def check(self, ready: bool) -> Any:
        """A probe for the health checks: the store's own check once started."""

        def probe(timeout: float) -> Deferred[None]:
            if not self.started:
                raise UnavailableError("client connection not yet established")
            if ready:
                return self.store.check_ready(timeout)
            return self.store.check_health(timeout)

        return probe

    def stopService(self) -> Deferred[None]:
        super().stopService()
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        if self._attempt is not None:
            self._attempt.cancel()
        if not self.started:
            return succeed(None)
        self.started = False
        if self.cacher is None:
            return self.store.stop()
        d = self.cacher.stop()
        d.addBoth(lambda _: self.store.stop())
        return d
