"""The supervisor of ``--workers`` (``apiserver.service.workers``) on a test clock with a
fake process spawner: start, restart with back-off, graceful shutdown, kill."""

from __future__ import annotations

import signal
import sys
from typing import Any

import pytest
from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.protocol import ProcessProtocol
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from apiserver.service.workers import (
    GRACEFUL_SIGNAL,
    WORKER_ENV,
    Supervisor,
    process_spawner,
    worker_from_environ,
    worker_process_argv,
)


class FakeProcess:
    def __init__(self, index: int, protocol: ProcessProtocol, pid: int) -> None:
        self.index = index
        self.protocol = protocol
        self.pid: int | None = pid
        self.signals: list[int] = []

    def signalProcess(self, signum: int) -> None:
        self.signals.append(signum)

    def end(self, status: int = 0, sig: int | None = None) -> None:
        self.pid = None
        reason: Failure = Failure(
            ProcessDone(0) if status == 0 and sig is None else ProcessTerminated(status, sig)
        )
        self.protocol.processEnded(reason)


class FakeSpawner:
    def __init__(self) -> None:
        self.spawned: list[FakeProcess] = []

    def __call__(self, index: int, protocol: ProcessProtocol) -> FakeProcess:
        process = FakeProcess(index, protocol, 1000 + len(self.spawned))
        self.spawned.append(process)
        return process

    def live(self, index: int) -> FakeProcess:
        return [p for p in self.spawned if p.index == index and p.pid is not None][-1]


def make(count: int = 2, **kw: Any) -> tuple[Supervisor, FakeSpawner, Clock, list[str]]:
    clock = Clock()
    spawner = FakeSpawner()
    events: list[str] = []
    supervisor = Supervisor(
        count,
        spawner,
        clock,
        prepare=lambda: events.append("prepared"),
        on_stopped=lambda: events.append("stopped"),
        **kw,
    )
    return supervisor, spawner, clock, events


def test_prepares_once_then_starts_every_worker() -> None:
    supervisor, spawner, _, events = make(3)
    assert spawner.spawned == []
    supervisor.startService()
    assert events == ["prepared"]
    assert [p.index for p in spawner.spawned] == [0, 1, 2]
    assert supervisor.pids() == [1000, 1001, 1002]


def test_a_worker_that_dies_is_restarted_at_once_after_a_healthy_run() -> None:
    supervisor, spawner, clock, _ = make(min_uptime=10.0)
    supervisor.startService()
    clock.advance(60)
    spawner.live(1).end(sig=signal.SIGKILL)
    assert 1 not in supervisor.processes
    clock.advance(0)
    assert spawner.live(1).pid == 1002
    assert supervisor.restarted == 1
    assert spawner.live(0).pid == 1000  # the others keep running


def test_a_crash_loop_backs_off_exponentially_up_to_the_maximum() -> None:
    supervisor, spawner, clock, _ = make(
        1, min_uptime=10.0, backoff_base=0.5, backoff_max=4.0, start_attempts=100
    )
    supervisor.startService()
    delays = []
    for _ in range(6):
        spawner.live(0).end(status=1)
        before = len(spawner.spawned)
        waited = 0.0
        while len(spawner.spawned) == before:
            clock.advance(0.25)
            waited += 0.25
            assert waited <= 60
        delays.append(waited)
    # first restart at once (next clock tick), then 0.5, 1, 2, 4, 4 seconds
    assert delays == [0.25, 0.5, 1.0, 2.0, 4.0, 4.0]
    # a run longer than min_uptime resets the back-off
    clock.advance(30)
    spawner.live(0).end(status=1)
    clock.advance(0)
    assert spawner.live(0).pid is not None and len(spawner.spawned) == 8


def test_shutdown_signals_every_worker_and_stops_when_all_exited() -> None:
    supervisor, spawner, clock, events = make(2)
    supervisor.startService()
    supervisor.shutdown(signal.SIGTERM)
    assert [p.signals for p in spawner.spawned] == [[GRACEFUL_SIGNAL], [GRACEFUL_SIGNAL]]
    spawner.live(0).end()
    assert events == ["prepared"]  # one still draining
    spawner.live(1).end(status=1)
    assert events == ["prepared", "stopped"]
    clock.advance(100)
    assert len(spawner.spawned) == 2  # nothing restarted during shutdown


def test_shutdown_cancels_a_pending_restart() -> None:
    supervisor, spawner, clock, events = make(2)
    supervisor.startService()
    spawner.live(0).end(status=1)
    supervisor.shutdown()
    spawner.live(1).end()
    assert events[-1] == "stopped"
    clock.advance(100)
    assert len(spawner.spawned) == 2
    assert clock.getDelayedCalls() == []


