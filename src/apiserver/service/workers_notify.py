"""systemd's ``Type=notify`` for the supervisor of ``--workers``.

systemd listens to the main process only (``NotifyAccess=main`` in etc/apiserver.service),
and that is the supervisor, which serves nothing. So each worker gets a ``$NOTIFY_SOCKET``
of its own that the supervisor listens on (an abstract ``AF_UNIX`` datagram socket named
after the supervisor's pid and the worker index): the worker's ordinary
:mod:`apiserver.service.sdnotify` service sends ``READY=1`` there once its ``/readyz`` first
passes, and the supervisor sends systemd ``READY=1`` once every worker has. ``STOPPING=1``
goes to systemd when the supervisor's graceful shutdown begins; ``WATCHDOG=1`` is sent from
the supervisor's reactor every ``$WATCHDOG_USEC / 2`` (a dead worker is the supervisor's to
restart, a stuck supervisor is systemd's).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from apiserver.service.sdnotify import Notifier, watchdog_interval

__all__ = ["NotifyRelay", "notify_relay"]

log = Logger()


class _Inbox:
    """Worker ``index``'s notification socket, read on the reactor."""

    def __init__(self, relay: NotifyRelay, index: int, sock: socket.socket) -> None:
        self.relay = relay
        self.index = index
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def doRead(self) -> None:
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return
            self.relay.received(self.index, data)

    def connectionLost(self, reason: object) -> None:
        return None

    def logPrefix(self) -> str:
        return f"worker-{self.index}-notify"


class NotifyRelay:
    """Collects the workers' ``READY=1`` and speaks for them to systemd (module docstring)."""

    def __init__(
        self,
        systemd: Notifier,
        count: int,
        reactor: Any,
        *,
        watchdog: float | None = None,
        pid: int | None = None,
    ) -> None:
        self.systemd = systemd
        self.count = count
        self._reactor = reactor
        self._watchdog = watchdog
        self._loop: LoopingCall | None = None
        self._name = f"apiserver-notify-{pid if pid is not None else os.getpid()}"
        self._inboxes: list[_Inbox] = []
        #: Worker indexes that said READY=1 since they were last started.
        self.ready: set[int] = set()
        self.announced = False

    def address(self, index: int) -> str:
        """The ``$NOTIFY_SOCKET`` of worker ``index`` (``@`` marks the abstract namespace)."""
        return f"@{self._name}-{index}"

    def environment(self, index: int) -> Mapping[str, str]:
        return {"NOTIFY_SOCKET": self.address(index)}

    def start(self) -> None:
        self.systemd.open()
        for index in range(self.count):
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            sock.setblocking(False)
            sock.bind(b"\0" + self.address(index)[1:].encode())
            inbox = _Inbox(self, index, sock)
            self._inboxes.append(inbox)
            self._reactor.addReader(inbox)
        self.systemd.send(f"STATUS=starting {self.count} workers")
        if self._watchdog:
            self._loop = LoopingCall(self.systemd.send, "WATCHDOG=1")
            self._loop.clock = self._reactor
            self._loop.start(self._watchdog, now=True)

    def received(self, index: int, data: bytes) -> None:
        if b"READY=1" in data.split(b"\n"):
            self.ready.add(index)
            if len(self.ready) == self.count and not self.announced:
                self.announced = True
                self.systemd.send("READY=1", f"STATUS=ready: {self.count} workers")

    def worker_ended(self, index: int) -> None:
        self.ready.discard(index)

    def stopping(self) -> None:
        self.systemd.send("STOPPING=1")

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        for inbox in self._inboxes:
            self._reactor.removeReader(inbox)
            inbox.sock.close()
        self._inboxes = []
        self.systemd.close()


def notify_relay(environ: Mapping[str, str], count: int, reactor: Any) -> NotifyRelay | None:
    """The relay when ``$NOTIFY_SOCKET`` is set, else None."""
    address = environ.get("NOTIFY_SOCKET", "")
    if not address:
        return None
    return NotifyRelay(
        Notifier(address), count, reactor, watchdog=watchdog_interval(environ, os.getpid())
    )
