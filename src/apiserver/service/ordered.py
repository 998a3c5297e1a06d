"""A parent service that starts its children in order and stops them in reverse, one by one.

Why not ``MultiService``: it stops all children at once and gathers their Deferreds, so the
listener could still be accepting while the store underneath it closes. kube-apiserver's
shutdown is ordered (stop serving, drain, then close storage and audit), so ours is too.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from twisted.application.service import IService, Service
from twisted.internet.defer import Deferred, inlineCallbacks, maybeDeferred
from twisted.logger import Logger

log = Logger()


class OrderedService(Service):
    """Holds named child services; start order is insertion order, stop order its reverse."""

    def __init__(self) -> None:
        self._children: list[IService] = []

    def add(self, child: IService) -> IService:
        """Append a child; it is started now if this service is already running."""
        self._children.append(child)
        if self.running:
            child.startService()
        return child

    def __iter__(self) -> Iterator[IService]:
        return iter(self._children)

    def child_named(self, name: str) -> IService:
        """The child whose ``name`` is ``name`` (KeyError if none)."""
        for child in self._children:
            if getattr(child, "name", None) == name:
                return child
        raise KeyError(name)

    def privilegedStartService(self) -> None:
        for child in self._children:
            child.privilegedStartService()

    def startService(self) -> None:
        super().startService()
        for child in self._children:
            child.startService()

    def stopService(self) -> Deferred[None]:
        super().stopService()
        return self._stop_in_reverse()

    @inlineCallbacks
    def _stop_in_reverse(self) -> Any:
        for child in reversed(self._children):
            if not child.running:
                continue
            try:
                yield maybeDeferred(child.stopService)
            except Exception:
                log.failure("stopping service {name!r} failed", name=getattr(child, "name", child))
