"""Delayed calls with an owner that cancels them when its service stops.

kube-apiserver ties every goroutine of a component to a stop channel closed on shutdown
(k8s.io/apiserver/pkg/server/genericapiserver.go ``stopCh``); a Twisted timer has no such
parent, so each service keeps the calls it scheduled here and cancels what is still pending
in ``stopService``. A fired call forgets itself, so the set only holds pending ones.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IDelayedCall, IReactorTime


class OwnedCalls:
    """``callLater`` on ``clock`` whose pending calls :meth:`cancel_all` cancels."""

    def __init__(self, clock: IReactorTime) -> None:
        self.clock = clock
        self._pending: set[IDelayedCall] = set()

    def later(self, seconds: float, fn: Callable[..., object], *args: Any) -> IDelayedCall:
        """Call ``fn(*args)`` after ``seconds``; cancelled by :meth:`cancel_all` if pending."""
        call: IDelayedCall

        def fire() -> None:
            self._pending.discard(call)
            fn(*args)

        call = self.clock.callLater(seconds, fire)
        self._pending.add(call)
        return call

    def cancel(self, call: IDelayedCall | None) -> None:
        """Cancel ``call`` if it is still pending."""
        if call is None:
            return
        self._pending.discard(call)
        if call.active():
            call.cancel()

    def cancel_all(self) -> None:
        """Cancel every pending call (service shutdown)."""
        pending, self._pending = self._pending, set()
        for call in pending:
            if call.active():
                call.cancel()

    def __len__(self) -> int:
        return len(self._pending)
