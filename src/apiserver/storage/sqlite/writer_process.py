"""The embedded store's writer in a child process of its own (``SqliteStore(writer="process")``).

Why: a writer thread shares the interpreter lock with the reactor thread. Under load the
reactor holds it most of the time, and every step of a transaction (each statement lets go
of the lock around SQLite and must take it back) waits for the reactor's next switch: a
commit took 1.5-2.3 ms while the reactor was busy against 1.0-1.3 ms while it idled, and
the reactor sat idle 19-24 % of the time with every request waiting in the store
(bench/RESULTS.md, "Why the ratios move, where a create waits, and four experiments"). In a
process of its own the writer runs on its own interpreter, in parallel with the reactor.

The child (:mod:`apiserver.storage.sqlite.writer_child`) runs the same
:class:`~apiserver.storage.sqlite.writer.WriterLoop` a writer thread runs. This module is
the parent's end: :meth:`WriterProcess.send` writes the ops of each hand-over to the child's
standard input as one frame, at once (when the child has answered everything, also before
the turn ends), and the child's reports come back on its standard output, in order, and run
on the reactor thread as the thread's reports do. Writing at once rather than through a
Twisted transport (which writes at the reactor's next poll) was worth 1.37x in creates
(bench/RESULTS.md, "The store's writer in a process of its own"). A frame is a 4-byte
big-endian length and a pickle (both ends are this program, started from the same
interpreter). The child answers the ops in the order they were sent, so the parent only
keeps them in a FIFO and takes as many as each reported batch holds.

Stop: the parent closes the child's input; the child commits what it was sent, reports it,
checkpoints, and exits. If the child dies, every op it had not answered is answered with
"sqlite writer stopped" and the store is unavailable, as when a writer thread dies. If the
server dies, the kernel kills the child (``PR_SET_PDEATHSIG``), so no writer outlives the
server's lock on the file.
"""

from __future__ import annotations

import os
import pickle
import struct
import sys
from collections import deque
from typing import Any

from twisted.internet import error, protocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.storage.interface import UnavailableError

__all__ = ["FRAME_HEAD", "WriterProcess"]

_log = Logger()

#: The length before each frame, both ways.
FRAME_HEAD = struct.Struct("!I")


class WriterProcess(protocol.ProcessProtocol):
    """The parent's end of one writer process (see the module docstring)."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self._buffer = bytearray()
        #: Ops sent and not yet reported, in the order sent (the order the child answers).
        self._sent: deque[Any] = deque()
        #: Why the child could not open the store (its ``open_failed`` report).
        self._open_error: BaseException | None = None
        #: From the spawn until the child ended.
        self.running = True
        self.transport: Any = None
        #: The write end of the child's standard input (ours, not Twisted's: see :meth:`send`).
        self._fd = -1
        #: What the pipe did not take yet (written when it is writable again).
        self._unsent = bytearray()
        self._closing = False
        self._reactor: Any = None

    @classmethod
    def spawn(
        cls,
        store: Any,
        reactor: Any,
        path: str,
        max_batch: int,
        worker: tuple[int, int] | None,
    ) -> WriterProcess:
        """Start the writer process of ``store`` on ``path`` (its reports go to the store)."""
        proto = cls(store)
        proto._reactor = reactor
        index, count = worker if worker is not None else (0, 1)
        env = dict(os.environ)
        # The child imports this package from where the server imported it.
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
        args = [
            sys.executable,
            "-m",
            "apiserver.storage.sqlite.writer_child",
            path,
            str(max_batch),
            str(index),
            str(count),
            str(os.getpid()),
        ]
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        try:
            reactor.spawnProcess(
                proto, sys.executable, args, env=env, childFDs={0: read_end, 1: "r", 2: 2}
            )
        except BaseException:
            os.close(write_end)
            raise
        finally:
            os.close(read_end)
        os.set_blocking(write_end, False)
        proto._fd = write_end
        return proto

    def send(self, ops: list[Any]) -> None:
        """Give ``ops`` to the child, in one frame, written to the pipe at once.

        At once, not through a Twisted transport: a transport's write waits for the next
        poll of the reactor, which comes after every other socket that poll finds ready has
        been served, so the writer would wait up to a whole reactor turn for each batch.
        """
        data = pickle.dumps([(op.fn.__name__, op.args) for op in ops], pickle.HIGHEST_PROTOCOL)
        self._sent.extend(ops)
        frame = FRAME_HEAD.pack(len(data)) + data
        if self._unsent or self._fd < 0:
            self._unsent += frame
            return
        try:
            written = os.write(self._fd, frame)
        except BlockingIOError:
            written = 0
        except OSError:
            return  # the child is gone: processEnded answers what it was sent
        if written < len(frame):
            self._unsent += frame[written:]
            self._reactor.addWriter(self)

    def close(self) -> None:
        """No more ops: the child finishes what it was sent and exits."""
        self._closing = True
        if not self._unsent:
            self._close_pipe()

    def _close_pipe(self) -> None:
        if self._fd >= 0:
            if self._unsent:
                self._reactor.removeWriter(self)
                self._unsent.clear()
            os.close(self._fd)
            self._fd = -1

    # -- IWriteDescriptor of the pipe, while it holds what it could not take at once ----------

    def fileno(self) -> int:
        return self._fd

    def doWrite(self) -> None:
        try:
            written = os.write(self._fd, self._unsent)
        except BlockingIOError:
            return None
        except OSError:
            self._close_pipe()
            return None
        del self._unsent[:written]
        if not self._unsent:
            self._reactor.removeWriter(self)
            if self._closing:
                self._close_pipe()
        return None

    def connectionLost(self, reason: Failure) -> None:
        self._close_pipe()

    def logPrefix(self) -> str:
        return "sqlite-writer-pipe"

    # -- the child's reports ------------------------------------------------------------------

    def outReceived(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        pos, size = 0, len(buf)
        while size - pos >= 4:
            (length,) = FRAME_HEAD.unpack_from(buf, pos)
            end = pos + 4 + length
            if end > size:
                break
            report = pickle.loads(bytes(buf[pos + 4 : end]))
            pos = end
            self._report(report)
        del buf[:pos]

    def _report(self, report: tuple[Any, ...]) -> None:
        kind = report[0]
        store = self._store
        if kind == "done":
            _, results, events, rev, compact_rev, base = report
            sent = self._sent
            batch = [sent.popleft() for _ in range(len(results))]
            for op, (result, err) in zip(batch, results, strict=True):
                op.result, op.error = result, err
            store._batch_done(batch, events, rev, compact_rev, base)
            if not sent and store._outbox:
                # The child is idle: this turn's writes so far go now, not at the turn's end.
                store._hand_over()
        elif kind == "opened":
            store._opened(report[1], report[2])
        elif kind == "open_failed":
            self._open_error = report[1]
        elif kind == "error":
            _log.error("{message}", message=report[1])
        elif kind == "died":
            _log.error("sqlite writer process: its loop failed: {error}", error=report[1])

    def processEnded(self, reason: Failure) -> None:
        self.running = False
        self._close_pipe()
        store = self._store
        stranded = list(self._sent)
        self._sent.clear()
        if store._state == "starting":
            error_ = self._open_error or UnavailableError(
                f"sqlite writer process ended before it opened the store: {reason.value}"
            )
            store._open_failed(Failure(error_))
            return
        if stranded or store._state != "stopping" or not reason.check(error.ProcessDone):
            if not reason.check(error.ProcessDone):
                _log.error("sqlite writer process: {reason}", reason=reason.value)
            store._writer_died(stranded)
        store._writer_done.callback(None)
