"""POST /apis/events.k8s.io/v1/namespaces/{ns}/events in process: the create path of
``api/events/rest.py`` (k8s.io/apiserver pkg/endpoints/handlers/create.go and
pkg/registry/generic/registry/store.go), its options, body decoding and every error Status."""

from __future__ import annotations

import random
from typing import Any

import pytest
import yaml
from tests.unit.api_events.rest_harness import (
    EPOCH,
    EPOCH_TEXT,
    RestHarness,
    event,
    ns_path,
    status,
)

from apiserver.api.events.rest import BASE
from apiserver.apimachinery.names import generate_name

EVENTS = ns_path("ns1")


@pytest.fixture
def api() -> RestHarness:
    return RestHarness()


def bad_request(message: str) -> dict[str, Any]:
    return status(400, "BadRequest", message)


def test_create_sets_server_fields_from_the_clock_and_user_agent(api: RestHarness) -> None:
    api.advance(90)
    reply = api.post(EVENTS, event("e1"), user_agent="kubectl/v1.31.0 (linux/amd64)")
    assert reply.code == 201
    assert reply.content_type == "application/json"
    created = reply.json()
    assert list(created)[:3] == ["kind", "apiVersion", "metadata"]
    meta = created["metadata"]
    assert meta["name"] == "e1" and meta["namespace"] == "ns1"
    assert meta["resourceVersion"] == str(api.revision())
    assert meta["creationTimestamp"] == "2026-11-22T10:01:30Z"
    assert len(meta["uid"]) == 36
    assert meta["managedFields"] == [
        {
            "manager": "kubectl",
            "operation": "Update",
            "apiVersion": "events.k8s.io/v1",
            "time": "2026-11-22T10:01:30Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:action": {},
                "f:eventTime": {},
                "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                "f:note": {},
                "f:reason": {},
                "f:regarding": {},
                "f:reportingController": {},
                "f:reportingInstance": {},
                "f:type": {},
            },
        }
    ]
    # What GET returns is what POST answered.
    assert api.get(ns_path("ns1", "e1")).json() == created


def test_create_wipes_server_owned_fields_and_takes_the_url_namespace(api: RestHarness) -> None:
    body = event("e1")
    body["metadata"] = {
        "name": "e1",
        "uid": "client-uid",
        "creationTimestamp": "2001-01-01T00:00:00Z",
        "deletionGracePeriodSeconds": 5,
        "selfLink": "/x",
    }
    body["regarding"]["namespace"] = "ns1"
    created = api.post(EVENTS, body).json()
    meta = created["metadata"]
    assert meta["namespace"] == "ns1"
    assert meta["uid"] != "client-uid"
    assert meta["creationTimestamp"] == EPOCH_TEXT
    assert "deletionGracePeriodSeconds" not in meta and "selfLink" not in meta


def test_field_manager_option_wins_over_user_agent(api: RestHarness) -> None:
    created = api.post(EVENTS + "?fieldManager=mgr", event("e1"), user_agent="kubectl/1").json()
    assert created["metadata"]["managedFields"][0]["manager"] == "mgr"


def test_already_exists(api: RestHarness) -> None:
    api.create("e1")
    reply = api.post(EVENTS, event("e1"))
    assert reply.code == 409
    assert reply.json() == status(
        409,
        "AlreadyExists",
        'events.events.k8s.io "e1" already exists',
        {"name": "e1", "group": "events.k8s.io", "kind": "events"},
    )


def test_namespace_mismatch(api: RestHarness) -> None:
    reply = api.post(EVENTS, event("e1", "other"))
    assert reply.code == 400
    assert reply.json() == bad_request(
        "the namespace of the provided object does not match the namespace sent on the request"
    )


def test_invalid_event_is_422_with_causes(api: RestHarness) -> None:
    bad = event("e3")
    del bad["eventTime"]
    bad["type"] = ""
    reply = api.post(EVENTS, bad)
    assert reply.code == 422
    assert reply.json() == status(
        422,
        "Invalid",
        'Event "e3" is invalid: [eventTime: Required value, type: Invalid value: "": has '
        "invalid value: ]",
        {
            "name": "e3",
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
    )
    assert api.get(ns_path("ns1", "e3")).code == 404


def test_missing_name_is_invalid_without_a_name_in_details(api: RestHarness) -> None:
    body = event("x")
    body["metadata"] = {"namespace": "ns1"}
    reply = api.post(EVENTS, body)
    assert reply.code == 422
    assert reply.json() == status(
        422,
        "Invalid",
        'Event "" is invalid: metadata.name: Required value: name or generateName is required',
        {
            "kind": "Event",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: name or generateName is required",
                    "field": "metadata.name",
                }
            ],
        },
    )


def test_resource_version_on_create_is_500_with_an_empty_reason(api: RestHarness) -> None:
    body = event("e4", metadata={"name": "e4", "namespace": "ns1", "resourceVersion": "5"})
    reply = api.post(EVENTS, body)
    assert reply.code == 500
    assert reply.json() == status(
        500, "", "resourceVersion should not be set on objects to be created"
    )
    assert "reason" not in reply.json()


