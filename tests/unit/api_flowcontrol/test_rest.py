"""The flowcontrol.apiserver.k8s.io/v1 handler (apiserver.api.flowcontrol.rest) over the
in-memory store: every verb, the status subresource, validation texts, Table, watch."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from tests.unit.fake_request import FakeRequest
from tests.unit.unit_helpers import result_of
from twisted.internet.task import Clock

from apiserver.api.flowcontrol import FlowControlAPI
from apiserver.api.flowcontrol.rest import BASE, KINDS, human_duration
from apiserver.http.app import STREAMING, RequestInfo, parse_query
from apiserver.http.response import Response
from apiserver.registry.store import Registry
from apiserver.storage.memory.store import MemoryStore

EPOCH = 1795341600.0
LEVEL: dict[str, Any] = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
    "kind": "PriorityLevelConfiguration",
    "metadata": {"name": "tiny"},
    "spec": {
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": 1,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 2, "handSize": 1}},
        },
    },
}
SCHEMA: dict[str, Any] = {
    "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
    "kind": "FlowSchema",
    "metadata": {"name": "mine", "labels": {"team": "a"}},
    "spec": {
        "priorityLevelConfiguration": {"name": "tiny"},
        "distinguisherMethod": {"type": "ByUser"},
        "rules": [
            {
                "subjects": [{"kind": "User", "user": {"name": "flooder"}}],
                "nonResourceRules": [{"verbs": ["get"], "nonResourceURLs": ["/x/*"]}],
            }
        ],
    },
}


class Harness:
    def __init__(self) -> None:
        self.clock = Clock()
        self.clock.advance(EPOCH)
        store = MemoryStore(self.clock)
        store.start()
        self.registries = {
            resource: Registry(
                store,
                resource=resource,
                group_resource=kind.group_resource,
                storage_kind=kind.kind,
                storage_api_version="flowcontrol.apiserver.k8s.io/v1",
                media_type="application/json",
                namespaced=False,
            )
            for resource, kind in KINDS.items()
        }
        ids = itertools.count()
        self.levels = {"exempt", "catch-all"}
        self.api = FlowControlAPI(
            self.clock,
            self.registries,
            min_request_timeout=10,
            missing_level=lambda name: name not in self.levels,
            new_uid=lambda: f"uid-{next(ids)}",
            wall_clock=self.clock.seconds,
        )

    def request(
        self,
        method: str,
        rest: str,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "",
    ) -> tuple[FakeRequest, Any]:
        uri = BASE + rest
        path = uri.partition("?")[0]
        headers: dict[bytes, list[bytes]] = {b"content-type": [content_type.encode()]}
        if accept:
            headers[b"accept"] = [accept.encode()]
        raw = body if isinstance(body, bytes) else None
        if body is not None and raw is None:
            raw = json.dumps(body).encode()
        request = FakeRequest(method.encode(), uri.encode(), headers, raw)
        info = RequestInfo(method, path, parse_query(uri.encode()), False, True)
        return request, self.api.handle(request, info)

    def answer(self, method: str, rest: str, body: Any = None, **kw: Any) -> Response:
        _, result = self.request(method, rest, body, **kw)
        response = result_of(result)
        assert isinstance(response, Response)
        return response

    def json(self, method: str, rest: str, body: Any = None, **kw: Any) -> tuple[int, Any]:
        response = self.answer(method, rest, body, **kw)
        return response.code, json.loads(response.body)


@pytest.fixture
def h() -> Harness:
    return Harness()


def test_create_get_list(h: Harness) -> None:
    code, created = h.json("POST", "prioritylevelconfigurations", LEVEL)
    assert code == 201, created
    meta = created["metadata"]
    assert meta["uid"] == "uid-0" and meta["generation"] == 1
    assert meta["creationTimestamp"] == "2026-11-22T10:00:00Z"
    # v1 defaults: lendablePercent 0, queueLengthLimit 50.
    limited = created["spec"]["limited"]
    assert limited["lendablePercent"] == 0
    assert limited["limitResponse"]["queuing"]["queueLengthLimit"] == 50
    assert created["status"] == {}
    code, got = h.json("GET", "prioritylevelconfigurations/tiny")
    assert code == 200 and got == created
    code, listed = h.json("GET", "prioritylevelconfigurations")
    assert listed["kind"] == "PriorityLevelConfigurationList"
    assert [i["metadata"]["name"] for i in listed["items"]] == ["tiny"]
    assert listed["metadata"]["resourceVersion"] == meta["resourceVersion"]
    # Stored under a cluster-scoped key.
    store = h.registries["prioritylevelconfigurations"].store
    kv = result_of(store.get(b"/registry/prioritylevelconfigurations/tiny"))
    assert json.loads(kv.value)["kind"] == "PriorityLevelConfiguration"
    code, again = h.json("POST", "prioritylevelconfigurations", LEVEL)
    assert code == 409 and again["reason"] == "AlreadyExists"


def test_create_status_is_cleared_and_matching_precedence_defaults(h: Harness) -> None:
    body = {**SCHEMA, "status": {"conditions": [{"type": "Dangling", "status": "True"}]}}
    code, created = h.json("POST", "flowschemas", body)
    assert code == 201, created
    assert created["status"] == {}
    assert created["spec"]["matchingPrecedence"] == 1000


def test_validation_texts(h: Harness) -> None:
    bad = json.loads(json.dumps(LEVEL))
    bad["spec"]["limited"]["limitResponse"]["queuing"] = {"queues": 2, "handSize": 3}
    bad["spec"]["limited"]["lendablePercent"] = 101
    code, status = h.json("POST", "prioritylevelconfigurations", bad)
    assert code == 422
    assert status["message"] == (
        'PriorityLevelConfiguration.flowcontrol.apiserver.k8s.io "tiny" is invalid: ['
        "spec.limited.lendablePercent: Invalid value: 101: must be between 0 and 100, "
        "inclusive, spec.limited.limitResponse.queuing.handSize: Invalid value: 3: should "
        "not be greater than queues (2)]"
    )
    schema = json.loads(json.dumps(SCHEMA))
    schema["spec"]["matchingPrecedence"] = 1
    schema["spec"]["rules"][0]["nonResourceRules"][0]["nonResourceURLs"] = ["x*"]
    code, status = h.json("POST", "flowschemas", schema)
    assert code == 422
    assert [c["field"] for c in status["details"]["causes"]] == [
        "spec.matchingPrecedence",
        "spec.rules[0].nonResourceRules[0].nonResourceURLs[0]",
    ]
    assert "only the schema named 'exempt' may have matchingPrecedence 1" in status["message"]
    assert "must start with slash" in status["message"]
    mandatory = {
        "metadata": {"name": "catch-all"},
        "spec": {
            "type": "Limited",
            "limited": {"nominalConcurrencyShares": 6, "limitResponse": {"type": "Reject"}},
        },
    }
    code, status = h.json("POST", "prioritylevelconfigurations", mandatory)
    assert code == 422
    assert 'spec: Invalid value: ""' not in status["message"]
    assert "spec of 'catch-all' must equal the fixed value" in status["message"]


def test_update_bumps_generation_and_keeps_status(h: Harness) -> None:
    h.json("POST", "flowschemas", SCHEMA)
    code, current = h.json("GET", "flowschemas/mine")
    status_body = json.loads(json.dumps(current))
    status_body["status"] = {"conditions": [{"type": "Dangling", "status": "True"}]}
    code, with_status = h.json("PUT", "flowschemas/mine/status", status_body)
    assert code == 200, with_status
    assert with_status["status"]["conditions"][0]["status"] == "True"
    assert with_status["metadata"]["generation"] == 1
    new = json.loads(json.dumps(with_status))
    new["spec"]["matchingPrecedence"] = 77
    new["status"] = {}
    code, updated = h.json("PUT", "flowschemas/mine", new)
    assert code == 200, updated
    assert updated["metadata"]["generation"] == 2
    assert updated["status"] == with_status["status"]  # the main resource keeps the status
    stale = json.loads(json.dumps(new))
    code, conflict = h.json("PUT", "flowschemas/mine", stale)
    assert code == 409 and conflict["reason"] == "Conflict"
    code, _ = h.json("PUT", "flowschemas/other", {**new, "metadata": {"name": "other"}})
    assert code == 404


def test_patches(h: Harness) -> None:
    h.json("POST", "flowschemas", SCHEMA)
    code, merged = h.json(
        "PATCH",
        "flowschemas/mine",
        {"spec": {"matchingPrecedence": 42}},
        content_type="application/merge-patch+json",
    )
    assert code == 200 and merged["spec"]["matchingPrecedence"] == 42
    code, strategic = h.json(
        "PATCH",
        "flowschemas/mine",
        {"metadata": {"labels": {"x": "y"}}},
        content_type="application/strategic-merge-patch+json",
    )
    assert code == 200 and strategic["metadata"]["labels"] == {"team": "a", "x": "y"}
    code, patched = h.json(
        "PATCH",
        "flowschemas/mine",
        [{"op": "replace", "path": "/spec/distinguisherMethod/type", "value": "ByNamespace"}],
        content_type="application/json-patch+json",
    )
    assert code == 200 and patched["spec"]["distinguisherMethod"] == {"type": "ByNamespace"}
    assert patched["metadata"]["generation"] == 3
    code, invalid = h.json(
        "PATCH",
        "flowschemas/mine",
        {"spec": {"distinguisherMethod": {"type": "ByNothing"}}},
        content_type="application/merge-patch+json",
    )
    assert code == 422
    assert (
        'spec.distinguisherMethod.type: Unsupported value: {"Type":"ByNothing"}'
        in (invalid["message"])
    )


def test_delete_and_delete_collection(h: Harness) -> None:
    h.json("POST", "flowschemas", SCHEMA)
    h.json("POST", "flowschemas", {**SCHEMA, "metadata": {"name": "two"}})
    code, status = h.json("DELETE", "flowschemas/mine")
    assert code == 200
    assert status["status"] == "Success"
    assert status["details"] == {
        "name": "mine",
        "group": "flowcontrol.apiserver.k8s.io",
        "kind": "flowschemas",
        "uid": "uid-0",
    }
    assert h.json("GET", "flowschemas/mine")[0] == 404
    code, gone = h.json("DELETE", "flowschemas")
    assert code == 200 and [i["metadata"]["name"] for i in gone["items"]] == ["two"]
    assert h.json("GET", "flowschemas")[1]["items"] == []


def test_table_marks_a_missing_level(h: Harness) -> None:
    h.json("POST", "flowschemas", SCHEMA)
    h.clock.advance(150)
    table = h.json("GET", "flowschemas", accept="application/json;as=Table;v=v1;g=meta.k8s.io")[1]
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "PriorityLevel",
        "MatchingPrecedence",
        "DistinguisherMethod",
        "Age",
        "MissingPL",
    ]
    assert table["rows"][0]["cells"] == ["mine", "tiny", 1000, "ByUser", "2m30s", "True"]
    h.levels.add("tiny")
    table = h.json("GET", "flowschemas", accept="application/json;as=Table;v=v1;g=meta.k8s.io")[1]
    assert table["rows"][0]["cells"][-1] == "False"


def test_methods_and_paths(h: Harness) -> None:
    assert h.answer("POST", "flowschemas/mine").code == 405
    assert h.answer("DELETE", "flowschemas/mine/status").code == 405
    assert h.answer("GET", "nosuch").code == 404
    assert h.answer("GET", "flowschemas/a/b").code == 404


def test_watch_initial_events_then_changes_then_timeout(h: Harness) -> None:
    h.json("POST", "flowschemas", SCHEMA)
    request, result = h.request("GET", "flowschemas?watch=1&timeoutSeconds=5")
    assert result_of(result) is STREAMING
    h.json(
        "PATCH",
        "flowschemas/mine",
        {"spec": {"matchingPrecedence": 9}},
        content_type="application/merge-patch+json",
    )
    h.json("DELETE", "flowschemas/mine")
    events = [json.loads(line) for line in b"".join(request.written).splitlines()]
    assert [e["type"] for e in events] == ["ADDED", "MODIFIED", "DELETED"]
    assert events[1]["object"]["spec"]["matchingPrecedence"] == 9
    assert events[0]["object"]["kind"] == "FlowSchema"
    assert not request.finished
    h.clock.advance(5)
    assert request.finished


def test_human_duration() -> None:
    assert [human_duration(s) for s in (5, 119, 150, 3600, 90000, 86400 * 10)] == [
        "5s",
        "119s",
        "2m30s",
        "60m",
        "25h",
        "10d",
    ]


def test_server_side_apply_creates_then_updates(h: Harness) -> None:
    import yaml

    body = yaml.safe_dump(LEVEL).encode()
    code, created = h.json(
        "PATCH",
        "prioritylevelconfigurations/tiny?fieldManager=me",
        body,
        content_type="application/apply-patch+yaml",
    )
    assert code == 201, created
    assert created["metadata"]["managedFields"][0]["manager"] == "me"
    assert created["metadata"]["managedFields"][0]["operation"] == "Apply"
    changed = json.loads(json.dumps(LEVEL))
    changed["spec"]["limited"]["nominalConcurrencyShares"] = 7
    code, updated = h.json(
        "PATCH",
        "prioritylevelconfigurations/tiny?fieldManager=me",
        yaml.safe_dump(changed).encode(),
        content_type="application/apply-patch+yaml",
    )
    assert code == 200, updated
    assert updated["spec"]["limited"]["nominalConcurrencyShares"] == 7
    assert updated["metadata"]["generation"] == 2


def test_create_records_managed_fields(h: Harness) -> None:
    code, created = h.json("POST", "flowschemas?fieldManager=kubectl-create", SCHEMA)
    assert code == 201
    [entry] = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("kubectl-create", "Update")
    assert "f:spec" in entry["fieldsV1"]


def test_admission_sees_every_write(h: Harness) -> None:
    from apiserver.admission.plugins.always import AlwaysDenyPlugin

    h.json("POST", "flowschemas", SCHEMA)
    h.api.admission = AlwaysDenyPlugin()
    code, status = h.json("POST", "flowschemas", {**SCHEMA, "metadata": {"name": "two"}})
    assert code == 403 and status["reason"] == "Forbidden"
    assert "flowschemas.flowcontrol.apiserver.k8s.io" in status["message"]
    assert h.json("DELETE", "flowschemas/mine")[0] == 403
    code, _ = h.json(
        "PATCH",
        "flowschemas/mine",
        {"spec": {"matchingPrecedence": 5}},
        content_type="application/merge-patch+json",
    )
    assert code == 403
    h.api.admission = None
    assert h.json("GET", "flowschemas/mine")[1]["spec"]["matchingPrecedence"] == 1000


def test_unknown_fields_warn_or_fail(h: Harness) -> None:
    body = json.loads(json.dumps(SCHEMA))
    body["spec"]["bogus"] = 1
    response = h.answer("POST", "flowschemas", body)
    assert response.code == 201
    assert ("Warning", '299 - "unknown field \\"spec.bogus\\""') in response.headers
    body["metadata"]["name"] = "strict"
    code, status = h.json("POST", "flowschemas?fieldValidation=Strict", body)
    assert code == 400
    assert status["message"] == (
        'FlowSchema in version "v1" cannot be handled as a FlowSchema: strict decoding error: '
        'unknown field "spec.bogus"'
    )
    # Unknown fields are dropped, as decoding into the Go struct drops them.
    assert "bogus" not in h.json("GET", "flowschemas/mine")[1]["spec"]


def test_an_update_that_changes_nothing_writes_nothing(h: Harness) -> None:
    h.json("POST", "flowschemas", SCHEMA)
    current = h.json("GET", "flowschemas/mine")[1]
    h.clock.advance(30)
    code, same = h.json("PUT", "flowschemas/mine?fieldManager=other", current)
    assert code == 200 and same == current
    code, same = h.json(
        "PATCH",
        "flowschemas/mine",
        {"spec": {"matchingPrecedence": 1000}},
        content_type="application/merge-patch+json",
    )
    assert code == 200 and same == current


def test_list_pages_with_continue_tokens(h: Harness) -> None:
    for name in ("a", "b", "c"):
        h.json("POST", "flowschemas", {**SCHEMA, "metadata": {"name": name}})
    code, first = h.json("GET", "flowschemas?limit=2")
    assert code == 200
    assert [i["metadata"]["name"] for i in first["items"]] == ["a", "b"]
    assert first["metadata"]["remainingItemCount"] == 1
    token = first["metadata"]["continue"]
    code, second = h.json("GET", f"flowschemas?limit=2&continue={token}")
    assert [i["metadata"]["name"] for i in second["items"]] == ["c"]
    assert "continue" not in second["metadata"]
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert h.json("GET", "flowschemas?continue=nonsense")[0] == 400
