"""A small structural schema model, the shape structured-merge-diff and the strict decoder need.

kube-apiserver describes every type twice: as Go structs (``json`` tags with ``omitempty``,
``patchStrategy``/``patchMergeKey`` tags that strategic merge patch reads) and as OpenAPI (the
``x-kubernetes-list-type``, ``x-kubernetes-list-map-keys``, ``x-kubernetes-map-type``
extensions that server-side apply reads through ``sigs.k8s.io/structured-merge-diff``'s
``schema`` package). This module keeps both views in one value so that the patch, apply,
managed-fields and strict-decoding code can walk plain ``dict`` objects by type:

* :class:`Scalar` -- a leaf (string, integer, boolean, number, time);
* :class:`Untyped` -- an opaque JSON value (``FieldsV1``, ``RawExtension``): always a leaf and
  never looked into by strict decoding (Go decodes it with a custom ``UnmarshalJSON``);
* :class:`Struct` -- named fields (SMD's "map with fields"), granular unless ``atomic``
  (``x-kubernetes-map-type: atomic``);
* :class:`Map` -- string keys, one value type (``labels``), granular unless ``atomic``;
* :class:`List` -- ``atomic`` (replaced whole), ``set`` (a set of scalars, like
  ``finalizers``) or ``map`` (items identified by ``keys``, like ``ownerReferences``).

Written by hand rather than generated: there are five types here, and the Go facts that the
OpenAPI document does not carry (``omitempty``, pointers) are needed too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

import attrs

ScalarKind = Literal["string", "integer", "boolean", "number", "time", "any"]
ListType = Literal["atomic", "set", "map"]


@attrs.frozen
class Scalar:
    """A leaf value. ``time`` is a string on the wire that Go decodes with ``UnmarshalJSON``."""

    kind: ScalarKind = "string"


@attrs.frozen
class Untyped:
    """Opaque JSON kept as is (``metav1.FieldsV1``): a leaf for apply, skipped by strict checks."""

    name: str = "untyped"


@attrs.frozen
class Field:
    """One struct field with the Go facts needed to reproduce Go's encoding of it.

    ``omitempty`` is the ``json`` tag option; ``pointer`` says the Go field is a pointer (so
    only ``nil`` is omitted, ``false``/``0`` survive). Value structs are never omitted by Go's
    encoders, ``omitempty`` or not.
    """

    name: str
    type: Type
    omitempty: bool = True
    pointer: bool = False


@attrs.frozen
class Struct:
    """A Go struct: named fields, merged field by field unless ``atomic``."""

    name: str
    fields: tuple[Field, ...]
    atomic: bool = False
    _index: dict[str, Field] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_index", {f.name: f for f in self.fields})

    def field(self, name: str) -> Field | None:
        return self._index.get(name)

    def field_names(self) -> frozenset[str]:
        return frozenset(self._index)


@attrs.frozen
class Map:
    """``map[string]T``: every key is an item, merged item by item unless ``atomic``."""

    values: Type
    atomic: bool = False


@attrs.frozen
class List:
    """A list and how apply and strategic merge patch treat it.

    ``list_type``/``keys`` are SMD's view (``x-kubernetes-list-type``/``-list-map-keys``);
    ``patch_strategy``/``patch_merge_key`` are the Go struct tags strategic merge patch reads.
    """

    items: Type
    list_type: ListType = "atomic"
    keys: tuple[str, ...] = ()
    patch_strategy: str = ""
    patch_merge_key: str = ""


Type = Scalar | Untyped | Struct | Map | List

STRING = Scalar("string")
INTEGER = Scalar("integer")
BOOLEAN = Scalar("boolean")
NUMBER = Scalar("number")
TIME = Scalar("time")
UNTYPED = Untyped()

PathElement = str | int
"""A step of a walk: a field name or map key (``str``) or a list index (``int``)."""


def is_atomic(typ: Type) -> bool:
    """Whether apply treats the value as one leaf (SMD's ``ElementRelationship == Atomic``)."""
    if isinstance(typ, Scalar | Untyped):
        return True
    if isinstance(typ, Struct | Map):
        return typ.atomic
    return typ.list_type == "atomic"


def known_fields(typ: Struct) -> frozenset[str]:
    """The JSON names a strict decoder accepts in an object of this struct type."""
    return typ.field_names()


def child_type(typ: Type, key: PathElement) -> Type | None:
    """The type of ``key`` inside a value of ``typ`` (None if the schema does not know it)."""
    if isinstance(typ, Struct) and isinstance(key, str):
        found = typ.field(key)
        return found.type if found is not None else None
    if isinstance(typ, Map) and isinstance(key, str):
        return typ.values
    if isinstance(typ, List) and isinstance(key, int):
        return typ.items
    return None


def walk(
    value: Any,
    typ: Type,
    visit: Callable[[tuple[PathElement, ...], Any, Type], bool | None],
    path: tuple[PathElement, ...] = (),
) -> None:
    """Call ``visit(path, value, type)`` for ``value`` and, depth first, everything below it.

    ``visit`` returning ``False`` stops the descent below that node. Keys the schema does not
    know are skipped (they have no type).
    """
    if visit(path, value, typ) is False:
        return
    if isinstance(typ, Struct) and isinstance(value, dict):
        for key, item in value.items():
            found = typ.field(key)
            if found is not None:
                walk(item, found.type, visit, (*path, key))
    elif isinstance(typ, Map) and isinstance(value, dict):
        for key, item in value.items():
            walk(item, typ.values, visit, (*path, key))
    elif isinstance(typ, List) and isinstance(value, list):
        for index, item in enumerate(value):
            walk(item, typ.items, visit, (*path, index))


def iter_paths(value: Any, typ: Type) -> Iterator[tuple[PathElement, ...]]:
    """Every path that :func:`walk` visits, in walk order."""
    found: list[tuple[PathElement, ...]] = []

    def visit(path: tuple[PathElement, ...], _value: Any, _type: Type) -> None:
        found.append(path)

    walk(value, typ, visit)
    return iter(found)


def format_path(path: Sequence[PathElement]) -> str:
    """``metadata.labels`` / ``spec.containers[0].name``: the way Go's strict decoder words it."""
    out: list[str] = []
    for element in path:
        if isinstance(element, int):
            out.append(f"[{element}]")
        elif out:
            out.append("." + element)
        else:
            out.append(element)
    return "".join(out)


# --- Go struct round trip ---------------------------------------------------------------------


def _zero(typ: Type) -> Any:
    if isinstance(typ, Scalar):
        return {"string": "", "integer": 0, "boolean": False, "number": 0}.get(typ.kind)
    return None


def _is_empty(value: Any) -> bool:
    """Go's ``isEmptyValue`` for the JSON kinds (false, 0, "", empty map/slice, nil)."""
    if value is None:
        return True
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value == 0
    if isinstance(value, str | list | dict):
        return len(value) == 0
    return False


def go_normalize(value: Any, typ: Type) -> Any:
    """``value`` as Go would hand it to structured-merge-diff after decoding into the struct.

    kube's field manager converts typed Go objects, not the request JSON: unknown keys are
    gone, ``omitempty`` zero values are left out, value structs are always there (``{}`` at
    least), times that are zero are ``null``, non-``omitempty`` scalars that are missing are
    their zero value. Following ``sigs.k8s.io/structured-merge-diff`` ``value/reflectcache.go``
    (``CanOmit``/``isZero``).
    """
    if isinstance(typ, Struct):
        if not isinstance(value, dict):
            value = {}
        out: dict[str, Any] = {}
        for field in typ.fields:
            item = value.get(field.name)
            ftype = field.type
            if field.pointer:
                if item is None:
                    continue
                out[field.name] = go_normalize(item, ftype)
            elif isinstance(ftype, Struct):
                out[field.name] = go_normalize(item, ftype)
            elif isinstance(ftype, Scalar) and ftype.kind == "time":
                out[field.name] = item if item else None
            elif field.omitempty:
                if _is_empty(item):
                    continue
                out[field.name] = go_normalize(item, ftype)
            else:
                out[field.name] = go_normalize(item, ftype) if item is not None else _zero(ftype)
        return out
    if isinstance(typ, Map):
        if not isinstance(value, dict):
            return value
        return {k: go_normalize(v, typ.values) for k, v in value.items()}
    if isinstance(typ, List):
        if not isinstance(value, list):
            return value
        return [go_normalize(v, typ.items) for v in value]
    return value
