"""``serviceaccounts/token`` in core discovery, only while the TokenRequest API is served."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from tests.unit.unit_helpers import AppResource
from treq.testing import StubTreq
from twisted.internet.task import Clock

from apiserver.discovery import install_discovery
from apiserver.http.app import App, Router, ServingPolicy

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
TOKEN_RESOURCE = (
    b'{"name":"serviceaccounts/token","singularName":"","namespaced":true,'
    b'"group":"authentication.k8s.io","version":"v1","kind":"TokenRequest","verbs":["create"]}'
)
AGGREGATED_ITEMS = (
    '[{"metadata":{"creationTimestamp":null},"versions":[{"version":"v1","resources":['
    '{"resource":"serviceaccounts","responseKind":{"group":"","version":"","kind":""},'
    '"scope":"Namespaced","singularResource":"","verbs":null,"subresources":[{"subresource":'
    '"token","responseKind":{"group":"authentication.k8s.io","version":"v1","kind":'
    '"TokenRequest"},"verbs":["create"]}]}],"freshness":"Current"}]}]'
)


def fetch(token_request: bool, path: str, accept: str = "") -> tuple[int, Any, bytes]:
    router = Router()
    install_discovery(
        router,
        groups_enabled={},
        server_address=lambda: "192.0.2.10:6443",
        token_request=token_request,
    )
    treq = StubTreq(AppResource(App(router, Clock(), ServingPolicy())))
    headers = {"Accept": [accept]} if accept else {}
    results: list[Any] = []
    d = treq.request("GET", "https://x" + path, headers=headers)
    d.addCallback(lambda r: r.content().addCallback(lambda b: (r.code, r.headers, b)))
    d.addBoth(results.append)
    code, response_headers, body = results[0]
    return code, response_headers, body


@pytest.mark.parametrize("path", ["/api/v1", "/api/v1/"])
def test_core_v1_lists_the_token_subresource_when_served(path: str) -> None:
    code, _, body = fetch(True, path)
    assert (code, body) == (
        200,
        b'{"kind":"APIResourceList","groupVersion":"v1","resources":[' + TOKEN_RESOURCE + b"]}\n",
    )


def test_core_v1_is_empty_when_not_served() -> None:
    assert fetch(False, "/api/v1")[2] == (
        b'{"kind":"APIResourceList","groupVersion":"v1","resources":[]}\n'
    )


def test_aggregated_core_group_holds_the_subresource() -> None:
    code, headers, body = fetch(True, "/api", AGGREGATED)
    assert code == 200
    assert (
        body
        == (
            '{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},'
            '"items":' + AGGREGATED_ITEMS + "}\n"
        ).encode()
    )
    items = json.loads(AGGREGATED_ITEMS)
    marshalled = json.dumps({"metadata": {}, "items": items}, separators=(",", ":")).encode()
    etag = hashlib.sha512(marshalled).hexdigest().upper()
    assert headers.getRawHeaders(b"etag") == [f'"{etag}'.encode() + b'"']
    code, _, body = fetch(False, "/api", AGGREGATED)
    assert b'"resources"' not in body
