"""Overload protection against the real daemon: max-in-flight 429s, priority and fairness
under a flood, the PF headers, ``kubectl get flowschemas`` and the debug dumps, and the
stored configuration changed with kubectl (on SQLite, and on etcd shared by two servers)."""

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
    assert status == 422, body  # writes are served: an empty object is invalid

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
    # The nominal limit; the current one moves with borrowing every 10 s.
    assert b'apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"} 49.0' in (
        metrics
    )
    assert b'apiserver_flowcontrol_current_limit_seats{priority_level="global-default"}' in (
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


FLOWCONTROL = "/apis/flowcontrol.apiserver.k8s.io/v1"
TINY_LEVEL = """\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: tiny
spec:
  type: Limited
  limited:
    nominalConcurrencyShares: 1
    lendablePercent: 0
    borrowingLimitPercent: 0
    limitResponse:
      type: Queue
      queuing: {queues: 1, handSize: 1, queueLengthLimit: 1}
"""
FLOODER_SCHEMA = """\
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: flooder
spec:
  priorityLevelConfiguration: {name: tiny}
  matchingPrecedence: 50
  distinguisherMethod: {type: ByUser}
  rules:
  - subjects:
    - kind: User
      user: {name: flooder}
    resourceRules:
    - verbs: ["*"]
      apiGroups: ["*"]
      resources: ["*"]
      namespaces: ["*"]
      clusterScope: true
"""


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    out = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
    )
    assert out.returncode == 0, (args, out.stderr)
    return out.stdout


def flood(daemon: Daemon, token: str, count: int, workers: int) -> list[int]:
    with ThreadPoolExecutor(workers) as pool:
        return [
            r[0]
            for r in pool.map(
                lambda i: call(daemon, "POST", EVENTS, token, event_body(f"{token}-{i}")),
                range(count),
            )
        ]


