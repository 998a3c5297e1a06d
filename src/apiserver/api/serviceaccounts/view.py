"""The ServiceAccount type: schema, JSON conversion, validation, selectors and table.

References (``k8s.io/kubernetes``): ``k8s.io/api/core/v1/types.go`` (``ServiceAccount``: field
order and ``omitempty``), ``pkg/apis/core/validation/validation.go``
(``ValidateServiceAccount``: ObjectMeta with DNS-subdomain names; ``ValidateServiceAccountUpdate``
adds ``ValidateObjectMetaUpdate``), ``pkg/registry/core/serviceaccount/strategy.go``
(namespaced, no status; field selectors only ``metadata.name`` and ``metadata.namespace``) and
``pkg/printers/internalversion/printers.go`` (``printServiceAccount``: NAME, SECRETS, AGE).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.api.events import convert
from apiserver.api.events.printer import translate_timestamp_since
from apiserver.api.events.schema import OBJECT_META
from apiserver.api.events.views import EventView
from apiserver.apimachinery import errors
from apiserver.apimachinery.schema import BOOLEAN, STRING, Field, List, Struct
from apiserver.apimachinery.validation import (
    name_is_dns_subdomain,
    validate_object_meta,
    validate_object_meta_update,
)
from apiserver.registry.store import StorageConversion, type_meta_conversion

Obj = dict[str, Any]

KIND = "ServiceAccount"
API_VERSION = "v1"
RESOURCE = "serviceaccounts"
GR = errors.GroupResource("", RESOURCE)

# --- schema (strict decoding, patches, managed fields) ---------------------------------------

_OBJECT_REFERENCE = Struct(
    "ObjectReference",
    tuple(
        Field(name, STRING)
        for name in (
            "kind",
            "namespace",
            "name",
            "uid",
            "apiVersion",
            "resourceVersion",
            "fieldPath",
        )
    ),
)
_LOCAL_OBJECT_REFERENCE = Struct("LocalObjectReference", (Field("name", STRING),))
SCHEMA = Struct(
    KIND,
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field("metadata", OBJECT_META),
        Field(
            "secrets",
            List(
                _OBJECT_REFERENCE, "map", ("name",), patch_strategy="merge", patch_merge_key="name"
            ),
        ),
        Field("imagePullSecrets", List(_LOCAL_OBJECT_REFERENCE, "atomic")),
        Field("automountServiceAccountToken", BOOLEAN, pointer=True),
    ),
)

# --- JSON <-> internal (the core/v1 shape without type meta) ------------------------------------

_GO = convert.StructType(
    KIND,
    "v1.ServiceAccount",
    (
        convert.FieldType("kind", convert.STRING_TYPE),
        convert.FieldType("apiVersion", convert.STRING_TYPE),
        convert.FieldType("metadata", convert.OBJECT_META_TYPE),
        convert.FieldType(
            "secrets",
            convert.ListType(convert.OBJECT_REFERENCE_TYPE, "[]v1.ObjectReference"),
        ),
        convert.FieldType(
            "imagePullSecrets",
            convert.ListType(
                convert.StructType(
                    "LocalObjectReference",
                    "v1.LocalObjectReference",
                    (convert.FieldType("name", convert.STRING_TYPE),),
                ),
                "[]v1.LocalObjectReference",
            ),
        ),
        convert.FieldType("automountServiceAccountToken", convert.PointerType(convert.BoolType())),
    ),
)
_NAMES: dict[str, str | None] = {
    f.name: (None if f.name in ("kind", "apiVersion") else f.name) for f in _GO.fields
}
_TO_WIRE = convert.struct_encoder(_GO, _NAMES, {"kind": KIND, "apiVersion": API_VERSION})
_TO_ITEM = convert.struct_encoder(_GO, _NAMES, {})
_ORDER = ("metadata", "secrets", "imagePullSecrets", "automountServiceAccountToken")


def to_wire(internal: Obj, type_meta: bool = True) -> Obj:
    """core/v1 JSON in Go's field order (``type_meta=False`` for list items)."""
    encoded: Obj = (_TO_WIRE if type_meta else _TO_ITEM)(internal)
    return encoded


