"""Field sets, fieldsV1 and Update entries of metadata.managedFields."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from apiserver.api.events.schema import EVENT_CORE_V1, EVENT_V1
from apiserver.apimachinery.managedfields import (
    FieldSet,
    compare,
    decode_managed_fields,
    encode_managed_fields,
    field_pe,
    field_set,
    freeze,
    manager_identifier,
    merge_values,
    path_to_string,
    print_manager,
    remove_items,
    to_field_set,
    update_managed_fields,
)

V1 = "events.k8s.io/v1"
T0 = "2024-08-29T14:37:04Z"
T1 = "2024-08-29T14:38:00Z"
T2 = "2024-08-29T14:39:00Z"


def scheduler_event() -> dict[str, Any]:
    """What client-go's events recorder sends for kube-scheduler (empty structs included)."""
    return {
        "kind": "Event",
        "apiVersion": V1,
        "metadata": {"name": "p.17f", "namespace": "default", "creationTimestamp": None},
        "eventTime": "2024-08-29T14:37:04.123456Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-node1",
        "action": "Scheduling",
        "reason": "Scheduled",
        "regarding": {
            "kind": "Pod",
            "namespace": "default",
            "name": "p",
            "uid": "0b5e",
            "apiVersion": "v1",
            "resourceVersion": "12",
        },
        "note": "Successfully assigned default/p to node1",
        "type": "Normal",
        "deprecatedSource": {},
        "deprecatedFirstTimestamp": None,
        "deprecatedLastTimestamp": None,
    }


def update(
    live: dict[str, Any] | None, new: dict[str, Any], manager: str, now: str
) -> dict[str, Any]:
    """Store ``new`` the way the registry would: with its managed fields."""
    result = copy.deepcopy(new)
    entries = update_managed_fields(live, result, manager, "Update", V1, now, EVENT_V1)
    if entries:
        result["metadata"]["managedFields"] = entries
    else:
        result["metadata"].pop("managedFields", None)
    return result


def fields_of(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    for entry in obj["metadata"].get("managedFields", []):
        if entry["manager"] == manager:
            fields: dict[str, Any] = entry["fieldsV1"]
            return fields
    raise KeyError(manager)


def test_created_event_matches_the_real_entry_exactly() -> None:
    entries = update_managed_fields(
        None, scheduler_event(), "kube-scheduler", "Update", V1, T0, EVENT_V1
    )
    expected = (
        '[{"manager":"kube-scheduler","operation":"Update","apiVersion":"events.k8s.io/v1",'
        '"time":"2024-08-29T14:37:04Z","fieldsType":"FieldsV1","fieldsV1":{"f:action":{},'
        '"f:eventTime":{},"f:note":{},"f:reason":{},"f:regarding":{},'
        '"f:reportingController":{},"f:reportingInstance":{},"f:type":{}}}]'
    )
    assert json.dumps(entries, separators=(",", ":")) == expected


def test_core_v1_kubelet_event() -> None:
    event = {
        "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "name": "p"},
        "reason": "Pulled",
        "message": "pulled",
        "source": {"component": "kubelet", "host": "n1"},
        "firstTimestamp": "2024-01-01T00:00:00Z",
        "lastTimestamp": "2024-01-01T00:00:00Z",
        "count": 1,
        "type": "Normal",
        "reportingComponent": "",
        "reportingInstance": "",
    }
    entries = update_managed_fields(None, event, "kubelet", "Update", "v1", T0, EVENT_CORE_V1)
    assert entries[0]["apiVersion"] == "v1"
    assert entries[0]["fieldsV1"] == {
        "f:count": {},
        "f:firstTimestamp": {},
        "f:involvedObject": {},
        "f:lastTimestamp": {},
        "f:message": {},
        "f:reason": {},
        "f:source": {"f:component": {}, "f:host": {}},
        "f:type": {},
    }


def test_added_maps_and_lists_mark_themselves() -> None:
    event = scheduler_event()
    event["metadata"]["labels"] = {"app": "x"}
    event["metadata"]["finalizers"] = ["a.io/f"]
    event["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u-1"}
    ]
    event["series"] = {"count": 2, "lastObservedTime": "2024-08-29T14:37:04.000000Z"}
    fields = update_managed_fields(None, event, "m", "Update", V1, T0, EVENT_V1)[0]["fieldsV1"]
    assert fields["f:metadata"] == {
        "f:finalizers": {".": {}, 'v:"a.io/f"': {}},
        "f:labels": {".": {}, "f:app": {}},
        "f:ownerReferences": {".": {}, 'k:{"uid":"u-1"}': {}},
    }
    assert fields["f:series"] == {".": {}, "f:count": {}, "f:lastObservedTime": {}}
    assert list(fields) == sorted(fields)


