"""Request info parsing (requestinfo.go ``NewRequestInfo``)."""

from __future__ import annotations

import pytest

from apiserver.auth.requestinfo import RequestInfoError, parse_request_info

EV = "/apis/events.k8s.io/v1"


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        # (resource_request, verb, group, version, namespace, resource, subresource, name)
        ("GET", "/healthz", {}, (False, "get", "", "", "", "", "", "")),
        ("HEAD", "/healthz", {}, (False, "head", "", "", "", "", "", "")),
        ("POST", "/readyz/ping", {}, (False, "post", "", "", "", "", "", "")),
        ("OPTIONS", "/", {}, (False, "options", "", "", "", "", "", "")),
        ("GET", "/api", {}, (False, "get", "", "", "", "", "", "")),
        ("GET", "/api/v1", {}, (False, "get", "", "", "", "", "", "")),
        ("GET", "/apis/events.k8s.io/v1", {}, (False, "get", "", "", "", "", "", "")),
        ("GET", "/apis/events.k8s.io", {}, (False, "get", "", "", "", "", "", "")),
        ("GET", "/other/a/b/c", {}, (False, "get", "", "", "", "", "", "")),
        (
            "GET",
            f"{EV}/namespaces/default/events",
            {},
            (True, "list", "events.k8s.io", "v1", "default", "events", "", ""),
        ),
        (
            "GET",
            f"{EV}/events",
            {b"watch": [b"true"]},
            (True, "watch", "events.k8s.io", "v1", "", "events", "", ""),
        ),
        (
            "GET",
            f"{EV}/events",
            {b"watch": [b"False"]},
            (True, "list", "events.k8s.io", "v1", "", "events", "", ""),
        ),
        (
            "GET",
            f"{EV}/events",
            {b"watch": [b""]},
            (True, "watch", "events.k8s.io", "v1", "", "events", "", ""),
        ),
        (
            "GET",
            f"{EV}/namespaces/ns/events/e1",
            {},
            (True, "get", "events.k8s.io", "v1", "ns", "events", "", "e1"),
        ),
        (
            "HEAD",
            f"{EV}/namespaces/ns/events/e1",
            {},
            (True, "get", "events.k8s.io", "v1", "ns", "events", "", "e1"),
        ),
        (
            "POST",
            f"{EV}/namespaces/ns/events",
            {},
            (True, "create", "events.k8s.io", "v1", "ns", "events", "", ""),
        ),
        (
            "PUT",
            f"{EV}/namespaces/ns/events/e1",
            {},
            (True, "update", "events.k8s.io", "v1", "ns", "events", "", "e1"),
        ),
        (
            "PATCH",
            f"{EV}/namespaces/ns/events/e1",
            {},
            (True, "patch", "events.k8s.io", "v1", "ns", "events", "", "e1"),
        ),
        (
            "DELETE",
            f"{EV}/namespaces/ns/events/e1",
            {},
            (True, "delete", "events.k8s.io", "v1", "ns", "events", "", "e1"),
        ),
        (
            "DELETE",
            f"{EV}/namespaces/ns/events",
            {},
            (True, "deletecollection", "events.k8s.io", "v1", "ns", "events", "", ""),
        ),
        (
            "CONNECT",
            f"{EV}/namespaces/ns/events/e1",
            {},
            (True, "", "events.k8s.io", "v1", "ns", "events", "", "e1"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/events/e1/status",
            {},
            (True, "get", "", "v1", "ns", "events", "status", "e1"),
        ),
        ("GET", "/api/v1/events", {}, (True, "list", "", "v1", "", "events", "", "")),
        (
            "GET",
            "/api/v1/watch/namespaces/ns/events",
            {},
            (True, "watch", "", "v1", "ns", "events", "", ""),
        ),
        (
            "GET",
            "/api/v1/watch/namespaces/ns/events/e1",
            {},
            (True, "watch", "", "v1", "ns", "events", "", "e1"),
        ),
        ("GET", "/api/v1/watch/events", {}, (True, "watch", "", "v1", "", "events", "", "")),
        (
            "GET",
            "/api/v1/proxy/namespaces/ns/pods/p/x/y",
            {},
            (True, "proxy", "", "v1", "ns", "pods", "", "p"),
        ),
        # Namespaces themselves and their own subresources.
        ("GET", "/api/v1/namespaces", {}, (True, "list", "", "v1", "", "namespaces", "", "")),
        (
            "GET",
            "/api/v1/namespaces/ns",
            {},
            (True, "get", "", "v1", "ns", "namespaces", "", "ns"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns/status",
            {},
            (True, "update", "", "v1", "ns", "namespaces", "status", "ns"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns/finalize",
            {},
            (True, "update", "", "v1", "ns", "namespaces", "finalize", "ns"),
        ),
        # A field selector on metadata.name names the object on list and watch.
        (
            "GET",
            "/api/v1/namespaces/ns/events",
            {b"fieldSelector": [b"metadata.name=e1,type=Normal"]},
            (True, "list", "", "v1", "ns", "events", "", "e1"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/events",
            {b"fieldSelector": [b"metadata.name==e1"], b"watch": [b"1"]},
            (True, "watch", "", "v1", "ns", "events", "", "e1"),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/events",
            {b"fieldSelector": [b"metadata.name!=e1"]},
            (True, "list", "", "v1", "ns", "events", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/events",
            {b"fieldSelector": [b"metadata.name=a/b"]},
            (True, "list", "", "v1", "ns", "events", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns/events",
            {b"fieldSelector": [b"metadata.name"]},
            (True, "list", "", "v1", "ns", "events", "", ""),
        ),
        (
            "DELETE",
            "/api/v1/namespaces/ns/events",
            {b"fieldSelector": [b"metadata.name=e1"]},
            (True, "deletecollection", "", "v1", "ns", "events", "", ""),
        ),
    ],
)
def test_parse(
    method: str,
    path: str,
    query: dict[bytes, list[bytes]],
    expected: tuple[bool, str, str, str, str, str, str, str],
) -> None:
    info = parse_request_info(method, path, query)
    assert (
        info.resource_request,
        info.verb,
        info.api_group,
        info.api_version,
        info.namespace,
        info.resource,
        info.subresource,
        info.name,
    ) == expected
    assert info.path == path


def test_prefix_and_parts() -> None:
    info = parse_request_info("GET", "/apis/events.k8s.io/v1/namespaces/ns/events/e1/x/y")
    assert info.api_prefix == "apis"
    assert info.parts == ("events", "e1", "x", "y")
    assert info.subresource == "x"
    assert info.read_only
    assert not parse_request_info("POST", "/api/v1/events").read_only


def test_watch_without_resource_is_an_error() -> None:
    with pytest.raises(RequestInfoError) as caught:
        parse_request_info("GET", "/api/v1/watch", {}, "/api/v1/watch?a=b")
    assert str(caught.value) == (
        "unable to determine kind and namespace from url, /api/v1/watch?a=b"
    )
    with pytest.raises(RequestInfoError):
        parse_request_info("GET", "/apis/events.k8s.io/v1/proxy")
