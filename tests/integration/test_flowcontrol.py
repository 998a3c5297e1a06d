"""Overload protection against the real daemon: max-in-flight 429s, priority and fairness
under a flood, the PF headers, ``kubectl get flowschemas`` and the debug dumps."""

from __future__ import annotations

import http.client
import json
import ssl
import subprocess
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon, write_kubeconfig

pytestmark = pytest.mark.integration

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
BODY_429 = b"Too many requests, please try again later.\n"


def tokens_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.csv"
    path.write_text("tok-flood,flooder,u1\ntok-quiet,quiet,u2\n")
    return path


def call(
    daemon: Daemon, method: str, path: str, token: str, body: bytes | None = None
) -> tuple[int, dict[str, str], bytes]:
    """A request authenticated by a bearer token only (no client certificate)."""
    ctx = ssl.create_default_context(cafile=str(daemon.cert_dir / "apiserver.crt"))
    ctx.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", daemon.port, context=ctx, timeout=60)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    try:
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_max_in_flight_429s_with_priority_and_fairness_off(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    daemon = start_daemon(
        [
            f"--token-auth-file={tokens_file(tmp_path)}",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=1",
            "--max-mutating-requests-inflight=1",
        ]
    )
    # Creates wait for the SQLite writer (a durable commit each), so parallel ones overlap.
    with ThreadPoolExecutor(40) as pool:
        results = list(
            pool.map(
                lambda i: call(daemon, "POST", EVENTS, "tok-flood", event_body(f"e{i}")),
                range(120),
            )
        )
    codes = [status for status, _, _ in results]
    assert set(codes) <= {201, 429}
    assert 429 in codes and 201 in codes
    _, headers, body = next(r for r in results if r[0] == 429)
    assert body == BODY_429
    assert headers["retry-after"] == "1"
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert "x-kubernetes-pf-flowschema-uid" not in headers
    # system:masters is exempt from the limit.
    assert daemon.get("/livez")[0] == 200
    _, _, metrics = daemon.get("/metrics")
    assert b'apiserver_request_terminations_total{code="429"' in metrics


def test_fairness_under_a_flood(start_daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    """One user floods with ten times the capacity of global-default; the other user's
    requests keep completing and /livez keeps answering within a second."""
    daemon = start_daemon(
        [
            f"--token-auth-file={tokens_file(tmp_path)}",
            "--max-requests-inflight=2",
            "--max-mutating-requests-inflight=2",  # global-default: ceil(4 * 20 / 245) = 1
        ]
    )
    stop = threading.Event()
    flood_codes: list[int] = []

    def flood(worker: int) -> None:
        n = 0
        while not stop.is_set():
            n += 1
            flood_codes.append(
                call(daemon, "POST", EVENTS, "tok-flood", event_body(f"f{worker}-{n}"))[0]
            )

    threads = [threading.Thread(target=flood, args=(i,)) for i in range(10)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        quiet_codes = []
        livez_times = []
        for i in range(5):
            status, _, _ = call(daemon, "POST", EVENTS, "tok-quiet", event_body(f"q{i}"))
            quiet_codes.append(status)
            started = time.monotonic()
            assert call(daemon, "GET", "/livez", "tok-quiet")[0] == 200
            livez_times.append(time.monotonic() - started)
        _, _, dump = daemon.get("/debug/api_priority_and_fairness/dump_priority_levels")
    finally:
        stop.set()
        for thread in threads:
            thread.join(60)
    assert quiet_codes == [201] * 5
    assert max(livez_times) < 1.0, livez_times
    assert set(flood_codes) <= {201, 429}
    assert dump.startswith(b"PriorityLevelName, ")
    row = next(line for line in dump.decode().splitlines() if line.startswith("global-default"))
    dispatched = int(row.split(",")[6])
    assert dispatched > 0 and 201 in flood_codes


def test_pf_headers_kubectl_and_dumps(start_daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    daemon = start_daemon([f"--token-auth-file={tokens_file(tmp_path)}"])
    _, _, fs_list = daemon.get("/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas")
    uids = {
        item["metadata"]["name"]: item["metadata"]["uid"] for item in json.loads(fs_list)["items"]
    }
    _, _, pl_list = daemon.get("/apis/flowcontrol.apiserver.k8s.io/v1/prioritylevelconfigurations")
    pl_uids = {
        item["metadata"]["name"]: item["metadata"]["uid"] for item in json.loads(pl_list)["items"]
    }
    status, headers, _ = call(daemon, "GET", EVENTS, "tok-quiet")
    assert status == 200
    assert headers["x-kubernetes-pf-flowschema-uid"] == uids["global-default"]
    assert headers["x-kubernetes-pf-prioritylevel-uid"] == pl_uids["global-default"]
    _, headers, _ = call(daemon, "GET", "/readyz", "tok-quiet")
    assert headers["x-kubernetes-pf-flowschema-uid"] == uids["probes"]
    assert headers["x-kubernetes-pf-prioritylevel-uid"] == pl_uids["exempt"]
    _, headers, _ = daemon.get("/version")
    assert headers["x-kubernetes-pf-flowschema-uid"] == uids["exempt"]
    assert len(uids) == 11 and len(pl_uids) == 8

    status, _, body = daemon.get(
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas", method="POST", body=b"{}"
    )
    assert status == 405

    kubeconfig = write_kubeconfig(daemon, tmp_path / "kubeconfig")
    out = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", "get", "flowschemas,prioritylevelconfigurations"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "flowschema.flowcontrol.apiserver.k8s.io/global-default" in out.stdout
    assert "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/workload-low" in out.stdout
    out = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", "get", "flowschema", "probes", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["spec"]["matchingPrecedence"] == 2

    for name, header in (
        ("dump_priority_levels", ["PriorityLevelName", "ActiveQueues", "IsIdle"]),
        ("dump_queues", ["PriorityLevelName", "Index", "PendingRequests"]),
        ("dump_requests", ["PriorityLevelName", "FlowSchemaName", "QueueIndex"]),
    ):
        status, headers, body = daemon.get(f"/debug/api_priority_and_fairness/{name}")
        assert status == 200, name
        first = body.decode().splitlines()[0]
        assert [cell.strip() for cell in first.split(",")][:3] == header, first
    _, _, metrics = daemon.get("/metrics")
    assert b"apiserver_flowcontrol_dispatched_requests_total" in metrics
    assert b'apiserver_flowcontrol_current_limit_seats{priority_level="global-default"} 49.0' in (
        metrics
    )


def test_http2_requests_release_their_seats(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """Over HTTP/2 (curl, one connection, 20 streams in parallel) every request carries the
    PF headers and gives its seat back when its stream ends."""
    daemon = start_daemon([f"--token-auth-file={tokens_file(tmp_path)}"])
    url = daemon.url + EVENTS
    out = subprocess.run(
        [
            "curl", "-sS", "--http2", "--parallel", "--parallel-max", "20",
            "--cacert", str(daemon.cert_dir / "apiserver.crt"),
            "-H", "Authorization: Bearer tok-quiet", "-D", "-", "-o", "/dev/null",
            *([url] * 20),
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("HTTP/2 200") == 20
    assert out.stdout.lower().count("x-kubernetes-pf-prioritylevel-uid") == 20
    _, _, dump = daemon.get("/debug/api_priority_and_fairness/dump_priority_levels")
    row = next(line for line in dump.decode().splitlines() if line.startswith("global-default"))
    cells = [cell.strip() for cell in row.split(",")]
    assert cells[5] == "0"  # ExecutingRequests
    assert int(cells[6]) >= 20  # DispatchedRequests


def test_max_in_flight_read_only_limit_is_separate(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """Lists read from SQLite (no watch cache) overlap; with --max-requests-inflight=1 some
    are refused while the mutating limit (0: no limit) refuses no create."""
    daemon = start_daemon(
        [
            f"--token-auth-file={tokens_file(tmp_path)}",
            "--enable-priority-and-fairness=false",
            "--watch-cache=false",
            "--max-requests-inflight=1",
            "--max-mutating-requests-inflight=0",
        ]
    )
    with ThreadPoolExecutor(20) as pool:
        created = list(
            pool.map(
                lambda i: call(daemon, "POST", EVENTS, "tok-flood", event_body(f"r{i}"))[0],
                range(60),
            )
        )
        assert created == [201] * 60
        listed = list(pool.map(lambda i: call(daemon, "GET", EVENTS, "tok-flood"), range(120)))
    codes = [status for status, _, _ in listed]
    assert set(codes) <= {200, 429} and 200 in codes
    assert 429 in codes
    assert next(body for status, _, body in listed if status == 429) == BODY_429
