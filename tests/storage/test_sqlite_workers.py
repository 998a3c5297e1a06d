"""The embedded store shared by several worker processes (``--workers``): revisions stay
global and increasing, and a watch on one worker follows every other worker's commits in
revision order with no gap (``apiserver.storage.sqlite.feed`` and ``SqliteStore._tail``)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.threads import deferToThread

from apiserver.storage.interface import UnavailableError, WatchEvent
from apiserver.storage.sqlite import SqliteStore
from apiserver.storage.sqlite import store as store_module

REPO = Path(__file__).resolve().parents[2]


@pytest_twisted.async_yield_fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[SqliteStore, SqliteStore]]:
    """Worker 0 and worker 1 of one file (in one process: each has its own connections,
    locks and feed socket, as two processes would)."""
    db = str(tmp_path / "store.db")
    stores = [
        SqliteStore(db, reactor, clock=Clock(), worker=(i, 2), run_maintenance=False)
        for i in range(2)
    ]
    for store in stores:
        await store.start()
    try:
        yield stores[0], stores[1]
    finally:
        for store in stores:
            await store.stop()


async def _collect(events: list[WatchEvent], count: int, timeout: float = 30.0) -> None:
    """Wait (without sleeping the reactor) until ``events`` holds ``count`` events."""
    waited: Deferred[None] = Deferred()

    def check() -> None:
        if len(events) >= count and not waited.called:
            waited.callback(None)

    from twisted.internet.task import LoopingCall

    loop = LoopingCall(check)
    loop.start(0.01)
    waited.addTimeout(timeout, reactor)
    try:
        await waited
    finally:
        loop.stop()


@pytest_twisted.ensureDeferred
async def test_revisions_are_global_and_increasing(
    pair: tuple[SqliteStore, SqliteStore],
) -> None:
    a, b = pair
    revisions = []
    for n in range(20):
        store = a if n % 2 else b
        kv = await store.create(f"/k/{n:03d}".encode(), b"v")
        revisions.append(kv.mod_revision)
    assert revisions == list(range(revisions[0], revisions[0] + 20))
    assert await a.current_revision() == revisions[-1]
    assert await b.current_revision() == revisions[-1]
    # the shared counter: each worker knows the newest commit of the other at once
    kv = await b.create(b"/k/last", b"v")
    assert a.committed_revision() == kv.mod_revision == b.committed_revision()
    listed = await a.range(b"/k/")
    assert len(listed.kvs) == 21


@pytest_twisted.ensureDeferred
async def test_a_watch_on_one_worker_sees_every_write_of_the_other_in_order(
    pair: tuple[SqliteStore, SqliteStore],
) -> None:
    a, b = pair
    seen_a: list[WatchEvent] = []
    seen_b: list[WatchEvent] = []
    a.watch(b"/w/", 0, seen_a.append)
    b.watch(b"/w/", 0, seen_b.append)
    written = []
    for n in range(30):
        store = b if n % 3 else a
        kv = await store.create(f"/w/{n:03d}".encode(), b"v")
        written.append(kv.mod_revision)
    kv = await a.update(b"/w/000", b"w", 0)
    written.append(kv.mod_revision)
    kv = await b.delete(b"/w/001")
    written.append(kv.mod_revision)
    await _collect(seen_a, len(written))
    await _collect(seen_b, len(written))
    assert [e.kv.mod_revision for e in seen_a] == written
    assert [e.kv.mod_revision for e in seen_b] == written
    assert seen_a[-1].type == "DELETE" and seen_a[-1].prev_kv is not None
    assert seen_a[-2].prev_kv is not None and seen_a[-2].prev_kv.value == b"v"


@pytest_twisted.ensureDeferred
async def test_a_write_is_acknowledged_after_its_worker_dispatched_it(
    pair: tuple[SqliteStore, SqliteStore],
) -> None:
    a, b = pair
    seen: list[WatchEvent] = []
    b.watch(b"/ack/", 0, seen.append)
    await a.create(b"/ack/x", b"1")  # moves the log past b's dispatched revision
    kv = await b.create(b"/ack/y", b"2")
    # b's own write is in its watches by the time b answers, after a's (no gap, in order).
    assert [e.kv.key for e in seen][-1] == b"/ack/y"
    assert [e.kv.mod_revision for e in seen] == [kv.mod_revision - 1, kv.mod_revision]


@pytest_twisted.ensureDeferred
async def test_a_worker_answers_its_own_writes_without_reading_them_back(
    pair: tuple[SqliteStore, SqliteStore],
) -> None:
    """Once a worker has dispatched everything before its batch, the batch's own events are
    the log's next rows: they go to its watches without a read of the file; a sibling's
    commit in between still goes through the log, in order."""
    a, b = pair
    seen: list[WatchEvent] = []
    b.watch(b"/own/", 0, seen.append)
    first = await a.create(b"/own/a0", b"v")
    await _collect(seen, 1)  # b has followed a's commit
    tails: list[int] = []
    read = b._in_reader

    def counting(fn: Any, args: tuple[Any, ...]) -> Any:
        if fn is store_module._read_tail:
            tails.append(args[0])
        return read(fn, args)

    b._in_reader = counting  # type: ignore[method-assign]
    written = [first.mod_revision]
    for n in range(5):
        kv = await b.create(f"/own/b{n}".encode(), b"v")
        written.append(kv.mod_revision)
    assert tails == []
    assert [e.kv.mod_revision for e in seen] == written
    # A sibling's commit b has not read yet: b's next write waits for the log.
    b._feed.stop()  # type: ignore[union-attr]  # b hears of a's commit only from the log
    kv = await a.create(b"/own/a1", b"v")
    written.append(kv.mod_revision)
    kv = await b.create(b"/own/b5", b"v")
    written.append(kv.mod_revision)
    assert tails and [e.kv.mod_revision for e in seen] == written


@pytest_twisted.ensureDeferred
async def test_a_sibling_reads_a_commit_only_once_it_is_on_disk(
    pair: tuple[SqliteStore, SqliteStore],
) -> None:
    """Workers commit under the write lock without waiting for the disk and fsync after it;
    the shared revision moves only after the fsync, and a sibling's tail reads no further."""
    a, b = pair
    seen: list[WatchEvent] = []
    b.watch(b"/d/", 0, seen.append)
    b._feed.stop()  # type: ignore[union-attr]  # b reads only when told to, below
    assert a._loop is not None
    shared = a._loop.shared_rev  # the writer's, which the syncer advances after the fsync
    assert shared is not None
    advance = shared.advance
    shared.advance = lambda revision: None  # type: ignore[method-assign]  # "not synced yet"
    try:
        kv = await a.create(b"/d/x", b"v")
    finally:
        shared.advance = advance  # type: ignore[method-assign]
    assert b.committed_revision() < kv.mod_revision
    b._tail()
    assert seen == []  # committed, but not yet known to be on disk
    shared.advance(kv.mod_revision)
    b._tail()
    assert [e.kv.mod_revision for e in seen] == [kv.mod_revision]


