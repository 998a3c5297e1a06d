"""Event API semantics over raw HTTPS against the real daemon (both backends): the Status
errors, options, content negotiation, TTL, watch start-up and --runtime-config."""

from __future__ import annotations

import http.client
import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.event_fixtures import event_dict
from tests.integration.api_fixtures import ApiServer, api_server  # noqa: F401 - fixture
from tests.integration.daemon import Daemon

BASE = "/apis/events.k8s.io/v1"


def body(name: str, namespace: str, **extra: Any) -> dict[str, Any]:
    return event_dict(name, namespace, labels={"app": "x"}, **extra)


def call(
    daemon: Daemon, method: str, path: str, payload: Any = None, **headers: str
) -> tuple[int, dict[str, str], Any]:
    data = None
    if payload is not None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers.setdefault("Content-Type", "application/json")
    status, hdrs, raw = daemon.get(path, method=method, body=data, headers=headers)
    try:
        parsed: Any = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw
    return status, hdrs, parsed


@pytest.fixture
def ns() -> str:
    return "h-" + uuid.uuid4().hex[:8]


def test_create_defaults_and_errors(api_server: ApiServer, ns: str) -> None:  # noqa: F811
    d = api_server.daemon
    status, _, created = call(d, "POST", f"{BASE}/namespaces/{ns}/events", body("e1", ns))
    assert status == 201
    meta = created["metadata"]
    assert meta["namespace"] == ns and meta["uid"] and meta["resourceVersion"]
    assert list(created)[:2] == ["kind", "apiVersion"]
    # already exists
    status, _, error = call(d, "POST", f"{BASE}/namespaces/{ns}/events", body("e1", ns))
    assert status == 409
    assert error["reason"] == "AlreadyExists"
    assert error["message"] == 'events.events.k8s.io "e1" already exists'
    assert error["details"] == {"name": "e1", "group": "events.k8s.io", "kind": "events"}
    # namespace mismatch
    status, _, error = call(d, "POST", f"{BASE}/namespaces/{ns}/events", body("e2", "other"))
    assert status == 400
    assert error["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )
    # invalid: the spec's example (no eventTime, empty type)
    bad = body("e3", ns)
    del bad["eventTime"]
    bad["type"] = ""
    status, _, error = call(d, "POST", f"{BASE}/namespaces/{ns}/events", bad)
    assert status == 422
    assert error["reason"] == "Invalid"
    assert error["details"]["kind"] == "Event"
    assert {"reason": "FieldValueRequired", "message": "Required value", "field": "eventTime"} in (
        error["details"]["causes"]
    )
    # resourceVersion on create
    status, _, error = call(
        d,
        "POST",
        f"{BASE}/namespaces/{ns}/events",
        body("e4", ns, metadata={"name": "e4", "namespace": ns, "resourceVersion": "5"}),
    )
    assert status == 500
    assert error["message"] == "resourceVersion should not be set on objects to be created"
    # generateName
    gen = body("", ns)
    gen["metadata"] = {"generateName": "gen-", "namespace": ns}
    status, _, created = call(d, "POST", f"{BASE}/namespaces/{ns}/events", gen)
    assert status == 201
    assert created["metadata"]["name"].startswith("gen-")
    assert len(created["metadata"]["name"]) == len("gen-") + 5


def test_dry_run_and_field_validation(api_server: ApiServer, ns: str) -> None:  # noqa: F811
    d = api_server.daemon
    status, _, created = call(
        d, "POST", f"{BASE}/namespaces/{ns}/events?dryRun=All", body("dry", ns)
    )
    assert status == 201
    assert "resourceVersion" not in created["metadata"]
    assert call(d, "GET", f"{BASE}/namespaces/{ns}/events/dry")[0] == 404
    unknown = body("u1", ns, extra="field")
    status, headers, _ = call(d, "POST", f"{BASE}/namespaces/{ns}/events", unknown)
    assert status == 201
    assert headers["warning"] == '299 - "unknown field \\"extra\\""'
    status, _, error = call(
        d, "POST", f"{BASE}/namespaces/{ns}/events?fieldValidation=Strict", body("u2", ns, x=1)
    )
    assert status == 400
    assert error["message"] == (
        'Event in version "v1" cannot be handled as a Event: strict decoding error: '
        'unknown field "x"'
    )
    status, _, error = call(
        d, "POST", f"{BASE}/namespaces/{ns}/events?fieldValidation=Bogus", body("u3", ns)
    )
    assert status == 422
    assert "fieldValidation" in error["message"]


def test_update_patch_delete_semantics(api_server: ApiServer, ns: str) -> None:  # noqa: F811
    d = api_server.daemon
    path = f"{BASE}/namespaces/{ns}/events/e1"
    # PUT to a missing event creates it
    status, _, created = call(d, "PUT", path, body("e1", ns))
    assert status == 201
    stale = dict(created)
    created["series"] = {"count": 2, "lastObservedTime": "2026-11-22T10:00:05.000000Z"}
    status, _, updated = call(d, "PUT", path, created)
    assert status == 200
    status, _, error = call(d, "PUT", path, stale | {"series": created["series"]})
    assert status == 409
    assert error["reason"] == "Conflict"
    assert error["message"] == (
        'Operation cannot be fulfilled on events.events.k8s.io "e1": the object has been '
        "modified; please apply your changes to the latest version and try again"
    )
    # name mismatch
    status, _, error = call(d, "PUT", path, body("other", ns))
    assert status == 400
    assert (
        error["message"] == "the name of the object (other) does not match the name on the URL (e1)"
    )
    # immutable field through a merge patch
    status, _, error = call(
        d, "PATCH", path, {"note": "changed"}, **{"Content-Type": "application/merge-patch+json"}
    )
    assert status == 422
    assert "field is immutable" in error["message"]
    # unsupported patch type
    status, _, error = call(d, "PATCH", path, {"a": 1}, **{"Content-Type": "text/plain"})
    assert status == 415
    assert error["reason"] == "UnsupportedMediaType"
    # delete with a wrong uid precondition, then for real
    status, _, error = call(
        d,
        "DELETE",
        path,
        {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "nope"}},
    )
    assert status == 409
    assert "the UID in the precondition (nope) does not match" in error["message"]
    status, _, done = call(d, "DELETE", path)
    assert status == 200
    assert done["status"] == "Success"
    assert done["details"]["uid"] == updated["metadata"]["uid"]
    status, _, error = call(d, "GET", path)
    assert status == 404
    assert error["message"] == 'events.events.k8s.io "e1" not found'
    # a method the resource does not support
    assert call(d, "POST", path, body("e1", ns))[0] == 405


