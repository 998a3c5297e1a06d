"""Shutdown of the real daemon: SIGTERM with a delay, retry-after mode, second signal, bad flags."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.integration.daemon import REPO, TWISTD, Daemon, source_env


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_sigterm_with_shutdown_delay(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--shutdown-delay-duration=3s"])
    daemon.signal(signal.SIGTERM)
    wait_for(lambda: daemon.get("/readyz")[0] == 500)
    status, _, body = daemon.get("/readyz?verbose")
    assert status == 500
    assert body.decode().endswith("[-]shutdown failed: reason withheld\nreadyz check failed\n")
    assert daemon.get("/readyz/shutdown")[2] == b"internal server error: process is shutting down\n"
    assert daemon.get("/livez")[0] == 200
    assert daemon.get("/healthz")[0] == 200
    assert daemon.wait_exit(20) == 0


def test_send_retry_after_answers_429(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(
        ["--shutdown-delay-duration=1s", "--shutdown-send-retry-after", "--request-timeout=5s"]
    )
    daemon.signal(signal.SIGTERM)
    # Requests are served (200) until the shutdown delay has passed; then they get 429, or the
    # connection is refused once nothing is in flight and the listener has closed.
    deadline = time.monotonic() + 20
    while True:
        try:
            status, headers, body = daemon.get("/version")
        except OSError:
            # Drained already (nothing in flight): the 429 window was empty; a clean exit.
            assert daemon.wait_exit(10) == 0
            return
        if status != 200:
            break
        assert time.monotonic() < deadline, "still answering 200 long after the shutdown delay"
        time.sleep(0.05)
    assert status == 429
    assert headers["retry-after"] == "5"
    assert headers["connection"] == "close"
    assert body == b"The apiserver is shutting down, please try again later.\n"
    assert daemon.wait_exit(20) == 0


def test_second_signal_exits_at_once(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--shutdown-delay-duration=30s"])
    daemon.signal(signal.SIGTERM)
    wait_for(lambda: daemon.get("/readyz")[0] == 500)
    daemon.signal(signal.SIGINT)
    assert daemon.wait_exit(5) == 1


def test_bad_flag_values_stop_startup(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            TWISTD,
            "--nodaemon",
            "--pidfile=",
            "apiserver",
            "--secure-port=0",
            "--goaway-chance=0.5",
            "--shutdown-delay-duration=abc",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=source_env(),
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "--secure-port" in text
    assert "--goaway-chance" in text
    assert "--shutdown-delay-duration" in text


def test_twistd_help_after_readme_install(tmp_path: Path) -> None:
    """`twistd apiserver --help` works with the installed package alone (no source paths)."""
    bindir = Path(sys.executable).parent
    twistd = bindir / "twistd"
    assert twistd.exists(), "twistd is not installed next to the test interpreter"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run(
        [str(twistd), "apiserver", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "--secure-port" in out.stdout
    assert "--store-servers" in out.stdout
    console = subprocess.run(
        [str(bindir / "apiserver"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert console.returncode == 0, console.stderr
    assert "--secure-port" in console.stdout
    assert str(REPO / "src") not in env.get("PYTHONPATH", "")


def test_installed_package_serves_without_source_paths(tmp_path: Path) -> None:
    """The README's install alone (no source tree on PYTHONPATH) runs the whole server."""
    bindir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    daemon = Daemon(tmp_path / "installed")
    command = daemon.command()
    command[0] = str(bindir / "apiserver")
    del command[1:4]  # the console script adds --nodaemon, --pidfile= and the plugin name
    daemon.prepare()
    log = open(daemon.log_path, "ab")
    daemon.proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path
    )
    log.close()
    try:
        daemon.wait_ready(60)
        status, _, body = daemon.get("/apis/events.k8s.io/v1/namespaces/default/events")
        assert status == 200, body
        assert b'"kind":"EventList"' in body
    finally:
        daemon.stop()
