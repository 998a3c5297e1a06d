"""The whole service tree on a fake reactor: building it has no side effects; starting it
starts every child in order; stopping it stops them in reverse and leaves no call pending
and no loop running (k8s.io/apiserver/pkg/server/genericapiserver.go runs and tears down its
parts in that order)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.unit.unit_helpers import result_of
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import LoopingCall
from twisted.internet.testing import MemoryReactorClock
from twisted.web import http

from apiserver.healthz import render_endpoint
from apiserver.options import ServerConfig
from apiserver.server import Server
from apiserver.service.serving import ServingCertService
from apiserver.storage.interface import (
    KeyNotFoundError,
    KeyValue,
    PeriodicTask,
    RangeResult,
    StoreCapabilities,
    WatchEvent,
)
from apiserver.tls.selfsigned import ensure_self_signed

ORDER = [
    "log-flush",
    "healthz",
    "store",
    "ttl-sweeper",
    "compaction",
    "watch-cache",
    "apf-config",
    "auth-reload",
    "storage-metrics",
    "http2",
    "serving-certs",
    "listener",
    "post-start-hooks",
    "lifecycle",
]

AUTHZ_CONFIG = """\
apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: AlwaysAllow
  name: alwaysallow
"""


class StubWatch:
    def __init__(self) -> None:
        self.done: Deferred[None] = Deferred()

    def cancel(self) -> None:
        if not self.done.called:
            self.done.callback(None)


class StubStore:
    """An empty store that answers at once, with no thread and no timer of its own; it
    declares a sweeper and a compactor, as the SQLite store does, for the server to run."""

    #: It guarantees nothing beyond the Store contract.
    capabilities = StoreCapabilities()
    kind = "sqlite"

    def __init__(self) -> None:
        self.log: list[str] = []
        self.created: list[str] = []
        self.watches: list[StubWatch] = []

    def start(self) -> Deferred[None]:
        self.log.append("start")
        return defer.succeed(None)

    def stop(self) -> Deferred[None]:
        self.log.append("stop")
        return defer.succeed(None)

    def maintenance(self) -> list[PeriodicTask]:
        return [
            PeriodicTask("ttl-sweeper", 1.0, self._round("sweep"), now=True),
            PeriodicTask("compaction", 300.0, self._round("compact")),
        ]

    def _round(self, what: str) -> Callable[[], Deferred[None]]:
        def run() -> Deferred[None]:
            self.log.append(what)
            return defer.succeed(None)

        return run

    def db_size(self) -> Deferred[int | None]:
        return defer.succeed(None)

    def current_revision(self) -> Deferred[int]:
        return defer.succeed(1)

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        return defer.fail(KeyNotFoundError("not found", key))

    def create(self, key: bytes, value: bytes, ttl: int = 0) -> Deferred[KeyValue]:
        # The priority and fairness ensurer writes the bootstrap configuration at start.
        self.created.append(key.decode())
        return defer.succeed(KeyValue(key, value, 2, 2))

    def update(
        self, key: bytes, value: bytes, expected_revision: int, ttl: int = 0
    ) -> Deferred[KeyValue]:
        raise NotImplementedError

    def delete(self, key: bytes, expected_revision: int = 0) -> Deferred[KeyValue]:
        raise NotImplementedError

    def range(
        self, prefix: bytes, start_key: bytes = b"", limit: int = 0, revision: int = 0
    ) -> Deferred[RangeResult]:
        return defer.succeed(RangeResult((), 1, False, 0))

    def count(self, prefix: bytes) -> Deferred[int]:
        return defer.succeed(0)

    def watch(
        self, prefix: bytes, start_revision: int, callback: Callable[[WatchEvent], None]
    ) -> StubWatch:
        w = StubWatch()
        self.watches.append(w)
        return w

    def compact(self, revision: int) -> Deferred[None]:
        return defer.succeed(None)

    def check_health(self, timeout: float) -> Deferred[None]:
        return defer.succeed(None)

    def check_ready(self, timeout: float) -> Deferred[None]:
        return defer.succeed(None)


def make_config(tmp_path: Path, **values: Any) -> ServerConfig:
    authz = tmp_path / "config" / "authz.yaml"
    authz.parent.mkdir(exist_ok=True)
    authz.write_text(AUTHZ_CONFIG)
    return ServerConfig.defaults().evolve(
        data_dir=str(tmp_path / "data"),
        cert_dir=str(tmp_path / "certs"),
        secure_port=0,
        bind_address="127.0.0.1",
        authorization_config=str(authz),
        **values,
    )


def files_under(path: Path) -> list[Path]:
    return sorted(p for p in path.rglob("*") if p.parent.name != "config" and p.name != "config")


@pytest.fixture
def keep_h2_class(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The HTTP/2 class the tree replaces when it starts, restored after the test."""
    original = http.H2Connection
    monkeypatch.setattr(http, "H2Connection", original)
    yield original


