"""Strategic merge patch on events (k8s.io/apimachinery pkg/util/strategicpatch semantics)."""

from __future__ import annotations

import random
from typing import Any

import pytest

from apiserver.api.events.schema import EVENT_V1
from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.patch.strategic import (
    _go_stable_sort,
    decode_strategic_patch,
    go_sprint,
    strategic_merge_patch,
)


def owner(uid: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": f"p{uid}", "uid": uid, **extra}


def event(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "e", "namespace": "ns", **meta},
        "regarding": {"kind": "Pod", "name": "p", "namespace": "ns"},
        "note": "hello",
        "type": "Normal",
    }


def smp(original: dict[str, Any], patch: dict[str, Any] | None) -> dict[str, Any]:
    return strategic_merge_patch(original, patch, EVENT_V1)[0]


def test_maps_merge_and_null_deletes() -> None:
    result = smp(
        event(labels={"a": "1", "b": "2"}), {"metadata": {"labels": {"a": None, "c": "3"}}}
    )
    assert result["metadata"]["labels"] == {"b": "2", "c": "3"}


def test_scalars_replace() -> None:
    assert smp(event(), {"note": "bye"})["note"] == "bye"


def test_new_values_lose_null_members() -> None:
    result = smp(event(), {"series": {"count": 2, "lastObservedTime": None}})
    assert result["series"] == {"count": 2}


def test_null_for_missing_key_is_ignored() -> None:
    assert "related" not in smp(event(), {"related": None})


def test_regarding_is_merged_key_by_key() -> None:
    result = smp(event(), {"regarding": {"name": "q"}})
    assert result["regarding"] == {"kind": "Pod", "name": "q", "namespace": "ns"}


def test_map_replace_and_delete_directives() -> None:
    result = smp(event(), {"regarding": {"$patch": "replace", "name": "q"}})
    assert result["regarding"] == {"name": "q"}
    result = smp(event(labels={"a": "1"}), {"metadata": {"labels": {"$patch": "delete"}}})
    assert result["metadata"]["labels"] == {}


def test_unknown_map_directive_is_500() -> None:
    with pytest.raises(StatusError) as caught:
        smp(event(), {"regarding": {"$patch": "merge", "name": "q"}})
    assert (caught.value.code, caught.value.reason) == (500, "")
    assert caught.value.message == "unknown patch type: merge in map: map[$patch:merge name:q]"


def test_finalizers_merge_new_items_first() -> None:
    result = smp(event(finalizers=["a", "b"]), {"metadata": {"finalizers": ["c"]}})
    assert result["metadata"]["finalizers"] == ["c", "a", "b"]


def test_finalizers_deduplicate_and_keep_order() -> None:
    result = smp(event(finalizers=["a", "b"]), {"metadata": {"finalizers": ["b", "a"]}})
    assert result["metadata"]["finalizers"] == ["b", "a"]
    result = smp(event(finalizers=["a", "b"]), {"metadata": {"finalizers": ["b"]}})
    assert result["metadata"]["finalizers"] == ["a", "b"]


def test_delete_from_primitive_list() -> None:
    result = smp(
        event(finalizers=["a", "b", "c"]),
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zzz"]}},
    )
    assert result["metadata"]["finalizers"] == ["a", "c"]
    result = smp(event(), {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}})
    assert "finalizers" not in result["metadata"]


def test_set_element_order_primitives() -> None:
    result = smp(
        event(finalizers=["a", "b"]),
        {"metadata": {"$setElementOrder/finalizers": ["b", "c", "a"], "finalizers": ["c"]}},
    )
    assert result["metadata"]["finalizers"] == ["b", "c", "a"]


def test_owner_references_merge_by_uid() -> None:
    result = smp(
        event(ownerReferences=[owner("1"), owner("2")]),
        {"metadata": {"ownerReferences": [{"uid": "2", "controller": True}, {"uid": "3"}]}},
    )
    assert result["metadata"]["ownerReferences"] == [
        owner("1"),
        owner("2", controller=True),
        {"uid": "3"},
    ]


def test_owner_reference_new_item_goes_first_without_order_directive() -> None:
    result = smp(
        event(ownerReferences=[owner("1")]), {"metadata": {"ownerReferences": [owner("9")]}}
    )
    assert [o["uid"] for o in result["metadata"]["ownerReferences"]] == ["9", "1"]


def test_owner_references_delete_item() -> None:
    result = smp(
        event(ownerReferences=[owner("1"), owner("2")]),
        {"metadata": {"ownerReferences": [{"uid": "1", "$patch": "delete"}]}},
    )
    assert result["metadata"]["ownerReferences"] == [owner("2")]


def test_owner_references_replace_list() -> None:
    result = smp(
        event(ownerReferences=[owner("1"), owner("2")]),
        {"metadata": {"ownerReferences": [{"$patch": "replace"}, owner("7")]}},
    )
    assert result["metadata"]["ownerReferences"] == [owner("7")]


def test_set_element_order_maps() -> None:
    result = smp(
        event(ownerReferences=[owner("1"), owner("2")]),
        {"metadata": {"$setElementOrder/ownerReferences": [{"uid": "2"}, {"uid": "1"}]}},
    )
    assert [o["uid"] for o in result["metadata"]["ownerReferences"]] == ["2", "1"]


