"""PUT and PATCH of an event in process: optimistic concurrency, create-on-update, the four
patch types, server-side apply conflicts and force, dry runs and every error Status of
``api/events/rest.py`` (k8s.io/apiserver pkg/endpoints/handlers/update.go, patch.go,
pkg/registry/rest/update.go, sigs.k8s.io/structured-merge-diff conflicts)."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.api_events.rest_harness import RestHarness, event, ns_path, status

E1 = ns_path("ns1", "e1")
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
APPLY = "application/apply-patch+yaml"
MODIFIED = (
    'Operation cannot be fulfilled on events.events.k8s.io "e1": the object has been modified; '
    "please apply your changes to the latest version and try again"
)
DETAILS = {"name": "e1", "group": "events.k8s.io", "kind": "events"}


@pytest.fixture
def api() -> RestHarness:
    return RestHarness()


def invalid(name: str, field: str, detail: str, *more: tuple[str, str]) -> dict[str, Any]:
    causes = [(field, detail), *more]
    texts = [f"{f}: {d}" for f, d in causes]
    unique = list(dict.fromkeys(texts))
    joined = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
    return status(
        422,
        "Invalid",
        f'Event "{name}" is invalid: {joined}',
        {
            "name": name,
            "kind": "Event",
            "causes": [
                {"reason": "FieldValueInvalid", "message": d, "field": f} for f, d in causes
            ],
        },
    )


# --- PUT -------------------------------------------------------------------------------------


def test_put_creates_then_updates_with_optimistic_concurrency(api: RestHarness) -> None:
    reply = api.put(E1, event("e1"))
    assert reply.code == 201
    created = reply.json()
    assert created["metadata"]["resourceVersion"] == str(api.revision())
    stale = dict(created)
    created["series"] = {"count": 2, "lastObservedTime": "2026-11-22T10:00:05.000000Z"}
    reply = api.put(E1, created)
    assert reply.code == 200
    updated = reply.json()
    assert updated["series"] == created["series"]
    assert int(updated["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    # Server-owned fields are kept from the stored object.
    for key in ("uid", "creationTimestamp"):
        assert updated["metadata"][key] == created["metadata"][key]
    reply = api.put(
        E1, stale | {"series": {"count": 3, "lastObservedTime": "2026-11-22T10:00:06.000000Z"}}
    )
    assert reply.code == 409
    assert reply.json() == status(409, "Conflict", MODIFIED, DETAILS)


def test_put_without_resource_version_is_unconditional(api: RestHarness) -> None:
    created = api.create("e1")
    body = event("e1")
    body["metadata"]["labels"] = {"app": "new"}
    reply = api.put(E1, body)
    assert reply.code == 200
    updated = reply.json()
    assert updated["metadata"]["labels"] == {"app": "new"}
    assert updated["metadata"]["uid"] == created["metadata"]["uid"]
    managers = [entry["manager"] for entry in updated["metadata"]["managedFields"]]
    assert managers == ["unknown"]


def test_put_of_identical_content_writes_nothing(api: RestHarness) -> None:
    created = api.create("e1")
    revision = api.revision()
    reply = api.put(E1, created)
    assert reply.code == 200
    assert reply.json()["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert api.revision() == revision


def test_put_of_identical_content_twice_writes_once(api: RestHarness) -> None:
    """Every identical PUT is a no-op, the first and the ones after it."""
    api.create("e1")
    first = api.put(E1, api.get(E1).json()).json()
    revision = api.revision()
    again = api.put(E1, first)
    assert again.json()["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert api.revision() == revision


def test_put_of_reordered_metadata_and_labels_writes_nothing(api: RestHarness) -> None:
    # The stored encoding is canonical (ObjectMeta field order, map keys sorted), so the same
    # object in another key order is the same bytes (etcd3/store.go GuaranteedUpdate).
    body = event("e1")
    body["metadata"]["labels"] = {"b": "2", "a": "1"}
    created = api.post(ns_path("ns1"), body).json()
    assert list(created["metadata"]["labels"]) == ["a", "b"]
    revision = api.revision()
    meta = created["metadata"]
    reordered = created | {"metadata": {k: meta[k] for k in reversed(list(meta))}}
    reordered["metadata"]["labels"] = {"b": "2", "a": "1"}
    reply = api.put(E1, reordered)
    assert reply.code == 200
    assert reply.json() == created
    assert api.revision() == revision


def test_put_identity_mismatches(api: RestHarness) -> None:
    api.create("e1")
    reply = api.put(E1, event("other"))
    assert reply.code == 400
    assert reply.json() == status(
        400,
        "BadRequest",
        "the name of the object (other) does not match the name on the URL (e1)",
    )
    reply = api.put(E1, event("e1", "ns2"))
    assert reply.code == 400
    assert reply.json() == status(
        400,
        "BadRequest",
        "the namespace of the object (ns2) does not match the namespace on the request (ns1)",
    )
    body = event("e1")
    body["metadata"]["uid"] = "not-the-uid"
    stored = api.get(E1).json()["metadata"]["uid"]
    reply = api.put(E1, body)
    assert reply.code == 409
    assert reply.json() == status(
        409,
        "Conflict",
        'Operation cannot be fulfilled on events.events.k8s.io "e1": StorageError: invalid '
        "object, Code: 4, Key: /registry/events/ns1/e1, ResourceVersion: 0, "
        f"AdditionalErrorMsg: Precondition failed: UID in precondition: not-the-uid, UID in "
        f"object meta: {stored}",
        DETAILS,
    )


def test_put_of_immutable_fields_is_422(api: RestHarness) -> None:
    api.create("e1")
    reply = api.put(E1, event("e1", note="changed"))
    assert reply.code == 422
    assert reply.json() == invalid("e1", "message", 'Invalid value: "changed": field is immutable')
    # reason is checked twice upstream: two identical causes, one text.
    reply = api.put(E1, event("e1", reason="Other"))
    assert reply.json() == invalid(
        "e1",
        "reason",
        'Invalid value: "Other": field is immutable',
        ("reason", 'Invalid value: "Other": field is immutable'),
    )


def test_put_decoding_and_options(api: RestHarness) -> None:
    api.create("e1")
    reply = api.put(E1, b"{bad")
    assert reply.code == 400
    assert reply.json()["message"].startswith("couldn't get version/kind; json parse error")
    reply = api.put(E1 + "?fieldValidation=Strict", event("e1", x=1))
    assert reply.code == 400
    assert reply.json() == status(
        400,
        "BadRequest",
        'Event in version "v1" cannot be handled as a Event: strict decoding error: '
        'unknown field "x"',
    )
    reply = api.put(E1, event("e1", x=1))
    assert reply.code == 200
    assert reply.all("warning") == ['299 - "unknown field \\"x\\""']
    reply = api.put(E1 + "?dryRun=x", event("e1"))
    assert reply.code == 422
    assert reply.json()["message"] == (
        'UpdateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["x"]: '
        'supported values: "All"'
    )
    reply = api.put(E1, event("e1", kind="Pod"))
    assert reply.code == 400
    reply = api.put(E1, b"x", content_type="application/vnd.kubernetes.protobuf")
    assert (reply.code, reply.json()["message"]) == (
        400,
        "the object provided is unrecognized (must be of type Event): data too short (78)",
    )
    reply = api.put(E1, b"x", content_type="text/plain")
    assert reply.code == 415


def test_put_dry_run(api: RestHarness) -> None:
    revision = api.revision()
    reply = api.put(E1 + "?dryRun=All", event("e1"))
    assert reply.code == 201
    assert api.revision() == revision
    assert api.get(E1).code == 404
    created = api.create("e1")
    body = dict(created)
    body["metadata"] = {**created["metadata"], "labels": {"dry": "run"}}
    reply = api.put(E1 + "?dryRun=All", body)
    assert reply.code == 200
    assert reply.json()["metadata"]["labels"] == {"dry": "run"}
    assert api.get(E1).json() == created


def test_put_create_is_validated_like_post(api: RestHarness) -> None:
    reply = api.put(E1, event("e1", type="Odd"))
    assert reply.code == 422
    assert (
        reply.json()["message"]
        == 'Event "e1" is invalid: type: Invalid value: "": has invalid value: Odd'
    )


# --- PATCH -----------------------------------------------------------------------------------


def test_merge_json_and_strategic_patches(api: RestHarness) -> None:
    api.create("e1")
    reply = api.patch(E1, {"metadata": {"labels": {"m": "1"}}}, MERGE)
    assert reply.code == 200
    assert reply.json()["metadata"]["labels"] == {"app": "x", "m": "1"}
    reply = api.patch(E1, [{"op": "add", "path": "/metadata/labels/j", "value": "2"}], JSON_PATCH)
    assert reply.code == 200
    assert reply.json()["metadata"]["labels"] == {"app": "x", "m": "1", "j": "2"}
    reply = api.patch(E1, {"metadata": {"labels": {"m": None}}}, STRATEGIC)
    assert reply.code == 200
    patched = reply.json()
    assert patched["metadata"]["labels"] == {"app": "x", "j": "2"}
    assert api.get(E1).json() == patched
    fields = patched["metadata"]["managedFields"][0]["fieldsV1"]["f:metadata"]["f:labels"]
    assert set(fields) == {".", "f:app", "f:j"}


def test_patch_with_a_stale_resource_version_conflicts(api: RestHarness) -> None:
    created = api.create("e1")
    api.patch(E1, {"metadata": {"labels": {"a": "1"}}}, MERGE)
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"]}}
    reply = api.patch(E1, stale | {"series": None}, MERGE)
    assert reply.code == 409
    assert reply.json() == status(409, "Conflict", MODIFIED, DETAILS)


def test_patch_errors(api: RestHarness) -> None:
    api.create("e1")
    reply = api.patch(E1, {"note": "changed"}, MERGE)
    assert reply.code == 422
    assert reply.json() == invalid("e1", "message", 'Invalid value: "changed": field is immutable')
    reply = api.patch(E1, b"{bad", MERGE)
    assert reply.code == 400
    assert reply.json() == status(
        400,
        "BadRequest",
        "error decoding patch: invalid character 'b' looking for beginning of object key string",
    )
    reply = api.patch(E1, [{"op": "test", "path": "/note", "value": "zz"}], JSON_PATCH)
    assert reply.code == 422
    assert reply.json() == status(
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
        {},
    )
    reply = api.patch(E1, {"metadata": {"name": "other"}}, MERGE)
    assert reply.code == 400
    assert reply.json()["message"] == (
        "the name of the object (other) does not match the name on the URL (e1)"
    )
    reply = api.patch(ns_path("ns1", "missing"), {"a": 1}, MERGE)
    assert reply.code == 404
    assert reply.json() == status(
        404,
        "NotFound",
        'events.events.k8s.io "missing" not found',
        {"name": "missing", "group": "events.k8s.io", "kind": "events"},
    )


def test_too_many_json_patch_operations_is_413(api: RestHarness) -> None:
    api.create("e1")
    ops = [{"op": "add", "path": "/metadata/labels/x", "value": "1"}] * 10001
    reply = api.patch(E1, ops, JSON_PATCH)
    assert reply.code == 413
    assert reply.json() == status(
        413,
        "RequestEntityTooLarge",
        "Request entity too large: The allowed maximum operations in a JSON patch is 10000, "
        "got 10001",
    )


def test_unsupported_patch_media_types(api: RestHarness) -> None:
    api.create("e1")
    reply = api.patch(E1, {"a": 1}, "text/plain")
    assert reply.code == 415
    assert reply.json() == status(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
    # Passes the router's match but is not exactly a patch type: the handler's 415.
    reply = api.patch(E1, {"a": 1}, "application/merge-patch+json, text/plain")
    assert reply.code == 415
    assert reply.json() == status(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json-patch+json, application/merge-patch+json, "
        "application/strategic-merge-patch+json, application/apply-patch+yaml",
    )
    reply = api.request("PATCH", E1, b"{}")
    assert reply.code == 415


def test_field_validation_on_patches(api: RestHarness) -> None:
    api.create("e1")
    reply = api.patch(E1, {"foo": 1}, MERGE)
    assert reply.code == 200
    assert reply.all("warning") == ['299 - "unknown field \\"foo\\""']
    reply = api.patch(E1 + "?fieldValidation=Strict", {"foo": 1}, MERGE)
    assert reply.code == 422
    message = reply.json()["message"]
    assert message.startswith(' "" is invalid: patch: Invalid value: "{')
    assert message.endswith('": strict decoding error: unknown field "foo"')
    assert api.patch(E1 + "?fieldValidation=Ignore", {"foo": 1}, MERGE).all("warning") == []


def test_server_side_apply_create_conflict_and_force(api: RestHarness) -> None:
    path = ns_path("ns1", "a1")
    reply = api.patch(path + "?fieldManager=m1", event("a1"), APPLY)
    assert reply.code == 201
    created = reply.json()
    entry = created["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"]) == ("m1", "Apply")
    assert created["metadata"]["creationTimestamp"] == "2026-11-22T10:00:00Z"
    change = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "a1", "labels": {"app": "other"}},
    }
    # An applier is named alone (sigs.k8s.io/structured-merge-diff via k8s.io/apimachinery
    # pkg/util/managedfields/internal/conflict.go printManager); an updater with its version.
    reply = api.patch(path + "?fieldManager=m2", change, APPLY)
    assert reply.code == 409
    assert reply.json() == status(
        409,
        "Conflict",
        'Apply failed with 1 conflict: conflict with "m1": .metadata.labels.app',
        {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": 'conflict with "m1"',
                    "field": ".metadata.labels.app",
                }
            ]
        },
    )
    reply = api.patch(path + "?fieldManager=m2&force=true", change, APPLY)
    assert reply.code == 200
    forced = reply.json()
    assert forced["metadata"]["labels"] == {"app": "other"}
    assert [e["manager"] for e in forced["metadata"]["managedFields"]] == ["m1", "m2"]
    api.patch(path + "?fieldManager=kubectl-edit", {"metadata": {"labels": {"e": "1"}}}, MERGE)
    take = {**change, "metadata": {"name": "a1", "labels": {"e": "2"}}}
    reply = api.patch(path + "?fieldManager=m2", take, APPLY)
    assert reply.code == 409
    assert reply.json()["message"] == (
        'Apply failed with 1 conflict: conflict with "kubectl-edit" using events.k8s.io/v1: '
        ".metadata.labels.e"
    )
    # Re-applying the same configuration changes nothing.
    revision = api.revision()
    assert api.patch(path + "?fieldManager=m2", change, APPLY).code == 200
    assert api.revision() == revision


def test_apply_options_and_uid_on_missing_object(api: RestHarness) -> None:
    reply = api.patch(ns_path("ns1", "a1"), event("a1"), APPLY)
    assert reply.code == 422
    assert reply.json() == status(
        422,
        "Invalid",
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
        "for apply patch",
        {
            "group": "meta.k8s.io",
            "kind": "PatchOptions",
            "causes": [
                {
                    "reason": "FieldValueRequired",
                    "message": "Required value: is required for apply patch",
                    "field": "fieldManager",
                }
            ],
        },
    )
    api.create("e1")
    reply = api.patch(E1 + "?force=true", {"a": 1}, MERGE)
    assert reply.code == 422
    assert reply.json()["message"] == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for '
        "non-apply patch"
    )
    body = event("a3")
    body["metadata"]["uid"] = "u-1"
    reply = api.patch(ns_path("ns1", "a3") + "?fieldManager=m", body, APPLY)
    assert reply.code == 409
    assert reply.json() == status(
        409,
        "Conflict",
        'Operation cannot be fulfilled on events.events.k8s.io "a3": uid mismatch: the '
        "provided object specified uid u-1, and no existing object was found",
        {"name": "a3", "group": "events.k8s.io", "kind": "events"},
    )
    invalid_apply = event("a4", type="Odd")
    reply = api.patch(ns_path("ns1", "a4") + "?fieldManager=m", invalid_apply, APPLY)
    assert reply.code == 422


def test_patch_dry_run_stores_nothing(api: RestHarness) -> None:
    created = api.create("e1")
    revision = api.revision()
    reply = api.patch(E1 + "?dryRun=All", {"metadata": {"labels": {"dry": "1"}}}, MERGE)
    assert reply.code == 200
    assert reply.json()["metadata"]["labels"]["dry"] == "1"
    assert reply.json()["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert api.revision() == revision
    assert api.get(E1).json() == created
    reply = api.patch(ns_path("ns1", "a9") + "?dryRun=All&fieldManager=m", event("a9"), APPLY)
    assert reply.code == 201
    assert api.get(ns_path("ns1", "a9")).code == 404


def test_patch_answers_in_the_requested_form(api: RestHarness) -> None:
    api.create("e1")
    reply = api.patch(E1, {"metadata": {"labels": {"y": "1"}}}, MERGE, accept="application/yaml")
    assert reply.content_type == "application/yaml"
    assert b"\n    y: '1'\n" in reply.body