def test_list_options_and_errors(api_server: ApiServer, ns: str) -> None:  # noqa: F811
    d = api_server.daemon
    for i in range(3):
        assert call(d, "POST", f"{BASE}/namespaces/{ns}/events", body(f"l{i}", ns))[0] == 201
    status, _, listed = call(d, "GET", f"{BASE}/namespaces/{ns}/events?resourceVersion=0")
    assert status == 200 and len(listed["items"]) == 3
    assert listed["kind"] == "EventList"
    assert "kind" not in listed["items"][0]
    status, _, error = call(d, "GET", f"{BASE}/namespaces/{ns}/events?fieldSelector=note%3Dx")
    assert status == 400
    assert error["message"] == "field label not supported: note"
    status, _, error = call(d, "GET", f"{BASE}/namespaces/{ns}/events?labelSelector=a%20in")
    assert status == 400
    status, _, error = call(d, "GET", f"{BASE}/namespaces/{ns}/events?resourceVersionMatch=Exact")
    assert status == 422
    assert error["message"].startswith('ListOptions.meta.k8s.io "" is invalid')
    status, _, error = call(d, "GET", f"{BASE}/namespaces/{ns}/events?resourceVersion=999999999")
    assert status == 504
    assert error["message"].startswith("Timeout: Too large resource version: 999999999")
    status, _, error = call(d, "GET", f"{BASE}/namespaces/{ns}/events?continue=garbage")
    assert status == 400
    assert error["message"].startswith("invalid continue token")
    status, _, error = call(
        d, "GET", f"{BASE}/namespaces/{ns}/events?limit=1&continue=x&resourceVersion=5"
    )
    assert status == 400
    assert error["message"] == "specifying resource version is not allowed when using continue"
    status, _, removed = call(d, "DELETE", f"{BASE}/namespaces/{ns}/events?labelSelector=app%3Dx")
    assert status == 200
    assert sorted(i["metadata"]["name"] for i in removed["items"]) == ["l0", "l1", "l2"]
    assert call(d, "GET", f"{BASE}/namespaces/{ns}/events")[2]["items"] == []


