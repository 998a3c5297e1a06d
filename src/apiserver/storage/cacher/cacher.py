"""The watch cache: one store watch per cached prefix, fanned out to every client watch.

Why: without it every client watch is a watch on the store (an HTTP stream to etcd, or a
replay from the SQLite log), and every ``resourceVersion=0`` list reads the whole prefix.
kube-apiserver puts a cacher in front of etcd for most resources
(k8s.io/apiserver/pkg/storage/cacher: ``cacher.go``, ``watch_cache.go``, ``cache_watcher.go``);
it leaves it off for events by default, we turn it on for them, with bounded memory.

How it follows kube-apiserver's cacher:

* Per cached prefix it lists the prefix (in pages, at one revision), then watches the store
  from that revision + 1 and applies every change to an in-memory map key -> KeyValue kept in
  key order (kube's ``watchCache.store``) and to a ring buffer of the last ``window`` events
  (kube's cyclic ``watchCache.cache``). The cache revision is the list revision, then the
  revision of the last change applied.
* A watch on the prefix (or a sub-prefix of it) from revision ``N + 1`` is served from the
  ring when ``N`` is not older than the ring (kube's ``getAllEventsSinceLocked``: the ring
  holds every change after its *floor*, the list revision until the first eviction, then the
  revision of the newest evicted event); otherwise ``done`` errbacks with CompactedError and
  kube's watch-cache text ``too old resource version: N (floor)``. Start revision 0 means
  "from the cache's current revision on".
* A broken store watch is resumed from the cache revision + 1 (so client watches go on without
  a gap); when the store has compacted that revision away (CompactedError) the prefix is listed
  again, and, like kube's ``startCaching`` (``terminateAllWatchers`` before each
  ListAndWatch), every client watch of the prefix is ended (``done`` fires None); clients
  re-watch from their last revision and get 410 Gone if it is older than the new list.
* Every ``bookmark_interval`` seconds each live watch gets a BOOKMARK event carrying the cache
  revision (kube sends them about once a minute to watchers that allow them; whether a client
  asked for bookmarks is the HTTP layer's business: it drops them otherwise).
* ``list_cached`` answers from memory once the cache is at least at the wanted revision, after
  kube's ``waitUntilFreshAndBlock``: it waits up to 3 s, then answers ``Too large resource
  version``.

Slow clients: callbacks run on the reactor thread and must not block. A watch is also a Twisted
``IPushProducer``: the HTTP layer may register it with the response (``pauseProducing`` when
the socket is full, ``resumeProducing`` when it drained). A paused watch keeps only a cursor
into the shared ring, so it costs no memory of its own; once it is more than
``max_pending_per_watcher`` matching events behind (or its cursor falls out of the ring) it is
ended (``done`` fires None, ``ended_slow`` is True), as kube-apiserver closes watchers that do
not keep up.

Why hand-written: the behaviour is tied to the Store contract (revisions, CompactedError,
prev_kv) and to Twisted's producer interfaces; a sorted key list with ``bisect`` is all the
ordered map needs (an insert is a memmove: measured 25 us at 100,000 keys, 0.1 ms at
1,000,000, small next to a store write).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sortedcontainers import SortedList
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IPushProducer, IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from apiserver.storage.flowcontrol import MAX_PENDING_PER_WATCHER, pausable_watch
from apiserver.storage.interface import (
    CommittedRevision,
    CompactedError,
    KeyValue,
    PausableWatch,
    PeriodicTask,
    RangeResult,
    StorageTimeoutError,
    Store,
    StoreCapabilities,
    UnavailableError,
    Watch,
    WatchEvent,
    WatchFlowControl,
    committed_revision_of,
    prefix_end,
)

__all__ = [
    "CATCH_UP_GRACE",
    "FRESHNESS_TIMEOUT",
    "LIST_PAGE",
    "CacheWatch",
    "Cacher",
]

_log = Logger()

#: How long ``list_cached`` waits for the cache to reach a revision the store does not have yet
#: (kube-apiserver's ``blockTimeout`` in ``waitUntilFreshAndBlock``).
FRESHNESS_TIMEOUT = 3.0
#: How long ``list_cached`` waits for the cache to reach a revision the store already has
#: before it reads the store instead (the prefix may simply have had no change since; nothing
#: in the Store contract lets the cache prove that it has seen everything up to a revision).
CATCH_UP_GRACE = 0.5
#: Keys per store read while (re)listing a prefix.
LIST_PAGE = 5000
#: Retry backoff of a failed list or a broken store watch: first delay, factor, cap (seconds).
BACKOFF_INITIAL = 0.05
BACKOFF_FACTOR = 2.0
BACKOFF_MAX = 2.0


def _too_large(min_revision: int, current: int, prefix: bytes) -> StorageTimeoutError:
    """kube-apiserver's ``NewTooLargeResourceVersionError`` (storage/errors.go): the API layer
    answers 504 ``Timeout`` with the cause ``ResourceVersionTooLarge``. ``revision`` carries
    the current revision."""
    return StorageTimeoutError(
        f"Too large resource version: {min_revision}, current: {current}",
        key=prefix,
        revision=current,
    )


# Watch states.
_WAITING = "waiting"  # the cache is (re)listing; registered once it is ready
_BEHIND = "behind"  # catching up from the ring (replay) or paused by its consumer
_LIVE = "live"  # receives changes as they are applied
_ENDED = "ended"


@implementer(IPushProducer)
class CacheWatch:
    """A client watch served by the cache (implements the ``Watch`` protocol and
    ``IPushProducer``).

    ``done`` fires None when the watch ends (``cancel()``, the cacher stopping or re-listing,
    the consumer being too slow: then ``ended_slow`` is True) and errbacks CompactedError when
    the start revision is older than the cache's window. Changes are delivered in revision
    order, each exactly once; replayed changes are delivered on a later reactor turn, never
    from inside ``watch()``.
    """

    def __init__(
        self,
        cache: _PrefixCache,
        prefix: bytes,
        start_revision: int,
        callback: Callable[[WatchEvent], None],
    ) -> None:
        self.prefix = prefix
        self.start_revision = start_revision
        self.ended_slow = False
        self.done: Deferred[None] = Deferred(canceller=lambda _: self.cancel())
        self._cache = cache
        self._callback = callback
        self._state = _WAITING
        #: Only changes with a revision >= this are delivered (a start in the future).
        self._next_rev = 0
        #: Ring position of the next change to look at (valid while behind; kept up to date
        #: on every delivery while live).
        self._pos = 0
        #: Where the replay started (-1: no replay); a replay whose start fell out of the
        #: ring before it delivered anything ends with CompactedError.
        self._replay_from = -1
        self._paused = False
        #: Matching changes that arrived while paused.
        self._pending = 0
        self._flush_call: IDelayedCall | None = None

    @property
    def active(self) -> bool:
        return self._state != _ENDED

    # -- Watch ------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop delivery; ``done`` fires with None."""
        self._end(None)

    # -- IPushProducer ----------------------------------------------------------------------

    def pauseProducing(self) -> None:
        """Stop delivering until ``resumeProducing``; changes meanwhile wait in the ring."""
        if self._state == _ENDED or self._paused:
            return
        self._paused = True
        self._pending = 0
        if self._state == _LIVE:
            self._cache._fall_behind(self)

    def resumeProducing(self) -> None:
        """Deliver what arrived while paused (synchronously), then go live again."""
        if self._state == _ENDED or not self._paused:
            return
        self._paused = False
        self._pending = 0
        if self._state == _BEHIND:
            self._cache._flush(self)

    def stopProducing(self) -> None:
        self.cancel()

    # -- internal ---------------------------------------------------------------------------

    def _end(self, error: Exception | None, slow: bool = False) -> None:
        if self._state == _ENDED:
            return
        if slow:
            self._cache.stats.terminated += 1
        self._cache._remove(self)
        self._state = _ENDED
        self.ended_slow = slow
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()
        self._flush_call = None
        if self.done.called:
            return
        if error is None:
            self.done.callback(None)
        else:
            self.done.errback(Failure(error))


