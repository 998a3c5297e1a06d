"""The embedded store: a revisioned key-value log in one SQLite file (the default backend).

Design (see ``schema.py`` for the tables):

* Every write appends a row to ``log``; the row id is the store revision, as in kine and etcd.
  As in etcd, a new store is at revision 1 and its first write is revision 2, so no list
  reports revision 0 (``resourceVersion`` "0" means "any" in the API). ``current`` maps
  each live key to its latest row, updated in the same transaction, so reads at the latest
  revision never aggregate over history.
* Writes go through one writer with its own connection (the only writer SQLite allows
  anyway; ``writer.py``), on a thread of this process or in a child process of its own
  (``writer_process.py``, the server's choice). The reactor hands it the writes of each
  reactor turn together;
  requests queue up while a transaction commits, and the writer takes all of them into the
  next transaction (group commit), so one fsync acknowledges many writes.
  Every request is acknowledged only after its transaction committed (``synchronous=FULL``
  in WAL mode: the commit is on disk, not only in the page cache).
* Reads run on a small pool of reader threads, each with its own read-only connection; WAL
  gives them a consistent snapshot per read transaction without blocking the writer.
* Watches are fanned out in process: after each commit the writer hands the new events to the
  reactor thread (in commit order), which offers them to every watcher
  whose prefix matches. A watch from a past revision first replays the log (in pages) while
  buffering live events, then switches to live delivery without gaps or duplicates.
* TTL: a key written with ``ttl`` gets an absolute expiry on the injected clock; a sweeper on
  that clock deletes expired keys as ordinary DELETE revisions, so watchers see them.
* Compaction forgets history below a revision, in bounded steps so writes interleave; the
  periodic compactor compacts to the revision it saw one interval earlier, as
  kube-apiserver's compactor does.

Why hand-written rather than a library: the Python SQLite wrappers for Twisted
(``twisted.enterprise.adbapi``) run every statement as its own thread hop and transaction,
which neither batches commits nor gives the single-writer ordering the revision log needs.
"""

from __future__ import annotations

import os
import queue
import sqlite3
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.python.threadpool import ThreadPool

from apiserver.storage.interface import (
    CompactedError,
    FutureRevisionError,
    KeyNotFoundError,
    KeyValue,
    NoSpaceError,
    PeriodicTask,
    RangeResult,
    StorageTimeoutError,
    StoreCapabilities,
    UnavailableError,
    WatchEvent,
    prefix_end,
)
from apiserver.storage.periodic import PeriodicRunner
from apiserver.storage.sqlite import schema
from apiserver.storage.sqlite.feed import ChangeFeed, SharedRevision
from apiserver.storage.sqlite.writer import (
    MAX_BATCH,
    STOP,
    Work,
    WriterLoop,
    _as_storage_error,
    _Writer,
)

if TYPE_CHECKING:
    from apiserver.storage.sqlite.writer_process import WriterProcess

__all__ = ["SqliteStore", "prefix_end"]

_log = Logger()
_T = TypeVar("_T")

#: Revisions one compaction step covers (bounds how long one step holds the writer).
COMPACT_STEP = 10_000
#: Log rows one watch-replay read returns.
REPLAY_PAGE = 1000
#: Expired keys one sweep transaction deletes (more are taken by the next one at once).
SWEEP_BATCH = 1000
#: Log rows one read of a worker's change feed takes (on the reactor thread: bounded).
TAIL_PAGE = 200
#: Seconds between two reads of the log by a worker's change feed when no notice came.
TAIL_INTERVAL = 0.5
#: With the writer in a process: a reactor turn's writes go to it in frames of this many
#: as they come, the rest at the turn's end (:meth:`SqliteStore._hand_over` says why).
HAND_OVER_EVERY = 8


class _Op(Work):
    """A write on its way to the writer: created on the reactor thread, which fires
    ``deferred`` once the writer reported the op's batch committed."""

    __slots__ = ("deferred",)

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        super().__init__(fn, args)
        self.deferred: Deferred[Any] = Deferred()


# --------------------------------------------------------------------------------------------
# Reader side (runs in reader threads; each function takes the thread's connection)
# --------------------------------------------------------------------------------------------


def _check_revision(revision: int, rev: int, compact_rev: int) -> None:
    if revision < compact_rev:
        raise CompactedError(
            f"revision {revision} has been compacted (compacted revision {compact_rev})",
            revision=compact_rev,
        )
    if revision > rev:
        raise FutureRevisionError(
            f"revision {revision} is ahead of the current revision {rev}", revision=rev
        )


def _read_ping(conn: sqlite3.Connection) -> None:
    conn.execute("SELECT 1").fetchone()


def _read_get_latest(conn: sqlite3.Connection, key: bytes) -> KeyValue:
    row = conn.execute(
        "SELECT l.value, c.create_revision, c.id, c.lease FROM current c "
        "JOIN log l ON l.id = c.id WHERE c.name = ?",
        (key,),
    ).fetchone()
    if row is None:
        raise KeyNotFoundError(f"key {key!r} not found", key=key)
    return KeyValue(key, row[0], row[1], row[2], row[3])


