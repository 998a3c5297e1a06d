"""What the in-memory backend promises beyond the conformance suite: every Deferred has fired
when the call returns, all time is the injected clock's, and no timer outlives ``stop``."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.task import Clock

from apiserver.storage.interface import (
    CompactedError,
    KeyNotFoundError,
    Store,
    UnavailableError,
    WatchEvent,
)
from apiserver.storage.memory import MemoryStore
from tests.unit.unit_helpers import fired


def started(clock: Clock, **kwargs: Any) -> MemoryStore:
    store = MemoryStore(clock, **kwargs)
    fired(store.start())
    return store


def test_it_is_a_store() -> None:
    assert isinstance(MemoryStore(Clock()), Store)


def test_every_deferred_fires_synchronously() -> None:
    store = started(Clock())
    kv = fired(store.create(b"/k", b"v"))
    assert fired(store.get(b"/k")) == kv
    kv2 = fired(store.update(b"/k", b"v2", kv.mod_revision))
    assert fired(store.range(b"/")).kvs == (kv2,)
    assert fired(store.count(b"/")) == 1
    assert fired(store.current_revision()) == kv2.mod_revision
    with pytest.raises(KeyNotFoundError):
        fired(store.get(b"/missing"))
    fired(store.delete(b"/k"))
    fired(store.compact(kv2.mod_revision))
    fired(store.check_health(1.0))
    fired(store.check_ready(1.0))
    fired(store.stop())


def test_watch_delivers_before_the_write_returns() -> None:
    store = started(Clock())
    seen: list[WatchEvent] = []
    store.watch(b"/", 0, seen.append)
    kv = fired(store.create(b"/k", b"v"))
    assert [e.kv for e in seen] == [kv]


def test_ttl_expires_on_the_injected_clock_only() -> None:
    clock = Clock()
    store = started(clock)
    seen: list[WatchEvent] = []
    store.watch(b"/", 0, seen.append)
    kv = fired(store.create(b"/short", b"v", ttl=5))
    fired(store.create(b"/long", b"v", ttl=10))
    assert len(clock.getDelayedCalls()) == 1  # one timer, at the earliest expiry
    clock.advance(4.9)
    assert fired(store.get(b"/short")) == kv
    clock.advance(0.1)
    with pytest.raises(KeyNotFoundError):
        fired(store.get(b"/short"))
    assert [(e.type, e.kv.key, e.prev_kv) for e in seen[2:]] == [("DELETE", b"/short", kv)]
    clock.advance(5)
    assert fired(store.count(b"/")) == 0
    assert clock.getDelayedCalls() == []


def test_a_write_without_ttl_cancels_the_expiry() -> None:
    clock = Clock()
    store = started(clock)
    kv = fired(store.create(b"/k", b"v", ttl=5))
    kv2 = fired(store.update(b"/k", b"v2", kv.mod_revision))
    clock.advance(10)
    assert fired(store.get(b"/k")) == kv2
    assert clock.getDelayedCalls() == []


def test_a_longer_ttl_replaces_a_shorter_one() -> None:
    clock = Clock()
    store = started(clock)
    kv = fired(store.create(b"/k", b"v", ttl=5))
    kv2 = fired(store.update(b"/k", b"v2", kv.mod_revision, ttl=20))
    clock.advance(10)
    assert fired(store.get(b"/k")) == kv2
    clock.advance(10)
    with pytest.raises(KeyNotFoundError):
        fired(store.get(b"/k"))


def test_stop_leaves_no_timer_and_ends_watches() -> None:
    clock = Clock()
    store = started(clock, compaction_interval=60)
    fired(store.create(b"/k", b"v", ttl=5))
    w = store.watch(b"/", 0, lambda e: None)
    assert len(clock.getDelayedCalls()) == 2
    fired(store.stop())
    assert clock.getDelayedCalls() == []
    assert fired(w.done) is None
    with pytest.raises(UnavailableError):
        fired(store.get(b"/k"))


def test_periodic_compaction_compacts_to_the_revision_seen_an_interval_before() -> None:
    clock = Clock()
    store = started(clock, compaction_interval=60)
    kv = fired(store.create(b"/k", b"1"))
    clock.advance(60)  # remembers the current revision
    kv2 = fired(store.update(b"/k", b"2", kv.mod_revision))
    clock.advance(60)  # compacts to kv's revision
    with pytest.raises(CompactedError):
        fired(store.get(b"/k", revision=kv.mod_revision - 1))
    assert fired(store.get(b"/k", revision=kv.mod_revision)) == kv
    assert fired(store.get(b"/k")) == kv2


def test_with_an_owner_the_compactor_is_declared_and_not_run() -> None:
    """The periodic compactor is declared for the server to run; TTL expiry (one delayed
    call at the earliest deadline, not a periodic loop) stays inside the store."""
    clock = Clock()
    store = started(clock, compaction_interval=60, run_maintenance=False)
    (task,) = store.maintenance()
    assert (task.name, task.interval, task.now) == ("compaction", 60, False)
    assert MemoryStore(clock, compaction_interval=60).maintenance() == ()
    assert MemoryStore(clock, run_maintenance=False).maintenance() == ()
    kv = fired(store.create(b"/k", b"1", ttl=100))
    assert len(clock.getDelayedCalls()) == 1  # the expiry call only
    clock.advance(60)
    fired(task.run())  # remembers the current revision
    kv2 = fired(store.update(b"/k", b"2", kv.mod_revision, ttl=100))
    fired(task.run())  # compacts to kv's revision
    with pytest.raises(CompactedError):
        fired(store.get(b"/k", revision=kv.mod_revision - 1))
    assert fired(store.get(b"/k")) == kv2
    fired(store.stop())
    assert clock.getDelayedCalls() == []


def test_a_callback_that_writes_does_not_reorder_events() -> None:
    store = started(Clock())
    seen: list[tuple[int, bytes]] = []

    def first(event: WatchEvent) -> None:
        seen.append((1, event.kv.key))
        if event.kv.key == b"/a":
            fired(store.create(b"/b", b"v"))

    def second(event: WatchEvent) -> None:
        seen.append((2, event.kv.key))

    store.watch(b"/", 0, first)
    store.watch(b"/", 0, second)
    fired(store.create(b"/a", b"v"))
    assert [key for n, key in seen if n == 1] == [b"/a", b"/b"]
    assert [key for n, key in seen if n == 2] == [b"/a", b"/b"]


def test_watch_from_a_future_revision_skips_what_comes_before() -> None:
    store = started(Clock())
    rev = fired(store.current_revision())
    seen: list[WatchEvent] = []
    store.watch(b"/", rev + 3, seen.append)
    for i in range(4):
        fired(store.create(b"/%d" % i, b"v"))
    assert [e.kv.mod_revision for e in seen] == [rev + 3, rev + 4]


def test_replay_then_live_from_inside_a_callback() -> None:
    store = started(Clock())
    first = fired(store.create(b"/a", b"1"))
    fired(store.create(b"/b", b"2"))
    seen: list[int] = []

    def callback(event: WatchEvent) -> None:
        seen.append(event.kv.mod_revision)
        if len(seen) == 1:
            fired(store.create(b"/c", b"3"))

    store.watch(b"/", first.mod_revision, callback)
    assert seen == [first.mod_revision, first.mod_revision + 1, first.mod_revision + 2]
