"""Fixtures of the backend conformance suite: one ``store`` per backend, unchanged tests.

``backend`` is parametrized over ``memory`` (a MemoryStore on a ``Clock`` the test drives),
``sqlite`` (a SqliteStore on ``tmp_path`` whose TTL sweeper
and compactor run on a ``Clock`` the test drives) and ``etcd3`` (an Etcd3Store against one
throw-away etcd server per test session; skipped when etcd is not installed or the backend
cannot be imported). Every test gets its own key prefix (``prefix``), so tests sharing the
etcd server do not see each other's keys.
"""

from __future__ import annotations

import importlib
import shutil
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock, deferLater

from apiserver.storage.interface import Store

BACKENDS = [
    "memory",
    "sqlite",
    "sqlite-process",
    "sqlite-workers",
    "sqlite-workers-process",
    "etcd3",
]


class TwoWorkers:
    """The embedded store as two ``--workers`` see it: workers 0 and 1 of one file, writes
    alternating between them, reads and watches through worker 1 (so every event a watch
    gets from a write of worker 0 came through the cross-process change feed). Worker 0
    runs the TTL sweeper and the compactor on the test clock, as in the server."""

    kind = "sqlite"

    def __init__(self, first: Any, second: Any) -> None:
        self._workers = (first, second)
        self._writes = 0
        self.capabilities = second.capabilities

    def _writer(self) -> Any:
        self._writes += 1
        return self._workers[self._writes % 2]

    async def _start(self) -> None:
        for worker in self._workers:
            await worker.start()

    def start(self) -> Deferred[None]:
        return Deferred.fromCoroutine(self._start())

    async def _stop(self) -> None:
        for worker in reversed(self._workers):
            await worker.stop()

    def stop(self) -> Deferred[None]:
        return Deferred.fromCoroutine(self._stop())

    def create(self, *args: Any, **kw: Any) -> Any:
        return self._writer().create(*args, **kw)

    def update(self, *args: Any, **kw: Any) -> Any:
        return self._writer().update(*args, **kw)

    def delete(self, *args: Any, **kw: Any) -> Any:
        return self._writer().delete(*args, **kw)

    def compact(self, revision: int) -> Any:
        return self._workers[0].compact(revision)

    def maintenance(self) -> tuple[()]:
        return ()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._workers[1], name)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "realtime: waits a bounded amount of real time on backends whose timers cannot be "
        "driven by a test clock (etcd lease expiry)",
    )


def sleep(seconds: float) -> Deferred[None]:
    """Real time passing (reactor-driven, never blocks the reactor)."""
    return deferLater(reactor, seconds, lambda: None)


@attrs.define
class Backend:
    """A started store plus what the backend-neutral tests need to know about its timers.

    ``clock`` is the test clock driving TTL expiry, or None when expiry runs on real time
    (etcd leases: at least a second or two). ``let_time_pass`` hides the difference.
    """

    name: str
    store: Store
    clock: Clock | None = None

    @property
    def real_time(self) -> bool:
        return self.clock is None

    async def let_time_pass(self, seconds: float) -> None:
        """Let ``seconds`` of the store's time pass (a clock step or a real wait)."""
        if self.clock is not None:
            self.clock.advance(seconds)
        else:
            await sleep(seconds)

    async def wait_while_time_passes(self, d: Deferred[Any], timeout: float) -> Any:
        """Wait for ``d`` while the store's time goes on: on a test clock one second per
        20 ms of real time (each sweep is asynchronous, so the clock must keep moving after
        it); on real time simply wait. Fails after ``timeout`` seconds of real time."""
        d.addTimeout(timeout, reactor)
        while self.clock is not None and not d.called:
            self.clock.advance(1.0)
            await sleep(0.02)
        return await d


@pytest.fixture(scope="session")
def etcd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One etcd for the whole session (started lazily, only by etcd3 tests)."""
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed (Debian package etcd-server)")
    try:
        etcdserver = importlib.import_module("tests.storage.etcdserver")
    except ImportError as e:
        pytest.skip(f"tests.storage.etcdserver not available: {e}")
    server = etcdserver.EtcdServer(str(tmp_path_factory.mktemp("etcd") / "data"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def backend_factory(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Callable[[], tuple[Store, Clock | None]]:
    """A factory for the parametrized backend; skips what cannot run here."""
    if request.param == "memory":
        from apiserver.storage.memory import MemoryStore

        def make_memory() -> tuple[Store, Clock | None]:
            clock = Clock()
            return MemoryStore(clock), clock

        return make_memory

    # The writer on a thread of the test process, or in a writer process (the server's).
    writer = "process" if request.param.endswith("-process") else "thread"
    if request.param in ("sqlite", "sqlite-process"):
        from apiserver.storage.sqlite import SqliteStore

        def make_sqlite() -> tuple[Store, Clock | None]:
            clock = Clock()
            store = SqliteStore(
                str(tmp_path / "store.db"), reactor=reactor, clock=clock, writer=writer
            )
            return store, clock

        return make_sqlite

    if request.param in ("sqlite-workers", "sqlite-workers-process"):
        from apiserver.storage.sqlite import SqliteStore

        def make_workers() -> tuple[Store, Clock | None]:
            clock = Clock()
            path = str(tmp_path / "store.db")
            first = SqliteStore(path, reactor=reactor, clock=clock, worker=(0, 2), writer=writer)
            second = SqliteStore(
                path,
                reactor=reactor,
                clock=clock,
                worker=(1, 2),
                sweep_interval=0,
                compaction_interval=0,
                writer=writer,
            )
            return cast(Store, TwoWorkers(first, second)), clock

        return make_workers

    assert request.param == "etcd3"
    try:
        etcd3 = importlib.import_module("apiserver.storage.etcd3")
    except ImportError as e:
        pytest.skip(f"apiserver.storage.etcd3 not importable: {e}")
    server = request.getfixturevalue("etcd_server")

    def make_etcd() -> tuple[Store, Clock | None]:
        store = etcd3.Etcd3Store([server.client_url], reactor, compaction_interval=0)
        return store, None

    return make_etcd


@pytest_twisted.async_yield_fixture
async def backend(
    request: pytest.FixtureRequest,
    backend_factory: Callable[[], tuple[Store, Clock | None]],
) -> AsyncIterator[Backend]:
    store, clock = backend_factory()
    name = request.node.callspec.params["backend_factory"]
    await store.start()
    try:
        yield Backend(name, store, clock)
    finally:
        await store.stop()


@pytest.fixture
def store(backend: Backend) -> Store:
    return backend.store


@pytest.fixture
def prefix() -> bytes:
    """A key prefix no other test uses (tests share one etcd per session)."""
    return b"/conformance/" + uuid.uuid4().hex.encode() + b"/"
