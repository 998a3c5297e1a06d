"""core/v1 events (``/api/v1``) in process: one stored object, two views.

What differs from events.k8s.io/v1 (k8s.io/kubernetes ``pkg/registry/core/event``): core
names and Go emission rules in answers, error texts without a group, the legacy validation
rules, core field labels, and the stored bytes, which are the same whichever view wrote them.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import yaml
from tests.unit.api_events.rest_harness import (
    EPOCH_TEXT,
    RestHarness,
    core_path,
    event,
    fired,
    ns_path,
    status,
)

from apiserver.admission import CREATE, DELETE, UPDATE, Attributes, Operation
from apiserver.api.events.rest import CORE_V1, EventsAPI
from apiserver.http.app import Router

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def core_event(name: str, namespace: str = "ns1", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "web-1"},
        "reason": "Started",
        "message": "Started container",
        "source": {"component": "kubelet", "host": "node1"},
        "firstTimestamp": "2026-11-22T09:00:00Z",
        "lastTimestamp": "2026-11-22T09:00:00Z",
        "count": 1,
        "type": "Normal",
    }
    body.update(extra)
    return body


def stored(h: RestHarness, namespace: str, name: str) -> bytes:
    kv = fired(h.backend.get(f"/registry/events/{namespace}/{name}".encode()))
    value: bytes = kv.value
    return value


def test_create_answers_core_and_reads_back_through_both_views() -> None:
    h = RestHarness()
    reply = h.post(core_path(), core_event("e1"))
    assert reply.code == 201, reply.body
    created = reply.json()
    assert list(created)[:4] == ["kind", "apiVersion", "metadata", "involvedObject"]
    assert created["apiVersion"] == "v1"
    assert created["eventTime"] is None
    assert created["reportingComponent"] == "" and created["reportingInstance"] == ""
    entry = created["metadata"]["managedFields"][0]
    assert entry["apiVersion"] == "v1" and "f:message" in entry["fieldsV1"]
    rv = created["metadata"]["resourceVersion"]
    got = h.get(core_path(name="e1")).json()
    assert got == created
    v1 = h.get(ns_path(name="e1")).json()
    assert v1["apiVersion"] == "events.k8s.io/v1"
    assert v1["note"] == "Started container"
    assert v1["deprecatedSource"] == {"component": "kubelet", "host": "node1"}
    assert v1["deprecatedCount"] == 1
    assert v1["metadata"]["resourceVersion"] == rv


def test_stored_bytes_are_core_v1_whichever_view_wrote() -> None:
    h = RestHarness()
    assert h.post(core_path(), core_event("core")).code == 201
    h.create("v1")
    for name in ("core", "v1"):
        data = stored(h, "ns1", name)
        assert data.startswith(b'{"kind":"Event","apiVersion":"v1","metadata":{')
        assert data.endswith(b"}\n")
        body = json.loads(data)
        assert "resourceVersion" not in body["metadata"]
        assert "regarding" not in body and "note" not in body
        assert "involvedObject" in body and "reportingComponent" in body
    v1 = json.loads(stored(h, "ns1", "v1"))
    assert v1["message"] == "n" and v1["reportingComponent"] == "example.com/c"
    assert v1["metadata"]["managedFields"][0]["apiVersion"] == "events.k8s.io/v1"
    assert v1["firstTimestamp"] is None and v1["source"] == {}


def test_old_events_k8s_io_shaped_and_yaml_data_is_served() -> None:
    h = RestHarness()
    old = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "old", "namespace": "ns1", "creationTimestamp": EPOCH_TEXT},
        "eventTime": "2026-11-22T10:00:00.000001Z",
        "reportingController": "ctl",
        "reportingInstance": "ctl-1",
        "action": "Do",
        "reason": "Did",
        "regarding": {"kind": "Pod", "namespace": "ns1", "name": "p"},
        "note": "written by an older release",
        "type": "Normal",
    }
    fired(h.backend.create(b"/registry/events/ns1/old", orjson.dumps(old)))
    as_yaml = dict(core_event("yml"), metadata={"name": "yml", "namespace": "ns1"})
    fired(h.backend.create(b"/registry/events/ns1/yml", yaml.safe_dump(as_yaml).encode()))
    core = h.get(core_path(name="old")).json()
    assert core["message"] == "written by an older release"
    assert core["involvedObject"] == {"kind": "Pod", "namespace": "ns1", "name": "p"}
    assert core["reportingComponent"] == "ctl"
    assert h.get(ns_path(name="old")).json()["note"] == "written by an older release"
    listed = h.get(core_path()).json()
    assert [i["metadata"]["name"] for i in listed["items"]] == ["old", "yml"]
    assert listed["items"][1]["source"] == {"component": "kubelet", "host": "node1"}
    assert listed["items"][1]["firstTimestamp"] == "2026-11-22T09:00:00Z"


def test_core_error_texts_have_no_group() -> None:
    h = RestHarness()
    missing = h.get(core_path(name="none"))
    assert missing.code == 404
    assert missing.json() == status(
        404, "NotFound", 'events "none" not found', {"name": "none", "kind": "events"}
    )
    assert h.post(core_path(), core_event("e1")).code == 201
    again = h.post(core_path(), core_event("e1"))
    assert again.code == 409
    assert again.json()["message"] == 'events "e1" already exists'
    assert again.json()["details"] == {"name": "e1", "kind": "events"}
    stale = dict(core_event("e1"), metadata={"name": "e1", "resourceVersion": "1"})
    conflict = h.put(core_path(name="e1"), stale)
    assert conflict.code == 409
    assert conflict.json()["message"].startswith('Operation cannot be fulfilled on events "e1": ')
    gone = h.delete(core_path(name="e1")).json()
    assert gone["details"]["kind"] == "events" and "group" not in gone["details"]
    # the same object through events.k8s.io keeps its group in texts
    assert h.get(ns_path(name="e1")).json()["message"] == 'events.events.k8s.io "e1" not found'


def test_core_decoding_type_meta_and_strictness() -> None:
    h = RestHarness()
    wrong = h.post(core_path(), event("v1-body"))
    assert wrong.code == 400
    assert wrong.json()["message"] == (
        "the API version in the data (events.k8s.io/v1) does not match the expected API "
        "version (v1)"
    )
    strict = h.post(core_path() + "?fieldValidation=Strict", core_event("e1", bogus=1))
    assert strict.code == 400
    assert strict.json()["message"] == (
        'Event in version "v1" cannot be handled as a Event: strict decoding error: '
        'unknown field "bogus"'
    )
    warned = h.post(core_path(), core_event("e2", note="a v1 name"))
    assert warned.code == 201
    assert warned.all("warning") == ['299 - "unknown field \\"note\\""']


def test_core_validation_is_legacy_plus_path_segment_names() -> None:
    h = RestHarness()
    # no eventTime, any type, no reporting fields: fine for core (not for events.k8s.io)
    assert h.post(core_path(), core_event("Any_Name", type="Custom")).code == 201
    bad = h.post(core_path(), core_event("a%b"))
    assert bad.code == 422
    assert bad.json()["message"] == (
        'Event "a%b" is invalid: metadata.name: Invalid value: "a%b": may not contain \'%\''
    )
    assert "group" not in bad.json()["details"]
    mismatch = core_event("m")
    mismatch["involvedObject"]["namespace"] = "other"
    reply = h.post(core_path(), mismatch)
    assert reply.code == 422
    assert reply.json()["message"] == (
        'Event "m" is invalid: involvedObject.namespace: Invalid value: "other": '
        "does not match event.namespace"
    )
    # every field is mutable through core; name and uid are not
    current = h.get(core_path(name="Any_Name")).json()
    changed = dict(current, reason="Other", involvedObject={"kind": "Node", "name": "n"})
    changed["involvedObject"]["namespace"] = "ns1"
    updated = h.put(core_path(name="Any_Name"), changed)
    assert updated.code == 200, updated.body
    assert updated.json()["reason"] == "Other"
    through_v1 = h.get(ns_path(name="Any_Name")).json()
    through_v1["reason"] = "Again"
    refused = h.put(ns_path(name="Any_Name"), through_v1)
    assert refused.code == 422  # events.k8s.io/v1 keeps its strict rules for the same object


def test_field_selectors_of_both_views() -> None:
    h = RestHarness()
    assert h.post(core_path(), core_event("kubelet")).code == 201
    h.create("controller", reportingController="test-controller")
    names = lambda reply: [i["metadata"]["name"] for i in reply.json()["items"]]  # noqa: E731
    assert names(h.get(core_path() + "?fieldSelector=source%3Dkubelet")) == ["kubelet"]
    assert names(h.get(core_path() + "?fieldSelector=source%3Dtest-controller")) == ["controller"]
    assert names(h.get("/api/v1/events?fieldSelector=involvedObject.name%3Dweb-1")) == ["kubelet"]
    assert names(h.get(core_path() + "?fieldSelector=reportingComponent%3Dtest-controller")) == [
        "controller"
    ]
    unsupported = h.get(core_path() + "?fieldSelector=regarding.name%3Dp")
    assert unsupported.code == 400
    assert unsupported.json()["message"] == "field label not supported: regarding.name"
    assert names(h.get(ns_path() + "?fieldSelector=regarding.name%3Dweb-1")) == ["kubelet"]
    assert h.get(ns_path() + "?fieldSelector=involvedObject.name%3Dp").code == 400


def test_lists_tables_and_deletecollection_in_core() -> None:
    h = RestHarness()
    assert h.post(core_path(), core_event("e1")).code == 201
    listed = h.get("/api/v1/events")
    body = listed.json()
    assert body["kind"] == "EventList" and body["apiVersion"] == "v1"
    assert "kind" not in body["items"][0] and body["items"][0]["message"] == "Started container"
    table = h.get(core_path(), accept=TABLE).json()
    assert [c["name"] for c in table["columnDefinitions"]][:4] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
    ]
    cells = table["rows"][0]["cells"]
    assert cells[3] == "pod/web-1" and cells[5] == "kubelet, node1"
    full = h.get(core_path() + "?includeObject=Object", accept=TABLE).json()
    assert full["rows"][0]["object"]["apiVersion"] == "v1"
    deleted = h.delete(core_path()).json()
    assert deleted["apiVersion"] == "v1" and deleted["items"][0]["metadata"]["name"] == "e1"
    assert h.post("/api/v1/events", core_event("x")).code == 405


def test_patches_and_apply_through_core() -> None:
    h = RestHarness()
    assert h.post(core_path(), core_event("e1")).code == 201
    merge = h.patch(core_path(name="e1"), {"message": "merged"}, "application/merge-patch+json")
    assert merge.code == 200 and merge.json()["message"] == "merged"
    smp = h.patch(
        core_path(name="e1"),
        {"involvedObject": {"fieldPath": "spec.containers{a}"}},
        "application/strategic-merge-patch+json",
    )
    assert smp.json()["involvedObject"]["name"] == "web-1"
    assert smp.json()["involvedObject"]["fieldPath"] == "spec.containers{a}"
    jp = h.patch(
        core_path(name="e1"),
        [{"op": "replace", "path": "/count", "value": 3}],
        "application/json-patch+json",
    )
    assert jp.json()["count"] == 3
    applied = h.patch(
        core_path(name="a1") + "?fieldManager=tool",
        yaml.safe_dump(core_event("a1", reason="Applied")).encode(),
        "application/apply-patch+yaml",
    )
    assert applied.code == 201, applied.body
    entries = applied.json()["metadata"]["managedFields"]
    assert entries[0]["manager"] == "tool" and entries[0]["apiVersion"] == "v1"
    assert "f:reason" in entries[0]["fieldsV1"] and "f:involvedObject" in entries[0]["fieldsV1"]
    assert h.get(ns_path(name="e1")).json()["deprecatedCount"] == 3


def test_watches_of_both_views_share_one_stream() -> None:
    h = RestHarness(cached=True)
    rv = h.revision()
    core = h.watch(core_path() + f"?watch=true&resourceVersion={rv}")
    v1 = h.watch(ns_path() + f"?watch=true&resourceVersion={rv}")
    h.create("e1")
    assert h.post(core_path(), core_event("e2")).code == 201
    core_events, v1_events = core.events(), v1.events()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in core_events] == [
        ("ADDED", "e1"),
        ("ADDED", "e2"),
    ]
    assert [e["object"]["apiVersion"] for e in core_events] == ["v1", "v1"]
    assert [e["object"]["apiVersion"] for e in v1_events] == ["events.k8s.io/v1"] * 2
    assert core_events[0]["object"]["message"] == "n"
    assert v1_events[1]["object"]["note"] == "Started container"
    assert [e["object"]["metadata"]["resourceVersion"] for e in core_events] == [
        e["object"]["metadata"]["resourceVersion"] for e in v1_events
    ]
    bookmarks = h.watch(
        core_path() + "?watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
        "&resourceVersionMatch=NotOlderThan"
    )
    lines = bookmarks.events()
    assert lines[-1]["type"] == "BOOKMARK"
    assert lines[-1]["object"]["apiVersion"] == "v1"
    assert lines[-1]["object"]["involvedObject"] == {}
    deprecated = h.watch(f"/api/v1/watch/namespaces/ns1/events/e2?resourceVersion={rv}")
    assert [e["object"]["metadata"]["name"] for e in deprecated.events()] == ["e2"]


class _Recording:
    def __init__(self) -> None:
        self.seen: list[Attributes] = []

    def handles(self, operation: Operation) -> bool:
        return True

    def admit(self, attributes: Attributes) -> None:
        self.seen.append(attributes)

    def validate(self, attributes: Attributes) -> None:
        self.seen.append(attributes)


def test_admission_attributes_of_core_requests() -> None:
    h = RestHarness()
    admission = _Recording()
    api = EventsAPI(h.registry, h.clock, admission=admission, view=CORE_V1)
    router = Router()
    router.add_prefix(CORE_V1.base, api.handle)
    h.app.router = router
    assert h.post(core_path(), core_event("e1")).code == 201
    assert (
        h.patch(core_path(name="e1"), {"reason": "R"}, "application/merge-patch+json").code == 200
    )
    assert h.delete(core_path(name="e1")).code == 200
    ops = [(a.operation, a.group, a.version, a.resource, a.kind) for a in admission.seen]
    assert ops == [
        (CREATE, "", "v1", "events", "Event"),
        (CREATE, "", "v1", "events", "Event"),
        (UPDATE, "", "v1", "events", "Event"),
        (UPDATE, "", "v1", "events", "Event"),
        (DELETE, "", "v1", "events", "Event"),
    ]


def test_one_ttl_for_both_views() -> None:
    h = RestHarness(ttl=60)
    assert h.post(core_path(), core_event("c")).code == 201
    h.create("v")
    h.advance(30)
    # an update through the other view refreshes the TTL (every real write attaches it)
    relabel = {"metadata": {"labels": {"again": "yes"}}}
    assert h.patch(ns_path(name="c"), relabel, "application/merge-patch+json").code == 200
    h.advance(31)
    assert h.get(core_path(name="v")).code == 404
    assert h.get(ns_path(name="v")).code == 404
    assert h.get(core_path(name="c")).json()["metadata"]["labels"] == {"again": "yes"}
    h.advance(30)
    assert h.get(core_path(name="c")).code == 404 and h.get(ns_path(name="c")).code == 404


def test_managed_fields_of_the_other_version_are_compared_in_its_own_names() -> None:
    """kube's field manager converts between versions: ``f:note`` (events.k8s.io/v1) and
    ``f:message`` (core) are one field, so a core update of the message takes it from the
    events.k8s.io/v1 manager, and an apply through core conflicts with it."""
    h = RestHarness()
    h.create("e1")
    current = h.get(core_path(name="e1")).json()
    current["message"] = "core changed"
    updated = h.put(core_path(name="e1") + "?fieldManager=editor", current)
    assert updated.code == 200, updated.body
    entries = {e["manager"]: e for e in updated.json()["metadata"]["managedFields"]}
    assert "f:note" not in entries["unknown"]["fieldsV1"]
    assert "f:reason" in entries["unknown"]["fieldsV1"]
    assert entries["editor"]["apiVersion"] == "v1"
    assert entries["editor"]["fieldsV1"] == {"f:message": {}}
    applied = h.patch(
        core_path(name="e1") + "?fieldManager=tool",
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": "e1", "namespace": "ns1"},
                "reason": "Other",
            }
        ).encode(),
        "application/apply-patch+yaml",
    )
    assert applied.code == 409
    assert applied.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "unknown" using events.k8s.io/v1: .reason'
    )


def test_an_undecodable_stored_value_is_a_500_and_ends_watches() -> None:
    h = RestHarness()
    rv = h.revision()
    watch = h.watch(core_path() + f"?watch=true&resourceVersion={rv}")
    fired(h.backend.create(b"/registry/events/ns1/enc", b"k8s:enc:aescbc:v1:key:xxxx"))
    lines = watch.events()
    assert [line["type"] for line in lines] == ["ERROR"]
    assert lines[0]["object"]["code"] == 500
    assert "/registry/events/ns1/enc" in lines[0]["object"]["message"]
    assert watch.ended
    got = h.get(core_path(name="enc"))
    assert got.code == 500 and got.json()["reason"] == "InternalError"
    assert h.get(ns_path()).code == 500
