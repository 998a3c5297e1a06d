"""Generic name/label/ObjectMeta validation with apimachinery's exact wording."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.apimachinery import errors
from apiserver.apimachinery import validation as v

LABEL_REGEX = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "
    "must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex "
    "used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_REGEX = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
QNAME_BODY = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


def texts(errs: list[errors.FieldError]) -> list[str]:
    return [str(e) for e in errs]


# --- primitives ------------------------------------------------------------------------------


def test_dns1123_label() -> None:
    assert v.is_dns1123_label("my-name") == []
    assert v.is_dns1123_label("a.b") == ["must not contain dots"]
    assert v.is_dns1123_label("-a") == [LABEL_REGEX]
    assert v.is_dns1123_label("a" * 64) == ["must be no more than 63 characters"]
    assert v.is_dns1123_label("A" * 64) == ["must be no more than 63 characters", LABEL_REGEX]


def test_dns1123_subdomain() -> None:
    assert v.is_dns1123_subdomain("example.com") == []
    assert v.is_dns1123_subdomain("") == [SUBDOMAIN_REGEX]
    assert v.is_dns1123_subdomain("a\n") == [SUBDOMAIN_REGEX]  # Go's $ is end of text
    assert v.is_dns1123_subdomain("a" * 254) == ["must be no more than 253 characters"]


def test_qualified_name() -> None:
    assert v.is_qualified_name("example.com/MyName") == []
    assert v.is_qualified_name("My_Name.1") == []
    assert v.is_qualified_name("/x") == ["prefix part must be non-empty"]
    assert v.is_qualified_name("Ex.com/x") == ["prefix part " + SUBDOMAIN_REGEX]
    assert v.is_qualified_name("x/") == ["name part must be non-empty", "name part " + QNAME_BODY]
    assert v.is_qualified_name("a/b/c") == [
        "a qualified name "
        + QNAME_BODY
        + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    ]
    assert v.is_qualified_name("x" * 64) == ["name part must be no more than 63 characters"]


def test_label_value() -> None:
    assert v.is_valid_label_value("") == []
    assert v.is_valid_label_value("ok_1.a-b") == []
    assert v.is_valid_label_value("-x") == [
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
        "'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ]


@pytest.mark.parametrize(
    ("name", "prefix", "msgs"),
    [
        ("ok", False, []),
        (".", False, ["may not be '.'"]),
        ("..", False, ["may not be '..'"]),
        ("a/b%c", False, ["may not contain '/'", "may not contain '%'"]),
        ("..", True, []),
        ("a%", True, ["may not contain '%'"]),
    ],
)
def test_path_segment_names(name: str, prefix: bool, msgs: list[str]) -> None:
    assert v.validate_path_segment_name(name, prefix) == msgs


def test_generate_name_prefix_masks_trailing_dash() -> None:
    assert v.name_is_dns_subdomain("web-", True) == []
    assert v.name_is_dns_subdomain("web-", False) == [SUBDOMAIN_REGEX]
    # Go drops the last two bytes: the character before the dash is not checked
    assert v.name_is_dns_subdomain("web.-", True) == []
    assert v.name_is_dns_subdomain("-", True) == [SUBDOMAIN_REGEX]
    assert v.name_is_dns_label("a-", True) == []


def test_go_json_escapes_like_go() -> None:
    assert v.go_json({"A": "<&>", "B": "\u2028\x01\n", "C": None, "D": [1, True]}) == (
        '{"A":"\\u003c\\u0026\\u003e","B":"\\u2028\\u0001\\n","C":null,"D":[1,true]}'
    )


def test_go_time_string() -> None:
    assert v.go_time_string("2024-01-02T03:04:05Z") == "2024-01-02 03:04:05 +0000 UTC"
    assert v.go_time_string("2024-01-02T03:04:05.120000Z") == "2024-01-02 03:04:05.12 +0000 UTC"
    assert v.go_time_string(None) == "0001-01-01 00:00:00 +0000 UTC"


# --- ValidateObjectMeta ------------------------------------------------------------------------


def meta_errs(meta: dict[str, Any], namespaced: bool = True) -> list[str]:
    base: dict[str, Any] = {"name": "n", "namespace": "ns"}
    base.update(meta)
    base = {k: val for k, val in base.items() if val is not None}
    return texts(
        v.validate_object_meta(base, namespaced=namespaced, name_fn=v.name_is_dns_subdomain)
    )


def test_valid_meta() -> None:
    assert meta_errs({}) == []


def test_names() -> None:
    assert meta_errs({"name": None}) == [
        "metadata.name: Required value: name or generateName is required"
    ]
    assert meta_errs({"generateName": "Bad-", "name": "Bad-x"}) == [
        f'metadata.generateName: Invalid value: "Bad-": {SUBDOMAIN_REGEX}',
        f'metadata.name: Invalid value: "Bad-x": {SUBDOMAIN_REGEX}',
    ]
    long = "a" * 254
    assert meta_errs({"name": long}) == [
        f'metadata.name: Invalid value: "{long}": must be no more than 253 characters'
    ]


def test_namespace() -> None:
    assert meta_errs({"namespace": None}) == ["metadata.namespace: Required value"]
    assert meta_errs({"namespace": "a.b"}) == [
        'metadata.namespace: Invalid value: "a.b": must not contain dots'
    ]
    assert meta_errs({"namespace": None}, namespaced=False) == []
    assert meta_errs({}, namespaced=False) == [
        "metadata.namespace: Forbidden: not allowed on this type"
    ]


def test_generation_labels_annotations() -> None:
    assert meta_errs({"generation": -1}) == [
        "metadata.generation: Invalid value: -1: must be greater than or equal to 0"
    ]
    assert meta_errs({"labels": {"a/b/c": "v"}}) == [
        'metadata.labels: Invalid value: "a/b/c": a qualified name '
        + QNAME_BODY
        + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
    ]
    # annotation keys are checked lower-cased, the error shows the key as given
    assert meta_errs({"annotations": {"Example.COM/Key": "v"}}) == []
    assert meta_errs({"annotations": {"Bad_/k": "v"}}) == [
        f'metadata.annotations: Invalid value: "Bad_/k": prefix part {SUBDOMAIN_REGEX}'
    ]


def test_annotation_size_limit_counts_keys_and_values_in_bytes() -> None:
    ok = {"k": "x" * (262144 - 1)}
    assert meta_errs({"annotations": ok}) == []
    errs = v.validate_object_meta(
        {"name": "n", "namespace": "ns", "annotations": {"k": "é" * 131072}},
        namespaced=True,
        name_fn=v.name_is_dns_subdomain,
    )
    assert texts(errs) == ["metadata.annotations: Too long: may not be more than 262144 bytes"]
    assert errs[0].cause() == {
        "reason": "FieldValueTooLong",
        "message": "Too long: may not be more than 262144 bytes",
        "field": "metadata.annotations",
    }


def test_owner_references() -> None:
    assert meta_errs({"ownerReferences": [{}]}) == [
        'metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
        'metadata.ownerReferences.kind: Invalid value: "": must not be empty',
        'metadata.ownerReferences.name: Invalid value: "": must not be empty',
        'metadata.ownerReferences.uid: Invalid value: "": must not be empty',
    ]
    assert meta_errs(
        {"ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]}
    ) == [
        'metadata.ownerReferences: Invalid value: {"apiVersion":"v1","kind":"Event","name":"e",'
        '"uid":"u"}: /v1, Kind=Event is disallowed from being an owner'
    ]
    # events.k8s.io Events may own things
    assert (
        meta_errs(
            {
                "ownerReferences": [
                    {"apiVersion": "events.k8s.io/v1", "kind": "Event", "name": "e", "uid": "u"}
                ]
            }
        )
        == []
    )
    assert meta_errs(
        {"ownerReferences": [{"apiVersion": "a/b/c", "kind": "K", "name": "n", "uid": "u"}]}
    ) == ['metadata.ownerReferences.apiVersion: Invalid value: "a/b/c": version must not be empty']


def test_only_one_controller() -> None:
    refs = [
        {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "1", "controller": True},
        {"apiVersion": "v1", "kind": "Pod", "name": "b", "uid": "2", "controller": True},
    ]
    assert meta_errs({"ownerReferences": refs}) == [
        'metadata.ownerReferences: Invalid value: [{"apiVersion":"v1","kind":"Pod","name":"a",'
        '"uid":"1","controller":true},{"apiVersion":"v1","kind":"Pod","name":"b","uid":"2",'
        '"controller":true}]: Only one reference can have Controller set to true. Found "true" '
        "in references for Pod/a and Pod/b"
    ]


def test_finalizers() -> None:
    assert meta_errs({"finalizers": ["example.com/ok", "orphan"]}) == []
    assert meta_errs({"finalizers": ["a/b/c"]})[0].startswith(
        'metadata.finalizers: Invalid value: "a/b/c": a qualified name'
    )
    assert meta_errs({"finalizers": ["orphan", "foregroundDeletion"]}) == [
        'metadata.finalizers: Invalid value: ["orphan","foregroundDeletion"]: finalizer orphan '
        "and foregroundDeletion cannot be both set"
    ]


def test_managed_fields() -> None:
    entries = [
        {"manager": "m", "operation": "Update", "fieldsType": "FieldsV1"},
        {"manager": "bad\x07", "operation": "Patch", "fieldsType": "FieldsV2"},
        {"manager": "x" * 129, "operation": "Apply", "subresource": "s" * 257},
    ]
    assert meta_errs({"managedFields": entries}) == [
        'metadata.managedFields[1].operation: Invalid value: "Patch": must be `Apply` or `Update`',
        'metadata.managedFields[1].fieldsType: Invalid value: "FieldsV2": must be `FieldsV1`',
        'metadata.managedFields[1].manager: Invalid value: "bad\\a": invalid character U+0007 '
        "(at position 3)",
        "metadata.managedFields[2].manager: Too long: may not be more than 128 bytes",
        "metadata.managedFields[2].subresource: Too long: may not be more than 256 bytes",
    ]
    assert meta_errs({"managedFields": [{}]}) == [
        'metadata.managedFields[0].operation: Invalid value: "": must be `Apply` or `Update`'
    ]


# --- ValidateObjectMetaUpdate -------------------------------------------------------------------


def update_errs(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
    return texts(v.validate_object_meta_update(new, old))


def test_update_unchanged_is_valid() -> None:
    meta = {"name": "n", "namespace": "ns", "uid": "u", "creationTimestamp": "2024-01-01T00:00:00Z"}
    assert update_errs(dict(meta), dict(meta)) == []


def test_update_immutable_fields() -> None:
    old = {
        "name": "n",
        "namespace": "ns",
        "uid": "u",
        "generation": 3,
        "creationTimestamp": "2024-01-01T00:00:00Z",
    }
    new = {
        "name": "m",
        "namespace": "other",
        "uid": "v",
        "generation": 2,
        "deletionTimestamp": "2024-01-02T00:00:00Z",
        "deletionGracePeriodSeconds": 30,
    }
    assert update_errs(new, old) == [
        "metadata.generation: Invalid value: 2: must not be decremented",
        'metadata.name: Invalid value: "m": field is immutable',
        'metadata.namespace: Invalid value: "other": field is immutable',
        'metadata.uid: Invalid value: "v": field is immutable',
        "metadata.creationTimestamp: Invalid value: 0001-01-01 00:00:00 +0000 UTC: field is "
        "immutable",
        "metadata.deletionTimestamp: Invalid value: 2024-01-02 00:00:00 +0000 UTC: field is "
        "immutable",
        "metadata.deletionGracePeriodSeconds: Invalid value: 30: field is immutable",
    ]
    # clearing pointers prints Go's quoted "null"
    assert update_errs(
        {"name": "n"},
        {"name": "n", "deletionTimestamp": "2024-01-02T00:00:00Z", "deletionGracePeriodSeconds": 0},
    ) == [
        'metadata.deletionTimestamp: Invalid value: "null": field is immutable',
        'metadata.deletionGracePeriodSeconds: Invalid value: "null": field is immutable',
    ]


def test_no_new_finalizers_while_deleting() -> None:
    old = {"name": "n", "deletionTimestamp": "2024-01-02T00:00:00Z", "finalizers": ["a.io/x"]}
    new = dict(old, finalizers=["a.io/x", "b.io/z", "b.io/y"])
    assert update_errs(new, old) == [
        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being "
        'deleted, found new finalizers []string{"b.io/y", "b.io/z"}'
    ]
    # removing finalizers is fine, and adding is fine when not deleting
    assert update_errs(dict(old, finalizers=[]), old) == []
    old.pop("deletionTimestamp")
    new.pop("deletionTimestamp")
    assert update_errs(new, old) == []


def test_update_revalidates_labels_annotations_owners_managed_fields() -> None:
    old: dict[str, Any] = {"name": "n"}
    new = {
        "name": "n",
        "labels": {"k": "-"},
        "annotations": {"a/b/c": ""},
        "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "x"}],
        "managedFields": [{"operation": "X"}],
    }
    fields = [e.split(":")[0] for e in update_errs(new, old)]
    assert fields == [
        "metadata.labels",
        "metadata.annotations",
        "metadata.ownerReferences.uid",
        "metadata.managedFields[0].operation",
    ]
