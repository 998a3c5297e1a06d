"""The unit's ``SystemCallFilter=`` lets the server work: the daemon runs under the same
seccomp filter and serves.

Without systemd running, the filter is rebuilt here: the groups come from
``systemd-analyze syscall-filter`` (systemd's own lists, expanded recursively), the
allow-list is the unit's first ``SystemCallFilter=`` line minus its ``~`` line, every other
system call fails with ``SystemCallErrorNumber=EPERM``, as systemd does (systemd.exec(5)).
A small wrapper loads it with libseccomp (the library systemd uses) and then execs twistd, so
the whole server, from interpreter start to shutdown, runs filtered. Skipped where
systemd-analyze or libseccomp is missing.
"""

from __future__ import annotations

import ctypes.util
import errno
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon

UNIT = Path(__file__).resolve().parents[2] / "etc" / "apiserver.service"
ANALYZE = shutil.which("systemd-analyze")
LIBSECCOMP = ctypes.util.find_library("seccomp")

pytestmark = pytest.mark.skipif(
    ANALYZE is None or LIBSECCOMP is None,
    reason="systemd-analyze (Debian: systemd) or libseccomp is missing",
)

# Loads an allow-list filter (one system call name per line in argv[1]), then execs argv[2:].
_WRAPPER = textwrap.dedent(
    """
    import ctypes, os, sys
    lib = ctypes.CDLL(sys.argv[1], use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    SCMP_ACT_ALLOW = 0x7FFF0000
    SCMP_ACT_ERRNO = 0x00050000 | {eperm}
    ctx = lib.seccomp_init(SCMP_ACT_ERRNO)
    for name in open(sys.argv[2]).read().split():
        number = lib.seccomp_syscall_resolve_name(name.encode())
        if number >= 0 and lib.seccomp_rule_add(ctx, SCMP_ACT_ALLOW, number, 0) != 0:
            sys.exit("seccomp_rule_add " + name)
    if lib.seccomp_load(ctx) != 0:
        sys.exit("seccomp_load failed")
    os.execv(sys.argv[3], sys.argv[3:])
    """
).format(eperm=errno.EPERM)


def syscall_groups() -> dict[str, list[str]]:
    """Every ``@group`` systemd-analyze knows, with its entries (names or ``@groups``)."""
    assert ANALYZE is not None
    out = subprocess.run(
        [ANALYZE, "syscall-filter", "--no-pager"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    groups: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), [])
        elif current is not None and line.strip() and not line.strip().startswith("#"):
            current.append(line.strip())
    return groups


def expand(entries: list[str], groups: dict[str, list[str]]) -> set[str]:
    names: set[str] = set()
    for entry in entries:
        names |= expand(groups[entry], groups) if entry.startswith("@") else {entry}
    return names


def unit_allow_list() -> set[str]:
    lines = re.findall(r"^SystemCallFilter=(.*)$", UNIT.read_text(), re.MULTILINE)
    groups = syscall_groups()
    allowed: set[str] = set()
    for value in lines:
        if value.startswith("~"):
            allowed -= expand(value[1:].split(), groups)
        else:
            allowed |= expand(value.split(), groups)
    return allowed


class FilteredDaemon(Daemon):
    """The daemon, exec'd by the wrapper once the filter is loaded."""

    allow_list: Path

    def command(self) -> list[str]:
        assert LIBSECCOMP is not None
        wrapper = self.workdir / "seccomp_exec.py"
        wrapper.write_text(_WRAPPER)
        return [sys.executable, str(wrapper), LIBSECCOMP, str(self.allow_list), *super().command()]


def start_filtered(tmp_path: Path, allowed: set[str]) -> FilteredDaemon:
    daemon = FilteredDaemon(tmp_path / "d")
    daemon.workdir.mkdir(parents=True)
    daemon.allow_list = daemon.workdir / "allowed.txt"
    daemon.allow_list.write_text("\n".join(sorted(allowed)))
    return daemon


@pytest.fixture
def filtered(tmp_path: Path) -> Iterator[Callable[[set[str]], FilteredDaemon]]:
    started: list[FilteredDaemon] = []

    def start(allowed: set[str]) -> FilteredDaemon:
        daemon = start_filtered(tmp_path / str(len(started)), allowed)
        started.append(daemon)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


def test_the_server_serves_under_the_units_system_call_filter(
    filtered: Callable[[set[str]], FilteredDaemon],
) -> None:
    allowed = unit_allow_list()
    assert {"epoll_wait", "getrandom", "sendmsg"} <= allowed
    assert not {"setuid", "setrlimit", "mount"} & allowed
    daemon = filtered(allowed).start()
    status, _, body = daemon.get("/readyz")
    assert (status, body) == (200, b"ok")
    path = "/apis/events.k8s.io/v1/namespaces/default/events"
    status, _, body = daemon.get(
        path, method="POST", body=event_body("e1"), headers={"Content-Type": "application/json"}
    )
    assert status == 201, body
    status, _, body = daemon.get(path)
    assert status == 200 and b'"e1"' in body
    # SIGTERM: the graceful shutdown, under the filter too.
    daemon.signal()
    assert daemon.wait_exit(30) == 0, daemon.log()


def test_the_check_can_fail(filtered: Callable[[set[str]], FilteredDaemon]) -> None:
    """Without the calls that accept a connection, the same daemon cannot serve."""
    allowed = unit_allow_list() - {"accept", "accept4"}
    daemon = filtered(allowed)
    with pytest.raises(AssertionError, match="not ready"):
        daemon.start(timeout=10)
