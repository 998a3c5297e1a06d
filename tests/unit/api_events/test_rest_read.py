"""GET and LIST of events in process: resourceVersion semantics, selectors, paging, and the
output forms (YAML, Table, PartialObjectMetadata, pretty) of ``api/events/rest.py``
(k8s.io/apiserver pkg/endpoints/handlers/get.go, response.go, pkg/storage/etcd3/store.go)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
import yaml
from tests.unit.api_events.rest_harness import RestHarness, event, fired, ns_path, status

from apiserver.api.events import rest
from apiserver.api.events.rest import BASE

EVENTS = ns_path("ns1")
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
PARTIAL = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
PARTIAL_LIST = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


@pytest.fixture
def api() -> RestHarness:
    return RestHarness()


def names(listed: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


def too_large(wanted: int, current: int) -> dict[str, Any]:
    return status(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {wanted}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


def token(rv: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": start}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def labelled(api: RestHarness, name: str, app: str, namespace: str = "ns1") -> dict[str, Any]:
    body = event(name, namespace)
    body["metadata"]["labels"] = {"app": app}
    reply = api.post(ns_path(namespace), body)
    assert reply.code == 201, reply.body
    created: dict[str, Any] = reply.json()
    return created


# --- GET -------------------------------------------------------------------------------------


def test_get_returns_the_stored_object(api: RestHarness) -> None:
    created = api.create("e1")
    reply = api.get(ns_path("ns1", "e1"))
    assert reply.code == 200
    assert reply.content_type == "application/json"
    assert reply.header("cache-control") == "no-cache, private"
    assert reply.json() == created
    assert reply.body.endswith(b"}\n")


def test_paths_are_parsed_once_and_the_memory_is_bounded(
    api: RestHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rest, "TARGETS_MAX", 3)
    api.create("e1")
    for _ in range(2):
        assert api.get(ns_path("ns1", "e1")).code == 200
        assert api.get(BASE + "nonsense/path").code == 404
    targets = api.api._targets
    assert set(targets) == {ns_path("ns1"), ns_path("ns1", "e1"), BASE + "nonsense/path"}
    assert targets[BASE + "nonsense/path"] is None
    assert api.get(ns_path("ns1", "e2")).code == 404  # a fourth path: the memory starts over
    assert set(targets) == {ns_path("ns1", "e2")}
    assert api.get(ns_path("ns1", "e1")).json()["metadata"]["name"] == "e1"


def test_get_missing_is_404_with_the_exact_message(api: RestHarness) -> None:
    reply = api.get(ns_path("ns1", "nope"))
    assert reply.code == 404
    assert reply.json() == status(
        404,
        "NotFound",
        'events.events.k8s.io "nope" not found',
        {"name": "nope", "group": "events.k8s.io", "kind": "events"},
    )
    # Another namespace's object is not found either.
    api.create("e1", "ns2")
    assert api.get(ns_path("ns1", "e1")).code == 404


def test_get_with_resource_version(api: RestHarness) -> None:
    created = api.create("e1")
    current = api.revision()
    for rv in ("0", str(current), "1"):
        reply = api.get(ns_path("ns1", "e1") + f"?resourceVersion={rv}")
        assert reply.code == 200 and reply.json() == created
    reply = api.get(ns_path("ns1", "e1") + f"?resourceVersion={current + 10}")
    assert reply.code == 504
    assert reply.json() == too_large(current + 10, current)
    for bad in ("abc", "-1"):
        reply = api.get(ns_path("ns1", "e1") + f"?resourceVersion={bad}")
        assert reply.code == 400
        assert reply.json() == status(400, "BadRequest", f"invalid resource version: {bad}")
    reply = api.get(ns_path("ns1", "nope") + f"?resourceVersion={current}")
    assert reply.code == 404


def test_get_output_forms(api: RestHarness) -> None:
    api.create("o1")
    path = ns_path("ns1", "o1")
    reply = api.get(path, accept="application/yaml")
    assert reply.content_type == "application/yaml"
    assert reply.body.startswith(b"kind: Event\napiVersion: events.k8s.io/v1\n")
    assert yaml.safe_load(reply.body) == api.get(path).json()
    pretty = api.get(path + "?pretty=true")
    assert pretty.body.startswith(b'{\n  "kind": "Event"')
    assert json.loads(pretty.body) == api.get(path).json()
    assert api.get(path, user_agent="Mozilla/5.0 (X11)").body.startswith(b'{\n  "kind"')
    reply = api.get(path, accept=PARTIAL)
    assert reply.code == 200
    partial = reply.json()
    assert (partial["kind"], partial["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
    assert partial["metadata"]["name"] == "o1" and list(partial) == [
        "kind",
        "apiVersion",
        "metadata",
    ]
    reply = api.get(path, accept=PARTIAL_LIST)
    assert reply.code == 406
    assert reply.json() == status(
        406,
        "NotAcceptable",
        "you requested PartialObjectMetadataList, but the requested object is not a list "
        "(*core.Event)",
    )


def test_get_as_table_with_ages_from_the_clock(api: RestHarness) -> None:
    api.create("t1")
    api.advance(90)
    reply = api.get(ns_path("ns1", "t1"), accept=TABLE)
    table = reply.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"] == {"resourceVersion": str(api.revision())}
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Last Seen",
        "Type",
        "Reason",
        "Object",
        "Subobject",
        "Source",
        "Message",
        "First Seen",
        "Count",
        "Name",
    ]
    # eventTime is 1 µs after the clock's start: 89.999999 s is "89s", as Go truncates.
    row = table["rows"][0]
    assert row["cells"] == [
        "89s",
        "Normal",
        "Created",
        "pod/p",
        "",
        "example.com/c, c-1",
        "n",
        "89s",
        1,
        "t1",
    ]
    assert row["object"]["kind"] == "PartialObjectMetadata"
    reply = api.get(ns_path("ns1", "t1") + "?includeObject=Object", accept=TABLE)
    assert reply.json()["rows"][0]["object"]["kind"] == "Event"
    reply = api.get(ns_path("ns1", "t1") + "?includeObject=None", accept=TABLE)
    assert "object" not in reply.json()["rows"][0]
    reply = api.get(ns_path("ns1", "t1") + "?includeObject=Bad", accept=TABLE)
    assert reply.code == 400
    assert reply.json() == status(
        400,
        "BadRequest",
        'Unable to convert to Table as requested: includeObject: Invalid value: "Bad": must be '
        "'Metadata', 'Object', 'None', or empty",
    )
    yaml_table = api.get(
        ns_path("ns1", "t1"), accept="application/yaml;as=Table;v=v1;g=meta.k8s.io"
    )
    assert yaml_table.content_type == "application/yaml"
    assert yaml.safe_load(yaml_table.body)["kind"] == "Table"


@pytest.mark.parametrize(
    ("accept", "message"),
    [
        (
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
            "only the following media types are accepted: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf",
        ),
        (
            "application/json;as=Table;v=v2;g=meta.k8s.io",
            "only the following media types are accepted: application/json, application/yaml, "
            "application/vnd.kubernetes.protobuf",
        ),
        ("text/html", "406: Not Acceptable"),
    ],
)
def test_not_acceptable(api: RestHarness, accept: str, message: str) -> None:
    api.create("e1")
    for path in (ns_path("ns1", "e1"), EVENTS):
        reply = api.get(path, accept=accept)
        assert reply.code == 406
        details: dict[str, Any] | None = {} if message == "406: Not Acceptable" else None
        assert reply.json() == status(406, "NotAcceptable", message, details)


def test_protobuf_is_served_when_accept_prefers_it(api: RestHarness) -> None:
    api.create("e1")
    reply = api.get(
        ns_path("ns1", "e1"), accept="application/vnd.kubernetes.protobuf, application/json"
    )
    assert reply.code == 200 and reply.content_type == "application/vnd.kubernetes.protobuf"
    assert reply.body.startswith(b"k8s\x00")
    reply = api.get(
        ns_path("ns1", "e1"), accept="application/json, application/vnd.kubernetes.protobuf"
    )
    assert reply.code == 200 and reply.content_type == "application/json"


# --- LIST ------------------------------------------------------------------------------------


def test_a_fresh_store_lists_at_resource_version_one(api: RestHarness) -> None:
    reply = api.get(EVENTS)
    assert reply.code == 200
    assert reply.body == (
        b'{"kind":"EventList","apiVersion":"events.k8s.io/v1","metadata":'
        b'{"resourceVersion":"1"},"items":[]}\n'
    )


def test_list_namespaced_and_cluster_wide(api: RestHarness) -> None:
    api.create("b", "ns1")
    api.create("a", "ns1")
    api.create("c", "ns2")
    listed = api.get(EVENTS).json()
    assert listed["kind"] == "EventList" and listed["apiVersion"] == "events.k8s.io/v1"
    assert names(listed) == ["a", "b"]
    assert "kind" not in listed["items"][0]
    assert listed["metadata"] == {"resourceVersion": str(api.revision())}
    everything = api.get(BASE + "events").json()
    assert names(everything) == ["a", "b", "c"]
    narrowed = api.get(BASE + "events?fieldSelector=metadata.namespace%3Dns2").json()
    assert names(narrowed) == ["c"]


def test_label_and_field_selectors(api: RestHarness) -> None:
    labelled(api, "x1", "x")
    labelled(api, "y1", "y")
    labelled(api, "x2", "x")
    assert names(api.get(EVENTS + "?labelSelector=app%3Dx").json()) == ["x1", "x2"]
    assert names(api.get(EVENTS + "?labelSelector=app!%3Dx").json()) == ["y1"]
    assert names(api.get(EVENTS + "?labelSelector=app%20in%20(y)").json()) == ["y1"]
    assert names(api.get(EVENTS + "?labelSelector=missing").json()) == []
    assert names(api.get(EVENTS + "?fieldSelector=metadata.name%3Dx2").json()) == ["x2"]
    assert names(api.get(EVENTS + "?fieldSelector=type%3DWarning").json()) == []
    query = "?fieldSelector=regarding.kind%3DPod,metadata.name!%3Dx1&labelSelector=app%3Dx"
    assert names(api.get(EVENTS + query).json()) == ["x2"]
    assert names(api.get(EVENTS + "?fieldSelector=reportingController%3Dexample.com/c").json()) == [
        "x1",
        "x2",
        "y1",
    ]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("fieldSelector=note%3Dx", "field label not supported: note"),
        ("fieldSelector=a", "invalid selector: 'a'; can't understand 'a'"),
        ("labelSelector=a%20in", "unable to parse requirement: found '' expected: '('"),
        (
            "continue=garbage",
            "invalid continue token: continue key is not valid: invalid character '\\u0081' "
            "looking for beginning of value",
        ),
        (
            "limit=1&continue=x&resourceVersion=5",
            "specifying resource version is not allowed when using continue",
        ),
        ("resourceVersion=x", "invalid resource version: x"),
        # issue 17: a watch refuses what list and get refuse, with the same 400 (not a 500).
        ("watch=1&resourceVersion=abc", "invalid resource version: abc"),
        ("watch=true&resourceVersion=-1", "invalid resource version: -1"),
    ],
)
def test_bad_list_requests(api: RestHarness, query: str, message: str) -> None:
    reply = api.get(f"{EVENTS}?{query}")
    assert reply.code == 400
    assert reply.json() == status(400, "BadRequest", message)


@pytest.mark.parametrize(
    ("query", "field", "cause_reason", "detail"),
    [
        (
            "resourceVersionMatch=Exact",
            "resourceVersionMatch",
            "FieldValueForbidden",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ),
        (
            "sendInitialEvents=true",
            "sendInitialEvents",
            "FieldValueForbidden",
            "Forbidden: sendInitialEvents is forbidden for list",
        ),
        (
            "resourceVersion=1&resourceVersionMatch=x",
            "resourceVersionMatch",
            "FieldValueNotSupported",
            'Unsupported value: "x": supported values: "Exact", "NotOlderThan", ""',
        ),
    ],
)
def test_invalid_list_options(
    api: RestHarness, query: str, field: str, cause_reason: str, detail: str
) -> None:
    reply = api.get(f"{EVENTS}?{query}")
    assert reply.code == 422
    assert reply.json() == status(
        422,
        "Invalid",
        f'ListOptions.meta.k8s.io "" is invalid: {field}: {detail}',
        {
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": [{"reason": cause_reason, "message": detail, "field": field}],
        },
    )


def test_resource_version_semantics(api: RestHarness) -> None:
    api.create("a")
    first = api.revision()
    api.create("b")
    current = api.revision()
    # Exact reads the past; NotOlderThan and unset read the latest.
    exact = api.get(EVENTS + f"?resourceVersion={first}&resourceVersionMatch=Exact").json()
    assert names(exact) == ["a"] and exact["metadata"]["resourceVersion"] == str(first)
    for query in (
        f"?resourceVersion={first}",
        f"?resourceVersion={first}&resourceVersionMatch=NotOlderThan",
        "?resourceVersion=0",
        "?resourceVersion=0&resourceVersionMatch=NotOlderThan",
    ):
        listed = api.get(EVENTS + query).json()
        assert names(listed) == ["a", "b"], query
        assert listed["metadata"]["resourceVersion"] == str(current)
    # With a limit, an unset match is an exact read at that revision.
    limited = api.get(EVENTS + f"?resourceVersion={first}&limit=5").json()
    assert names(limited) == ["a"] and limited["metadata"]["resourceVersion"] == str(first)
    # The future is 504 for NotOlderThan and for Exact.
    for query in (
        f"?resourceVersion={current + 5}",
        f"?resourceVersion={current + 5}&resourceVersionMatch=Exact",
        f"?resourceVersion={current + 5}&limit=1",
    ):
        reply = api.get(EVENTS + query)
        assert reply.code == 504, query
        assert reply.json() == too_large(current + 5, current)


def test_compacted_revision_is_410(api: RestHarness) -> None:
    api.create("a")
    old = api.revision()
    api.create("b")
    api.create("c")
    fired(api.backend.compact(api.revision()))
    reply = api.get(EVENTS + f"?resourceVersion={old}&resourceVersionMatch=Exact")
    assert reply.code == 410
    assert reply.json() == status(
        410, "Expired", "The resourceVersion for the provided list is too old."
    )


def test_paging_with_limit_and_continue(api: RestHarness) -> None:
    for name in ("a", "b", "c", "d", "e"):
        api.create(name)
    rv = api.revision()
    first = api.get(EVENTS + "?limit=2").json()
    assert names(first) == ["a", "b"]
    assert first["metadata"] == {
        "resourceVersion": str(rv),
        "continue": token(rv, "b\u0000"),
        "remainingItemCount": 3,
    }
    # A write between pages is not seen: the next pages read at the first page's revision.
    api.create("bb")
    second = api.get(EVENTS + "?limit=2&continue=" + first["metadata"]["continue"]).json()
    assert names(second) == ["c", "d"]
    assert second["metadata"]["resourceVersion"] == str(rv)
    assert second["metadata"]["remainingItemCount"] == 1
    third = api.get(EVENTS + "?limit=2&continue=" + second["metadata"]["continue"]).json()
    assert names(third) == ["e"]
    assert third["metadata"] == {"resourceVersion": str(rv)}
    # resourceVersion=0 is allowed with continue.
    again = api.get(EVENTS + "?limit=2&resourceVersion=0&continue=" + token(rv, "b\u0000"))
    assert names(again.json()) == ["c", "d"]


def test_paging_with_a_selector_fills_pages_and_has_no_remaining_count(
    api: RestHarness,
) -> None:
    for index, app in enumerate("xyyxyx"):
        labelled(api, f"e{index}", app)
    page = api.get(EVENTS + "?limit=2&labelSelector=app%3Dx").json()
    assert names(page) == ["e0", "e3"]
    assert "remainingItemCount" not in page["metadata"]
    rest = api.get(
        EVENTS + "?limit=2&labelSelector=app%3Dx&continue=" + page["metadata"]["continue"]
    )
    assert names(rest.json()) == ["e5"]


def test_cluster_wide_continue_token_carries_the_namespace(api: RestHarness) -> None:
    api.create("a", "ns1")
    api.create("b", "ns2")
    rv = api.revision()
    page = api.get(BASE + "events?limit=1").json()
    assert page["metadata"]["continue"] == token(rv, "ns1/a\u0000")
    rest = api.get(BASE + "events?limit=1&continue=" + page["metadata"]["continue"]).json()
    assert names(rest) == ["b"]


def test_continue_at_a_compacted_revision_is_410_with_a_fresh_token(api: RestHarness) -> None:
    for name in ("a", "b", "c"):
        api.create(name)
    page = api.get(EVENTS + "?limit=1").json()
    api.create("d")
    fired(api.backend.compact(api.revision()))
    reply = api.get(EVENTS + "?limit=1&continue=" + page["metadata"]["continue"])
    assert reply.code == 410
    body = reply.json()
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {"continue": token(-1, "a\u0000")},
        "status": "Failure",
        "message": EXPIRED_CONTINUE,
        "reason": "Expired",
        "code": 410,
    }
    # The fresh token lists the rest at the latest revision.
    rest = api.get(EVENTS + "?continue=" + body["metadata"]["continue"]).json()
    assert names(rest) == ["b", "c", "d"]


def test_repeated_lists_see_every_write(api: RestHarness) -> None:
    """The same list URI answered again after writes (list bodies are kept per revision)."""
    path = EVENTS + "?limit=50"
    seen = []
    for index in range(3):
        listed = api.get(path)
        assert api.get(path).body == listed.body
        seen.append(names(listed.json()))
        api.create(f"r{index}")
    assert seen == [[], ["r0"], ["r0", "r1"]]
    assert api.delete(ns_path("ns1", "r0")).code == 200
    assert names(api.get(path).json()) == ["r1", "r2"]
    # Another form of the same list is not answered with the kept JSON.
    assert api.get(path, accept="application/yaml").content_type == "application/yaml"
    assert api.get(path + "&pretty=1").body.startswith(b'{\n  "kind": "EventList"')


def test_list_output_forms(api: RestHarness) -> None:
    api.create("o1")
    api.create("o2")
    reply = api.get(EVENTS, accept="application/yaml")
    assert reply.content_type == "application/yaml"
    assert yaml.safe_load(reply.body) == api.get(EVENTS).json()
    table = api.get(EVENTS + "?limit=1", accept=TABLE).json()
    assert table["kind"] == "Table"
    assert [row["cells"][9] for row in table["rows"]] == ["o1"]
    assert table["metadata"]["continue"] and table["metadata"]["remainingItemCount"] == 1
    partial = api.get(EVENTS, accept=PARTIAL_LIST).json()
    assert (partial["kind"], partial["apiVersion"]) == (
        "PartialObjectMetadataList",
        "meta.k8s.io/v1",
    )
    assert [i["kind"] for i in partial["items"]] == ["PartialObjectMetadata"] * 2
    assert partial["metadata"] == {"resourceVersion": str(api.revision())}
    reply = api.get(EVENTS, accept=PARTIAL)
    assert reply.code == 406
    assert reply.json() == status(
        406,
        "NotAcceptable",
        "you requested PartialObjectMetadata, but the requested object is a list (*core.EventList)",
    )
    v1beta1 = api.get(EVENTS, accept="application/json;as=Table;v=v1beta1;g=meta.k8s.io")
    assert v1beta1.json()["apiVersion"] == "meta.k8s.io/v1beta1"


def test_ttl_expires_events_on_the_injected_clock() -> None:
    api = RestHarness(ttl=60)
    api.create("t1")
    api.advance(30)
    assert api.get(ns_path("ns1", "t1")).code == 200
    # A real update restarts the TTL.
    patched = api.patch(
        ns_path("ns1", "t1"),
        {"metadata": {"labels": {"app": "z"}}},
        "application/merge-patch+json",
    )
    assert patched.code == 200
    api.advance(45)
    assert api.get(ns_path("ns1", "t1")).code == 200
    api.advance(20)
    assert api.get(ns_path("ns1", "t1")).code == 404
    assert names(api.get(EVENTS).json()) == []


# --- with the watch cache in front of the store ----------------------------------------------


def test_cached_lists_and_gets() -> None:
    api = RestHarness(cached=True)
    api.create("a")
    first = api.revision()
    api.create("b")
    current = api.revision()
    assert api.registry.can_list_cached("ns1")
    for query in ("?resourceVersion=0", f"?resourceVersion={first}", ""):
        listed = api.get(EVENTS + query).json()
        assert names(listed) == ["a", "b"], query
        assert listed["metadata"]["resourceVersion"] == str(current)
    page = api.get(EVENTS + "?resourceVersion=0&limit=1").json()
    assert names(page) == ["a"]
    assert page["metadata"]["remainingItemCount"] == 1
    rest = api.get(EVENTS + "?limit=1&continue=" + page["metadata"]["continue"]).json()
    assert names(rest) == ["b"]
    filtered = api.get(EVENTS + "?resourceVersion=0&fieldSelector=metadata.name%3Db").json()
    assert names(filtered) == ["b"]
    assert api.get(ns_path("ns1", "a")).json()["metadata"]["name"] == "a"
    assert api.get(ns_path("ns1", "zz")).code == 404
    reply = api.get(EVENTS + f"?resourceVersion={current + 3}")
    assert reply.json() == too_large(current + 3, current)
    exact = api.get(EVENTS + f"?resourceVersion={first}&resourceVersionMatch=Exact").json()
    assert names(exact) == ["a"]


@pytest.mark.parametrize("limit", ["0", "-1", "-500"])
def test_limit_of_zero_or_less_is_no_limit(api: RestHarness, limit: str) -> None:
    """k8s.io/apiserver pkg/storage/etcd3/store.go pages only when ``Limit > 0`` (issue 17)."""
    for name in ("e1", "e2", "e3"):
        api.create(name)
    reply = api.get(f"{EVENTS}?limit={limit}")
    assert reply.code == 200
    listed = reply.json()
    assert names(listed) == ["e1", "e2", "e3"]
    assert "continue" not in listed["metadata"]
