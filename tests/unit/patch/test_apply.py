"""Server-side apply and the Patcher that runs one PATCH request."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from apiserver.api.events.schema import EVENT_V1
from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.managedfields import update_managed_fields
from apiserver.apimachinery.patch import Patcher
from apiserver.apimachinery.patch.apply import (
    apply,
    decode_apply_patch,
    strict_apply_error,
    strict_apply_problem,
)

V1 = "events.k8s.io/v1"
T0 = "2024-01-01T00:00:00Z"
T1 = "2024-01-01T00:01:00Z"
T2 = "2024-01-01T00:02:00Z"
T3 = "2024-01-01T00:03:00Z"


def config(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": V1,
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": "default", "labels": {"a": "1"}},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "reportingController": "ctl",
        "reportingInstance": "ctl-1",
        "action": "Act",
        "reason": "Why",
        "note": "hello",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
    }
    for key, value in changes.items():
        if value is None:
            base.pop(key, None)
        else:
            base[key] = value
    return base


def do_apply(live: dict[str, Any] | None, cfg: dict[str, Any], manager: str, now: str,
             force: bool = False) -> dict[str, Any]:  # fmt: skip
    return apply(live, cfg, manager, V1, force, now, EVENT_V1)


def entries(obj: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = obj["metadata"].get("managedFields", [])
    return found


def by_manager(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["manager"]: e for e in entries(obj)}


def edit(live: dict[str, Any], manager: str, now: str, **changes: Any) -> dict[str, Any]:
    new = copy.deepcopy(live)
    new.update(changes)
    new["metadata"]["managedFields"] = update_managed_fields(
        live, new, manager, "Update", V1, now, EVENT_V1
    )
    return new


def test_apply_creates() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    assert obj["note"] == "hello" and obj["metadata"]["labels"] == {"a": "1"}
    assert entries(obj) == [
        {
            "manager": "mgr1",
            "operation": "Apply",
            "apiVersion": V1,
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:action": {},
                "f:eventTime": {},
                "f:metadata": {"f:labels": {"f:a": {}}},
                "f:note": {},
                "f:reason": {},
                "f:regarding": {},
                "f:reportingController": {},
                "f:reportingInstance": {},
                "f:type": {},
            },
        }
    ]


def test_reapply_same_config_changes_nothing() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    again = do_apply(obj, config(), "mgr1", T1)
    assert again == obj


def test_second_applier_with_same_values_shares_ownership_without_time() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    shared = do_apply(obj, config(metadata={"name": "e1"}, note="hello"), "mgr2", T1)
    managers = by_manager(shared)
    assert managers["mgr1"]["time"] == T0
    assert "time" not in managers["mgr2"]
    assert set(managers["mgr2"]["fieldsV1"]) >= {"f:note", "f:regarding"}


def test_conflict_with_updater() -> None:
    obj = edit(do_apply(None, config(), "mgr1", T0), "kubectl-edit", T1, note="changed")
    assert by_manager(obj)["kubectl-edit"]["fieldsV1"] == {"f:note": {}}
    with pytest.raises(StatusError) as caught:
        do_apply(obj, config(), "mgr1", T2)
    body = json.loads(caught.value.response().body)
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "kubectl-edit" using '
        "events.k8s.io/v1: .note",
        "reason": "Conflict",
        "details": {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": 'conflict with "kubectl-edit" using events.k8s.io/v1',
                    "field": ".note",
                }
            ]
        },
        "code": 409,
    }


def test_conflicts_with_several_managers() -> None:
    obj = edit(do_apply(None, config(), "mgr1", T0), "editor", T1, note="n", type="Warning")
    with pytest.raises(StatusError) as caught:
        do_apply(obj, config(action="Other", reason="Else"), "mgr2", T2)
    assert caught.value.message == (
        "Apply failed with 4 conflicts: "
        'conflicts with "editor" using events.k8s.io/v1:\n- .note\n- .type\n'
        'conflicts with "mgr1":\n- .action\n- .reason'
    )
    details = caught.value.details or {}
    assert [c["field"] for c in details["causes"]] == [
        ".note",
        ".type",
        ".action",
        ".reason",
    ]


def test_force_takes_ownership() -> None:
    obj = edit(do_apply(None, config(), "mgr1", T0), "kubectl-edit", T1, note="changed")
    forced = do_apply(obj, config(), "mgr1", T2, force=True)
    assert forced["note"] == "hello"
    managers = by_manager(forced)
    assert "kubectl-edit" not in managers
    assert managers["mgr1"]["time"] == T2 and "f:note" in managers["mgr1"]["fieldsV1"]


def test_force_leaves_other_fields_of_the_loser() -> None:
    obj = edit(do_apply(None, config(), "mgr1", T0), "ed", T1, note="changed", action="Edited")
    forced = do_apply(obj, config(action="Edited"), "mgr1", T2, force=True)
    assert by_manager(forced)["ed"]["fieldsV1"] == {"f:action": {}}


def test_field_left_out_is_removed() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    cfg = config(note=None)
    del cfg["metadata"]["labels"]
    smaller = do_apply(obj, cfg, "mgr1", T1)
    assert "note" not in smaller and "labels" not in smaller["metadata"]
    assert smaller["metadata"]["name"] == "e1"
    assert "f:note" not in by_manager(smaller)["mgr1"]["fieldsV1"]
    assert by_manager(smaller)["mgr1"]["time"] == T1


def test_field_left_out_but_owned_by_another_manager_stays() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    obj = do_apply(obj, {"apiVersion": V1, "kind": "Event", "metadata": {"name": "e1"},
                         "note": "hello"}, "mgr2", T1)  # fmt: skip
    smaller = do_apply(obj, config(note=None), "mgr1", T2)
    assert smaller["note"] == "hello"
    assert by_manager(smaller)["mgr2"]["fieldsV1"] == {"f:note": {}}


def test_field_left_out_but_updated_by_someone_stays() -> None:
    obj = edit(do_apply(None, config(), "mgr1", T0), "ed", T1, metadata={
        "name": "e1", "namespace": "default", "labels": {"a": "1", "b": "2"}})  # fmt: skip
    cfg = config()
    cfg["metadata"]["labels"] = {}
    after = do_apply(obj, cfg, "mgr1", T2)
    assert after["metadata"]["labels"] == {"b": "2"}


def test_granular_map_items_and_keyed_lists_merge() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    owners = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"}]
    obj = edit(obj, "gc", T1, metadata=dict(obj["metadata"], ownerReferences=owners))
    cfg = config()
    cfg["metadata"]["labels"] = {"a": "1", "c": "3"}
    cfg["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "q", "uid": "u2"}
    ]
    merged = do_apply(obj, cfg, "mgr1", T2)
    assert merged["metadata"]["labels"] == {"a": "1", "c": "3"}
    assert [o["uid"] for o in merged["metadata"]["ownerReferences"]] == ["u1", "u2"]
    mgr1 = by_manager(merged)["mgr1"]["fieldsV1"]["f:metadata"]
    assert mgr1["f:ownerReferences"] == {'k:{"uid":"u2"}': {}}


def test_atomic_regarding_is_replaced_whole() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    after = do_apply(obj, config(regarding={"name": "q"}), "mgr1", T1)
    assert after["regarding"] == {"name": "q"}


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [
        ("v1", "Event", "invalid object type: /v1, Kind=Event"),
        (V1, "Pod", "invalid object type: events.k8s.io/v1, Kind=Pod"),
        (None, None, "invalid object type: /, Kind="),
        ("a/b/c", "Event", "invalid object type: /, Kind=Event"),
    ],
)
def test_kind_must_match(api_version: str | None, kind: str | None, message: str) -> None:
    with pytest.raises(StatusError) as caught:
        do_apply(None, config(apiVersion=api_version, kind=kind), "m", T0)
    assert (caught.value.code, caught.value.message) == (400, message)


def test_managed_fields_in_config_refused() -> None:
    cfg = config()
    cfg["metadata"]["managedFields"] = []
    with pytest.raises(StatusError) as caught:
        do_apply(None, cfg, "m", T0)
    assert (caught.value.code, caught.value.message) == (400, "metadata.managedFields must be nil")


def test_unknown_field_is_500() -> None:
    cfg = config(foo=1)
    cfg["metadata"]["labelz"] = {}
    with pytest.raises(StatusError) as caught:
        do_apply(None, cfg, "m", T0)
    error = caught.value
    assert (error.code, error.reason, error.details) == (500, "", None)
    assert error.message == (
        "failed to create typed patch object (default/e1; events.k8s.io/v1, Kind=Event): "
        "errors:\n  .foo: field not declared in schema\n"
        "  .metadata.labelz: field not declared in schema"
    )


def test_duplicate_list_keys_in_config_are_500() -> None:
    cfg = config()
    cfg["metadata"]["finalizers"] = ["a", "a"]
    with pytest.raises(StatusError) as caught:
        do_apply(None, cfg, "m", T0)
    assert caught.value.message.endswith('.metadata.finalizers: duplicate entries for key [="a"]')


def test_noop_apply_keeps_live_and_time() -> None:
    obj = do_apply(None, config(), "mgr1", T0)
    assert do_apply(obj, config(), "mgr1", T3)["metadata"]["managedFields"][0]["time"] == T0


# --- decoding ----------------------------------------------------------------------------------


def test_decode_yaml_keeps_timestamps_as_strings() -> None:
    raw = (
        b"apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: e\n"
        b"eventTime: 2024-01-01T00:00:00.000000Z\ndeprecatedCount: 3\n"
    )
    assert decode_apply_patch(raw) == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "deprecatedCount": 3,
    }
    assert decode_apply_patch(b'{"kind":"Event"}') == {"kind": "Event"}
    assert decode_apply_patch(b"") is None


def test_decode_errors() -> None:
    with pytest.raises(StatusError) as caught:
        decode_apply_patch(b"- a\n- b\n")
    assert caught.value.message == (
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
        "unmarshal array into Go value of type map[string]interface {}"
    )
    with pytest.raises(StatusError) as caught:
        decode_apply_patch(b"a: b: c\n")
    assert caught.value.code == 400
    assert caught.value.message.startswith(
        "error decoding YAML: error converting YAML to JSON: yaml: line 1: "
    )


def test_strict_yaml_problem() -> None:
    problem = strict_apply_problem(b"kind: Event\nnote: a\nnote: b\n")
    assert problem == (
        "error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 3: key "note" already set in map'
    )
    assert strict_apply_error(problem).message == "error strict decoding YAML: " + problem
    assert strict_apply_problem(b"kind: Event\n") is None


# --- Patcher ------------------------------------------------------------------------------------


def stored() -> dict[str, Any]:
    obj = config()
    obj["metadata"]["managedFields"] = update_managed_fields(
        None, obj, "creator", "Update", V1, T0, EVENT_V1
    )
    return obj


def test_patcher_merge_patch_tracks_managed_fields() -> None:
    patcher = Patcher(
        "merge", b'{"note":"new"}', manager="patcher", api_version=V1, schema=EVENT_V1
    )
    result = patcher.apply(stored(), T1)
    assert result["note"] == "new"
    managers = by_manager(result)
    assert managers["patcher"]["fieldsV1"] == {"f:note": {}}
    assert "f:note" not in managers["creator"]["fieldsV1"]
    assert patcher.warnings == []


def test_patcher_json_patch_strict_and_warn() -> None:
    raw = b'[{"op":"add","path":"/foo","value":1}]'
    warn = Patcher("json", raw, manager="m", api_version=V1, schema=EVENT_V1)
    result = warn.apply(stored(), T1)
    assert warn.warnings == ['unknown field "foo"']
    assert "foo" in result
    strict = Patcher("json", raw, manager="m", api_version=V1, schema=EVENT_V1, validation="Strict")
    with pytest.raises(StatusError) as caught:
        strict.apply({"note": "x", "metadata": {"name": "a"}}, T1)
    error = caught.value
    assert error.code == 422 and error.reason == "Invalid"
    assert error.message == (
        ' "" is invalid: patch: Invalid value: "{\\"foo\\":1,\\"metadata\\":{\\"name\\":\\"a\\"},'
        '\\"note\\":\\"x\\"}": strict decoding error: unknown field "foo"'
    )
    assert error.details == {
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": 'Invalid value: "{\\"foo\\":1,\\"metadata\\":{\\"name\\":\\"a\\"},'
                '\\"note\\":\\"x\\"}": strict decoding error: unknown field "foo"',
                "field": "patch",
            }
        ]
    }
    ignore = Patcher("json", raw, manager="m", api_version=V1, schema=EVENT_V1, validation="Ignore")
    ignore.apply(stored(), T1)
    assert ignore.warnings == []


def test_patcher_json_patch_body_problems_come_first() -> None:
    raw = b'[{"op":"add","path":"/foo","value":1,"x":2}]'
    patcher = Patcher(
        "application/json-patch+json", raw, manager="m", api_version=V1, schema=EVENT_V1
    )
    patcher.apply(stored(), T1)
    assert patcher.warnings == ['json patch unknown field "[0].x"', 'unknown field "foo"']


def test_patcher_strategic_strict_uses_go_map_text() -> None:
    raw = b'{"metadata":{"$setElementOrder/finalizers":["a"],"finalizers":["a"]},"zz":1}'
    patcher = Patcher(
        "strategic", raw, manager="m", api_version=V1, schema=EVENT_V1, validation="Strict"
    )
    with pytest.raises(StatusError) as caught:
        patcher.apply(stored(), T1)
    assert caught.value.message == (
        ' "" is invalid: patch: Invalid value: "map[metadata:map[] zz:1]": '
        'strict decoding error: unknown field "zz"'
    )


def test_patcher_result_must_be_an_object() -> None:
    patcher = Patcher("json", b'[{"op":"replace","path":"","value":[1]}]', manager="m",
                      api_version=V1, schema=EVENT_V1)  # fmt: skip
    with pytest.raises(StatusError) as caught:
        patcher.apply(stored(), T1)
    assert caught.value.code == 422
    assert 'Invalid value: "[1]": couldn\'t get version/kind; json parse error' in (
        caught.value.message
    )


def test_patcher_apply_and_strict_yaml() -> None:
    raw = (
        b"apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: e1\n  namespace: default\n"
        b"note: a\nnote: b\n"
    )
    warn = Patcher("apply", raw, manager="ssa", api_version=V1, schema=EVENT_V1, force=False)
    assert warn.uid_in_patch() == ""
    result = warn.apply(None, T0)
    assert result["note"] == "b"
    assert warn.warnings == [
        "error converting YAML to JSON: yaml: unmarshal errors:\n"
        '  line 7: key "note" already set in map'
    ]
    strict = Patcher(
        "apply", raw, manager="ssa", api_version=V1, schema=EVENT_V1, validation="Strict"
    )
    with pytest.raises(StatusError) as caught:
        strict.apply(None, T0)
    assert caught.value.message.startswith("error strict decoding YAML: error converting YAML")


def test_patcher_uid_in_patch() -> None:
    patcher = Patcher(
        "merge", b'{"metadata":{"uid":"abc"}}', manager="m", api_version=V1, schema=EVENT_V1
    )
    assert patcher.uid_in_patch() == "abc"
