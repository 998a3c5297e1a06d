"""Event validation: every rule of ``pkg/apis/core/validation/events.go``, with its exact text
and cause."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from apiserver.api.events import convert as c
from apiserver.api.events.validation import validate_create, validate_update
from apiserver.apimachinery import errors

V1 = "events.k8s.io/v1"
CORE = "v1"

QNAME_REGEX = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
SUBDOMAIN_REGEX = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def good_v1() -> dict[str, Any]:
    return c.v1_to_internal(
        {
            "metadata": {"name": "e1", "namespace": "ns"},
            "eventTime": "2024-01-01T00:00:00.000000Z",
            "reportingController": "example.com/ctl",
            "reportingInstance": "ctl-1",
            "action": "Do",
            "reason": "Done",
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "p"},
            "note": "all good",
            "type": "Normal",
        }
    )


def texts(errs: list[errors.FieldError]) -> list[str]:
    return [str(e) for e in errs]


def status(errs: list[errors.FieldError], name: str = "e1") -> dict[str, Any]:
    response = errors.invalid_error("Event", name, errs).response()
    assert response.code == 422
    body: dict[str, Any] = json.loads(response.body)
    return body


def test_good_event_passes_both_apis() -> None:
    assert validate_create(good_v1(), api=V1) == []
    assert validate_create(good_v1(), api=CORE) == []
    assert validate_update(good_v1(), good_v1(), api=V1) == []


def test_spec_example_status_body() -> None:
    ev = c.v1_to_internal({"metadata": {"name": "e1", "namespace": "default"}})
    assert status(validate_create(ev, api=V1)) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Event "e1" is invalid: [eventTime: Required value, type: Invalid value: "": '
        "has invalid value: ]",
        "reason": "Invalid",
        "details": {
            "name": "e1",
            "kind": "Event",
            "causes": [
                {"reason": "FieldValueRequired", "message": "Required value", "field": "eventTime"},
                {
                    "reason": "FieldValueInvalid",
                    "message": 'Invalid value: "": has invalid value: ',
                    "field": "type",
                },
            ],
        },
        "code": 422,
    }


def test_old_event_namespace_must_match() -> None:
    ev = c.v1_to_internal(
        {"metadata": {"name": "x", "namespace": "ns"}, "regarding": {"namespace": "other"}}
    )
    assert texts(validate_create(ev, api=CORE)) == [
        'involvedObject.namespace: Invalid value: "other": does not match event.namespace'
    ]
    # empty involvedObject namespace: "" or default only
    ev = c.v1_to_internal({"metadata": {"name": "x", "namespace": "ns"}})
    assert texts(validate_create(ev, api=CORE)) == [
        'involvedObject.namespace: Invalid value: "": does not match event.namespace'
    ]
    ev = c.v1_to_internal({"metadata": {"name": "x", "namespace": "default"}})
    assert validate_create(ev, api=CORE) == []


def test_new_event_namespace_rules() -> None:
    for namespace in ("default", "kube-system"):
        ev = good_v1()
        ev["metadata"]["namespace"] = namespace
        ev["involvedObject"].pop("namespace")
        assert validate_create(ev, api=CORE) == []
    ev = good_v1()
    ev["involvedObject"].pop("namespace")
    assert texts(validate_create(ev, api=CORE)) == [
        'involvedObject.namespace: Invalid value: "": does not match event.namespace'
    ]
    # a different, non-empty involvedObject namespace is fine for new events
    ev = good_v1()
    ev["involvedObject"]["namespace"] = "elsewhere"
    assert validate_create(ev, api=CORE) == []


def test_reporting_controller_empty_gives_three_errors_with_api_specific_path() -> None:
    ev = good_v1()
    del ev["reportingComponent"]
    assert texts(validate_create(ev, api=V1)) == [
        "reportingController: Required value",
        'reportingController: Invalid value: "": name part must be non-empty',
        f'reportingController: Invalid value: "": {QNAME_REGEX}',
    ]
    assert texts(validate_create(ev, api=CORE)) == [
        "reportingComponent: Required value",
        'reportingComponent: Invalid value: "": name part must be non-empty',
        f'reportingComponent: Invalid value: "": {QNAME_REGEX}',
    ]


def test_reporting_controller_too_long_and_bad_prefix() -> None:
    ev = good_v1()
    ev["reportingComponent"] = "a" * 64
    assert texts(validate_create(ev, api=V1)) == [
        f'reportingController: Invalid value: "{"a" * 64}": name part must be no more than 63 '
        "characters"
    ]
    ev["reportingComponent"] = "Bad_Prefix/ok"
    assert texts(validate_create(ev, api=V1)) == [
        f'reportingController: Invalid value: "Bad_Prefix/ok": prefix part {SUBDOMAIN_REGEX}'
    ]


@pytest.mark.parametrize("key", ["reportingInstance", "action", "reason"])
def test_required_and_128_byte_limits(key: str) -> None:
    ev = good_v1()
    del ev[key]
    assert texts(validate_create(ev, api=CORE)) == [f"{key}: Required value"]
    ev[key] = "é" * 64 + "x"  # 129 bytes, 65 characters
    errs = validate_create(ev, api=CORE)
    assert texts(errs) == [f'{key}: Invalid value: "": can have at most 128 characters']
    assert errs[0].cause() == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "": can have at most 128 characters',
        "field": key,
    }
    ev[key] = "é" * 64  # exactly 128 bytes
    assert validate_create(ev, api=CORE) == []


def test_note_limit_is_1024_bytes() -> None:
    ev = good_v1()
    ev["message"] = "x" * 1024
    assert validate_create(ev, api=V1) == []
    ev["message"] = "x" * 1025
    assert texts(validate_create(ev, api=V1)) == [
        'message: Invalid value: "": can have at most 1024 characters'
    ]


def test_event_namespace_must_be_a_subdomain() -> None:
    ev = c.v1_to_internal(
        {"metadata": {"name": "x", "namespace": "Bad"}, "regarding": {"namespace": "Bad"}}
    )
    assert texts(validate_create(ev, api=CORE)) == [
        f'namespace: Invalid value: "Bad": {SUBDOMAIN_REGEX}'
    ]


def test_strict_rules_in_order() -> None:
    ev = good_v1()
    ev["series"] = {"count": 1}
    del ev["eventTime"]
    ev["type"] = "Odd"
    ev["firstTimestamp"] = "2024-01-01T00:00:00Z"
    ev["lastTimestamp"] = "2024-01-01T00:00:00Z"
    ev["count"] = 2
    ev["source"] = {"host": "h"}
    assert texts(validate_create(ev, api=V1)) == [
        'series.count: Invalid value: "": should be at least 2',
        "series.lastObservedTime: Required value",
        "eventTime: Required value",
        'type: Invalid value: "": has invalid value: Odd',
        'firstTimestamp: Invalid value: "": needs to be unset',
        'lastTimestamp: Invalid value: "": needs to be unset',
        'count: Invalid value: "": needs to be unset',
        'source: Invalid value: "": needs to be unset',
    ]
    # core v1 runs the legacy rules only: an old event with matching namespaces passes
    assert validate_create(ev, api=CORE) == []


def test_v1_without_event_time_skips_reporting_checks() -> None:
    ev = c.v1_to_internal({"metadata": {"name": "x", "namespace": "ns"}, "type": "Normal"})
    assert texts(validate_create(ev, api=V1)) == [
        'involvedObject.namespace: Invalid value: "": does not match event.namespace',
        "eventTime: Required value",
    ]


def test_strict_object_meta_on_create() -> None:
    ev = good_v1()
    ev["metadata"] = {"name": "Bad_Name", "namespace": "ns", "labels": {"k": "bad value"}}
    assert texts(validate_create(ev, api=V1)) == [
        f'metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_REGEX}',
        'metadata.labels: Invalid value: "bad value": a valid label must be an empty string or '
        "consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
        "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ]
    ev["metadata"] = {"namespace": "ns"}
    assert texts(validate_create(ev, api=V1)) == [
        "metadata.name: Required value: name or generateName is required"
    ]
    # core v1 names are path segments, not DNS subdomains
    ev["metadata"] = {"name": "Bad_Name", "namespace": "ns"}
    assert validate_create(ev, api=CORE) == []


def test_core_create_checks_object_meta_with_path_segment_names() -> None:
    ev = c.core_v1_to_internal({"metadata": {"name": "a/b", "namespace": "default"}})
    assert texts(validate_create(ev, api=CORE)) == [
        "metadata.name: Invalid value: \"a/b\": may not contain '/'"
    ]
    ev["metadata"]["name"] = ".."
    assert texts(validate_create(ev, api=CORE)) == [
        "metadata.name: Invalid value: \"..\": may not be '..'"
    ]
    ev["metadata"] = {"namespace": "default", "generateName": "x%"}
    assert texts(validate_create(ev, api=CORE)) == [
        "metadata.generateName: Invalid value: \"x%\": may not contain '%'",
        "metadata.name: Required value: name or generateName is required",
    ]
    # only when the legacy rules found nothing
    ev = c.core_v1_to_internal(
        {"metadata": {"name": "a/b", "namespace": "ns"}, "involvedObject": {"namespace": "x"}}
    )
    assert texts(validate_create(ev, api=CORE)) == [
        'involvedObject.namespace: Invalid value: "x": does not match event.namespace'
    ]


def test_update_core_is_object_meta_then_legacy() -> None:
    old = good_v1()
    new = copy.deepcopy(old)
    new["message"] = "changed"
    new["reason"] = "Other"
    assert validate_update(new, old, api=CORE) == []
    new["metadata"]["name"] = "other"
    assert texts(validate_update(new, old, api=CORE)) == [
        'metadata.name: Invalid value: "other": field is immutable'
    ]
    new["metadata"]["name"] = old["metadata"]["name"]
    del new["reason"]
    assert texts(validate_update(new, old, api=CORE)) == ["reason: Required value"]


def test_update_immutable_fields_print_go_values() -> None:
    old = good_v1()
    old["related"] = {"kind": "Node", "name": "n"}
    new = copy.deepcopy(old)
    new["involvedObject"]["name"] = "q"
    new["reason"] = "Other"
    new["message"] = "changed"
    new["source"] = {"component": "c"}
    new["firstTimestamp"] = "2024-01-02T03:04:05Z"
    new["lastTimestamp"] = "2024-01-02T03:04:05Z"
    new["count"] = 5
    new["type"] = "Warning"
    new["eventTime"] = "2024-01-01T00:00:01.250000Z"
    new["action"] = "Undo"
    del new["related"]
    new["reportingComponent"] = "other"
    new["reportingInstance"] = "ctl-2"
    assert texts(validate_update(new, old, api=V1)) == [
        'involvedObject: Invalid value: {"Kind":"Pod","Namespace":"ns","Name":"q","UID":"",'
        '"APIVersion":"","ResourceVersion":"","FieldPath":""}: field is immutable',
        'reason: Invalid value: "Other": field is immutable',
        'message: Invalid value: "changed": field is immutable',
        'source: Invalid value: {"Component":"c","Host":""}: field is immutable',
        "firstTimestamp: Invalid value: 2024-01-02 03:04:05 +0000 UTC: field is immutable",
        "lastTimestamp: Invalid value: 2024-01-02 03:04:05 +0000 UTC: field is immutable",
        "count: Invalid value: 5: field is immutable",
        'reason: Invalid value: "Other": field is immutable',
        'type: Invalid value: "Warning": field is immutable',
        "eventTime: Invalid value: 2024-01-01 00:00:01.25 +0000 UTC: field is immutable",
        'action: Invalid value: "Undo": field is immutable',
        'related: Invalid value: "null": field is immutable',
        'reportingController: Invalid value: "other": field is immutable',
        'reportingInstance: Invalid value: "ctl-2": field is immutable',
    ]


def test_reason_change_gives_two_identical_causes_but_one_message() -> None:
    old = good_v1()
    new = copy.deepcopy(old)
    new["reason"] = "Other"
    errs = validate_update(new, old, api=V1)
    body = status(errs)
    assert (
        body["message"]
        == 'Event "e1" is invalid: reason: Invalid value: "Other": field is immutable'
    )
    assert (
        body["details"]["causes"]
        == [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "Other": field is immutable',
                "field": "reason",
            }
        ]
        * 2
    )


def test_update_related_set_and_zero_times() -> None:
    old = good_v1()
    new = copy.deepcopy(old)
    new["related"] = {}
    new["firstTimestamp"] = "2024-01-01T00:00:00Z"
    del new["eventTime"]
    errs = texts(validate_update(new, old, api=V1))
    assert (
        'related: Invalid value: {"Kind":"","Namespace":"","Name":"","UID":"","APIVersion":"",'
        '"ResourceVersion":"","FieldPath":""}: field is immutable' in errs
    )
    assert (
        "firstTimestamp: Invalid value: 2024-01-01 00:00:00 +0000 UTC: field is immutable" in errs
    )
    assert "eventTime: Invalid value: 0001-01-01 00:00:00 +0000 UTC: field is immutable" in errs


def test_series_is_mutable_but_revalidated_only_when_changed() -> None:
    old = good_v1()
    old["series"] = {"count": 1}  # invalid, stored anyway (e.g. via core v1)
    new = copy.deepcopy(old)
    assert validate_update(new, old, api=V1) == []
    new["series"] = {"count": 0, "lastObservedTime": "2024-01-01T00:00:00.000000Z"}
    assert texts(validate_update(new, old, api=V1)) == [
        'series.count: Invalid value: "": should be at least 2'
    ]
    new["series"] = {"count": 3, "lastObservedTime": "2024-01-01T00:00:00.000000Z"}
    assert validate_update(new, old, api=V1) == []


def test_update_metadata_rules() -> None:
    old = good_v1()
    old["metadata"].update(
        {"uid": "u1", "creationTimestamp": "2024-01-01T00:00:00Z", "generation": 2}
    )
    new = copy.deepcopy(old)
    new["metadata"].update(
        {"name": "e2", "uid": "u2", "creationTimestamp": "2024-01-01T00:00:01Z", "generation": 1}
    )
    assert texts(validate_update(new, old, api=V1)) == [
        "metadata.generation: Invalid value: 1: must not be decremented",
        'metadata.name: Invalid value: "e2": field is immutable',
        'metadata.uid: Invalid value: "u2": field is immutable',
        "metadata.creationTimestamp: Invalid value: 2024-01-01 00:00:01 +0000 UTC: "
        "field is immutable",
    ]


def test_eventtime_sub_microsecond_changes_are_tolerated() -> None:
    old = good_v1()
    wire = c.internal_to_v1(old)
    # a client that sends the same instant written with another offset is not changing it
    wire["eventTime"] = "2024-01-01T01:00:00.000000+01:00"
    new = c.v1_to_internal(wire)
    assert validate_update(new, old, api=V1) == []
