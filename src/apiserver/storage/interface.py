"""The one storage interface every backend implements, with etcd's semantics.

Why etcd's semantics: kube-apiserver's registry (k8s.io/apiserver/pkg/storage/interfaces.go)
is written against a revisioned key-value store; `resourceVersion` is the store revision of an
object's last write, continue tokens carry a start key and a revision, and watches resume from a
revision. Backends: ``apiserver.storage.sqlite`` (embedded default, log-structured like kine),
``apiserver.storage.etcd3`` (etcd's ``/v3`` JSON gateway) and ``apiserver.storage.memory``
(in process, every Deferred fired on return: for in-process tests). All pass the same
conformance suite in ``tests/storage/``.

All methods return Deferreds and never block the reactor. Keys and values are bytes. Keys are
full keys as the API layer builds them (for example ``/registry/events/ns/name``); a backend
does not add a prefix of its own.

What a store guarantees beyond this contract (a committed revision known synchronously, reads
from memory that are provably current, lists from a watch cache, pausable watches) it declares
in ``Store.capabilities`` (:class:`StoreCapabilities`); the optional synchronous methods that
go with each declaration are the Protocols at the end of this module. Callers read the
declaration, never probe for methods.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

import attrs

if TYPE_CHECKING:
    # Only in annotations: the store's writer process imports this module without Twisted.
    from twisted.internet.defer import Deferred


def prefix_end(prefix: bytes) -> bytes | None:
    """etcd's range end for ``prefix`` (clientv3 ``GetPrefixRangeEnd``): the smallest key
    greater than every key with that prefix (last byte that is not 0xff incremented, what
    follows it dropped); None when there is none (the empty prefix, or all 0xff), meaning "to
    the end of the key space" (etcd spells that ``\\0`` on the wire). Every backend and the
    watch cache use this one."""
    end = bytearray(prefix)
    while end:
        if end[-1] < 0xFF:
            end[-1] += 1
            return bytes(end)
        end.pop()
    return None


@attrs.frozen
class KeyValue:
    """One key at one revision.

    ``create_revision`` is the revision at which the key was created (etcd ``create_revision``),
    ``mod_revision`` the revision of its last write (what becomes ``resourceVersion``).
    ``lease`` is 0 when the key has no TTL.
    """

    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int = 0


@attrs.frozen
class RangeResult:
    """A page of a range read at one revision.

    ``revision`` is the store revision the read was served at. ``more`` tells whether keys past
    the last returned one exist within the range; ``count`` is the total number of keys in the
    range at that revision (from the requested start key on), as etcd reports it.
    """

    kvs: tuple[KeyValue, ...]
    revision: int
    more: bool
    count: int


@attrs.frozen
class WatchEvent:
    """A change delivered to a watcher.

    ``type`` is ``"PUT"`` or ``"DELETE"``. For a PUT, ``kv`` is the new value; for a DELETE,
    ``kv`` holds the key with the deletion revision as ``mod_revision`` and an empty value.
    ``prev_kv`` is the value before the change (None for a create).

    Extension of the watch cache (``apiserver.storage.cacher``), never sent by a backend:
    ``type == "BOOKMARK"`` is a progress notification (kube-apiserver's periodic watch
    bookmark): ``kv`` is ``KeyValue(b"", b"", 0, <cache revision>)``, ``prev_kv`` is None, and
    it means every change under the watched prefix up to ``kv.mod_revision`` has been
    delivered. Consumers that do not want bookmarks drop them.
    """

    type: str
    kv: KeyValue
    prev_kv: KeyValue | None


class StorageError(Exception):
    """Base of the typed storage errors the API layer maps to Status responses."""

    def __init__(self, message: str = "", key: bytes = b"", revision: int = 0) -> None:
        super().__init__(message or self.__class__.__name__)
        self.key = key
        self.revision = revision


class KeyNotFoundError(StorageError):
    """The key does not exist (get, update, delete)."""


class KeyExistsError(StorageError):
    """create() of a key that already exists."""


class ConflictError(StorageError):
    """The expected revision did not match the key's current ``mod_revision``.

    ``current`` carries the key's current value when the backend has it (etcd returns it in the
    failed branch of the transaction), so callers can retry without another read.
    """

    def __init__(
        self,
        message: str = "",
        key: bytes = b"",
        revision: int = 0,
        current: KeyValue | None = None,
    ) -> None:
        super().__init__(message, key, revision)
        self.current = current


class CompactedError(StorageError):
    """The requested revision has been compacted away; ``revision`` is the compacted revision.

    Maps to 410 Gone (``too old resource version``) in the API layer.
    """


class FutureRevisionError(StorageError):
    """A read or watch asked for a revision newer than the store's current revision."""


