"""The storage conformance suite: every backend must pass these tests unchanged.

The behaviour checked is the contract in ``apiserver.storage.interface`` (etcd's semantics, as
kube-apiserver's registry relies on them): a global revision, compare-and-swap writes, ranges
with prefixes, limits, start keys and revisions, watches with replay and prev_kv, compaction
and TTL expiry. Revisions are compared relatively only: on etcd the revision is shared by
every test of the session.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults

from apiserver.storage.interface import (
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    RangeResult,
    StorageError,
    Store,
    Watch,
    WatchEvent,
)
from tests.storage.conftest import Backend, sleep

TIMEOUT = 10.0


class Events:
    """A watch callback that records events and lets a test wait for the n-th one."""

    def __init__(self) -> None:
        self.events: list[WatchEvent] = []
        self._waiters: list[tuple[int, Deferred[list[WatchEvent]]]] = []

    def __call__(self, event: WatchEvent) -> None:
        self.events.append(event)
        ready = [(n, d) for n, d in self._waiters if len(self.events) >= n]
        for n, d in ready:
            self._waiters.remove((n, d))
            d.callback(self.events[:n])

    def deferred(self, n: int) -> Deferred[list[WatchEvent]]:
        d: Deferred[list[WatchEvent]] = Deferred()
        if len(self.events) >= n:
            d.callback(self.events[:n])
        else:
            self._waiters.append((n, d))
        return d

    async def wait(self, n: int, timeout: float = TIMEOUT) -> list[WatchEvent]:
        d = self.deferred(n)
        d.addTimeout(timeout, reactor)
        try:
            return await d
        except Exception as e:
            raise AssertionError(
                f"expected {n} events within {timeout}s, got {len(self.events)}: {self.events}"
            ) from e

    async def settle(self, n: int, quiet: float = 0.3) -> list[WatchEvent]:
        """Wait for n events, then make sure no more arrive for ``quiet`` seconds."""
        events = await self.wait(n)
        await sleep(quiet)
        assert self.events == events, f"unexpected extra events: {self.events[n:]}"
        return events


async def raises(exc_type: type[StorageError], d: Deferred[Any]) -> StorageError:
    with pytest.raises(exc_type) as info:
        await d
    return info.value


def summary(events: list[WatchEvent]) -> list[tuple[str, bytes, bytes, int]]:
    return [(e.type, e.kv.key, e.kv.value, e.kv.mod_revision) for e in events]


def watch(store: Store, prefix: bytes, start: int = 0) -> tuple[Watch, Events]:
    events = Events()
    return store.watch(prefix, start, events), events


# --- revisions, create, get ---------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_revisions_increase_globally(store: Store, prefix: bytes) -> None:
    start = await store.current_revision()
    a = await store.create(prefix + b"a", b"1")
    b = await store.create(prefix + b"b", b"2")
    assert start < a.mod_revision < b.mod_revision
    assert a.create_revision == a.mod_revision
    a2 = await store.update(prefix + b"a", b"3", a.mod_revision)
    assert a2.mod_revision > b.mod_revision
    assert a2.create_revision == a.create_revision
    d = await store.delete(prefix + b"b")
    assert d.mod_revision > a2.mod_revision
    assert await store.current_revision() >= d.mod_revision


@pytest_twisted.ensureDeferred
async def test_a_fresh_store_lists_at_revision_one_or_later(store: Store, prefix: bytes) -> None:
    # etcd's first revision is 1, so a list never reports revision 0: kube-apiserver's
    # resourceVersion "0" means "any version", never a revision of the store.
    current = await store.current_revision()
    assert current >= 1
    empty = await store.range(prefix)
    assert empty.kvs == () and empty.count == 0
    assert empty.revision >= current
    kv = await store.create(prefix + b"a", b"1")
    assert kv.mod_revision > current >= 1


@pytest_twisted.ensureDeferred
async def test_revision_zero_reads_the_latest(store: Store, prefix: bytes) -> None:
    # Revision 0 in a range is "no particular revision": the latest, as etcd's Range has it
    # and as a list with resourceVersion "0" (any) may be served. It is neither revision 0
    # of the history nor refused as compacted or too new.
    empty = await store.range(prefix, revision=0)
    assert empty.kvs == () and empty.revision >= 1
    a = await store.create(prefix + b"a", b"1")
    listed = await store.range(prefix, revision=0)
    assert listed.kvs == (a,) and listed.revision >= a.mod_revision
    await store.compact(a.mod_revision)
    b = await store.create(prefix + b"b", b"2")
    listed = await store.range(prefix, revision=0)
    assert listed.kvs == (a, b) and listed.revision >= b.mod_revision


@pytest_twisted.ensureDeferred
async def test_create_get_and_exists(store: Store, prefix: bytes) -> None:
    key = prefix + b"k"
    kv = await store.create(key, b"value")
    assert (kv.key, kv.value, kv.lease) == (key, b"value", 0)
    assert await store.get(key) == kv
    err = await raises(KeyExistsError, store.create(key, b"other"))
    assert err.key == key
    assert (await store.get(key)).value == b"value"
    await raises(KeyNotFoundError, store.get(prefix + b"missing"))


@pytest_twisted.ensureDeferred
async def test_binary_keys_and_empty_values(store: Store, prefix: bytes) -> None:
    key = prefix + b"\x00\xff\xfe bin"
    kv = await store.create(key, b"")
    assert (await store.get(key)).value == b""
    kv2 = await store.update(key, b"\x00" * 3, kv.mod_revision)
    assert (await store.get(key)).value == b"\x00\x00\x00"
    result = await store.range(prefix)
    assert result.kvs == (kv2,)


@pytest_twisted.ensureDeferred
async def test_create_after_delete_is_a_new_key(store: Store, prefix: bytes) -> None:
    key = prefix + b"k"
    first = await store.create(key, b"1")
    await store.delete(key)
    second = await store.create(key, b"2")
    assert second.create_revision == second.mod_revision > first.create_revision


@pytest_twisted.ensureDeferred
async def test_concurrent_creates_of_one_key_exactly_one_wins(store: Store, prefix: bytes) -> None:
    key = prefix + b"race"
    results = await gatherResults(
        [store.create(key, b"%d" % i).addErrback(lambda f: f.value) for i in range(20)]
    )
    winners = [r for r in results if isinstance(r, KeyValue)]
    assert len(winners) == 1
    assert all(isinstance(r, KeyExistsError) for r in results if r is not winners[0])
    assert await store.get(key) == winners[0]


# --- update, delete -----------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_update_compare_and_swap(store: Store, prefix: bytes) -> None:
    key = prefix + b"k"
    kv = await store.create(key, b"v1")
    kv2 = await store.update(key, b"v2", kv.mod_revision)
    assert (kv2.value, kv2.create_revision) == (b"v2", kv.create_revision)
    assert kv2.mod_revision > kv.mod_revision
    err = await raises(ConflictError, store.update(key, b"v3", kv.mod_revision))
    assert isinstance(err, ConflictError)
    assert err.key == key
    if err.current is not None:
        assert err.current == kv2
    assert await store.get(key) == kv2


@pytest_twisted.ensureDeferred
async def test_update_of_missing_key(store: Store, prefix: bytes) -> None:
    await raises(KeyNotFoundError, store.update(prefix + b"nope", b"v", 0))
    await raises(KeyNotFoundError, store.update(prefix + b"nope", b"v", 12345))
    kv = await store.create(prefix + b"gone", b"v")
    await store.delete(prefix + b"gone")
    await raises(KeyNotFoundError, store.update(prefix + b"gone", b"v", kv.mod_revision))
    await raises(KeyNotFoundError, store.update(prefix + b"gone", b"v", 0))


@pytest_twisted.ensureDeferred
async def test_unconditional_update(store: Store, prefix: bytes) -> None:
    key = prefix + b"k"
    kv = await store.create(key, b"v1")
    await store.update(key, b"v2", kv.mod_revision)
    kv3 = await store.update(key, b"v3", 0)
    assert kv3.value == b"v3"
    assert kv3.create_revision == kv.create_revision
    assert await store.get(key) == kv3


@pytest_twisted.ensureDeferred
async def test_delete_compare_and_swap(store: Store, prefix: bytes) -> None:
    key = prefix + b"k"
    kv = await store.create(key, b"v1")
    kv2 = await store.update(key, b"v2", kv.mod_revision)
    err = await raises(ConflictError, store.delete(key, kv.mod_revision))
    assert isinstance(err, ConflictError)
    if err.current is not None:
        assert err.current == kv2
    assert await store.get(key) == kv2
    deleted = await store.delete(key, kv2.mod_revision)
    assert deleted.key == key
    assert deleted.value == b"v2"
    assert deleted.create_revision == kv.create_revision
    assert deleted.mod_revision > kv2.mod_revision
    await raises(KeyNotFoundError, store.get(key))
    await raises(KeyNotFoundError, store.delete(key))
    await raises(KeyNotFoundError, store.delete(key, kv2.mod_revision))


@pytest_twisted.ensureDeferred
async def test_unconditional_delete(store: Store, prefix: bytes) -> None:
    kv = await store.create(prefix + b"k", b"v")
    deleted = await store.delete(prefix + b"k")
    assert (deleted.value, deleted.create_revision) == (b"v", kv.create_revision)
    assert deleted.mod_revision > kv.mod_revision
    assert await store.count(prefix) == 0


# --- range, count -------------------------------------------------------------------------


def keys(result: RangeResult) -> list[bytes]:
    return [kv.key for kv in result.kvs]


@pytest_twisted.ensureDeferred
async def test_range_prefix_boundaries(store: Store, prefix: bytes) -> None:
    names = [b"a", b"a/1", b"a/2", b"a/2/x", b"ab", b"a0", b"b/1", b"a.", b"a/\xff"]
    for name in names:
        await store.create(prefix + name, name)
    result = await store.range(prefix + b"a/")
    assert keys(result) == [prefix + n for n in (b"a/1", b"a/2", b"a/2/x", b"a/\xff")]
    assert result.count == 4
    assert result.more is False
    assert [kv.value for kv in result.kvs] == [b"a/1", b"a/2", b"a/2/x", b"a/\xff"]
    everything = await store.range(prefix)
    assert keys(everything) == sorted(prefix + n for n in names)
    assert everything.count == len(names)
    assert (await store.range(prefix + b"zzz/")).kvs == ()
    assert await store.count(prefix + b"a/") == 4
    assert await store.count(prefix + b"zzz/") == 0


@pytest_twisted.ensureDeferred
async def test_range_limit_start_key_paging_more_and_count(backend: Backend, prefix: bytes) -> None:
    store = backend.store
    for i in range(7):
        await store.create(prefix + b"k%d" % i, b"v%d" % i)
    page1 = await store.range(prefix, limit=3)
    assert keys(page1) == [prefix + b"k0", prefix + b"k1", prefix + b"k2"]
    assert (page1.more, page1.count) == (True, 7)
    # A key written between pages is not seen by pages read at the first page's revision.
    await store.create(prefix + b"k3a", b"late")
    page2 = await store.range(
        prefix, start_key=page1.kvs[-1].key + b"\x00", limit=3, revision=page1.revision
    )
    assert page2.revision == page1.revision
    assert keys(page2) == [prefix + b"k3", prefix + b"k4", prefix + b"k5"]
    assert (page2.more, page2.count) == (True, 4)
    page3 = await store.range(
        prefix, start_key=page2.kvs[-1].key + b"\x00", limit=3, revision=page1.revision
    )
    assert keys(page3) == [prefix + b"k6"]
    assert (page3.more, page3.count) == (False, 1)
    # At the latest revision the late key is there.
    latest = await store.range(prefix, start_key=prefix + b"k3", limit=2)
    assert keys(latest) == [prefix + b"k3", prefix + b"k3a"]
    assert (latest.more, latest.count) == (True, 5)
    # Limit larger than the range; limit 0 means all.
    assert (await store.range(prefix, limit=100)).more is False
    assert len((await store.range(prefix, limit=0)).kvs) == 8


@pytest_twisted.ensureDeferred
async def test_range_and_get_at_an_older_revision(store: Store, prefix: bytes) -> None:
    a = await store.create(prefix + b"a", b"a1")
    b = await store.create(prefix + b"b", b"b1")
    snapshot = await store.range(prefix)
    rev = snapshot.revision
    assert rev >= b.mod_revision
    await store.update(prefix + b"a", b"a2", a.mod_revision)
    await store.delete(prefix + b"b")
    await store.create(prefix + b"c", b"c1")

    old = await store.range(prefix, revision=rev)
    # The revision the read was served at, not the store's current one (kube-apiserver's
    # resourceVersion of an exact-revision list and of its continue pages).
    assert old.revision == rev
    assert old.kvs == (a, b)
    assert old.count == 2
    assert await store.get(prefix + b"a", revision=rev) == a
    assert await store.get(prefix + b"b", revision=rev) == b
    await raises(KeyNotFoundError, store.get(prefix + b"c", revision=rev))
    # Before the key existed.
    await raises(KeyNotFoundError, store.get(prefix + b"b", revision=a.mod_revision))
    latest = await store.range(prefix)
    assert [kv.value for kv in latest.kvs] == [b"a2", b"c1"]
    assert latest.revision > rev


@pytest_twisted.ensureDeferred
async def test_range_at_a_future_revision(store: Store, prefix: bytes) -> None:
    now = await store.current_revision()
    await raises(FutureRevisionError, store.range(prefix, revision=now + 1000))
    await raises(FutureRevisionError, store.get(prefix + b"x", revision=now + 1000))


# --- watch --------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_watch_from_now(store: Store, prefix: bytes) -> None:
    await store.create(prefix + b"before", b"x")
    w, events = watch(store, prefix)
    kv = await store.create(prefix + b"k", b"v1")
    kv2 = await store.update(prefix + b"k", b"v2", kv.mod_revision)
    deleted = await store.delete(prefix + b"k")
    got = await events.settle(3)
    assert [e.type for e in got] == ["PUT", "PUT", "DELETE"]
    assert got[0].kv == kv
    assert got[0].prev_kv is None
    assert got[1].kv == kv2
    assert got[1].prev_kv == kv
    assert got[2].kv.key == prefix + b"k"
    assert got[2].kv.mod_revision == deleted.mod_revision
    assert got[2].kv.value == b""
    assert got[2].prev_kv == kv2
    w.cancel()


@pytest_twisted.ensureDeferred
async def test_watch_from_a_past_revision_replays_then_goes_live(
    store: Store, prefix: bytes
) -> None:
    kv1 = await store.create(prefix + b"a", b"1")
    kv2 = await store.update(prefix + b"a", b"2", kv1.mod_revision)
    kv3 = await store.create(prefix + b"b", b"3")
    del3 = await store.delete(prefix + b"b")
    w, events = watch(store, prefix, kv2.mod_revision)
    live = await store.create(prefix + b"c", b"4")
    got = await events.settle(4)
    assert summary(got) == [
        ("PUT", prefix + b"a", b"2", kv2.mod_revision),
        ("PUT", prefix + b"b", b"3", kv3.mod_revision),
        ("DELETE", prefix + b"b", b"", del3.mod_revision),
        ("PUT", prefix + b"c", b"4", live.mod_revision),
    ]
    assert got[0].prev_kv == kv1
    assert got[1].prev_kv is None
    assert got[2].prev_kv == kv3
    w.cancel()


@pytest_twisted.ensureDeferred
async def test_watch_events_are_in_revision_order(store: Store, prefix: bytes) -> None:
    w, events = watch(store, prefix)
    results = await gatherResults([store.create(prefix + b"%03d" % i, b"v") for i in range(50)])
    got = await events.settle(50)
    revisions = [e.kv.mod_revision for e in got]
    assert revisions == sorted(revisions)
    assert sorted(revisions) == sorted(kv.mod_revision for kv in results)
    w.cancel()


@pytest_twisted.ensureDeferred
async def test_watch_prefix_filtering(store: Store, prefix: bytes) -> None:
    w, events = watch(store, prefix + b"a/")
    await store.create(prefix + b"ab", b"no")
    await store.create(prefix + b"a", b"no")
    await store.create(prefix + b"b/1", b"no")
    kv = await store.create(prefix + b"a/1", b"yes")
    got = await events.settle(1)
    assert got[0].kv == kv
    w.cancel()


@pytest_twisted.ensureDeferred
async def test_many_watchers_on_one_prefix(store: Store, prefix: bytes) -> None:
    watches = [watch(store, prefix) for _ in range(20)]
    kv = await store.create(prefix + b"k", b"v")
    for w, events in watches:
        got = await events.wait(1)
        assert got[0].kv == kv
        w.cancel()


@pytest_twisted.ensureDeferred
async def test_watch_cancel(store: Store, prefix: bytes) -> None:
    w, events = watch(store, prefix)
    kv = await store.create(prefix + b"k", b"v")
    await events.wait(1)
    w.cancel()
    await w.done  # fires (with None) on cancel
    await store.update(prefix + b"k", b"v2", kv.mod_revision)
    await store.create(prefix + b"k2", b"v")
    await sleep(0.3)
    assert len(events.events) == 1
    w.cancel()  # idempotent


@pytest_twisted.ensureDeferred
async def test_watch_cancel_during_replay(store: Store, prefix: bytes) -> None:
    first = await store.create(prefix + b"k", b"v")
    for i in range(20):
        await store.create(prefix + b"k%d" % i, b"v")
    w, events = watch(store, prefix, first.mod_revision)
    w.cancel()
    await w.done
    await sleep(0.3)
    assert len(events.events) <= 21


@pytest_twisted.ensureDeferred
async def test_watch_from_the_next_revision(store: Store, prefix: bytes) -> None:
    now = await store.current_revision()
    w, events = watch(store, prefix, now + 1)
    kv = await store.create(prefix + b"k", b"v")
    got = await events.settle(1)
    assert got[0].kv == kv
    w.cancel()


# --- compaction ---------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_compaction(store: Store, prefix: bytes) -> None:
    key = prefix + b"k"
    kv1 = await store.create(key, b"1")
    kv2 = await store.update(key, b"2", kv1.mod_revision)
    gone = await store.create(prefix + b"gone", b"x")
    await store.delete(prefix + b"gone")
    kv3 = await store.update(key, b"3", kv2.mod_revision)
    kv4 = await store.update(key, b"4", kv3.mod_revision)
    await store.compact(kv3.mod_revision)

    await raises(CompactedError, store.get(key, revision=kv2.mod_revision))
    await raises(CompactedError, store.range(prefix, revision=kv1.mod_revision))
    await raises(CompactedError, store.range(prefix, revision=kv3.mod_revision - 1))
    # The compacted revision itself is still readable, as in etcd.
    assert await store.get(key, revision=kv3.mod_revision) == kv3
    at3 = await store.range(prefix, revision=kv3.mod_revision)
    assert at3.kvs == (kv3,)
    # Latest state is untouched.
    assert await store.get(key) == kv4
    assert (await store.range(prefix)).kvs == (kv4,)
    await raises(KeyNotFoundError, store.get(prefix + b"gone"))
    assert gone.mod_revision < kv3.mod_revision

    w, _ = watch(store, prefix, kv1.mod_revision)
    err = await raises(CompactedError, w.done)
    assert isinstance(err, CompactedError)

    # A watch from the compacted revision replays from there, with prev_kv.
    w2, events = watch(store, prefix, kv3.mod_revision)
    got = await events.settle(2)
    assert summary(got) == [
        ("PUT", key, b"3", kv3.mod_revision),
        ("PUT", key, b"4", kv4.mod_revision),
    ]
    # etcd forgets kv2 at this compaction (it is superseded at the compacted revision), so
    # the first replayed event may lack its prev_kv; later ones must have it.
    assert got[0].prev_kv in (None, kv2)
    assert got[1].prev_kv == kv3
    w2.cancel()


@pytest_twisted.ensureDeferred
async def test_compaction_keeps_live_keys_and_further_writes(store: Store, prefix: bytes) -> None:
    kvs = [await store.create(prefix + b"%d" % i, b"v") for i in range(10)]
    for kv in kvs[:5]:
        await store.delete(kv.key)
    rev = await store.current_revision()
    await store.compact(rev)
    result = await store.range(prefix)
    assert result.kvs == tuple(kvs[5:])
    kv = await store.update(kvs[5].key, b"new", kvs[5].mod_revision)
    assert kv.mod_revision > rev
    assert (await store.range(prefix, revision=rev)).kvs == tuple(kvs[5:])


# --- TTL ----------------------------------------------------------------------------------


@pytest.mark.realtime
@pytest_twisted.ensureDeferred
async def test_ttl_expiry_deletes_with_a_delete_event(backend: Backend, prefix: bytes) -> None:
    store = backend.store
    key = prefix + b"short"
    kv = await store.create(key, b"v", ttl=1)
    assert kv.lease != 0
    keep = await store.create(prefix + b"keep", b"v")
    assert keep.lease == 0
    w, events = watch(store, prefix, kv.mod_revision)
    await events.wait(2)
    got = await backend.wait_while_time_passes(events.deferred(3), timeout=15.0)
    expiry = got[2]
    assert expiry.type == "DELETE"
    assert expiry.kv.key == key
    assert expiry.kv.mod_revision > keep.mod_revision
    assert expiry.prev_kv is not None
    assert (expiry.prev_kv.key, expiry.prev_kv.value) == (key, b"v")
    await raises(KeyNotFoundError, store.get(key))
    assert await store.get(prefix + b"keep") == keep
    w.cancel()


@pytest_twisted.ensureDeferred
async def test_update_replaces_ttl(store: Store, prefix: bytes) -> None:
    kv = await store.create(prefix + b"k", b"v", ttl=60)
    assert kv.lease != 0
    kv2 = await store.update(prefix + b"k", b"v2", kv.mod_revision)
    assert kv2.lease == 0
    assert (await store.get(prefix + b"k")).lease == 0
    kv3 = await store.update(prefix + b"k", b"v3", kv2.mod_revision, ttl=60)
    assert kv3.lease != 0
    assert (await store.get(prefix + b"k")).lease == kv3.lease


# --- health -------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_health_checks(store: Store) -> None:
    await store.check_health(5.0)
    await store.check_ready(5.0)


@pytest_twisted.ensureDeferred
async def test_kind_and_db_size(store: Store, prefix: bytes) -> None:
    """The backend names itself (its health check's name) and reports its size on disk:
    a number that grows with data for the backends that keep a database, None for memory."""
    assert store.kind in ("etcd", "sqlite", "memory")
    await store.create(prefix + b"sized", b"x" * 4096)
    size = await store.db_size()
    if store.kind == "memory":
        assert size is None
    else:
        assert isinstance(size, int) and size > 4096


# --- a random history against a model -----------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_random_history_matches_a_model(store: Store, prefix: bytes) -> None:
    """Random creates/updates/deletes (right, stale and unconditional revisions) on a few
    keys, checked op by op against a dict, then every recorded revision read back with a
    range and the whole history replayed with a watch."""
    rng = random.Random(20240601)
    names = [prefix + b"%d" % i for i in range(6)]
    model: dict[bytes, KeyValue] = {}
    snapshots: list[tuple[int, dict[bytes, KeyValue]]] = []
    history: list[tuple[str, bytes, bytes, int]] = []
    first_rev = 0
    for step in range(150):
        key = rng.choice(names)
        value = b"v%d" % step
        op = rng.choice(["create", "update", "update0", "stale", "delete", "delete0", "get"])
        cur = model.get(key)
        d: Deferred[Any]
        if op == "create":
            d = store.create(key, value)
        elif op == "update":
            d = store.update(key, value, cur.mod_revision if cur else 1)
        elif op == "update0":
            d = store.update(key, value, 0)
        elif op == "stale":
            d = store.update(key, value, 1)
        elif op == "delete":
            d = store.delete(key, cur.mod_revision if cur else 1)
        elif op == "delete0":
            d = store.delete(key)
        else:
            d = store.get(key)
        try:
            result = await d
        except KeyExistsError:
            assert op == "create" and cur is not None
            continue
        except KeyNotFoundError:
            assert cur is None, (op, key)
            continue
        except ConflictError:
            assert op == "stale" and cur is not None and cur.mod_revision != 1
            continue
        assert cur is not None or op == "create", (op, key)
        if op == "get":
            assert result == cur
            continue
        first_rev = first_rev or result.mod_revision
        if op.startswith("delete"):
            assert result.value == cur.value if cur else False
            del model[key]
            history.append(("DELETE", key, b"", result.mod_revision))
        else:
            assert result.value == value
            if cur is not None:
                assert result.create_revision == cur.create_revision
            model[key] = result
            history.append(("PUT", key, value, result.mod_revision))
        snapshots.append((result.mod_revision, dict(model)))

    assert len(history) > 30
    assert (await store.range(prefix)).kvs == tuple(model[k] for k in sorted(model))
    for rev, snap in snapshots[:: max(1, len(snapshots) // 15)]:
        page = await store.range(prefix, revision=rev)
        assert page.kvs == tuple(snap[k] for k in sorted(snap)), rev
        assert page.count == len(snap)
    w, events = watch(store, prefix, first_rev)
    got = await events.settle(len(history))
    assert summary(got) == history
    w.cancel()
