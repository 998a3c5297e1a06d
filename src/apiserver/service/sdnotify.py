"""Tell systemd when the server is ready, alive and stopping (``Type=notify``, ``WatchdogSec=``).

The protocol is sd_notify(3): newline-separated ``KEY=VALUE`` assignments in one datagram on
the ``AF_UNIX`` socket named by ``$NOTIFY_SOCKET`` (a path, or an abstract-namespace address
written with a leading ``@``). It is a handful of lines, written here rather than taken from a
library: PyPI's ``sdnotify`` (0.3.2, its last release, August 2017) connects a blocking socket
when constructed and hides every error behind a bare ``except:``, and ``systemd-python`` needs
libsystemd's headers and a compiler to install. Here the socket is non-blocking (a full queue
drops a message rather than stalling the reactor), opened when the service starts, and a failed
send is logged; the watchdog pings go through the injected clock.

What is sent, and when:

``STATUS=store ready``
    once the store (and the watch cache, if any) is up.
``STATUS=serving on <address>``
    when this service starts: it is the last child of the tree, after the listener.
``READY=1`` (with ``STATUS=ready``)
    once ``/readyz`` first passes, computed exactly as the endpoint computes it
    (:func:`apiserver.healthz.render_endpoint`; the registry's ``has_been_ready``, Go's
    ``HasBeenReady`` of k8s.io/apiserver/pkg/server/healthz.go). Nobody may be polling
    ``/readyz`` while systemd waits, so this service runs the readyz checks itself every
    :data:`PROBE_INTERVAL` seconds until they first pass (a client's passing ``/readyz``
    counts too).
``STOPPING=1``
    when the graceful shutdown begins (the lifecycle's ``on_initiated``, the moment readyz
    starts failing), or when the tree stops without one.
``WATCHDOG=1``
    every ``$WATCHDOG_USEC / 2`` from the reactor, as sd_watchdog_enabled(3) advises, when
    ``$WATCHDOG_USEC`` is set and ``$WATCHDOG_PID``, if set, is this process: a stuck reactor
    stops pinging and systemd restarts the service.

The service is built only when ``$NOTIFY_SOCKET`` is set (:func:`notify_service`); building it
opens nothing, the socket is opened in ``startService`` and closed in ``stopService``.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from apiserver.healthz import HealthRegistry, render_endpoint

log = Logger()

#: Seconds between the service's own readyz probes, until the first one passes.
PROBE_INTERVAL = 0.5


def socket_address(value: str) -> str | bytes:
    """``$NOTIFY_SOCKET`` as ``sendto`` wants it: ``@name`` is the abstract name ``\\0name``."""
    if value.startswith("@"):
        return b"\0" + value[1:].encode()
    return value


class Notifier:
    """Sends sd_notify(3) messages to one socket; a failed send is logged, never raised
    (systemd going away must not take the server down), and only the first of a run of
    failures is logged (the watchdog would repeat it several times a second)."""

    def __init__(self, address: str) -> None:
        self.address = socket_address(address)
        self._sock: socket.socket | None = None
        self._failing = False

    def open(self) -> None:
        if self._sock is None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
            # A full receive queue must not block the reactor: that datagram is dropped.
            sock.setblocking(False)
            self._sock = sock

    def close(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    def send(self, *assignments: str) -> None:
        if self._sock is None:
            return
        try:
            self._sock.sendto("\n".join(assignments).encode(), self.address)
        except OSError as error:
            if not self._failing:
                self._failing = True
                log.warn(
                    "sd_notify {message!r} not sent: {error}", message=assignments, error=error
                )
        else:
            self._failing = False


def watchdog_interval(environ: Mapping[str, str], pid: int) -> float | None:
    """Seconds between ``WATCHDOG=1`` pings: half of ``$WATCHDOG_USEC`` (sd_watchdog_enabled(3)),
    or None when the watchdog is off or meant for another process (``$WATCHDOG_PID``)."""
    usec = environ.get("WATCHDOG_USEC", "")
    watchdog_pid = environ.get("WATCHDOG_PID", "")
    try:
        if not usec or int(usec) <= 0:
            return None
        if watchdog_pid and int(watchdog_pid) != pid:
            return None
    except ValueError:
        log.warn(
            "ignoring WATCHDOG_USEC={usec!r} WATCHDOG_PID={pid!r}", usec=usec, pid=watchdog_pid
        )
        return None
    return int(usec) / 2e6


class SystemdNotifyService(Service):
    """The last child of the tree: readiness, status, watchdog and stopping for systemd."""

    name = "sd-notify"

    def __init__(
        self,
        address: str,
        clock: IReactorTime,
        health: HealthRegistry,
        *,
        storage_ready: Callable[[], Deferred[None]],
        serving_address: Callable[[], str],
        watchdog: float | None = None,
        probe_interval: float = PROBE_INTERVAL,
    ) -> None:
        self.notifier = Notifier(address)
        self.clock = clock
        self.health = health
        self.storage_ready = storage_ready
        self.serving_address = serving_address
        self.watchdog = watchdog
        self.probe_interval = probe_interval
        self.ready = False
        self.stopping_sent = False
        self._watchdog_loop: LoopingCall | None = None
        self._probe_loop: LoopingCall | None = None
        self._probing: Deferred[Any] | None = None

    def startService(self) -> None:
        super().startService()
        self.notifier.open()
        if self.watchdog is not None:
            loop = self._watchdog_loop = LoopingCall(self.notifier.send, "WATCHDOG=1")
            loop.clock = self.clock
            loop.start(self.watchdog, now=True)
        self.storage_ready().addCallback(self._status, "STATUS=store ready")
        self.notifier.send(f"STATUS=serving on {self.serving_address()}")
        # has_been_ready fires once, at the first passing readyz: a client's or our probe's.
        self.health.has_been_ready.addCallback(self._ready)
        if not self.ready:
            probe = self._probe_loop = LoopingCall(self._probe)
            probe.clock = self.clock
            probe.start(self.probe_interval, now=True)

    def _status(self, _: object, line: str) -> None:
        if self.running:
            self.notifier.send(line)

    def _probe(self) -> None:
        if self._probing is not None or self.ready:
            return
        probing = self._probing = render_endpoint(self.health, "readyz", {})

        def done(_: object) -> None:
            self._probing = None

        probing.addBoth(done)

    def _ready(self, result: None) -> None:
        if self.ready or not self.running:
            return result
        self.ready = True
        self._stop_probe()
        log.info("readyz passed: notifying systemd READY=1")
        self.notifier.send("READY=1", "STATUS=ready")
        return result

    def _stop_probe(self) -> None:
        probe, self._probe_loop = self._probe_loop, None
        if probe is not None and probe.running:
            probe.stop()

    def stopping(self) -> None:
        """The graceful shutdown begins (``Lifecycle.on_initiated``)."""
        if self.stopping_sent:
            return
        self.stopping_sent = True
        self.notifier.send("STOPPING=1", "STATUS=shutting down")

    def stopService(self) -> None:
        super().stopService()
        self.stopping()
        self._stop_probe()
        loop, self._watchdog_loop = self._watchdog_loop, None
        if loop is not None and loop.running:
            loop.stop()
        probing, self._probing = self._probing, None
        if probing is not None:
            probing.cancel()
        self.notifier.close()


def notify_service(
    environ: Mapping[str, str],
    clock: IReactorTime,
    health: HealthRegistry,
    *,
    storage_ready: Callable[[], Deferred[None]],
    serving_address: Callable[[], str],
    pid: Callable[[], int] = os.getpid,
) -> SystemdNotifyService | None:
    """The service when ``$NOTIFY_SOCKET`` is set in ``environ``, else None."""
    address = environ.get("NOTIFY_SOCKET", "")
    if not address:
        return None
    return SystemdNotifyService(
        address,
        clock,
        health,
        storage_ready=storage_ready,
        serving_address=serving_address,
        watchdog=watchdog_interval(environ, pid()),
    )