class CacheStats:
    """What kube-apiserver's watch-cache metrics count for one cached prefix
    (k8s.io/apiserver pkg/storage/cacher/metrics), in plain integers read at scrape time."""

    __slots__ = ("dispatched", "init_events", "initializations", "received", "terminated")

    def __init__(self) -> None:
        #: Changes received from the store watch (``events_received_total``).
        self.received = 0
        #: Changes fanned out to the client watches (``events_dispatched_total``).
        self.dispatched = 0
        #: Objects loaded by the lists (``init_events_total``).
        self.init_events = 0
        #: Lists of the prefix that loaded the cache (``initializations_total``).
        self.initializations = 0
        #: Watches ended for not keeping up (``terminated_watchers_total``).
        self.terminated = 0


class _Group:
    """The watches of one exact prefix; ``snapshot`` is the live ones, rebuilt on change, so
    fan-out iterates a tuple that callbacks cannot change under it."""

    __slots__ = ("behind", "live", "snapshot")

    def __init__(self) -> None:
        self.live: dict[CacheWatch, None] = {}
        self.behind: dict[CacheWatch, None] = {}
        self.snapshot: tuple[CacheWatch, ...] = ()


class _PrefixCache:
    """The cached state, the ring and the watches of one cached prefix."""

    def __init__(
        self,
        store: Store,
        prefix: bytes,
        clock: IReactorTime,
        window: int,
        max_pending: int,
        on_first_ready: Callable[[], None],
    ) -> None:
        self.store = store
        self.prefix = prefix
        self._clock = clock
        self._window = window
        self._max_pending = max_pending
        self._on_first_ready = on_first_ready
        self.ready = False
        self.loaded_once = False
        self.stopped = False
        self.stats = CacheStats()
        #: The ring's size (``apiserver_watch_cache_capacity``).
        self.capacity = window
        # Current state: sorted keys + key -> KeyValue.
        #: The keys in order (for prefix ranges). A sorted container, not a list kept
        #: sorted with ``insort``: inserting into a list moves every later key, which cost
        #: about 10 us a create at 50,000 events and grows with them (kube-apiserver's watch
        #: cache keeps a B-tree for the same reason).
        self._keys: SortedList = SortedList()
        self._map: dict[bytes, KeyValue] = {}
        #: Revision the state is at (list revision, then last change applied).
        self.revision = 0
        #: The ring holds every change with a revision > floor.
        self.floor = 0
        # Ring: absolute positions [base, head) live at ring[pos % window].
        self._ring: list[WatchEvent | None] = [None] * window
        self._base = 0
        self._head = 0
        self._dispatching = -1  # ring position being fanned out, -1 when none
        # Watches.
        self._groups: dict[bytes, _Group] = {}
        self._groups_snapshot: tuple[tuple[bytes, _Group], ...] = ()
        self._waiting: dict[CacheWatch, None] = {}
        self._rev_waiters: list[tuple[int, Deferred[bool]]] = []
        # The store watch and retries.
        self._gen = 0
        self._store_watch: Watch | None = None
        self._retry: IDelayedCall | None = None
        self._backoff = BACKOFF_INITIAL

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> None:
        self._relist()

    def stop(self) -> None:
        self.stopped = True
        self.ready = False
        self._gen += 1
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        self._drop_store_watch()
        for w in list(self._waiting):
            w._end(None)
        self._end_registered()
        waiters, self._rev_waiters = self._rev_waiters, []
        for _, d in waiters:
            d.callback(False)

    def _schedule(self, fn: Callable[[], None]) -> None:
        if self.stopped or (self._retry is not None and self._retry.active()):
            return
        delay, self._backoff = self._backoff, min(self._backoff * BACKOFF_FACTOR, BACKOFF_MAX)
        self._retry = self._clock.callLater(delay, fn)

    def _drop_store_watch(self) -> None:
        w, self._store_watch = self._store_watch, None
        if w is not None:
            w.cancel()

    def _end_registered(self) -> None:
        for group in list(self._groups.values()):
            for w in (*group.live, *group.behind):
                w._end(None)

    # -- listing ----------------------------------------------------------------------------

    def _relist(self) -> None:
        """(Re)load the prefix; every registered watch ends (kube's terminateAllWatchers)."""
        self._retry = None
        if self.stopped:
            return
        self._gen += 1
        gen = self._gen
        self.ready = False
        self._drop_store_watch()
        self._end_registered()
        d = defer.ensureDeferred(self._list_all())
        d.addCallbacks(self._loaded, self._load_failed, callbackArgs=(gen,), errbackArgs=(gen,))

    async def _list_all(self) -> tuple[list[KeyValue], int]:
        result = await self.store.range(self.prefix, limit=LIST_PAGE)
        revision = result.revision
        kvs = list(result.kvs)
        while result.more and result.kvs:
            start = result.kvs[-1].key + b"\x00"
            result = await self.store.range(
                self.prefix, start_key=start, limit=LIST_PAGE, revision=revision
            )
            kvs.extend(result.kvs)
        return kvs, revision

    def _load_failed(self, failure: Failure, gen: int) -> None:
        if gen != self._gen or self.stopped:
            return
        _log.warn(
            "watch cache: listing {prefix!r} failed: {error}; retrying",
            prefix=self.prefix,
            error=failure.getErrorMessage(),
        )
        self._schedule(self._relist)

    def _loaded(self, listed: tuple[list[KeyValue], int], gen: int) -> None:
        if gen != self._gen or self.stopped:
            return
        kvs, revision = listed
        stats = self.stats
        stats.initializations += 1
        stats.init_events += len(kvs)
        self._keys = SortedList(kv.key for kv in kvs)
        self._map = {kv.key: kv for kv in kvs}
        self.revision = revision
        self.floor = revision
        self._ring = [None] * self._window
        self._base = self._head
        self.ready = True
        self._backoff = BACKOFF_INITIAL
        self._watch_store(revision + 1)
        if not self.ready:  # the store watch failed at once
            return
        for w in list(self._waiting):
            if self._waiting.pop(w, 1) is None:
                self._register(w)
        self._wake_waiters()
        if not self.loaded_once:
            self.loaded_once = True
            self._on_first_ready()

    # -- the store watch --------------------------------------------------------------------

    def _watch_store(self, from_revision: int) -> None:
        self._retry = None
        if self.stopped:
            return
        gen = self._gen
        w = self.store.watch(self.prefix, from_revision, lambda event: self._apply(gen, event))
        self._store_watch = w
        w.done.addBoth(self._store_watch_ended, gen, w)

    def _store_watch_ended(self, result: Any, gen: int, w: Watch) -> None:
        if gen != self._gen or self.stopped:
            return
        if self._store_watch is w:
            self._store_watch = None
        if isinstance(result, Failure) and result.check(CompactedError):
            _log.info(
                "watch cache: revision {rev} of {prefix!r} compacted; listing again",
                rev=self.revision + 1,
                prefix=self.prefix,
            )
            self.ready = False
            self._schedule(self._relist)
            return
        reason = result.getErrorMessage() if isinstance(result, Failure) else "ended"
        _log.info(
            "watch cache: store watch on {prefix!r} {reason}; resuming from {rev}",
            prefix=self.prefix,
            reason=reason,
            rev=self.revision + 1,
        )
        self._schedule(lambda: self._watch_store(self.revision + 1))

    def _apply(self, gen: int, event: WatchEvent) -> None:
        """A change from the store watch: update the state, the ring, then fan out."""
        if gen != self._gen:
            return
        kv = event.kv
        key = kv.key
        rev = kv.mod_revision
        if rev < self.revision or not key.startswith(self.prefix):
            return
        self.stats.received += 1
        old = self._map.get(key)
        if event.type == "DELETE":
            if old is not None:
                del self._map[key]
                self._keys.remove(key)
        else:
            if old is None:
                self._keys.add(key)
            self._map[key] = kv
        if event.prev_kv is None and old is not None:
            # The store lost the previous value (etcd: compacted); the cache still has it.
            event = WatchEvent(event.type, kv, old)
        self.revision = rev
        self._backoff = BACKOFF_INITIAL
        # Ring.
        window = self._window
        if self._head - self._base >= window:
            evicted = self._ring[self._base % window]
            if evicted is not None and evicted.kv.mod_revision > self.floor:
                self.floor = evicted.kv.mod_revision
            self._base += 1
        pos = self._head
        self._ring[pos % window] = event
        self._head = pos + 1
        self._fan_out(pos, event)
        if self._rev_waiters:
            self._wake_waiters()

    def _fan_out(self, pos: int, event: WatchEvent) -> None:
        key = event.kv.key
        rev = event.kv.mod_revision
        after = pos + 1
        self._dispatching = pos
        self.stats.dispatched += 1
        try:
            for prefix, group in self._groups_snapshot:
                if not key.startswith(prefix):
                    continue
                for w in group.snapshot:
                    if w._state is _LIVE and rev >= w._next_rev:
                        w._pos = after
                        try:
                            w._callback(event)
                        except Exception:
                            _log.failure("watch callback for {prefix!r} raised", prefix=w.prefix)
                if group.behind:
                    for w in list(group.behind):
                        if w._paused and w._state is _BEHIND and rev >= w._next_rev:
                            w._pending += 1
                            if w._pending > self._max_pending:
                                w._end(None, slow=True)
        finally:
            self._dispatching = -1

    # -- client watches ---------------------------------------------------------------------

    def watch(
        self, prefix: bytes, start_revision: int, callback: Callable[[WatchEvent], None]
    ) -> CacheWatch:
        w = CacheWatch(self, prefix, max(0, start_revision), callback)
        if self.stopped:
            w._state = _ENDED
            w.done.errback(Failure(UnavailableError("watch cache is stopped")))
        elif self.ready:
            self._register(w)
        else:
            self._waiting[w] = None
        return w

    def _register(self, w: CacheWatch) -> None:
        start = w.start_revision
        if start == 0:
            w._next_rev = self.revision + 1
            w._pos = self._head
        else:
            if start - 1 < self.floor:
                w._state = _ENDED
                w.done.errback(
                    Failure(
                        CompactedError(
                            f"too old resource version: {start - 1} ({self.floor})",
                            key=w.prefix,
                            revision=self.floor,
                        )
                    )
                )
                return
            w._next_rev = start
            w._pos = w._replay_from = self._first_at(start)
        group = self._groups.get(w.prefix)
        if group is None:
            group = self._groups[w.prefix] = _Group()
            self._groups_snapshot = tuple(self._groups.items())
        if w._pos >= self._head and not w._paused:
            w._state = _LIVE
            group.live[w] = None
            group.snapshot = tuple(group.live)
        else:
            w._state = _BEHIND
            group.behind[w] = None
            if not w._paused:
                w._flush_call = self._clock.callLater(0, self._flush, w)

    def _first_at(self, revision: int) -> int:
        """Ring position of the first change with a revision >= ``revision``."""
        lo, hi = self._base, self._head
        ring, window = self._ring, self._window
        while lo < hi:
            mid = (lo + hi) // 2
            ev = ring[mid % window]
            assert ev is not None
            if ev.kv.mod_revision < revision:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _fall_behind(self, w: CacheWatch) -> None:
        """A live watch was paused: remember where it is in the ring."""
        group = self._groups[w.prefix]
        del group.live[w]
        group.snapshot = tuple(group.live)
        group.behind[w] = None
        w._state = _BEHIND
        if self._dispatching < 0:
            w._pos = self._head
        elif w._pos != self._dispatching + 1:
            # Paused during a fan-out before its turn: the change being fanned out is next.
            w._pos = self._dispatching

    def _flush(self, w: CacheWatch) -> None:
        """Deliver the ring from the watch's cursor on, then make it live (unless paused)."""
        w._flush_call = None
        if w._state is not _BEHIND:
            return
        ring, window = self._ring, self._window
        prefix = w.prefix
        while not w._paused and w._state is _BEHIND:
            if w._pos < self._base:
                # The ring moved past it: a replay too long for one turn, or a paused watch
                # that fell too far behind. Either way its history is gone.
                if w._pos == w._replay_from:
                    w._end(
                        CompactedError(
                            f"too old resource version: {w.start_revision - 1} ({self.floor})",
                            key=w.prefix,
                            revision=self.floor,
                        )
                    )
                else:
                    w._end(None, slow=True)
                return
            if w._pos >= self._head:
                group = self._groups[w.prefix]
                del group.behind[w]
                group.live[w] = None
                group.snapshot = tuple(group.live)
                w._state = _LIVE
                return
            event = ring[w._pos % window]
            w._pos += 1
            assert event is not None
            if event.kv.key.startswith(prefix) and event.kv.mod_revision >= w._next_rev:
                try:
                    w._callback(event)
                except Exception:
                    _log.failure("watch callback for {prefix!r} raised", prefix=prefix)

    def _remove(self, w: CacheWatch) -> None:
        self._waiting.pop(w, None)
        group = self._groups.get(w.prefix)
        if group is None:
            return
        if group.live.pop(w, 1) is None:
            group.snapshot = tuple(group.live)
        group.behind.pop(w, None)
        if not group.live and not group.behind:
            del self._groups[w.prefix]
            self._groups_snapshot = tuple(self._groups.items())

    def bookmark(self) -> None:
        if not self.ready:
            return
        rev = self.revision
        event = WatchEvent("BOOKMARK", KeyValue(b"", b"", 0, rev), None)
        for _, group in self._groups_snapshot:
            for w in group.snapshot:
                if w._state is _LIVE and rev >= w._next_rev - 1:
                    try:
                        w._callback(event)
                    except Exception:
                        _log.failure("watch callback for {prefix!r} raised", prefix=w.prefix)

    # -- reads ------------------------------------------------------------------------------

    def lookup(self, key: bytes) -> KeyValue | None:
        return self._map.get(key)

    def snapshot(self, prefix: bytes) -> RangeResult:
        keys = self._keys
        end = prefix_end(prefix)
        m = self._map
        kvs = tuple([m[k] for k in keys.irange(prefix, end, inclusive=(True, False))])
        return RangeResult(kvs=kvs, revision=self.revision, more=False, count=len(kvs))

    def wait_for(self, revision: int, timeout: float) -> Deferred[bool]:
        """Fires True once the cache is ready at ``revision`` or later, False after
        ``timeout`` seconds on the clock (or when the cache stops)."""
        if self.ready and self.revision >= revision:
            return defer.succeed(True)
        d: Deferred[bool] = Deferred()
        entry = (revision, d)
        self._rev_waiters.append(entry)

        def timed_out() -> None:
            if entry in self._rev_waiters:
                self._rev_waiters.remove(entry)
                d.callback(False)

        call = self._clock.callLater(timeout, timed_out)

        def fired(result: bool) -> bool:
            if call.active():
                call.cancel()
            return result

        d.addCallback(fired)
        return d

    def _wake_waiters(self) -> None:
        if not self.ready:
            return
        rev = self.revision
        due = [d for r, d in self._rev_waiters if r <= rev]
        if not due:
            return
        self._rev_waiters = [(r, d) for r, d in self._rev_waiters if r > rev]
        for d in due:
            d.callback(True)


