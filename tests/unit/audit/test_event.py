"""The fields of an audit Event (apiserver.audit.event), after k8s.io/apiserver
pkg/audit/request.go and k8s.io/apimachinery pkg/util/net/http.go (SourceIPs)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.fake_request import FakeRequest
from twisted.internet.address import IPv4Address, IPv6Address

from apiserver.audit.event import (
    AuditRecord,
    micro_time,
    micro_time_bytes,
    object_ref,
    response_status,
    source_ips,
    user_agent,
    user_info,
    without_managed_fields,
)
from apiserver.auth.interface import UserInfo
from apiserver.auth.requestinfo import parse_request_info
from apiserver.http.app import RequestInfo, parse_query

EVENT = "/apis/events.k8s.io/v1/namespaces/default/events/e1"


def request_with(headers: dict[bytes, list[bytes]], peer: object = None) -> FakeRequest:
    request = FakeRequest(b"GET", b"/x", headers)
    request.client = peer  # type: ignore[attr-defined]
    return request


@pytest.mark.parametrize(
    ("headers", "peer", "expected"),
    [
        ({}, IPv4Address("TCP", "10.0.0.9", 5555), ["10.0.0.9"]),
        ({}, IPv6Address("TCP", "::1", 5555), ["::1"]),
        ({}, IPv6Address("TCP", "::ffff:10.0.0.9", 5555), ["10.0.0.9"]),
        (
            {b"X-Forwarded-For": [b"1.1.1.1, bogus , 2.2.2.2"]},
            IPv4Address("TCP", "10.0.0.9", 1),
            ["1.1.1.1", "2.2.2.2", "10.0.0.9"],
        ),
        (
            {b"X-Forwarded-For": [b"1.1.1.1"], b"X-Real-Ip": [b"1.1.1.1"]},
            IPv4Address("TCP", "10.0.0.9", 1),
            ["1.1.1.1", "10.0.0.9"],
        ),
        (
            {b"X-Real-Ip": [b"3.3.3.3"]},
            IPv4Address("TCP", "10.0.0.9", 1),
            ["3.3.3.3", "10.0.0.9"],
        ),
        # The peer is not repeated when it is the last address of the chain already.
        (
            {b"X-Forwarded-For": [b"1.1.1.1, 10.0.0.9"]},
            IPv4Address("TCP", "10.0.0.9", 1),
            ["1.1.1.1", "10.0.0.9"],
        ),
        ({b"X-Real-Ip": [b"nonsense"]}, None, []),
    ],
)
def test_source_ips(headers: dict[bytes, list[bytes]], peer: object, expected: list[str]) -> None:
    assert source_ips(request_with(headers, peer)) == expected


def test_the_user_agent_is_capped_at_1024_characters() -> None:
    assert user_agent(request_with({b"User-Agent": [b"kubectl/v1.36"]})) == "kubectl/v1.36"
    long = "a" * 1025
    capped = user_agent(request_with({b"User-Agent": [long.encode()]}))
    assert capped == "a" * 1024 + "...TRUNCATED"
    assert user_agent(request_with({b"User-Agent": [b"a" * 1024]})) == "a" * 1024


def test_micro_time_bytes_is_micro_time_encoded() -> None:
    for seconds in (0, 1_700_000_000.123456, 1_700_000_000.9999996, 1_700_000_001.0000004, 59.5):
        assert micro_time_bytes(seconds) == micro_time(seconds).encode()


def test_micro_time_is_rfc3339_with_six_digits_in_utc() -> None:
    assert micro_time(0) == "1970-01-01T00:00:00.000000Z"
    assert micro_time(1_700_000_000.123456) == "2023-11-14T22:13:20.123456Z"


def test_user_info_leaves_empty_fields_out() -> None:
    assert user_info(None) == {}
    assert user_info(UserInfo("system:anonymous", groups=("system:unauthenticated",))) == {
        "username": "system:anonymous",
        "groups": ["system:unauthenticated"],
    }
    full = UserInfo("u", "id-1", ("g",), {"b": ("2",), "a": ("1",)})
    assert list(user_info(full)) == ["username", "uid", "groups", "extra"]
    assert list(user_info(full)["extra"]) == ["a", "b"]


def test_object_ref_of_resource_requests_only() -> None:
    ref = object_ref(parse_request_info("GET", EVENT))
    assert ref == {
        "resource": "events",
        "namespace": "default",
        "name": "e1",
        "apiGroup": "events.k8s.io",
        "apiVersion": "v1",
    }
    assert list(ref or {}) == ["resource", "namespace", "name", "apiGroup", "apiVersion"]
    sub = object_ref(parse_request_info("POST", "/api/v1/namespaces/n/serviceaccounts/sa/token"))
    assert sub == {
        "resource": "serviceaccounts",
        "namespace": "n",
        "name": "sa",
        "apiVersion": "v1",
        "subresource": "token",
    }
    assert object_ref(parse_request_info("GET", "/healthz")) is None


def test_response_status_of_a_status_answer_and_of_others() -> None:
    body = (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"events.events.k8s.io \\"x\\" not found","reason":"NotFound","details":{"name":"x",'
        b'"group":"events.k8s.io","kind":"events"},"code":404}\n'
    )
    status = response_status(404, body)
    assert list(status) == ["metadata", "status", "message", "reason", "details", "code"]
    assert status["message"] == 'events.events.k8s.io "x" not found'
    assert response_status(200, b'{"kind":"Event"}') == {"metadata": {}, "code": 200}
    assert response_status(200, b"ok") == {"metadata": {}, "code": 200}


def test_managed_fields_are_dropped_from_objects_and_list_items() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "a", "managedFields": [{}]}, "x": 1}
    assert without_managed_fields(obj) == {"metadata": {"name": "a"}, "x": 1}
    assert obj["metadata"]["managedFields"] == [{}]  # the original is left alone
    listed = {"items": [obj], "metadata": {}}
    assert without_managed_fields(listed)["items"] == [{"metadata": {"name": "a"}, "x": 1}]


def make_record(
    method: bytes, uri: bytes, level: str = "Metadata"
) -> tuple[AuditRecord, RequestInfo]:
    request = FakeRequest(method, uri, {b"User-Agent": [b"test"]})
    request.client = IPv4Address("TCP", "127.0.0.1", 1)  # type: ignore[attr-defined]
    request.responseHeaders.setRawHeaders(b"audit-id", [b"id-1"])
    path = uri.partition(b"?")[0].decode()
    query = parse_query(uri)
    info = RequestInfo(method.decode(), path, query, False, True)
    info.resolved = parse_request_info(method.decode(), path, query)
    info.user = info.authenticated_user = UserInfo("alice", groups=("devs",))
    record = AuditRecord(request, info, level, 10.5, user=info.user)  # type: ignore[arg-type]
    return record, info


def test_an_event_has_go_field_order_and_omits_empty_fields() -> None:
    record, info = make_record(b"GET", EVENT.encode() + b"?pretty=1")
    received = record.event("RequestReceived", 99.0)
    assert received == {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": "id-1",
        "stage": "RequestReceived",
        "requestURI": EVENT + "?pretty=1",
        "verb": "get",
        "user": {"username": "alice", "groups": ["devs"]},
        "sourceIPs": ["127.0.0.1"],
        "userAgent": "test",
        "objectRef": {
            "resource": "events",
            "namespace": "default",
            "name": "e1",
            "apiGroup": "events.k8s.io",
            "apiVersion": "v1",
        },
        "requestReceivedTimestamp": "1970-01-01T00:00:10.500000Z",
        "stageTimestamp": "1970-01-01T00:00:10.500000Z",
    }
    assert list(received)[:8] == [
        "kind",
        "apiVersion",
        "level",
        "auditID",
        "stage",
        "requestURI",
        "verb",
        "user",
    ]
    info.impersonated_user = UserInfo("bob")
    info.authorization = ("allow", "RBAC: allowed")
    record.log_response(200, b'{"kind":"Event"}')
    complete = record.event("ResponseComplete", 11.25)
    assert complete["stageTimestamp"] == "1970-01-01T00:00:11.250000Z"
    assert complete["impersonatedUser"] == {"username": "bob"}
    assert complete["responseStatus"] == {"metadata": {}, "code": 200}
    assert complete["annotations"] == {
        "authorization.k8s.io/decision": "allow",
        "authorization.k8s.io/reason": "RBAC: allowed",
    }
    assert "responseObject" not in complete  # Metadata level
    assert list(complete)[-3:] == ["requestReceivedTimestamp", "stageTimestamp", "annotations"]
    # The earlier event was not changed by what came after.
    assert "responseStatus" not in received


def test_an_authorizer_error_annotates_the_reason_only() -> None:
    record, info = make_record(b"GET", EVENT.encode())
    info.authorization = ("", "internal error")
    assert record.event("ResponseComplete", 1)["annotations"] == {
        "authorization.k8s.io/reason": "internal error"
    }


def test_non_resource_requests_use_the_lowercased_method() -> None:
    record, _ = make_record(b"GET", b"/healthz")
    event = record.event("ResponseComplete", 1)
    assert event["verb"] == "get" and "objectRef" not in event


def test_the_request_object_fills_the_reference_and_is_kept_from_request_on() -> None:
    body = {"metadata": {"name": "made", "namespace": "default", "managedFields": [{}]}}
    metadata, _ = make_record(b"POST", b"/apis/events.k8s.io/v1/namespaces/default/events")
    metadata.log_request_object(body)
    event = metadata.event("ResponseComplete", 1)
    assert event["objectRef"]["name"] == "made"
    assert list(event["objectRef"]) == ["resource", "namespace", "name", "apiGroup", "apiVersion"]
    assert "requestObject" not in event
    request, _ = make_record(
        b"POST", b"/apis/events.k8s.io/v1/namespaces/default/events", "Request"
    )
    request.omit_managed_fields = True
    request.log_request_object(body)
    assert request.event("ResponseComplete", 1)["requestObject"] == {
        "metadata": {"name": "made", "namespace": "default"}
    }


def test_the_response_object_is_kept_at_request_response_only() -> None:
    record, _ = make_record(b"GET", EVENT.encode(), "RequestResponse")
    record.log_response(200, b'{"kind":"Event","metadata":{"name":"e1"}}')
    assert record.event("ResponseComplete", 1)["responseObject"] == {
        "kind": "Event",
        "metadata": {"name": "e1"},
    }
    other, _ = make_record(b"GET", EVENT.encode(), "Request")
    other.log_response(200, b'{"kind":"Event"}')
    assert "responseObject" not in other.event("ResponseComplete", 1)