def test_building_writes_nothing_schedules_nothing_replaces_nothing(
    tmp_path: Path, keep_h2_class: Any
) -> None:
    reactor = MemoryReactorClock()
    handlers = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT))
    threads = threading.active_count()
    # The default backend (SQLite in --data-dir) and self-signed serving certificates.
    server = Server(make_config(tmp_path), reactor)
    assert files_under(tmp_path) == []  # no --data-dir, no --cert-dir, no certificate
    assert reactor.getDelayedCalls() == []
    assert reactor.whenRunningHooks == []
    assert reactor.tcpServers == [] and reactor.sslServers == []
    assert threading.active_count() == threads
    assert http.H2Connection is keep_h2_class
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == handlers
    assert [child.name for child in server.root] == ORDER
    assert not server.root.running


def loops_of(server: Server) -> list[LoopingCall]:
    """Every LoopingCall the running tree has."""
    reloader: Any = server.auth_stages.reloader
    loops = [
        *server.storage_metrics.loops,
        server.log_check._loop,
        reloader._loop,
        server.cacher._bookmarks,  # type: ignore[union-attr]
        server.root.child_named("log-flush").loop,  # type: ignore[attr-defined]
        server.root.child_named("ttl-sweeper").runner.loop,  # type: ignore[attr-defined]
        server.root.child_named("compaction").runner.loop,  # type: ignore[attr-defined]
    ]
    assert all(isinstance(loop, LoopingCall) for loop in loops), loops
    return loops


def test_the_tree_starts_in_order_and_stops_in_reverse_leaving_nothing(
    tmp_path: Path, keep_h2_class: Any
) -> None:
    reactor = MemoryReactorClock()
    store = StubStore()
    server = Server(
        make_config(tmp_path, shutdown_delay_duration=30.0, log_flush_frequency=5.0),
        reactor,
        store=store,
    )
    assert reactor.getDelayedCalls() == []
    assert files_under(tmp_path) == []
    events: list[str] = []
    for child in server.root:
        record(child, events)

    # As twistd does: privileged start (the port is bound there), then start.
    server.root.privilegedStartService()
    server.root.startService()
    assert [e for e in events if e.startswith("start ")] == [f"start {n}" for n in ORDER]
    assert all(child.running for child in server.root)
    assert store.log == ["start", "sweep"]  # the sweeper's first round comes with the store
    # Once the store is up, the bootstrap APF configuration is written (the ensurer).
    assert "/registry/flowschemas/catch-all" in store.created
    assert "/registry/prioritylevelconfigurations/exempt" in store.created
    assert (tmp_path / "certs" / "apiserver.crt").exists()  # made before listening
    assert http.H2Connection is not keep_h2_class
    assert server.listener.bound_port() > 0
    assert server.store_service.started and server.cacher_service is not None
    assert server.cacher_service.started
    assert server.hooks.finished("storage-readiness")
    livez = result_of(render_endpoint(server.health, "livez", {}))
    assert livez.code == 200, livez.body  # the first probe starts the log check's loop
    loops = loops_of(server)
    assert all(loop.running for loop in loops)
    server.lifecycle.initiate()  # ShutdownInitiated: the shutdown-delay timer is pending
    assert reactor.getDelayedCalls()

    stopped = server.root.stopService()
    reactor.advance(0)  # the closed port reports connectionLost on the next turn
    assert stopped.called
    assert [e for e in events if e.startswith("stop ")] == [f"stop {n}" for n in reversed(ORDER)]
    # The sweeper and the compactor stopped before the store.
    assert store.log == ["start", "sweep", "stop"]
    assert not any(child.running for child in server.root)
    assert reactor.getDelayedCalls() == []
    assert not any(loop.running for loop in loops)
    assert all(w.done.called for w in store.watches)


