"""Tests only the embedded SQLite backend has: the schema on disk, reopening, locking,
group commit, its timers on a test clock, thread hygiene, and durability across ``kill -9``.
The backend-neutral behaviour is in ``test_conformance.py``."""

from __future__ import annotations

import os
import random
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.task import Clock

from apiserver.storage.interface import (
    CompactedError,
    KeyNotFoundError,
    KeyValue,
    NoSpaceError,
    StorageError,
    StorageTimeoutError,
    UnavailableError,
    WatchEvent,
)
from apiserver.storage.sqlite import SCHEMA_VERSION, SchemaVersionError, SqliteStore, schema
from apiserver.storage.sqlite import store as store_module
from apiserver.storage.sqlite import writer as writer_module
from apiserver.storage.sqlite.store import prefix_end
from tests.storage.conftest import sleep

REPO = Path(__file__).resolve().parents[2]


def sqlite_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if "sqlite-" in t.name]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest_twisted.async_yield_fixture
async def opened(db: str) -> AsyncIterator[tuple[SqliteStore, Clock]]:
    clock = Clock()
    store = SqliteStore(db, reactor=reactor, clock=clock)
    await store.start()
    try:
        yield store, clock
    finally:
        await store.stop()


def test_prefix_end() -> None:
    assert prefix_end(b"/a/") == b"/a0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") is None
    assert prefix_end(b"") is None


# --- schema -------------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_schema_is_versioned_and_in_wal_mode(db: str) -> None:
    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    await store.stop()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert {"log", "current", "meta", "schema_version"} <= tables
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        conn.close()


@pytest_twisted.ensureDeferred
async def test_reopen_keeps_data_and_revision(db: str) -> None:
    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    a = await store.create(b"/r/a", b"1")
    a2 = await store.update(b"/r/a", b"2", a.mod_revision)
    b = await store.create(b"/r/b", b"x", ttl=100)
    await store.delete(b"/r/b")
    await store.compact(a2.mod_revision)
    rev = await store.current_revision()
    await store.stop()

    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    try:
        assert await store.current_revision() == rev
        assert await store.get(b"/r/a") == a2
        await store.get(b"/r/a", revision=a2.mod_revision)
        await _raises(CompactedError, store.get(b"/r/a", revision=a.mod_revision))
        await _raises(KeyNotFoundError, store.get(b"/r/b"))
        c = await store.create(b"/r/c", b"3")
        assert c.mod_revision == rev + 1
        assert b.mod_revision < rev
    finally:
        await store.stop()


