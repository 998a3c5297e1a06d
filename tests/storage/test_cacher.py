"""Tests of the watch cache (``apiserver.storage.cacher``) over every backend.

The backend-neutral tests run on the conftest's ``backend`` fixture (a MemoryStore, a
SqliteStore on ``tmp_path`` and an Etcd3Store on the session's etcd). The cacher's own time
(bookmarks, the waits of ``list_cached``, retries, the turn replays are delivered on) runs on
a ``Clock`` the test drives; waiting for changes to arrive from a store is event-driven with
a real-time timeout.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import Clock, deferLater
from twisted.python.failure import Failure

from apiserver.storage.cacher import CATCH_UP_GRACE, FRESHNESS_TIMEOUT, Cacher, CacheWatch
from apiserver.storage.interface import (
    CompactedError,
    KeyValue,
    RangeResult,
    StorageTimeoutError,
    Store,
    UnavailableError,
    Watch,
    WatchEvent,
)
from apiserver.storage.sqlite import SqliteStore
from tests.storage.conftest import Backend
from tests.storage.etcdserver import EtcdServer, etcd_available

TIMEOUT = 15.0


class Events:
    """A watch callback recording what it gets; a test can wait for the n-th change."""

    def __init__(self) -> None:
        self.all: list[WatchEvent] = []
        self._waiters: list[tuple[int, Deferred[None]]] = []

    @property
    def changes(self) -> list[WatchEvent]:
        return [e for e in self.all if e.type != "BOOKMARK"]

    @property
    def bookmarks(self) -> list[WatchEvent]:
        return [e for e in self.all if e.type == "BOOKMARK"]

    def __call__(self, event: WatchEvent) -> None:
        self.all.append(event)
        if event.type != "BOOKMARK" and self._waiters:
            n = len(self.changes)
            due = [(k, d) for k, d in self._waiters if k <= n]
            for entry in due:
                self._waiters.remove(entry)
                entry[1].callback(None)

    async def wait(self, n: int, timeout: float = TIMEOUT) -> list[WatchEvent]:
        if len(self.changes) < n:
            d: Deferred[None] = Deferred()
            self._waiters.append((n, d))
            d.addTimeout(timeout, reactor)
            try:
                await d
            except Exception as e:
                raise AssertionError(
                    f"expected {n} changes within {timeout}s, got {self.changes}"
                ) from e
        return self.changes[:n]


async def within(d: Deferred[Any], timeout: float = TIMEOUT) -> Any:
    """``d``'s result, failing the test after ``timeout`` seconds of real time."""
    d.addTimeout(timeout, reactor)
    return await d


async def failure_of(d: Deferred[Any]) -> BaseException:
    try:
        await within(d)
    except Exception as e:
        return e
    raise AssertionError("expected the Deferred to fail")