def test_stopping_before_the_store_started_cancels_the_retry(tmp_path: Path) -> None:
    reactor = MemoryReactorClock()
    store = StubStore()
    failed: list[Deferred[None]] = []

    def start() -> Deferred[None]:
        failed.append(defer.fail(RuntimeError("etcd is not there yet")))
        return failed[-1]

    store.start = start  # type: ignore[method-assign]
    server = Server(make_config(tmp_path, disable_http2_serving=True), reactor, store=store)
    assert "http2" not in [child.name for child in server.root]
    server.root.startService()
    assert len(failed) == 1 and not server.store_service.started
    reactor.advance(1.0)  # the store service retries
    assert len(failed) == 2
    assert not server.hooks.finished("storage-readiness")
    stopped = server.root.stopService()
    reactor.advance(0)
    assert stopped.called
    assert reactor.getDelayedCalls() == []  # retry, readiness timeout: all cancelled
    assert store.log == []  # never started, so never stopped


def record(child: Any, events: list[str]) -> None:
    start, stop = child.startService, child.stopService

    def recorded_start() -> None:
        events.append(f"start {child.name}")
        start()

    def recorded_stop() -> object:
        events.append(f"stop {child.name}")
        return stop()

    child.startService = recorded_start
    child.stopService = recorded_stop


def test_given_serving_certificates_are_read_while_building(tmp_path: Path) -> None:
    """With --tls-cert-file/--tls-private-key-file a bad file stops start-up when the server
    is built (as option validation does); nothing is generated at start."""
    cert, key = ensure_self_signed(str(tmp_path / "given"), "127.0.0.1", "127.0.0.1")
    before = files_under(tmp_path)
    config = ServerConfig.defaults().evolve(
        cert_dir=str(tmp_path / "certs"), tls_cert_file=cert, tls_private_key_file=key
    )
    serving = ServingCertService(config)
    assert serving.context() is not None  # ready before start
    serving.privilegedStartService()
    serving.startService()
    assert files_under(tmp_path) == before  # no self-signed pair in --cert-dir
    with pytest.raises(OSError):
        ServingCertService(config.evolve(tls_cert_file=str(tmp_path / "missing.crt")))


def test_self_signed_context_exists_only_once_started(tmp_path: Path) -> None:
    serving = ServingCertService(ServerConfig.defaults().evolve(cert_dir=str(tmp_path)))
    with pytest.raises(RuntimeError):
        serving.context()
    assert files_under(tmp_path) == []
    serving.startService()
    assert serving.context() is not None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["apiserver.crt", "apiserver.key"]


def test_the_maintenance_children_follow_the_backend_and_the_flags(tmp_path: Path) -> None:
    """SQLite has a TTL sweeper, etcd only its compactor (leases expire keys); a compaction
    interval of 0 leaves the compactor out. The server runs them, never the store itself."""
    reactor = MemoryReactorClock()
    names = [child.name for child in Server(make_config(tmp_path), reactor).root]
    assert names[2:5] == ["store", "ttl-sweeper", "compaction"]
    no_compaction = Server(make_config(tmp_path, store_compaction_interval=0.0), reactor)
    names = [child.name for child in no_compaction.root]
    assert names[2:5] == ["store", "ttl-sweeper", "watch-cache"]
    etcd = Server(make_config(tmp_path, store_servers=["http://127.0.0.1:1"]), reactor)
    names = [child.name for child in etcd.root]
    assert names[2:5] == ["store", "compaction", "watch-cache"]
    for server in (no_compaction, etcd):
        store: Any = server.store_service.store
        assert store._runners == []  # the store runs no loop of its own in a server
    assert reactor.getDelayedCalls() == []