class UnavailableError(StorageError):
    """The store cannot be reached (connection refused, all endpoints down)."""


class NoSpaceError(UnavailableError):
    """The store is out of space (a full disk under SQLite, etcd's quota): writes are refused
    until space is freed, reads go on. An UnavailableError, so the API layer answers it as
    kube-apiserver passes etcd's ``etcdserver: mvcc: database space exceeded`` on: a 500
    InternalError naming the cause."""


class StorageTimeoutError(StorageError):
    """The store did not answer in time."""


@runtime_checkable
class Watch(Protocol):
    """A running watch. ``cancel()`` stops delivery; ``done`` fires (with None) when the watch
    ends for any reason, or errbacks with a StorageError (CompactedError for a start revision
    that is gone, UnavailableError if it cannot be resumed)."""

    done: Deferred[None]

    def cancel(self) -> None: ...


class WatchFlowControl(enum.Enum):
    """How a store's watches keep a slow consumer from growing memory without bound."""

    #: Changes are delivered as fast as the store produces them; the consumer has no way to
    #: slow them down (the registry adds flow control, ``apiserver.storage.flowcontrol``).
    NONE = "none"
    #: Every watch is also an ``IPushProducer`` (:class:`PausableWatch`): ``pauseProducing``
    #: holds delivery back, ``resumeProducing`` delivers what waited, and a watch that falls
    #: too far behind is ended (``done`` fires None), as kube-apiserver's cacher closes
    #: watchers that do not keep up (k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go).
    PAUSE = "pause"


@attrs.frozen
class StoreCapabilities:
    """What a store guarantees beyond the :class:`Store` contract, declared, never probed.

    Read consistency and watch back-pressure depend on these guarantees, so the registry and
    the watch cache read this declaration and nothing else: they never ask a store with
    ``getattr`` or ``hasattr`` which methods it happens to have. The danger this prevents: the
    etcd backend gaining, say, a ``committed_revision`` method (for a metric) must not make
    servers that share one etcd serve stale reads from their watch caches. A method that
    exists without its declaration is never called; a declaration without its method fails
    ``tests/storage/test_capabilities.py``.

    kube-apiserver's cacher makes the same choice: with ``ConsistentListFromCache`` it serves
    a consistent list from memory only after asking etcd for the current revision and
    waiting until the cache has reached it (k8s.io/apiserver/pkg/storage/cacher/cacher.go,
    ``GetList``), because other apiservers write to the same etcd.
    """

    #: The store knows, synchronously, its newest committed revision, and every change up to
    #: it has already been delivered to this process's watches (:class:`CommittedRevision`).
    #: Only a store whose every writer is in this process may declare it (the embedded SQLite
    #: store, the in-memory store); the etcd backend never does, since other servers write
    #: to the same etcd and no revision this process knows is the cluster's.
    committed_revision: bool = False
    #: The store answers reads synchronously from memory when it can prove them current
    #: (:class:`CurrentReads`): the watch cache over a store with ``committed_revision``.
    current_reads: bool = False
    #: The store serves lists from a watch cache (:class:`CachedLists`), as kube-apiserver's
    #: cacher serves ``resourceVersion=0`` and NotOlderThan lists.
    cached_lists: bool = False
    #: How watches apply back-pressure to a slow consumer.
    watch_flow_control: WatchFlowControl = WatchFlowControl.NONE