def test_metadata_identity_fields_are_never_owned() -> None:
    live = update(None, scheduler_event(), "kube-scheduler", T0)
    new = copy.deepcopy(live)
    new["metadata"].update(
        {"resourceVersion": "9", "uid": "x", "generation": 3, "creationTimestamp": T1}
    )
    new["metadata"].pop("managedFields")
    assert (
        update(live, new, "other", T1)["metadata"]["managedFields"]
        == live["metadata"]["managedFields"]
    )


def test_other_manager_takes_changed_field() -> None:
    live = update(None, scheduler_event(), "kube-scheduler", T0)
    new = copy.deepcopy(live)
    new["series"] = {"count": 2, "lastObservedTime": "2024-08-29T14:38:00.000000Z"}
    new["note"] = "changed"
    stored = update(live, new, "kubectl-edit", T1)
    assert "f:note" not in fields_of(stored, "kube-scheduler")
    assert fields_of(stored, "kubectl-edit") == {
        "f:note": {},
        "f:series": {".": {}, "f:count": {}, "f:lastObservedTime": {}},
    }
    managers = [(e["manager"], e["time"]) for e in stored["metadata"]["managedFields"]]
    assert managers == [("kube-scheduler", T0), ("kubectl-edit", T1)]


def test_same_manager_merges_into_its_entry_and_time_moves_only_on_gain() -> None:
    live = update(None, scheduler_event(), "kube-scheduler", T0)
    new = copy.deepcopy(live)
    new["metadata"]["labels"] = {"a": "1"}
    stored = update(live, new, "kube-scheduler", T1)
    (entry,) = stored["metadata"]["managedFields"]
    assert entry["time"] == T1
    assert "f:note" in entry["fieldsV1"] and "f:metadata" in entry["fieldsV1"]
    again = update(stored, copy.deepcopy(stored), "kube-scheduler", T2)
    assert again["metadata"]["managedFields"] == stored["metadata"]["managedFields"]


def test_noop_update_by_new_manager_adds_no_entry() -> None:
    live = update(None, scheduler_event(), "kube-scheduler", T0)
    stored = update(live, copy.deepcopy(live), "someone", T1)
    assert [e["manager"] for e in stored["metadata"]["managedFields"]] == ["kube-scheduler"]


def test_removed_fields_leave_every_manager_and_empty_entries_go() -> None:
    live = update(None, scheduler_event(), "kube-scheduler", T0)
    with_label = copy.deepcopy(live)
    with_label["metadata"]["labels"] = {"a": "1"}
    live = update(live, with_label, "labeller", T1)
    without = copy.deepcopy(live)
    del without["metadata"]["labels"]
    stored = update(live, without, "remover", T2)
    assert [e["manager"] for e in stored["metadata"]["managedFields"]] == ["kube-scheduler"]


def test_managed_fields_in_the_request() -> None:
    live = update(None, scheduler_event(), "kube-scheduler", T0)
    new = copy.deepcopy(live)
    new["metadata"]["managedFields"] = []
    reset = update_managed_fields(live, new, "x", "Update", V1, T1, EVENT_V1)
    assert reset == []
    new["metadata"]["managedFields"] = [{}]
    assert update_managed_fields(live, new, "x", "Update", V1, T1, EVENT_V1) == []
    new["metadata"]["managedFields"] = [
        {
            "manager": "mine",
            "operation": "Update",
            "apiVersion": V1,
            "time": T0,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:note": {}},
        }
    ]
    assert [
        e["manager"] for e in update_managed_fields(live, new, "x", "Update", V1, T1, EVENT_V1)
    ] == ["mine"]
    new["metadata"]["managedFields"] = [{"manager": "bad", "operation": "Nope"}]
    kept = update_managed_fields(live, new, "x", "Update", V1, T1, EVENT_V1)
    assert kept == live["metadata"]["managedFields"]


def test_at_most_ten_update_managers() -> None:
    obj = update(None, scheduler_event(), "m00", "2024-01-01T00:00:00Z")
    for index in range(1, 12):
        new = copy.deepcopy(obj)
        new["metadata"].setdefault("labels", {})[f"l{index}"] = "x"
        obj = update(obj, new, f"m{index:02d}", f"2024-01-01T00:00:{index:02d}Z")
    managers = [e["manager"] for e in obj["metadata"]["managedFields"]]
    assert len(managers) == 10
    assert managers[0] == "ancient-changes"
    ancient = obj["metadata"]["managedFields"][0]["fieldsV1"]
    assert "f:note" in ancient and "f:l1" in ancient["f:metadata"]["f:labels"]
    assert "m00" not in managers and "m01" not in managers and "m02" not in managers


