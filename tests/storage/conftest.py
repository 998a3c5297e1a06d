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
from typing import Any

import attrs
import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock, deferLater

from apiserver.storage.interface import Store

BACKENDS = ["memory", "sqlite", "etcd3"]


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

    if request.param == "sqlite":
        from apiserver.storage.sqlite import SqliteStore

        def make_sqlite() -> tuple[Store, Clock | None]:
            clock = Clock()
            store = SqliteStore(str(tmp_path / "store.db"), reactor=reactor, clock=clock)
            return store, clock

        return make_sqlite

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
