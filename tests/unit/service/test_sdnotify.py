"""The systemd notification service on a fake clock, sending to a real datagram socket.

sd_notify(3): ``READY=1`` once readyz first passes, ``STATUS=`` lines, ``STOPPING=1`` when
the graceful shutdown begins, ``WATCHDOG=1`` every ``$WATCHDOG_USEC / 2``.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.unit.service.test_service_tree import ORDER, StubStore, keep_h2_class, make_config
from tests.unit.unit_helpers import result_of
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel, capturedLogs, formatEvent

from apiserver.healthz import HealthCheck, HealthCheckError, HealthRegistry, render_endpoint
from apiserver.server import Server
from apiserver.service.sdnotify import (
    SystemdNotifyService,
    notify_service,
    socket_address,
    watchdog_interval,
)

__all__ = ["keep_h2_class"]  # a fixture of the service tree's tests, used here too


class Receiver:
    """The test's end of ``$NOTIFY_SOCKET``."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock = sock
        self.address = address

    def messages(self) -> list[str]:
        out = []
        while True:
            try:
                out.append(self.sock.recv(4096).decode())
            except BlockingIOError:
                return out


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    path = str(tmp_path / "notify")
    if len(path) > 100:  # sun_path holds 108 bytes
        pytest.skip("temporary path too long for an AF_UNIX address")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.setblocking(False)
    yield Receiver(sock, path)
    sock.close()


class Ready:
    """A readyz check the test flips."""

    def __init__(self) -> None:
        self.passing = False
        self.calls = 0

    def check(self) -> None:
        self.calls += 1
        if not self.passing:
            raise HealthCheckError("not yet")


def make(
    receiver: Receiver,
    clock: Clock,
    watchdog: float | None = None,
) -> tuple[SystemdNotifyService, Ready, HealthRegistry, Deferred[None]]:
    ready = Ready()
    health = HealthRegistry(clock, 0)
    health.add(HealthCheck("fake", ready.check))
    storage: Deferred[None] = Deferred()
    service = SystemdNotifyService(
        receiver.address,
        clock,
        health,
        storage_ready=lambda: storage,
        serving_address=lambda: "127.0.0.1:6443",
        watchdog=watchdog,
        probe_interval=0.5,
    )
    return service, ready, health, storage


def test_ready_only_once_readyz_passes(receiver: Receiver) -> None:
    clock = Clock()
    service, ready, _, storage = make(receiver, clock)
    service.startService()
    assert receiver.messages() == ["STATUS=serving on 127.0.0.1:6443"]
    storage.callback(None)
    assert receiver.messages() == ["STATUS=store ready"]
    for _ in range(4):
        clock.advance(0.5)
    assert ready.calls == 5  # probed now and every half second, as readyz would run it
    assert receiver.messages() == []
    ready.passing = True
    clock.advance(0.5)
    assert receiver.messages() == ["READY=1\nSTATUS=ready"]
    clock.advance(5)
    assert ready.calls == 6  # the probe stopped once ready
    assert receiver.messages() == []
    service.stopService()
    assert clock.getDelayedCalls() == []


def test_a_clients_passing_readyz_counts(receiver: Receiver) -> None:
    clock = Clock()
    service, _, health, _ = make(receiver, clock)
    service.startService()
    receiver.messages()
    health.mark_ready()  # what render_endpoint does on a passing /readyz
    assert receiver.messages() == ["READY=1\nSTATUS=ready"]
    assert clock.getDelayedCalls() == []
    service.stopService()


def test_stopping_sent_once(receiver: Receiver) -> None:
    clock = Clock()
    service, _, _, _ = make(receiver, clock)
    service.startService()
    receiver.messages()
    service.stopping()
    service.stopping()
    assert receiver.messages() == ["STOPPING=1\nSTATUS=shutting down"]
    service.stopService()
    assert receiver.messages() == []


def test_stop_without_graceful_shutdown_says_stopping(receiver: Receiver) -> None:
    clock = Clock()
    service, _, _, storage = make(receiver, clock, watchdog=1.0)
    service.startService()
    receiver.messages()
    service.stopService()
    assert receiver.messages() == ["STOPPING=1\nSTATUS=shutting down"]
    assert clock.getDelayedCalls() == []
    storage.callback(None)  # late: nothing more is sent, and the socket is closed
    clock.advance(10)
    assert receiver.messages() == []


