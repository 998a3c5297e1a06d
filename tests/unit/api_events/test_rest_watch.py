"""Watches of events in process: initial events and the initial-events-end bookmark, resuming
from a resourceVersion, selectors entering and leaving, the deprecated ``/watch/`` paths, 410
for a compacted revision, timeouts on the injected clock, Table and metadata-only streams and
the option errors, as ``api/events/rest.py`` and ``watchstream.py`` serve them
(k8s.io/apiserver pkg/endpoints/handlers/watch.go, pkg/storage/etcd3/watcher.go)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from tests.unit.api_events.rest_harness import (
    RestHarness,
    event,
    fired,
    ns_path,
    status,
)

from apiserver.api.events.rest import BASE

EVENTS = ns_path("ns1")
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
MERGE = "application/merge-patch+json"


@pytest.fixture
def api() -> RestHarness:
    return RestHarness()


def kinds(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(type, name) per event; bookmarks have no name."""
    return [(e["type"], e["object"]["metadata"].get("name", "")) for e in events]


def relabel(api: RestHarness, name: str, app: str) -> dict[str, Any]:
    reply = api.patch(ns_path("ns1", name), {"metadata": {"labels": {"app": app}}}, MERGE)
    assert reply.code == 200, reply.body
    patched: dict[str, Any] = reply.json()
    return patched


def test_initial_events_then_the_end_bookmark_then_changes(api: RestHarness) -> None:
    api.create("w0")
    api.create("w1")
    api.create("elsewhere", "ns2")
    listed_at = api.revision()
    watch = api.watch(
        EVENTS + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=30"
    )
    assert watch.code == 200
    assert watch.headers.getRawHeaders("content-type") == ["application/json"]
    assert watch.headers.getRawHeaders("cache-control") == ["no-cache, private"]
    events = watch.events()
    assert kinds(events) == [("ADDED", "w0"), ("ADDED", "w1"), ("BOOKMARK", "")]
    assert events[0]["object"]["kind"] == "Event"
    assert events[2]["object"] == {
        "kind": "Event",
        "apiVersion": "events.k8s.io/v1",
        "metadata": {
            "resourceVersion": str(listed_at),
            "creationTimestamp": None,
            "annotations": {"k8s.io/initial-events-end": "true"},
        },
        "eventTime": None,
        "regarding": {},
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }
    created = api.create("w2")
    api.create("elsewhere2", "ns2")
    events = watch.events()
    assert kinds(events) == [("ADDED", "w2")]
    assert events[0]["object"] == created
    assert not watch.ended


def test_a_plain_watch_starts_with_the_current_state(api: RestHarness) -> None:
    # WatchList defaulting (k8s.io/apimachinery pkg/apis/meta/internalversion/defaults.go):
    # no resourceVersion means sendInitialEvents=true&resourceVersionMatch=NotOlderThan, so the
    # end bookmark comes when bookmarks are allowed.
    api.create("w0")
    assert kinds(api.watch(EVENTS + "?watch=true").events()) == [("ADDED", "w0")]
    watch = api.watch(EVENTS + "?watch=true&allowWatchBookmarks=true")
    assert kinds(watch.events()) == [("ADDED", "w0"), ("BOOKMARK", "")]
    watch = api.watch(EVENTS + "?watch=1&sendInitialEvents=false&resourceVersionMatch=NotOlderThan")
    assert watch.events() == []
    api.create("w1")
    assert kinds(watch.events()) == [("ADDED", "w1")]


def test_watch_from_a_resource_version_sees_later_changes_in_order(api: RestHarness) -> None:
    api.create("a")
    start = api.revision()
    api.create("b")
    watch = api.watch(EVENTS + f"?watch=1&resourceVersion={start}")
    assert kinds(watch.events()) == [("ADDED", "b")]
    modified = relabel(api, "a", "z")
    reply = api.delete(ns_path("ns1", "b"))
    assert reply.code == 200
    deleted_at = api.revision()
    events = watch.events()
    assert kinds(events) == [("MODIFIED", "a"), ("DELETED", "b")]
    assert events[0]["object"] == modified
    # DELETED carries the last state with the deletion's revision.
    assert events[1]["object"]["metadata"]["resourceVersion"] == str(deleted_at)
    assert events[1]["object"]["metadata"]["labels"] == {"app": "x"}


def test_selectors_turn_updates_into_added_and_deleted(api: RestHarness) -> None:
    api.create("w0")
    api.create("w1")
    watch = api.watch(EVENTS + f"?watch=1&labelSelector=app%3Dx&resourceVersion={api.revision()}")
    relabel(api, "w0", "y")
    events = watch.events()
    assert kinds(events) == [("DELETED", "w0")]
    # The old object, as it last matched, at the change's revision.
    assert events[0]["object"]["metadata"]["labels"] == {"app": "x"}
    assert events[0]["object"]["metadata"]["resourceVersion"] == str(api.revision())
    relabel(api, "w0", "x")
    relabel(api, "w1", "x2")
    assert kinds(watch.events()) == [("ADDED", "w0"), ("DELETED", "w1")]
    fields = api.watch(EVENTS + "?watch=1&fieldSelector=metadata.name%3Dw0")
    assert kinds(fields.events()) == [("ADDED", "w0")]