def wait_for(predicate: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def schema_uid_of(daemon: Daemon, token: str) -> str:
    return call(daemon, "GET", EVENTS, token)[1]["x-kubernetes-pf-flowschema-uid"]


def test_kubectl_sends_a_user_to_a_tiny_level(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """kubectl creates a PriorityLevelConfiguration with one seat and a queue of one, and a
    FlowSchema sending ``flooder`` there: flooder's parallel creates then get 429s while
    ``quiet``'s do not; editing and deleting the schema puts flooder back."""
    daemon = start_daemon([f"--token-auth-file={tokens_file(tmp_path)}"])
    kubeconfig = write_kubeconfig(daemon, tmp_path / "kubeconfig")
    (tmp_path / "tiny.yaml").write_text(TINY_LEVEL)
    (tmp_path / "flooder.yaml").write_text(FLOODER_SCHEMA)
    out = kubectl(kubeconfig, "create", "-f", str(tmp_path / "tiny.yaml"))
    assert "prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/tiny created" in out
    out = kubectl(kubeconfig, "create", "-f", str(tmp_path / "flooder.yaml"))
    assert "flowschema.flowcontrol.apiserver.k8s.io/flooder created" in out
    listed = kubectl(kubeconfig, "get", "flowschemas")
    assert "flooder" in listed and "tiny" in listed
    _, _, body = daemon.get(FLOWCONTROL + "/flowschemas/flooder")
    created = json.loads(body)
    wait_for(lambda: schema_uid_of(daemon, "tok-flood") == created["metadata"]["uid"])
    # The Dangling condition the config consumer writes.
    wait_for(
        lambda: (
            json.loads(daemon.get(FLOWCONTROL + "/flowschemas/flooder")[2])
            .get("status", {})
            .get("conditions", [{}])[0]
            .get("reason")
            == "Found"
        )
    )

    codes = flood(daemon, "tok-flood", 60, 20)
    assert 429 in codes and set(codes) <= {201, 429}, codes
    quiet = flood(daemon, "tok-quiet", 60, 20)
    assert set(quiet) == {201}, quiet
    _, _, dump = daemon.get("/debug/api_priority_and_fairness/dump_priority_levels")
    assert any(line.startswith("tiny") for line in dump.decode().splitlines())
    _, _, metrics = daemon.get("/metrics")
    assert b'apiserver_flowcontrol_rejected_requests_total{flow_schema="flooder"' in metrics
    assert b'apiserver_flowcontrol_nominal_limit_seats{priority_level="tiny"} 3.0' in metrics

    # An edit (kubectl patch, as kubectl edit sends) to a user nobody is: flooder is back
    # on global-default.
    kubectl(
        kubeconfig,
        "patch",
        "flowschema",
        "flooder",
        "--type=merge",
        "-p",
        '{"spec":{"rules":[{"subjects":[{"kind":"User","user":{"name":"nobody"}}],'
        '"nonResourceRules":[{"verbs":["get"],"nonResourceURLs":["/nothing"]}]}]}}',
    )
    _, _, body = daemon.get(FLOWCONTROL + "/flowschemas/flooder")
    assert json.loads(body)["metadata"]["generation"] == 2
    # kubectl replace (PUT of an edited copy) and a strategic merge patch (kubectl edit's).
    edited = json.loads(kubectl(kubeconfig, "get", "flowschema", "flooder", "-o", "json"))
    edited["spec"]["matchingPrecedence"] = 60
    out = kubectl(kubeconfig, "replace", "-f", "-", stdin=json.dumps(edited))
    assert "flowschema.flowcontrol.apiserver.k8s.io/flooder replaced" in out
    kubectl(
        kubeconfig,
        "patch",
        "flowschema",
        "flooder",
        "-p",
        '{"metadata":{"labels":{"edited":"yes"}},"spec":{"matchingPrecedence":70}}',
    )
    _, _, body = daemon.get(FLOWCONTROL + "/flowschemas/flooder")
    patched = json.loads(body)
    assert patched["spec"]["matchingPrecedence"] == 70
    assert patched["metadata"]["labels"] == {"edited": "yes"}
    assert patched["metadata"]["generation"] == 4
    global_default = json.loads(daemon.get(FLOWCONTROL + "/flowschemas/global-default")[2])
    wait_for(lambda: schema_uid_of(daemon, "tok-flood") == global_default["metadata"]["uid"])
    out = kubectl(kubeconfig, "delete", "flowschema", "flooder")
    assert 'flowschema.flowcontrol.apiserver.k8s.io "flooder" deleted' in out
    assert daemon.get(FLOWCONTROL + "/flowschemas/flooder")[0] == 404

    # Validation with kube's texts; the mandatory objects are restored by the ensurer.
    bad = TINY_LEVEL.replace("name: tiny", "name: tiny2").replace("handSize: 1", "handSize: 2")
    out_bad = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", "create", "-f", "-"],
        input=bad,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out_bad.returncode != 0
    assert (
        "spec.limited.limitResponse.queuing.handSize: Invalid value: 2: should not be "
        "greater than queues (1)" in out_bad.stderr
    )
    status, _, _ = daemon.get(FLOWCONTROL + "/flowschemas/catch-all", method="DELETE")
    assert status == 200


def test_two_servers_on_one_etcd_share_the_configuration(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """A FlowSchema created through one server sends flooder to the tiny level on the
    other too."""
    import shutil

    from tests.storage.etcdserver import EtcdServer

    if shutil.which("etcd") is None:
        pytest.skip("etcd (Debian etcd-server) is not installed")
    etcd = EtcdServer(str(tmp_path / "etcd"))
    etcd.start()
    try:
        tokens = tokens_file(tmp_path)
        args = [f"--store-servers={etcd.client_url}", f"--token-auth-file={tokens}"]
        first = start_daemon(args, name="first")
        second = start_daemon(args, name="second")
        # Both ensured the same bootstrap objects: the same uids on both.
        uids = [
            json.loads(d.get(FLOWCONTROL + "/flowschemas/global-default")[2])["metadata"]["uid"]
            for d in (first, second)
        ]
        assert uids[0] == uids[1]
        kubeconfig = write_kubeconfig(first, tmp_path / "kubeconfig")
        kubectl(kubeconfig, "create", "-f", "-", stdin=TINY_LEVEL)
        kubectl(kubeconfig, "create", "-f", "-", stdin=FLOODER_SCHEMA)
        _, _, body = first.get(FLOWCONTROL + "/flowschemas/flooder")
        uid = json.loads(body)["metadata"]["uid"]
        wait_for(lambda: schema_uid_of(second, "tok-flood") == uid)
        codes = flood(second, "tok-flood", 60, 20)
        assert 429 in codes, codes
        assert set(flood(second, "tok-quiet", 40, 20)) == {201}
        kubectl(kubeconfig, "delete", "flowschema", "flooder")
        wait_for(lambda: schema_uid_of(second, "tok-flood") == uids[0])
    finally:
        etcd.stop()


def test_borrowing_moves_the_current_limits(start_daemon: Callable[..., Daemon]) -> None:
    """Every 10 s the current limits are reallocated from the seat demand: idle
    workload-low lends most of its nominal seats (lendablePercent 90)."""
    daemon = start_daemon()

    def current(level: str) -> float | None:
        _, _, metrics = daemon.get("/metrics")
        prefix = f'apiserver_flowcontrol_current_limit_seats{{priority_level="{level}"}} '
        for line in metrics.decode().splitlines():
            if line.startswith(prefix):
                return float(line[len(prefix) :])
        return None

    wait_for(lambda: current("workload-low") not in (None, 245.0), seconds=30)
    value = current("workload-low")
    assert value is not None and value < 245.0
    _, _, metrics = daemon.get("/metrics")
    assert b"apiserver_flowcontrol_seat_fair_frac " in metrics
    assert b'apiserver_flowcontrol_target_seats{priority_level="workload-low"}' in metrics
