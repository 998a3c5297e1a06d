"""A service made of parts that each have ``start`` and ``stop`` (config reloaders, pollers).

kube-apiserver runs such loops as goroutines bound to the server's stop channel (the
dynamic certificate and config controllers of k8s.io/apiserver/pkg/server/dynamiccertificates
and the authorization config reloader of
k8s.io/kubernetes/pkg/kubeapiserver/authorizer/reload.go). Here the parts are built without
starting anything, and this service starts them in order when the tree starts and stops them
in reverse when it stops, so every loop has an owner.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger

log = Logger()


class Part(Protocol):
    """Something long-lived that schedules work on a clock once started."""

    def start(self) -> object: ...

    def stop(self) -> object: ...


class PartsService(Service):
    """Starts ``parts`` in order at start (once ``after()`` fires, when given) and stops the
    started ones in reverse at stop."""

    def __init__(
        self,
        name: str,
        parts: Sequence[Part],
        after: Callable[[], Deferred[None]] | None = None,
    ) -> None:
        self.name = name
        self.parts = list(parts)
        self.after = after
        self.started: list[Part] = []

    def startService(self) -> None:
        super().startService()
        if self.after is None:
            self._start_parts()
            return
        self.after().addCallback(lambda _: self._start_parts())

    def _start_parts(self) -> None:
        if not self.running or self.started:
            return
        for part in self.parts:
            part.start()
            self.started.append(part)

    def stopService(self) -> None:
        super().stopService()
        started, self.started = self.started, []
        for part in reversed(started):
            try:
                part.stop()
            except Exception:
                log.failure("stopping {part!r} failed", part=part)
