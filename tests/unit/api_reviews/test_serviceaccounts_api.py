"""core/v1 ServiceAccounts on the events' REST implementation (a view of their own) over the
in-memory store: create, get, list (JSON, Table, protobuf), watch, update, patch, delete and
deletecollection, the reference's validation and selectors, and every stored format."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from tests.unit.api_events.rest_harness import STORE_PREFIX, RestHarness
from tests.unit.unit_helpers import fired

from apiserver.api.events.rest import EventsAPI
from apiserver.api.serviceaccounts import GR, SERVICE_ACCOUNTS, STORAGE
from apiserver.protobuf import codec
from apiserver.registry.store import Registry

BASE = "/api/v1/namespaces/{ns}/serviceaccounts"
PROTOBUF = "application/vnd.kubernetes.protobuf"


class SAHarness(RestHarness):
    def __init__(self, media_type: str = "application/json") -> None:
        super().__init__(media_type=media_type)
        self.sa_registry = Registry(
            self.store,
            prefix=STORE_PREFIX,
            resource="serviceaccounts",
            group_resource=GR,
            storage_kind="ServiceAccount",
            media_type=media_type,
            conversion=STORAGE,
        )
        self.sa_api = EventsAPI(
            self.sa_registry, self.clock, rng=random.Random(7), view=SERVICE_ACCOUNTS
        )
        for prefix in ("/api/v1/namespaces/", "/api/v1/serviceaccounts", "/api/v1/watch/"):
            self.router.add_prefix(prefix, self.sa_api.handle)


def sa(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}, **extra}


@pytest.mark.parametrize("media_type", ["application/json", PROTOBUF, "application/yaml"])
def test_crud(media_type: str) -> None:
    h = SAHarness(media_type)
    reply = h.post(BASE.format(ns="ci"), sa("bot", secrets=[{"name": "s1"}]))
    assert reply.code == 201, reply.body
    created = reply.json()
    assert list(created) == ["kind", "apiVersion", "metadata", "secrets"]
    assert created["metadata"]["namespace"] == "ci"
    assert created["metadata"]["creationTimestamp"] == "2026-11-22T10:00:00Z"
    uid = created["metadata"]["uid"]
    raw = fired(h.backend.get(b"/registry/serviceaccounts/ci/bot")).value
    if media_type == PROTOBUF:
        assert raw.startswith(codec.PREFIX)
    got = h.get(BASE.format(ns="ci") + "/bot").json()
    assert got["metadata"]["uid"] == uid and got["secrets"] == [{"name": "s1"}]

    # update (PUT), patch (merge), and the list with a label selector.
    got["metadata"]["labels"] = {"team": "a"}
    assert h.put(BASE.format(ns="ci") + "/bot", got).code == 200
    patched = h.patch(
        BASE.format(ns="ci") + "/bot",
        {"automountServiceAccountToken": False},
        "application/merge-patch+json",
    )
    assert patched.code == 200, patched.body
    assert patched.json()["automountServiceAccountToken"] is False
    listed = h.get("/api/v1/serviceaccounts?labelSelector=team%3Da").json()
    assert listed["kind"] == "ServiceAccountList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["bot"]
    assert "kind" not in listed["items"][0]
    assert h.get("/api/v1/serviceaccounts?labelSelector=team%3Db").json()["items"] == []

    deleted = h.delete(BASE.format(ns="ci") + "/bot")
    assert deleted.code == 200
    missing = h.get(BASE.format(ns="ci") + "/bot")
    assert missing.code == 404
    assert missing.json()["message"] == 'serviceaccounts "bot" not found'
    assert missing.json()["details"] == {"name": "bot", "kind": "serviceaccounts"}


def test_validation_and_type_errors() -> None:
    h = SAHarness()
    bad = h.post(BASE.format(ns="ci"), sa("Bad_Name"))
    assert bad.code == 422
    assert bad.json()["message"].startswith('ServiceAccount "Bad_Name" is invalid: metadata.name')
    wrong = h.post(BASE.format(ns="ci"), {**sa("x"), "kind": "Event"})
    assert wrong.code == 400
    assert 'no kind "Event" is registered' in wrong.json()["message"]
    typed = h.post(BASE.format(ns="ci"), sa("x", secrets="nope"))
    assert typed.code == 400
    assert "cannot be handled as a ServiceAccount" in typed.json()["message"]
    strict = h.post(BASE.format(ns="ci") + "?fieldValidation=Strict", sa("x", bogus=1))
    assert strict.code == 400
    assert 'unknown field "bogus"' in strict.json()["message"]
    selector = h.get("/api/v1/serviceaccounts?fieldSelector=spec.x%3D1")
    assert selector.code == 400
    assert selector.json()["message"] == "field label not supported: spec.x"
    assert h.get("/api/v1/serviceaccounts?fieldSelector=metadata.name%3Dx").code == 200


def test_table_protobuf_watch_and_deletecollection() -> None:
    h = SAHarness()
    for name in ("a", "b"):
        assert h.post(BASE.format(ns="ci"), sa(name)).code == 201
    table = h.get(
        BASE.format(ns="ci"), Accept="application/json;as=Table;v=v1;g=meta.k8s.io"
    ).json()
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Secrets", "Age"]
    assert table["rows"][0]["cells"] == ["a", 0, "0s"]
    reply = h.get(BASE.format(ns="ci"), Accept=PROTOBUF)
    api_version, kind, _ = codec.unwrap(reply.body)
    assert (api_version, kind) == ("v1", "ServiceAccountList")

    watch = h.watch(BASE.format(ns="ci") + "?watch=1&resourceVersion=0")
    events = watch.events()
    assert {e["object"]["metadata"]["name"] for e in events} == {"a", "b"}
    assert all(e["object"]["kind"] == "ServiceAccount" for e in events)
    gone = h.delete(BASE.format(ns="ci"))
    assert gone.code == 200, gone.body
    assert gone.json()["kind"] == "ServiceAccountList"
    assert h.get(BASE.format(ns="ci")).json()["items"] == []
    assert json.loads(h.get("/api/v1/serviceaccounts").body)["items"] == []


def test_server_side_apply_and_strategic_merge() -> None:
    h = SAHarness()
    applied = h.patch(
        BASE.format(ns="ci") + "/app?fieldManager=kubectl",
        sa("app", secrets=[{"name": "s1"}]),
        "application/apply-patch+yaml",
    )
    assert applied.code == 201, applied.body
    entry = applied.json()["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"], entry["apiVersion"]) == ("kubectl", "Apply", "v1")
    merged = h.patch(
        BASE.format(ns="ci") + "/app",
        {"secrets": [{"name": "s2"}]},
        "application/strategic-merge-patch+json",
    )
    assert merged.code == 200, merged.body
    # secrets merge by name (patchMergeKey): both are kept.
    assert sorted(s["name"] for s in merged.json()["secrets"]) == ["s1", "s2"]
