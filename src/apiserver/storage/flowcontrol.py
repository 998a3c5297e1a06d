"""Flow control for the watches of a store that cannot pause them (``WatchFlowControl.NONE``).

Why: a client watch is written to its connection as changes arrive; when the client does not
read, the connection's buffer fills and the HTTP layer asks the watch to pause
(``IPushProducer.pauseProducing``). The watch cache pauses its watches itself, keeping only a
cursor into its ring. Without the cache (``--watch-cache=false``) the watch comes straight from
the backend, which delivers every change as soon as it commits; this wrapper gives it the same
contract: while paused it keeps the changes (at most ``max_pending``), delivers them in order
on resume, and ends the watch (``done`` fires None, ``ended_slow`` is True) once the consumer
is further behind than that, as kube-apiserver closes a watcher whose buffer is full
(k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go, ``add``: "Forcing ... watcher close
due to unresponsiveness") and as the etcd3 watcher does for its result channel
(k8s.io/apiserver/pkg/storage/etcd3/watcher.go).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import cast

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IPushProducer
from twisted.python.failure import Failure
from zope.interface import implementer

from apiserver.storage.interface import (
    PausableWatch,
    Store,
    Watch,
    WatchEvent,
    WatchFlowControl,
)

__all__ = ["MAX_PENDING_PER_WATCHER", "BufferedWatch", "pausable_watch"]

#: How many changes a paused watch may fall behind before it is ended (the watch cache's
#: default ``max_pending_per_watcher`` too).
MAX_PENDING_PER_WATCHER = 1000


@implementer(IPushProducer)
class BufferedWatch:
    """A backend watch made pausable (implements :class:`PausableWatch`).

    Not paused, a change goes straight to the callback (one call more than the bare backend
    watch). Paused, changes wait in a queue of at most ``max_pending``.
    """

    def __init__(self, callback: Callable[[WatchEvent], None], max_pending: int) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self._callback = callback
        self._max_pending = max_pending
        self._inner: Watch | None = None
        self._paused = False
        self._pending: deque[WatchEvent] = deque()
        self._ended = False
        self.ended_slow = False
        self.done: Deferred[None] = Deferred(canceller=lambda _: self.cancel())

    def attach(self, inner: Watch) -> None:
        """The backend watch feeding :meth:`offer` (it may have delivered already)."""
        self._inner = inner
        if self._ended:
            inner.cancel()
            return
        inner.done.addCallbacks(self._inner_done, self._inner_failed)

    def offer(self, event: WatchEvent) -> None:
        """The backend's callback."""
        if self._ended:
            return
        if not self._paused:
            self._callback(event)
            return
        if len(self._pending) >= self._max_pending:
            self._end(None, slow=True)
            return
        self._pending.append(event)

    # -- Watch ------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop delivery; ``done`` fires with None."""
        self._end(None)

    # -- IPushProducer ----------------------------------------------------------------------

    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        """Deliver what waited, in order, unless paused again meanwhile; then go live."""
        self._paused = False
        pending = self._pending
        while pending and not self._paused and not self._ended:
            self._callback(pending.popleft())

    def stopProducing(self) -> None:
        self.cancel()

    # -- internal ---------------------------------------------------------------------------

    def _inner_done(self, _: object) -> None:
        self._end(None)

    def _inner_failed(self, failure: Failure) -> None:
        if self._ended or self.done.called:
            return
        self._ended = True
        self._pending.clear()
        self.done.errback(failure)

    def _end(self, error: Exception | None, slow: bool = False) -> None:
        if self._ended:
            return
        self._ended = True
        self.ended_slow = slow
        self._pending.clear()
        inner = self._inner
        if inner is not None:
            inner.cancel()
        if not self.done.called:
            if error is None:
                self.done.callback(None)
            else:
                self.done.errback(Failure(error))


def pausable_watch(
    store: Store,
    prefix: bytes,
    start_revision: int,
    callback: Callable[[WatchEvent], None],
    max_pending: int = MAX_PENDING_PER_WATCHER,
) -> PausableWatch:
    """``store.watch(...)`` with flow control: the store's own watch when it declares
    ``WatchFlowControl.PAUSE``, else the store's watch wrapped in a :class:`BufferedWatch`."""
    if store.capabilities.watch_flow_control is WatchFlowControl.PAUSE:
        return cast(PausableWatch, store.watch(prefix, start_revision, callback))
    buffered = BufferedWatch(callback, max_pending)
    buffered.attach(store.watch(prefix, start_revision, buffered.offer))
    return buffered
