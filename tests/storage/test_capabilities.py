"""Declared storage capabilities: every store declares what it guarantees, provides the methods
of what it declares, and is never probed for what it does not declare.

The danger guarded against (``apiserver.storage.interface.StoreCapabilities``): a method added
to the etcd backend must not make servers that share one etcd serve stale reads from memory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock

from apiserver.apimachinery import errors
from apiserver.registry.store import Registry
from apiserver.storage.cacher import Cacher
from apiserver.storage.etcd3 import Etcd3Store
from apiserver.storage.flowcontrol import BufferedWatch
from apiserver.storage.interface import (
    CachedLists,
    CommittedRevision,
    CompactedError,
    CurrentReads,
    KeyValue,
    PausableWatch,
    RangeResult,
    Store,
    StoreCapabilities,
    WatchEvent,
    WatchFlowControl,
)
from apiserver.storage.memory import MemoryStore
from apiserver.storage.sqlite import SqliteStore
from tests.unit.unit_helpers import fired

PREFIX = b"/registry/events/"
GR = errors.GroupResource("events.k8s.io", "events")


def check_declarations(store: Store) -> None:
    """Each declared capability comes with the methods of its Protocol."""
    assert isinstance(store, Store)
    caps = store.capabilities
    assert isinstance(caps, StoreCapabilities)
    if caps.committed_revision:
        assert isinstance(store, CommittedRevision)
    if caps.current_reads:
        assert isinstance(store, CurrentReads)
    if caps.cached_lists:
        assert isinstance(store, CachedLists)


def test_memory_store_declarations() -> None:
    store = MemoryStore(Clock())
    check_declarations(store)
    assert store.capabilities == StoreCapabilities(committed_revision=True)


def test_sqlite_store_declarations(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "db"), reactor=MemoryReactorClock(), clock=Clock())
    check_declarations(store)
    assert store.capabilities == StoreCapabilities(committed_revision=True)


def test_etcd_store_never_declares_a_cache_provably_current() -> None:
    # Other API servers write to the same etcd: no revision this process knows is the
    # cluster's committed one, so nothing may treat a cache in front of it as current.
    store = Etcd3Store(["http://127.0.0.1:1"], MemoryReactorClock(), compaction_interval=0)
    check_declarations(store)
    assert not store.capabilities.committed_revision
    assert not store.capabilities.current_reads
    assert store.capabilities == StoreCapabilities()
    cacher = Cacher(store, [PREFIX], Clock())
    check_declarations(cacher)
    assert not cacher.capabilities.current_reads


def test_cacher_declares_current_reads_only_over_a_committed_revision() -> None:
    cacher = Cacher(MemoryStore(Clock()), [PREFIX], Clock())
    check_declarations(cacher)
    assert cacher.capabilities == StoreCapabilities(
        current_reads=True, cached_lists=True, watch_flow_control=WatchFlowControl.PAUSE
    )


class Undeclared(MemoryStore):
    """A store that has every optional method and declares none of them (as the etcd backend
    would after someone added such a method to it): none may be called."""

    capabilities = StoreCapabilities()

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.reads: list[str] = []

    def committed_revision(self) -> int:
        raise AssertionError("committed_revision probed on a store that does not declare it")

    def current_value(self, key: bytes) -> tuple[bool, KeyValue | None]:
        raise AssertionError("current_value probed")

    def current_snapshot(self, prefix: bytes) -> RangeResult | None:
        raise AssertionError("current_snapshot probed")

    def current_revision_now(self, prefix: bytes) -> int | None:
        raise AssertionError("current_revision_now probed")

    def is_cached(self, prefix: bytes) -> bool:
        raise AssertionError("is_cached probed")

    def list_cached(self, prefix: bytes, min_revision: int = 0) -> Deferred[RangeResult]:
        raise AssertionError("list_cached probed")

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        self.reads.append("get")
        return super().get(key, revision)

    def range(
        self, prefix: bytes, start_key: bytes = b"", limit: int = 0, revision: int = 0
    ) -> Deferred[RangeResult]:
        self.reads.append("range")
        return super().range(prefix, start_key, limit, revision)


def event(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "reason": "r"}


def test_registry_reads_a_store_declaring_nothing_through_the_store() -> None:
    store = Undeclared(Clock())
    fired(store.start())
    registry = Registry(store, group_resource=GR)
    created = fired(Deferred.fromCoroutine(registry.create(event("a"))))
    assert registry.get_now("ns", "a") == (False, None)
    got = fired(Deferred.fromCoroutine(registry.get("ns", "a")))
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert registry.list_revision_now("ns") is None
    assert not registry.can_list_cached("ns")
    page = fired(Deferred.fromCoroutine(registry.list_page("ns")))
    assert [item["metadata"]["name"] for item in page.items] == ["a"]
    assert store.reads == ["get", "range"]
    # Its watches get flow control from the registry.
    w = registry.watch("ns", 0, lambda e: None)
    assert isinstance(w, BufferedWatch) and isinstance(w, PausableWatch)
    w.cancel()


def test_cacher_over_a_store_declaring_nothing_never_claims_to_be_current() -> None:
    store = Undeclared(Clock())
    fired(store.start())
    cacher = Cacher(store, [PREFIX], Clock())
    fired(cacher.start())
    fired(cacher.ready)
    registry = Registry(cacher, group_resource=GR)
    fired(Deferred.fromCoroutine(registry.create(event("a"))))
    assert registry.get_now("ns", "a") == (False, None)
    assert registry.list_revision_now("ns") is None
    assert cacher.current_snapshot(PREFIX) is None
    assert registry.can_list_cached("ns")  # lists of resourceVersion=0 may still be cached
    fired(cacher.stop())


def test_registry_reads_a_declared_current_cache_from_memory() -> None:
    store = MemoryStore(Clock())
    fired(store.start())
    cacher = Cacher(store, [PREFIX], Clock())
    fired(cacher.start())
    fired(cacher.ready)
    registry = Registry(cacher, group_resource=GR)
    created = fired(Deferred.fromCoroutine(registry.create(event("a"))))
    known, obj = registry.get_now("ns", "a")
    assert known and obj is not None
    assert obj["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert registry.list_revision_now("ns") == int(created["metadata"]["resourceVersion"])
    w = registry.watch("ns", 0, lambda e: None)
    assert isinstance(w, PausableWatch) and not isinstance(w, BufferedWatch)
    w.cancel()
    fired(cacher.stop())


@pytest.mark.parametrize("paused_for", [3, 4])
def test_buffered_watch_holds_changes_while_paused_and_ends_a_slow_one(paused_for: int) -> None:
    store = MemoryStore(Clock())
    fired(store.start())
    seen: list[WatchEvent] = []
    registry = Registry(store, group_resource=GR, max_pending_per_watcher=3)
    w = registry.watch(None, 0, seen.append)
    assert isinstance(w, BufferedWatch)
    fired(Deferred.fromCoroutine(registry.create(event("first"))))
    w.pauseProducing()
    for i in range(paused_for):
        fired(Deferred.fromCoroutine(registry.create(event(f"e{i}"))))
    assert len(seen) == 1
    w.resumeProducing()
    if paused_for <= 3:
        assert len(seen) == 4 and not w.ended_slow
        revisions = [e.kv.mod_revision for e in seen]
        assert revisions == sorted(revisions)
        fired(Deferred.fromCoroutine(registry.create(event("live"))))
        assert len(seen) == 5
        w.cancel()
    else:
        assert len(seen) == 1 and w.ended_slow
        fired(Deferred.fromCoroutine(registry.create(event("late"))))
        assert len(seen) == 1
    assert fired(w.done) is None
    assert store._watches == {}  # the backend watch was cancelled with it


def test_buffered_watch_passes_on_a_compacted_start() -> None:
    store = MemoryStore(Clock())
    fired(store.start())
    registry = Registry(store, group_resource=GR)
    first = fired(Deferred.fromCoroutine(registry.create(event("a"))))
    fired(Deferred.fromCoroutine(registry.create(event("b"))))
    fired(store.compact(fired(store.current_revision())))
    w = registry.watch(None, int(first["metadata"]["resourceVersion"]), lambda e: None)
    with pytest.raises(CompactedError):
        fired(w.done)


def test_buffered_watch_paused_again_while_resuming_keeps_the_rest() -> None:
    store = MemoryStore(Clock())
    fired(store.start())
    registry = Registry(store, group_resource=GR)
    seen: list[WatchEvent] = []

    def consume(e: WatchEvent) -> None:
        seen.append(e)
        if len(seen) == 2:
            w.pauseProducing()  # the consumer's buffer filled up again

    w = registry.watch(None, 0, consume)
    w.pauseProducing()
    for i in range(4):
        fired(Deferred.fromCoroutine(registry.create(event(f"e{i}"))))
    w.resumeProducing()
    assert len(seen) == 2
    w.resumeProducing()
    assert [e.kv.key for e in seen] == [PREFIX + b"ns/e%d" % i for i in range(4)]
    w.cancel()
