"""Fixtures that start real daemons and always stop them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.integration.daemon import Daemon

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
