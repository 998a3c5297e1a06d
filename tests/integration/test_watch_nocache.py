"""``--watch-cache=false`` on the embedded store: lists and watches come straight from the
store, and a client watch still has flow control (``apiserver.storage.flowcontrol``).

kube-apiserver runs events without a watch cache by default; our server keeps it on, so this
file is what exercises the other setting with a real daemon: lists, watches from a
resourceVersion, events delivered in revision order, and a watch whose client stops reading
ending once it is too far behind (as the watch cache ends slow watchers) while the server
goes on serving everyone else.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon

EVENTS = "/apis/events.k8s.io/v1/namespaces/{ns}/events"
#: Changes a paused watch may fall behind before it is ended (the server's default,
#: apiserver.storage.flowcontrol.MAX_PENDING_PER_WATCHER).
MAX_PENDING = 1000


@pytest.fixture
def daemon(start_daemon: Callable[..., Daemon]) -> Daemon:
    return start_daemon(["--watch-cache=false"])


def post(daemon: Daemon, ns: str, name: str) -> dict[str, Any]:
    status, _, body = daemon.get(
        EVENTS.format(ns=ns),
        method="POST",
        headers={"Content-Type": "application/json"},
        body=event_body(name, ns),
    )
    assert status == 201, body
    created: dict[str, Any] = json.loads(body)
    return created


def list_events(daemon: Daemon, ns: str, query: str = "") -> dict[str, Any]:
    status, _, body = daemon.get(EVENTS.format(ns=ns) + query)
    assert status == 200, body
    listed: dict[str, Any] = json.loads(body)
    return listed


def rv(obj: dict[str, Any]) -> int:
    return int(obj["metadata"]["resourceVersion"])


class WatchClient:
    """One watch request on its own connection; ``lines(n)`` reads n events."""

    def __init__(self, daemon: Daemon, path: str, rcvbuf: int = 0, timeout: float = 30) -> None:
        raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            # A small receive window, so a client that does not read fills the server's
            # buffers quickly.
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        raw.settimeout(timeout)
        raw.connect(("127.0.0.1", daemon.port))
        self.conn = http.client.HTTPSConnection(
            "127.0.0.1", daemon.port, context=daemon.ssl_context(), timeout=timeout
        )
        self.conn.sock = daemon.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
        self.conn.request("GET", path)
        self.response = self.conn.getresponse()
        assert self.response.status == 200

    def lines(self, n: int) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for _ in range(n):
            line = self.response.readline()
            assert line, f"the watch ended after {len(out)} events: {out}"
            out.append(json.loads(line))
        return out

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def watches() -> Iterator[Callable[..., WatchClient]]:
    opened: list[WatchClient] = []

    def open_watch(*args: Any, **kwargs: Any) -> WatchClient:
        client = WatchClient(*args, **kwargs)
        opened.append(client)
        return client

    yield open_watch
    for client in opened:
        client.close()


def test_list_and_watch_from_a_resource_version(
    daemon: Daemon, watches: Callable[..., WatchClient]
) -> None:
    ns = "nocache-list"
    a = post(daemon, ns, "a")
    b = post(daemon, ns, "b")
    listed = list_events(daemon, ns)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["a", "b"]
    list_rv = int(listed["metadata"]["resourceVersion"])
    assert list_rv >= rv(b) > rv(a)
    # resourceVersion=0 ("any") and a limited list are served by the store too.
    assert len(list_events(daemon, ns, "?resourceVersion=0")["items"]) == 2
    page = list_events(daemon, ns, "?limit=1")
    assert [i["metadata"]["name"] for i in page["items"]] == ["a"]
    assert page["metadata"]["continue"]

    c = post(daemon, ns, "c")
    status, _, _ = daemon.get(EVENTS.format(ns=ns) + "/a", method="DELETE")
    assert status == 200

    # From the list's resourceVersion: the changes after it.
    after_list = watches(daemon, EVENTS.format(ns=ns) + f"?watch=1&resourceVersion={list_rv}")
    got = after_list.lines(2)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
        ("ADDED", "c"),
        ("DELETED", "a"),
    ]
    assert rv(got[0]["object"]) == rv(c)
    # From an older resourceVersion: replayed from the store's history.
    from_a = watches(daemon, EVENTS.format(ns=ns) + f"?watch=1&resourceVersion={rv(a)}")
    got = from_a.lines(3)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
        ("ADDED", "b"),
        ("ADDED", "c"),
        ("DELETED", "a"),
    ]


def test_watch_events_arrive_in_order(daemon: Daemon, watches: Callable[..., WatchClient]) -> None:
    ns = "nocache-order"
    start = int(list_events(daemon, ns)["metadata"]["resourceVersion"])
    watch = watches(daemon, EVENTS.format(ns=ns) + f"?watch=1&resourceVersion={start}")
    names = [f"e{worker}-{i}" for worker in range(4) for i in range(10)]

    def writer(worker: int) -> None:
        for i in range(10):
            post(daemon, ns, f"e{worker}-{i}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    got = watch.lines(len(names))
    revisions = [rv(e["object"]) for e in got]
    assert revisions == sorted(revisions) and len(set(revisions)) == len(revisions)
    assert {e["type"] for e in got} == {"ADDED"}
    assert sorted(e["object"]["metadata"]["name"] for e in got) == sorted(names)
    # Each writer's own events in the order it wrote them.
    for worker in range(4):
        mine = [
            e["object"]["metadata"]["name"]
            for e in got
            if e["object"]["metadata"]["name"].startswith(f"e{worker}-")
        ]
        assert mine == [f"e{worker}-{i}" for i in range(10)]


def test_a_watch_that_is_not_read_is_ended_and_others_are_served(
    daemon: Daemon, watches: Callable[..., WatchClient]
) -> None:
    ns = "nocache-slow"
    start = int(list_events(daemon, ns)["metadata"]["resourceVersion"])
    # timeoutSeconds far beyond the test: only flow control can end this watch early.
    slow = watches(
        daemon,
        EVENTS.format(ns=ns) + f"?watch=1&resourceVersion={start}&timeoutSeconds=3000",
        rcvbuf=4096,
        timeout=60,
    )
    # Large events, so the kernel's socket buffers (autotuned up to 4 MB on Linux) hold only
    # a few hundred of them: the rest either waits in the server or is dropped with the watch.
    total = 2 * MAX_PENDING
    failures: list[BaseException] = []

    def writer(worker: int) -> None:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", daemon.port, context=daemon.ssl_context(), timeout=30
        )
        try:
            for i in range(worker, total, 4):
                body = json.loads(event_body(f"s{i}", ns))
                body["metadata"]["annotations"] = {"example.com/padding": "x" * 16384}
                conn.request(
                    "POST",
                    EVENTS.format(ns=ns),
                    body=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"},
                )
                response = conn.getresponse()
                response.read()
                assert response.status == 201
        except BaseException as error:  # reported below
            failures.append(error)
        finally:
            conn.close()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert failures == []
    # Everyone else is still served while that client reads nothing.
    status, _, _ = daemon.get("/readyz")
    assert status == 200
    page = list_events(daemon, ns, "?limit=5")
    assert len(page["items"]) == 5
    other = watches(daemon, EVENTS.format(ns=ns) + f"?watch=1&resourceVersion={start}")
    assert len(other.lines(3)) == 3

    # The stalled watch was ended: what it had been sent before it paused, then the end of
    # the stream, long before timeoutSeconds; nowhere near every change. (Without flow
    # control the server holds every change for it and this read times out.)
    body = slow.response.read()
    received = [json.loads(line) for line in body.splitlines() if line]
    assert len(received) < total - MAX_PENDING
    revisions = [rv(e["object"]) for e in received]
    assert revisions == sorted(revisions)
