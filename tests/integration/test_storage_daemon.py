"""Storage evidence with the real daemon: crash safety of the embedded store, two servers
sharing one etcd, and a frozen etcd turning readyz red with writes failing fast."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
import uuid
from collections.abc import Callable

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon
from tests.storage.etcdserver import EtcdServer

ETCD = shutil.which("etcd")


def post(daemon: Daemon, name: str, namespace: str = "default", timeout: float = 10) -> int:
    status, _, _ = daemon.get(
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
        method="POST",
        headers={"Content-Type": "application/json"},
        body=event_body(name, namespace),
        timeout=timeout,
    )
    return status


def test_kill_9_keeps_every_acknowledged_write(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon()
    acknowledged: list[str] = []
    stop = threading.Event()

    def writer(worker: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"crash-{worker}-{i}"
            try:
                if post(daemon, name) == 201:
                    acknowledged.append(name)
            except OSError:
                return
            i += 1

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 20
    while len(acknowledged) < 150 and time.monotonic() < deadline:
        time.sleep(0.05)
    daemon.signal(signal.SIGKILL)
    daemon.wait_exit(10)
    stop.set()
    for thread in threads:
        thread.join(10)
    assert len(acknowledged) >= 150
    restarted = Daemon(daemon.workdir, daemon.args, port=daemon.port)
    restarted.start()
    try:
        status, _, body = restarted.get("/apis/events.k8s.io/v1/namespaces/default/events")
        assert status == 200
        stored = {item["metadata"]["name"] for item in json.loads(body)["items"]}
        missing = [name for name in acknowledged if name not in stored]
        assert missing == []
    finally:
        restarted.stop()


def test_two_servers_on_one_etcd_share_watches(
    start_daemon: Callable[..., Daemon], etcd: EtcdServer
) -> None:
    args = [f"--store-servers={etcd.client_url}"]
    first = start_daemon(args, name="first")
    second = start_daemon(args, name="second")
    namespace = "shared-" + uuid.uuid4().hex[:6]
    _, _, body = first.get(f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")
    rv = json.loads(body)["metadata"]["resourceVersion"]
    import http.client

    conn = http.client.HTTPSConnection(
        "127.0.0.1", first.port, context=first.ssl_context(), timeout=15
    )
    conn.request(
        "GET",
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events?watch=1&resourceVersion={rv}"
        "&timeoutSeconds=10",
    )
    response = conn.getresponse()
    assert response.status == 200
    assert post(second, "via-second", namespace) == 201
    line = response.readline()
    conn.close()
    event = json.loads(line)
    assert event["type"] == "ADDED"
    assert event["object"]["metadata"]["name"] == "via-second"


def test_frozen_etcd_turns_readyz_red_and_writes_fail_fast(
    start_daemon: Callable[..., Daemon], etcd: EtcdServer
) -> None:
    daemon = start_daemon(
        [
            f"--store-servers={etcd.client_url}",
            "--store-healthcheck-timeout=1s",
            "--store-readycheck-timeout=1s",
        ]
    )
    assert post(daemon, "before") == 201
    etcd.pause()
    try:
        deadline = time.monotonic() + 5
        red = False
        while time.monotonic() < deadline:
            status, _, body = daemon.get("/readyz?verbose", timeout=5)
            if status == 500 and b"[-]etcd" in body:
                red = True
                break
            time.sleep(0.2)
        assert red, "readyz did not turn red within the timeout"
        # The write fails with 5xx (the store's request timeout) rather than hanging until the
        # client gives up; its latency is not asserted here (speed belongs in bench/).
        status = post(daemon, "during", timeout=30)
        assert 500 <= status < 600
        assert daemon.get("/livez/ping")[0] == 200
    finally:
        etcd.resume()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and daemon.get("/readyz")[0] != 200:
        time.sleep(0.2)
    assert daemon.get("/readyz")[0] == 200
    assert post(daemon, "after") == 201
    status, _, body = daemon.get("/apis/events.k8s.io/v1/namespaces/default/events")
    names = {i["metadata"]["name"] for i in json.loads(body)["items"]}
    assert {"before", "after"} <= names


def test_servers_override_moves_events_to_etcd(
    start_daemon: Callable[..., Daemon], etcd: EtcdServer
) -> None:
    daemon = start_daemon([f"--store-servers-overrides=/events#{etcd.client_url}"])
    status, _, body = daemon.get("/readyz?verbose")
    assert status == 200
    assert b"[+]etcd ok" in body
    assert post(daemon, "overridden") == 201
