"""The core/v1 Event schemas the server publishes (``/openapi/v3/api/v1``) and uses
(``apiserver.api.events.schema``) against the official definition kept in tests/reference/
(kube's ``api__v1_openapi.json``): field names, types and required fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apiserver.api.events.schema import (
    EVENT_CORE_V1,
    EVENT_SERIES_CORE,
    EVENT_SOURCE,
    OBJECT_REFERENCE,
)
from apiserver.apimachinery.schema import Struct
from apiserver.discovery import documents as discovery
from apiserver.openapi.documents import api_v1_document, swagger_v2, v3_documents

REFERENCE = (
    Path(__file__).resolve().parents[2]
    / "reference"
    / "core-v1-events-serviceaccounts-openapi.json"
)
CORE = "io.k8s.api.core.v1."
NAMES = ("Event", "EventList", "EventSeries", "EventSource", "ObjectReference")


@pytest.fixture(scope="module")
def official() -> dict[str, Any]:
    schemas: dict[str, Any] = json.loads(REFERENCE.read_text())["components"]["schemas"]
    return schemas


def _shape(schema: dict[str, Any]) -> dict[str, Any]:
    """Names, types (a reference by its target) and required fields; descriptions dropped."""

    def type_of(prop: dict[str, Any]) -> Any:
        if "allOf" in prop:
            return prop["allOf"][0]["$ref"].rsplit("/", 1)[-1]
        if "$ref" in prop:
            return prop["$ref"].rsplit("/", 1)[-1]
        if prop.get("type") == "array":
            return ("array", type_of(prop["items"]))
        return (prop.get("type"), prop.get("format"))

    return {
        "properties": {name: type_of(p) for name, p in schema.get("properties", {}).items()},
        "required": sorted(schema.get("required", [])),
        "type": schema.get("type"),
    }


@pytest.mark.parametrize("name", NAMES)
def test_served_schema_matches_the_official_definition(official: dict[str, Any], name: str) -> None:
    served = api_v1_document(events=True)["components"]["schemas"][CORE + name]
    assert _shape(served) == _shape(official[CORE + name])


def test_event_required_fields_and_types(official: dict[str, Any]) -> None:
    served = _shape(api_v1_document(events=True)["components"]["schemas"][CORE + "Event"])
    assert served["required"] == ["involvedObject", "metadata"]
    assert served["properties"]["count"] == ("integer", "int32")
    assert served["properties"]["eventTime"] == "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime"
    assert served["properties"]["firstTimestamp"] == "io.k8s.apimachinery.pkg.apis.meta.v1.Time"


@pytest.mark.parametrize(
    ("name", "struct"),
    [
        ("Event", EVENT_CORE_V1),
        ("EventSeries", EVENT_SERIES_CORE),
        ("EventSource", EVENT_SOURCE),
        ("ObjectReference", OBJECT_REFERENCE),
    ],
)
def test_hand_written_schema_has_the_official_fields(
    official: dict[str, Any], name: str, struct: Struct
) -> None:
    assert struct.field_names() == set(official[CORE + name]["properties"])


def test_api_v1_document_without_core_events_has_only_discovery() -> None:
    assert list(api_v1_document()["paths"]) == ["/api/v1/"]
    with_events = api_v1_document(events=True)
    assert "/api/v1/namespaces/{namespace}/events/{name}" in with_events["paths"]
    assert "/api/v1/" in with_events["paths"]


def test_swagger_v2_carries_core_event_paths() -> None:
    documents = v3_documents(events_enabled=True, core_events=True)
    v2 = swagger_v2(documents, "v1.32.0")
    assert "/api/v1/namespaces/{namespace}/events" in v2["paths"]
    assert "io.k8s.api.core.v1.Event" in v2["definitions"]


def test_discovery_lists_core_events() -> None:
    listed = discovery.core_resource_list(token_request=True, events=True)
    assert [r["name"] for r in listed["resources"]] == ["events", "serviceaccounts/token"]
    assert listed["resources"][0] == {
        "name": "events",
        "singularName": "event",
        "namespaced": True,
        "kind": "Event",
        "verbs": [
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ],
        "shortNames": ["ev"],
        "storageVersionHash": "r2yiGXH7wu8=",
    }
    items = discovery.aggregated_api_items(token_request=False, events=True)
    resources = items[0]["versions"][0]["resources"]
    assert resources[0]["resource"] == "events"
    assert resources[0]["responseKind"] == {"group": "", "version": "", "kind": "Event"}
    assert discovery.aggregated_api_items()[0]["versions"][0] == {
        "version": "v1",
        "freshness": "Current",
    }