def _read_get_at(conn: sqlite3.Connection, key: bytes, revision: int) -> KeyValue:
    conn.execute("BEGIN")
    try:
        rev, compact_rev = schema.read_revisions(conn)
        _check_revision(revision, rev, compact_rev)
        row = conn.execute(
            "SELECT deleted, value, create_revision, id, lease FROM log "
            "WHERE name = ? AND id <= ? ORDER BY id DESC LIMIT 1",
            (key, revision),
        ).fetchone()
    finally:
        conn.execute("COMMIT")
    if row is None or row[0]:
        raise KeyNotFoundError(f"key {key!r} not found at revision {revision}", key=key)
    return KeyValue(key, row[1], row[2], row[3], row[4])


def _name_bounds(column: str, hi: bytes | None) -> str:
    return f"{column} >= ? AND {column} < ?" if hi is not None else f"{column} >= ?"


def _read_range(
    conn: sqlite3.Connection,
    lo: bytes,
    hi: bytes | None,
    limit: int,
    revision: int,
) -> RangeResult:
    bounds: tuple[bytes, ...] = (lo, hi) if hi is not None else (lo,)
    sql_limit = limit if limit > 0 else -1
    conn.execute("BEGIN")
    try:
        rev, compact_rev = schema.read_revisions(conn)
        if revision:
            _check_revision(revision, rev, compact_rev)
        at = revision or rev
        if at >= rev:
            rows = conn.execute(
                "SELECT c.name, l.value, c.create_revision, c.id, c.lease FROM current c "
                f"JOIN log l ON l.id = c.id WHERE {_name_bounds('c.name', hi)} "
                "ORDER BY c.name LIMIT ?",
                (*bounds, sql_limit),
            ).fetchall()
            if limit > 0 and len(rows) >= limit:
                count = conn.execute(
                    f"SELECT count(*) FROM current WHERE {_name_bounds('name', hi)}", bounds
                ).fetchone()[0]
            else:
                count = len(rows)
        else:
            # The newest row at or below `at` of each key, in key order: walks the
            # (name, id) index from `lo` and stops after `limit` live keys.
            rows = conn.execute(
                "SELECT l.name, l.value, l.create_revision, l.id, l.lease FROM log l "
                f"WHERE {_name_bounds('l.name', hi)} AND l.deleted = 0 AND l.id = "
                "(SELECT max(m.id) FROM log m WHERE m.name = l.name AND m.id <= ?) "
                "ORDER BY l.name LIMIT ?",
                (*bounds, at, sql_limit),
            ).fetchall()
            if limit > 0 and len(rows) >= limit:
                count = _count_at(conn, bounds, hi, at, rev)
            else:
                count = len(rows)
    finally:
        conn.execute("COMMIT")
    kvs = tuple(KeyValue(r[0], r[1], r[2], r[3], r[4]) for r in rows)
    return RangeResult(kvs=kvs, revision=at, more=count > len(kvs), count=count)


def _count_at(
    conn: sqlite3.Connection, bounds: tuple[bytes, ...], hi: bytes | None, at: int, rev: int
) -> int:
    """Number of live keys in the range at revision ``at`` (>= the compacted revision).

    Counted as the live keys now, corrected by the keys written after ``at``: a key whose
    first row after ``at`` is not a create existed at ``at``; one that is a create did not.
    Every row above the compacted revision survives compaction, so this only reads the
    history after ``at`` instead of aggregating over all keys in the range.
    """
    now = conn.execute(
        f"SELECT count(*) FROM current WHERE {_name_bounds('name', hi)}", bounds
    ).fetchone()[0]
    # Walk whichever is shorter: the revisions after `at` (rowid range) or the keys of the
    # range (name index); a unary + keeps SQLite off the other index.
    by_id = rev - at < now
    id_col, name_col = ("id", "+name") if by_id else ("+id", "name")
    delta = conn.execute(
        "SELECT coalesce(sum(CASE WHEN f.created = 0 AND c.name IS NULL THEN 1 "
        "WHEN f.created = 1 AND c.name IS NOT NULL THEN -1 ELSE 0 END), 0) "
        f"FROM (SELECT name, min(id) AS first FROM log WHERE {id_col} > ? "
        f"AND {_name_bounds(name_col, hi)} GROUP BY name) g "
        "JOIN log f ON f.id = g.first LEFT JOIN current c ON c.name = g.name",
        (at, *bounds),
    ).fetchone()[0]
    return int(now) + int(delta)


def _read_count(conn: sqlite3.Connection, lo: bytes, hi: bytes | None) -> int:
    bounds: tuple[bytes, ...] = (lo, hi) if hi is not None else (lo,)
    row = conn.execute(
        f"SELECT count(*) FROM current WHERE {_name_bounds('name', hi)}", bounds
    ).fetchone()
    return int(row[0])


