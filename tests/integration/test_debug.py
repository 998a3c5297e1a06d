"""/debug/pprof, /debug/flags/v, --debug-socket-path, /logs and start-up file checks on the
real daemon (apiserver.debug, apiserver.options.files)."""

from __future__ import annotations

import http.client
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from apiserver.debug.profile_proto import decode
from tests.integration.daemon import Daemon

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


@pytest.fixture
def load(daemon: Daemon) -> Iterator[None]:
    """Requests to the daemon from a thread while the test runs."""
    stop = threading.Event()

    def run() -> None:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", daemon.port, context=daemon.ssl_context(), timeout=10
        )
        while not stop.is_set():
            conn.request("GET", EVENTS)
            conn.getresponse().read()
        conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(15)


def functions(profile: object) -> set[str]:
    table = profile.string_table  # type: ignore[attr-defined]
    return {table[f.name] for f in profile.function}  # type: ignore[attr-defined]


def test_cpu_profile_under_load_holds_the_servers_hot_functions(daemon: Daemon, load: None) -> None:
    status, headers, body = daemon.get("/debug/pprof/profile?seconds=3", timeout=30)
    assert status == 200, body
    assert headers["content-type"] == "application/octet-stream"
    assert body[:2] == b"\x1f\x8b"  # gzip, as go tool pprof expects
    profile = decode(body)
    table = profile.string_table
    assert [table[t.type] for t in profile.sample_type] == ["samples", "cpu"]
    assert profile.duration_nanos >= 1_000_000_000
    names = functions(profile)
    # The server's own code is in it (which of its functions a 3 s sample catches varies
    # on a busy machine; the request path's are the likeliest).
    ours = {name for name in names if name.startswith("apiserver.")}
    assert ours, sorted(names)[:50]
    total = sum(s.value[1] for s in profile.sample)
    assert total > 0


def test_heap_and_goroutine_profiles(daemon: Daemon) -> None:
    status, _, body = daemon.get("/debug/pprof/heap?seconds=1", timeout=30)
    assert status == 200
    heap = decode(body)
    assert [heap.string_table[t.type] for t in heap.sample_type] == [
        "alloc_objects",
        "alloc_space",
        "inuse_objects",
        "inuse_space",
    ]
    status, _, body = daemon.get("/debug/pprof/goroutine?debug=2")
    assert status == 200
    text = body.decode()
    assert "[MainThread]:" in text and "twisted" in text
    assert "[reactor call in " in text
    status, _, body = daemon.get("/debug/pprof/goroutine?debug=1")
    assert body.decode().startswith("goroutine profile: total ")
    assert daemon.get("/debug/pprof")[0] == 302
    # Unlisted in the / index, as kube-apiserver's UnlistedHandle leaves them.
    assert b"/debug/pprof" not in daemon.get("/")[2]


def test_profiling_off_leaves_no_handler(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--profiling=false"])
    assert daemon.get("/debug/pprof/")[0] == 404
    assert daemon.get("/debug/flags/v", "PUT", body=b"3")[0] == 404


def test_debug_flags_v_turns_request_logging_on(daemon: Daemon) -> None:
    marker = f"/version?marker={uuid.uuid4().hex}"
    daemon.get(marker)
    status, _, body = daemon.get("/debug/flags/v", "PUT", body=b"3")
    assert (status, body) == (200, b"successfully set klog.logging.verbosity to 3\n")
    assert daemon.get("/debug/flags/v")[0] == 406
    later = f"/version?marker={uuid.uuid4().hex}"
    daemon.get(later)
    deadline = time.monotonic() + 10
    while later not in daemon.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert later in daemon.log()
    assert marker not in daemon.log()


def _unix_get(
    path: str, target: str, method: str = "GET", body: bytes | None = None
) -> tuple[int, bytes]:
    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(30)
            sock.connect(path)
            self.sock = sock

    conn = UnixConnection("localhost")
    try:
        conn.request(method, target, body=body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_debug_socket_serves_profiling_without_authentication(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    path = str(tmp_path / "debug.sock")
    daemon = start_daemon([f"--debug-socket-path={path}", "--profiling=false"])
    assert daemon.get("/debug/pprof/")[0] == 404  # --profiling=false on the secure port
    status, body = _unix_get(path, "/debug/pprof/cmdline")
    assert status == 200 and b"apiserver" in body
    status, body = _unix_get(path, "/debug/pprof/goroutine?debug=1")
    assert status == 200 and body.startswith(b"goroutine profile: total ")
    status, body = _unix_get(path, "/debug/flags/v", "PUT", b"2")
    assert (status, body) == (200, b"successfully set klog.logging.verbosity to 2\n")
    # Nothing else is served there.
    assert _unix_get(path, EVENTS)[0] == 404
    daemon.stop()
    assert not os.path.exists(path)


def test_debug_paths_need_authentication(daemon: Daemon) -> None:
    anonymous = Daemon(daemon.workdir, authenticate=False, port=daemon.port)
    anonymous.cert_dir = daemon.cert_dir
    assert anonymous.get("/debug/pprof/")[0] == 401
    assert anonymous.get("/logs/")[0] == 401


@pytest.mark.skipif(not os.access("/var/log", os.W_OK), reason="needs a writable /var/log")
def test_logs_serves_var_log(daemon: Daemon) -> None:
    name = f"apiserver-test-{uuid.uuid4().hex}.log"
    path = Path("/var/log") / name
    path.write_text("a log line\n")
    try:
        status, _, body = daemon.get("/logs/")
        assert status == 200 and f'<a href="{name}">'.encode() in body
        assert daemon.get(f"/logs/{name}")[2] == b"a log line\n"
        assert daemon.get("/logs/no-such-file")[0] == 404
    finally:
        path.unlink()


def test_logs_handler_off(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--enable-logs-handler=false"])
    assert daemon.get("/logs/")[0] == 404


@pytest.mark.parametrize(
    "flag",
    ["--tracing-config-file", "--egress-selector-config-file", "--allow-metric-labels-manifest"],
)
def test_a_missing_config_file_stops_start_up_naming_flag_and_file(
    start_daemon: Callable[..., Daemon], tmp_path: Path, flag: str
) -> None:
    missing = tmp_path / "missing-config.yaml"
    daemon = start_daemon([f"{flag}={missing}"], wait=False)
    assert daemon.proc is not None
    assert daemon.proc.wait(60) != 0
    log = daemon.log()
    assert flag in log and str(missing) in log, log[-2000:]


def test_version_reflects_the_emulated_version(start_daemon: Callable[..., Daemon]) -> None:
    import json

    daemon = start_daemon(["--emulated-version=1.34", "--min-compatibility-version=1.33"])
    document = json.loads(daemon.get("/version")[2])
    assert (document["major"], document["minor"]) == ("1", "35")
    assert (document["emulationMajor"], document["emulationMinor"]) == ("1", "34")
    assert document["minCompatibilityMinor"] == "33"
    # Both act: neither is logged as having no effect.
    assert "--emulated-version has no effect" not in daemon.log()
