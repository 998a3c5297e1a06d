"""DELETE of one event and of a collection in process: DeleteOptions from the body or the
query, preconditions, dry runs, the Status bodies of ``api/events/rest.py``, and events kept
for their finalizers until an update empties them (k8s.io/apiserver
pkg/endpoints/handlers/delete.go, pkg/registry/rest/delete.go,
pkg/registry/generic/registry/store.go)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from tests.unit.api_events.rest_harness import RestHarness, event, ns_path, status

E1 = ns_path("ns1", "e1")
EVENTS = ns_path("ns1")


@pytest.fixture
def api() -> RestHarness:
    return RestHarness()


def success(name: str, uid: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": name, "group": "events.k8s.io", "kind": "events", "uid": uid},
    }


def names(listed: dict[str, Any]) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


def test_delete_answers_success_and_the_event_is_gone(api: RestHarness) -> None:
    created = api.create("e1")
    reply = api.delete(E1)
    assert reply.code == 200
    assert reply.content_type == "application/json"
    assert reply.json() == success("e1", created["metadata"]["uid"])
    reply = api.get(E1)
    assert reply.code == 404
    assert reply.json()["message"] == 'events.events.k8s.io "e1" not found'
    reply = api.delete(E1)
    assert reply.code == 404
    assert reply.json() == status(
        404,
        "NotFound",
        'events.events.k8s.io "e1" not found',
        {"name": "e1", "group": "events.k8s.io", "kind": "events"},
    )


def test_preconditions(api: RestHarness) -> None:
    created = api.create("e1")
    meta = created["metadata"]
    reply = api.delete(
        E1, {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": "nope"}}
    )
    assert reply.code == 409
    assert reply.json() == status(
        409,
        "Conflict",
        'Operation cannot be fulfilled on Event "e1": the UID in the precondition (nope) does '
        f"not match the UID in record ({meta['uid']}). The object might have been deleted and "
        "then recreated",
        {"name": "e1", "kind": "Event"},
    )
    reply = api.delete(E1, {"preconditions": {"resourceVersion": "999"}})
    assert reply.code == 409
    assert reply.json() == status(
        409,
        "Conflict",
        'Operation cannot be fulfilled on Event "e1": the ResourceVersion in the precondition '
        f"(999) does not match the ResourceVersion in record ({meta['resourceVersion']}). The "
        "object might have been modified",
        {"name": "e1", "kind": "Event"},
    )
    assert api.get(E1).code == 200
    matching = {"preconditions": {"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]}}
    assert api.delete(E1, matching).code == 200


def test_dry_run_from_the_query_or_a_yaml_body(api: RestHarness) -> None:
    created = api.create("e1")
    revision = api.revision()
    reply = api.delete(E1 + "?dryRun=All")
    assert reply.code == 200
    assert reply.json() == success("e1", created["metadata"]["uid"])
    yaml_body = b"kind: DeleteOptions\napiVersion: v1\ndryRun: [All]\n"
    assert api.delete(E1, yaml_body, content_type="application/yaml").code == 200
    assert api.revision() == revision
    assert api.get(E1).json() == created
    # Accepted options that change nothing here.
    assert api.delete(E1 + "?gracePeriodSeconds=0&propagationPolicy=Background").code == 200
    assert api.get(E1).code == 404


@pytest.mark.parametrize(
    ("query", "body", "field", "reason", "detail"),
    [
        (
            "?propagationPolicy=x",
            None,
            "propagationPolicy",
            "FieldValueNotSupported",
            'Unsupported value: "x": supported values: "Foreground", "Background", "Orphan", "nil"',
        ),
        (
            "",
            {"propagationPolicy": "Orphan", "orphanDependents": True},
            "propagationPolicy",
            "FieldValueInvalid",
            'Invalid value: "Orphan": orphanDependents and deletionPropagation cannot be both set',
        ),
        (
            "?dryRun=x",
            None,
            "dryRun",
            "FieldValueNotSupported",
            'Unsupported value: ["x"]: supported values: "All"',
        ),
    ],
)
def test_invalid_delete_options(
    api: RestHarness, query: str, body: Any, field: str, reason: str, detail: str
) -> None:
    api.create("e1")
    for path in (E1, EVENTS):
        reply = api.delete(path + query, body)
        assert reply.code == 422
        assert reply.json() == status(
            422,
            "Invalid",
            f'DeleteOptions.meta.k8s.io "" is invalid: {field}: {detail}',
            {
                "group": "meta.k8s.io",
                "kind": "DeleteOptions",
                "causes": [{"reason": reason, "message": detail, "field": field}],
            },
        )
    assert api.get(E1).code == 200


def test_undecodable_delete_bodies(api: RestHarness) -> None:
    api.create("e1")
    # Not a Status error upstream either: ErrorToAPIStatus makes it a 500 without a reason.
    reply = api.delete(E1, b"{bad")
    assert reply.code == 500
    assert reply.json() == status(
        500,
        "",
        "couldn't get version/kind; json parse error: invalid character 'b' looking for "
        "beginning of object key string",
    )
    reply = api.delete(E1, {"kind": "Pod", "apiVersion": "v1"})
    assert reply.code == 500
    assert reply.json()["message"] == (
        'no kind "Pod" is registered for version "v1" in scheme '
        '"k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:28"'
    )
    # A protobuf DeleteOptions that cannot be decoded fails as the JSON ones do.
    reply = api.delete(E1, b"\x00", content_type="application/vnd.kubernetes.protobuf")
    assert (reply.code, reply.json()["message"]) == (500, "data too short")
    reply = api.delete(E1, b"\x00", content_type="text/plain")
    assert reply.code == 415
    assert api.get(E1).code == 200


def test_delete_collection_by_selector(api: RestHarness) -> None:
    for name, app in (("l0", "x"), ("l1", "y"), ("l2", "x")):
        body = event(name)
        body["metadata"]["labels"] = {"app": app}
        assert api.post(EVENTS, body).code == 201
    api.create("other", "ns2")
    revision = api.revision()
    reply = api.delete(EVENTS + "?labelSelector=app%3Dx")
    assert reply.code == 200
    removed = reply.json()
    assert removed["kind"] == "EventList" and removed["apiVersion"] == "events.k8s.io/v1"
    assert removed["metadata"] == {"resourceVersion": str(revision)}
    assert names(removed) == ["l0", "l2"]
    assert "kind" not in removed["items"][0]
    assert names(api.get(EVENTS).json()) == ["l1"]
    assert names(api.get(ns_path("ns2")).json()) == ["other"]
    reply = api.delete(EVENTS + "?fieldSelector=metadata.name%3Dl1", accept="application/yaml")
    assert reply.content_type == "application/yaml"
    assert [i["metadata"]["name"] for i in yaml.safe_load(reply.body)["items"]] == ["l1"]
    assert names(api.get(EVENTS).json()) == []


def test_delete_collection_dry_run(api: RestHarness) -> None:
    api.create("a")
    api.create("b")
    revision = api.revision()
    reply = api.delete(EVENTS + "?dryRun=All")
    assert names(reply.json()) == ["a", "b"]
    assert api.revision() == revision
    assert names(api.get(EVENTS).json()) == ["a", "b"]


def test_delete_collection_reports_a_failed_precondition(api: RestHarness) -> None:
    # k8s.io/apiserver pkg/registry/generic/registry/store.go DeleteCollection: the first
    # error of a worker (other than NotFound) is the answer.
    first = api.create("a")
    api.create("b")
    reply = api.delete(EVENTS, {"preconditions": {"uid": first["metadata"]["uid"]}})
    assert reply.code == 409
    assert reply.json()["message"].startswith(
        'Operation cannot be fulfilled on Event "b": the UID in the precondition'
    )
    assert names(api.get(EVENTS).json()) == ["b"]


def test_delete_collection_with_several_workers_keeps_list_order() -> None:
    api = RestHarness(delete_collection_workers=3)
    for name in ("d", "a", "c", "b", "e"):
        api.create(name)
    reply = api.delete(EVENTS)
    assert names(reply.json()) == ["a", "b", "c", "d", "e"]
    assert names(api.get(EVENTS).json()) == []


def test_delete_collection_errors(api: RestHarness) -> None:
    reply = api.delete(EVENTS + "?labelSelector=a%20in")
    assert reply.code == 400
    assert reply.json()["message"] == "unable to parse requirement: found '' expected: '('"
    reply = api.delete(EVENTS + "?resourceVersionMatch=Exact")
    assert reply.code == 422
    assert reply.json()["message"].startswith('ListOptions.meta.k8s.io "" is invalid: ')
    reply = api.delete(EVENTS + "?fieldSelector=note%3Dx")
    assert reply.json() == status(400, "BadRequest", "field label not supported: note")


def test_delete_with_finalizers_only_marks_the_event(api: RestHarness) -> None:
    # k8s.io/apiserver pkg/registry/generic/registry/store.go Delete ->
    # updateForGracefulDeletionAndFinalizers: with pending finalizers the object stays, with
    # deletionTimestamp (now) and deletionGracePeriodSeconds 0, and is the 200 answer.
    body = event("f1")
    body["metadata"]["finalizers"] = ["x.io/f"]
    assert api.post(EVENTS, body).code == 201
    api.advance(30)
    reply = api.delete(ns_path("ns1", "f1"))
    assert reply.code == 200
    marked = reply.json()
    assert marked["kind"] == "Event"
    assert marked["metadata"]["deletionTimestamp"] == "2026-11-22T10:00:30Z"
    assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
    assert api.get(ns_path("ns1", "f1")).json() == marked


def create_with_finalizers(api: RestHarness, name: str, *finalizers: str) -> dict[str, Any]:
    body = event(name)
    body["metadata"]["finalizers"] = list(finalizers)
    reply = api.post(EVENTS, body)
    assert reply.code == 201, reply.body
    created: dict[str, Any] = reply.json()
    return created


def test_a_second_delete_of_a_marked_event_changes_nothing(api: RestHarness) -> None:
    # rest/delete.go BeforeDelete: events delete gracelessly, so store.go marks again, which
    # is a no-op update (nothing written); handlers/delete.go answers 202 only for
    # orphanDependents=false.
    create_with_finalizers(api, "f1", "x.io/f")
    api.advance(30)
    marked = api.delete(ns_path("ns1", "f1")).json()
    revision = api.revision()
    api.advance(30)
    reply = api.delete(ns_path("ns1", "f1"))
    assert reply.code == 200
    assert reply.json() == marked
    reply = api.delete(ns_path("ns1", "f1"), {"orphanDependents": False})
    assert reply.code == 202
    assert reply.json() == marked
    assert api.revision() == revision
    assert api.get(ns_path("ns1", "f1")).json() == marked


def test_marking_checks_preconditions_and_honours_dry_run(api: RestHarness) -> None:
    created = create_with_finalizers(api, "f1", "x.io/f")
    path = ns_path("ns1", "f1")
    reply = api.delete(path, {"preconditions": {"uid": "nope"}})
    assert reply.code == 409
    revision = api.revision()
    reply = api.delete(path + "?dryRun=All")
    assert reply.code == 200
    assert reply.json()["metadata"]["deletionTimestamp"] == "2026-11-22T10:00:00Z"
    assert api.revision() == revision
    assert api.get(path).json() == created


def test_an_update_that_empties_the_finalizers_deletes_the_event(api: RestHarness) -> None:
    # store.go Update: ShouldDeleteDuringUpdate -> deleteWithoutFinalizers, answering 200 with
    # the updated object; watchers see the marking as MODIFIED and the removal as DELETED.
    create_with_finalizers(api, "f1", "x.io/f", "y.io/g")
    path = ns_path("ns1", "f1")
    watch = api.watch(EVENTS + f"?watch=1&resourceVersion={api.revision()}")
    marked = api.delete(path).json()
    # Removing one finalizer keeps the event, and no finalizer may be added meanwhile.
    keep_one = marked | {"metadata": marked["metadata"] | {"finalizers": ["x.io/f"]}}
    reply = api.put(path, keep_one)
    assert reply.code == 200
    kept = reply.json()
    assert kept["metadata"]["finalizers"] == ["x.io/f"]
    more = kept | {"metadata": kept["metadata"] | {"finalizers": ["x.io/f", "z.io/h"]}}
    reply = api.put(path, more)
    assert reply.code == 422
    assert "no new finalizers can be added if the object is being deleted" in reply.body.decode()
    emptied = kept | {"metadata": {k: v for k, v in kept["metadata"].items() if k != "finalizers"}}
    reply = api.put(path, emptied)
    assert reply.code == 200
    last = reply.json()
    assert "finalizers" not in last["metadata"]
    assert last["metadata"]["resourceVersion"] == kept["metadata"]["resourceVersion"]
    assert last["metadata"]["deletionTimestamp"] == marked["metadata"]["deletionTimestamp"]
    assert api.get(path).code == 404
    seen = [(e["type"], e["object"]["metadata"].get("finalizers")) for e in watch.events()]
    assert seen == [
        ("MODIFIED", ["x.io/f", "y.io/g"]),
        ("MODIFIED", ["x.io/f"]),
        ("DELETED", ["x.io/f"]),
    ]


def test_a_patch_that_empties_the_finalizers_deletes_the_event(api: RestHarness) -> None:
    create_with_finalizers(api, "f1", "x.io/f")
    path = ns_path("ns1", "f1")
    api.delete(path)
    revision = api.revision()
    patch = b'{"metadata":{"finalizers":null}}'
    reply = api.patch(path + "?dryRun=All", patch, "application/merge-patch+json")
    assert reply.code == 200
    assert api.revision() == revision
    assert api.get(path).code == 200
    reply = api.patch(path, patch, "application/merge-patch+json")
    assert reply.code == 200
    assert "finalizers" not in reply.json()["metadata"]
    assert api.get(path).code == 404


def test_emptying_finalizers_of_an_event_not_being_deleted_keeps_it(api: RestHarness) -> None:
    created = create_with_finalizers(api, "f1", "x.io/f")
    path = ns_path("ns1", "f1")
    reply = api.patch(path, b'{"metadata":{"finalizers":null}}', "application/merge-patch+json")
    assert reply.code == 200
    assert "finalizers" not in reply.json()["metadata"]
    assert api.get(path).json()["metadata"]["uid"] == created["metadata"]["uid"]


def test_delete_collection_marks_events_with_finalizers(api: RestHarness) -> None:
    api.create("a")
    create_with_finalizers(api, "f1", "x.io/f")
    reply = api.delete(EVENTS)
    assert reply.code == 200
    # The answer lists the items as they were listed (store.go DeleteCollection).
    listed = reply.json()
    assert names(listed) == ["a", "f1"]
    assert "deletionTimestamp" not in listed["items"][1]["metadata"]
    remaining = api.get(EVENTS).json()
    assert names(remaining) == ["f1"]
    assert remaining["items"][0]["metadata"]["deletionTimestamp"] == "2026-11-22T10:00:00Z"
    assert remaining["items"][0]["metadata"]["deletionGracePeriodSeconds"] == 0


def test_a_delete_collection_worker_stops_at_its_first_error(api: RestHarness) -> None:
    # store.go DeleteCollection: a worker returns on its first error, so with one worker the
    # items after a failed one are left alone, even one the preconditions match.
    api.create("a")
    second = api.create("b")
    reply = api.delete(EVENTS, {"preconditions": {"uid": second["metadata"]["uid"]}})
    assert reply.code == 409
    assert reply.json()["message"].startswith('Operation cannot be fulfilled on Event "a"')
    assert names(api.get(EVENTS).json()) == ["a", "b"]


def test_a_marked_event_no_longer_expires() -> None:
    # store.go marks with storage.SimpleUpdate (no TTL), and etcd3/store.go writes an update
    # without a TTL without a lease; a later real update attaches the TTL again.
    api = RestHarness(ttl=60)
    create_with_finalizers(api, "f1", "x.io/f", "y.io/g")
    path = ns_path("ns1", "f1")
    marked = api.delete(path).json()
    api.advance(120)
    assert api.get(path).json() == marked
    keep_one = marked | {"metadata": marked["metadata"] | {"finalizers": ["x.io/f"]}}
    assert api.put(path, keep_one).code == 200
    api.advance(61)
    assert api.get(path).code == 404
