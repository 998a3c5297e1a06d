"""The change feed between worker processes sharing one SQLite store (``--workers``).

Every worker commits to the one database file, so a worker's watch cache must also learn of
the commits of its siblings. After each commit that wrote something the committing writer
sends one datagram (no payload that matters: "the log moved") to each sibling's
socket; a sibling that receives it reads the log rows after the last revision it dispatched
(``SqliteStore._tail``), so events always come out of the log itself, in revision order and
without gaps, whatever datagram was lost or merged. A periodic tail in the store catches a
commit whose notice was lost (a sibling restarting, a full socket buffer).

Sockets are ``AF_UNIX`` datagram sockets in the abstract namespace (Linux), named after the
database file's real path and the worker index, so workers of one server find each other
without files to clean up, and the servers of two data directories never talk. This plays
the part etcd's watch stream plays for several kube-apiservers sharing one etcd
(k8s.io/apiserver/pkg/storage/etcd3/watcher.go): the source of truth is the revision log, the
notice only says when to read it.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import mmap
import os
import socket
from collections.abc import Callable
from typing import Any

__all__ = ["ChangeFeed", "FeedNotice", "SharedRevision", "feed_address"]

#: Datagrams drained per wake-up before the tail is asked for (the rest wait for the next).
_DRAIN = 64


def feed_address(db_path: str, index: int) -> bytes:
    """The abstract socket address of worker ``index`` of the store at ``db_path``."""
    digest = hashlib.sha256(os.path.realpath(db_path).encode()).hexdigest()[:24]
    return b"\0apiserver-feed-" + digest.encode() + b"-" + str(index).encode()


class FeedNotice:
    """The sending end of the feed: :meth:`notify` tells worker ``index``'s siblings the log
    moved. The committing writer calls it (on its thread, or in its writer process):
    ``sendto`` on a non-blocking datagram socket is one system call per sibling and never
    waits."""

    def __init__(self, db_path: str, index: int, count: int) -> None:
        self._peers = tuple(feed_address(db_path, i) for i in range(count) if i != index)
        send = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        send.setblocking(False)
        self._send: socket.socket | None = send

    def notify(self) -> None:
        """Tell every sibling the log moved (a sibling not listening is skipped)."""
        send = self._send
        if send is None:
            return
        for peer in self._peers:
            try:
                send.sendto(b"!", peer)
            except OSError:
                pass  # not started yet, restarting, or its buffer is full: its tail catches up

    def close(self) -> None:
        if self._send is not None:
            self._send.close()
            self._send = None


class ChangeFeed:
    """One worker's receiving end of the feed: a socket its siblings' :class:`FeedNotice`
    writes to. ``on_change`` runs on the reactor thread when a notice arrives."""

    def __init__(self, db_path: str, index: int, reactor: Any) -> None:
        self._reactor = reactor
        self._own = feed_address(db_path, index)
        self._sock: socket.socket | None = None
        self._on_change: Callable[[], None] | None = None

    def start(self, on_change: Callable[[], None]) -> None:
        """Bind the worker's socket and read notices on the reactor."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        try:
            sock.bind(self._own)
        except OSError:
            # A previous incarnation of this worker may linger for a moment after a kill;
            # the periodic tail still follows the log, only with more latency.
            sock.close()
            # Imported here: the writer process imports this module without Twisted.
            from twisted.logger import Logger

            Logger().warn("store change feed: cannot bind its socket; following by polling")
        else:
            self._sock = sock
            self._on_change = on_change
            self._reactor.addReader(self)

    def stop(self) -> None:
        if self._sock is not None:
            self._reactor.removeReader(self)
            self._sock.close()
            self._sock = None

    # -- IReadDescriptor --------------------------------------------------------------------

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    def doRead(self) -> None:
        sock = self._sock
        if sock is None:
            return
        for _ in range(_DRAIN):
            try:
                sock.recv(16)
            except OSError:
                break
        if self._on_change is not None:
            self._on_change()

    def connectionLost(self, reason: object) -> None:
        self._sock = None

    def logPrefix(self) -> str:
        return "store-change-feed"


class SharedRevision:
    """The newest committed revision of the file, readable without a system call.

    An 8-byte counter in a memory-mapped file beside the database (``<path>.rev``): the
    committing writer stores its revision there once its commit is on disk (the fsync after
    the write lock, see ``SqliteStore``) and before any caller hears of the write; every
    worker reads it synchronously. Every revision up to it is durable: a commit's fsync
    also covers every commit before it in the log. With it a worker's watch cache can prove
    itself current (``StoreCapabilities.committed_revision``: cache revision >= this) and
    answer reads from memory, as a lone server does, instead of reading the file for every
    get. The counter is one aligned 64-bit word, written and read by single machine
    instructions (ctypes ``c_uint64`` over the mapping), so a reader never sees half of it.
    A crash between COMMIT and the store leaves the counter behind only by a write nobody
    was told of; the next commit or open moves it on.
    """

    def __init__(self, db_path: str) -> None:
        fd = os.open(db_path + ".rev", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            if os.fstat(fd).st_size < 8:
                os.ftruncate(fd, 8)
            self._map = mmap.mmap(fd, 8)
        except BaseException:
            os.close(fd)
            raise
        #: Kept open: its kernel lock makes :meth:`advance`'s compare-and-store atomic
        #: between processes.
        self._fd = fd
        self._word = ctypes.c_uint64.from_buffer(self._map)

    def get(self) -> int:
        return int(self._word.value)

    def advance(self, revision: int) -> None:
        """Store ``revision`` unless the counter is already past it (the writers' syncer
        threads, after their commit is on disk; two processes may race, so the compare and
        the store run under the file's lock)."""
        word = self._word
        if revision <= word.value:
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            if revision > word.value:
                word.value = revision
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        del self._word
        self._map.close()
        os.close(self._fd)
