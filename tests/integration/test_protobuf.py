"""Protobuf against the real daemon, on both backends: an Event posted as client-go sends it
(``application/vnd.kubernetes.protobuf``), read back through JSON; lists, Status errors and
a watch decoded frame by frame; and kube-apiserver's stored bytes in a real etcd, read by
this server, while what this server stores is kube-apiserver's format."""

from __future__ import annotations

import base64
import http.client
import json
import shutil
import sqlite3
import ssl
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.protobuf import codec
from tests.event_fixtures import event_dict
from tests.integration.api_fixtures import ApiServer, api_server  # noqa: F401 - fixture
from tests.integration.daemon import Daemon
from tests.storage.etcdserver import EtcdServer

pytestmark = pytest.mark.integration

PB = "application/vnd.kubernetes.protobuf"
BASE = "/apis/events.k8s.io/v1"
GOLDEN = Path(__file__).parents[1] / "unit" / "protobuf" / "golden" / "core-event-web.17f0.pb"


def pb_body(name: str, namespace: str) -> bytes:
    obj = event_dict(name, namespace, labels={"app": "pb"})
    fields = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    return codec.wrap("events.k8s.io/v1", "Event", codec.encode(codec.EventsEvent, fields))


def unwrap(data: bytes, kind: str, message: Any) -> dict[str, Any]:
    api_version, got, raw = codec.unwrap(data)
    assert got == kind, data[:80]
    return {"apiVersion": api_version, **codec.decode(message, raw)}


def test_protobuf_post_reads_back_through_json(api_server: ApiServer) -> None:  # noqa: F811
    d = api_server.daemon
    path = f"{BASE}/namespaces/pb1/events"
    status, headers, raw = d.get(
        path,
        method="POST",
        body=pb_body("p1", "pb1"),
        headers={"Content-Type": PB, "Accept": f"{PB}, application/json"},
    )
    assert status == 201, raw
    assert headers["content-type"] == PB
    created = unwrap(raw, "Event", codec.EventsEvent)
    status, _, text = d.get(f"{path}/p1")
    as_json = json.loads(text)
    assert status == 200
    assert created["metadata"] == as_json["metadata"]
    for key in ("note", "reason", "regarding", "eventTime", "reportingController", "type"):
        assert created[key] == as_json[key]


def test_protobuf_list_and_status(api_server: ApiServer) -> None:  # noqa: F811
    d = api_server.daemon
    path = f"{BASE}/namespaces/pb2/events"
    for name in ("a", "b"):
        assert d.get(path, "POST", {"Content-Type": PB}, pb_body(name, "pb2"))[0] == 201
    status, headers, raw = d.get(path, headers={"Accept": PB})
    assert (status, headers["content-type"]) == (200, PB)
    listed = unwrap(raw, "EventList", codec.EventsEventList)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["a", "b"]
    _, _, as_json = d.get(path)
    assert codec.encode_object(json.loads(as_json)) == raw
    status, headers, raw = d.get(f"{path}/missing", headers={"Accept": PB})
    assert (status, headers["content-type"]) == (404, PB)
    error = unwrap(raw, "Status", codec.Status)
    assert (error["reason"], error["code"]) == ("NotFound", 404)
    assert error["message"] == 'events.events.k8s.io "missing" not found'


def test_chain_refusals_in_protobuf(api_server: ApiServer) -> None:  # noqa: F811
    """client-go's Accept gets the chain's Status errors in protobuf too (ErrorNegotiated):
    a bad bearer token (401), an unknown API path (404), a malformed ``?timeout=`` (400)."""
    d = api_server.daemon
    accept = {"Accept": f"{PB}, application/json"}
    context = ssl.create_default_context(cafile=str(d.cert_dir / "apiserver.crt"))
    context.check_hostname = False  # no client certificate: the bearer token decides
    conn = http.client.HTTPSConnection("127.0.0.1", d.port, context=context, timeout=10)
    try:
        conn.request("GET", f"{BASE}/events", headers={**accept, "Authorization": "Bearer x"})
        response = conn.getresponse()
        answers = [(response.status, response.getheader("content-type"), response.read())]
    finally:
        conn.close()
    for path in (f"{BASE}/nosuch", f"{BASE}/events?timeout=abc"):
        status, headers, raw = d.get(path, headers=accept)
        answers.append((status, headers["content-type"], raw))
    got = []
    for status, content_type, raw in answers:
        assert content_type == PB, raw
        error = unwrap(raw, "Status", codec.Status)
        assert error["code"] == status
        got.append((status, error["reason"]))
    assert got == [(401, "Unauthorized"), (404, "NotFound"), (400, "BadRequest")]


