"""``--workers``: the real daemon with several worker processes on one port, on the embedded
store and on etcd (issue 19). A watch on one connection receives every write made over
other connections (which the kernel spreads over the workers) in order with no gap; kill -9
of a worker under load loses no acknowledged write and the parent restarts it; SIGTERM of
the parent runs the graceful shutdown in every worker and the parent exits 0."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon
from tests.storage.etcdserver import EtcdServer

EVENTS = "/apis/events.k8s.io/v1/namespaces/{ns}/events"


def backend_args(backend: str, request: pytest.FixtureRequest) -> list[str]:
    if backend == "etcd3":
        server: EtcdServer = request.getfixturevalue("etcd")
        return [f"--store-servers={server.client_url}"]
    return []


def worker_pids(daemon: Daemon) -> list[int]:
    """The worker processes: children of the supervisor."""
    assert daemon.proc is not None
    pid = daemon.proc.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return sorted(int(c) for c in children)


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def post(daemon: Daemon, name: str, ns: str) -> int:
    status, _, _ = daemon.get(
        EVENTS.format(ns=ns),
        method="POST",
        headers={"Content-Type": "application/json"},
        body=event_body(name, ns),
    )
    return status


def workers_answering(daemon: Daemon, tries: int = 40) -> set[str]:
    """Worker indexes seen in /metrics over fresh connections."""
    seen = set()
    for _ in range(tries):
        _, _, body = daemon.get("/metrics")
        match = re.search(rb'apiserver_worker_info\{worker="(\d+)"', body)
        assert match is not None
        seen.add(match.group(1).decode())
    return seen


@pytest.mark.parametrize(
    ("backend", "workers"), [("sqlite", 2), ("sqlite", 4), ("etcd3", 2), ("etcd3", 4)]
)
def test_a_watch_on_one_worker_sees_every_write_through_the_others_in_order(
    start_daemon: Callable[..., Daemon],
    request: pytest.FixtureRequest,
    backend: str,
    workers: int,
) -> None:
    daemon = start_daemon([f"--workers={workers}", *backend_args(backend, request)])
    assert len(worker_pids(daemon)) == workers
    wait_for(lambda: len(workers_answering(daemon, 10)) >= 2, 30, "two workers answering")
    ns = "w-" + uuid.uuid4().hex[:6]
    _, _, body = daemon.get(EVENTS.format(ns=ns))
    rv = json.loads(body)["metadata"]["resourceVersion"]
    conn = http.client.HTTPSConnection(
        "127.0.0.1", daemon.port, context=daemon.ssl_context(), timeout=60
    )
    conn.request("GET", EVENTS.format(ns=ns) + f"?watch=1&resourceVersion={rv}&timeoutSeconds=50")
    response = conn.getresponse()
    assert response.status == 200
    names = [f"e{i:03d}" for i in range(60)]
    for name in names:  # one connection each: the kernel spreads them over the workers
        assert post(daemon, name, ns) == 201
        # read-your-writes whichever worker answers the read
        assert daemon.get(EVENTS.format(ns=ns) + "/" + name)[0] == 200
    seen: list[str] = []
    versions = []
    while len(seen) < len(names):
        event = json.loads(response.readline())
        assert event["type"] == "ADDED"
        seen.append(event["object"]["metadata"]["name"])
        versions.append(int(event["object"]["metadata"]["resourceVersion"]))
    conn.close()
    assert seen == names  # every write, in the order it was acknowledged
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    # a list answered by any worker has them all
    for _ in range(workers * 2):
        _, _, body = daemon.get(EVENTS.format(ns=ns))
        assert sorted(i["metadata"]["name"] for i in json.loads(body)["items"]) == names


@pytest.mark.parametrize("backend", ["sqlite", "etcd3"])
def test_kill_9_of_a_worker_under_load(
    start_daemon: Callable[..., Daemon], request: pytest.FixtureRequest, backend: str
) -> None:
    daemon = start_daemon(["--workers=2", *backend_args(backend, request)])
    wait_for(lambda: len(workers_answering(daemon, 10)) == 2, 30, "both workers answering")
    ns = "k-" + uuid.uuid4().hex[:6]
    acknowledged: list[str] = []
    failures: list[str] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"k{w}-{i}"
            try:
                if post(daemon, name, ns) == 201:
                    acknowledged.append(name)
            except (OSError, http.client.HTTPException) as error:
                failures.append(repr(error))  # the connection the killed worker held
            i += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: len(acknowledged) >= 60, 60, "writes before the kill")
        victim = worker_pids(daemon)[0]
        os.kill(victim, signal.SIGKILL)
        before = len(acknowledged)
        # the others keep serving while the parent restarts the victim
        wait_for(lambda: len(acknowledged) >= before + 60, 60, "writes after the kill")
        wait_for(
            lambda: len(worker_pids(daemon)) == 2 and victim not in worker_pids(daemon),
            60,
            "the restarted worker",
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert "restarting it in" in daemon.log()
    daemon.wait_ready(60)
    wait_for(lambda: workers_answering(daemon, 20) == {"0", "1"}, 60, "both workers serving")
    for _ in range(4):
        _, _, body = daemon.get(EVENTS.format(ns=ns))
        stored = {item["metadata"]["name"] for item in json.loads(body)["items"]}
        assert [n for n in acknowledged if n not in stored] == []


@pytest.mark.parametrize("backend", ["sqlite", "etcd3"])
def test_sigterm_runs_the_graceful_shutdown_in_every_worker(
    start_daemon: Callable[..., Daemon], request: pytest.FixtureRequest, backend: str
) -> None:
    daemon = start_daemon(
        ["--workers=2", "--shutdown-delay-duration=8s", *backend_args(backend, request)]
    )
    pids = worker_pids(daemon)
    # The daemon is ready once one worker answers: wait for both before the signal.
    wait_for(lambda: len(workers_answering(daemon, 10)) == 2, 30, "both workers answering")
    daemon.signal(signal.SIGTERM)
    # During the shutdown delay every worker still serves, and its readyz fails.
    seen: set[bytes] = set()
    time.sleep(0.5)  # the signal reaches the workers
    for _ in range(30):
        if seen == {b"0", b"1"}:
            break
        status, _, body = daemon.get("/readyz?verbose=1")
        assert status == 500 and b"shutdown" in body
        _, _, metrics = daemon.get("/metrics")
        match = re.search(rb'apiserver_worker_info\{worker="(\d+)"', metrics)
        assert match is not None
        seen.add(match.group(1))
    assert seen == {b"0", b"1"}
    assert daemon.wait_exit(60) == 0
    log = daemon.log()
    assert log.count("starting graceful shutdown") == 2
    assert "[worker-0 apiserver.service.lifecycle#info] received signal" in log
    assert "[worker-1 apiserver.service.lifecycle#info] received signal" in log
    assert log.count("in-flight requests drained") == 2
    for pid in pids:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(
            f"/proc/{pid}/status"
        ).read_text(errors="replace")


def answers_while(daemon: Daemon, path: str, until: Callable[[int], bool]) -> list[int]:
    """Statuses of GETs of ``path``, each on a fresh connection (so the kernel spreads them
    over the listening workers), until ``until(number of answers)``; a connection refused
    or reset (nothing listens yet, a worker killed) is no answer."""
    statuses: list[int] = []
    deadline = time.monotonic() + 90
    while not until(len(statuses)):
        assert time.monotonic() < deadline, f"answers so far: {statuses}"
        if not (daemon.cert_dir / "apiserver.crt").exists():
            time.sleep(0.01)
            continue
        try:
            statuses.append(daemon.get(path, timeout=10)[0])
        except (OSError, http.client.HTTPException):
            time.sleep(0.01)
    return statuses


@pytest.mark.parametrize("backend", ["sqlite", "etcd3"])
def test_a_worker_takes_connections_only_once_it_can_serve_them(
    start_daemon: Callable[..., Daemon], request: pytest.FixtureRequest, backend: str
) -> None:
    """From the first connection the port accepts, and while a killed worker is restarted,
    every request is answered as a ready server answers it (404 for a missing event): a
    worker whose store is still opening does not listen (it used to answer 500 "store is
    starting")."""
    daemon = start_daemon(["--workers=4", *backend_args(backend, request)], wait=False)
    path = EVENTS.format(ns="nowhere") + "/missing"
    statuses = answers_while(daemon, path, lambda count: count >= 200)
    assert set(statuses) == {404}, statuses
    victim = worker_pids(daemon)[0]
    os.kill(victim, signal.SIGKILL)

    def restarted(_: int) -> bool:
        pids = worker_pids(daemon)
        return victim not in pids and len(pids) == 4

    statuses = answers_while(daemon, path, restarted)
    statuses += answers_while(daemon, path, lambda count: count >= 200)
    assert set(statuses) == {404}, statuses


def test_a_lone_server_answers_what_comes_while_its_store_opens(
    start_daemon: Callable[..., Daemon],
) -> None:
    """One worker listens at once (its health endpoints answer during start-up, as
    kube-apiserver's do); a request that reaches it while the embedded store opens waits
    for the open instead of failing with 500 "store is starting"."""
    daemon = start_daemon(["--workers=1"], wait=False)
    statuses = answers_while(daemon, EVENTS.format(ns="nowhere") + "/missing", lambda n: n >= 100)
    assert set(statuses) == {404}, statuses


def test_a_bad_workers_value_stops_start_up(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--workers=none"], wait=False)
    assert daemon.wait_exit(30) != 0
    assert "--workers: invalid value 'none'" in daemon.log()


def test_workers_that_cannot_listen_stop_the_supervisor_with_status_1(
    start_daemon: Callable[..., Daemon],
) -> None:
    """The port held by another program: every worker dies at start-up; after a few quick
    tries the supervisor gives up and exits 1, as a lone server that cannot listen does."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    try:
        port = holder.getsockname()[1]
        daemon = start_daemon(["--workers=2"], wait=False, port=port)
        assert daemon.wait_exit(60) == 1
        assert "no worker has started: stopping" in daemon.log()
    finally:
        holder.close()


def test_systemd_hears_ready_once_every_worker_is_ready(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    from tests.integration.test_sdnotify import NotifySocket

    notify = NotifySocket(tmp_path)
    try:
        daemon = start_daemon(
            ["--workers=2"],
            wait=False,
            env={"NOTIFY_SOCKET": notify.address, "WATCHDOG_USEC": "2000000"},
        )
        (ready,) = notify.wait_for("READY=1", timeout=60)
        assert "STATUS=ready: 2 workers" in ready.message.split("\n")
        # every worker answers readyz by then
        assert {daemon.get("/readyz")[0] for _ in range(10)} == {200}
        notify.wait_for("WATCHDOG=1", count=2)
        daemon.signal(signal.SIGTERM)
        notify.wait_for("STOPPING=1")
        assert daemon.wait_exit(60) == 0
        assert len(notify.messages("READY=1")) == 1
        # the workers' own messages went to the supervisor, not to systemd
        assert notify.messages("STATUS=store ready") == []
    finally:
        notify.close()


def test_each_worker_writes_its_own_audit_log(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """With --audit-log-path, worker i writes audit.worker-i.log (its own rotation); every
    request's events are in exactly one of them, whichever worker answered."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
    logs = tmp_path / "audit"
    daemon = start_daemon(
        [
            "--workers=2",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={logs / 'audit.log'}",
        ]
    )
    wait_for(lambda: len(workers_answering(daemon, 10)) == 2, 30, "both workers answering")
    ns = "a-" + uuid.uuid4().hex[:6]
    ids = []
    for index in range(20):  # one connection each: both workers answer some
        status, headers, _ = daemon.get(
            EVENTS.format(ns=ns),
            method="POST",
            headers={"Content-Type": "application/json"},
            body=event_body(f"e{index}", ns),
        )
        assert status == 201
        ids.append(headers["audit-id"])

    def stages() -> dict[str, dict[str, list[str]]]:
        found: dict[str, dict[str, list[str]]] = {}
        for path in sorted(logs.glob("audit.worker-*.log")):
            for line in path.read_text().splitlines():
                event = json.loads(line)
                found.setdefault(path.name, {}).setdefault(event["auditID"], []).append(
                    event["stage"]
                )
        return found

    def complete() -> bool:
        seen = [i for per_file in stages().values() for i, s in per_file.items() if len(s) == 2]
        return all(i in seen for i in ids)

    wait_for(complete, 10, "every request's ResponseComplete")
    found = stages()
    assert set(found) == {"audit.worker-0.log", "audit.worker-1.log"}
    assert not (logs / "audit.log").exists()
    for audit_id in ids:
        holders = [name for name, per_file in found.items() if audit_id in per_file]
        assert len(holders) == 1, (audit_id, holders)
        assert found[holders[0]][audit_id] == ["RequestReceived", "ResponseComplete"]