def test_set_element_order_mismatch_is_500() -> None:
    with pytest.raises(StatusError) as caught:
        smp(
            event(finalizers=["a"]),
            {"metadata": {"$setElementOrder/finalizers": ["a"], "finalizers": ["b"]}},
        )
    assert caught.value.code == 500
    assert caught.value.message == (
        "The order in patch list:\n[b]\n doesn't match $setElementOrder list:\n[a]\n"
    )


def test_merge_directive_in_list_is_refused() -> None:
    with pytest.raises(StatusError) as caught:
        smp(
            event(ownerReferences=[owner("1")]),
            {"metadata": {"ownerReferences": [{"$patch": "merge", "uid": "1"}]}},
        )
    assert caught.value.message == "merging lists cannot yet be specified in the patch"


def test_missing_merge_key_is_500() -> None:
    with pytest.raises(StatusError) as caught:
        smp(event(ownerReferences=[owner("1")]), {"metadata": {"ownerReferences": [{"name": "x"}]}})
    assert (caught.value.code, caught.value.message) == (
        500,
        "map: map[name:x] does not contain declared merge key: uid",
    )


def test_mixed_element_types_are_500() -> None:
    with pytest.raises(StatusError) as caught:
        smp(event(finalizers=["a"]), {"metadata": {"finalizers": [["x"]]}})
    assert (caught.value.code, caught.value.message) == (
        500,
        "list element types are not identical: [[a] [[x]]]",
    )


def test_list_of_lists_is_422() -> None:
    with pytest.raises(StatusError) as caught:
        smp(event(finalizers=[["y"]]), {"metadata": {"finalizers": [["x"]]}})
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        422,
        "Invalid",
        "the server rejected our request due to an error in our request",
    )


def test_bad_directive_keys_are_400() -> None:
    with pytest.raises(StatusError) as caught:
        smp(event(finalizers=["a"]), {"metadata": {"$setElementOrder": ["a"]}})
    assert (caught.value.code, caught.value.message) == (
        400,
        "invalid patch format of setElementOrder list",
    )
    with pytest.raises(StatusError) as caught:
        smp(event(finalizers=["a"]), {"metadata": {"$deleteFromPrimitiveList": ["a"]}})
    assert caught.value.message == "invalid patch format of primitive list"


def test_set_element_order_must_be_a_list() -> None:
    with pytest.raises(StatusError) as caught:
        smp(event(finalizers=["a"]), {"metadata": {"$setElementOrder/finalizers": "a"}})
    assert caught.value.message == "expected a []interface {}, but received a string"


def test_retain_keys() -> None:
    result = smp(event(), {"regarding": {"$retainKeys": ["name"], "name": "q"}})
    assert result["regarding"] == {"name": "q"}
    with pytest.raises(StatusError) as caught:
        smp(event(), {"regarding": {"$retainKeys": ["kind"], "name": "q"}})
    assert (caught.value.code, caught.value.message) == (400, "invalid patch format of retainKeys")


def test_lists_without_merge_strategy_are_replaced() -> None:
    entry = {"manager": "a", "operation": "Update"}
    result = smp(event(managedFields=[entry]), {"metadata": {"managedFields": [{"manager": "b"}]}})
    assert result["metadata"]["managedFields"] == [{"manager": "b"}]


def test_type_change_replaces() -> None:
    assert smp(event(), {"regarding": "x"})["regarding"] == "x"


def test_null_patch_changes_nothing() -> None:
    original = event(labels={"a": "1"})
    assert smp(original, None) == original


def test_input_not_modified_and_consumed_patch_returned() -> None:
    original = event(finalizers=["a"])
    patch = {"metadata": {"$setElementOrder/finalizers": ["a", "b"], "finalizers": ["b"]}}
    result, consumed = strategic_merge_patch(original, patch, EVENT_V1)
    assert original["metadata"]["finalizers"] == ["a"]
    assert "$setElementOrder/finalizers" in patch["metadata"]
    assert result["metadata"]["finalizers"] == ["a", "b"]
    assert consumed == {"metadata": {}}


def test_decode() -> None:
    assert decode_strategic_patch(b'{"a":1,"a":2}') == ({"a": 2}, ['duplicate field "a"'])
    assert decode_strategic_patch(b"null") == (None, [])
    with pytest.raises(StatusError) as caught:
        decode_strategic_patch(b"[]")
    assert caught.value.message == (
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    )
    with pytest.raises(StatusError) as caught:
        decode_strategic_patch(b"{x}")
    assert (caught.value.code, caught.value.message) == (
        400,
        "invalid character 'x' looking for beginning of object key string",
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ({"b": [1, "x", None], "a": {"c": True}}, "map[a:map[c:true] b:[1 x <nil>]]"),
        (1.5, "1.5"),
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (123456789.0, "1.23456789e+08"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
    ],
)
def test_go_sprint(value: Any, text: str) -> None:
    assert go_sprint(value) == text


@pytest.mark.parametrize("size", [0, 1, 5, 20, 21, 47, 130])
def test_go_stable_sort_is_a_stable_sort_for_strict_orders(size: int) -> None:
    rng = random.Random(size)
    items = [(rng.randrange(10), index) for index in range(size)]
    data = list(items)
    _go_stable_sort(data, lambda a, b: a[0] < b[0])
    assert data == sorted(items, key=lambda item: item[0])