def _old_store_file(db: str, keys: int = 0) -> None:
    """A data file as servers before revision 1 wrote it: the same layout, no sequence row
    until the first write, ``keys`` creates at revisions 1..keys."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("BEGIN")
        for stmt in schema._DDL_V1:
            conn.execute(stmt)
        conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO schema_version (version) VALUES (1)")
        for rev in range(1, keys + 1):
            name = b"/old/%d" % rev
            conn.execute(
                "INSERT INTO log (id, name, created, deleted, create_revision, prev_revision, "
                "lease, value) VALUES (?, ?, 1, 0, ?, 0, 0, ?)",
                (rev, name, rev, b"v"),
            )
            conn.execute(
                "INSERT INTO current (name, id, create_revision, lease, expires) "
                "VALUES (?, ?, ?, 0, NULL)",
                (name, rev, rev),
            )
        conn.execute("COMMIT")
    finally:
        conn.close()


@pytest_twisted.ensureDeferred
async def test_a_new_store_starts_at_revision_one_like_etcd(db: str) -> None:
    # etcd: a new cluster reports revision 1 and its first write is revision 2.
    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    try:
        assert await store.current_revision() == 1
        empty = await store.range(b"/r/")
        assert (empty.kvs, empty.revision, empty.count) == ((), 1, 0)
        kv = await store.create(b"/r/a", b"1")
        assert (kv.create_revision, kv.mod_revision) == (2, 2)
        assert (await store.range(b"/r/", revision=1)).kvs == ()
        events: list[WatchEvent] = []
        w = store.watch(b"/r/", 1, events.append)
        await _eventually(lambda: len(events) == 1)
        w.cancel()
        assert events[0].kv == kv
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_an_old_empty_store_moves_to_revision_one(db: str) -> None:
    _old_store_file(db)
    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    try:
        assert await store.current_revision() == 1
        assert (await store.range(b"/")).revision == 1
        assert (await store.create(b"/r/a", b"1")).mod_revision == 2
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_an_old_store_with_writes_keeps_its_numbering(db: str) -> None:
    _old_store_file(db, keys=3)
    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    try:
        assert await store.current_revision() == 3
        first = await store.get(b"/old/1")
        assert (first.create_revision, first.mod_revision, first.value) == (1, 1, b"v")
        assert [kv.key for kv in (await store.range(b"/old/", revision=1)).kvs] == [b"/old/1"]
        assert (await store.create(b"/r/a", b"1")).mod_revision == 4
    finally:
        await store.stop()


async def _raises(exc: type[BaseException], d: Any) -> BaseException:
    with pytest.raises(exc) as info:
        await d
    return info.value


@pytest.mark.parametrize("writer", ["thread", "process"])
@pytest_twisted.ensureDeferred
async def test_newer_schema_version_is_refused(db: str, writer: str) -> None:
    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    await store.create(b"/k", b"v")
    await store.stop()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    conn.commit()
    conn.close()

    store = SqliteStore(db, reactor=reactor, clock=Clock(), writer=writer)
    err = await _raises(SchemaVersionError, store.start())
    assert f"schema version {SCHEMA_VERSION + 1}" in str(err)
    assert "newer" in str(err)
    assert sqlite_threads() == []
    await _raises(UnavailableError, store.create(b"/x", b"y"))
    await store.stop()


@pytest.mark.parametrize("writer", ["thread", "process"])
@pytest_twisted.ensureDeferred
async def test_a_foreign_database_is_refused(db: str, writer: str) -> None:
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE something (x)")
    conn.commit()
    conn.close()
    store = SqliteStore(db, reactor=reactor, clock=Clock(), writer=writer)
    err = await _raises(SchemaVersionError, store.start())
    assert "not one of this server" in str(err)


@pytest_twisted.ensureDeferred
async def test_a_second_store_on_the_same_file_is_refused(
    opened: tuple[SqliteStore, Clock], db: str
) -> None:
    other = SqliteStore(db, reactor=reactor, clock=Clock())
    err = await _raises(UnavailableError, other.start())
    assert "in use" in str(err)


# --- lifecycle ----------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_stop_ends_threads_watches_and_requests(db: str) -> None:
    store = SqliteStore(db, reactor=reactor, clock=Clock(), readers=2)
    await store.start()
    await gatherResults([store.create(b"/t/%d" % i, b"v") for i in range(50)])
    await gatherResults([store.get(b"/t/%d" % i) for i in range(50)])
    w = store.watch(b"/t/", 0, lambda e: None)
    assert sqlite_threads()
    pending = store.create(b"/t/last", b"v")  # queued before stop: still committed
    await store.stop()
    assert (await pending).key == b"/t/last"
    await w.done
    assert sqlite_threads() == []
    await _raises(UnavailableError, store.get(b"/t/1"))
    await _raises(UnavailableError, store.create(b"/t/x", b"v"))
    await store.stop()  # idempotent


@pytest_twisted.ensureDeferred
async def test_health_check_times_out_when_readers_are_stuck(db: str) -> None:
    store = SqliteStore(db, reactor=reactor, readers=1)
    await store.start()
    release = threading.Event()  # the only reader is busy until the test releases it
    try:
        blocker = store._read(lambda conn: release.wait(30))
        await _raises(StorageTimeoutError, store.check_health(0.05))
        release.set()
        assert await blocker is True  # released by the test, not by the 30 s safety bound
        await store.check_health(1.0)
        await store.check_ready(1.0)
    finally:
        release.set()
        await store.stop()


# --- group commit -------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_a_failing_request_does_not_fail_its_batch(opened: tuple[SqliteStore, Clock]) -> None:
    store, _ = opened

    def broken(writer: Any) -> None:
        writer.cur.execute("INSERT INTO no_such_table VALUES (1)")

    ds = [store.create(b"/g/%d" % i, b"v") for i in range(20)]
    bad = store._submit(broken)
    ds += [store.create(b"/g/%d" % i, b"v") for i in range(20, 40)]
    results = await gatherResults(ds)
    err = await _raises(StorageError, bad)
    assert "no_such_table" in str(err)
    revisions = [kv.mod_revision for kv in results]
    assert revisions == sorted(revisions) and len(set(revisions)) == 40
    assert (await store.range(b"/g/")).count == 40
    assert await store.current_revision() == revisions[-1]


@pytest_twisted.ensureDeferred
async def test_the_writes_of_one_reactor_turn_commit_together(
    opened: tuple[SqliteStore, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ops submitted in one reactor turn reach the writer as one queue item at the
    turn's end (one wake-up of the writer thread, one transaction), not one by one."""
    store, _ = opened
    batches: list[list[bytes]] = []
    assert store._loop is not None
    run = store._loop._run

    def recording(writer: Any, batch: list[Any]) -> Any:
        keys = [op.args[0] for op in batch if op.fn is store_module._Writer.create]
        batches.append([k for k in keys if k.startswith(b"/turn/")])
        return run(writer, batch)

    monkeypatch.setattr(store._loop, "_run", recording)
    ds = [store.create(b"/turn/%d" % i, b"v") for i in range(3)]
    # Nothing went to the writer during the turn: the three wait in the outbox.
    assert [op.args[0] for op in store._outbox[-3:]] == [b"/turn/%d" % i for i in range(3)]
    results = await gatherResults(ds)
    assert [b for b in batches if b] == [[b"/turn/0", b"/turn/1", b"/turn/2"]]
    assert [kv.mod_revision for kv in results] == [results[0].mod_revision + i for i in range(3)]


