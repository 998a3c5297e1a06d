"""Field selector labels per API and the internal field set (event strategy.go)."""

from __future__ import annotations

import pytest

from apiserver.api.events import convert as c
from apiserver.api.events.selection import (
    FIELDS_CORE,
    FIELDS_V1,
    convert_field_label,
    event_fields,
    event_labels,
)
from apiserver.apimachinery.errors import StatusError

INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def test_supported_labels() -> None:
    common = {"reason", "source", "type", "metadata.namespace", "metadata.name"}
    assert {f"involvedObject.{k}" for k in INVOLVED} | common | {
        "reportingComponent"
    } == FIELDS_CORE
    assert {f"regarding.{k}" for k in INVOLVED} | common | {"reportingController"} == FIELDS_V1


@pytest.mark.parametrize("key", INVOLVED)
def test_v1_regarding_maps_to_involved_object(key: str) -> None:
    assert convert_field_label("events.k8s.io/v1", f"regarding.{key}", "x") == (
        f"involvedObject.{key}",
        "x",
    )
    assert convert_field_label("v1", f"involvedObject.{key}", "x") == (f"involvedObject.{key}", "x")


def test_v1_reporting_controller_maps_to_reporting_component() -> None:
    assert convert_field_label("events.k8s.io/v1", "reportingController", "k") == (
        "reportingComponent",
        "k",
    )
    assert convert_field_label("v1", "reportingComponent", "k") == ("reportingComponent", "k")


@pytest.mark.parametrize(
    ("api", "label"),
    [
        ("events.k8s.io/v1", "involvedObject.name"),
        ("events.k8s.io/v1", "note"),
        ("events.k8s.io/v1", "reportingComponent"),
        ("v1", "regarding.name"),
        ("v1", "reportingController"),
        ("v1", "message"),
        ("v1", "metadata.uid"),
    ],
)
def test_unsupported_labels_are_400(api: str, label: str) -> None:
    with pytest.raises(StatusError) as info:
        convert_field_label(api, label, "x")
    assert info.value.code == 400
    assert info.value.reason == "BadRequest"
    assert info.value.message == f"field label not supported: {label}"


def test_event_fields() -> None:
    ev = c.v1_to_internal(
        {
            "metadata": {"name": "e", "namespace": "ns", "labels": {"a": "b"}},
            "regarding": {"kind": "Pod", "name": "p", "uid": "u"},
            "reason": "R",
            "reportingController": "ctl",
            "type": "Normal",
        }
    )
    assert event_fields(ev) == {
        "involvedObject.kind": "Pod",
        "involvedObject.namespace": "",
        "involvedObject.name": "p",
        "involvedObject.uid": "u",
        "involvedObject.apiVersion": "",
        "involvedObject.resourceVersion": "",
        "involvedObject.fieldPath": "",
        "reason": "R",
        "reportingComponent": "ctl",
        "source": "ctl",
        "type": "Normal",
        "metadata.name": "e",
        "metadata.namespace": "ns",
    }
    assert event_labels(ev) == {"a": "b"}


def test_source_prefers_the_component() -> None:
    ev = c.core_v1_to_internal({"source": {"component": "kubelet"}, "reportingComponent": "x"})
    assert event_fields(ev)["source"] == "kubelet"
    assert event_labels(ev) == {}
    assert set(event_fields(ev)) == set(FIELDS_CORE)