def test_entries_sort_apply_first_then_time_then_manager() -> None:
    raw = [
        {"manager": "b", "operation": "Update", "apiVersion": V1, "time": T0,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:note": {}}},
        {"manager": "a", "operation": "Update", "apiVersion": V1, "time": T0,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:type": {}}},
        {"manager": "z", "operation": "Update", "apiVersion": V1, "time": "2020-01-01T00:00:00Z",
         "fieldsType": "FieldsV1", "fieldsV1": {"f:reason": {}}},
        {"manager": "c", "operation": "Apply", "apiVersion": V1, "time": T1,
         "fieldsType": "FieldsV1", "fieldsV1": {"f:action": {}}},
    ]  # fmt: skip
    encoded = encode_managed_fields(decode_managed_fields(raw))
    assert [e["manager"] for e in encoded] == ["c", "z", "a", "b"]
    assert list(encoded[0]) == [
        "manager",
        "operation",
        "apiVersion",
        "time",
        "fieldsType",
        "fieldsV1",
    ]


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"operation": "Delete", "apiVersion": V1, "fieldsType": "FieldsV1"},
         "operation must be `Apply` or `Update`"),
        ({"operation": "Update", "fieldsType": "FieldsV1"}, "apiVersion must not be empty"),
        ({"operation": "Update", "apiVersion": V1}, "missing fieldsType in managed fields entry 0"),
        ({"operation": "Update", "apiVersion": V1, "fieldsType": "FieldsV2"},
         'invalid fieldsType "FieldsV2" in managed fields entry 0'),
    ],
)  # fmt: skip
def test_decode_errors(entry: dict[str, Any], error: str) -> None:
    with pytest.raises(ValueError, match=error.replace("`", ".")):
        decode_managed_fields([entry])


def test_manager_identifiers_and_printing() -> None:
    update_id = manager_identifier("kubectl", "Update", V1)
    assert update_id == '{"manager":"kubectl","operation":"Update","apiVersion":"events.k8s.io/v1"}'
    apply_id = manager_identifier("kubectl", "Apply", V1)
    assert apply_id == '{"manager":"kubectl","operation":"Apply"}'
    assert print_manager(update_id) == '"kubectl" using events.k8s.io/v1'
    assert print_manager(apply_id) == '"kubectl"'
    assert print_manager(manager_identifier("m", "Update", "v1", "status")) == (
        '"m" with subresource "status" using v1'
    )


# --- sets ------------------------------------------------------------------------------------


def test_fields_v1_round_trip_and_order() -> None:
    data = {
        "f:metadata": {
            "f:labels": {".": {}, "f:a": {}},
            "f:ownerReferences": {'k:{"uid":"1"}': {}, ".": {}},
        },
        "f:note": {},
        "f:finalizers": {'v:"x"': {}},
    }
    fields = FieldSet.from_fields_v1(data)
    out = fields.to_fields_v1()
    assert json.dumps(out) == json.dumps(
        {
            "f:finalizers": {'v:"x"': {}},
            "f:metadata": {
                "f:labels": {".": {}, "f:a": {}},
                "f:ownerReferences": {".": {}, 'k:{"uid":"1"}': {}},
            },
            "f:note": {},
        }
    )
    assert FieldSet.from_fields_v1(out) == fields


def test_path_strings_and_iteration_order() -> None:
    fields = FieldSet.from_fields_v1(
        {
            "f:metadata": {
                "f:ownerReferences": {'k:{"uid":"1"}': {}},
                "f:finalizers": {'v:"x"': {}},
            },
            "f:note": {},
            "f:a": {},
        }
    )
    assert [path_to_string(p) for p in fields.paths()] == [
        ".a",
        ".note",
        '.metadata.finalizers[="x"]',
        '.metadata.ownerReferences[uid="1"]',
    ]


def test_set_operations() -> None:
    a = FieldSet.from_fields_v1({"f:spec": {".": {}, "f:x": {}}, "f:n": {}})
    b = FieldSet.from_fields_v1({"f:spec": {}})
    assert a.difference(b).to_fields_v1() == {"f:n": {}, "f:spec": {"f:x": {}}}
    assert a.intersection(b).to_fields_v1() == {"f:spec": {}}
    assert b.union(FieldSet.from_fields_v1({"f:n": {}})).to_fields_v1() == {"f:n": {}, "f:spec": {}}
    assert FieldSet().empty() and not a.empty()
    assert a.has((field_pe("spec"), field_pe("x"))) and not a.has((field_pe("x"),))