def test_repeated_lists_see_every_write(api_server: ApiServer, ns: str) -> None:  # noqa: F811
    """The same list URI answered again after writes (list bodies are reused per revision)."""
    d = api_server.daemon
    path = f"{BASE}/namespaces/{ns}/events?limit=50"
    seen = []
    for index in range(3):
        status, _, listed = call(d, "GET", path)
        assert status == 200
        seen.append(([i["metadata"]["name"] for i in listed["items"]], listed["metadata"]))
        status, _, again = call(d, "GET", path)
        assert again == listed
        assert call(d, "POST", f"{BASE}/namespaces/{ns}/events", body(f"r{index}", ns))[0] == 201
    assert [names for names, _ in seen] == [[], ["r0"], ["r0", "r1"]]
    revisions = [int(meta["resourceVersion"]) for _, meta in seen]
    assert revisions == sorted(revisions) and len(set(revisions)) == 3
    assert call(d, "DELETE", f"{BASE}/namespaces/{ns}/events/r0")[0] == 200
    status, _, listed = call(d, "GET", path)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["r1", "r2"]


def test_output_forms(api_server: ApiServer, ns: str) -> None:  # noqa: F811
    d = api_server.daemon
    assert call(d, "POST", f"{BASE}/namespaces/{ns}/events", body("o1", ns))[0] == 201
    path = f"{BASE}/namespaces/{ns}/events"
    status, headers, raw = d.get(path + "/o1", headers={"Accept": "application/yaml"})
    assert status == 200 and headers["content-type"] == "application/yaml"
    assert raw.startswith(b"kind: Event\napiVersion: events.k8s.io/v1\n")
    status, _, table = call(d, "GET", path, Accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert status == 200 and table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
        "Source",
        "Message",
        "First Seen",
        "Count",
        "Name",
    ]
    assert table["rows"][0]["cells"][3] == "pod/p"
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    status, _, partial = call(
        d,
        "GET",
        path + "/o1",
        Accept="application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
    )
    assert status == 200 and partial["kind"] == "PartialObjectMetadata"
    assert partial["metadata"]["name"] == "o1"
    status, _, _error = call(
        d, "GET", path, Accept="application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1"
    )
    assert status == 406
    status, _, _text = call(d, "GET", path + "/o1?pretty=true")
    assert status == 200
    raw_pretty = d.get(path + "/o1?pretty=true")[2]
    assert raw_pretty.startswith(b'{\n  "kind": "Event"')


def read_events(
    conn: http.client.HTTPSConnection,
    count: int,
    response: http.client.HTTPResponse | None = None,
) -> list[dict[str, Any]]:
    if response is None:
        response = conn.getresponse()
    assert response.status == 200
    events = []
    for _ in range(count):
        line = response.readline()
        if not line:
            break
        events.append(json.loads(line))
    return events