def to_internal(obj: Mapping[str, Any]) -> Obj:
    """A parsed body as the internal form; raises ``convert.DecodeError`` as Go's decoder
    would fail, and drops unknown fields."""
    decoded = convert.decode_struct(obj, _GO)
    out: Obj = {"metadata": decoded.get("metadata") or {}}
    for key in _ORDER[1:]:
        if key in decoded:
            out[key] = decoded[key]
    return out


def _from_stored(stored: Obj) -> Obj:
    """The stored shape (JSON, YAML or protobuf) as the internal form, canonical metadata."""
    stored.pop("kind", None)
    stored.pop("apiVersion", None)
    out: Obj = {"metadata": convert.canonical_object_meta(stored.get("metadata") or {})}
    for key in _ORDER[1:]:
        value = stored.get(key)
        if value is not None and (value or key == "automountServiceAccountToken"):
            out[key] = value
    return out


STORAGE = StorageConversion(type_meta_conversion(KIND, API_VERSION).to_stored, _from_stored)

# --- validation --------------------------------------------------------------------------------


def validate_create(obj: Obj) -> list[errors.FieldError]:
    """``ValidateServiceAccount``."""
    return validate_object_meta(
        obj.get("metadata") or {}, namespaced=True, name_fn=name_is_dns_subdomain
    )


def validate_update(new: Obj, old: Obj) -> list[errors.FieldError]:
    """``ValidateServiceAccountUpdate``."""
    return [
        *validate_object_meta_update(new.get("metadata") or {}, old.get("metadata") or {}),
        *validate_create(new),
    ]


# --- selectors and table -----------------------------------------------------------------------


def _labels(obj: Obj) -> Mapping[str, str]:
    labels: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


def _fields(obj: Obj) -> Mapping[str, str]:
    """``DefaultClusterScopedAttr`` plus the namespace (``generic.ObjectMetaFieldsSet``)."""
    meta = obj.get("metadata") or {}
    return {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "")}


def _field_label(label: str, value: str) -> tuple[str, str]:
    if label in ("metadata.name", "metadata.namespace"):
        return label, value
    raise errors.bad_request(f"field label not supported: {label}")


def _column(name: str, description: str, fmt: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "type": "string",
        "format": fmt,
        "description": description,
        "priority": 0,
    }


COLUMNS = (
    _column(
        "Name",
        "Name must be unique within a namespace. Is required when creating resources, although "
        "some resources may allow a client to request the generation of an appropriate name "
        "automatically. Name is primarily intended for creation idempotence and configuration "
        "definition. Cannot be updated. More info: "
        "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names",
        "name",
    ),
    _column(
        "Secrets",
        "Secrets is a list of the secrets in the same namespace that pods running using this "
        "ServiceAccount are allowed to use. Pods are only limited to this list if this service "
        'account has a "kubernetes.io/enforce-mountable-secrets" annotation set to "true". This '
        "field should not be used to find auto-generated service account token secrets for use "
        "outside of pods. Instead, tokens can be requested directly using the TokenRequest API, "
        "or service account token secrets can be manually created. More info: "
        "https://kubernetes.io/docs/concepts/configuration/secret",
    ),
    _column(
        "Age",
        "CreationTimestamp is a timestamp representing the server time when this object was "
        "created. It is not guaranteed to be set in happens-before order across separate "
        "operations. Clients may not set this value. It is represented in RFC3339 form and is "
        "in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/"
        "api-conventions.md#metadata",
    ),
)


def _row(obj: Obj, now: float) -> list[Any]:
    meta = obj.get("metadata") or {}
    return [
        meta.get("name", ""),
        len(obj.get("secrets") or ()),
        translate_timestamp_since(meta.get("creationTimestamp"), now),
    ]


SERVICE_ACCOUNTS = EventView(
    group="",
    version="v1",
    base="/api/v1/",
    schema=SCHEMA,
    to_wire=to_wire,
    to_internal=to_internal,
    kind=KIND,
    resource=RESOURCE,
    validate_create=validate_create,
    validate_update=validate_update,
    labels_of=_labels,
    fields_of=_fields,
    field_label=_field_label,
    table_row=_row,
    columns=COLUMNS,
    versions={},
)
"""core/v1 ServiceAccounts under ``/api/v1/``."""

__all__ = ["GR", "SERVICE_ACCOUNTS", "STORAGE", "to_internal", "to_wire"]
