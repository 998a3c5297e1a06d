"""The read-only flowcontrol.apiserver.k8s.io/v1 handler (apiserver.api.flowcontrol)."""

from __future__ import annotations

import itertools
import json

from tests.unit.fake_request import FakeRequest
from twisted.internet.task import Clock

from apiserver.api.flowcontrol import FlowControlAPI
from apiserver.api.flowcontrol.rest import BASE, human_duration
from apiserver.flowcontrol.bootstrap import flow_schema_objects, priority_level_objects
from apiserver.http.app import STREAMING, RequestInfo, parse_query
from apiserver.http.response import Response

ids = itertools.count()
CREATED = "2026-01-01T00:00:00Z"
API = FlowControlAPI(
    Clock(),
    flow_schema_objects(CREATED, lambda: f"fs-{next(ids)}"),
    priority_level_objects(CREATED, lambda: f"pl-{next(ids)}"),
    min_request_timeout=10,
)


def call(method: str, rest: str, accept: str = "") -> tuple[FakeRequest, object]:
    uri = BASE + rest
    path = uri.partition("?")[0]
    query = parse_query(uri.encode())
    headers = {b"accept": [accept.encode()]} if accept else {}
    request = FakeRequest(method.encode(), uri.encode(), headers)
    info = RequestInfo(method, path, query, False, True)
    return request, API.handle(request, info)


def answer(method: str, rest: str, accept: str = "") -> Response:
    _, result = call(method, rest, accept)
    assert isinstance(result, Response)
    return result


def test_list_and_get() -> None:
    doc = json.loads(answer("GET", "flowschemas").body)
    assert doc["kind"] == "FlowSchemaList" and len(doc["items"]) == 11
    doc = json.loads(answer("GET", "prioritylevelconfigurations/workload-low").body)
    assert doc["spec"]["limited"]["nominalConcurrencyShares"] == 100


def test_missing_object_and_resource() -> None:
    missing = answer("GET", "flowschemas/nope")
    assert missing.code == 404
    assert json.loads(missing.body)["message"] == (
        'flowschemas.flowcontrol.apiserver.k8s.io "nope" not found'
    )
    assert answer("GET", "nosuch").code == 404


def test_writes_are_refused_with_405() -> None:
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        refused = answer(method, "flowschemas/probes")
        assert refused.code == 405
        assert json.loads(refused.body)["reason"] == "MethodNotAllowed"


def test_table_has_kubectl_columns() -> None:
    table = json.loads(
        answer("GET", "flowschemas", "application/json;as=Table;v=v1;g=meta.k8s.io").body
    )
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name",
        "PriorityLevel",
        "MatchingPrecedence",
        "DistinguisherMethod",
        "Age",
        "MissingPL",
    ]
    probes = next(row for row in table["rows"] if row["cells"][0] == "probes")
    assert probes["cells"][1:4] == ["exempt", 2, "<none>"]


def test_watch_sends_every_object_as_added_then_ends_at_the_timeout() -> None:
    clock = Clock()
    api = FlowControlAPI(clock, API.objects["flowschemas"], [], min_request_timeout=10)
    request = FakeRequest(b"GET", (BASE + "flowschemas?watch=1").encode())
    info = RequestInfo("GET", BASE + "flowschemas", {b"watch": [b"1"]}, True, True)
    assert api.handle(request, info) is STREAMING
    lines = b"".join(request.written).splitlines()
    assert len(lines) == 11 and all(json.loads(line)["type"] == "ADDED" for line in lines)
    assert not request.finished
    clock.advance(10)
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