async def advance_until(clock: Clock, condition: Callable[[], bool]) -> None:
    """Let the cacher's clock run (retries, backoff) while the store answers in real time."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        clock.advance(0.5)
        await deferLater(reactor, 0.01, lambda: None)


def turn() -> Deferred[None]:
    """One reactor turn (lets the SQLite store's replay threads report back)."""
    return deferLater(reactor, 0, lambda: None)


@pytest_twisted.async_yield_fixture
async def make_cacher() -> AsyncIterator[Callable[..., Any]]:
    """A factory of started Cachers on a fresh Clock; every one is stopped afterwards."""
    made: list[Cacher] = []

    async def make(store: Store, prefixes: list[bytes], **kwargs: Any) -> tuple[Cacher, Clock]:
        clock = Clock()
        cacher = Cacher(store, prefixes, clock, **kwargs)
        made.append(cacher)
        await cacher.start()
        await within(cacher.ready)
        return cacher, clock

    yield make
    for cacher in made:
        await cacher.stop()


async def cached(cacher: Cacher, prefix: bytes, revision: int) -> RangeResult:
    """The cache's content once it has caught up with ``revision`` (event-driven)."""
    result: RangeResult = await within(cacher.list_cached(prefix, revision))
    return result


# -- the cache follows the store ----------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_cache_reflects_writes_and_deletes(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    store = backend.store
    await store.create(prefix + b"old", b"before the cache")
    cacher, _ = await make_cacher(store, [prefix])
    as_store: Store = cacher  # the full storage interface, checked by mypy and at run time
    assert isinstance(as_store, Store)
    assert cacher.is_ready and cacher.is_cached(prefix + b"ns/")
    a = await cacher.create(prefix + b"ns1/a", b"1")
    b = await cacher.create(prefix + b"ns1/b", b"1")
    c = await cacher.create(prefix + b"ns2/c", b"1")
    b2 = await cacher.update(prefix + b"ns1/b", b"2", b.mod_revision)
    deleted = await cacher.delete(prefix + b"old")
    await cacher.delete(prefix + b"ns1/a", a.mod_revision)

    result = await cached(cacher, prefix, deleted.mod_revision + 1)
    assert [kv.key for kv in result.kvs] == [prefix + b"ns1/b", prefix + b"ns2/c"]
    assert result.kvs == (b2, c)
    assert result.count == 2 and not result.more
    assert result.revision == deleted.mod_revision + 1
    assert cacher.cache_revision(prefix) == result.revision
    # The same as the store answers at that revision.
    from_store = await store.range(prefix, revision=result.revision)
    assert from_store.kvs == result.kvs

    sub = await cached(cacher, prefix + b"ns1/", 0)
    assert sub.kvs == (b2,) and sub.revision == result.revision
    assert (await cached(cacher, prefix + b"nope/", 0)).kvs == ()


@pytest.mark.realtime
@pytest_twisted.ensureDeferred
async def test_ttl_expiry_reaches_cache_and_watchers(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    cacher, _ = await make_cacher(backend.store, [prefix])
    events = Events()
    cacher.watch(prefix, 0, events)
    kv = await cacher.create(prefix + b"ns/short", b"v", ttl=1)
    await cacher.create(prefix + b"ns/long", b"v")
    got = await backend.wait_while_time_passes(
        ensureDeferred(events.wait(3, timeout=30.0)), timeout=30.0
    )
    delete = got[2]
    assert delete.type == "DELETE" and delete.kv.key == prefix + b"ns/short"
    assert delete.prev_kv is not None and delete.prev_kv.value == b"v"
    assert delete.prev_kv.mod_revision == kv.mod_revision
    result = await cached(cacher, prefix, delete.kv.mod_revision)
    assert [kv.key for kv in result.kvs] == [prefix + b"ns/long"]


# -- watches ------------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_watch_replays_window_then_goes_live(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    cacher, clock = await make_cacher(backend.store, [prefix])
    written = [await cacher.create(prefix + b"ns%d/k%d" % (i % 2, i), b"v") for i in range(6)]
    updated = await cacher.update(written[0].key, b"new", written[0].mod_revision)
    await cached(cacher, prefix, updated.mod_revision)

    everything = Events()
    ns0 = Events()
    w_all = cacher.watch(prefix, written[2].mod_revision, everything)
    cacher.watch(prefix + b"ns0/", written[2].mod_revision, ns0)
    assert everything.all == []  # replays are delivered on a later turn, not from watch()
    clock.advance(0)
    assert [e.kv for e in everything.changes] == [*written[2:], updated]
    assert [e.kv for e in ns0.changes] == [written[2], written[4], updated]
    assert everything.changes[-1].prev_kv == written[0]
    assert all(e.type == "PUT" for e in everything.changes)

    more = await cacher.create(prefix + b"ns0/live", b"x")
    got = await ns0.wait(4)
    assert got[-1].kv == more
    assert (await everything.wait(6))[-1].kv == more
    w_all.cancel()
    assert isinstance(w_all, CacheWatch)
    assert w_all.done.called and not w_all.active


@pytest_twisted.ensureDeferred
async def test_watch_from_now_and_future(backend: Backend, prefix: bytes, make_cacher: Any) -> None:
    cacher, _ = await make_cacher(backend.store, [prefix])
    first = await cacher.create(prefix + b"a", b"1")
    await cached(cacher, prefix, first.mod_revision)
    now = Events()
    cacher.watch(prefix, 0, now)
    future = Events()
    cacher.watch(prefix, first.mod_revision + 2, future)
    second = await cacher.create(prefix + b"b", b"1")
    third = await cacher.create(prefix + b"c", b"1")
    assert [e.kv for e in await now.wait(2)] == [second, third]
    assert [e.kv for e in await future.wait(1)] == [third]
    assert len(future.changes) == 1


@pytest_twisted.ensureDeferred
async def test_watch_older_than_window_is_compacted(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    before = await backend.store.create(prefix + b"before", b"v")
    cacher, clock = await make_cacher(backend.store, [prefix], window=3)
    listed_at = cacher.cache_revision(prefix)
    assert listed_at >= before.mod_revision

    # Older than the list: the cache has no history before it.
    w = cacher.watch(prefix, listed_at, Events())
    error = await failure_of(w.done)
    assert isinstance(error, CompactedError)
    assert str(error) == f"too old resource version: {listed_at - 1} ({listed_at})"
    assert error.revision == listed_at

    written = [await cacher.create(prefix + b"k%d" % i, b"v") for i in range(5)]
    await cached(cacher, prefix, written[-1].mod_revision)
    # The ring holds the last 3 changes: everything after written[1].
    floor = written[1].mod_revision
    w = cacher.watch(prefix, floor, Events())
    error = await failure_of(w.done)
    assert isinstance(error, CompactedError)
    assert str(error) == f"too old resource version: {floor - 1} ({floor})"

    events = Events()
    w = cacher.watch(prefix, floor + 1, events)
    clock.advance(0)
    assert [e.kv for e in events.changes] == written[2:]
    assert not w.done.called


@pytest_twisted.ensureDeferred
async def test_replay_overtaken_by_the_ring_is_compacted(tmp_path: Path, make_cacher: Any) -> None:
    store = SqliteStore(str(tmp_path / "s.db"), reactor=reactor, clock=Clock())
    await store.start()
    try:
        cacher, clock = await make_cacher(store, [b"/r/"], window=2)
        a = await store.create(b"/r/a", b"v")
        w = cacher.watch(b"/r/", a.mod_revision, Events())  # replay due on the next turn
        await store.create(b"/r/b", b"v")
        await store.create(b"/r/c", b"v")  # evicts a before the replay ran
        clock.advance(0)
        error = await failure_of(w.done)
        assert isinstance(error, CompactedError)
        assert "too old resource version" in str(error)
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_watch_of_uncached_prefix_goes_to_store(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    cacher, clock = await make_cacher(backend.store, [prefix + b"cached/"], bookmark_interval=1.0)
    assert not cacher.is_cached(prefix + b"other/")
    assert not cacher.is_cached(prefix)  # a super-prefix of a cached one is not cached
    events = Events()
    w = cacher.watch(prefix + b"other/", 0, events)
    assert not isinstance(w, CacheWatch)
    if backend.name == "etcd3":
        await _created(w)
    kv = await cacher.create(prefix + b"other/x", b"v")
    assert [e.kv for e in await events.wait(1)] == [kv]
    clock.advance(1.0)
    assert events.bookmarks == []
    w.cancel()
    listed = await within(cacher.list_cached(prefix + b"other/"))
    assert listed.kvs == (kv,)


async def _created(w: Watch) -> None:
    """Wait until an etcd watch stream is established (a write after it is then seen)."""
    deadline = time.monotonic() + TIMEOUT
    while not getattr(w, "created", True):
        assert time.monotonic() < deadline, "etcd watch not created"
        await deferLater(reactor, 0.01, lambda: None)


@pytest_twisted.ensureDeferred
async def test_watch_before_ready_starts_once_listed(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"), reactor=reactor, clock=Clock())
    await store.start()
    clock = Clock()
    cacher = Cacher(store, [b"/r/"], clock)
    try:
        early = Events()
        w = cacher.watch(b"/r/", 0, early)  # before start(): waits for the first list
        ready = cacher.ready
        await cacher.start()
        await within(ready)
        assert not w.done.called
        kv = await cacher.create(b"/r/x", b"v")
        assert [e.kv for e in await early.wait(1)] == [kv]
    finally:
        await cacher.stop()
        await store.stop()
    assert w.done.called  # stop ends every cache watch
    late = cacher.watch(b"/r/", 0, Events())
    assert isinstance(await failure_of(late.done), UnavailableError)


@pytest_twisted.ensureDeferred
async def test_callback_errors_do_not_stop_fan_out(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    cacher, _ = await make_cacher(backend.store, [prefix])

    def broken(event: WatchEvent) -> None:
        raise RuntimeError("callback bug")

    cacher.watch(prefix, 0, broken)
    events = Events()
    cacher.watch(prefix, 0, events)
    kv = await cacher.create(prefix + b"k", b"v")
    assert [e.kv for e in await events.wait(1)] == [kv]


# -- slow consumers -----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_paused_watch_resumes_without_loss(tmp_path: Path, make_cacher: Any) -> None:
    store = SqliteStore(str(tmp_path / "s.db"), reactor=reactor, clock=Clock())
    await store.start()
    try:
        cacher, _ = await make_cacher(store, [b"/r/"], max_pending_per_watcher=3)
        events = Events()
        w = cacher.watch(b"/r/", 0, events)
        assert isinstance(w, CacheWatch)
        first = await store.create(b"/r/a", b"1")
        w.pauseProducing()
        held = [await store.create(b"/r/b%d" % i, b"1") for i in range(3)]
        await store.create(b"/other", b"x")  # outside the prefix: not counted
        assert [e.kv for e in events.changes] == [first]
        w.resumeProducing()
        assert [e.kv for e in events.changes] == [first, *held]
        later = await store.create(b"/r/c", b"1")
        assert events.changes[-1].kv == later

        # Paused during a fan-out by another watch's callback: before its own turn (the
        # change is delivered on resume) and after it (it is not delivered twice).
        victims: list[CacheWatch] = []

        def pause_victims(event: WatchEvent) -> None:
            for v in victims:
                v.pauseProducing()

        p = cacher.watch(b"/r/", 0, pause_victims)  # fan-out order: registration order
        later_one = Events()
        w_later = cacher.watch(b"/r/", 0, later_one)
        assert isinstance(w_later, CacheWatch)
        victims.append(w_later)
        v_first = await store.create(b"/r/d", b"1")
        assert later_one.changes == []
        p.cancel()
        w_later.resumeProducing()
        assert [e.kv for e in later_one.changes] == [v_first]

        earlier_one = Events()
        w_earlier = cacher.watch(b"/r/", 0, earlier_one)
        assert isinstance(w_earlier, CacheWatch)
        p = cacher.watch(b"/r/", 0, pause_victims)
        victims[:] = [w_earlier]
        v_second = await store.create(b"/r/d2", b"1")
        assert [e.kv for e in earlier_one.changes] == [v_second]
        p.cancel()
        w_earlier.resumeProducing()
        assert [e.kv for e in earlier_one.changes] == [v_second]

        # Too far behind: the watch is ended (done fires None).
        w.pauseProducing()
        for i in range(4):
            await store.create(b"/r/e%d" % i, b"1")
        assert w.done.called and w.ended_slow and not w.active
        await w.done  # fired with None: no error
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_the_cache_counts_what_its_metrics_report(tmp_path: Path, make_cacher: Any) -> None:
    """The counts behind apiserver_watch_cache_* (k8s.io/apiserver pkg/storage/cacher/metrics):
    objects loaded, changes received and fanned out, watchers ended for being slow."""
    from prometheus_client import CollectorRegistry, generate_latest

    from apiserver.metrics.watchcache import WatchCacheCollector

    store = SqliteStore(str(tmp_path / "s.db"), reactor=reactor, clock=Clock())
    await store.start()
    try:
        await store.create(b"/r/a", b"1")
        await store.create(b"/r/b", b"1")
        cacher, _ = await make_cacher(store, [b"/r/"], max_pending_per_watcher=1, window=50)
        events = Events()
        slow = cacher.watch(b"/r/", 0, Events())
        cacher.watch(b"/r/", 0, events)
        slow.pauseProducing()
        for name in (b"c", b"d", b"e"):
            await store.create(b"/r/" + name, b"1")
        await events.wait(3)
        ((prefix, stats, revision, capacity),) = cacher.stats()
        assert prefix == b"/r/" and capacity == 50
        assert (stats.initializations, stats.init_events) == (1, 2)
        assert (stats.received, stats.dispatched, stats.terminated) == (3, 3, 1)
        registry = CollectorRegistry()
        registry.register(WatchCacheCollector(cacher.stats, lambda p: ("", "events"), bool))
        text = generate_latest(registry).decode()
        labels = '{group="",resource="events"}'
        for line in (
            f"apiserver_watch_cache_events_received_total{labels} 3.0",
            f"apiserver_watch_cache_events_dispatched_total{labels} 3.0",
            f"apiserver_init_events_total{labels} 2.0",
            f"apiserver_watch_cache_initializations_total{labels} 1.0",
            f"apiserver_terminated_watchers_total{labels} 1.0",
            f"apiserver_watch_cache_resource_version{labels} {float(revision)}",
            f"apiserver_watch_cache_capacity{labels} 50.0",
        ):
            assert line in text
    finally:
        await store.stop()


# -- list_cached and revisions ------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_list_cached_min_revision(backend: Backend, prefix: bytes, make_cacher: Any) -> None:
    store = backend.store
    cacher, clock = await make_cacher(store, [prefix + b"c/"])
    kv = await store.create(prefix + b"c/a", b"1")
    now = await cached(cacher, prefix + b"c/", kv.mod_revision)
    assert now.kvs == (kv,) and now.revision == kv.mod_revision
    # Already there: answered at once, at the cache revision.
    d = cacher.list_cached(prefix + b"c/", 1)
    assert d.called
    assert (await d).revision == kv.mod_revision

    # A revision the store does not have yet: waits for the cache to get there.
    current = await store.current_revision()
    pending = cacher.list_cached(prefix + b"c/", current + 2)
    first = await store.create(prefix + b"c/b", b"1")
    second = await store.create(prefix + b"c/c", b"1")
    assert second.mod_revision == first.mod_revision + 1 or backend.name == "etcd3"
    result = await within(pending)
    assert result.revision >= current + 2
    assert [x.key for x in result.kvs][:1] == [kv.key]

    # Never reached within FRESHNESS_TIMEOUT: kube's "Too large resource version".
    current = await store.current_revision()
    wanted = current + 1000
    armed = len(clock.getDelayedCalls())
    too_large = cacher.list_cached(prefix + b"c/", wanted)
    await _until_waiting(clock, armed)
    clock.advance(FRESHNESS_TIMEOUT)
    error = await failure_of(too_large)
    assert isinstance(error, StorageTimeoutError)
    assert str(error).startswith(f"Too large resource version: {wanted}, current: ")
    assert error.revision >= current


@pytest_twisted.ensureDeferred
async def test_list_cached_of_a_quiet_prefix_reads_the_store(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    store = backend.store
    cacher, clock = await make_cacher(store, [prefix + b"quiet/"])
    kv = await store.create(prefix + b"quiet/a", b"1")
    await cached(cacher, prefix + b"quiet/", kv.mod_revision)
    elsewhere = await store.create(prefix + b"busy/x", b"1")  # the store moves on
    armed = len(clock.getDelayedCalls())
    d = cacher.list_cached(prefix + b"quiet/", elsewhere.mod_revision)
    await _until_waiting(clock, armed)
    assert not d.called
    clock.advance(CATCH_UP_GRACE)
    result = await within(d)
    assert result.kvs == (kv,)
    assert result.revision >= elsewhere.mod_revision


async def _until_waiting(clock: Clock, armed: int) -> None:
    """Until list_cached has asked the store for its revision and armed its timer (the
    clock had ``armed`` delayed calls before)."""
    deadline = time.monotonic() + TIMEOUT
    while len(clock.getDelayedCalls()) <= armed:
        assert time.monotonic() < deadline, "list_cached never started waiting"
        await turn()


# -- bookmarks ----------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_bookmarks_on_the_clock(backend: Backend, prefix: bytes, make_cacher: Any) -> None:
    cacher, clock = await make_cacher(backend.store, [prefix], bookmark_interval=60.0)
    kv = await cacher.create(prefix + b"ns1/a", b"1")
    await cached(cacher, prefix, kv.mod_revision)
    whole, sub, future, gone = Events(), Events(), Events(), Events()
    cacher.watch(prefix, 0, whole)
    cacher.watch(prefix + b"ns2/", 0, sub)
    cacher.watch(prefix, kv.mod_revision + 10, future)
    cacher.watch(prefix, 0, gone).cancel()
    clock.advance(59.0)
    assert whole.all == []
    clock.advance(1.0)
    expected = WatchEvent("BOOKMARK", KeyValue(b"", b"", 0, kv.mod_revision), None)
    assert whole.all == [expected]
    assert sub.all == [expected]
    assert future.all == [] and gone.all == []
    later = await cacher.create(prefix + b"ns1/b", b"1")
    await whole.wait(1)
    clock.advance(60.0)
    assert whole.all[-1] == WatchEvent("BOOKMARK", KeyValue(b"", b"", 0, later.mod_revision), None)
    assert len(sub.bookmarks) == 2 and sub.changes == []


# -- recovery -----------------------------------------------------------------------------------


class _BreakableWatch:
    """A store watch the test can break, as a lost connection or a server error would."""

    def __init__(self, inner: Watch) -> None:
        self.inner = inner
        self.done: Deferred[None] = Deferred()
        self._broken = False
        inner.done.addBoth(self._inner_done)

    def _inner_done(self, result: Any) -> None:
        if self._broken or self.done.called:
            return
        if isinstance(result, Failure):
            self.done.errback(result)
        else:
            self.done.callback(None)

    def cancel(self) -> None:
        self.inner.cancel()

    def break_(self, error: Exception) -> None:
        self._broken = True
        self.inner.cancel()
        self.done.errback(Failure(error))


class BreakableStore:
    """A Store that hands out breakable watches and can hide ``prev_kv`` from them."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.watches: list[_BreakableWatch] = []
        self.strip_prev = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def watch(
        self, prefix: bytes, start_revision: int, callback: Callable[[WatchEvent], None]
    ) -> Watch:
        def deliver(event: WatchEvent) -> None:
            if self.strip_prev:
                event = WatchEvent(event.type, event.kv, None)
            callback(event)

        w = _BreakableWatch(self._store.watch(prefix, start_revision, deliver))
        self.watches.append(w)
        return w


@pytest_twisted.ensureDeferred
async def test_broken_store_watch_is_resumed_without_a_gap(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    breakable = BreakableStore(backend.store)
    cacher, clock = await make_cacher(breakable, [prefix])
    events = Events()
    client = cacher.watch(prefix, 0, events)
    a = await backend.store.create(prefix + b"a", b"1")
    await events.wait(1)
    breakable.watches[-1].break_(UnavailableError("connection lost"))
    b = await backend.store.create(prefix + b"b", b"1")  # nobody watches the store now
    c = await backend.store.update(prefix + b"a", b"2", a.mod_revision)
    assert len(breakable.watches) == 1
    clock.advance(1.0)  # the retry (backoff on the cacher's clock)
    assert len(breakable.watches) == 2
    if backend.name == "etcd3":
        await _created(breakable.watches[-1].inner)
    got = await events.wait(3)
    assert [e.kv for e in got] == [a, b, c]
    assert got[2].prev_kv == a
    assert not client.done.called
    result = await cached(cacher, prefix, c.mod_revision)
    assert result.kvs == (c, b)


@pytest_twisted.ensureDeferred
async def test_compacted_store_watch_relists(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    breakable = BreakableStore(backend.store)
    cacher, clock = await make_cacher(breakable, [prefix])
    events = Events()
    client = cacher.watch(prefix, 0, events)
    a = await backend.store.create(prefix + b"a", b"1")
    await events.wait(1)
    breakable.watches[-1].break_(UnavailableError("connection lost"))
    b = await backend.store.create(prefix + b"b", b"1")
    await backend.store.delete(prefix + b"a")
    last = await backend.store.create(prefix + b"c", b"1")
    await backend.store.compact(last.mod_revision)
    # The resumed watch finds its revision compacted: the cacher lists the prefix again and
    # ends the client watches (they re-watch, and get 410 for revisions before the list).
    await advance_until(
        clock, lambda: client.done.called and cacher.cache_revision(prefix) >= last.mod_revision
    )
    result = await cached(cacher, prefix, last.mod_revision)
    assert [kv.key for kv in result.kvs] == [b.key, last.key]
    assert result.revision == cacher.cache_revision(prefix)
    assert [e.kv for e in events.changes] == [a]
    stale = cacher.watch(prefix, a.mod_revision + 1, Events())
    assert isinstance(await failure_of(stale.done), CompactedError)
    fresh = Events()
    cacher.watch(prefix, 0, fresh)
    d = await backend.store.create(prefix + b"d", b"1")
    assert [e.kv for e in await fresh.wait(1)] == [d]


@pytest_twisted.ensureDeferred
async def test_missing_prev_kv_is_filled_from_the_cache(tmp_path: Path, make_cacher: Any) -> None:
    store = SqliteStore(str(tmp_path / "s.db"), reactor=reactor, clock=Clock())
    await store.start()
    try:
        breakable = BreakableStore(store)
        cacher, _ = await make_cacher(breakable, [b"/r/"])
        a = await store.create(b"/r/a", b"1")
        breakable.strip_prev = True
        events = Events()
        cacher.watch(b"/r/", 0, events)
        a2 = await store.update(b"/r/a", b"2", a.mod_revision)
        await store.delete(b"/r/a")
        got = await events.wait(2)
        assert got[0].prev_kv == a
        assert got[1].type == "DELETE" and got[1].prev_kv == a2
    finally:
        await store.stop()


@pytest.fixture
def own_etcd(tmp_path: Path) -> Any:
    """An etcd of the test's own, for tests that restart it."""
    if not etcd_available():
        pytest.skip("etcd (etcd-server) not installed")
    server = EtcdServer(str(tmp_path / "etcd"))
    server.start()
    yield server
    server.stop()


@pytest.mark.realtime
@pytest_twisted.ensureDeferred
async def test_cache_survives_etcd_restart(own_etcd: EtcdServer, make_cacher: Any) -> None:
    from apiserver.storage.etcd3 import Etcd3Store

    store = Etcd3Store([own_etcd.client_url], reactor, request_timeout=3.0, compaction_interval=0)
    await store.start()
    try:
        prefix = b"/registry/events/"
        cacher, _ = await make_cacher(store, [prefix])
        events = Events()
        client = cacher.watch(prefix, 0, events)
        written = [await store.create(prefix + b"ns/before-%d" % i, b"v") for i in range(3)]
        await events.wait(3)

        own_etcd.stop()
        await deferLater(reactor, 0.2, lambda: None)  # the store watch starts retrying
        own_etcd.start()  # same ports, same data

        async def write(key: bytes) -> KeyValue:
            for _ in range(50):
                try:
                    kv: KeyValue = await store.create(key, b"v")
                    return kv
                except UnavailableError:  # a pooled connection from before the restart
                    await deferLater(reactor, 0.1, lambda: None)
            raise AssertionError("etcd did not come back")

        for i in range(3):
            written.append(await write(prefix + b"ns/after-%d" % i))
        got = await events.wait(6, timeout=30.0)
        assert [e.kv for e in got] == written
        assert not client.done.called
        result = await cached(cacher, prefix, written[-1].mod_revision)
        assert result.kvs == tuple(sorted(written, key=lambda kv: kv.key))
    finally:
        await store.stop()


# -- fan-out cost -------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_one_change_reaches_1000_watchers_within_50ms(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    cacher, _ = await make_cacher(backend.store, [prefix])
    n = 1000
    counts = [0]
    last: list[float] = [0.0]
    all_in: list[Deferred[None]] = []

    def callback(event: WatchEvent) -> None:
        counts[0] += 1
        if counts[0] == n:
            last[0] = time.perf_counter()
            all_in.pop().callback(None)

    for i in range(n):
        cacher.watch(prefix + (b"ns/" if i % 2 else b""), 0, callback)
    warm = await cacher.create(prefix + b"warm", b"v")  # warm-up (connections, lease, ...)
    await cached(cacher, prefix, warm.mod_revision)
    end_to_end: list[float] = []
    for i in range(5):
        counts[0] = 0
        done: Deferred[None] = Deferred()
        all_in.append(done)
        start = time.perf_counter()
        await cacher.create(prefix + b"ns/k%d" % i, b"v")
        await within(done)
        end_to_end.append((last[0] - start) * 1000)
    median = statistics.median(end_to_end)
    print(f"\n{backend.name}: create -> 1000 cache watchers, ms: {end_to_end}")
    # A write (commit / etcd round trip) plus the fan-out to 1000 callbacks.
    assert median < 50.0, end_to_end


@pytest_twisted.ensureDeferred
async def test_before_the_first_list_reads_go_to_the_store(tmp_path: Path) -> None:
    store = SqliteStore(str(tmp_path / "s.db"), reactor=reactor, clock=Clock())
    await store.start()
    clock = Clock()
    cacher = Cacher(store, [b"/r/"], clock)
    try:
        kv = await store.create(b"/r/a", b"v")
        await cacher.start()
        assert not cacher.is_ready  # the list runs on a reader thread
        assert cacher.cache_revision(b"/r/") == 0
        result = await within(cacher.list_cached(b"/r/"))
        assert result.kvs == (kv,) and result.revision == kv.mod_revision
    finally:
        await cacher.stop()
        await store.stop()
    never = Cacher(store, [b"/r/"], Clock())
    waiting = never.ready
    await never.stop()
    assert isinstance(await failure_of(waiting), UnavailableError)


@pytest_twisted.ensureDeferred
async def test_paused_watch_overtaken_by_the_ring_is_ended(
    tmp_path: Path, make_cacher: Any
) -> None:
    store = SqliteStore(str(tmp_path / "s.db"), reactor=reactor, clock=Clock())
    await store.start()
    try:
        cacher, _ = await make_cacher(store, [b"/r/"], window=2, max_pending_per_watcher=100)
        events = Events()
        w = cacher.watch(b"/r/", 0, events)
        assert isinstance(w, CacheWatch)
        w.pauseProducing()
        for i in range(3):
            await store.create(b"/r/k%d" % i, b"v")
        assert w.active  # nothing is queued per watch: it only holds a ring position
        w.resumeProducing()
        assert not w.active and w.ended_slow
        assert events.changes == []
        await within(w.done)
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_current_revision_now_is_the_snapshots_revision(
    backend: Backend, prefix: bytes, make_cacher: Any
) -> None:
    """On a store that declares its committed revision (embedded, in-memory), the revision a
    current snapshot would report is known without taking it; on etcd (other servers write
    too) neither is known."""
    store = backend.store
    cacher, _ = await make_cacher(store, [prefix])
    created = await cacher.create(prefix + b"ns/a", b"1")
    await cached(cacher, prefix, created.mod_revision)
    snapshot = cacher.current_snapshot(prefix + b"ns/")
    now = cacher.current_revision_now(prefix + b"ns/")
    assert cacher.capabilities.current_reads == store.capabilities.committed_revision
    if store.capabilities.committed_revision:
        assert snapshot is not None and now == snapshot.revision >= created.mod_revision
        second = await cacher.create(prefix + b"ns/b", b"2")
        await cached(cacher, prefix, second.mod_revision)
        later = cacher.current_snapshot(prefix + b"ns/")
        assert later is not None
        assert cacher.current_revision_now(prefix + b"ns/") == later.revision > now
    else:
        assert snapshot is None and now is None
    assert cacher.current_revision_now(b"/not/cached/") is None