def test_to_field_set_leaves() -> None:
    obj = {
        "metadata": {"labels": {"a": "1"}, "annotations": {}, "finalizers": ["f"]},
        "regarding": {"kind": "Pod"},
        "related": None,
        "deprecatedSource": {},
        "note": "x",
    }
    assert to_field_set(obj, EVENT_V1).to_fields_v1() == {
        "f:deprecatedSource": {},
        "f:metadata": {
            "f:annotations": {},
            "f:finalizers": {'v:"f"': {}},
            "f:labels": {"f:a": {}},
        },
        "f:note": {},
        "f:regarding": {},
        "f:related": {},
    }
    assert field_set({"apiVersion": "x", "kind": "y", "metadata": {"name": "n"}}, EVENT_V1).empty()


def test_compare() -> None:
    old = {"note": "a", "type": "Normal", "metadata": {"labels": {"x": "1"}}}
    new = {"note": "b", "reason": "R", "metadata": {"labels": {"x": "1", "y": "2"}}}
    result = compare(old, new, EVENT_V1)
    assert result.modified.to_fields_v1() == {"f:note": {}}
    assert result.added.to_fields_v1() == {"f:metadata": {"f:labels": {"f:y": {}}}, "f:reason": {}}
    assert result.removed.to_fields_v1() == {"f:type": {}}


def test_merge_values_list_order() -> None:
    merged = merge_values(
        {"metadata": {"finalizers": ["a", "b", "c"]}},
        {"metadata": {"finalizers": ["c", "a"]}},
        EVENT_V1,
    )
    assert merged == {"metadata": {"finalizers": ["b", "c", "a"]}}
    merged = merge_values(
        {"metadata": {"finalizers": ["a", "b"]}}, {"metadata": {"finalizers": ["x", "b"]}}, EVENT_V1
    )
    assert merged == {"metadata": {"finalizers": ["a", "x", "b"]}}


def test_merge_values_atomic_and_granular() -> None:
    merged = merge_values(
        {"regarding": {"kind": "Pod", "name": "p"}, "metadata": {"labels": {"a": "1"}}},
        {"regarding": {"name": "q"}, "metadata": {"labels": {"b": "2"}}},
        EVENT_V1,
    )
    assert merged == {"regarding": {"name": "q"}, "metadata": {"labels": {"a": "1", "b": "2"}}}


def test_remove_items() -> None:
    obj = {"metadata": {"labels": {"a": "1"}, "finalizers": ["f", "g"]}, "note": "x"}
    gone = FieldSet.of(
        [
            (field_pe("note"),),
            (field_pe("metadata"), field_pe("labels"), field_pe("a")),
            (field_pe("metadata"), field_pe("finalizers"), (2, freeze("f"))),
        ]
    )
    assert remove_items(obj, gone, EVENT_V1) == {"metadata": {"labels": None, "finalizers": ["g"]}}


def test_versions_are_compared_in_their_own_shape() -> None:
    core_entry = {
        "manager": "kubelet",
        "operation": "Update",
        "apiVersion": "v1",
        "time": T0,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:message": {}, "f:reason": {}},
    }
    live = scheduler_event()
    live["metadata"]["managedFields"] = [core_entry]
    new = copy.deepcopy(live)
    new["note"] = "other"

    def to_core(obj: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in obj.items() if k not in ("note", "regarding")}
        if "note" in obj:
            out["message"] = obj["note"]
        return out

    views = {"v1": (EVENT_CORE_V1, to_core), V1: (EVENT_V1, lambda o: o)}
    entries = update_managed_fields(live, new, "editor", "Update", V1, T1, EVENT_V1, views=views)
    by_manager = {e["manager"]: e["fieldsV1"] for e in entries}
    assert by_manager == {"kubelet": {"f:reason": {}}, "editor": {"f:note": {}}}
    old_version = dict(core_entry, apiVersion="events.k8s.io/v1beta1")
    live["metadata"]["managedFields"] = [old_version]
    new["metadata"]["managedFields"] = [old_version]
    entries = update_managed_fields(live, new, "editor", "Update", V1, T1, EVENT_V1, views=views)
    assert [e["manager"] for e in entries] == ["editor"]
