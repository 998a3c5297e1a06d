"""flowcontrol.apiserver.k8s.io/v1 in discovery (``extra_groups``), as priority and fairness
serves its objects."""

from __future__ import annotations

import json
from typing import Any

from tests.unit.unit_helpers import AppResource
from treq.testing import StubTreq
from twisted.internet.task import Clock

from apiserver.api.flowcontrol import discovery_group
from apiserver.discovery import install_discovery
from apiserver.discovery.documents import ExtraGroup
from apiserver.http.app import App, Router, ServingPolicy

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
GROUP = "flowcontrol.apiserver.k8s.io"


def fetch(path: str, accept: str = "", extra: bool = True) -> tuple[int, Any]:
    router = Router()
    install_discovery(
        router,
        groups_enabled={},
        server_address=lambda: "192.0.2.10:6443",
        extra_groups=[ExtraGroup(*discovery_group())] if extra else [],
    )
    treq = StubTreq(AppResource(App(router, Clock(), ServingPolicy())))
    headers = {"Accept": [accept]} if accept else {}
    results: list[Any] = []
    d = treq.request("GET", "https://x" + path, headers=headers)
    d.addCallback(lambda r: r.content().addCallback(lambda b: (r.code, b)))
    d.addBoth(results.append)
    code, body = results[0]
    return code, json.loads(body)


def test_apis_lists_the_group_after_events() -> None:
    code, doc = fetch("/apis")
    assert code == 200
    assert [g["name"] for g in doc["groups"]] == ["events.k8s.io", GROUP]
    assert doc["groups"][1]["preferredVersion"] == {"groupVersion": f"{GROUP}/v1", "version": "v1"}


def test_group_and_version_documents() -> None:
    assert fetch(f"/apis/{GROUP}")[1]["kind"] == "APIGroup"
    code, doc = fetch(f"/apis/{GROUP}/v1")
    assert code == 200 and doc["groupVersion"] == f"{GROUP}/v1"
    verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    assert [(r["name"], r["kind"], r["namespaced"], r["verbs"]) for r in doc["resources"]] == [
        ("flowschemas", "FlowSchema", False, verbs),
        ("flowschemas/status", "FlowSchema", False, ["get", "patch", "update"]),
        ("prioritylevelconfigurations", "PriorityLevelConfiguration", False, verbs),
        (
            "prioritylevelconfigurations/status",
            "PriorityLevelConfiguration",
            False,
            ["get", "patch", "update"],
        ),
    ]


def test_aggregated_apis_has_the_group() -> None:
    _, doc = fetch("/apis", AGGREGATED)
    names = [item["metadata"]["name"] for item in doc["items"]]
    assert names == ["events.k8s.io", GROUP]
    resources = doc["items"][1]["versions"][0]["resources"]
    assert [r["scope"] for r in resources] == ["Cluster", "Cluster"]
    assert [s["subresource"] for s in resources[0]["subresources"]] == ["status"]


def test_without_priority_and_fairness_the_group_is_absent() -> None:
    _, doc = fetch("/apis", extra=False)
    assert [g["name"] for g in doc["groups"]] == ["events.k8s.io"]
    assert fetch(f"/apis/{GROUP}/v1", extra=False)[0] == 404