def test_generate_name(api: RestHarness) -> None:
    body = event("")
    body["metadata"] = {"generateName": "gen-", "namespace": "ns1"}
    created = api.post(EVENTS, body).json()
    name = created["metadata"]["name"]
    assert name.startswith("gen-") and len(name) == len("gen-") + 5
    assert created["metadata"]["generateName"] == "gen-"


def test_generate_name_retries_then_gives_up(api: RestHarness) -> None:
    # The names the server will draw, from a copy of its random generator.
    predictor = random.Random()
    predictor.setstate(api.api.rng.getstate())
    names = [generate_name("gen-", predictor) for _ in range(8)]
    for name in names[:7]:
        api.create(name)
    body = event("")
    body["metadata"] = {"generateName": "gen-", "namespace": "ns1"}
    # Seven taken: the eighth attempt succeeds.
    assert api.post(EVENTS, body).json()["metadata"]["name"] == names[7]
    predictor.setstate(api.api.rng.getstate())
    names = [generate_name("gen-", predictor) for _ in range(8)]
    for name in names:
        api.create(name)
    reply = api.post(EVENTS, body)
    assert reply.code == 409
    assert reply.json() == status(
        409,
        "AlreadyExists",
        f'events.events.k8s.io "{names[-1]}" already exists, the server was not able to '
        "generate a unique name for the object",
        {
            "name": names[-1],
            "group": "events.k8s.io",
            "kind": "events",
            "retryAfterSeconds": 1,
        },
    )


def test_dry_run_validates_and_stores_nothing(api: RestHarness) -> None:
    revision = api.revision()
    reply = api.post(EVENTS + "?dryRun=All", event("dry"))
    assert reply.code == 201
    assert "resourceVersion" not in reply.json()["metadata"]
    assert api.revision() == revision
    assert api.get(ns_path("ns1", "dry")).code == 404
    # Conflicts are still checked.
    api.create("e1")
    assert api.post(EVENTS + "?dryRun=All", event("e1")).code == 409
    # And so is validation.
    assert api.post(EVENTS + "?dryRun=All", event("e2", type="Odd")).code == 422


def test_field_validation_warn_strict_ignore(api: RestHarness) -> None:
    reply = api.post(EVENTS, event("u1", extra="field"))
    assert reply.code == 201
    assert reply.all("warning") == ['299 - "unknown field \\"extra\\""']
    assert "extra" not in reply.json()
    reply = api.post(EVENTS + "?fieldValidation=Strict", event("u2", x=1, y=2))
    assert reply.code == 400
    assert reply.json() == bad_request(
        'Event in version "v1" cannot be handled as a Event: strict decoding error: '
        'unknown field "x", unknown field "y"'
    )
    reply = api.post(EVENTS + "?fieldValidation=Ignore", event("u3", x=1))
    assert reply.code == 201
    assert reply.all("warning") == []
    duplicate = b'{"apiVersion":"events.k8s.io/v1","kind":"Event","note":"a","note":"b"}'
    reply = api.post(EVENTS + "?fieldValidation=Strict", duplicate)
    assert reply.code == 400
    assert reply.json()["message"].endswith('strict decoding error: duplicate field "note"')


@pytest.mark.parametrize(
    ("query", "message", "cause"),
    [
        (
            "dryRun=x",
            'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["x"]: '
            'supported values: "All"',
            {
                "reason": "FieldValueNotSupported",
                "message": 'Unsupported value: ["x"]: supported values: "All"',
                "field": "dryRun",
            },
        ),
        (
            "fieldManager=" + "a" * 129,
            'CreateOptions.meta.k8s.io "" is invalid: fieldManager: Too long: may not be more '
            "than 128 bytes",
            {
                "reason": "FieldValueTooLong",
                "message": "Too long: may not be more than 128 bytes",
                "field": "fieldManager",
            },
        ),
        (
            "fieldValidation=Bogus",
            'CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: '
            '"Bogus": supported values: "", "Ignore", "Strict", "Warn"',
            {
                "reason": "FieldValueNotSupported",
                "message": 'Unsupported value: "Bogus": supported values: "", "Ignore", '
                '"Strict", "Warn"',
                "field": "fieldValidation",
            },
        ),
    ],
)
def test_invalid_create_options(
    api: RestHarness, query: str, message: str, cause: dict[str, str]
) -> None:
    reply = api.post(f"{EVENTS}?{query}", event("e1"))
    assert reply.code == 422
    assert reply.json() == status(
        422,
        "Invalid",
        message,
        {"group": "meta.k8s.io", "kind": "CreateOptions", "causes": [cause]},
    )


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            b"{bad",
            "couldn't get version/kind; json parse error: unexpected character, expected a "
            "string key: line 1 column 2 (char 1)",
        ),
        (b"", "Object 'Kind' is missing in ''"),
        (b"null", "Object 'Kind' is missing in 'null'"),
        (
            b"[1]",
            'Event in version "v1" cannot be handled as a Event: json: cannot unmarshal list '
            "into Go value of type v1.Event",
        ),
    ],
)
def test_undecodable_json_bodies(api: RestHarness, raw: bytes, message: str) -> None:
    reply = api.post(EVENTS, raw)
    assert reply.code == 400
    assert reply.json() == bad_request(message)