def test_watch_initial_events_and_bookmark(api_server: ApiServer, ns: str) -> None:  # noqa: F811
    d = api_server.daemon
    for i in range(2):
        assert call(d, "POST", f"{BASE}/namespaces/{ns}/events", body(f"w{i}", ns))[0] == 201
    conn = http.client.HTTPSConnection("127.0.0.1", d.port, context=d.ssl_context(), timeout=10)
    conn.request(
        "GET",
        f"{BASE}/namespaces/{ns}/events?watch=1&sendInitialEvents=true"
        "&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=5",
    )
    events = read_events(conn, 3)
    conn.close()
    assert [e["type"] for e in events] == ["ADDED", "ADDED", "BOOKMARK"]
    bookmark = events[2]["object"]
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    assert bookmark["kind"] == "Event"
    # a watch from a compacted/too old revision on a label selector change: DELETED when it
    # stops matching
    rv = bookmark["metadata"]["resourceVersion"]
    conn = http.client.HTTPSConnection("127.0.0.1", d.port, context=d.ssl_context(), timeout=10)
    conn.request(
        "GET",
        f"{BASE}/namespaces/{ns}/events?watch=1&labelSelector=app%3Dx&resourceVersion={rv}"
        "&timeoutSeconds=5",
    )
    # The headers come once the watch has fixed its start revision (watch.go flushes them at
    # once): from then on the change below is delivered, however late it is made.
    started = conn.getresponse()
    status, _, _ = call(
        d,
        "PATCH",
        f"{BASE}/namespaces/{ns}/events/w0",
        {"metadata": {"labels": {"app": "y"}}},
        **{"Content-Type": "application/merge-patch+json"},
    )
    assert status == 200
    events = read_events(conn, 1, started)
    conn.close()
    assert events[0]["type"] == "DELETED"
    assert events[0]["object"]["metadata"]["name"] == "w0"


def test_a_fresh_store_lists_at_resource_version_one(start_daemon: Callable[..., Daemon]) -> None:
    # Like kube-apiserver on a new etcd (first revision 1): an empty list is at "1", never
    # "0", which as a resourceVersion in a request means "any version". Priority and
    # fairness is off: with it, the bootstrap FlowSchemas and PriorityLevelConfigurations
    # are written at start, so the store is no longer fresh.
    d = start_daemon(["--enable-priority-and-fairness=false"])
    path = f"{BASE}/namespaces/fresh/events"
    status, _, listed = call(d, "GET", path)
    assert status == 200 and listed["items"] == []
    assert listed["metadata"]["resourceVersion"] == "1"
    for query in ("?resourceVersion=0", "?resourceVersion=0&resourceVersionMatch=NotOlderThan"):
        status, _, listed = call(d, "GET", path + query)
        assert status == 200, listed
        assert int(listed["metadata"]["resourceVersion"]) >= 1
    status, _, created = call(d, "POST", path, body("f1", "fresh"))
    assert status == 201 and created["metadata"]["resourceVersion"] == "2"
    status, _, listed = call(d, "GET", path)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["f1"]
    assert listed["metadata"]["resourceVersion"] == "2"


def test_event_ttl_expires_events(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(["--event-ttl=2s"])
    ns = "ttl"
    assert call(d, "POST", f"{BASE}/namespaces/{ns}/events", body("t1", ns))[0] == 201
    assert call(d, "GET", f"{BASE}/namespaces/{ns}/events/t1")[0] == 200
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if call(d, "GET", f"{BASE}/namespaces/{ns}/events/t1")[0] == 404:
            break
        time.sleep(0.25)
    assert call(d, "GET", f"{BASE}/namespaces/{ns}/events/t1")[0] == 404


def test_runtime_config_turns_events_off(start_daemon: Callable[..., Daemon]) -> None:
    d = start_daemon(["--runtime-config=events.k8s.io/v1=false"])
    status, _, error = call(d, "GET", f"{BASE}/namespaces/default/events")
    assert status == 404
    assert error["reason"] == "NotFound"
    status, _, groups = call(d, "GET", "/apis")
    assert status == 200
    # Only the review groups and priority and fairness's read-only group are left.
    assert [g["name"] for g in groups["groups"]] == [
        "authentication.k8s.io",
        "authorization.k8s.io",
        "flowcontrol.apiserver.k8s.io",
    ]
    assert call(d, "GET", "/apis/events.k8s.io/v1")[0] == 404
