"""The embedded store's writer: the one connection that writes, and the loop that runs it.

:class:`_Writer` holds the writer connection and the revision counters and runs one batch of
writes in one transaction (group commit). :class:`WriterLoop` is the writer's life: it opens
the file (taking its lock), takes the writes queued for it in batches, commits them, and
reports each batch to a :class:`WriterSink`; with several workers on one file it also takes
the write lock around each transaction and fsyncs on a syncer thread. The loop runs either on
a thread of the server (``SqliteStore(writer="thread")``) or in a child process of its own
(``writer="process"``, :mod:`apiserver.storage.sqlite.writer_process`, the server's choice),
where it does not share the interpreter lock with the busy reactor (see
``docs/architecture.md``, "The embedded store's writer process").
"""

from __future__ import annotations

import fcntl
import os
import queue
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from apiserver.storage.interface import (
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    NoSpaceError,
    StorageError,
    StorageTimeoutError,
    UnavailableError,
    WatchEvent,
)
from apiserver.storage.sqlite import schema
from apiserver.storage.sqlite.feed import FeedNotice, SharedRevision

#: Most requests one transaction takes (bounds a commit's latency under heavy load).
MAX_BATCH = 1024
#: Seconds an opening writer waits for the file's lock before it gives up: a server killed a
#: moment ago may still hold it through its writer process, which the kernel kills after it.
LOCK_GRACE = 2.0