def _read_replay(
    conn: sqlite3.Connection,
    lo: bytes,
    hi: bytes | None,
    start: int,
    upper: int,
    limit: int,
) -> tuple[list[WatchEvent], int, int]:
    """Events with ``start <= revision <= upper`` (``upper`` 0: the current revision) under
    the prefix. Returns (events, upper used, last revision examined or 0 if done)."""
    bounds: tuple[bytes, ...] = (lo, hi) if hi is not None else (lo,)
    conn.execute("BEGIN")
    try:
        rev, compact_rev = schema.read_revisions(conn)
        if start < compact_rev:
            raise CompactedError(
                f"watch from revision {start}: compacted (compacted revision {compact_rev})",
                revision=compact_rev,
            )
        if not upper:
            upper = rev
        rows = conn.execute(
            _EVENT_ROWS + f"WHERE l.id >= ? AND l.id <= ? AND {_name_bounds('l.name', hi)} "
            "ORDER BY l.id LIMIT ?",
            (start, upper, *bounds, limit),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    return _events(rows), upper, (rows[-1][0] if len(rows) >= limit else 0)


def _read_tail(
    conn: sqlite3.Connection, start: int, limit: int, durable: int
) -> tuple[list[WatchEvent], int, int, int]:
    """The change feed's read (``--workers``): every event from ``start`` on, at most
    ``limit``, up to the ``durable`` revision (a sibling's commit is read once its fsync
    is done). Returns (events, revision read up to, compacted revision, last revision
    examined or 0 if done). Raises CompactedError when ``start`` was compacted away."""
    conn.execute("BEGIN")
    try:
        rev, compact_rev = schema.read_revisions(conn)
        rev = min(rev, durable)
        if start < compact_rev:
            raise CompactedError(
                f"change feed from revision {start}: compacted (compacted revision {compact_rev})",
                revision=compact_rev,
            )
        rows = conn.execute(
            _EVENT_ROWS + "WHERE l.id >= ? AND l.id <= ? ORDER BY l.id LIMIT ?",
            (start, rev, limit),
        ).fetchall()
    finally:
        conn.execute("COMMIT")
    last = rows[-1][0] if len(rows) >= limit else 0
    return _events(rows), rev, compact_rev, last


#: The log rows :func:`_events` reads, each with its predecessor's value and lease joined
#: (a WHERE clause follows).
_EVENT_ROWS = (
    "SELECT l.id, l.name, l.created, l.deleted, l.create_revision, l.lease, l.value, "
    "l.prev_revision, p.value, p.lease FROM log l "
    "LEFT JOIN log p ON p.id = l.prev_revision "
)


def _events(rows: Sequence[Any]) -> list[WatchEvent]:
    """Watch events of log rows (with their predecessor's value and lease joined)."""
    events: list[WatchEvent] = []
    for rid, name, created, deleted, crev, lease, value, prev_rev, pvalue, please in rows:
        prev = (
            None
            if created or not prev_rev or pvalue is None
            else KeyValue(name, pvalue, crev, prev_rev, please)
        )
        if deleted:
            events.append(WatchEvent("DELETE", KeyValue(name, b"", 0, rid, 0), prev))
        else:
            events.append(WatchEvent("PUT", KeyValue(name, value, crev, rid, lease), prev))
    return events


# --------------------------------------------------------------------------------------------
# Watches (reactor thread)
# --------------------------------------------------------------------------------------------


class SqliteWatch:
    """A running watch on a SqliteStore (implements the ``Watch`` protocol)."""

    def __init__(
        self,
        store: SqliteStore,
        prefix: bytes,
        next_rev: int,
        callback: Callable[[WatchEvent], None],
        replaying: bool,
    ) -> None:
        self._store = store
        self.prefix = prefix
        self._callback = callback
        # Deliver only events with revision >= _next_rev (dedupes replay vs live).
        self._next_rev = next_rev
        self._buffer: list[WatchEvent] | None = [] if replaying else None
        self.active = True
        self.done: Deferred[None] = Deferred(canceller=lambda _: self.cancel())

    def offer(self, event: WatchEvent) -> None:
        """A live event from a commit."""
        if self._buffer is not None:
            self._buffer.append(event)
        elif event.kv.mod_revision >= self._next_rev:
            self._deliver(event)

    def _deliver(self, event: WatchEvent) -> None:
        self._next_rev = event.kv.mod_revision + 1
        try:
            self._callback(event)
        except Exception:
            _log.failure("watch callback for prefix {prefix!r} raised", prefix=self.prefix)

    def replayed(self, events: Sequence[WatchEvent]) -> None:
        for event in events:
            if not self.active:
                return
            if event.kv.mod_revision >= self._next_rev:
                self._deliver(event)

    def go_live(self, upper: int) -> None:
        """Replay reached ``upper``: deliver what arrived meanwhile, then live events."""
        self._next_rev = max(self._next_rev, upper + 1)
        buffered, self._buffer = self._buffer or [], None
        for event in buffered:
            if not self.active:
                return
            if event.kv.mod_revision >= self._next_rev:
                self._deliver(event)

    def cancel(self) -> None:
        """Stop delivery; ``done`` fires with None."""
        if self.active:
            self.active = False
            self._buffer = None
            self._store._remove_watch(self)
        if not self.done.called:
            self.done.callback(None)

    def fail(self, failure: Failure) -> None:
        if self.active:
            self.active = False
            self._buffer = None
            self._store._remove_watch(self)
        if not self.done.called:
            self.done.errback(failure)


# --------------------------------------------------------------------------------------------
# The store
# --------------------------------------------------------------------------------------------


class _ThreadSink:
    """A writer thread's reports, each run on the reactor thread (``callFromThread`` keeps
    their order)."""

    def __init__(self, store: SqliteStore) -> None:
        self._store = store
        self._call = store._reactor.callFromThread

    def opened(self, rev: int, compact_rev: int) -> None:
        self._call(self._store._opened, rev, compact_rev)

    def open_failed(self, error: BaseException) -> None:
        self._call(self._store._open_failed, Failure(error))

    def batch_done(
        self, batch: list[Any], events: list[WatchEvent], rev: int, compact_rev: int, base: int
    ) -> None:
        self._call(self._store._batch_done, batch, events, rev, compact_rev, base)

    def died(self, carried: list[Any]) -> None:
        self._call(self._store._writer_died, carried)

    def finished(self) -> None:
        self._call(self._store._writer_done.callback, None)

    def error(self, message: str) -> None:
        _log.error("{message}", message=message)


class SqliteStore:
    """The embedded revisioned store (implements ``apiserver.storage.interface.Store``).

    ``path`` is the database file (its directory must exist; ``<path>-wal``, ``<path>-shm``
    and ``<path>.lock`` live beside it). ``reactor`` provides threads and callFromThread;
    ``clock`` (default: ``reactor``) runs the TTL sweeper, the periodic compactor and the
    health check timeouts. ``compaction_interval`` 0 disables periodic compaction.

    Maintenance: :meth:`sweep_once` (delete what has expired) every ``sweep_interval``
    seconds, first at once, and :meth:`compact_once` every ``compaction_interval`` seconds
    (first one interval after start), declared by :meth:`maintenance`. With
    ``run_maintenance`` (the default, for use on its own) the store runs them itself from
    :meth:`start` to :meth:`stop`; the server passes False and runs them as child services
    of its tree (``apiserver.service.maintenance``).

    A full disk: writes fail with :class:`NoSpaceError` (logged once, ``on_out_of_space``
    called once, per episode), reads go on, and each new write tries again, so writes resume
    as soon as space is freed; checkpoints wait until the WAL's pages fit (see
    ``_Writer.defer_checkpoints``).

    Capabilities: the writer is this store's own and a commit reaches the watches before its
    writer is answered, so the store knows its committed revision synchronously
    (:meth:`committed_revision`). Watches deliver as commits happen (no pause).

    The writer (``writer``): the same :class:`~apiserver.storage.sqlite.writer.WriterLoop`
    runs on a thread of this process (``"thread"``, the default here: nothing to spawn, and
    tests can reach into it) or in a child process of its own (``"process"``, what the
    server runs: it does not share the interpreter lock with the busy reactor, see
    :mod:`apiserver.storage.sqlite.writer_process`). Either way the ops of each reactor turn
    go to it together and its reports come back to the reactor thread in commit order; if
    it dies, every write it had not answered fails with "sqlite writer stopped" and the
    store is unavailable (``/readyz`` fails) until the server restarts.

    Several workers (``worker=(index, count)``, ``--workers``): every worker process opens
    the one file (a shared lock instead of the exclusive one), takes the write lock
    (``<path>.write-lock``, a kernel lock, so waiting writers wake at once) around each
    transaction, and reads the revision counters inside it, so revisions stay global and
    increasing. Watches follow the log itself (``_tail``: every row after the last
    dispatched revision, in order, so no gap), woken by the committing sibling's datagram
    (:mod:`apiserver.storage.sqlite.feed`) and every ``TAIL_INTERVAL`` seconds, read on the
    reactor thread a page at a time; a writer is answered once its revision was dispatched
    here (at once, without reading the log, when nothing of a sibling came in between).
    :meth:`committed_revision` and :meth:`current_revision` read the file's newest committed
    revision from a counter the writers share
    (:class:`~apiserver.storage.sqlite.feed.SharedRevision`), so the watch cache answers from
    memory once it has caught up, and reads the file while it has not.
    Nothing of this runs with one worker.
    """

    capabilities = StoreCapabilities(committed_revision=True)
    kind = "sqlite"

    def __init__(
        self,
        path: str,
        reactor: Any,
        clock: Any = None,  # IReactorTime
        compaction_interval: float = 300.0,
        sweep_interval: float = 1.0,
        readers: int = 2,
        max_batch: int = MAX_BATCH,
        run_maintenance: bool = True,
        worker: tuple[int, int] | None = None,
        writer: str = "thread",
    ) -> None:
        if writer not in ("thread", "process"):
            raise ValueError(f"writer must be 'thread' or 'process', not {writer!r}")
        self._path = path
        #: Where the writer runs (see "The writer" in the class docstring).
        self._writer_kind = writer
        #: ``(index, count)`` of this worker when ``--workers`` runs several processes on the
        #: one file (see "Several workers" in the class docstring); None: this process is the
        #: only writer.
        self._worker = worker if worker is not None and worker[1] > 1 else None
        self._shared = self._worker is not None
        self._feed: ChangeFeed | None = None
        if self._worker is not None:
            self._feed = ChangeFeed(path, self._worker[0], reactor)
        #: The file's newest committed revision, shared by the workers (opened at start).
        self._shared_rev: SharedRevision | None = None
        self._tail_loop: LoopingCall | None = None
        self._tailing = False
        self._tail_again = False
        #: Committed batches waiting for the tail to dispatch their revision (shared mode).
        self._waiting: list[tuple[int, list[_Op]]] = []
        self._dir = os.path.dirname(os.path.abspath(path))
        self._reactor: Any = reactor
        self._clock: Any = clock if clock is not None else reactor
        #: True from a write refused for want of disk space to the next write that commits.
        self.out_of_space = False
        #: Called once each time the store runs out of space (the server counts it in
        #: ``apiserver_storage_out_of_space_total``).
        self.on_out_of_space: Callable[[], None] | None = None
        self._max_batch = max(1, max_batch)
        self._state = "new"  # new -> starting -> running -> stopping -> stopped
        #: Lists of ops for a writer thread (:meth:`_hand_over`), or ``STOP``.
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        #: Ops submitted in this reactor turn, handed over at its end.
        self._outbox: list[_Op] = []
        #: Gives a list of ops to the writer (the thread's queue or the process's pipe).
        self._deliver: Callable[[list[_Op]], None] = self._queue.put
        self._thread: threading.Thread | None = None
        #: The writer thread's loop (``writer="thread"``).
        self._loop: WriterLoop | None = None
        #: The writer process (``writer="process"``), from start until it ended.
        self._process: WriterProcess | None = None
        self._started: Deferred[None] | None = None
        self._writer_done: Deferred[None] = Deferred()
        self._stopped: Deferred[None] | None = None
        self._readers = ThreadPool(minthreads=0, maxthreads=max(1, readers), name="sqlite-reader")
        self._local = threading.local()
        self._reader_conns: list[sqlite3.Connection] = []
        self._reader_conns_lock = threading.Lock()
        self._rev = 0  # last revision dispatched on the reactor thread
        self._compact_rev = 0
        self._watches: dict[bytes, dict[SqliteWatch, None]] = {}
        self._tasks: list[PeriodicTask] = []
        if sweep_interval > 0:
            self._tasks.append(
                PeriodicTask("ttl-sweeper", sweep_interval, self.sweep_once, now=True)
            )
        if compaction_interval > 0:
            self._tasks.append(PeriodicTask("compaction", compaction_interval, self.compact_once))
        #: The loops the store runs itself (``run_maintenance``), started when it opens.
        self._runners = (
            [PeriodicRunner(t, self._clock) for t in self._tasks] if run_maintenance else []
        )
        self._compactor_seen = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> Deferred[None]:
        if self._state != "new":
            if self._started is not None and self._state in ("starting", "running"):
                return _chain(self._started)
            return defer.fail(UnavailableError(f"store is {self._state}; cannot start again"))
        self._state = "starting"
        self._started = Deferred()
        if self._writer_kind == "process":
            from apiserver.storage.sqlite.writer_process import WriterProcess

            try:
                self._process = WriterProcess.spawn(
                    self, self._reactor, self._path, self._max_batch, self._worker
                )
            except Exception as e:
                self._state = "stopped"
                return defer.fail(UnavailableError(f"sqlite: cannot start its writer: {e}"))
            self._deliver = self._process.send
            return _chain(self._started)
        self._loop = WriterLoop(
            self._path, self._queue, _ThreadSink(self), self._max_batch, self._worker
        )
        self._thread = threading.Thread(
            target=self._loop.run, name=f"sqlite-writer:{os.path.basename(self._path)}"
        )
        self._thread.daemon = True
        self._thread.start()
        return _chain(self._started)

    def _opened(self, rev: int, compact_rev: int) -> None:
        self._rev = rev
        self._compact_rev = compact_rev
        self._readers.start()
        self._state = "running"
        self._compactor_seen = rev
        for runner in self._runners:
            runner.start()
        if self._shared:
            self._shared_rev = SharedRevision(self._path)
            self.committed_revision = self._shared_rev.get  # type: ignore[method-assign]
        if self._feed is not None:
            self._feed.start(self._tail)
            self._tail_loop = LoopingCall(self._tail)
            self._tail_loop.clock = self._clock
            self._tail_loop.start(TAIL_INTERVAL, now=False)
        assert self._started is not None
        self._started.callback(None)

    def _open_failed(self, failure: Failure) -> None:
        self._state = "stopped"
        self._process = None
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        assert self._started is not None
        self._started.errback(failure)
        # Every waiter had it (its own chain): not an unhandled error of this Deferred.
        self._started.addErrback(lambda _: None)

    def stop(self) -> Deferred[None]:
        if self._state in ("new", "stopped"):
            self._state = "stopped"
            return defer.succeed(None)
        if self._stopped is not None:
            return _chain(self._stopped)
        if self._state == "starting":
            assert self._started is not None
            # Let the open finish (or fail), then stop.
            return _chain(self._started).addBoth(lambda _: self.stop())
        self._state = "stopping"
        self._stopped = Deferred()
        for runner in self._runners:
            # Not waited for: a round in progress fails at its next step (the store no longer
            # takes writes) and the runner logs it.
            runner.stop()
        for group in list(self._watches.values()):
            for w in list(group):
                w.cancel()
        if self._feed is not None:
            self._feed.stop()
        if self._tail_loop is not None and self._tail_loop.running:
            self._tail_loop.stop()
        self._hand_over()
        if self._process is not None:
            self._process.close()  # the writer process takes the end of its input as STOP
        else:
            self._queue.put(STOP)
        self._writer_done.addCallback(self._finish_stop)
        return _chain(self._stopped)

    def _finish_stop(self, _: object) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._process = None
        # Committed writes still waiting for the tail are answered: they are on disk.
        waiting, self._waiting = self._waiting, []
        for _, batch in waiting:
            self._answer(batch)
        self._readers.stop()
        with self._reader_conns_lock:
            conns, self._reader_conns = self._reader_conns, []
        for conn in conns:
            conn.close()
        if self._shared_rev is not None:
            self.__dict__.pop("committed_revision", None)
            self._shared_rev.close()
            self._shared_rev = None
        self._state = "stopped"
        assert self._stopped is not None
        self._stopped.callback(None)

    def committed_revision(self) -> int:
        """The newest revision already dispatched to watchers on the reactor thread.

        Synchronous on purpose: the watch cache compares it with its own revision to know it
        is current, and then answers reads from memory (kube-apiserver's consistent reads
        from the cache, with this store's revision in place of etcd's). With several workers
        it is the file's newest committed revision (:class:`SharedRevision`; :meth:`_opened`
        binds its ``get`` in place of this method, so one worker pays nothing for it), which
        this worker's watches may not have reached yet: the cache compares, and reads the
        store while it is behind.
        """
        return self._rev

    def _writer_died(self, carried: list[_Op]) -> None:
        _log.error(
            "sqlite writer {kind} ended unexpectedly; the store is unavailable",
            kind=self._writer_kind,
        )
        if self._state == "running":
            self._state = "failed"
        # Writes no writer will take: ``carried`` (given to the writer and not answered),
        # the queue, and this turn's outbox (this call runs before the turn's hand-over).
        # They are answered rather than left waiting forever.
        stranded = carried + self._outbox
        self._outbox = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not STOP:
                stranded.extend(item)
        for op in stranded:
            op.error = UnavailableError("sqlite writer stopped")
        self._answer(stranded)

    def _batch_done(
        self,
        batch: list[_Op],
        events: list[WatchEvent],
        rev: int,
        compact_rev: int,
        base: int | None = None,
    ) -> None:
        if self.out_of_space and events:
            self.out_of_space = False
            _log.warn("sqlite store {path}: writes accepted again", path=self._path)
        if self._shared:
            # The log, not this batch, is the feed: the sibling's commits before this one
            # must reach the watches first. The writers hear back once their revision was
            # dispatched here, so a read from this worker's cache sees them.
            self._compact_rev = max(self._compact_rev, compact_rev)
            if rev > self._rev and events:
                if base == self._rev and len(events) == rev - base:
                    # Nothing of a sibling lies between what was dispatched and this batch,
                    # which holds every revision after it: these events are the log's next
                    # rows, so they go out without reading them back from the file.
                    self._rev = rev
                    if self._watches:
                        self._dispatch(events)
                    self._answer(batch)
                    self._answer_dispatched()
                    return
                self._waiting.append((rev, batch))
                self._tail()
                return
            self._answer(batch)
            return
        self._rev = max(self._rev, rev)
        self._compact_rev = compact_rev
        if events and self._watches:
            self._dispatch(events)
        self._answer(batch)

    def _answer(self, batch: list[_Op]) -> None:
        for op in batch:
            if op.error is not None:
                if op.error.__class__ is NoSpaceError and not self.out_of_space:
                    self._ran_out_of_space()
                op.deferred.errback(Failure(op.error))
            else:
                op.deferred.callback(op.result)

    # -- the change feed (several workers on one file) ------------------------------------------

    def _tail(self) -> None:
        """Read the log after the last dispatched revision and dispatch it, in order (one
        read at a time; a request during a read runs another right after)."""
        if self._tailing:
            self._tail_again = True
            return
        if self._state != "running":
            return
        self._tailing = True
        self._tail_again = False
        # On the reactor thread, not the reader pool: a page of new rows from the WAL reads
        # in tens of microseconds, less than the two thread hand-offs a pooled read costs
        # (and its GIL convoys), and this read runs after every sibling commit.
        try:
            durable = self._shared_rev.get() if self._shared_rev is not None else self._rev
            result = self._in_reader(_read_tail, (self._rev + 1, TAIL_PAGE, durable))
        except Exception:
            self._tail_failed(Failure())
            return
        self._tailed(result)

    def _tailed(self, result: tuple[list[WatchEvent], int, int, int]) -> None:
        events, rev, compact_rev, last = result
        self._tailing = False
        if self._state != "running":
            return
        self._compact_rev = max(self._compact_rev, compact_rev)
        if events and self._watches:
            self._dispatch([e for e in events if e.kv.mod_revision > self._rev])
        self._rev = max(self._rev, last or rev)
        self._answer_dispatched()
        if last:
            # More than a page behind: the next page after other work had its turn.
            self._reactor.callLater(0, self._tail)
        elif self._tail_again:
            self._tail()

    def _answer_dispatched(self) -> None:
        """Answer the committed batches whose revision is now dispatched here."""
        if self._waiting:
            ready = [w for w in self._waiting if w[0] <= self._rev]
            if ready:
                self._waiting = [w for w in self._waiting if w[0] > self._rev]
                for _, batch in ready:
                    self._answer(batch)

    def _tail_failed(self, failure: Failure) -> None:
        self._tailing = False
        if self._state != "running":
            return
        error = failure.value
        if isinstance(error, CompactedError):
            # This worker fell behind compaction: what it missed is gone, so its watches end
            # with "compacted" (the watch cache lists again) and it follows from now on.
            _log.error("sqlite change feed fell behind compaction: {error}", error=error)
            self._rev = max(self._rev, error.revision)
            for group in list(self._watches.values()):
                for w in list(group):
                    w.fail(Failure(error))
            self._tail()
            return
        _log.failure("sqlite change feed read failed; retried by the periodic tail", failure)

    def _ran_out_of_space(self) -> None:
        """Log once per episode (not per refused write, as a traceback each time would) and
        count it; reads go on, writes are tried again as they come."""
        self.out_of_space = True
        _log.error(
            "sqlite store {path}: the disk is full; writes are refused until space is freed, "
            "reads go on",
            path=self._path,
        )
        if self.on_out_of_space is not None:
            self.on_out_of_space()

    def _submit(self, fn: Callable[..., _T], *args: Any) -> Deferred[_T]:
        if self._state != "running":
            return self._not_running(self._submit, fn, *args)
        op = _Op(fn, args)
        outbox = self._outbox
        outbox.append(op)
        queued = len(outbox)
        if queued == 1:
            self._reactor.callLater(0, self._hand_over)
        elif queued >= HAND_OVER_EVERY and self._process is not None:
            # A long turn's first writes go while it reads the rest (why: _hand_over).
            self._outbox = []
            self._deliver(outbox)
        return op.deferred

    def _hand_over(self) -> None:
        """Give the writer every op submitted since the last hand-over, in one queue item.

        The ops of one reactor turn (every request its ready sockets carried) reach the
        writer together: one wake-up of the writer thread, and one turn of the GIL to it,
        per turn instead of per op, so the reactor loses the GIL to the writer less often
        (measured, bench/RESULTS.md: creates 1.10x with two workers; with one worker no
        change beyond the noise). A sequential client pays one ``callLater(0)`` per write.

        With the writer in a process (no interpreter lock to share), a turn's writes also go
        every :data:`HAND_OVER_EVERY` of them, as they come. Why: with only the turn's end,
        the requests in flight moved as one convoy; the reactor read all of them in one long
        turn, handed them over together, and then idled through the whole batch's commit
        and sync (12-16 % of its time, bench/RESULTS.md), and the writer idled through the
        next long turn. Frames of eight let the writer commit the first while the reactor
        reads the rest; the writer still takes everything that queued during a commit as
        one batch. Measured with one worker (bench/RESULTS.md, "Frames of eight"): the
        reactor idles 7-9.5 % of the time instead of 13-14.5 %, but spends more CPU a
        create (more frames, more wake-ups of the writer), so creates gain little: +2.3 %
        over four interleaved pairs of 15 s runs, 1.15x and 0.99x in two 10-round A/B runs.
        Frames of four cost more than they gained (1.02x).
        """
        ops = self._outbox
        if ops:
            self._outbox = []
            self._deliver(ops)

    # -- reader threads ---------------------------------------------------------------------

    def _reader_conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = schema.connect(self._path, readonly=True)
            self._local.conn = conn
            with self._reader_conns_lock:
                self._reader_conns.append(conn)
        return conn

    def _in_reader(self, fn: Callable[..., _T], args: tuple[Any, ...]) -> _T:
        conn = self._reader_conn()
        try:
            return fn(conn, *args)
        except sqlite3.Error as e:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise _as_storage_error(e) from e

    def _read(self, fn: Callable[..., _T], *args: Any) -> Deferred[_T]:
        if self._state != "running":
            return self._not_running(self._read, fn, *args)
        return deferToThreadPool(self._reactor, self._readers, self._in_reader, fn, args)

    def _not_running(self, call: Callable[..., Deferred[_T]], *args: Any) -> Deferred[_T]:
        """A read or write that came while the store is not running: while it is opening,
        it waits for the open and then runs (or fails as the open failed); otherwise it
        fails with UnavailableError.

        Why wait: the server listens as soon as the store's open has begun (kube-apiserver
        serves while its storage initializes), and a client that reached it in that moment,
        a kubelet reconnecting after a restart, say, got 500 "store is starting" for what a
        moment later it would have been given; with etcd such a request waits for the
        client's connection the same way. The open takes a fraction of a second (the
        writer process's start and the file's), and it is bounded: a writer that cannot
        take the file's lock gives up after a few seconds (``LOCK_GRACE``).
        """
        if self._state == "starting" and self._started is not None:
            return _chain(self._started).addCallback(lambda _: call(*args))
        return defer.fail(UnavailableError(f"store is {self._state}"))

    # -- Store API --------------------------------------------------------------------------

    def current_revision(self) -> Deferred[int]:
        if self._state != "running":
            return self._not_running(self.current_revision)
        shared_rev = self._shared_rev
        if shared_rev is not None:
            # Siblings commit too: the shared counter has the newest (etcd's header revision).
            return defer.succeed(shared_rev.get())
        return defer.succeed(self._rev)

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        _check_key(key)
        if revision:
            return self._read(_read_get_at, key, revision)
        return self._read(_read_get_latest, key)

    def create(self, key: bytes, value: bytes, ttl: int = 0) -> Deferred[KeyValue]:
        _check_key(key)
        return self._submit(_Writer.create, key, bytes(value), ttl, self._expiry(ttl))

    def update(
        self, key: bytes, value: bytes, expected_revision: int, ttl: int = 0
    ) -> Deferred[KeyValue]:
        _check_key(key)
        return self._submit(
            _Writer.update, key, bytes(value), expected_revision, ttl, self._expiry(ttl)
        )

    def delete(self, key: bytes, expected_revision: int = 0) -> Deferred[KeyValue]:
        _check_key(key)
        return self._submit(_Writer.delete, key, expected_revision)

    def range(
        self,
        prefix: bytes,
        start_key: bytes = b"",
        limit: int = 0,
        revision: int = 0,
    ) -> Deferred[RangeResult]:
        _check_key(prefix)
        lo = max(prefix, start_key)
        hi = prefix_end(prefix)
        return self._read(_read_range, lo, hi, max(0, limit), revision)

    def count(self, prefix: bytes) -> Deferred[int]:
        _check_key(prefix)
        return self._read(_read_count, prefix, prefix_end(prefix))

    def watch(
        self,
        prefix: bytes,
        start_revision: int,
        callback: Callable[[WatchEvent], None],
    ) -> SqliteWatch:
        _check_key(prefix)
        if self._state != "running":
            w = SqliteWatch(self, prefix, 0, callback, replaying=False)
            w.active = False
            w.done.errback(UnavailableError(f"store is {self._state}"))
            return w
        if start_revision and start_revision < self._compact_rev:
            w = SqliteWatch(self, prefix, 0, callback, replaying=False)
            w.active = False
            w.done.errback(
                CompactedError(
                    f"watch from revision {start_revision}: compacted "
                    f"(compacted revision {self._compact_rev})",
                    revision=self._compact_rev,
                )
            )
            return w
        # Events up to self._rev have been dispatched; anything later arrives live.
        replay = 0 < start_revision <= self._rev
        next_rev = start_revision if start_revision > 0 else self._rev + 1
        w = SqliteWatch(self, prefix, next_rev, callback, replaying=replay)
        self._watches.setdefault(prefix, {})[w] = None
        if replay:
            self._replay(w, start_revision)
        return w

    def _remove_watch(self, w: SqliteWatch) -> None:
        group = self._watches.get(w.prefix)
        if group is not None:
            group.pop(w, None)
            if not group:
                del self._watches[w.prefix]

    @defer.inlineCallbacks
    def _replay(self, w: SqliteWatch, start: int) -> Any:
        hi = prefix_end(w.prefix)
        upper = 0
        try:
            while w.active:
                events, upper, last = yield self._read(
                    _read_replay, w.prefix, hi, start, upper, REPLAY_PAGE
                )
                w.replayed(events)
                if not last:
                    break
                start = last + 1
        except Exception:
            w.fail(Failure())
            return
        if w.active:
            w.go_live(upper)

    def _dispatch(self, events: list[WatchEvent]) -> None:
        groups = [(p, tuple(ws)) for p, ws in self._watches.items()]
        for event in events:
            key = event.kv.key
            for prefix, ws in groups:
                if key.startswith(prefix):
                    for w in ws:
                        if w.active:
                            w.offer(event)

    def compact(self, revision: int) -> Deferred[None]:
        return defer.ensureDeferred(self._compact(revision))

    async def _compact(self, revision: int) -> None:
        done = self._compact_rev
        while True:
            step = min(revision, done + COMPACT_STEP)
            done = await self._submit(_Writer.compact, step, revision)
            if done >= revision:
                return

    def check_health(self, timeout: float) -> Deferred[None]:
        return self._timed(self._read(_read_ping), timeout)

    def check_ready(self, timeout: float) -> Deferred[None]:
        if self._process is not None:
            alive = self._process.running
        else:
            alive = self._thread is not None and self._thread.is_alive()
        if not alive:
            return defer.fail(UnavailableError(f"sqlite writer {self._writer_kind} is not running"))
        return self._timed(self._read(_read_ping), timeout)

    def db_size(self) -> Deferred[int | None]:
        """The database file and its write-ahead log (two ``stat`` calls, cheap enough for the
        reactor thread)."""
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += os.path.getsize(self._path + suffix)
            except OSError:
                continue
        return defer.succeed(total)

    # -- timers -----------------------------------------------------------------------------

    def _expiry(self, ttl: int) -> float | None:
        if ttl < 0:
            raise ValueError(f"ttl must not be negative, got {ttl}")
        return float(self._clock.seconds()) + ttl if ttl else None

    def maintenance(self) -> Sequence[PeriodicTask]:
        """The TTL sweeper and the periodic compactor, unless the store runs them itself."""
        return () if self._runners else tuple(self._tasks)

    def sweep_once(self) -> Deferred[None]:
        """One TTL sweep: delete every key whose TTL has expired, in batches of
        ``SWEEP_BATCH`` (each a transaction whose deletions the watches see), until none is
        left or the store stops. kube-apiserver leaves expiry to etcd leases; this is what
        the embedded store does instead."""
        return defer.ensureDeferred(self._sweep_all())

    async def _sweep_all(self) -> None:
        while self._state == "running":
            more = await self._submit(_Writer.sweep, float(self._clock.seconds()), SWEEP_BATCH)
            if not more:
                break

    def compact_once(self) -> Deferred[None]:
        """One round of periodic compaction: compact to the revision seen at the previous
        round (at start for the first), so at least one interval of history stays, as
        kube-apiserver's compactor (k8s.io/apiserver/pkg/storage/etcd3/compact.go) does."""
        target, self._compactor_seen = self._compactor_seen, self._rev
        if target <= self._compact_rev:
            return defer.succeed(None)
        return self.compact(target)

    def _timed(self, d: Deferred[_T], timeout: float) -> Deferred[_T]:
        def on_timeout(result: Any, timeout: float) -> Any:
            raise StorageTimeoutError(f"sqlite store did not answer within {timeout}s")

        d.addTimeout(timeout, self._clock, onTimeoutCancel=on_timeout)
        return d


def _chain(d: Deferred[None]) -> Deferred[None]:
    """A new Deferred that fires like ``d`` without changing what ``d``'s other callbacks
    get (several callers may wait for one start or stop)."""
    out: Deferred[None] = Deferred()

    def both(result: Any) -> Any:
        if isinstance(result, Failure):
            out.errback(result)
            # Kept for the next caller's chain (the store consumes it in the end, once every
            # waiter has had it: ``_open_failed``).
            return result
        out.callback(None)
        return result

    d.addBoth(both)
    return out


def _check_key(key: bytes) -> None:
    if not isinstance(key, bytes):
        raise TypeError(f"keys are bytes, got {type(key).__name__}")
