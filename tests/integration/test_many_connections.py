"""The server holds 5,000 concurrent TLS connections under the unit's ``LimitNOFILE=``.

systemd sets the limit before the server starts: the server does not raise its own soft
limit (kube-apiserver's is raised to the hard limit by Go's runtime, syscall/rlimit.go; the
unit does it for this one). Here the test raises its own soft limit the same way, capped at
the hard limit, and the daemon inherits it. Each connection completes its TLS handshake, so
the server has accepted it and holds its descriptor; a request on a new connection still
succeeds while all are open. With the default soft limit of 1,024 the server could not.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import ssl
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.daemon import Daemon

UNIT = Path(__file__).resolve().parents[2] / "etc" / "apiserver.service"
CONNECTIONS = 5000
#: Handshakes in flight at once: well under the listener's backlog (1,024).
IN_FLIGHT = 200
DEADLINE = 60.0


def unit_limit() -> int:
    match = re.search(r"^LimitNOFILE=(\d+)$", UNIT.read_text(), re.MULTILINE)
    assert match, "the unit sets no LimitNOFILE="
    return int(match.group(1))


@pytest.fixture
def unit_nofile() -> Iterator[int]:
    """This process's soft RLIMIT_NOFILE raised to the unit's, for the daemon to inherit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = unit_limit() if hard == resource.RLIM_INFINITY else min(unit_limit(), hard)
    # The test's client end and the server's end each need a descriptor per connection.
    if wanted < CONNECTIONS + 200:
        pytest.skip(f"hard RLIMIT_NOFILE {hard} is below {CONNECTIONS} connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield wanted
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def soft_nofile_of(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no 'Max open files' in /proc/<pid>/limits")


def open_sockets(pid: int) -> int:
    """The sockets among the process's descriptors (the listener, the connections)."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except FileNotFoundError:  # closed meanwhile
            pass
    return count


async def hold_connections(
    daemon: Daemon, count: int, while_open: Callable[[], None]
) -> list[BaseException]:
    """Open ``count`` TLS connections, run ``while_open`` in a thread while those that
    completed their handshake are open, then close them; why the others failed."""
    context = ssl.create_default_context(cafile=str(daemon.cert_dir / "apiserver.crt"))
    context.check_hostname = False
    gate = asyncio.Semaphore(IN_FLIGHT)
    writers: list[asyncio.StreamWriter] = []
    deadline = time.monotonic() + DEADLINE

    async def connect() -> None:
        async with gate:
            left = deadline - time.monotonic()
            _, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", daemon.port, ssl=context), max(left, 0.1)
            )
            writers.append(writer)

    try:
        results = await asyncio.gather(*(connect() for _ in range(count)), return_exceptions=True)
        await asyncio.get_running_loop().run_in_executor(None, while_open)
        return [r for r in results if isinstance(r, BaseException)]
    finally:
        for writer in writers:
            writer.transport.abort()


def test_holds_5000_tls_connections_under_the_units_limit(
    unit_nofile: int, start_daemon: Callable[..., Daemon]
) -> None:
    daemon = start_daemon()
    assert daemon.proc is not None
    pid = daemon.proc.pid
    assert soft_nofile_of(pid) == unit_nofile
    before = open_sockets(pid)
    seen: dict[str, object] = {}

    def while_open() -> None:
        seen["sockets"] = open_sockets(pid)
        status, _, body = daemon.get("/readyz")
        seen["readyz"] = (status, body)
        status, _, _ = daemon.get("/apis/events.k8s.io/v1/namespaces/default/events")
        seen["list"] = status

    errors = asyncio.run(hold_connections(daemon, CONNECTIONS, while_open))
    assert errors == []
    # The server holds a socket for each of them, besides its listener.
    assert isinstance(seen["sockets"], int)
    assert seen["sockets"] > CONNECTIONS
    assert seen["readyz"] == (200, b"ok")
    assert seen["list"] == 200
    # And lets them go once they close: nothing is left behind.
    deadline = time.monotonic() + 30
    while open_sockets(pid) > before + 10 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert open_sockets(pid) <= before + 10
    assert daemon.get("/readyz")[0] == 200


def test_a_soft_limit_of_1024_is_raised_as_go_raises_it(
    unit_nofile: int, start_daemon: Callable[..., Daemon]
) -> None:
    """Started with the usual soft limit of 1,024, the server raises it to the hard limit at
    start, as Go's runtime does for kube-apiserver (service/limits.py), and holds more."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
    try:
        daemon = start_daemon()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert daemon.proc is not None
    assert soft_nofile_of(daemon.proc.pid) == hard
    errors = asyncio.run(hold_connections(daemon, 1500, lambda: None))
    assert errors == []
