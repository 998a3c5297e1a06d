"""``application/vnd.kubernetes.protobuf`` on the events.k8s.io/v1 API: bodies, answers,
Status errors and watch frames, as kube-apiserver's protobuf serializer writes them
(k8s.io/apimachinery ``pkg/runtime/serializer/protobuf``, k8s.io/apiserver
``pkg/endpoints/handlers/watch.go``)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.api_events.rest_harness import RestHarness, event, ns_path

from apiserver.protobuf import codec

PB = "application/vnd.kubernetes.protobuf"
EVENTS = ns_path("ns1")
E1 = ns_path("ns1", "e1")


@pytest.fixture
def api() -> RestHarness:
    return RestHarness()


def envelope_of(obj: dict[str, Any], api_version: str = "events.k8s.io/v1") -> bytes:
    """A request body as client-go sends it: the envelope around the message."""
    body = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
    return codec.wrap(api_version, "Event", codec.encode(codec.EventsEvent, body))


def unwrap(data: bytes, kind: str, message: Any) -> dict[str, Any]:
    api_version, got_kind, raw = codec.unwrap(data)
    assert got_kind == kind
    return {"apiVersion": api_version, **codec.decode(message, raw)}


def test_protobuf_create_reads_back_equal_through_json(api: RestHarness) -> None:
    reply = api.post(EVENTS, envelope_of(event("e1")), content_type=PB, accept=PB)
    assert reply.code == 201, reply.body
    assert reply.content_type == PB
    created = unwrap(reply.body, "Event", codec.EventsEvent)
    assert created["apiVersion"] == "events.k8s.io/v1"
    as_json = api.get(E1).json()
    assert created["metadata"] == as_json["metadata"]
    assert created["note"] == as_json["note"] == event("e1")["note"]
    assert created["regarding"] == as_json["regarding"]
    # The body's typeMeta may be empty: kind and version come from the endpoint.
    body = codec.wrap("", "", codec.encode(codec.EventsEvent, event("e2")))
    assert api.post(EVENTS, body, content_type=PB).code == 201


def test_protobuf_get_is_the_json_object_in_protobuf(api: RestHarness) -> None:
    api.create("e1")
    as_json = api.get(E1).json()
    for _ in range(2):  # the second answer comes from the kept bytes
        reply = api.get(E1, accept=PB)
        assert (reply.code, reply.content_type) == (200, PB)
        assert reply.body == codec.encode_object(as_json)


def test_protobuf_list_is_listmeta_then_the_items(api: RestHarness) -> None:
    for name in ("e1", "e2", "e3"):
        api.create(name)
    as_json = api.get(EVENTS).json()
    for _ in range(2):
        reply = api.get(EVENTS, accept=f"{PB}, application/json")
        assert (reply.code, reply.content_type) == (200, PB)
        assert reply.body == codec.encode_object(as_json)
    page = api.get(EVENTS + "?limit=2", accept=PB)
    listed = unwrap(page.body, "EventList", codec.EventsEventList)
    assert [i["metadata"]["name"] for i in listed["items"]] == ["e1", "e2"]
    assert listed["metadata"]["continue"]
    assert listed["metadata"]["remainingItemCount"] == 1


def test_protobuf_update_and_delete(api: RestHarness) -> None:
    created = api.create("e1")
    changed = {**created, "metadata": {**created["metadata"], "labels": {"app": "changed"}}}
    reply = api.put(E1, envelope_of(changed), content_type=PB, accept=PB)
    assert reply.code == 200, reply.body
    assert unwrap(reply.body, "Event", codec.EventsEvent)["metadata"]["labels"] == {
        "app": "changed"
    }
    assert api.get(E1).json()["metadata"]["labels"] == {"app": "changed"}
    options = codec.wrap(
        "events.k8s.io/v1",
        "DeleteOptions",
        codec.encode(codec.DeleteOptions, {"preconditions": {"uid": "other"}}),
    )
    reply = api.delete(E1, options, content_type=PB, accept=PB)
    assert (reply.code, reply.content_type) == (409, PB)
    reply = api.delete(E1, accept=PB)
    assert (reply.code, reply.content_type) == (200, PB)
    done = unwrap(reply.body, "Status", codec.Status)
    assert done["status"] == "Success"
    assert done["details"]["name"] == "e1"


def test_status_errors_in_protobuf(api: RestHarness) -> None:
    reply = api.get(ns_path("ns1", "missing"), accept=f"{PB}, application/json")
    assert (reply.code, reply.content_type) == (404, PB)
    assert unwrap(reply.body, "Status", codec.Status) == {
        "apiVersion": "v1",
        "status": "Failure",
        "message": 'events.events.k8s.io "missing" not found',
        "reason": "NotFound",
        "details": {"name": "missing", "group": "events.k8s.io", "kind": "events"},
        "code": 404,
    }
    # JSON first in Accept: the Status stays JSON.
    reply = api.get(ns_path("ns1", "missing"), accept=f"application/json, {PB}")
    assert (reply.code, reply.content_type) == (404, "application/json")


def test_bad_protobuf_bodies(api: RestHarness) -> None:
    reply = api.post(EVENTS, b"{}\x00\x00", content_type=PB)
    assert reply.code == 400
    assert reply.json()["message"] == (
        "the object provided is unrecognized (must be of type Event): provided data does not "
        "appear to be a protobuf message, expected prefix [107 56 115 0] ({}\x00\x00)"
    )
    reply = api.post(EVENTS, envelope_of(event("e1"), "v1"), content_type=PB)
    assert reply.code == 400
    assert reply.json()["message"] == (
        "the API version in the data (v1) does not match the expected API version "
        "(events.k8s.io/v1)"
    )


def test_table_is_never_protobuf(api: RestHarness) -> None:
    api.create("e1")
    reply = api.get(E1, accept=f"{PB};as=Table;g=meta.k8s.io;v=v1")
    assert reply.code == 406
    partial = api.get(E1, accept=f"{PB};as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
    assert (partial.code, partial.content_type) == (200, PB)
    meta = unwrap(partial.body, "PartialObjectMetadata", codec.meta_pb2.PartialObjectMetadata)
    assert meta["metadata"]["name"] == "e1"


def test_protobuf_watch_frames(api: RestHarness) -> None:
    api.create("e1")
    watch = api.watch(EVENTS + "?watch=1&resourceVersion=0&allowWatchBookmarks=true", accept=PB)
    assert watch.code == 200
    assert watch.headers.getRawHeaders("content-type") == [f"{PB};stream=watch"]
    created = api.create("e2")
    api.delete(E1)
    every = codec.read_watch_frames(watch.raw)
    frames = [frame for frame in every if frame[0] != "BOOKMARK"]
    assert [kind for kind, _ in frames] == ["ADDED", "ADDED", "DELETED"]
    bookmark = unwrap(every[1][1], "Event", codec.EventsEvent)
    assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    objects = [unwrap(obj, "Event", codec.EventsEvent) for _, obj in frames]
    assert [o["metadata"]["name"] for o in objects] == ["e1", "e2", "e1"]
    assert objects[1]["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    # Every frame is a 4-byte big-endian length and a bare WatchEvent (no envelope).
    data = watch.raw
    size = int.from_bytes(data[:4], "big")
    assert data[4:11] == b"\x0a\x05ADDED"
    assert len(frames[0][1]) < size


def test_partial_object_metadata_list_in_protobuf(api: RestHarness) -> None:
    api.create("e1")
    api.create("e2")
    reply = api.get(EVENTS, accept=f"{PB};as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
    assert (reply.code, reply.content_type) == (200, PB)
    listed = unwrap(
        reply.body, "PartialObjectMetadataList", codec.meta_pb2.PartialObjectMetadataList
    )
    assert listed["apiVersion"] == "meta.k8s.io/v1"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["e1", "e2"]