_SQL_CURRENT = (
    "SELECT c.id, c.create_revision, c.lease, l.value FROM current c "
    "JOIN log l ON l.id = c.id WHERE c.name = ?"
)
_SQL_INSERT_LOG = (
    "INSERT INTO log (id, name, created, deleted, create_revision, prev_revision, lease, value) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


class Work:
    """One write for the writer: ``fn`` (a :class:`_Writer` operation) on ``args``; the writer
    fills in ``result`` or ``error``. The store's ``_Op`` adds the caller's Deferred; the
    writer process makes these from the ops it is sent."""

    __slots__ = ("args", "error", "fn", "result")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn = fn
        self.args = args
        self.result: Any = None
        self.error: BaseException | None = None


#: The end of the writes a :class:`WriterLoop` takes (after it, the loop closes the file).
STOP = object()

#: Rows one multi-row statement of :meth:`_Writer.create_run` carries (8 parameters a log
#: row: 800 stays under SQLite's oldest limit of 999 host parameters).
ROWS_PER_STATEMENT = 100
_SQL_EXISTING = "SELECT name, id FROM current WHERE name IN ("
_SQL_INSERT_LOG_HEAD = (
    "INSERT INTO log (id, name, created, deleted, create_revision, prev_revision, lease, value) "
    "VALUES "
)
_SQL_INSERT_CURRENT_HEAD = "INSERT INTO current (name, id, create_revision, lease, expires) VALUES "


def _insert_rows(
    cur: sqlite3.Cursor, head: str, width: int, rows: Sequence[tuple[Any, ...]]
) -> None:
    """``rows`` through ``head`` in statements of at most :data:`ROWS_PER_STATEMENT` rows."""
    one = "(" + ",".join("?" * width) + ")"
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        cur.execute(head + ",".join([one] * len(chunk)), [v for row in chunk for v in row])


class _Writer:
    """State owned by the writer (its loop's thread): its connection and the revision
    counters."""

    def __init__(
        self, conn: sqlite3.Connection, rev: int, compact_rev: int, shared: bool = False
    ) -> None:
        self.conn = conn
        #: Other processes write the same file (``--workers``): the revision counters are read
        #: again inside each write transaction, where no other writer can move them.
        self.shared = shared
        self.cur = conn.cursor()
        self.rev = rev  # last committed revision
        self.compact_rev = compact_rev  # committed compacted revision
        self._next = rev  # last revision taken in the open transaction
        self._compact = compact_rev  # compacted revision in the open transaction
        self.events: list[WatchEvent] = []
        #: The revision the last batch started from (its writes are the ones after it).
        self.base = rev
        #: Set when the disk filled up: SQLite's checkpoints at commit are off (one would
        #: grow the database file into whatever space is freed, taking it from the writes)
        #: until :meth:`checkpoint_if_room` finds room for the WAL's pages and folds it back.
        self.checkpoint_deferred = False

    def defer_checkpoints(self) -> None:
        if not self.checkpoint_deferred:
            self.checkpoint_deferred = True
            try:
                self.conn.execute("PRAGMA wal_autocheckpoint = 0")
            except sqlite3.Error:
                pass

    def checkpoint_if_room(self, path: str) -> bool:
        """Fold the WAL back into the database (and truncate it) once the file system has
        room for every page it may add; True when done."""
        try:
            wal = os.path.getsize(path + "-wal")
            if free_bytes(os.path.dirname(path) or ".") < wal + CHECKPOINT_MARGIN:
                return False
            busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if busy:
                return False
            self.conn.execute(f"PRAGMA wal_autocheckpoint = {AUTOCHECKPOINT_PAGES}")
        except (OSError, sqlite3.Error):
            return False
        self.checkpoint_deferred = False
        return True

    # -- transactions --------------------------------------------------------------------

    def run_batch(self, batch: Sequence[Work]) -> list[WatchEvent]:
        """Run ``batch`` in one transaction. Precondition failures (typed StorageErrors,
        raised before an op writes anything) fail only their op; any other error rolls the
        whole transaction back and propagates."""
        self.events = []
        self.base = self.rev
        self._next = self.rev
        self._compact = self.compact_rev
        cur = self.cur
        cur.execute("BEGIN IMMEDIATE")
        try:
            if self.shared:
                # Revisions are allocated inside the write transaction, so they stay global
                # and increasing whichever process commits (etcd's single revision counter).
                self.rev, self.compact_rev = schema.read_revisions(self.conn)
                self.base = self.rev
                self._next = self.rev
                self._compact = self.compact_rev
            index, count = 0, len(batch)
            while index < count:
                op = batch[index]
                if op.fn is _CREATE:
                    end = index + 1
                    while end < count and batch[end].fn is _CREATE:
                        end += 1
                    if end - index > 1:
                        self.create_run(batch[index:end])
                        index = end
                        continue
                try:
                    op.result = op.fn(self, *op.args)
                except StorageError as e:
                    op.error = e
                index += 1
            cur.execute("COMMIT")
        except BaseException:
            if self.conn.in_transaction:
                try:
                    cur.execute("ROLLBACK")
                except sqlite3.Error:
                    pass
            self.events = []
            raise
        self.rev = self._next
        self.compact_rev = self._compact
        return self.events

    def _take_rev(self) -> int:
        self._next += 1
        return self._next

    def _current(self, key: bytes) -> tuple[int, int, int, bytes] | None:
        row: tuple[int, int, int, bytes] | None = self.cur.execute(_SQL_CURRENT, (key,)).fetchone()
        return row

    def _matching(self, key: bytes, expected: int) -> KeyValue:
        """The key's current value, checked against the precondition of an update or delete:
        KeyNotFoundError if it is gone, ConflictError unless ``expected`` (0: any) is its
        revision."""
        row = self._current(key)
        if row is None:
            raise KeyNotFoundError(f"key {key!r} not found", key=key)
        mod, created, lease, old = row
        current = KeyValue(key, old, created, mod, lease)
        if expected and expected != mod:
            raise ConflictError(
                f"key {key!r} is at revision {mod}, not {expected}",
                key=key,
                revision=mod,
                current=current,
            )
        return current

    # -- operations (called as op.fn(writer, *args)) --------------------------------------

    def create(self, key: bytes, value: bytes, ttl: int, expires: float | None) -> KeyValue:
        cur = self.cur
        row = cur.execute("SELECT id FROM current WHERE name = ?", (key,)).fetchone()
        if row is not None:
            raise KeyExistsError(f"key {key!r} already exists", key=key, revision=row[0])
        rev = self._take_rev()
        cur.execute(_SQL_INSERT_LOG, (rev, key, 1, 0, rev, 0, ttl, value))
        cur.execute(
            "INSERT INTO current (name, id, create_revision, lease, expires) "
            "VALUES (?, ?, ?, ?, ?)",
            (key, rev, rev, ttl, expires),
        )
        kv = KeyValue(key, value, rev, rev, ttl)
        self.events.append(WatchEvent("PUT", kv, None))
        return kv

    def create_run(self, ops: Sequence[Work]) -> None:
        """Consecutive creates of one batch in a few multi-row statements.

        Same result as :meth:`create` op by op (revisions in batch order, KeyExistsError for
        a key already there), but with three statements per :data:`ROWS_PER_STATEMENT`
        creates instead of three per create: the sqlite3 module lets go of the GIL around
        every statement and must take it back from the busy reactor thread after each, and
        those hand-offs, not SQLite, were most of a batch's time under load.
        """
        keys = [op.args[0] for op in ops]
        if len(set(keys)) != len(keys):
            # Two creates of one key: the second must see the first; op by op.
            for op in ops:
                try:
                    op.result = self.create(*op.args)
                except StorageError as e:
                    op.error = e
            return
        cur = self.cur
        existing: dict[bytes, int] = {}
        for start in range(0, len(keys), ROWS_PER_STATEMENT):
            chunk = keys[start : start + ROWS_PER_STATEMENT]
            sql = _SQL_EXISTING + ",".join("?" * len(chunk)) + ")"
            existing.update(cur.execute(sql, chunk).fetchall())
        log_rows: list[tuple[Any, ...]] = []
        current_rows: list[tuple[Any, ...]] = []
        events = self.events
        for op in ops:
            key, value, ttl, expires = op.args
            if key in existing:
                op.error = KeyExistsError(
                    f"key {key!r} already exists", key=key, revision=existing[key]
                )
                continue
            rev = self._take_rev()
            log_rows.append((rev, key, 1, 0, rev, 0, ttl, value))
            current_rows.append((key, rev, rev, ttl, expires))
            kv = KeyValue(key, value, rev, rev, ttl)
            events.append(WatchEvent("PUT", kv, None))
            op.result = kv
        _insert_rows(cur, _SQL_INSERT_LOG_HEAD, 8, log_rows)
        _insert_rows(cur, _SQL_INSERT_CURRENT_HEAD, 5, current_rows)

    def update(
        self, key: bytes, value: bytes, expected: int, ttl: int, expires: float | None
    ) -> KeyValue:
        cur = self.cur
        prev = self._matching(key, expected)
        mod, created = prev.mod_revision, prev.create_revision
        rev = self._take_rev()
        cur.execute(_SQL_INSERT_LOG, (rev, key, 0, 0, created, mod, ttl, value))
        cur.execute(
            "UPDATE current SET id = ?, lease = ?, expires = ? WHERE name = ?",
            (rev, ttl, expires, key),
        )
        kv = KeyValue(key, value, created, rev, ttl)
        self.events.append(WatchEvent("PUT", kv, prev))
        return kv

    def delete(self, key: bytes, expected: int) -> KeyValue:
        cur = self.cur
        prev = self._matching(key, expected)
        mod, created = prev.mod_revision, prev.create_revision
        rev = self._take_rev()
        cur.execute(_SQL_INSERT_LOG, (rev, key, 0, 1, created, mod, 0, None))
        cur.execute("DELETE FROM current WHERE name = ?", (key,))
        # etcd's DELETE event carries only the key and the deletion revision.
        self.events.append(WatchEvent("DELETE", KeyValue(key, b"", 0, rev, 0), prev))
        return KeyValue(key, prev.value, created, rev, prev.lease)

    def sweep(self, now: float, limit: int) -> bool:
        """Delete keys whose expiry is at or before ``now``; True if more may be expired."""
        rows = self.cur.execute(
            "SELECT name FROM current WHERE expires <= ? ORDER BY expires LIMIT ?",
            (now, limit),
        ).fetchall()
        for (name,) in rows:
            self.delete(name, 0)
        return len(rows) >= limit

    def compact(self, target: int, final: int) -> int:
        """Forget history below ``target``, one step towards ``final``; returns the compacted
        revision.

        Invariant kept (by induction over steps, starting from compact_rev 0): for every key,
        the newest row with id <= compact_rev survives unless it is a tombstone, and so does
        the row every surviving row with id >= compact_rev points at with ``prev_revision``
        (needed for the prev_kv of a replayed event). So a step from ``oc`` to ``target``
        deletes exactly: the predecessors of rows with ids in [oc, target), and the
        tombstones with ids in [oc, target). A row's successor is unique, so a predecessor of
        a row at or above ``target`` is kept.
        """
        if final > self._next:
            raise FutureRevisionError(
                f"compaction revision {final} is ahead of the current revision {self._next}",
                revision=self._next,
            )
        oc = self._compact
        if target <= oc:
            return oc
        cur = self.cur
        cur.execute(
            "DELETE FROM log WHERE id IN (SELECT prev_revision FROM log "
            "WHERE id >= ? AND id < ? AND prev_revision > 0)",
            (oc, target),
        )
        cur.execute("DELETE FROM log WHERE id >= ? AND id < ? AND deleted = 1", (oc, target))
        cur.execute("UPDATE meta SET value = ? WHERE name = 'compact_rev'", (target,))
        self._compact = target
        return target


def _drain(
    source: queue.SimpleQueue[Any], into: list[Any], item: Any, limit: int
) -> tuple[bool, list[Any]]:
    """Add the items of ``item`` (a list) and of the lists ``source`` holds to ``into``,
    until ``into`` has ``limit`` items. Returns whether the stop marker came (nothing after
    it is taken) and the items of the last list that did not fit (they come first next)."""
    while True:
        if item is STOP:
            return True, []
        room = limit - len(into)
        if len(item) > room:
            into.extend(item[:room])
            return False, item[room:]
        into.extend(item)
        if len(into) >= limit:
            return False, []
        try:
            item = source.get_nowait()
        except queue.Empty:
            return False, []


def _sync_dir(path: str) -> None:
    """fsync a directory, so the names of the files made in it survive a crash."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: SQLite's primary result codes for a full disk or database (``SQLITE_FULL``), and the I/O
#: error a failed write of the WAL or its index can end in when the file system is full.
_SQLITE_FULL = 13
_SQLITE_IOERR = 10
#: Bytes kept free beyond the WAL's size before a checkpoint may grow the database file.
CHECKPOINT_MARGIN = 1 << 20
#: Pages the WAL may hold before SQLite checkpoints it at commit (its default).
AUTOCHECKPOINT_PAGES = 1000
NO_SPACE = "database or disk is full"


def free_bytes(directory: str) -> int:
    """Bytes an unprivileged writer may still use on the file system of ``directory``."""
    st = os.statvfs(directory)
    return st.f_bavail * st.f_frsize


def is_no_space(e: BaseException, directory: str) -> bool:
    """Whether ``e`` is SQLite failing for want of disk space: ``SQLITE_FULL``, or an I/O
    error (a WAL or index write cut short) while the file system has no room left."""
    if not isinstance(e, sqlite3.Error):
        return False
    code = getattr(e, "sqlite_errorcode", 0) & 0xFF
    if code == _SQLITE_FULL:
        return True
    if code != _SQLITE_IOERR:
        return False
    try:
        return free_bytes(directory) < CHECKPOINT_MARGIN
    except OSError:
        return False


def _as_storage_error(e: BaseException) -> StorageError:
    if isinstance(e, StorageError):
        return e
    if isinstance(e, sqlite3.OperationalError) and "locked" in str(e):
        return StorageTimeoutError(f"sqlite: {e}")
    return StorageError(f"sqlite: {e.__class__.__name__}: {e}")


def _lock(path: str, shared: bool = False) -> int:
    """Take a lock beside the database: exclusive for a lone server, whose writer numbers
    revisions in memory, so no other process may write the log; shared for the workers of
    one server (``--workers``), which allocate revisions inside each write transaction. The
    two kinds exclude each other. The kernel drops the lock when the process dies."""
    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UnavailableError(
            f"{path} is in use by another process (lock {path}.lock is held)"
        ) from None
    return fd


def _lock_within(path: str, shared: bool, grace: float) -> int:
    """:func:`_lock`, tried again for ``grace`` seconds while another process holds it."""
    deadline = time.monotonic() + grace
    while True:
        try:
            return _lock(path, shared=shared)
        except UnavailableError:
            if time.monotonic() >= deadline:
                raise
        # The writer's own thread (or process), never the reactor: flock has no timed wait.
        time.sleep(0.02)  # noqa: TID251


def take_lock(path: str, shared: bool = False) -> int:
    """:func:`_lock` for the supervisor of ``--workers``, which checks the file is free
    before its workers open it; release with :func:`release_lock`."""
    return _lock(path, shared=shared)


def release_lock(fd: int) -> None:
    os.close(fd)


#: The writer op :meth:`_Writer.run_batch` folds into :meth:`_Writer.create_run`.
_CREATE = _Writer.create

#: The writer's operations by name: what a write is called on its way to a writer process.
OPERATIONS: dict[str, Callable[..., Any]] = {
    fn.__name__: fn
    for fn in (_Writer.create, _Writer.update, _Writer.delete, _Writer.sweep, _Writer.compact)
}


class WriterSink(Protocol):
    """Where a :class:`WriterLoop` reports, from its threads: the store itself through
    ``callFromThread`` when the loop is a thread of the server, the pipe to the server when
    it runs in a writer process."""

    def opened(self, rev: int, compact_rev: int) -> None:
        """The file is open at these revisions; batches follow."""

    def open_failed(self, error: BaseException) -> None:
        """The file could not be opened (or locked); the loop ends."""

    def batch_done(
        self, batch: list[Work], events: list[WatchEvent], rev: int, compact_rev: int, base: int
    ) -> None:
        """``batch`` committed (each op has its result or error; the batches come in the
        order their writes were queued); ``events`` are its changes, ``base`` the revision
        it started from."""

    def died(self, carried: list[Work]) -> None:
        """The loop ended by an error; ``carried`` was taken from the queue and not run."""

    def finished(self) -> None:
        """The loop ended and closed the file (after a successful open)."""

    def error(self, message: str) -> None:
        """A message for the server's log."""


class WriterLoop:
    """The writer's life, the same on a thread or in a writer process: lock and open the
    file, report :meth:`WriterSink.opened`, then take the lists of :class:`Work` that
    ``source`` delivers (until the stop marker ``STOP``), as many as ``max_batch`` at a
    time, into one transaction each (group commit), and report every batch.

    ``worker=(index, count)`` with count > 1 (``--workers``): every worker's writer opens the
    one file, takes the write lock (``<path>.write-lock``, a kernel lock, so waiting writers
    wake at once) around each transaction, commits with ``synchronous=NORMAL`` and leaves the
    fsync, the shared revision and the siblings' notice to a syncer thread
    (:meth:`_syncer_main`).
    """

    def __init__(
        self,
        path: str,
        source: queue.SimpleQueue[Any],
        sink: WriterSink,
        max_batch: int = MAX_BATCH,
        worker: tuple[int, int] | None = None,
    ) -> None:
        self.path = path
        self.dir = os.path.dirname(os.path.abspath(path))
        self.source = source
        self.sink = sink
        self.max_batch = max(1, max_batch)
        self.worker = worker if worker is not None and worker[1] > 1 else None
        #: The shared revision the syncer advances (several workers; set while running).
        self.shared_rev: SharedRevision | None = None

    def run(self) -> None:
        shared = self.worker is not None
        lock_fd = write_fd = -1
        shared_rev: SharedRevision | None = None
        notice: FeedNotice | None = None
        try:
            lock_fd = _lock_within(self.path, shared, LOCK_GRACE)
            if self.worker is not None:
                write_fd = os.open(
                    self.path + ".write-lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
                )
            conn, rev, compact_rev = schema.open_writer(self.path)
            if self.worker is not None:
                # The commit's fsync moves out of the write lock (``_sync_log`` after it),
                # so siblings commit while this one waits for the disk.
                conn.execute("PRAGMA synchronous = NORMAL")
                _sync_dir(self.dir)  # the WAL's own name, once (SQLite's FULL does it)
                shared_rev = SharedRevision(self.path)
                fcntl.flock(write_fd, fcntl.LOCK_EX)
                try:
                    shared_rev.advance(schema.read_revisions(conn)[0])
                finally:
                    fcntl.flock(write_fd, fcntl.LOCK_UN)
                notice = FeedNotice(self.path, *self.worker)
                self.shared_rev = shared_rev
        except BaseException as e:
            if shared_rev is not None:
                shared_rev.close()
            for fd in (lock_fd, write_fd):
                if fd >= 0:
                    os.close(fd)
            self.sink.open_failed(e)
            return
        writer = _Writer(conn, rev, compact_rev, shared=shared)
        syncer: queue.SimpleQueue[Any] | None = None
        sync_thread: threading.Thread | None = None
        if shared:
            syncer = queue.SimpleQueue()
            sync_thread = threading.Thread(
                target=self._syncer_main,
                args=(syncer, notice),
                name=f"sqlite-syncer:{os.path.basename(self.path)}",
                daemon=True,
            )
            sync_thread.start()
        self.sink.opened(rev, compact_rev)
        source, max_batch = self.source, self.max_batch
        stopping = False
        # Ops of a hand-over that did not fit in the last batch (``max_batch``).
        carried: list[Work] = []
        try:
            while not stopping:
                batch: list[Work] = []
                first = carried or source.get()
                stopping, carried = _drain(source, batch, first, max_batch)
                if not batch:
                    continue
                if write_fd < 0:
                    events = self._run(writer, batch)
                    self.sink.batch_done(batch, events, writer.rev, writer.compact_rev, writer.base)
                    continue
                # Writers of the sibling processes queue on a kernel lock, woken at once when
                # it is free, rather than on SQLite's sleeping busy handler.
                fcntl.flock(write_fd, fcntl.LOCK_EX)
                try:
                    # What queued while a sibling held the lock joins this commit: the lock
                    # is the bottleneck, so each turn takes all it can.
                    if not stopping and len(batch) < max_batch:
                        try:
                            item = source.get_nowait()
                        except queue.Empty:
                            pass
                        else:
                            stopping, carried = _drain(source, batch, item, max_batch)
                    events = self._run(writer, batch)
                finally:
                    fcntl.flock(write_fd, fcntl.LOCK_UN)
                # The fsync, the notices and the answer follow on the syncer thread, while
                # this one takes the next batch.
                assert syncer is not None
                syncer.put([(batch, events, writer.rev, writer.compact_rev, writer.base)])
        finally:
            if syncer is not None:
                syncer.put(STOP)
                assert sync_thread is not None
                sync_thread.join()
            if not stopping:
                self.sink.died(carried)
            if writer.checkpoint_deferred:
                # Not into space the disk does not have: the WAL is replayed at next open.
                writer.checkpoint_if_room(self.path)
            elif shared:
                pass  # siblings still use the WAL; the last connection closed folds it back
            else:
                try:
                    # Fold the WAL back into the database so the file stands alone at rest.
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass
            conn.close()
            os.close(lock_fd)
            if write_fd >= 0:
                os.close(write_fd)
            if shared_rev is not None:
                self.shared_rev = None
                shared_rev.close()
            if notice is not None:
                notice.close()
            self.sink.finished()

    def _run(self, writer: _Writer, batch: list[Work]) -> list[WatchEvent]:
        try:
            events = writer.run_batch(batch)
        except Exception as e:
            if is_no_space(e, self.dir):
                # Nothing of the batch was written; every op hears why, and the next batch
                # tries again (writes resume as soon as space is freed, no restart).
                writer.defer_checkpoints()
                error = NoSpaceError(f"sqlite: {NO_SPACE}")
                for op in batch:
                    op.result, op.error = None, error
                return []
            if len(batch) == 1:
                batch[0].error = _as_storage_error(e)
                return []
        else:
            if writer.checkpoint_deferred:
                writer.checkpoint_if_room(self.path)
            return events
        # One request broke the transaction: retry each alone so the others still succeed.
        events = []
        for op in batch:
            op.result = op.error = None
            try:
                events.extend(writer.run_batch([op]))
            except Exception as e:
                op.error = _as_storage_error(e)
        return events

    def _syncer_main(self, pending: queue.SimpleQueue[Any], notice: FeedNotice | None) -> None:
        """Make committed batches durable, then announce and report them (several workers).

        The workers' writers commit with ``synchronous=NORMAL`` under the write lock and
        hand the batch here: this thread fsyncs the WAL once for every batch that queued
        meanwhile (a group commit: one fsync covers every commit appended before it), while
        the writer commits the next batch and the siblings take the lock, instead of the
        lock being held through one fsync per commit. Nothing is reported, counted in the
        shared revision or told to a sibling before the fsync returned, so what the
        workers' watches and caches serve is on disk, as with ``synchronous=FULL``; a crash
        before it loses only commits nobody was answered for (the WAL replays a prefix of
        its commits). If the disk refuses, the batches' callers get an error, as they would
        from a failed COMMIT.
        """
        stopping = False
        while not stopping:
            done: list[Any] = []
            stopping, _ = _drain(pending, done, pending.get(), sys.maxsize)
            if not done:
                continue
            self._sync_log([op for item in done for op in item[0]])
            if self.shared_rev is not None:
                self.shared_rev.advance(max(item[2] for item in done))
            if notice is not None and any(item[1] for item in done):
                notice.notify()
            for item in done:
                self.sink.batch_done(*item)

    def _sync_log(self, batch: list[Work]) -> None:
        """fdatasync the WAL, as SQLite syncs it (see :meth:`_syncer_main`); on failure
        ``batch`` fails."""
        path = self.path + "-wal"
        try:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except FileNotFoundError:
                # Folded into the database file by a checkpoint, which synced that file.
                return
            try:
                os.fdatasync(fd)
            finally:
                os.close(fd)
        except OSError as e:
            self.sink.error(f"sqlite store {path}: cannot sync its log: {e}")
            error = UnavailableError(f"sqlite: the commit could not be synced to disk: {e}")
            for op in batch:
                op.result, op.error = None, error