@attrs.frozen
class PeriodicTask:
    """Periodic maintenance a store declares and its owner runs (:meth:`Store.maintenance`).

    The backend keeps the policy (what one round does: ``run``, whose Deferred fires when
    the round is over); whoever owns the store runs it every ``interval`` seconds on its
    clock, never two rounds at once, first at once when ``now`` is true and otherwise one
    interval after start. A failed round is logged and the next one still happens.
    kube-apiserver runs such loops as goroutines owned by the server (the compactor of
    k8s.io/apiserver/pkg/storage/etcd3/compact.go is started with the storage it compacts
    and stopped with it); here the owner is a child service of the server's tree
    (``apiserver.service.maintenance``), or the store itself when used on its own.
    """

    #: The owner's name for it (the service's name in the server's tree): ``ttl-sweeper``,
    #: ``compaction``.
    name: str
    interval: float
    run: Callable[[], Deferred[None]]
    now: bool = False


@runtime_checkable
class Store(Protocol):
    """A revisioned key-value store with compare-and-swap, ranges, watches and TTLs.

    ``capabilities`` declares what it guarantees beyond this contract; each declared
    capability comes with the synchronous methods of its Protocol below
    (:class:`CommittedRevision`, :class:`CurrentReads`, :class:`CachedLists`), and the
    store's watches are :class:`PausableWatch` when it declares ``WatchFlowControl.PAUSE``.
    """

    capabilities: StoreCapabilities

    @property
    def kind(self) -> str:
        """The backend's name, which is also its health check's (``etcd``, ``sqlite``,
        ``memory``): kube-apiserver names its store check after the backend."""

    def start(self) -> Deferred[None]:
        """Open connections, create the schema; fires when the store can serve."""

    def stop(self) -> Deferred[None]:
        """Stop timers and watches, close connections."""

    def maintenance(self) -> Sequence[PeriodicTask]:
        """The periodic tasks (TTL sweeper, compaction) the store's owner must run while the
        store runs: started once :meth:`start` has fired, stopped before :meth:`stop`. Empty
        when the store was built to run them itself (standalone use: ``run_maintenance``).
        Building the list starts nothing."""

    def current_revision(self) -> Deferred[int]:
        """The store's current (latest) revision."""

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        """The key at ``revision`` (0: latest). KeyNotFoundError, CompactedError."""

    def create(self, key: bytes, value: bytes, ttl: int = 0) -> Deferred[KeyValue]:
        """Write a new key; KeyExistsError if it exists. ``ttl`` in seconds (0: none)."""

    def update(
        self, key: bytes, value: bytes, expected_revision: int, ttl: int = 0
    ) -> Deferred[KeyValue]:
        """Replace the key if its ``mod_revision`` equals ``expected_revision``.

        ``expected_revision == 0`` means unconditional (the key must still exist).
        KeyNotFoundError if the key is gone, ConflictError on a revision mismatch.
        ``ttl`` (seconds, 0: none) replaces the key's TTL.
        """

    def delete(self, key: bytes, expected_revision: int = 0) -> Deferred[KeyValue]:
        """Delete the key (conditionally when ``expected_revision`` is not 0).

        Returns the deleted value with ``mod_revision`` set to the deletion's revision.
        KeyNotFoundError, ConflictError.
        """

    def range(
        self,
        prefix: bytes,
        start_key: bytes = b"",
        limit: int = 0,
        revision: int = 0,
    ) -> Deferred[RangeResult]:
        """Keys under ``prefix``, in key order, from ``start_key`` (inclusive; empty: the
        prefix itself) at ``revision`` (0: latest), at most ``limit`` (0: all).

        CompactedError if ``revision`` is compacted, FutureRevisionError if it is ahead.
        """

    def count(self, prefix: bytes) -> Deferred[int]:
        """Number of keys under ``prefix`` at the latest revision."""

    def watch(
        self,
        prefix: bytes,
        start_revision: int,
        callback: Callable[[WatchEvent], None],
    ) -> Watch:
        """Deliver every change under ``prefix`` with revision >= ``start_revision`` in revision
        order, each with its previous value. ``start_revision`` 0 means from now on.

        Deletions by the TTL sweeper or lease expiry are delivered as DELETE events.
        """

    def compact(self, revision: int) -> Deferred[None]:
        """Forget history before ``revision``; later reads/watches below it get CompactedError."""

    def check_health(self, timeout: float) -> Deferred[None]:
        """Fires None if the store answers within ``timeout`` seconds; errbacks otherwise.

        Used by the livez/readyz store checks (kube-apiserver's ``etcd`` check: a GET of
        ``<prefix>/health``).
        """

    def check_ready(self, timeout: float) -> Deferred[None]:
        """Like check_health, for readiness (kube-apiserver's ``etcd-readiness``)."""

    def db_size(self) -> Deferred[int | None]:
        """The bytes the backend holds on disk, or None when it has no such figure, for the
        ``apiserver_storage_db_total_size_in_bytes`` metric (kube-apiserver asks etcd's
        maintenance status, k8s.io/apiserver/pkg/storage/etcd3/store.go ``Stats``)."""


