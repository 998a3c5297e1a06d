"""core/v1 conversion and the stored shape of events (apiserver.api.events.corev1)."""

from __future__ import annotations

import json
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.api_events.test_convert import internal_events
from twisted.internet.task import Clock

from apiserver.api.events import convert as c
from apiserver.api.events import corev1
from apiserver.api.events.rest import GR
from apiserver.registry.storagecodec import (
    JSON_SERIALIZER,
    PROTOBUF,
    PROTOBUF_SERIALIZER,
    YAML_SERIALIZER,
    decode_any,
)
from apiserver.registry.store import Registry
from apiserver.storage.memory.store import MemoryStore


def _without_rv(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}
    return {**obj, "metadata": meta}


def test_stored_shape_follows_go_emission_for_core() -> None:
    internal = c.v1_to_internal(
        {
            "metadata": {"name": "a", "namespace": "default", "resourceVersion": "7"},
            "regarding": {"kind": "Pod", "name": "web"},
            "note": "hello",
            "reason": "Started",
            "type": "Normal",
        }
    )
    internal["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    stored = corev1.internal_to_stored(internal)
    assert list(stored) == [
        "kind",
        "apiVersion",
        "metadata",
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "type",
        "eventTime",
        "reportingComponent",
        "reportingInstance",
    ]
    assert stored["kind"] == "Event" and stored["apiVersion"] == "v1"
    assert "resourceVersion" not in stored["metadata"]
    assert stored["source"] == {} and stored["firstTimestamp"] is None
    assert stored["reportingComponent"] == "" and stored["message"] == "hello"
    # the object given is not changed
    assert internal["metadata"]["resourceVersion"] == "7"


def test_json_bytes_end_with_a_newline_like_go() -> None:
    internal = c.empty_internal({"name": "a", "creationTimestamp": "2024-01-01T00:00:00Z"})
    data = JSON_SERIALIZER.encode(corev1.internal_to_stored(internal))
    assert data.startswith(b'{"kind":"Event","apiVersion":"v1","metadata":{"name":"a"')
    assert data.endswith(b"}\n")


def test_missing_creation_timestamp_is_written_as_null() -> None:
    stored = corev1.internal_to_stored(c.empty_internal({"name": "a"}))
    assert stored["metadata"] == {"name": "a", "creationTimestamp": None}
    assert corev1.stored_to_internal(stored)["metadata"] == {"name": "a"}


def test_old_events_k8s_io_shape_is_still_read() -> None:
    old = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {"name": "a", "namespace": "ns", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "eventTime": "2024-01-01T00:00:00.000001Z",
        "reportingController": "ctl",
        "reportingInstance": "i",
        "regarding": {"kind": "Pod"},
        "note": "n",
        "deprecatedSource": {"component": "kubelet"},
        "deprecatedCount": 3,
    }
    internal = corev1.stored_to_internal(decode_any(orjson.dumps(old)))
    assert internal["message"] == "n"
    assert internal["involvedObject"] == {"kind": "Pod"}
    assert internal["source"] == {"component": "kubelet"}
    assert internal["reportingComponent"] == "ctl"
    assert internal["count"] == 3
    assert list(internal) == [k for k in c.INTERNAL_ORDER if k in internal]


@settings(max_examples=150, deadline=None)
@given(internal_events())
def test_stored_shape_is_the_core_encoding(ev: dict[str, Any]) -> None:
    expected = _without_rv(c.internal_to_core_v1(ev))
    if "creationTimestamp" not in ev["metadata"]:
        expected["metadata"] = c.encode_object_meta(expected["metadata"])
    assert corev1.internal_to_stored(ev) == expected
    assert list(corev1.internal_to_stored(ev)) == list(expected)


@settings(max_examples=150, deadline=None)
@given(internal_events())
def test_stored_round_trip_through_json_and_yaml(ev: dict[str, Any]) -> None:
    want = _without_rv(ev)
    for serializer in (JSON_SERIALIZER, YAML_SERIALIZER):
        data = serializer.encode(corev1.internal_to_stored(ev))
        back = corev1.stored_to_internal(serializer.decode(data))
        assert back == want
        assert list(back) == list(want)  # same key order too
        assert list(back["metadata"]) == list(want["metadata"])


@settings(max_examples=150, deadline=None)
@given(internal_events())
def test_go_written_core_json_reads_as_the_full_decoder_would(ev: dict[str, Any]) -> None:
    wire = json.loads(json.dumps(c.internal_to_core_v1(ev)))
    assert corev1.stored_to_internal(json.loads(json.dumps(wire))) == c.core_v1_to_internal(wire)


@settings(max_examples=150, deadline=None)
@given(internal_events())
def test_views_round_trip_losslessly(ev: dict[str, Any]) -> None:
    v1 = json.loads(json.dumps(c.internal_to_v1(ev)))
    core = corev1.v1_to_core(v1)
    assert core["apiVersion"] == "v1" and core["kind"] == "Event"
    assert corev1.core_to_v1(core) == v1
    assert corev1.v1_to_core(corev1.core_to_v1(core)) == core
    item = corev1.v1_to_core(v1, include_type_meta=False)
    assert "kind" not in item and "apiVersion" not in item


@settings(max_examples=300, deadline=None)
@given(internal_events(), st.booleans())
def test_protobuf_from_the_internal_form_is_the_stored_shapes(
    ev: dict[str, Any], without_rv: bool
) -> None:
    """The registry's shortcut writes the bytes the stored shape's encoding writes."""
    if without_rv:
        ev = _without_rv(ev)
    expected = PROTOBUF_SERIALIZER.encode(corev1.internal_to_stored(ev))
    direct = corev1.internal_to_protobuf(ev)
    meta = ev["metadata"]
    usual = (
        "creationTimestamp" in meta
        and "resourceVersion" not in meta
        and "ownerReferences" not in meta
    )
    assert (direct is not None) == usual
    if direct is not None:
        assert direct == expected
    registry = Registry(
        MemoryStore(Clock()), group_resource=GR, media_type=PROTOBUF, conversion=corev1.STORAGE
    )
    assert registry.encode(ev) == expected
