"""etcd failover against a real three-member cluster (issue 17, defects 10 and 11).

The member the server talks to (the leader: the worst case, the survivors must elect a new one)
is killed while writers keep creating events. The server must notice at once, move on, wait
for the new leader rather than for its request timeout, lose no acknowledged write, and never
answer with Twisted's internals.
"""

from __future__ import annotations

import http.client
import itertools
import json
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from apiserver.devcluster import EtcdCluster
from tests.integration.daemon import Daemon

pytestmark = pytest.mark.integration

BASE = "/api/v1/namespaces/default/events"
#: etcd's election timeout in the test cluster (etcd's default is 1000 ms). The survivors elect
#: a new leader within one to two of these; at etcd's default that alone could take 2 s, and a
#: loaded machine added the rest of a 2.85 s gap once. Half of it keeps the server's own part of
#: the gap what the bound below measures.
ELECTION_MS = 500
#: Longest time the server may go without a successful write after the leader dies (issue 17:
#: the election plus moving to a survivor; about 5.1 s before the fix, which waited for its
#: request timeout).
MAX_GAP = 2.5


@pytest.fixture
def cluster_daemon(tmp_path: Path) -> Iterator[tuple[EtcdCluster, Daemon]]:
    if shutil.which("etcd") is None:
        pytest.skip("etcd (Debian etcd-server) is not installed")
    cluster = EtcdCluster(
        tmp_path / "etcd", heartbeat_ms=ELECTION_MS // 10, election_ms=ELECTION_MS
    )
    cluster.start()
    daemon: Daemon | None = None
    try:
        deadline = time.monotonic() + 20
        leader = cluster.leader()
        while leader is None and time.monotonic() < deadline:
            time.sleep(0.1)
            leader = cluster.leader()
        assert leader is not None, "the cluster elected no leader"
        # The leader first: the server uses it, and killing it is the slow case.
        order = [leader] + [i for i in range(3) if i != leader]
        servers = ",".join(cluster.client_urls[i] for i in order)
        daemon = Daemon(tmp_path / "server", [f"--store-servers={servers}"])
        daemon.start()
        yield cluster, daemon
    finally:
        if daemon is not None:
            daemon.stop()
        cluster.stop()


def event(name: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Failover",
            "message": "m",
        }
    ).encode()


def test_leader_killed_under_writes(cluster_daemon: tuple[EtcdCluster, Daemon]) -> None:
    cluster, daemon = cluster_daemon
    leader = cluster.leader()
    assert leader is not None
    acked: list[tuple[float, str]] = []
    failures: list[tuple[int, bytes]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def writer(n: int) -> None:
        i = 0
        conn: http.client.HTTPSConnection | None = None
        while not stop.is_set():
            name = f"w{n}-{i}"
            i += 1
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection(
                        "127.0.0.1", daemon.port, context=daemon.ssl_context(), timeout=30
                    )
                conn.request(
                    "POST", BASE, body=event(name), headers={"Content-Type": "application/json"}
                )
                response = conn.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException):
                conn = None
                continue
            with lock:
                if response.status == 201:
                    acked.append((time.monotonic(), name))
                else:
                    failures.append((response.status, body))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(2.0)
        killed_at = time.monotonic()
        cluster.kill(leader)
        elected_at = None
        while time.monotonic() < killed_at + 6.0:
            if elected_at is None and cluster.leader() not in (None, leader):
                elected_at = time.monotonic()
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(60)

    times = sorted(t for t, _ in acked)
    assert any(t < killed_at for t in times) and any(t > killed_at + 3 for t in times)
    window = [killed_at] + [t for t in times if t > killed_at]
    gap = max(b - a for a, b in itertools.pairwise(window))
    election = "no new leader seen" if elected_at is None else f"{elected_at - killed_at:.2f}s"
    summary = f"longest write gap {gap:.2f}s after the leader was killed (election: {election})"
    assert gap <= MAX_GAP, summary
    print(f"{summary}, {len(failures)} failed")

    # Failed writes (the one in flight when the member died) say so in plain words.
    for status, body in failures:
        assert status in (500, 504), (status, body)
        message = json.loads(body)["message"]
        assert "twisted" not in message and "<" not in message, message

    # Nothing acknowledged is lost.
    status, _, raw = daemon.get(BASE, timeout=30)
    assert status == 200, raw
    stored = {item["metadata"]["name"] for item in json.loads(raw)["items"]}
    missing = {name for _, name in acked} - stored
    assert not missing, f"{len(missing)} acknowledged writes lost"
