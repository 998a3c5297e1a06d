"""Fixtures that start real daemons and always stop them."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.integration.daemon import Daemon
from tests.storage.etcdserver import EtcdServer

pytestmark = pytest.mark.integration


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def start(args: Sequence[str] = (), wait: bool = True, name: str = "d", **kw: object) -> Daemon:
        daemon = Daemon(tmp_path / f"{name}{len(started)}", args, **kw)  # type: ignore[arg-type]
        started.append(daemon)
        return daemon.start(wait=wait)

    yield start
    for daemon in started:
        daemon.stop()


@pytest.fixture
def daemon(start_daemon: Callable[..., Daemon]) -> Daemon:
    return start_daemon()


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    """A one-member etcd (Debian's etcd-server) in ``tmp_path``, stopped (resumed first if a
    test paused it) at the end."""
    if shutil.which("etcd") is None:
        pytest.skip("etcd (Debian etcd-server) is not installed")
    server = EtcdServer(str(tmp_path / "etcd"))
    server.start()
    try:
        yield server
    finally:
        if hasattr(server, "resume"):
            server.resume()
        server.stop()