def test_protobuf_watch_frame_by_frame(api_server: ApiServer) -> None:  # noqa: F811
    d = api_server.daemon
    path = f"{BASE}/namespaces/pb3/events"
    _, _, listed = d.get(path)
    rv = json.loads(listed)["metadata"]["resourceVersion"]
    for name in ("w1", "w2"):
        assert d.get(path, "POST", {"Content-Type": PB}, pb_body(name, "pb3"))[0] == 201
    assert d.get(f"{path}/w1", "DELETE")[0] == 200
    status, headers, raw = d.get(
        f"{path}?watch=1&resourceVersion={rv}&timeoutSeconds=2", headers={"Accept": PB}
    )
    assert status == 200
    assert headers["content-type"] == f"{PB};stream=watch"
    at, seen = 0, []
    while at < len(raw):
        size = int.from_bytes(raw[at : at + 4], "big")
        event = codec.parse(codec.WatchEvent, raw[at + 4 : at + 4 + size])
        obj = unwrap(event.object.raw, "Event", codec.EventsEvent)
        seen.append((event.type, obj["metadata"]["name"]))
        at += 4 + size
    assert at == len(raw)
    assert seen == [("ADDED", "w1"), ("ADDED", "w2"), ("DELETED", "w1")]


# --- core/v1 ------------------------------------------------------------------------------------


def kubelet_event(name: str, namespace: str) -> bytes:
    """A core/v1 Event as a kubelet posts it: client-go's protobuf envelope (typeMeta v1/Event)."""
    event = {
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "web-1", "uid": "u9"},
        "reason": "Started",
        "message": "Started container",
        "source": {"component": "kubelet", "host": "node1"},
        "firstTimestamp": "2026-11-25T10:00:00Z",
        "lastTimestamp": "2026-11-25T10:00:00Z",
        "count": 1,
        "type": "Normal",
        "reportingComponent": "kubelet",
        "reportingInstance": "node1",
    }
    return codec.wrap("v1", "Event", codec.encode(codec.CoreEvent, event))


def test_core_protobuf_post_list_and_status(api_server: ApiServer) -> None:  # noqa: F811
    d = api_server.daemon
    path = "/api/v1/namespaces/pbcore/events"
    status, headers, raw = d.get(
        path,
        method="POST",
        body=kubelet_event("k1", "pbcore"),
        headers={"Content-Type": PB, "Accept": f"{PB}, application/json"},
    )
    assert (status, headers["content-type"]) == (201, PB), raw
    created = unwrap(raw, "Event", codec.CoreEvent)
    assert created["apiVersion"] == "v1"
    _, _, text = d.get(f"{path}/k1")
    as_json = json.loads(text)
    assert codec.encode_object(as_json) == raw
    assert as_json["message"] == "Started container"
    assert as_json["involvedObject"]["uid"] == "u9"
    # The same stored object through the other view.
    _, _, other = d.get(f"{BASE}/namespaces/pbcore/events/k1")
    assert json.loads(other)["note"] == "Started container"
    status, headers, raw = d.get(path, headers={"Accept": PB})
    listed = unwrap(raw, "EventList", codec.CoreEventList)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["k1"]
    status, headers, raw = d.get(f"{path}/missing", headers={"Accept": PB})
    assert (status, headers["content-type"]) == (404, PB)
    error = unwrap(raw, "Status", codec.Status)
    assert error["message"] == 'events "missing" not found'
    assert error["details"] == {"name": "missing", "kind": "events"}


def test_default_storage_is_kube_protobuf(api_server: ApiServer) -> None:  # noqa: F811
    """--storage-media-type defaults to protobuf: what is stored is the envelope around a
    core/v1 Event, on SQLite as in etcd (checked on SQLite here, in etcd below)."""
    if api_server.backend != "sqlite":
        pytest.skip("the etcd case is test_this_servers_bytes_are_kube_apiservers")
    d = api_server.daemon
    assert (
        d.get(f"{BASE}/namespaces/sq/events", "POST", {"Content-Type": PB}, pb_body("s1", "sq"))[0]
        == 201
    )
    db = sqlite3.connect(f"file:{d.data_dir / 'store.db'}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT value FROM log WHERE name = ? ORDER BY id DESC LIMIT 1",
            (b"/registry/events/sq/s1",),
        ).fetchone()
    finally:
        db.close()
    value = bytes(row[0])
    assert value.startswith(codec.envelope_head("v1", "Event"))
    stored = codec.decode(codec.CoreEvent, codec.unwrap(value)[2])
    assert stored["metadata"]["name"] == "s1" and "resourceVersion" not in stored["metadata"]


# --- kube-apiserver's bytes in etcd ----------------------------------------------------------