def test_second_signal_kills_at_once() -> None:
    supervisor, spawner, _, _ = make(2)
    supervisor.startService()
    supervisor.shutdown()
    supervisor.kill()
    assert [p.signals for p in spawner.spawned] == [
        [GRACEFUL_SIGNAL, signal.SIGKILL],
        [GRACEFUL_SIGNAL, signal.SIGKILL],
    ]


def test_stop_service_waits_for_the_workers() -> None:
    supervisor, spawner, _, events = make(2)
    supervisor.startService()
    d = supervisor.stopService()
    assert not d.called
    spawner.live(0).end()
    spawner.live(1).end()
    assert d.called and events[-1] == "stopped"


def test_the_worker_marker() -> None:
    assert worker_from_environ({}) is None
    assert worker_from_environ({WORKER_ENV: "1/4/77"}) == (1, 4, 77)
    for bad in ("1/1/77", "x/2/1", "1/2"):
        with pytest.raises(ValueError, match=WORKER_ENV):
            worker_from_environ({WORKER_ENV: bad})


def test_worker_command_line_and_environment() -> None:
    argv = worker_process_argv(["--workers=2", "--secure-port=1"], {"logfile": "/l", "logger": ""})
    assert argv[0] == sys.executable
    assert argv[3:] == [
        "--nodaemon",
        "--pidfile=",
        "--logfile=/l",
        "apiserver",
        "--workers=2",
        "--secure-port=1",
    ]

    class Reactor:
        calls: list[tuple[Any, ...]] = []

        def spawnProcess(self, protocol: Any, exe: str, args: list[str], **kw: Any) -> str:
            self.calls.append((exe, args, kw["env"]))
            return "transport"

    reactor = Reactor()
    spawn = process_spawner(reactor, argv, {"NOTIFY_SOCKET": "@x", "HOME": "/h"}, 2)
    assert spawn(1, ProcessProtocol()) == "transport"
    daemon = worker_process_argv([], {"nodaemon": False, "logfile": None, "syslog": False})
    assert "--logfile=twistd.log" in daemon
    assert "--syslog" in worker_process_argv([], {"syslog": True, "prefix": "api"})
    exe, args, env = Reactor.calls[0]
    assert exe == sys.executable and args == argv
    assert "NOTIFY_SOCKET" not in env and env["HOME"] == "/h"
    assert env[WORKER_ENV].startswith("1/2/")


def _config(tmp_path: Any, **values: Any) -> Any:
    from apiserver.options import ServerConfig

    return ServerConfig(
        {
            "data-dir": str(tmp_path / "data"),
            "cert-dir": str(tmp_path / "certs"),
            "workers": "2",
            **values,
        }
    )


def test_a_worker_server_shares_the_port_and_the_store(tmp_path: Any) -> None:
    from prometheus_client import generate_latest
    from twisted.internet.testing import MemoryReactorClock

    from apiserver.server import Server
    from apiserver.storage.sqlite import SqliteStore

    names = {}
    for index in (0, 1):
        server = Server(_config(tmp_path), MemoryReactorClock(), worker=(index, 2))
        assert server.listener.reuse_port
        store = server.backend_store
        assert isinstance(store, SqliteStore) and store._shared
        assert store.capabilities.committed_revision  # the shared counter (feed.py)
        names[index] = [task.name for task in store.maintenance()]
        text = generate_latest(server.metrics.registry).decode()
        assert f'apiserver_worker_info{{worker="{index}",workers="2"}} 1.0' in text
    # one sweeper and one compactor for the file, in worker 0
    assert names == {0: ["ttl-sweeper", "compaction"], 1: []}
    lone = Server(_config(tmp_path, workers="1"), MemoryReactorClock())
    assert isinstance(lone.backend_store, SqliteStore) and not lone.backend_store._shared
    assert lone.backend_store.capabilities.committed_revision
    assert "apiserver_worker_info" not in generate_latest(lone.metrics.registry).decode()


def test_prepare_makes_the_schema_and_the_certificate_once(tmp_path: Any) -> None:
    import sqlite3

    from apiserver.storage.interface import UnavailableError
    from apiserver.storage.sqlite.writer import release_lock, take_lock
    from apiserver.workers import prepare_shared_state

    config = _config(tmp_path)
    prepare_shared_state(config)
    db = tmp_path / "data" / "store.db"
    tables = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")}
    assert "schema_version" in tables
    cert = tmp_path / "certs" / "apiserver.crt"
    first = cert.read_bytes()
    prepare_shared_state(config)
    assert cert.read_bytes() == first
    # a lone server holding the file stops the supervisor's start
    fd = take_lock(str(db))
    try:
        with pytest.raises(UnavailableError, match="in use by another process"):
            prepare_shared_state(config)
    finally:
        release_lock(fd)


