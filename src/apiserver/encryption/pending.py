"""Plugin calls that a transformer waits for without blocking the reactor.

kube-apiserver's KMS transformers call their plugin inline and block the request's goroutine
(k8s.io/apiserver ``pkg/storage/value/encrypt/envelope/kmsv2/envelope.go``: Decrypt of a
data key missing from the cache; ``envelope.go`` of KMS v1: Decrypt on a miss, Encrypt on
every write). A Twisted server has one thread for every request, so a transformer here
starts the call, raises :class:`~apiserver.storage.value.TransformPending` and is called
again once the answer is in (docs/encryption.md, "KMS calls").

:class:`PluginCalls` keeps that bookkeeping in one place: one call in flight per key however
many readers miss on it, every waiter woken when it ends, and a failed call's error handed to
the retries it woke (those retries run at once, in the same reactor turn) rather than a new
call started for each: a plugin that is down answers each reader once, as in Go.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IReactorTime

from apiserver.storage.value import TransformPending


class PluginCalls:
    """In-flight plugin calls by key, their waiters, and the answers of those just ended."""

    def __init__(self, clock: IReactorTime) -> None:
        self.clock = clock
        self._waiting: dict[Hashable, list[Deferred[None]]] = {}
        #: Calls that just ended: (True, result) or (False, error), kept for this turn.
        self._ended: dict[Hashable, tuple[bool, Any]] = {}

    def in_flight(self) -> int:
        """How many calls are waiting for their answer."""
        return len(self._waiting)

    def wait(self, key: Hashable, start: Callable[[], Deferred[Any]]) -> Any:
        """The answer of ``key``'s call if it just ended (its result, or its error raised);
        else raise :class:`TransformPending`, starting the call (``start()``) unless one is
        in flight already. A call that answers at once is answered at once."""
        ended = self._ended.get(key)
        if ended is None:
            waiters = self._waiting.get(key)
            if waiters is None:
                self._waiting[key] = waiters = []
                maybeDeferred(start).addCallbacks(
                    lambda result: self._end(key, (True, result)),
                    lambda failure: self._end(key, (False, failure.value)),
                )
                # Answered at once: nobody else can be waiting for this answer.
                ended = self._ended.pop(key, None)
            if ended is None:
                waiter: Deferred[None] = Deferred()
                waiters.append(waiter)
                raise TransformPending(waiter)
        ok, value = ended
        if ok:
            return value
        raise value

    def _end(self, key: Hashable, answer: tuple[bool, Any]) -> None:
        waiters = self._waiting.pop(key, [])
        self._ended[key] = answer
        self.clock.callLater(0, self._forget, key, answer)
        for waiter in waiters:
            waiter.callback(None)

    def _forget(self, key: Hashable, answer: tuple[bool, Any]) -> None:
        if self._ended.get(key) is answer:
            del self._ended[key]


__all__ = ["PluginCalls"]