@pytest_twisted.ensureDeferred
async def test_a_write_waiting_for_the_hand_over_when_the_writer_dies_is_answered(
    opened: tuple[SqliteStore, Clock],
) -> None:
    """The writer thread's death is announced on the reactor before the turn's hand-over
    runs: a write still in the outbox then fails at once instead of waiting forever."""
    store, _ = opened
    waiting = store.create(b"/stranded/a", b"v")
    store._writer_died([])  # as the dying writer's callFromThread runs it
    with pytest.raises(UnavailableError, match="sqlite writer stopped"):
        await waiting
    assert store._outbox == []
    with pytest.raises(UnavailableError, match="store is failed"):
        await store.create(b"/stranded/b", b"v")


@pytest_twisted.ensureDeferred
async def test_a_turn_with_more_writes_than_a_batch_takes_spans_batches(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``max_batch`` bounds every transaction, also when one reactor turn hands over more
    writes than that: the rest wait for the next batches, in order."""
    store = SqliteStore(db, reactor=reactor, clock=Clock(), max_batch=2, run_maintenance=False)
    await store.start()
    try:
        batches: list[list[bytes]] = []
        assert store._loop is not None
        run = store._loop._run

        def recording(writer: Any, batch: list[Any]) -> Any:
            batches.append([op.args[0] for op in batch])
            return run(writer, batch)

        monkeypatch.setattr(store._loop, "_run", recording)
        results = await gatherResults([store.create(b"/many/%d" % i, b"v") for i in range(5)])
        assert batches == [[b"/many/0", b"/many/1"], [b"/many/2", b"/many/3"], [b"/many/4"]]
        assert [kv.mod_revision for kv in results] == [
            results[0].mod_revision + i for i in range(5)
        ]
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_watch_callbacks_may_write_and_cancel(opened: tuple[SqliteStore, Clock]) -> None:
    store, _ = opened
    seen: list[WatchEvent] = []

    def echo(event: WatchEvent) -> None:
        seen.append(event)
        if event.kv.key == b"/e/ping":
            store.create(b"/e/pong", b"")
            w.cancel()

    w = store.watch(b"/e/", 0, echo)
    await store.create(b"/e/ping", b"")
    await w.done
    await _writer_flushed(store)  # the pong was committed and offered to the watchers
    assert [e.kv.key for e in seen] == [b"/e/ping"]
    assert (await store.get(b"/e/pong")).value == b""


# --- timers on the injected clock ---------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_ttl_sweeper_runs_on_the_clock(opened: tuple[SqliteStore, Clock]) -> None:
    store, clock = opened
    kv = await store.create(b"/ttl/a", b"v", ttl=5)
    assert kv.lease == 5
    await store.create(b"/ttl/b", b"v", ttl=50)
    events: list[WatchEvent] = []
    store.watch(b"/ttl/", 0, events.append)
    clock.advance(4)
    await _writer_flushed(store)  # a sweep started by the clock would have committed by now
    assert events == []
    clock.advance(1)
    await _eventually(lambda: len(events) == 1)
    assert events[0].type == "DELETE"
    assert events[0].kv.key == b"/ttl/a"
    assert (await store.range(b"/ttl/")).count == 1


@pytest_twisted.ensureDeferred
async def test_expired_keys_are_swept_after_a_restart(db: str) -> None:
    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    kv = await store.create(b"/ttl/a", b"v", ttl=5)
    await store.stop()
    clock = Clock()
    clock.advance(10)
    store = SqliteStore(db, reactor=reactor, clock=clock)
    await store.start()  # the sweeper runs at once
    try:
        await _eventually(lambda: store._rev == kv.mod_revision + 1)
        await _raises(KeyNotFoundError, store.get(b"/ttl/a"))
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_periodic_compaction_goes_to_the_revision_seen_one_interval_ago(db: str) -> None:
    clock = Clock()
    store = SqliteStore(db, reactor=reactor, clock=clock, compaction_interval=60)
    await store.start()
    try:
        kv = first = await store.create(b"/c/k", b"0")
        for i in range(1, 5):
            kv = await store.update(b"/c/k", b"%d" % i, kv.mod_revision)
        seen = kv.mod_revision
        clock.advance(60)  # remembers `seen`; nothing compacted yet
        await _writer_flushed(store)
        await store.get(b"/c/k", revision=first.mod_revision)
        for i in range(5, 8):
            kv = await store.update(b"/c/k", b"%d" % i, kv.mod_revision)
        clock.advance(60)  # compacts to `seen`
        await _eventually(lambda: store._compact_rev == seen)
        await _raises(CompactedError, store.get(b"/c/k", revision=seen - 1))
        assert (await store.get(b"/c/k", revision=seen)).value == b"4"
    finally:
        await store.stop()


@pytest_twisted.ensureDeferred
async def test_with_an_owner_the_store_runs_no_loop_and_declares_its_maintenance(
    db: str,
) -> None:
    """In a server the sweeper and the compactor are child services of the tree: the store
    declares them (what one round does, how often, whether the first is at once) and runs
    nothing on its clock."""
    clock = Clock()
    store = SqliteStore(db, reactor=reactor, clock=clock, run_maintenance=False)
    tasks = store.maintenance()
    assert [(t.name, t.interval, t.now) for t in tasks] == [
        ("ttl-sweeper", 1.0, True),
        ("compaction", 300.0, False),
    ]
    assert [t.name for t in SqliteStore(db, reactor, compaction_interval=0).maintenance()] == []
    assert SqliteStore(db, reactor).maintenance() == ()  # it runs them itself
    await store.start()
    try:
        assert clock.getDelayedCalls() == []
        kv = await store.create(b"/ttl/a", b"v", ttl=5)
        events: list[WatchEvent] = []
        store.watch(b"/ttl/", 0, events.append)
        clock.advance(600)
        await _writer_flushed(store)
        assert events == []  # nothing swept on its own
        sweep, compact = tasks
        await sweep.run()  # one round deletes what has expired
        await _eventually(lambda: len(events) == 1)
        assert events[0].type == "DELETE" and events[0].kv.key == b"/ttl/a"
        await compact.run()  # the first round compacts to the revision seen at start
        assert store._compact_rev == 1  # a new store's
        seen = store._rev
        await compact.run()  # the next one to the revision seen at the previous round
        assert store._compact_rev == seen
        await _raises(CompactedError, store.get(b"/ttl/a", revision=kv.mod_revision))
    finally:
        await store.stop()


# --- compaction keeps exactly what later reads and watches need -----------------------------


@pytest_twisted.ensureDeferred
async def test_compaction_preserves_every_later_read(
    opened: tuple[SqliteStore, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = opened
    monkeypatch.setattr(store_module, "COMPACT_STEP", 7)  # many small steps
    rng = random.Random(7)
    names = [b"/h/%d" % i for i in range(8)]
    base = await store.current_revision()  # the writes are base + 1 .. top
    for _ in range(200):
        key = rng.choice(names)
        try:
            cur = await store.get(key)
        except KeyNotFoundError:
            await store.create(key, b"%d" % rng.randrange(1000), ttl=rng.choice([0, 30]))
            continue
        if rng.random() < 0.3:
            await store.delete(key, cur.mod_revision)
        else:
            await store.update(key, b"%d" % rng.randrange(1000), cur.mod_revision)
    top = await store.current_revision()
    before = {rev: await store.range(b"/h/", revision=rev) for rev in range(base, top + 1)}
    events: list[WatchEvent] = []  # events[i] is the write at revision base + 1 + i
    w = store.watch(b"/h/", base + 1, events.append)
    await _eventually(lambda: len(events) == top - base)
    w.cancel()
    for target in (37, 38, 120, top):
        await store.compact(target)
        for rev in range(target, top + 1):
            assert await store.range(b"/h/", revision=rev) == before[rev], (target, rev)
        replay: list[WatchEvent] = []
        w = store.watch(b"/h/", target, replay.append)
        await _eventually(lambda: len(replay) == top - target + 1)  # noqa: B023
        w.cancel()
        # prev_kv intact after the compacted revision
        assert replay[1:] == events[target - base :]
        assert [e.kv for e in replay] == [e.kv for e in events[target - base - 1 :]]
        await _raises(CompactedError, store.range(b"/h/", revision=target - 1))
    # Compacted to the top, only the live keys' latest rows are left, plus the row at the top
    # revision and the one it replaced (a replay from the compacted revision reads both).
    live = (await store.range(b"/h/")).count
    conn = sqlite3.connect(store._path)
    try:
        rows = conn.execute("SELECT count(*) FROM log").fetchone()[0]
    finally:
        conn.close()
    assert rows <= live + 2


# --- durability ---------------------------------------------------------------------------


def _read_acks(proc: subprocess.Popen[str], n: int, timeout: float) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    buf = ""
    fd = proc.stdout.fileno()
    while sum(1 for x in lines if x[0] in "CU") < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"only {len(lines)} lines in {timeout}s: {lines[-5:]}")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536).decode()
        if not chunk:
            raise AssertionError(f"writer exited early: {lines[-5:]}")
        buf += chunk
        *complete, buf = buf.split("\n")
        for line in complete:
            assert not line.startswith("ERROR"), line
            lines.append(line)
    return lines


@pytest.mark.parametrize("writer", ["thread", "process"])
@pytest_twisted.ensureDeferred
async def test_every_acknowledged_write_survives_kill_9(db: str, writer: str) -> None:
    """Also with the writer in a process of its own: the server's kill -9 takes its writer
    process with it (``PR_SET_PDEATHSIG``), and the store opens again at once (the opening
    writer waits out the lock the dying writer still holds for a moment)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.sqlite_crash_writer", db, writer],
        cwd=str(REPO),
        env=env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        bufsize=0,
    )
    try:
        lines = _read_acks(proc, random.randrange(500, 1500), timeout=60.0)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.stdout is not None
        proc.stdout.close()
    assert lines[0] == "READY"
    created: dict[bytes, int] = {}
    updated: dict[bytes, tuple[int, bytes]] = {}
    for line in lines[1:]:
        parts = line.split(" ")
        if parts[0] == "C":
            created[parts[1].encode()] = int(parts[2])
        else:
            updated[parts[1].encode()] = (int(parts[2]), parts[3].encode())

    store = SqliteStore(db, reactor=reactor, clock=Clock())
    await store.start()
    try:
        assert await store.current_revision() >= max(created.values())
        for key, rev in created.items():
            kv: KeyValue = await store.get(key)
            assert kv.create_revision == rev
            if key in updated:
                assert (kv.mod_revision, kv.value) == updated[key]
        # Revisions continue after the crash without reuse.
        kv = await store.create(b"/after", b"crash")
        assert kv.mod_revision > max(created.values())
    finally:
        await store.stop()


