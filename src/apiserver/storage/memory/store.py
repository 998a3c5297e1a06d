"""A revisioned key-value store held in process memory, with etcd's semantics.

Why it exists: the REST layer and the registry are tested in process (``treq.testing.StubTreq``)
without threads, files or an etcd server. For such tests to be deterministic every Deferred
this store returns has already fired when the method returns, and every timer (TTL expiry,
periodic compaction) runs on the ``IReactorTime`` the caller passes in, never on the global
reactor.

The semantics are those of ``apiserver.storage.interface`` (etcd's mvcc, as
k8s.io/apiserver/pkg/storage/etcd3/store.go relies on it) and are checked by the same
conformance suite as the SQLite and etcd backends (``tests/storage/test_conformance.py``):

* One global revision. A new store is at revision 1, its first write is revision 2 (as etcd:
  no list ever reports revision 0). Every create, update and delete takes the next revision.
* Each key keeps its versions (newest last; a deletion is a tombstone), so gets and ranges at
  an older revision are answered until compaction forgets them.
* A log of every change since the compacted revision replays watches from a past revision,
  each event with its previous value (etcd's ``prev_kv``).
* TTL: a key written with ``ttl`` expires ``ttl`` seconds later on the injected clock; one
  delayed call (for the earliest expiry) deletes expired keys as ordinary DELETE revisions,
  so watchers see them, as etcd's lease revocation does.
* Compaction keeps, for every key, its newest version at or below the compacted revision
  (unless that is a tombstone), as etcd's ``kvindex.Compact`` does.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.storage.interface import (
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    PeriodicTask,
    RangeResult,
    StorageError,
    StoreCapabilities,
    UnavailableError,
    WatchEvent,
    prefix_end,
)
from apiserver.storage.periodic import PeriodicRunner

__all__ = ["MemoryStore", "MemoryWatch"]

_log = Logger()
_T = TypeVar("_T")

#: One version of a key: (revision, value at that revision, or None for a deletion).
_Version = tuple[int, KeyValue | None]


class MemoryWatch:
    """A running watch on a MemoryStore (implements the ``Watch`` protocol).

    Events wait in a per-watch queue and are delivered in revision order; a callback that
    writes to the store (and so causes more events) does not reorder or nest deliveries.
    """

    def __init__(
        self,
        store: MemoryStore,
        prefix: bytes,
        callback: Callable[[WatchEvent], None],
        min_revision: int,
    ) -> None:
        self._store = store
        self.prefix = prefix
        self._callback = callback
        #: Changes below this revision are not delivered: already queued, or before the
        #: revision the watch starts at.
        self._next_revision = min_revision
        self._queue: deque[WatchEvent] = deque()
        self._delivering = False
        self.active = True
        self.done: Deferred[None] = Deferred(canceller=lambda _: self.cancel())

    def offer(self, event: WatchEvent) -> None:
        """Queue ``event`` unless it is older than what this watch has already taken (a
        replay and the live fan-out may both offer a change), then deliver."""
        rev = event.kv.mod_revision
        if rev < self._next_revision:
            return
        self._next_revision = rev + 1
        self._queue.append(event)
        if not self._delivering:
            self._drain()

    def _drain(self) -> None:
        self._delivering = True
        try:
            queue = self._queue
            while queue and self.active:
                event = queue.popleft()
                try:
                    self._callback(event)
                except Exception:
                    _log.failure("watch callback for prefix {prefix!r} raised", prefix=self.prefix)
        finally:
            self._delivering = False

    def cancel(self) -> None:
        """Stop delivery; ``done`` fires with None. Idempotent."""
        self._end(None)

    def _end(self, error: StorageError | None) -> None:
        if self.active:
            self.active = False
            self._queue.clear()
            self._store._remove_watch(self)
        if not self.done.called:
            if error is None:
                self.done.callback(None)
            else:
                self.done.errback(Failure(error))


class MemoryStore:
    """The in-memory backend (implements ``apiserver.storage.interface.Store``).

    ``clock`` runs TTL expiry and the periodic compactor (required: tests pass a
    ``twisted.internet.task.Clock``). ``compaction_interval`` (seconds, 0: off) compacts, every
    interval, to the revision seen one interval earlier, as kube-apiserver's compactor
    (k8s.io/apiserver/pkg/storage/etcd3/compact.go) does (:meth:`compact_once`, declared in
    :meth:`maintenance`; with ``run_maintenance``, the default, the store runs it itself).

    TTL expiry stays inside the store and is not periodic: one delayed call at the earliest
    expiry, rescheduled by each write with a TTL and cancelled by :meth:`stop`.

    Capabilities: the same as the embedded SQLite store's (so in-process tests take the code
    paths a default server takes): every write is in this process and reaches the watches
    before its caller hears of it, so :meth:`committed_revision` is known synchronously;
    watches deliver as writes happen (no pause).
    """

    capabilities = StoreCapabilities(committed_revision=True)
    kind = "memory"

    def __init__(
        self,
        clock: IReactorTime,
        *,
        compaction_interval: float = 0.0,
        run_maintenance: bool = True,
    ) -> None:
        self._clock = clock
        self._tasks: tuple[PeriodicTask, ...] = ()
        if compaction_interval > 0:
            self._tasks = (PeriodicTask("compaction", compaction_interval, self.compact_once),)
        #: The loops the store runs itself (``run_maintenance``), started by :meth:`start`.
        self._runners = [PeriodicRunner(t, clock) for t in self._tasks] if run_maintenance else []
        self._state = "new"  # new -> running -> stopped
        self._rev = 1
        self._compact_rev = 0
        #: Every key with a version not yet compacted away, in key order.
        self._keys: list[bytes] = []
        self._versions: dict[bytes, list[_Version]] = {}
        #: Live keys at the latest revision.
        self._current: dict[bytes, KeyValue] = {}
        #: Every change with revision > ``_log_start - 1``, in revision order (one per revision).
        self._log: list[WatchEvent] = []
        self._log_start = 2
        #: Absolute expiry per key with a TTL; the heap may hold stale entries.
        self._expires: dict[bytes, float] = {}
        self._expiry_heap: list[tuple[float, bytes]] = []
        self._expiry_call: IDelayedCall | None = None
        self._watches: dict[MemoryWatch, None] = {}
        self._fan_out: deque[WatchEvent] = deque()
        self._fanning_out = False
        self._compactor_seen = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Deferred[None]:
        if self._state == "running":
            return defer.succeed(None)
        if self._state != "new":
            return defer.fail(UnavailableError(f"store is {self._state}; cannot start again"))
        self._state = "running"
        self._compactor_seen = self._rev
        for runner in self._runners:
            runner.start()
        self._schedule_expiry()
        return defer.succeed(None)

    def stop(self) -> Deferred[None]:
        if self._state == "running":
            for runner in self._runners:
                runner.stop()  # its rounds are synchronous: none is in progress
            if self._expiry_call is not None and self._expiry_call.active():
                self._expiry_call.cancel()
            self._expiry_call = None
            for w in list(self._watches):
                w.cancel()
        self._state = "stopped"
        return defer.succeed(None)

    def committed_revision(self) -> int:
        """The newest revision, every change up to which has been delivered to watchers."""
        return self._rev

    # -- helpers ------------------------------------------------------------------------------

    def _unavailable(self) -> UnavailableError | None:
        if self._state != "running":
            return UnavailableError(f"store is {self._state}")
        return None

    def _check_revision(self, revision: int) -> None:
        if revision < self._compact_rev:
            raise CompactedError(
                f"revision {revision} has been compacted (compacted revision {self._compact_rev})",
                revision=self._compact_rev,
            )
        if revision > self._rev:
            raise FutureRevisionError(
                f"revision {revision} is ahead of the current revision {self._rev}",
                revision=self._rev,
            )

    def _at(self, key: bytes, revision: int) -> KeyValue | None:
        """The key's value at ``revision`` (None: absent then)."""
        if revision >= self._rev:
            return self._current.get(key)
        found: KeyValue | None = None
        for rev, kv in self._versions.get(key, ()):
            if rev > revision:
                break
            found = kv
        return found

    def _matching(self, key: bytes, expected: int) -> KeyValue:
        current = self._current.get(key)
        if current is None:
            raise KeyNotFoundError(f"key {key!r} not found", key=key)
        if expected and expected != current.mod_revision:
            raise ConflictError(
                f"key {key!r} is at revision {current.mod_revision}, not {expected}",
                key=key,
                revision=current.mod_revision,
                current=current,
            )
        return current

    def _commit(self, key: bytes, kv: KeyValue | None, event: WatchEvent, ttl: int) -> None:
        """Record the write at revision ``self._rev`` (already taken) and tell watchers."""
        versions = self._versions.get(key)
        if versions is None:
            versions = self._versions[key] = []
            insort(self._keys, key)
        versions.append((self._rev, kv))
        if kv is None:
            self._current.pop(key, None)
        else:
            self._current[key] = kv
        if ttl:
            expires = float(self._clock.seconds()) + ttl
            self._expires[key] = expires
            heapq.heappush(self._expiry_heap, (expires, key))
            self._schedule_expiry()
        else:
            self._expires.pop(key, None)
        self._log.append(event)
        if self._watches:
            self._fan_out.append(event)
            if not self._fanning_out:
                self._dispatch()

    def _dispatch(self) -> None:
        """Offer each pending change to every matching watch, one change after the other: a
        change made by a watch callback waits until the one being delivered has reached every
        watch, so all watches see the same order."""
        self._fanning_out = True
        try:
            pending = self._fan_out
            while pending:
                event = pending.popleft()
                key = event.kv.key
                for w in tuple(self._watches):
                    if w.active and key.startswith(w.prefix):
                        w.offer(event)
        finally:
            self._fanning_out = False

    # -- Store API --------------------------------------------------------------------------

    def current_revision(self) -> Deferred[int]:
        error = self._unavailable()
        if error is not None:
            return defer.fail(error)
        return defer.succeed(self._rev)

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        _check_key(key)
        return _run(self._get, key, revision)

    def _get(self, key: bytes, revision: int) -> KeyValue:
        self._raise_unavailable()
        if revision:
            self._check_revision(revision)
        kv = self._at(key, revision or self._rev)
        if kv is None:
            where = f" at revision {revision}" if revision else ""
            raise KeyNotFoundError(f"key {key!r} not found{where}", key=key)
        return kv

    def create(self, key: bytes, value: bytes, ttl: int = 0) -> Deferred[KeyValue]:
        _check_key(key)
        _check_ttl(ttl)
        return _run(self._create, key, bytes(value), ttl)

    def _create(self, key: bytes, value: bytes, ttl: int) -> KeyValue:
        self._raise_unavailable()
        existing = self._current.get(key)
        if existing is not None:
            raise KeyExistsError(
                f"key {key!r} already exists", key=key, revision=existing.mod_revision
            )
        self._rev += 1
        kv = KeyValue(key, value, self._rev, self._rev, ttl)
        self._commit(key, kv, WatchEvent("PUT", kv, None), ttl)
        return kv

    def update(
        self, key: bytes, value: bytes, expected_revision: int, ttl: int = 0
    ) -> Deferred[KeyValue]:
        _check_key(key)
        _check_ttl(ttl)
        return _run(self._update, key, bytes(value), expected_revision, ttl)

    def _update(self, key: bytes, value: bytes, expected: int, ttl: int) -> KeyValue:
        self._raise_unavailable()
        prev = self._matching(key, expected)
        self._rev += 1
        kv = KeyValue(key, value, prev.create_revision, self._rev, ttl)
        self._commit(key, kv, WatchEvent("PUT", kv, prev), ttl)
        return kv

    def delete(self, key: bytes, expected_revision: int = 0) -> Deferred[KeyValue]:
        _check_key(key)
        return _run(self._delete, key, expected_revision)

    def _delete(self, key: bytes, expected: int) -> KeyValue:
        self._raise_unavailable()
        prev = self._matching(key, expected)
        self._rev += 1
        # etcd's DELETE event carries only the key and the deletion revision.
        event = WatchEvent("DELETE", KeyValue(key, b"", 0, self._rev, 0), prev)
        self._commit(key, None, event, 0)
        return KeyValue(key, prev.value, prev.create_revision, self._rev, prev.lease)

    def range(
        self,
        prefix: bytes,
        start_key: bytes = b"",
        limit: int = 0,
        revision: int = 0,
    ) -> Deferred[RangeResult]:
        _check_key(prefix)
        return _run(self._range, prefix, start_key, max(0, limit), revision)

    def _range(self, prefix: bytes, start_key: bytes, limit: int, revision: int) -> RangeResult:
        self._raise_unavailable()
        if revision:
            self._check_revision(revision)
        at = revision or self._rev
        lo = max(prefix, start_key)
        hi = prefix_end(prefix)
        keys = self._keys
        kvs: list[KeyValue] = []
        count = 0
        for index in range(bisect_left(keys, lo), len(keys)):
            key = keys[index]
            if hi is not None and key >= hi:
                break
            kv = self._at(key, at)
            if kv is None:
                continue
            count += 1
            if not limit or len(kvs) < limit:
                kvs.append(kv)
        return RangeResult(kvs=tuple(kvs), revision=at, more=count > len(kvs), count=count)

    def count(self, prefix: bytes) -> Deferred[int]:
        _check_key(prefix)
        return _run(self._count, prefix)

    def _count(self, prefix: bytes) -> int:
        self._raise_unavailable()
        hi = prefix_end(prefix)
        return sum(1 for key in self._current if key >= prefix and (hi is None or key < hi))

    def watch(
        self,
        prefix: bytes,
        start_revision: int,
        callback: Callable[[WatchEvent], None],
    ) -> MemoryWatch:
        _check_key(prefix)
        w = MemoryWatch(self, prefix, callback, start_revision or self._rev + 1)
        error: StorageError | None = self._unavailable()
        if error is None and start_revision and start_revision < self._compact_rev:
            error = CompactedError(
                f"watch from revision {start_revision}: compacted "
                f"(compacted revision {self._compact_rev})",
                revision=self._compact_rev,
            )
        if error is not None:
            w.active = False
            w.done.errback(Failure(error))
            return w
        self._watches[w] = None
        if 0 < start_revision <= self._rev:
            first = max(start_revision, self._log_start) - self._log_start
            w._delivering = True  # queue the whole replay before the first callback
            for event in self._log[first:]:
                if event.kv.key.startswith(prefix):
                    w.offer(event)
            w._drain()
        return w

    def _remove_watch(self, w: MemoryWatch) -> None:
        self._watches.pop(w, None)

    def compact(self, revision: int) -> Deferred[None]:
        return _run(self._compact, revision)

    def _compact(self, revision: int) -> None:
        self._raise_unavailable()
        if revision > self._rev:
            raise FutureRevisionError(
                f"compaction revision {revision} is ahead of the current revision {self._rev}",
                revision=self._rev,
            )
        if revision <= self._compact_rev:
            return
        self._compact_rev = revision
        emptied = False
        for key, versions in list(self._versions.items()):
            # Keep the newest version at or below the compacted revision unless it is a
            # tombstone, and everything after it.
            keep_from = 0
            for index, (rev, _) in enumerate(versions):
                if rev > revision:
                    break
                keep_from = index
            if versions[keep_from][0] <= revision and versions[keep_from][1] is None:
                keep_from += 1
            if keep_from:
                del versions[:keep_from]
            if not versions:
                del self._versions[key]
                emptied = True
        if emptied:
            self._keys = [key for key in self._keys if key in self._versions]
        drop = revision - self._log_start
        if drop > 0:
            del self._log[:drop]
            self._log_start = revision

    def check_health(self, timeout: float) -> Deferred[None]:
        error = self._unavailable()
        return defer.fail(error) if error is not None else defer.succeed(None)

    def check_ready(self, timeout: float) -> Deferred[None]:
        return self.check_health(timeout)

    def db_size(self) -> Deferred[int | None]:
        """Nothing is on disk."""
        return defer.succeed(None)

    # -- timers -----------------------------------------------------------------------------

    def _raise_unavailable(self) -> None:
        error = self._unavailable()
        if error is not None:
            raise error

    def _schedule_expiry(self) -> None:
        """Keep one delayed call, at the earliest expiry (none when no key has a TTL)."""
        if self._state != "running":
            return
        heap = self._expiry_heap
        while heap and self._expires.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # superseded by a later write or a deletion
        if not heap:
            if self._expiry_call is not None and self._expiry_call.active():
                self._expiry_call.cancel()
            self._expiry_call = None
            return
        delay = max(0.0, heap[0][0] - float(self._clock.seconds()))
        call = self._expiry_call
        if call is not None and call.active():
            if call.getTime() <= heap[0][0]:
                return
            call.cancel()
        self._expiry_call = self._clock.callLater(delay, self._expire)

    def _expire(self) -> None:
        self._expiry_call = None
        now = float(self._clock.seconds())
        heap = self._expiry_heap
        while heap and heap[0][0] <= now:
            expires, key = heapq.heappop(heap)
            if self._expires.get(key) == expires:
                self._delete(key, 0)
        self._schedule_expiry()

    def maintenance(self) -> Sequence[PeriodicTask]:
        """The periodic compactor (when ``compaction_interval`` is set), unless the store
        runs it itself."""
        return () if self._runners else self._tasks

    def compact_once(self) -> Deferred[None]:
        """One round of periodic compaction: compact to the revision seen at the previous
        round (at start for the first)."""
        target, self._compactor_seen = self._compactor_seen, self._rev
        if target > self._compact_rev:
            self._compact(target)
        return defer.succeed(None)


def _run(fn: Callable[..., _T], *args: Any) -> Deferred[_T]:
    """``fn(*args)`` as an already-fired Deferred (a StorageError becomes its failure)."""
    try:
        return defer.succeed(fn(*args))
    except StorageError as e:
        return defer.fail(e)


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes):
        raise TypeError(f"keys are bytes, got {type(key).__name__}")


def _check_ttl(ttl: int) -> None:
    if ttl < 0:
        raise ValueError(f"ttl must not be negative, got {ttl}")