def etcd_put(etcd: EtcdServer, key: str, value: bytes) -> None:
    """``etcdctl put`` (or, without etcdctl, the same request through etcd's v3 gateway)."""
    etcdctl = shutil.which("etcdctl")
    if etcdctl is not None:
        subprocess.run(
            [etcdctl, f"--endpoints={etcd.client_url}", "put", key],
            input=value,
            check=True,
            env={"ETCDCTL_API": "3"},
        )
        return
    payload = {"key": base64.b64encode(key.encode()).decode(), "value": base64.b64encode(value)}
    payload["value"] = payload["value"].decode()  # type: ignore[union-attr]
    request = urllib.request.Request(
        etcd.client_url + "/v3/kv/put", json.dumps(payload).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 200


def etcd_get(etcd: EtcdServer, key: str) -> bytes:
    payload = {"key": base64.b64encode(key.encode()).decode()}
    request = urllib.request.Request(
        etcd.client_url + "/v3/kv/range", json.dumps(payload).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        kvs = json.loads(answer.read())["kvs"]
    return base64.b64decode(kvs[0]["value"])


@pytest.fixture(scope="module")
def etcd_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EtcdServer, Daemon]]:
    if shutil.which("etcd") is None:
        pytest.skip("etcd (Debian etcd-server) is not installed")
    workdir = tmp_path_factory.mktemp("pb-etcd")
    etcd = EtcdServer(str(workdir / "etcd"))
    etcd.start()
    daemon = Daemon(workdir / "server", [f"--store-servers={etcd.client_url}"])
    try:
        daemon.start()
        yield etcd, daemon
    finally:
        daemon.stop()
        etcd.stop()


def test_kube_apiserver_bytes_in_etcd_are_served(etcd_daemon: tuple[EtcdServer, Daemon]) -> None:
    etcd, d = etcd_daemon
    etcd_put(etcd, "/registry/events/default/web.17f0", GOLDEN.read_bytes())
    status, _, raw = d.get(f"{BASE}/namespaces/default/events/web.17f0")
    assert status == 200, raw
    event = json.loads(raw)
    assert event["metadata"]["uid"] == "u1"
    assert event["metadata"]["creationTimestamp"] == "2023-11-14T22:13:20Z"
    assert event["note"] == "Started container"
    assert event["regarding"] == {
        "kind": "Pod",
        "namespace": "default",
        "name": "web",
        "uid": "u2",
        "apiVersion": "v1",
    }
    assert event["deprecatedSource"] == {"component": "kubelet", "host": "node1"}
    assert event["deprecatedCount"] == 1
    assert event["reportingController"] == "kubelet"
    # Through protobuf, the answer is the events.k8s.io/v1 message of that object.
    status, _, answer = d.get(f"{BASE}/namespaces/default/events/web.17f0", headers={"Accept": PB})
    assert codec.encode_object(event) == answer
    # The core view shows it as kube-apiserver would.
    status, _, raw = d.get("/api/v1/namespaces/default/events/web.17f0")
    core = json.loads(raw)
    assert core["message"] == "Started container"
    assert core["involvedObject"]["uid"] == "u2"
    assert core["source"] == {"component": "kubelet", "host": "node1"}
    assert core["firstTimestamp"] == core["lastTimestamp"] == "2023-11-14T22:13:20Z"
    assert core["count"] == 1 and core["eventTime"] is None
    # And the core protobuf answer is the stored message itself, with the resourceVersion.
    status, _, answer = d.get("/api/v1/namespaces/default/events/web.17f0", headers={"Accept": PB})
    assert codec.encode_object(core) == answer


def test_this_servers_bytes_are_kube_apiservers(etcd_daemon: tuple[EtcdServer, Daemon]) -> None:
    etcd, d = etcd_daemon
    path = f"{BASE}/namespaces/stored/events"
    assert d.get(path, "POST", {"Content-Type": PB}, pb_body("s1", "stored"))[0] == 201
    _, _, text = d.get(f"{path}/s1")
    as_json = json.loads(text)
    value = etcd_get(etcd, "/registry/events/stored/s1")
    # The envelope around a core/v1 Event (not events.k8s.io/v1), as kube-apiserver stores.
    assert value.startswith(codec.envelope_head("v1", "Event"))
    assert value.endswith(b"\x1a\x00\x22\x00")
    _, _, raw = codec.unwrap(value)
    message = codec.parse(codec.CoreEvent, raw)
    stored = codec.from_message(message)
    # No resourceVersion in etcd; the rest is the object the API shows.
    assert "resourceVersion" not in stored["metadata"]
    meta = {k: v for k, v in as_json["metadata"].items() if k != "resourceVersion"}
    assert stored["metadata"] == meta
    assert stored["message"] == as_json["note"]
    assert stored["involvedObject"] == as_json["regarding"]
    # Field order, always-written empty fields and maps are Go's: re-encoding is identical.
    assert message.SerializeToString(deterministic=True) == raw
    assert codec.encode(codec.CoreEvent, stored) == raw