def test_watchdog_pings_on_the_clock(receiver: Receiver) -> None:
    clock = Clock()
    service, _, _, _ = make(receiver, clock, watchdog=0.2)
    service.startService()
    assert receiver.messages() == ["WATCHDOG=1", "STATUS=serving on 127.0.0.1:6443"]
    clock.advance(0.1)
    assert receiver.messages() == []
    clock.advance(0.1)
    assert receiver.messages() == ["WATCHDOG=1"]
    clock.pump([0.2, 0.2])
    assert receiver.messages() == ["WATCHDOG=1", "WATCHDOG=1"]
    service.stopService()
    receiver.messages()
    clock.advance(1)
    assert receiver.messages() == []


def test_abstract_namespace_address() -> None:
    name = f"apiserver-test-{uuid.uuid4().hex}"
    assert socket_address("@" + name) == b"\0" + name.encode()
    assert socket_address("/run/systemd/notify") == "/run/systemd/notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.setblocking(False)
    try:
        clock = Clock()
        service, _, _, _ = make(Receiver(sock, "@" + name), clock)
        service.startService()
        assert Receiver(sock, "").messages() == ["STATUS=serving on 127.0.0.1:6443"]
        service.stopService()
    finally:
        sock.close()


def test_a_missing_socket_is_logged_once_not_raised(tmp_path: Path) -> None:
    clock = Clock()
    receiver = Receiver(socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM), str(tmp_path / "gone"))
    try:
        service, _, health, _ = make(receiver, clock, watchdog=1.0)
        with capturedLogs() as events:
            service.startService()
            health.mark_ready()
            clock.pump([1.0] * 5)
            service.stopService()
        assert service.ready
        warnings = [e for e in events if e["log_level"] == LogLevel.warn]
        assert len(warnings) == 1, events
        assert "WATCHDOG=1" in formatEvent(warnings[0])
    finally:
        receiver.sock.close()


def test_built_only_with_notify_socket() -> None:
    clock = Clock()
    health = HealthRegistry(clock, 0)

    def build(env: dict[str, str]) -> SystemdNotifyService | None:
        return notify_service(
            env,
            clock,
            health,
            storage_ready=Deferred,
            serving_address=lambda: "x",
            pid=lambda: 42,
        )

    assert build({}) is None
    assert build({"WATCHDOG_USEC": "1000000"}) is None
    service = build({"NOTIFY_SOCKET": "/run/x", "WATCHDOG_USEC": "1000000"})
    assert service is not None
    assert service.watchdog == 0.5
    assert service.notifier._sock is None  # nothing opened at build
    assert clock.getDelayedCalls() == []


def test_watchdog_interval() -> None:
    pid = os.getpid()
    assert watchdog_interval({}, pid) is None
    assert watchdog_interval({"WATCHDOG_USEC": "400000"}, pid) == 0.2
    assert watchdog_interval({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": str(pid)}, pid) == 0.2
    assert watchdog_interval({"WATCHDOG_USEC": "400000", "WATCHDOG_PID": "1"}, pid) is None
    assert watchdog_interval({"WATCHDOG_USEC": "0"}, pid) is None
    assert watchdog_interval({"WATCHDOG_USEC": "soon"}, pid) is None


def test_server_wires_it_last_and_lifecycle_says_stopping(
    receiver: Receiver, tmp_path: Path, keep_h2_class: Any
) -> None:
    reactor = MemoryReactorClock()
    config = make_config(tmp_path, shutdown_delay_duration=30.0)
    assert Server(config, reactor, store=StubStore(), environ={}).sd_notify is None
    env = {"NOTIFY_SOCKET": receiver.address, "WATCHDOG_USEC": "2000000"}
    server = Server(config, reactor, store=StubStore(), environ=env)
    assert [child.name for child in server.root] == [*ORDER, "sd-notify"]
    assert reactor.getDelayedCalls() == []  # building schedules nothing, opens nothing
    server.root.privilegedStartService()
    server.root.startService()
    port = server.listener.bound_port()
    messages = receiver.messages()
    assert messages[:2] == ["WATCHDOG=1", "STATUS=store ready"]
    assert messages[2] == f"STATUS=serving on 127.0.0.1:{port}"
    # The first readyz probe, at start, passed: the tree is up.
    assert messages[3:] == ["READY=1\nSTATUS=ready"]
    reactor.advance(1.0)
    assert receiver.messages() == ["WATCHDOG=1"]
    server.lifecycle.initiate()
    assert receiver.messages() == ["STOPPING=1\nSTATUS=shutting down"]
    assert result_of(render_endpoint(server.health, "readyz", {})).code == 500
    stopped = server.root.stopService()
    reactor.advance(0)
    assert stopped.called
    assert reactor.getDelayedCalls() == []
    assert receiver.messages() == []