def test_cluster_wide_and_namespace_narrowed_watches(api: RestHarness) -> None:
    api.create("a", "ns1")
    api.create("b", "ns2")
    everything = api.watch(BASE + "events?watch=1")
    assert kinds(everything.events()) == [("ADDED", "a"), ("ADDED", "b")]
    narrowed = api.watch(BASE + "events?watch=1&fieldSelector=metadata.namespace%3Dns2")
    assert kinds(narrowed.events()) == [("ADDED", "b")]
    api.create("c", "ns2")
    assert kinds(everything.events()) == [("ADDED", "c")]
    assert kinds(narrowed.events()) == [("ADDED", "c")]


def test_deprecated_watch_paths(api: RestHarness) -> None:
    api.create("a")
    api.create("b")
    api.create("c", "ns2")
    assert kinds(api.watch(BASE + "watch/events").events()) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
        ("ADDED", "c"),
    ]
    assert kinds(api.watch(BASE + "watch/namespaces/ns1/events").events()) == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]
    named = api.watch(BASE + "watch/namespaces/ns1/events/b")
    assert kinds(named.events()) == [("ADDED", "b")]
    relabel(api, "a", "q")
    relabel(api, "b", "q")
    assert kinds(named.events()) == [("MODIFIED", "b")]
    # The same name in a field selector is allowed; another is 400.
    same = api.watch(BASE + "watch/namespaces/ns1/events/b?fieldSelector=metadata.name%3Db")
    assert kinds(same.events()) == [("ADDED", "b")]
    reply = api.get(BASE + "watch/namespaces/ns1/events/a?fieldSelector=metadata.name%3Db")
    assert reply.code == 400
    assert reply.json() == status(
        400, "BadRequest", "fieldSelector metadata.name doesn't match requested name"
    )
    # ?watch=false on a /watch/ path still watches.
    assert api.watch(BASE + "watch/namespaces/ns1/events/a?watch=false").code == 200


def test_watch_from_a_compacted_revision_is_one_410_error_event(api: RestHarness) -> None:
    api.create("a")
    old = api.revision()
    api.create("b")
    api.create("c")
    fired(api.backend.compact(api.revision()))
    watch = api.watch(EVENTS + f"?watch=1&resourceVersion={old}")
    assert watch.code == 200
    assert watch.events() == [
        {
            "type": "ERROR",
            "object": status(
                410, "Expired", "The resourceVersion for the provided watch is too old."
            ),
        }
    ]
    assert watch.ended


def test_timeout_seconds_ends_the_stream_cleanly(api: RestHarness) -> None:
    watch = api.watch(EVENTS + "?watch=1&timeoutSeconds=5")
    api.advance(4.9)
    assert not watch.ended
    api.advance(0.2)
    assert watch.ended
    assert watch.raw == b""
    # Nothing written to an ended stream.
    api.create("late")
    assert watch.events() == []


def test_a_client_that_goes_away_stops_its_watch(api: RestHarness) -> None:
    watch = api.watch(EVENTS + "?watch=1")
    other = api.watch(EVENTS + "?watch=1")
    assert len(api.clock.getDelayedCalls()) == 2  # the two timeouts
    watch.hang_up_on_next_write()
    api.create("a")
    assert watch.ended
    # Its timeout is cancelled and later changes go only to the other watch.
    assert len(api.clock.getDelayedCalls()) == 1
    api.create("b")
    assert kinds(other.events()) == [("ADDED", "a"), ("ADDED", "b")]
    assert watch.raw == b""


def test_default_timeout_is_random_between_one_and_two_min_request_timeouts() -> None:
    api = RestHarness(min_request_timeout=100.0)
    predictor = random.Random()
    predictor.setstate(api.api.rng.getstate())
    timeout = 100.0 * (1 + predictor.random())
    assert 100.0 <= timeout < 200.0
    watch = api.watch(EVENTS + "?watch=1")
    api.advance(timeout - 0.01)
    assert not watch.ended
    api.advance(0.02)
    assert watch.ended


def test_table_watch_sends_column_definitions_once(api: RestHarness) -> None:
    api.create("t0")
    api.create("t1")
    watch = api.watch(EVENTS + "?watch=1", accept=TABLE)
    assert watch.headers.getRawHeaders("content-type") == ["application/json"]
    events = watch.events()
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert len(events[0]["object"]["columnDefinitions"]) == 10
    assert events[1]["object"]["columnDefinitions"] is None
    api.create("t2")
    later = watch.events()
    assert later[0]["object"]["columnDefinitions"] is None
    assert later[0]["object"]["rows"][0]["cells"][9] == "t2"
    assert later[0]["object"]["rows"][0]["object"]["kind"] == "PartialObjectMetadata"