class Cacher:
    """A Store that serves watches and ``list_cached`` of ``prefixes`` from memory.

    Implements :class:`apiserver.storage.interface.Store`: writes, ``get``, ``range`` (at any
    revision), ``count``, ``compact``, ``current_revision`` and the health checks go to the
    wrapped ``store``; ``watch`` on a cached prefix or a sub-prefix of one (for example
    ``/registry/events/ns1/`` under ``/registry/events/``) is served by the cache, any other
    watch by the store. The longest cached prefix that contains a watch's prefix serves it.

    ``start()`` starts caching (list, then one store watch per prefix) and fires at once: the
    wrapped store's own life cycle belongs to its owner (start it first, stop it after).
    ``ready`` fires once every prefix has been listed the first time. ``clock`` drives the
    bookmarks, the waits of ``list_cached``, retries, and the turn on which replays are
    delivered. ``window`` is the number of changes kept per prefix for watches that resume
    from a past revision; ``bookmark_interval`` 0 disables bookmarks;
    ``max_pending_per_watcher`` bounds how far a paused watch may fall behind (see
    :class:`CacheWatch`). Callbacks run on the reactor thread and must not block.

    Capabilities: every watch is pausable (a watch of a prefix no cache covers gets
    ``apiserver.storage.flowcontrol``'s flow control over the store's watch), lists are served
    from the cache, and the synchronous current reads (:meth:`current_value`,
    :meth:`current_snapshot`, :meth:`current_revision_now`) are declared only when the wrapped
    store declares ``committed_revision``: only then can the cache prove it is current.
    """

    def __init__(
        self,
        store: Store,
        prefixes: Sequence[bytes],
        clock: IReactorTime,
        *,
        window: int = 10000,
        bookmark_interval: float = 60.0,
        max_pending_per_watcher: int = MAX_PENDING_PER_WATCHER,
    ) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        if max_pending_per_watcher < 1:
            raise ValueError(
                f"max_pending_per_watcher must be at least 1, got {max_pending_per_watcher}"
            )
        for p in prefixes:
            if not isinstance(p, bytes) or not p:
                raise ValueError(f"cached prefixes are non-empty bytes, got {p!r}")
        self._store = store
        #: Set only when the store declares it (never probed: see StoreCapabilities).
        self._committed: CommittedRevision | None = committed_revision_of(store)
        self.capabilities = StoreCapabilities(
            current_reads=self._committed is not None,
            cached_lists=True,
            watch_flow_control=WatchFlowControl.PAUSE,
        )
        self._clock = clock
        self._max_pending = max_pending_per_watcher
        self._bookmark_interval = bookmark_interval
        # Longest first, so the most specific cached prefix serves a watch.
        ordered = sorted(set(prefixes), key=len, reverse=True)
        self._caches = [
            _PrefixCache(store, p, clock, window, max_pending_per_watcher, self._prefix_ready)
            for p in ordered
        ]
        self._bookmarks: LoopingCall | None = None
        self._state = "new"  # new -> running -> stopped
        self._ready_count = 0
        self._ready_waiters: list[Deferred[None]] = []

    @property
    def store(self) -> Store:
        """The wrapped store."""
        return self._store

    @property
    def prefixes(self) -> tuple[bytes, ...]:
        return tuple(c.prefix for c in self._caches)

    def stats(self) -> list[tuple[bytes, CacheStats, int, int]]:
        """(prefix, counts, revision, capacity) of every cached prefix, for the metrics."""
        return [(c.prefix, c.stats, c.revision, c.capacity) for c in self._caches]

    # -- life cycle -------------------------------------------------------------------------

    def start(self) -> Deferred[None]:
        """Start listing and watching every cached prefix; fires at once (see ``ready``)."""
        if self._state != "new":
            if self._state == "running":
                return defer.succeed(None)
            return defer.fail(UnavailableError("watch cache is stopped; cannot start again"))
        self._state = "running"
        for cache in self._caches:
            cache.start()
        if self._bookmark_interval > 0:
            self._bookmarks = LoopingCall(self._bookmark)
            self._bookmarks.clock = self._clock
            self._bookmarks.start(self._bookmark_interval, now=False).addErrback(
                lambda f: _log.failure("watch cache bookmarks stopped", f)
            )
        return defer.succeed(None)

    def stop(self) -> Deferred[None]:
        """Stop the store watches and timers and end every cache watch (``done`` fires None).
        Does not stop the wrapped store."""
        if self._state == "stopped":
            return defer.succeed(None)
        self._state = "stopped"
        if self._bookmarks is not None and self._bookmarks.running:
            self._bookmarks.stop()
        self._bookmarks = None
        for cache in self._caches:
            cache.stop()
        waiters, self._ready_waiters = self._ready_waiters, []
        for d in waiters:
            d.errback(Failure(UnavailableError("watch cache stopped before it was ready")))
        return defer.succeed(None)

    @property
    def ready(self) -> Deferred[None]:
        """A new Deferred that fires once every cached prefix has been listed for the first
        time (errbacks UnavailableError if the cacher stops first)."""
        if self.is_ready:
            return defer.succeed(None)
        if self._state == "stopped":
            return defer.fail(UnavailableError("watch cache is stopped"))
        d: Deferred[None] = Deferred()
        self._ready_waiters.append(d)
        return d

    @property
    def is_ready(self) -> bool:
        """Whether every cached prefix has been listed at least once."""
        return self._ready_count == len(self._caches)

    def _prefix_ready(self) -> None:
        self._ready_count += 1
        if self.is_ready:
            waiters, self._ready_waiters = self._ready_waiters, []
            for d in waiters:
                d.callback(None)

    def _bookmark(self) -> None:
        for cache in self._caches:
            cache.bookmark()

    def _cache_for(self, prefix: bytes) -> _PrefixCache | None:
        for cache in self._caches:
            if prefix.startswith(cache.prefix):
                return cache
        return None

    def _current_cache(self, key: bytes) -> _PrefixCache | None:
        """The cache serving ``key`` when it provably has every committed write, else None.

        Only for stores that declare ``committed_revision`` (the embedded one: all writers are
        in this process and watchers hear of a commit before the writer does). None means
        "read the store": the cache is behind, not ready, or the store does not declare it
        (etcd, where other servers write too).
        """
        committed = self._committed
        if committed is None:
            return None
        cache = self._cache_for(key)
        if cache is None or not cache.ready or cache.revision < committed.committed_revision():
            return None
        return cache

    def current_snapshot(self, prefix: bytes) -> RangeResult | None:
        """``prefix``'s state from memory when the cache is current (see
        :meth:`_current_cache`); None means "read the store"."""
        cache = self._current_cache(prefix)
        return cache.snapshot(prefix) if cache is not None else None

    def current_revision_now(self, prefix: bytes) -> int | None:
        """The revision :meth:`current_snapshot` of ``prefix`` would report, without taking
        the snapshot; None when it would return None."""
        cache = self._current_cache(prefix)
        return cache.revision if cache is not None else None

    def current_value(self, key: bytes) -> tuple[bool, KeyValue | None]:
        """(True, value or None if absent) when the cache is current for ``key``, else
        (False, None); see :meth:`_current_cache`."""
        cache = self._current_cache(key)
        if cache is None:
            return False, None
        return True, cache.lookup(key)

    def is_cached(self, prefix: bytes) -> bool:
        """Whether watches and ``list_cached`` of ``prefix`` are served from memory."""
        return self._cache_for(prefix) is not None

    def cache_revision(self, prefix: bytes) -> int:
        """The revision the cache serving ``prefix`` is at (0 if none serves it or it has
        not been listed yet)."""
        cache = self._cache_for(prefix)
        return cache.revision if cache is not None and cache.ready else 0

    # -- the cache --------------------------------------------------------------------------

    def watch(
        self,
        prefix: bytes,
        start_revision: int,
        callback: Callable[[WatchEvent], None],
    ) -> PausableWatch:
        """Like ``Store.watch``; from the cache for a cached prefix (see :class:`CacheWatch`),
        which also delivers BOOKMARK events. Before the first list is loaded (or while the
        prefix is listed again) the watch waits and starts once the cache is ready."""
        if not isinstance(prefix, bytes):
            raise TypeError(f"keys are bytes, got {type(prefix).__name__}")
        cache = self._cache_for(prefix)
        if cache is None:
            return pausable_watch(self._store, prefix, start_revision, callback, self._max_pending)
        return cache.watch(prefix, start_revision, callback)

    def list_cached(self, prefix: bytes, min_revision: int = 0) -> Deferred[RangeResult]:
        """Every key under ``prefix`` in key order as of the cache revision (``revision`` of
        the result; ``more`` False, ``count`` the number of keys), served from memory once the
        cache is at ``min_revision`` or later.

        kube-apiserver's ``resourceVersionMatch=NotOlderThan`` semantics (cacher
        ``waitUntilFreshAndBlock``): when the cache is behind ``min_revision`` it waits up to
        3 s (``FRESHNESS_TIMEOUT``) on the clock for it; if the store itself is not at
        ``min_revision`` by then, the Deferred errbacks StorageTimeoutError with kube's text
        ``Too large resource version: <min_revision>, current: <store revision>`` (the API
        layer answers 504 ``Timeout`` with the cause ``ResourceVersionTooLarge``). If the store
        already has ``min_revision`` but the cache does not reach it within
        ``CATCH_UP_GRACE`` (no change under the prefix since: nothing shows the cache is
        current), or the prefix is being (re)listed, the answer is a consistent read of the
        store instead, so the result is never older than asked. A prefix no cache covers is
        always read from the store.
        """
        return defer.ensureDeferred(self._list_cached(prefix, min_revision))

    async def _list_cached(self, prefix: bytes, min_revision: int) -> RangeResult:
        cache = self._cache_for(prefix)
        if cache is not None and cache.ready and cache.revision >= min_revision:
            return cache.snapshot(prefix)
        if cache is None or not cache.ready:
            result = await self._store.range(prefix)
            if result.revision >= min_revision:
                return result
            if cache is None:
                raise _too_large(min_revision, result.revision, prefix)
        current = await self._store.current_revision()
        timeout = CATCH_UP_GRACE if current >= min_revision else FRESHNESS_TIMEOUT
        if await cache.wait_for(min_revision, timeout):
            return cache.snapshot(prefix)
        current = await self._store.current_revision()
        if current >= min_revision:
            return await self._store.range(prefix)
        raise _too_large(min_revision, current, prefix)

    # -- delegated to the store -------------------------------------------------------------

    def current_revision(self) -> Deferred[int]:
        return self._store.current_revision()

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        return self._store.get(key, revision)

    def create(self, key: bytes, value: bytes, ttl: int = 0) -> Deferred[KeyValue]:
        return self._store.create(key, value, ttl)

    def update(
        self, key: bytes, value: bytes, expected_revision: int, ttl: int = 0
    ) -> Deferred[KeyValue]:
        return self._store.update(key, value, expected_revision, ttl)

    def delete(self, key: bytes, expected_revision: int = 0) -> Deferred[KeyValue]:
        return self._store.delete(key, expected_revision)

    def range(
        self,
        prefix: bytes,
        start_key: bytes = b"",
        limit: int = 0,
        revision: int = 0,
    ) -> Deferred[RangeResult]:
        return self._store.range(prefix, start_key, limit, revision)

    def count(self, prefix: bytes) -> Deferred[int]:
        return self._store.count(prefix)

    def compact(self, revision: int) -> Deferred[None]:
        return self._store.compact(revision)

    def check_health(self, timeout: float) -> Deferred[None]:
        return self._store.check_health(timeout)

    def check_ready(self, timeout: float) -> Deferred[None]:
        return self._store.check_ready(timeout)

    def db_size(self) -> Deferred[int | None]:
        return self._store.db_size()

    def maintenance(self) -> Sequence[PeriodicTask]:
        """The wrapped store's: the cache itself has no periodic maintenance of the store."""
        return self._store.maintenance()

    @property
    def kind(self) -> str:
        """The wrapped backend's name."""
        return self._store.kind
