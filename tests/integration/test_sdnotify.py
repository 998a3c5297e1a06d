"""The real daemon under systemd's eyes: sd_notify(3) messages on ``$NOTIFY_SOCKET`` and the
journal's log format with ``$JOURNAL_STREAM`` (what ``Type=notify``, ``WatchdogSec=`` and
``StandardOutput=journal`` give a unit)."""

from __future__ import annotations

import http.client
import itertools
import os
import re
import shutil
import signal
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import attrs
import pytest

from tests.integration.daemon import Daemon
from tests.storage.etcdserver import EtcdServer

ETCD = shutil.which("etcd")


@attrs.define
class Received:
    at: float
    message: str


class NotifySocket:
    """The test's datagram socket; a thread records each message and when it arrived."""

    def __init__(self, tmp_path: Path) -> None:
        path = str(tmp_path / "notify")
        # sun_path holds 108 bytes: a long temporary path falls back to an abstract name.
        if len(path) < 100:
            self.address, bind_to = path, path
        else:
            name = f"apiserver-test-{uuid.uuid4().hex}"
            self.address, bind_to = "@" + name, "\0" + name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(bind_to)
        self.sock.settimeout(0.1)
        self.received: list[Received] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            try:
                data = self.sock.recv(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                self.received.append(Received(time.monotonic(), data.decode()))

    def messages(self, line: str) -> list[Received]:
        """Every message that has ``line`` among its assignments."""
        with self.lock:
            return [r for r in self.received if line in r.message.split("\n")]

    def wait_for(self, line: str, count: int = 1, timeout: float = 30.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.messages(line)
            if len(found) >= count:
                return found
            time.sleep(0.02)
        with self.lock:
            raise AssertionError(f"{count} x {line!r} not received; got {self.received!r}")

    def close(self) -> None:
        self.done.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def notify(tmp_path: Path) -> Iterator[NotifySocket]:
    sock = NotifySocket(tmp_path)
    yield sock
    sock.close()


@attrs.define
class Poll:
    sent: float
    status: int | None  # None: no answer (not listening yet, or no certificate yet)


def poll_readyz_once(daemon: Daemon) -> list[Poll]:
    assert daemon.proc is not None
    if daemon.proc.poll() is not None:
        raise AssertionError(f"daemon exited:\n{daemon.log()}")
    sent = time.monotonic()
    status: int | None = None
    if (daemon.cert_dir / "apiserver.crt").exists():
        try:
            status = daemon.get("/readyz", timeout=2)[0]
        except (OSError, ssl.SSLError, http.client.HTTPException):
            pass
    time.sleep(0.02)
    return [Poll(sent, status)]


def poll_readyz(daemon: Daemon, until: Callable[[], bool], timeout: float = 30.0) -> list[Poll]:
    """Ask readyz until it answers 200 and ``until()`` holds; every poll, in order."""
    polls: list[Poll] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        polls += poll_readyz_once(daemon)
        if polls[-1].status == 200 and until():
            return polls
    raise AssertionError(f"readyz never passed with READY=1 sent:\n{daemon.log()}")


def test_ready_watchdog_and_stopping(
    start_daemon: Callable[..., Daemon], notify: NotifySocket
) -> None:
    daemon = start_daemon(
        ["--shutdown-delay-duration=2s"],
        wait=False,
        env={"NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "400000"},
    )
    polls = poll_readyz(daemon, until=lambda: bool(notify.messages("READY=1")))
    (ready,) = notify.messages("READY=1")
    first_pass = next(p for p in polls if p.status == 200)
    # READY=1 never precedes a failing readyz: every readyz asked after READY=1 arrived
    # passed. (The server's own readyz probe may pass just before the test's first 200, so
    # READY=1 may arrive before that answer, but never before a request that then failed.)
    failing_after_ready = [p for p in polls if p.status != 200 and p.sent >= ready.at]
    assert failing_after_ready == [], (ready, polls)
    assert first_pass.sent <= ready.at or all(p.status == 200 for p in polls if p.sent > ready.at)
    assert "STATUS=ready" in ready.message.split("\n")
    # The main steps came first, on the same socket.
    (serving,) = notify.messages(f"STATUS=serving on 127.0.0.1:{daemon.port}")
    (store,) = notify.messages("STATUS=store ready")
    assert serving.at <= ready.at
    assert store.at <= ready.at

    # WATCHDOG=1 every WATCHDOG_USEC / 2 = 0.2s, on and on (a lower bound on the spacing
    # only: a busy machine may delay a ping, never bring one forward).
    count = len(notify.messages("WATCHDOG=1"))
    pings = notify.wait_for("WATCHDOG=1", count=count + 5)
    gaps = [b.at - a.at for a, b in itertools.pairwise(pings)]
    assert sum(gaps) / len(gaps) >= 0.15, gaps

    # SIGTERM: STOPPING=1 at once, while the listener still answers (readyz now fails).
    assert notify.messages("STOPPING=1") == []
    daemon.signal(signal.SIGTERM)
    notify.wait_for("STOPPING=1")
    status, _, _ = daemon.get("/readyz")
    assert status == 500
    assert daemon.wait_exit(20) == 0
    assert len(notify.messages("STOPPING=1")) == 1
    assert len(notify.messages("READY=1")) == 1


def test_no_ready_while_readyz_fails(
    start_daemon: Callable[..., Daemon], notify: NotifySocket, tmp_path: Path
) -> None:
    # Its etcd starts late: the server listens and answers readyz 500 meanwhile (the etcd
    # check fails), and systemd must not hear READY=1 until the first 200.
    if ETCD is None:
        pytest.skip("etcd (Debian etcd-server) is not installed")
    etcd = EtcdServer(str(tmp_path / "etcd"))
    try:
        daemon = start_daemon(
            [f"--store-servers={etcd.client_url}"],
            wait=False,
            env={"NOTIFY_SOCKET": notify.address},
        )
        polls: list[Poll] = []
        deadline = time.monotonic() + 30
        while sum(1 for p in polls if p.status == 500) < 10:
            assert time.monotonic() < deadline, polls
            polls += poll_readyz_once(daemon)
        assert notify.messages("READY=1") == []
        assert all(p.status != 200 for p in polls)
        etcd.start()
        polls += poll_readyz(daemon, until=lambda: bool(notify.messages("READY=1")))
        (ready,) = notify.messages("READY=1")
        assert [p for p in polls if p.status != 200 and p.sent >= ready.at] == []
        first_pass = next(p for p in polls if p.status == 200)
        last_fail = max(p.sent for p in polls if p.status == 500)
        assert last_fail < ready.at
        assert first_pass.sent > last_fail
        daemon.stop()
    finally:
        etcd.stop()


def test_no_watchdog_for_another_pid(
    start_daemon: Callable[..., Daemon], notify: NotifySocket
) -> None:
    # WATCHDOG_PID names the process the watchdog is meant for (sd_watchdog_enabled(3)).
    daemon = start_daemon(
        env={"NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "400000", "WATCHDOG_PID": "1"},
    )
    notify.wait_for("READY=1")
    daemon.stop()
    assert daemon.wait_exit(20) == 0
    assert notify.messages("WATCHDOG=1") == []
    assert len(notify.messages("STOPPING=1")) == 1


def test_journal_format_when_output_is_the_journal(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    # The log file stands for journald's stream socket: JOURNAL_STREAM names its device and
    # inode, as systemd sets it for StandardOutput=journal.
    workdir = tmp_path / "journal"
    workdir.mkdir()
    log_path = workdir / "daemon.log"
    log_path.touch()
    stat = os.stat(log_path)
    daemon = Daemon(workdir, env={"JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"})
    try:
        daemon.start()
        daemon.get("/readyz?exclude=nonexistent")
    finally:
        daemon.stop()
    lines = daemon.log().splitlines()
    assert any(re.fullmatch(r"<6>\[\S+\] twistd \S+ \(.*\) starting up\.", ln) for ln in lines)
    assert "<6>[apiserver.service.store#info] storage is ready" in lines, lines
    assert any(line.startswith("<4>[apiserver.auth.authn#warn] ") for line in lines), lines
    # No line carries twistd's timestamp (journald stamps each record itself).
    assert not [line for line in lines if re.match(r"\d{4}-\d\d-\d\dT", line)], lines
    prefixed = [line for line in lines if re.match(r"<[0-7]>", line)]
    assert len(prefixed) >= len(lines) - 2, lines


def test_plain_format_when_journal_stream_is_another_file(
    start_daemon: Callable[..., Daemon],
) -> None:
    # An inherited JOURNAL_STREAM that is not our output (systemd.exec(5)): twistd's format.
    daemon = start_daemon(env={"JOURNAL_STREAM": "1:1"})
    daemon.stop()
    lines = daemon.log().splitlines()
    assert any(re.match(r"\d{4}-\d\d-\d\dT.* \[\S+\] twistd .* starting up\.", ln) for ln in lines)
    assert not [line for line in lines if line.startswith("<6>")]