def _writer_flushed(store: SqliteStore) -> Deferred[None]:
    """Fires once everything queued on the writer before it has committed and its events were
    offered to the watchers (``_batch_done`` dispatches before it acknowledges): the event a
    test waits on to check that nothing (more) happened, instead of sleeping."""
    return store._submit(lambda writer: None)


async def _eventually(check: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await sleep(0.01)


# --- a full disk (issue 17) ---------------------------------------------------------------


def _sqlite_error(code: int, message: str) -> sqlite3.OperationalError:
    error = sqlite3.OperationalError(message)
    error.sqlite_errorcode = code  # type: ignore[attr-defined]
    return error


@pytest_twisted.ensureDeferred
async def test_full_disk_refuses_writes_once_logged_and_recovers(
    opened: tuple[SqliteStore, Clock], monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLITE_FULL injected at the writer: every write of the episode fails with NoSpaceError
    (reported once), reads go on, and the next write after space is back commits."""
    store, _ = opened
    kept = await store.create(b"/r/kept", b"v")
    full = [True]
    real_create = store_module._Writer.create

    def create(writer: Any, *args: Any) -> Any:
        if full[0]:
            raise _sqlite_error(13, "database or disk is full")
        return real_create(writer, *args)

    monkeypatch.setattr(store_module._Writer, "create", create)
    reported: list[int] = []
    store.on_out_of_space = lambda: reported.append(1)
    for i in range(3):
        with pytest.raises(NoSpaceError, match=r"^sqlite: database or disk is full$"):
            await store.create(b"/r/k%d" % i, b"v")
    assert reported == [1]
    assert store.out_of_space
    assert await store.get(b"/r/kept") == kept

    full[0] = False
    await store.create(b"/r/after", b"v")
    assert not store.out_of_space
    # Checkpoints were held back while the disk was full; with room the WAL is folded back
    # (and truncated) right after the first write that commits.
    assert os.path.getsize(store._path + "-wal") == 0
    full[0] = True
    with pytest.raises(NoSpaceError):
        await store.create(b"/r/k9", b"v")
    assert reported == [1, 1]  # a new episode is reported again


def test_io_error_is_no_space_only_on_a_full_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    io_error = _sqlite_error(10, "disk I/O error")
    assert writer_module.is_no_space(_sqlite_error(13, "database or disk is full"), str(tmp_path))
    assert not writer_module.is_no_space(io_error, str(tmp_path))
    monkeypatch.setattr(writer_module, "free_bytes", lambda directory: 0)
    assert writer_module.is_no_space(io_error, str(tmp_path))
    assert not writer_module.is_no_space(_sqlite_error(5, "database is locked"), str(tmp_path))