def test_the_relay_tells_systemd_ready_once_all_workers_are(tmp_path: Any) -> None:
    import socket
    import uuid

    from twisted.internet.testing import MemoryReactorClock

    from apiserver.service.sdnotify import Notifier
    from apiserver.service.workers_notify import NotifyRelay

    name = f"apiserver-test-systemd-{uuid.uuid4().hex}"
    systemd = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    systemd.bind("\0" + name)
    systemd.setblocking(False)
    reactor = MemoryReactorClock()
    relay = NotifyRelay(
        Notifier("@" + name), 2, reactor, watchdog=5.0, pid=int(uuid.uuid4().int % 10**9)
    )
    supervisor, spawner, _, events = make(2)
    supervisor.relay = relay
    supervisor.startService()

    def heard() -> list[str]:
        out = []
        while True:
            try:
                out.append(systemd.recv(4096).decode())
            except BlockingIOError:
                return out

    def worker_says(index: int, message: str) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.sendto(message.encode(), b"\0" + relay.address(index)[1:].encode())
        for reader in list(reactor.readers):
            if getattr(reader, "index", None) == index:
                reader.doRead()

    assert heard() == ["STATUS=starting 2 workers", "WATCHDOG=1"]
    assert relay.environment(1) == {"NOTIFY_SOCKET": relay.address(1)}
    worker_says(0, "STATUS=store ready\nREADY=1\nSTATUS=ready")
    assert heard() == []  # one of two
    worker_says(1, "READY=1")
    assert heard() == ["READY=1\nSTATUS=ready: 2 workers"]
    reactor.advance(5.0)
    assert heard() == ["WATCHDOG=1"]
    # a restarted worker does not announce READY=1 again
    spawner.live(1).end(status=1)
    worker_says(1, "READY=1")
    assert heard() == []
    supervisor.shutdown()
    assert heard() == ["STOPPING=1"]
    spawner.live(0).end()
    assert events[-1] == "stopped"
    assert reactor.readers == set()
    assert not any(call.active() for call in reactor.getDelayedCalls())
    systemd.close()


def test_worker_log_lines_name_their_worker() -> None:
    from twisted.logger import LogLevel, formatEventAsClassicLogText

    from apiserver.service.workers import worker_log_labeller

    observe = worker_log_labeller(1)
    event: dict[str, Any] = {
        "log_namespace": "apiserver.server",
        "log_level": LogLevel.info,
        "log_format": "hello",
        "log_time": 0.0,
    }
    observe(event)
    assert "[worker-1 apiserver.server#info] hello" in (formatEventAsClassicLogText(event) or "")
    legacy: dict[str, Any] = {"log_system": "-", "log_format": "x", "log_time": 0.0}
    observe(legacy)
    observe(legacy)  # a second observer pass does not label twice
    assert legacy["log_system"] == "worker-1 -"


def test_on_etcd_only_worker_0_compacts(tmp_path: Any) -> None:
    from twisted.internet.testing import MemoryReactorClock

    from apiserver.server import Server

    config = _config(tmp_path, **{"store-servers": ("http://127.0.0.1:2379",)})
    names = {}
    for index in (0, 1):
        server = Server(config, MemoryReactorClock(), worker=(index, 2))
        assert server.backend_store.kind == "etcd"
        names[index] = [task.name for task in server.backend_store.maintenance()]
    assert names[0] and names[1] == []


def test_workers_that_never_start_stop_the_supervisor_as_failed() -> None:
    """The port taken, say: every try dies at once; after start_attempts quick deaths in a
    row with no worker ever up, the supervisor gives up (exit status 1 in the real one)."""
    supervisor, spawner, clock, events = make(2, start_attempts=3)
    supervisor.startService()
    for _ in range(2):
        for index in (0, 1):
            live = [p for p in spawner.spawned if p.index == index and p.pid is not None]
            if live:
                live[-1].end(1)
        clock.advance(5)  # past the back-off, within min_uptime of each start
    assert not supervisor.failed
    spawner.live(0).end(1)  # worker 0's third quick death
    assert supervisor.failed
    assert supervisor.stopping
    assert spawner.live(1).signals == [int(GRACEFUL_SIGNAL)]
    spawner.live(1).end(0)
    assert events == ["prepared", "stopped"]


def test_a_worker_that_lived_once_is_always_restarted() -> None:
    supervisor, spawner, clock, _ = make(1, start_attempts=2)
    supervisor.startService()
    clock.advance(11)  # past min_uptime: the servers can start
    assert supervisor.ever_up
    for _ in range(4):
        spawner.live(0).end(1)  # now dies at once, again and again
        clock.advance(60)
    assert not supervisor.failed
    assert spawner.live(0).pid is not None