# --- what a store declares in its capabilities --------------------------------------------


@runtime_checkable
class PausableWatch(Watch, Protocol):
    """A watch that is also a Twisted ``IPushProducer`` (``WatchFlowControl.PAUSE``)."""

    def pauseProducing(self) -> None:
        """Hold delivery back until ``resumeProducing``."""

    def resumeProducing(self) -> None:
        """Deliver what waited (in order), then go on delivering."""

    def stopProducing(self) -> None:
        """The consumer is gone: cancel the watch."""


@runtime_checkable
class CommittedRevision(Protocol):
    """Declared by ``StoreCapabilities.committed_revision``."""

    def committed_revision(self) -> int:
        """The newest committed revision; every change up to it has been delivered to this
        process's watches. Synchronous, so a watch cache can prove itself current. (The
        embedded store shared by ``--workers`` answers the file's newest commit, which its
        watches may not have reached yet: a cache compares its own revision with it.)"""


@runtime_checkable
class CurrentReads(Protocol):
    """Declared by ``StoreCapabilities.current_reads``: synchronous reads that answer only
    when the answer is provably the latest committed state, and say so."""

    def current_value(self, key: bytes) -> tuple[bool, KeyValue | None]:
        """(True, value or None if absent) when known to be current, else (False, None)."""

    def current_snapshot(self, prefix: bytes) -> RangeResult | None:
        """Every key under ``prefix`` when known to be current, else None."""

    def current_revision_now(self, prefix: bytes) -> int | None:
        """The revision ``current_snapshot(prefix)`` would report, else None."""


@runtime_checkable
class CachedLists(Protocol):
    """Declared by ``StoreCapabilities.cached_lists``."""

    def is_cached(self, prefix: bytes) -> bool:
        """Whether ``list_cached`` of ``prefix`` is served from memory."""

    def list_cached(self, prefix: bytes, min_revision: int = 0) -> Deferred[RangeResult]:
        """Every key under ``prefix`` at a revision not older than ``min_revision``."""


def committed_revision_of(store: Store) -> CommittedRevision | None:
    """``store`` as a :class:`CommittedRevision` if it declares the capability, else None."""
    return cast(CommittedRevision, store) if store.capabilities.committed_revision else None


def current_reads_of(store: Store) -> CurrentReads | None:
    """``store`` as :class:`CurrentReads` if it declares the capability, else None."""
    return cast(CurrentReads, store) if store.capabilities.current_reads else None


def cached_lists_of(store: Store) -> CachedLists | None:
    """``store`` as :class:`CachedLists` if it declares the capability, else None."""
    return cast(CachedLists, store) if store.capabilities.cached_lists else None
