"""The writer process's own side: ``python -m apiserver.storage.sqlite.writer_child PATH
MAX_BATCH INDEX COUNT PARENT_PID`` (started by :mod:`apiserver.storage.sqlite.writer_process`,
whose docstring tells why and describes the frames).

A reader thread turns each frame of standard input into a list of
:class:`~apiserver.storage.sqlite.writer.Work` for the queue the
:class:`~apiserver.storage.sqlite.writer.WriterLoop` takes its batches from, exactly as the
store's hand-over feeds a writer thread; the end of the input is the stop marker. The loop's
reports are written to standard output, one frame each (the reports of the writer and of
the syncer thread under one lock, so frames never mix).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import queue
import signal
import sys
import threading
from typing import Any, BinaryIO

from apiserver.storage.interface import StorageError, UnavailableError, WatchEvent
from apiserver.storage.sqlite.writer import (
    MAX_BATCH,
    OPERATIONS,
    STOP,
    Work,
    WriterLoop,
)

#: The length before each frame (as ``writer_process.FRAME_HEAD``, not imported from there:
#: that module brings Twisted, which this process does not need).
_HEAD_SIZE = 4

_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """Be killed when the server dies (Linux), so no writer outlives the server."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass
    if os.getppid() != parent:
        os._exit(1)  # the server died before the line above took effect


class PipeSink:
    """A :class:`~apiserver.storage.sqlite.writer.WriterSink` that writes each report as a
    frame to the server."""

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._lock = threading.Lock()

    def _send(self, report: tuple[Any, ...]) -> None:
        data = pickle.dumps(report, pickle.HIGHEST_PROTOCOL)
        with self._lock:
            self._out.write(len(data).to_bytes(_HEAD_SIZE, "big") + data)
            self._out.flush()

    def opened(self, rev: int, compact_rev: int) -> None:
        self._send(("opened", rev, compact_rev))

    def open_failed(self, error: BaseException) -> None:
        self._send(("open_failed", _portable(error)))

    def batch_done(
        self, batch: list[Work], events: list[WatchEvent], rev: int, compact_rev: int, base: int
    ) -> None:
        results = [(op.result, op.error) for op in batch]
        try:
            self._send(("done", results, events, rev, compact_rev, base))
        except (pickle.PicklingError, TypeError, AttributeError):
            # An error that does not pickle: its message, as the store's own error type.
            results = [(r, None if e is None else _portable(e)) for r, e in results]
            self._send(("done", results, events, rev, compact_rev, base))

    def died(self, carried: list[Work]) -> None:
        error = sys.exc_info()[1]
        self._send(("died", f"{error.__class__.__name__}: {error}" if error else "unknown"))

    def finished(self) -> None:
        pass  # the server learns it from the exit

    def error(self, message: str) -> None:
        self._send(("error", message))


def _portable(error: BaseException) -> BaseException:
    """``error`` if it pickles, else a StorageError with its message."""
    try:
        pickle.dumps(error)
    except Exception:
        kind = UnavailableError if isinstance(error, OSError) else StorageError
        return kind(f"sqlite: {error.__class__.__name__}: {error}")
    return error


def _read_ops(inp: BinaryIO, source: queue.SimpleQueue[Any]) -> None:
    """Frames of ops from the server into ``source``; the stop marker at the end of input."""
    try:
        while True:
            head = inp.read(_HEAD_SIZE)
            if len(head) < _HEAD_SIZE:
                return
            length = int.from_bytes(head, "big")
            data = inp.read(length)
            if len(data) < length:
                return
            source.put([Work(OPERATIONS[name], args) for name, args in pickle.loads(data)])
    finally:
        source.put(STOP)


def main(argv: list[str]) -> int:
    path, max_batch, index, count, parent = argv
    _die_with(int(parent))
    # Signals are the server's business: a Ctrl-C in a terminal reaches the whole process
    # group, and the writer must finish what it was sent (its input ends) rather than die.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # Reports go to a private copy of standard output; anything else printed goes to stderr.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    source: queue.SimpleQueue[Any] = queue.SimpleQueue()
    reader = threading.Thread(
        target=_read_ops, args=(os.fdopen(0, "rb"), source), name="ops", daemon=True
    )
    reader.start()
    workers = int(count)
    loop = WriterLoop(
        path,
        source,
        PipeSink(out),
        int(max_batch) or MAX_BATCH,
        (int(index), workers) if workers > 1 else None,
    )
    loop.run()
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
