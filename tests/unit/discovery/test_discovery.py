"""Discovery documents, negotiation and ``--runtime-config``, through the real filter chain."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from tests.unit.unit_helpers import AppResource
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.web.http_headers import Headers

from apiserver.apimachinery.negotiation import parse_accept
from apiserver.discovery import documents as docs
from apiserver.discovery import (
    install_discovery,
    runtime_config_enables_events,
    runtime_config_errors,
)
from apiserver.discovery.handlers import default_restrictions, is_aggregated_discovery, negotiate
from apiserver.http.app import App, Router, ServingPolicy

REFERENCE = Path(__file__).resolve().parents[4] / "shared" / "reference"
ADDRESS = "192.0.2.10:6443"
CLIENT_GO_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,"
    "application/json"
)
VERBS = '["create","delete","deletecollection","get","list","patch","update","watch"]'
RESOURCE_LIST = (
    '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"events.k8s.io/v1",'
    '"resources":[{"name":"events","singularName":"event","namespaced":true,"kind":"Event",'
    f'"verbs":{VERBS},"shortNames":["ev"],"storageVersionHash":"r2yiGXH7wu8="}}]}}\n'
).encode()
GROUP_BODY = (
    '"name":"events.k8s.io","versions":[{"groupVersion":"events.k8s.io/v1","version":"v1"}],'
    '"preferredVersion":{"groupVersion":"events.k8s.io/v1","version":"v1"}'
)
AGGREGATED_ITEMS = (
    '[{"metadata":{"name":"events.k8s.io","creationTimestamp":null},"versions":[{"version":"v1",'
    '"resources":[{"resource":"events","responseKind":{"group":"","version":"","kind":"Event"},'
    f'"scope":"Namespaced","singularResource":"event","verbs":{VERBS},"shortNames":["ev"]}}],'
    '"freshness":"Current"}]}]'
)


def make(events: bool = True) -> StubTreq:
    router = Router()
    install_discovery(
        router, groups_enabled={"events.k8s.io/v1": events}, server_address=lambda: ADDRESS
    )
    return StubTreq(AppResource(App(router, Clock(), ServingPolicy())))


def fetch(
    treq: StubTreq, path: str, method: str = "GET", **headers: str
) -> tuple[int, Headers, bytes]:
    sent = {name.replace("_", "-"): [value] for name, value in headers.items()}
    results: list[Any] = []
    d = treq.request(method, "https://x" + path, headers=sent, allow_redirects=False)
    d.addCallback(lambda r: r.content().addCallback(lambda body: (r.code, r.headers, body)))
    d.addBoth(results.append)
    assert results, "the request did not complete synchronously"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    code, response_headers, body = results[0]
    return code, response_headers, body


def header(headers: Headers, name: str) -> list[str]:
    return [v.decode() for v in headers.getRawHeaders(name.encode(), [])]


# --- plain documents -------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api", "/api/"])
def test_api_root_lists_v1_with_the_server_address(path: str) -> None:
    code, headers, body = fetch(make(), path)
    assert code == 200
    assert body == (
        b'{"kind":"APIVersions","versions":["v1"],"serverAddressByClientCIDRs":'
        b'[{"clientCIDR":"0.0.0.0/0","serverAddress":"192.0.2.10:6443"}]}\n'
    )
    assert header(headers, "content-type") == ["application/json"]
    assert header(headers, "cache-control") == ["no-cache, private"]
    assert header(headers, "etag") == [] and header(headers, "vary") == []


@pytest.mark.parametrize("path", ["/api/v1", "/api/v1/"])
def test_core_v1_has_no_resources(path: str) -> None:
    code, _, body = fetch(make(), path)
    assert (code, body) == (200, b'{"kind":"APIResourceList","groupVersion":"v1","resources":[]}\n')


@pytest.mark.parametrize("path", ["/apis", "/apis/"])
def test_group_list(path: str) -> None:
    code, headers, body = fetch(make(), path, Accept="application/json")
    assert code == 200
    assert (
        body
        == ('{"kind":"APIGroupList","apiVersion":"v1","groups":[{' + GROUP_BODY + "}]}\n").encode()
    )
    assert header(headers, "cache-control") == ["no-cache, private"]


@pytest.mark.parametrize("path", ["/apis/events.k8s.io", "/apis/events.k8s.io/"])
def test_group(path: str) -> None:
    code, _, body = fetch(make(), path)
    assert (code, body) == (
        200,
        ('{"kind":"APIGroup","apiVersion":"v1",' + GROUP_BODY + "}\n").encode(),
    )


@pytest.mark.parametrize("path", ["/apis/events.k8s.io/v1", "/apis/events.k8s.io/v1/"])
def test_resource_list(path: str) -> None:
    code, headers, body = fetch(make(), path, Accept=CLIENT_GO_ACCEPT)
    assert (code, body) == (200, RESOURCE_LIST)
    assert header(headers, "content-type") == ["application/json"]


# --- aggregated discovery ----------------------------------------------------------------------


def _expected_etag(items: str) -> str:
    return (
        '"'
        + hashlib.sha512(('{"metadata":{},"items":' + items + "}").encode()).hexdigest().upper()
        + '"'
    )


def test_aggregated_apis_for_client_go() -> None:
    code, headers, body = fetch(make(), "/apis", Accept=CLIENT_GO_ACCEPT)
    assert code == 200
    assert (
        body
        == (
            '{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},'
            '"items":' + AGGREGATED_ITEMS + "}\n"
        ).encode()
    )
    assert header(headers, "content-type") == [
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    ]
    assert header(headers, "etag") == [_expected_etag(AGGREGATED_ITEMS)]
    assert header(headers, "vary") == ["Accept"]
    assert header(headers, "cache-control") == ["public"]


@pytest.mark.skipif(not (REFERENCE / "aggregated_v2.json").exists(), reason="no reference data")
def test_aggregated_entry_matches_the_reference_cluster() -> None:
    reference = json.loads((REFERENCE / "aggregated_v2.json").read_text())
    expected = next(i for i in reference["items"] if i["metadata"]["name"] == "events.k8s.io")
    _, _, body = fetch(make(), "/apis", Accept=CLIENT_GO_ACCEPT)
    assert json.loads(body)["items"] == [expected]


def test_aggregated_v2beta1_has_the_same_etag() -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
    code, headers, body = fetch(make(), "/apis", Accept=accept)
    assert code == 200
    assert json.loads(body)["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    assert header(headers, "content-type") == [accept]
    assert header(headers, "etag") == [_expected_etag(AGGREGATED_ITEMS)]


def test_aggregated_if_none_match() -> None:
    treq = make()
    etag = _expected_etag(AGGREGATED_ITEMS)
    code, headers, body = fetch(treq, "/apis", Accept=CLIENT_GO_ACCEPT, If_None_Match=etag)
    assert (code, body) == (304, b"")
    assert header(headers, "etag") == [etag]
    assert header(headers, "cache-control") == ["public"]
    assert header(headers, "content-type") == []
    code, _, _ = fetch(treq, "/apis", Accept=CLIENT_GO_ACCEPT, If_None_Match='"stale"')
    assert code == 200


def test_aggregated_core_group() -> None:
    code, headers, body = fetch(make(), "/api", Accept=CLIENT_GO_ACCEPT)
    items = (
        '[{"metadata":{"creationTimestamp":null},'
        '"versions":[{"version":"v1","freshness":"Current"}]}]'
    )
    assert code == 200
    assert (
        body
        == (
            '{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},'
            '"items":' + items + "}\n"
        ).encode()
    )
    assert header(headers, "etag") == [_expected_etag(items)]


def test_plain_json_gets_the_legacy_document() -> None:
    code, headers, body = fetch(make(), "/apis", Accept="application/json, */*")
    assert code == 200 and json.loads(body)["kind"] == "APIGroupList"
    assert header(headers, "etag") == []


def test_aggregated_only_on_the_roots() -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    code, _, body = fetch(make(), "/apis/events.k8s.io/v1", Accept=accept)
    assert code == 406 and json.loads(body)["reason"] == "NotAcceptable"
    code, _, body = fetch(make(), "/apis/events.k8s.io/v1", Accept=accept + ",application/json")
    assert (code, body) == (200, RESOURCE_LIST)


# --- encodings and errors ----------------------------------------------------------------------


def test_pretty_for_curl_and_query() -> None:
    treq = make()
    _, _, body = fetch(treq, "/apis/events.k8s.io/v1", User_Agent="curl/8.5.0")
    assert body == json.dumps(json.loads(RESOURCE_LIST), indent=2).encode()
    assert not body.endswith(b"\n")
    _, _, body = fetch(treq, "/apis/events.k8s.io/v1?pretty=true")
    assert body.startswith(b'{\n  "kind": "APIResourceList"')
    _, _, body = fetch(treq, "/apis/events.k8s.io/v1?pretty=false", User_Agent="curl/8.5.0")
    assert body == RESOURCE_LIST
    _, headers, body = fetch(treq, "/apis", Accept=CLIENT_GO_ACCEPT, User_Agent="Mozilla/5.0 x")
    assert body.startswith(b'{\n  "kind": "APIGroupDiscoveryList"')
    assert header(headers, "etag") == [_expected_etag(AGGREGATED_ITEMS)]


def test_yaml() -> None:
    code, headers, body = fetch(make(), "/api", Accept="application/yaml")
    assert code == 200 and header(headers, "content-type") == ["application/yaml"]
    assert body == (
        b"kind: APIVersions\nserverAddressByClientCIDRs:\n- clientCIDR: 0.0.0.0/0\n"
        b"  serverAddress: 192.0.2.10:6443\nversions:\n- v1\n"
    )
    accept = "application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    code, headers, body = fetch(make(), "/apis", Accept=accept)
    assert header(headers, "content-type") == [accept]
    assert b'      responseKind:\n        group: ""\n' in body
    assert yaml.safe_load(body)["items"] == json.loads(AGGREGATED_ITEMS)


def test_protobuf_is_answered_in_json() -> None:
    accept = "application/vnd.kubernetes.protobuf"
    code, headers, body = fetch(make(), "/apis/events.k8s.io/v1", Accept=accept)
    assert (code, body) == (200, RESOURCE_LIST)
    assert header(headers, "content-type") == ["application/json"]


def test_not_acceptable() -> None:
    code, headers, body = fetch(make(), "/apis/events.k8s.io/v1", Accept="text/html")
    assert code == 406
    assert header(headers, "content-type") == ["application/json"]
    assert body == (
        b'{\n  "kind": "Status",\n  "apiVersion": "v1",\n  "metadata": {},\n'
        b'  "status": "Failure",\n'
        b'  "message": "only the following media types are accepted: application/json, '
        b'application/yaml, application/vnd.kubernetes.protobuf",\n  "reason": "NotAcceptable",\n'
        b'  "code": 406\n}'
    )


@pytest.mark.parametrize(
    ("path", "method"),
    [("/api", "POST"), ("/api/v1", "PUT"), ("/apis/events.k8s.io/v1", "HEAD"), ("/api/", "DELETE")],
)
def test_restful_routes_are_get_only(path: str, method: str) -> None:
    code, headers, body = fetch(make(), path, method=method)
    assert code == 405
    if method != "HEAD":
        assert body == (
            b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
            b'"the server does not allow this method on the requested resource","reason":'
            b'"MethodNotAllowed","details":{},"code":405}\n'
        )
    assert header(headers, "content-type") == ["application/json"]


def test_group_handlers_take_any_method() -> None:
    assert fetch(make(), "/apis", method="POST")[0] == 200
    assert fetch(make(), "/apis/events.k8s.io", method="HEAD")[0] == 200


# --- --runtime-config=events.k8s.io/v1=false ---------------------------------------------------


def test_group_turned_off() -> None:
    treq = make(events=False)
    assert fetch(treq, "/apis")[2] == b'{"kind":"APIGroupList","apiVersion":"v1","groups":[]}\n'
    code, headers, body = fetch(treq, "/apis", Accept=CLIENT_GO_ACCEPT)
    assert body == (
        b'{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},'
        b'"items":[]}\n'
    )
    assert header(headers, "etag") == [_expected_etag("[]")]
    for path in ("/apis/events.k8s.io", "/apis/events.k8s.io/", "/apis/events.k8s.io/v1"):
        code, _, body = fetch(treq, path)
        assert code == 404
        assert json.loads(body)["message"] == "the server could not find the requested resource"
    assert fetch(treq, "/api")[0] == 200


@pytest.mark.parametrize(
    ("config", "enabled"),
    [
        ({}, True),
        ({"events.k8s.io/v1": "false"}, False),
        ({"events.k8s.io/v1": ""}, True),
        ({"events.k8s.io/v1": "f"}, False),
        ({"events.k8s.io/v1": "TRUE"}, True),
        ({"api/all": "false"}, False),
        ({"api/ga": "false"}, False),
        ({"api/all": "false", "api/ga": "true"}, True),
        ({"api/all": "true", "api/ga": "false"}, False),
        ({"api/beta": "false", "api/alpha": "false"}, True),
        ({"api/all": "false", "events.k8s.io/v1": "true"}, True),
        ({"api/all": "true", "events.k8s.io/v1": "false"}, False),
        ({"events.k8s.io/v1/events": "false"}, False),
        ({"events.k8s.io/v1": "false", "events.k8s.io/v1/events": "true"}, True),
        ({"events.k8s.io/v1beta1": "false"}, True),
        ({"apps/v1": "false", "batch/v1/jobs": "true", "bogus": ""}, True),
    ],
)
def test_runtime_config(config: dict[str, str], enabled: bool) -> None:
    assert runtime_config_enables_events(config) is enabled
    assert runtime_config_errors(config) == []


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"api/all": ""}, "invalid value api/all="),
        ({"api/beta": "yes"}, "invalid value api/beta=yes"),
        (
            {"events.k8s.io/v2": "true"},
            "group version events.k8s.io/v2 that has not been registered",
        ),
        (
            {"events.k8s.io/v1": "nope"},
            'invalid value of events.k8s.io/v1: nope, err: strconv.ParseBool: parsing "nope": '
            "invalid syntax",
        ),
        (
            {"events.k8s.io/v1/Events": "false"},
            "invalid key events.k8s.io/v1/Events: group/version/resource and resource is always "
            'lowercase plural, not "Events"',
        ),
    ],
)
def test_runtime_config_errors(config: dict[str, str], message: str) -> None:
    assert runtime_config_errors(config) == [message]
    with pytest.raises(ValueError, match="^" + re.escape(message) + "$"):
        runtime_config_enables_events(config)


# --- negotiation details ---------------------------------------------------------------------


def test_parse_accept_orders_like_goautoneg() -> None:
    clauses = parse_accept("text/*;q=0.5, */*;q=0.1, application/json;q=0.9;pretty=1, bad")
    assert [(c.type, c.subtype) for c in clauses] == [
        ("application", "json"),
        ("text", "*"),
        ("*", "*"),
    ]
    # q as Go's ParseFloat(s, 32) gives it.
    assert [c.q for c in clauses] == pytest.approx([0.9, 0.5, 0.1])
    assert clauses[0].param_map() == {"pretty": "1"}
    # Go's q parse refuses spaces: the clause gets q=0 and sorts last.
    assert [c.q for c in parse_accept("a/b;q= 0.5, c/d")] == [1.0, 0.0]
    assert parse_accept("*") == parse_accept("*/*")


@given(st.text(alphabet=st.sampled_from(list("ab/*;=q,. 01-\t")), max_size=40))
def test_any_accept_header_is_handled(header: str) -> None:
    clauses = parse_accept(header)
    assert len(clauses) <= header.count(",") + 1
    for options in (
        negotiate(header, default_restrictions),
        negotiate(header, is_aggregated_discovery),
    ):
        assert options is None or options.media_type in (
            "application/json",
            "application/yaml",
            "application/vnd.kubernetes.protobuf",
        )


def test_negotiate() -> None:
    assert negotiate("", default_restrictions) is not None
    assert negotiate("application/json;as=Table;v=v1;g=meta.k8s.io", default_restrictions) is None
    options = negotiate(CLIENT_GO_ACCEPT, is_aggregated_discovery)
    assert options is not None and options.convert is not None
    assert options.convert.version == "v2"
    assert negotiate("application/json", is_aggregated_discovery) is None
    assert negotiate("application/json;stream=watch", default_restrictions) is not None
    assert negotiate("application/yaml;stream=watch", default_restrictions) is None
    pretty = negotiate("application/json;pretty=1", default_restrictions)
    assert pretty is not None and pretty.pretty


def test_go_json_escapes_html() -> None:
    assert docs.encode_json({"a": "<&>\u2028"}) == b'{"a":"\\u003c\\u0026\\u003e\\u2028"}\n'


def test_yaml_quotes_like_go() -> None:
    assert docs.encode_yaml({"a": "", "b": "true", "c": "1", "d": "x"}) == (
        b'a: ""\nb: "true"\nc: "1"\nd: x\n'
    )