def test_metadata_only_watches(api: RestHarness) -> None:
    api.create("p0")
    partial = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    watch = api.watch(
        EVENTS + "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true",
        accept=partial,
    )
    events = watch.events()
    assert [e["object"]["kind"] for e in events] == ["PartialObjectMetadata"] * 2
    assert events[0]["object"]["metadata"]["name"] == "p0"
    assert events[1]["type"] == "BOOKMARK"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    # A list form asked of a watch is ignored: the events are written as they are.
    as_list = api.watch(
        EVENTS + "?watch=1",
        accept="application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    )
    assert [e["object"]["kind"] for e in as_list.events()] == ["Event"]


def test_yaml_watch_is_406(api: RestHarness) -> None:
    reply = api.get(EVENTS + "?watch=1", accept="application/yaml")
    assert reply.code == 406
    assert reply.json() == status(
        406,
        "NotAcceptable",
        "only the following media types are accepted: application/json;stream=watch, "
        "application/vnd.kubernetes.protobuf;stream=watch",
    )


@pytest.mark.parametrize(
    ("query", "causes"),
    [
        (
            "resourceVersionMatch=Exact&resourceVersion=1",
            [
                (
                    "FieldValueForbidden",
                    "Forbidden: resourceVersionMatch is forbidden for watch unless "
                    "sendInitialEvents is provided",
                ),
                (
                    "FieldValueNotSupported",
                    'Unsupported value: "Exact": supported values: "NotOlderThan"',
                ),
            ],
        ),
        (
            "sendInitialEvents=true",
            [
                (
                    "FieldValueForbidden",
                    "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                    "NotOlderThan",
                )
            ],
        ),
    ],
)
def test_invalid_watch_options(api: RestHarness, query: str, causes: list[tuple[str, str]]) -> None:
    reply = api.get(f"{EVENTS}?watch=1&{query}")
    assert reply.code == 422
    texts = [f"resourceVersionMatch: {detail}" for _, detail in causes]
    joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    assert reply.json() == status(
        422,
        "Invalid",
        f'ListOptions.meta.k8s.io "" is invalid: {joined}',
        {
            "group": "meta.k8s.io",
            "kind": "ListOptions",
            "causes": [
                {"reason": reason, "message": detail, "field": "resourceVersionMatch"}
                for reason, detail in causes
            ],
        },
    )


def test_bad_watch_selectors_are_400(api: RestHarness) -> None:
    reply = api.get(EVENTS + "?watch=1&fieldSelector=note%3Dx")
    assert reply.json() == status(400, "BadRequest", "field label not supported: note")
    reply = api.get(EVENTS + "?watch=1&labelSelector=a%20in")
    assert reply.code == 400


def test_ttl_expiry_is_a_deleted_event() -> None:
    api = RestHarness(ttl=60)
    api.create("t1")
    watch = api.watch(EVENTS + f"?watch=1&resourceVersion={api.revision()}")
    api.advance(61)
    events = watch.events()
    assert kinds(events) == [("DELETED", "t1")]
    assert events[0]["object"]["metadata"]["resourceVersion"] == str(api.revision())


# --- through the watch cache -----------------------------------------------------------------


def test_cached_watch_gets_periodic_bookmarks_only_when_asked() -> None:
    api = RestHarness(cached=True)
    api.create("a")
    with_bookmarks = api.watch(EVENTS + "?watch=1&allowWatchBookmarks=true")
    without = api.watch(EVENTS + "?watch=1")
    assert kinds(with_bookmarks.events()) == [("ADDED", "a"), ("BOOKMARK", "")]
    assert kinds(without.events()) == [("ADDED", "a")]
    api.create("b")
    assert kinds(with_bookmarks.events()) == [("ADDED", "b")]
    assert kinds(without.events()) == [("ADDED", "b")]
    api.advance(60)
    events = with_bookmarks.events()
    assert kinds(events) == [("BOOKMARK", "")]
    # A periodic bookmark carries the cache's revision and no annotation.
    assert events[0]["object"]["metadata"] == {
        "resourceVersion": str(api.revision()),
        "creationTimestamp": None,
    }
    assert without.events() == []


def test_cached_watch_from_a_resource_version() -> None:
    api = RestHarness(cached=True)
    api.create("a")
    start = api.revision()
    api.create("b")
    watch = api.watch(EVENTS + f"?watch=1&resourceVersion={start}&labelSelector=app%3Dx")
    assert kinds(watch.events()) == [("ADDED", "b")]
    relabel(api, "a", "gone")
    assert kinds(watch.events()) == [("DELETED", "a")]


def test_watch_of_a_created_event_body_is_what_get_returns(api: RestHarness) -> None:
    watch = api.watch(EVENTS + "?watch=1")
    assert api.post(EVENTS, event("g1")).code == 201
    (added,) = watch.events()
    assert added["object"] == api.get(ns_path("ns1", "g1")).json()