def test_type_meta_and_field_decoding_errors(api: RestHarness) -> None:
    reply = api.post(EVENTS, event("e1", apiVersion="v1"))
    assert reply.json() == bad_request(
        "the API version in the data (v1) does not match the expected API version "
        "(events.k8s.io/v1)"
    )
    reply = api.post(EVENTS, event("e1", kind="Pod"))
    assert reply.json() == bad_request(
        'Event in version "v1" cannot be handled as a Event: no kind "Pod" is registered for '
        'version "events.k8s.io/v1" in scheme "pkg/api/legacyscheme/scheme.go:30"'
    )
    reply = api.post(EVENTS, event("e1", eventTime="2026-11-22T10:00:00Z"))
    assert reply.json() == bad_request(
        'Event in version "v1" cannot be handled as a Event: parsing time '
        '"2026-11-22T10:00:00Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse "Z" as '
        '".000000"'
    )
    # Type meta may be left out: the endpoint says what it is.
    body = event("e2")
    del body["kind"], body["apiVersion"]
    assert api.post(EVENTS, body).code == 201


def test_yaml_in_and_out(api: RestHarness) -> None:
    raw = yaml.safe_dump(event("y1")).encode()
    reply = api.post(EVENTS, raw, content_type="application/yaml", accept="application/yaml")
    assert reply.code == 201
    assert reply.content_type == "application/yaml"
    assert reply.body.startswith(b"kind: Event\napiVersion: events.k8s.io/v1\nmetadata:\n")
    assert yaml.safe_load(reply.body)["metadata"]["name"] == "y1"
    reply = api.post(EVENTS, b"a: [", content_type="application/yaml")
    assert reply.code == 400
    assert reply.json()["message"].startswith("error converting YAML to JSON: ")


def test_unsupported_body_media_type_is_415(api: RestHarness) -> None:
    reply = api.post(EVENTS, b"\x00", content_type="text/plain")
    assert reply.code == 415
    assert reply.json() == status(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf",
    )


def test_unacceptable_output_is_406_and_nothing_is_created(api: RestHarness) -> None:
    # A Table is JSON/YAML only.
    reply = api.post(
        EVENTS,
        event("e1"),
        accept="application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
    )
    assert reply.code == 406
    assert reply.json() == status(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json, application/yaml, "
        "application/vnd.kubernetes.protobuf",
    )
    reply = api.post(EVENTS, event("e2"), accept="text/html")
    assert reply.json() == status(406, "NotAcceptable", "406: Not Acceptable", {})


def test_pretty_output(api: RestHarness) -> None:
    reply = api.post(EVENTS + "?pretty=true", event("p1"))
    assert reply.body.startswith(b'{\n  "kind": "Event",\n  "apiVersion": "events.k8s.io/v1"')
    reply = api.post(EVENTS, event("p2"), user_agent="curl/8.0")
    assert reply.body.startswith(b'{\n  "kind": "Event"')
    reply = api.post(EVENTS + "?pretty=0", event("p3"), user_agent="curl/8.0")
    assert reply.body.startswith(b'{"kind":"Event"')


def test_create_as_table(api: RestHarness) -> None:
    reply = api.post(EVENTS, event("t1"), accept="application/json;as=Table;v=v1;g=meta.k8s.io")
    assert reply.code == 201
    table = reply.json()
    assert table["kind"] == "Table"
    assert table["rows"][0]["cells"][3] == "pod/p"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", BASE + "events"),
        ("DELETE", BASE + "events"),
        ("PUT", EVENTS),
        ("PATCH", EVENTS),
        ("POST", EVENTS + "/e1"),
        ("POST", BASE + "watch/namespaces/ns1/events"),
        ("DELETE", BASE + "watch/namespaces/ns1/events/e1"),
    ],
)
def test_method_not_allowed(api: RestHarness, method: str, path: str) -> None:
    reply = api.request(method, path, event("e1"))
    assert reply.code == 405
    assert reply.json() == status(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


@pytest.mark.parametrize(
    "path",
    [
        BASE + "foo",
        BASE + "namespaces//events",
        BASE + "namespaces/ns1/events/",
        BASE + "namespaces/ns1/pods",
        BASE + "namespaces/ns1/events/e1/status",
    ],
)
def test_unknown_paths_are_404(api: RestHarness, path: str) -> None:
    reply = api.get(path)
    assert reply.code == 404
    assert reply.json() == status(
        404, "NotFound", "the server could not find the requested resource", {}
    )


def test_clock_is_the_only_time_source(api: RestHarness) -> None:
    api.advance(3600 * 24)
    created = api.create("later")
    assert created["metadata"]["creationTimestamp"] == "2026-11-23T10:00:00Z"
    assert api.clock.seconds() == EPOCH + 3600 * 24