@pytest_twisted.ensureDeferred
async def test_a_commit_the_disk_refuses_to_sync_fails_its_callers(
    pair: tuple[SqliteStore, SqliteStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = pair
    calls: list[int] = []

    def refuse(fd: int) -> None:
        calls.append(fd)
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(store_module.os, "fdatasync", refuse)
    with pytest.raises(UnavailableError, match="could not be synced to disk"):
        await a.create(b"/s/x", b"v")
    assert calls
    monkeypatch.undo()
    kv = await a.create(b"/s/y", b"v")  # the store goes on
    assert (await a.get(b"/s/y")).mod_revision == kv.mod_revision


def test_the_shared_revision_only_moves_forward(tmp_path: Path) -> None:
    from apiserver.storage.sqlite.feed import SharedRevision

    db = str(tmp_path / "store.db")
    one, two = SharedRevision(db), SharedRevision(db)
    try:
        one.advance(12)
        two.advance(10)  # a slower writer's older commit, synced later
        assert one.get() == two.get() == 12
        two.advance(13)
        assert one.get() == 13
    finally:
        one.close()
        two.close()


@pytest_twisted.ensureDeferred
async def test_a_lone_server_cannot_open_a_file_its_workers_use(
    pair: tuple[SqliteStore, SqliteStore], tmp_path: Path
) -> None:
    lone = SqliteStore(str(tmp_path / "store.db"), reactor, clock=Clock())
    with pytest.raises(UnavailableError, match="in use by another process"):
        await lone.start()


@pytest_twisted.ensureDeferred
async def test_writer_processes_feed_a_watch_in_another_process(tmp_path: Path) -> None:
    db = str(tmp_path / "store.db")
    watcher = SqliteStore(db, reactor, clock=Clock(), worker=(0, 3), run_maintenance=False)
    await watcher.start()
    try:
        seen: list[WatchEvent] = []
        watcher.watch(b"/w/", 0, seen.append)
        results = await deferToThread(
            lambda: [
                p
                for p in [
                    subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "tests.storage.sqlite_worker_writer",
                            db,
                            str(i),
                            "3",
                            "40",
                        ],
                        cwd=REPO,
                        env={"PYTHONPATH": f"{REPO / 'src'}:{REPO}", "PATH": "/usr/bin:/bin"},
                        stdout=subprocess.PIPE,
                        text=True,
                    )
                    for i in (1, 2)
                ]
            ]
        )
        acked: list[int] = []
        for proc in results:
            out, _ = await deferToThread(proc.communicate, None, 120)
            assert proc.returncode == 0
            acked += [int(line) for line in out.split()]
        await _collect(seen, 80)
        revisions = [e.kv.mod_revision for e in seen]
        assert revisions == sorted(acked)
        assert revisions == list(range(revisions[0], revisions[0] + 80))
    finally:
        await watcher.stop()
