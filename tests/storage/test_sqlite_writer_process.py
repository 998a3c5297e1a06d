"""The embedded store's writer in a process of its own (``SqliteStore(writer="process")``):
what only that arrangement has: the pipe's order, the child's death, the end of its input
as the stop, and no writer outliving the server. The rest of the store's behaviour is the
conformance suite's (``conftest.BACKENDS``: ``sqlite-process`` and
``sqlite-workers-process``)."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import gatherResults
from twisted.internet.task import Clock

from apiserver.storage.interface import (
    ConflictError,
    KeyExistsError,
    StorageError,
    UnavailableError,
    WatchEvent,
)
from apiserver.storage.sqlite import SqliteStore
from apiserver.storage.sqlite import store as store_module
from tests.storage.conftest import sleep

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest_twisted.async_yield_fixture
async def store(db: str) -> AsyncIterator[SqliteStore]:
    s = SqliteStore(db, reactor=reactor, clock=Clock(), writer="process")
    await s.start()
    try:
        yield s
    finally:
        await s.stop()


def _pid(store: SqliteStore) -> int:
    assert store._process is not None
    return int(store._process.transport.pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (ended, not yet reaped) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_writer_process_loads_no_twisted() -> None:
    """Its start-up and memory stay small: it imports the writer's modules only."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src")
    code = (
        "import sys, apiserver.storage.sqlite.writer_child; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'twisted'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_the_writer_is_a_thread_or_a_process() -> None:
    with pytest.raises(ValueError, match="writer must be 'thread' or 'process'"):
        SqliteStore("unused.db", reactor=reactor, writer="fork")


@pytest_twisted.ensureDeferred
async def test_the_writer_runs_in_another_process(store: SqliteStore) -> None:
    pid = _pid(store)
    assert pid != os.getpid() and _alive(pid)
    assert not [t for t in threading.enumerate() if "sqlite-writer" in t.name]
    await store.check_ready(5.0)


@pytest_twisted.ensureDeferred
async def test_results_and_typed_errors_cross_the_pipe_in_submission_order(
    store: SqliteStore,
) -> None:
    seen: list[WatchEvent] = []
    store.watch(b"/p/", 0, seen.append)
    first = await store.create(b"/p/a", b"one")
    # One hand-over: a create, a duplicate, a stale update and a good one, in this order.
    ds = [
        store.create(b"/p/b", b"two"),
        store.create(b"/p/a", b"again"),
        store.update(b"/p/a", b"stale", first.mod_revision + 100),
        store.update(b"/p/a", b"three", first.mod_revision),
    ]
    results = await gatherResults([d.addErrback(lambda f: f.value) for d in ds])
    created, exists, conflict, updated = results
    assert created.value == b"two" and created.mod_revision == first.mod_revision + 1
    assert isinstance(exists, KeyExistsError) and exists.key == b"/p/a"
    assert isinstance(conflict, ConflictError)
    assert conflict.revision == first.mod_revision
    assert conflict.current is not None and conflict.current.value == b"one"
    assert updated.mod_revision == first.mod_revision + 2 and updated.value == b"three"
    assert [(e.type, e.kv.key, e.kv.mod_revision) for e in seen] == [
        ("PUT", b"/p/a", first.mod_revision),
        ("PUT", b"/p/b", first.mod_revision + 1),
        ("PUT", b"/p/a", first.mod_revision + 2),
    ]
    assert seen[-1].prev_kv is not None and seen[-1].prev_kv.value == b"one"


@pytest_twisted.ensureDeferred
async def test_stop_commits_and_answers_everything_sent(db: str) -> None:
    store = SqliteStore(db, reactor=reactor, clock=Clock(), writer="process")
    await store.start()
    pid = _pid(store)
    ds = [store.create(b"/s/%03d" % i, b"v") for i in range(300)]
    await store.stop()  # in the same turn: the writes are handed over, then the input ends
    results = await gatherResults(ds)
    assert [kv.mod_revision for kv in results] == list(range(2, 302))
    assert not _alive(pid)
    again = SqliteStore(db, reactor=reactor, clock=Clock(), writer="process")
    await again.start()
    try:
        assert (await again.range(b"/s/")).count == 300
    finally:
        await again.stop()
    # The final checkpoint folded the log back into the database file.
    assert not os.path.exists(db + "-wal") or os.path.getsize(db + "-wal") == 0


@pytest_twisted.ensureDeferred
async def test_a_dead_writer_fails_what_it_was_sent_and_the_store(store: SqliteStore) -> None:
    pid = _pid(store)
    await store.create(b"/d/before", b"v")
    os.kill(pid, signal.SIGSTOP)  # it reads nothing more: what is sent now waits in the pipe
    try:
        waiting = [store.create(b"/d/%d" % i, b"v") for i in range(3)]
        await sleep(0)  # the hand-over ran: the three are in the pipe, not the outbox
        assert store._outbox == []
    finally:
        os.kill(pid, signal.SIGKILL)
    for d in waiting:
        with pytest.raises(UnavailableError, match="sqlite writer stopped"):
            await d
    with pytest.raises(UnavailableError, match="store is failed"):
        await store.create(b"/d/after", b"v")
    with pytest.raises(UnavailableError, match="sqlite writer process is not running"):
        await store.check_ready(5.0)


@pytest_twisted.ensureDeferred
async def test_what_the_pipe_cannot_take_at_once_follows_in_order(store: SqliteStore) -> None:
    """Frames go to the pipe at once; what a full pipe refuses waits, and is written, in
    order, when the child reads again."""
    pid = _pid(store)
    os.kill(pid, signal.SIGSTOP)
    try:
        ds = []
        for turn in range(8):  # eight hand-overs of 16 writes: 512 KiB, 8x what a pipe holds
            ds += [store.create(b"/f/%d/%02d" % (turn, i), os.urandom(4096)) for i in range(16)]
            await sleep(0)
        assert store._process is not None and store._process._unsent  # some waited
    finally:
        os.kill(pid, signal.SIGCONT)
    results = await gatherResults(ds)
    assert [kv.mod_revision for kv in results] == list(
        range(results[0].mod_revision, results[0].mod_revision + 128)
    )
    assert not store._process._unsent
    assert (await store.range(b"/f/")).count == 128


@pytest_twisted.ensureDeferred
async def test_an_open_that_fails_in_the_writer_fails_start(db: str) -> None:
    holder = SqliteStore(db, reactor=reactor, clock=Clock(), writer="process")
    await holder.start()
    try:
        other = SqliteStore(db, reactor=reactor, clock=Clock(), writer="process")
        started = other.start()
        waiting = other.create(b"/x", b"v")  # made while it opens: it waits, then fails too
        with pytest.raises(UnavailableError, match="in use by another process"):
            await started
        with pytest.raises(UnavailableError, match="in use by another process"):
            await waiting
        with pytest.raises(StorageError, match="store is stopped"):
            await other.create(b"/x", b"v")
    finally:
        await holder.stop()


@pytest_twisted.ensureDeferred
async def test_the_writer_ignores_a_terminal_interrupt(store: SqliteStore) -> None:
    """Ctrl-C reaches every process of the terminal's group; the server stops its writer in
    order (the end of its input), so the writer itself does not stop on SIGINT."""
    os.kill(_pid(store), signal.SIGINT)
    kv = await store.create(b"/i/x", b"v")
    assert (await store.get(b"/i/x")).mod_revision == kv.mod_revision


def test_the_writer_dies_with_the_server(db: str) -> None:
    """kill -9 of the server takes its writer process with it, so no writer holds the file
    (or commits into it) after its server is gone."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.storage.sqlite_crash_writer", db, "process"],
        cwd=str(REPO),
        env=env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "READY\n"
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        assert len(children) == 1
        writer = int(children[0])
        assert _alive(writer)
        pidfd = os.pidfd_open(writer)
    finally:
        proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    try:
        # A pidfd becomes readable when its process ends.
        ended, _, _ = select.select([pidfd], [], [], 10.0)
    finally:
        os.close(pidfd)
    assert ended, "the writer outlived its server"


@pytest.mark.parametrize("writer", ["process", "thread"])
@pytest_twisted.ensureDeferred
async def test_reads_and_writes_made_while_the_store_opens_wait_for_it(
    db: str, writer: str
) -> None:
    """The server listens while the store opens: what comes then runs once it is open, in
    order, instead of failing with "store is starting"."""
    s = SqliteStore(db, reactor=reactor, clock=Clock(), writer=writer)
    started = s.start()
    assert s._state == "starting"
    revision = s.current_revision()
    first, second = s.create(b"/early/a", b"1"), s.create(b"/early/b", b"2")
    listed = s.range(b"/early/")
    await started
    try:
        base = await revision
        assert [(await first).mod_revision, (await second).mod_revision] == [base + 1, base + 2]
        assert (await listed).revision >= base
        assert (await s.get(b"/early/b")).value == b"2"
    finally:
        await s.stop()


@pytest.mark.parametrize("writer", ["process", "thread"])
@pytest_twisted.ensureDeferred
async def test_a_turns_writes_go_to_the_writer_as_they_come_only_from_a_process(
    db: str, writer: str
) -> None:
    """Within one reactor turn, every HAND_OVER_EVERY writes leave at once for a writer
    process (it commits them while the turn goes on), the rest at the turn's end, in order;
    a writer thread, which shares the interpreter lock, gets the whole turn at its end."""
    s = SqliteStore(db, reactor=reactor, clock=Clock(), writer=writer, run_maintenance=False)
    await s.start()
    try:
        every = store_module.HAND_OVER_EVERY
        ds = [s.create(b"/t/%02d" % i, b"v") for i in range(every - 1)]
        assert len(s._outbox) == every - 1
        ds += [s.create(b"/t/%02d" % i, b"v") for i in range(every - 1, every + 3)]
        if writer == "process":
            assert s._process is not None and len(s._process._sent) == every
            assert len(s._outbox) == 3
        else:
            assert len(s._outbox) == every + 3
        await sleep(0)  # the turn's end
        assert s._outbox == []
        revisions = [kv.mod_revision for kv in await gatherResults(ds)]
        assert revisions == list(range(revisions[0], revisions[0] + every + 3))
    finally:
        await s.stop()
