"""Field sets and ``metadata.managedFields``, as kube-apiserver's field manager keeps them.

A port (written anew, same behaviour) of the parts of ``sigs.k8s.io/structured-merge-diff``
(``fieldpath``: sets and their ``FieldsV1`` JSON; ``typed``: ``ToFieldSet``, ``Compare``,
``Merge``, ``RemoveItems``; ``merge/update.go``: ``Updater.Update``) and of
``k8s.io/apimachinery`` ``pkg/util/managedfields/internal`` (manager identifiers, encoding and
sorting of entries, the strip-meta, managed-fields-updater and cap-managers steps) that an
Update (create, update, non-apply patch) needs. Server-side apply builds on this in
:mod:`apiserver.apimachinery.patch.apply`.

Objects are plain dicts of one API version; the schema (:mod:`apiserver.apimachinery.schema`)
says which values are atomic leaves (``regarding``, ``ownerReferences`` items) and how list
items are named (``k:{"uid":"..."}``, ``v:"finalizer"``).

Rules kept from kube:

* an Update entry gains what the request added or changed compared with the live object (the
  empty object on create), joined with the manager's previous entry for that apiVersion; every
  other manager loses the fields that changed or were removed; empty entries are dropped; the
  entry's ``time`` only moves when the manager gained something;
* ``apiVersion``, ``kind``, ``metadata`` itself and ``metadata.{name, namespace,
  creationTimestamp, selfLink, uid, clusterName, generation, managedFields, resourceVersion}``
  are never owned (``stripmeta.go``);
* ``managedFields`` sent in a request body: absent or ``null`` keeps the live entries, ``[]``
  or ``[{}]`` resets them, anything else that decodes replaces them (``fieldmanager.go``
  ``decodeLiveOrNew``); entries that do not decode leave the live ones;
* at most 10 Update entries; older ones fold into ``ancient-changes`` (``capmanagers.go``);
* entries are sorted Apply before Update, then by time, manager, apiVersion, subresource.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import attrs

from apiserver.apimachinery.schema import (
    List,
    Map,
    Scalar,
    Struct,
    Type,
    Untyped,
    go_normalize,
)
from apiserver.gocompat.jsonvalues import deep_copy
from apiserver.gocompat.marshal import go_float, go_marshal
from apiserver.gocompat.quote import go_quote

# --- values --------------------------------------------------------------------------------

Frozen = tuple[Any, ...]


def freeze(value: Any) -> Frozen:
    """A hashable, ordered stand-in for a JSON value (SMD's ``value.Compare`` order)."""
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (4, value)
    if isinstance(value, float):
        return (1, value)
    if isinstance(value, int):
        return (2, value)
    if isinstance(value, str):
        return (3, value)
    if isinstance(value, list):
        return (5, tuple(freeze(v) for v in value))
    if isinstance(value, dict):
        return (6, tuple(sorted((k, freeze(v)) for k, v in value.items())))
    raise TypeError(f"not a JSON value: {value!r}")


def thaw(frozen: Frozen) -> Any:
    rank = frozen[0]
    if rank == 0:
        return None
    if rank == 5:
        return [thaw(v) for v in frozen[1]]
    if rank == 6:
        return {k: thaw(v) for k, v in frozen[1]}
    return frozen[1]


def values_equal(a: Any, b: Any) -> bool:
    """SMD's ``value.Equals``: deep, numbers compared as numbers, booleans only with booleans."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if type(a) is not type(b):
        return False
    return bool(a == b)


def _value_string(value: Any) -> str:
    """SMD's ``value.ToString``: strings quoted, numbers bare, others JSON."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, int):
        return str(value)
    return go_marshal(value)


# --- path elements ---------------------------------------------------------------------------

PE = tuple[Any, ...]
"""A path element: ``(0, name)`` field, ``(1, ((key, frozen), ...))`` list-map key,
``(2, frozen)`` set value, ``(3, index)`` list index. Tuples sort like SMD's ``Compare``."""

Path = tuple[PE, ...]


def field_pe(name: str) -> PE:
    return (0, name)


def pe_to_string(pe: PE) -> str:
    """``.name``, ``[uid="x"]``, ``[="x"]``, ``[3]`` (SMD's ``PathElement.String``)."""
    kind = pe[0]
    if kind == 0:
        return "." + pe[1]
    if kind == 1:
        return "[" + ",".join(f"{k}={_value_string(thaw(v))}" for k, v in pe[1]) + "]"
    if kind == 2:
        return "[=" + _value_string(thaw(pe[1])) + "]"
    return f"[{pe[1]}]"


def path_to_string(path: Sequence[PE]) -> str:
    return "".join(pe_to_string(pe) for pe in path)


def _pe_key(pe: PE) -> str:
    """The ``FieldsV1`` key of a path element (``f:``, ``k:``, ``v:``, ``i:``)."""
    kind = pe[0]
    if kind == 0:
        return "f:" + pe[1]
    if kind == 1:
        return "k:" + go_marshal({k: thaw(v) for k, v in pe[1]}, sort_keys=False)
    if kind == 2:
        return "v:" + go_marshal(thaw(pe[1]))
    return f"i:{pe[1]}"


def _parse_pe(key: str) -> PE:
    prefix, sep, rest = key.partition(":")
    if not sep:
        raise ValueError(f"unable to parse path element {key!r}: missing colon")
    if prefix == "f":
        return (0, rest)
    if prefix == "k":
        fields = json.loads(rest)
        if not isinstance(fields, dict):
            raise ValueError(f"unable to parse path element {key!r}")
        return (1, tuple(sorted((k, freeze(v)) for k, v in fields.items())))
    if prefix == "v":
        return (2, freeze(json.loads(rest)))
    if prefix == "i":
        return (3, int(rest))
    raise ValueError(f"unknown path element type {prefix!r} in {key!r}")


# --- sets ----------------------------------------------------------------------------------------


class FieldSet:
    """A set of paths as a trie: ``members`` end here, ``children`` continue.

    ``fieldpath.Set``; its JSON form is the ``fieldsV1`` of a managedFields entry.
    """

    __slots__ = ("children", "members")

    def __init__(self) -> None:
        self.members: set[PE] = set()
        self.children: dict[PE, FieldSet] = {}

    @classmethod
    def of(cls, paths: Iterable[Sequence[PE]]) -> FieldSet:
        result = cls()
        for path in paths:
            result.insert(path)
        return result

    def insert(self, path: Sequence[PE]) -> None:
        if not path:
            return
        node = self
        for pe in path[:-1]:
            child = node.children.get(pe)
            if child is None:
                child = node.children[pe] = FieldSet()
            node = child
        node.members.add(path[-1])

    def has(self, path: Sequence[PE]) -> bool:
        if not path:
            return False
        node: FieldSet | None = self
        for pe in path[:-1]:
            assert node is not None
            node = node.children.get(pe)
            if node is None:
                return False
        assert node is not None
        return path[-1] in node.members

    def empty(self) -> bool:
        return not self.members and all(c.empty() for c in self.children.values())

    def copy(self) -> FieldSet:
        result = FieldSet()
        result.members = set(self.members)
        result.children = {pe: c.copy() for pe, c in self.children.items()}
        return result

    def union(self, other: FieldSet) -> FieldSet:
        result = FieldSet()
        result.members = self.members | other.members
        for pe in self.children.keys() | other.children.keys():
            mine, theirs = self.children.get(pe), other.children.get(pe)
            if mine is not None and theirs is not None:
                result.children[pe] = mine.union(theirs)
            else:
                result.children[pe] = (mine or theirs or FieldSet()).copy()
        return result

    def intersection(self, other: FieldSet) -> FieldSet:
        result = FieldSet()
        result.members = self.members & other.members
        for pe, mine in self.children.items():
            theirs = other.children.get(pe)
            if theirs is not None:
                both = mine.intersection(theirs)
                if not both.empty():
                    result.children[pe] = both
        return result

    def difference(self, other: FieldSet) -> FieldSet:
        """Members of ``other`` go; children of removed members stay (SMD ``Difference``)."""
        result = FieldSet()
        result.members = self.members - other.members
        for pe, mine in self.children.items():
            theirs = other.children.get(pe)
            rest = mine.difference(theirs) if theirs is not None else mine.copy()
            if not rest.empty():
                result.children[pe] = rest
        return result

    def with_prefix(self, pe: PE) -> FieldSet:
        return self.children.get(pe) or FieldSet()

    def paths(self) -> list[Path]:
        """Every member path: this level's members (sorted), then each child (sorted)."""
        out: list[Path] = []
        self._paths((), out)
        return out

    def _paths(self, prefix: Path, out: list[Path]) -> None:
        for pe in sorted(self.members):
            out.append((*prefix, pe))
        for pe in sorted(self.children):
            self.children[pe]._paths((*prefix, pe), out)

    def to_fields_v1(self) -> dict[str, Any]:
        """The ``fieldsV1`` object: ``.`` marks a member that also has children."""
        return self._emit(False)

    def _emit(self, include_self: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if include_self and (self.members or self.children):
            out["."] = {}
        keys = sorted(self.members | self.children.keys())
        for pe in keys:
            child = self.children.get(pe)
            if child is None:
                out[_pe_key(pe)] = {}
            else:
                out[_pe_key(pe)] = child._emit(pe in self.members)
        return out

    @classmethod
    def from_fields_v1(cls, data: Any) -> FieldSet:
        if not isinstance(data, dict):
            raise ValueError("FieldsV1 must be a JSON object")
        result, _ = cls._read(data)
        return result

    @classmethod
    def _read(cls, data: dict[str, Any]) -> tuple[FieldSet, bool]:
        result = cls()
        is_member = not data
        for key, value in data.items():
            if key == ".":
                is_member = True
                continue
            pe = _parse_pe(key)
            if not isinstance(value, dict):
                raise ValueError(f"expected an object for {key!r}")
            child, child_member = cls._read(value)
            if child_member:
                result.members.add(pe)
            if not child.empty():
                result.children[pe] = child
        return result, is_member

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSet):
            return NotImplemented
        return self.to_fields_v1() == other.to_fields_v1()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"FieldSet({json.dumps(self.to_fields_v1(), separators=(',', ':'))})"


# --- typed walks ---------------------------------------------------------------------------


class SchemaError(ValueError):
    """A value that does not fit the schema (SMD's ``ValidationErrors``)."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        super().__init__(self.text())

    def text(self) -> str:
        """``<path>: <message>``, or ``errors:\\n  ...`` for several (SMD's wording)."""
        lines = [f"{path}: {message}" for path, message in self.problems]
        if len(lines) == 1:
            return lines[0]
        return "\n".join(["errors:", *("  " + line for line in lines)])


def list_item_pe(typ: List, index: int, item: Any) -> PE:
    """How SMD names a list item: by its keys, by its value (sets), or by index (atomic)."""
    if typ.list_type == "atomic":
        return (3, index)
    if typ.keys:
        if not isinstance(item, dict):
            raise SchemaError([("", "associative list with keys may not have non-map elements")])
        fields = []
        for key in typ.keys:
            if key not in item:
                raise SchemaError(
                    [
                        (
                            "",
                            "associative list with keys has an element that omits key field "
                            f"{go_quote(key)} (and doesn't have default value)",
                        )
                    ]
                )
            fields.append((key, freeze(item[key])))
        return (1, tuple(sorted(fields)))
    if isinstance(item, dict):
        raise SchemaError([("", "associative list without keys has an element that's a map type")])
    if isinstance(item, list):
        raise SchemaError([("", "associative list without keys has an element that's a list type")])
    return (2, freeze(item))


def _child_type(typ: Type | None, pe: PE) -> Type | None:
    if typ is None:
        return None
    if pe[0] == 0:
        if isinstance(typ, Struct):
            found = typ.field(pe[1])
            return found.type if found is not None else None
        if isinstance(typ, Map):
            return typ.values
        return None
    if isinstance(typ, List):
        return typ.items
    return None


def _atomic(typ: Type) -> bool:
    if isinstance(typ, Scalar | Untyped):
        return True
    if isinstance(typ, Struct | Map):
        return typ.atomic
    return typ.list_type == "atomic"


def to_field_set(value: Any, typ: Type) -> FieldSet:
    """Every leaf and list item the value mentions (SMD's ``TypedValue.ToFieldSet``).

    Atomic structs, maps and lists are leaves; list items are members (``k:``/``v:``) as well
    as parents; struct fields holding ``null`` or ``{}`` are members.
    """
    result = FieldSet()
    _to_field_set(value, typ, (), result)
    return result


def _to_field_set(value: Any, typ: Type, path: Path, out: FieldSet) -> None:
    if isinstance(typ, Scalar | Untyped):
        out.insert(path)
        return
    if isinstance(typ, List):
        if typ.list_type == "atomic":
            out.insert(path)
            return
        if not isinstance(value, list):
            return
        for index, item in enumerate(value):
            pe = list_item_pe(typ, index, item)
            _to_field_set(item, typ.items, (*path, pe), out)
            out.insert((*path, pe))
        return
    if typ.atomic:
        out.insert(path)
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        if isinstance(typ, Struct):
            found = typ.field(key)
            if found is None:
                continue
            ctype: Type = found.type
        else:
            ctype = typ.values
        child_path = (*path, field_pe(key))
        _to_field_set(item, ctype, child_path, out)
        if item is None or (isinstance(item, dict) and not item) or isinstance(typ, Map):
            out.insert(child_path)


def ensure_named_fields_are_members(fields: FieldSet, typ: Type | None) -> FieldSet:
    """Add struct fields that only have children as members (SMD, used when pruning)."""
    result = FieldSet()
    result.members = set(fields.members)
    for pe, child in fields.children.items():
        if pe[0] == 0 and isinstance(typ, Struct) and typ.field(pe[1]) is not None:
            result.members.add(pe)
        ctype = _child_type(typ, pe) if pe[0] in (0, 1) else None
        result.children[pe] = ensure_named_fields_are_members(child, ctype)
    return result


_ABSENT: Any = object()


@attrs.define
class Comparison:
    """What changed from one value to another (SMD's ``typed.Comparison``)."""

    added: FieldSet = attrs.Factory(FieldSet)
    modified: FieldSet = attrs.Factory(FieldSet)
    removed: FieldSet = attrs.Factory(FieldSet)

    def is_same(self) -> bool:
        return self.added.empty() and self.modified.empty() and self.removed.empty()


def _index_items(typ: List, items: list[Any] | None) -> tuple[list[PE], dict[PE, Any]]:
    order: list[PE] = []
    seen: dict[PE, Any] = {}
    for index, item in enumerate(items or []):
        pe = list_item_pe(typ, index, item)
        if pe in seen:
            continue
        seen[pe] = item
        order.append(pe)
    return order, seen


def compare(lhs: Any, rhs: Any, typ: Type) -> Comparison:
    """Fields added, modified and removed from ``lhs`` to ``rhs`` (``TypedValue.Compare``)."""
    result = Comparison()
    _compare(lhs, rhs, typ, (), result)
    return result


def _compare(lhs: Any, rhs: Any, typ: Type, path: Path, out: Comparison) -> None:
    def leaf() -> None:
        if lhs is _ABSENT:
            out.added.insert(path)
        elif rhs is _ABSENT:
            out.removed.insert(path)
        elif not values_equal(lhs, rhs):
            out.modified.insert(path)

    if isinstance(typ, Scalar | Untyped):
        leaf()
        return
    if isinstance(typ, List):
        left = lhs if isinstance(lhs, list) else None
        right = rhs if isinstance(rhs, list) else None
        if typ.list_type == "atomic" or (not left and not right):
            leaf()
            return
        lorder, lseen = _index_items(typ, left)
        rorder, rseen = _index_items(typ, right)
        for pe in lorder + [pe for pe in rorder if pe not in lseen]:
            _compare(lseen.get(pe, _ABSENT), rseen.get(pe, _ABSENT), typ.items, (*path, pe), out)
    else:
        left_map = lhs if isinstance(lhs, dict) else None
        right_map = rhs if isinstance(rhs, dict) else None
        if typ.atomic or (not left_map and not right_map):
            leaf()
            return
        lmap = left_map or {}
        rmap = right_map or {}
        for key in list(lmap) + [k for k in rmap if k not in lmap]:
            ctype = _child_type(typ, field_pe(key))
            if ctype is None:
                continue
            _compare(
                lmap.get(key, _ABSENT), rmap.get(key, _ABSENT), ctype, (*path, field_pe(key)), out
            )
    if lhs is _ABSENT:
        out.added.insert(path)
    elif rhs is _ABSENT:
        out.removed.insert(path)


def merge_values(lhs: Any, rhs: Any, typ: Type) -> Any:
    """``lhs.Merge(rhs)``: rhs wins on leaves, granular maps and lists merge item by item.

    List items keep the order of ``lhs`` unless ``rhs`` orders shared items differently; items
    only ``rhs`` has are placed where ``rhs`` has them (SMD ``merge.go`` ``visitListItems``).
    """
    merged = _merge(lhs, rhs, typ)
    return None if merged is _ABSENT else merged


def _merge(lhs: Any, rhs: Any, typ: Type) -> Any:
    def leaf() -> Any:
        return deep_copy(rhs if rhs is not _ABSENT else lhs)

    if isinstance(typ, Scalar | Untyped):
        return leaf()
    if isinstance(typ, List):
        left = lhs if isinstance(lhs, list) else None
        right = rhs if isinstance(rhs, list) else None
        if typ.list_type == "atomic" or (not left and not right):
            return leaf()
        items = _merge_list_items(typ, left, right)
        return items if items else _ABSENT
    left_map = lhs if isinstance(lhs, dict) else None
    right_map = rhs if isinstance(rhs, dict) else None
    if typ.atomic or (not left_map and not right_map):
        return leaf()
    lmap = left_map or {}
    rmap = right_map or {}
    out: dict[str, Any] = {}
    for key in list(lmap) + [k for k in rmap if k not in lmap]:
        ctype = _child_type(typ, field_pe(key))
        if ctype is None:
            continue
        child = _merge(lmap.get(key, _ABSENT), rmap.get(key, _ABSENT), ctype)
        if child is not _ABSENT:
            out[key] = child
    return out if out else _ABSENT


def _merge_list_items(typ: List, left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    rorder, rseen = _index_items(typ, right)
    lorder, lseen = _index_items(typ, left)
    shared = [pe for pe in rorder if pe in lseen]
    position = 0
    next_shared = shared[0] if shared else None

    def advance() -> PE | None:
        nonlocal position
        position += 1
        return shared[position] if position < len(shared) else None

    merged_rhs: set[PE] = set()
    out: list[Any] = []

    def take(pe: PE, lchild: Any, rchild: Any) -> None:
        value = _merge(lchild, rchild, typ.items)
        if value is not _ABSENT:
            out.append(value)

    li = ri = 0
    while li < len(lorder) or ri < len(rorder):
        if li < len(lorder) and ri < len(rorder):
            pe = lorder[li]
            if pe == rorder[ri]:
                merged_rhs.add(pe)
                take(pe, lseen[pe], rseen[pe])
                li += 1
                ri += 1
                next_shared = advance()
                continue
            if pe in rseen and next_shared is not None and next_shared != pe:
                li += 1
                continue
        if li < len(lorder):
            pe = lorder[li]
            if pe not in rseen:
                take(pe, lseen[pe], _ABSENT)
                li += 1
                continue
            if pe in merged_rhs:
                li += 1
                continue
        if ri < len(rorder):
            pe = rorder[ri]
            merged_rhs.add(pe)
            take(pe, lseen.get(pe, _ABSENT), rseen[pe])
            ri += 1
            if next_shared is not None and next_shared == pe:
                next_shared = advance()
    return out


def remove_items(value: Any, fields: FieldSet, typ: Type) -> Any:
    """The value without the members of ``fields`` (SMD's ``TypedValue.RemoveItems``).

    Like SMD, a container left with nothing becomes ``null``.
    """
    if isinstance(typ, Scalar | Untyped):
        return value
    if isinstance(typ, List):
        if not isinstance(value, list) or not value or typ.list_type == "atomic":
            return None
        items: list[Any] = []
        for index, item in enumerate(value):
            try:
                pe = list_item_pe(typ, index, item)
            except SchemaError:
                pe = (3, index)
            if pe in fields.members:
                continue
            sub = fields.with_prefix(pe)
            if not sub.empty():
                item = remove_items(item, sub, typ.items)
            items.append(item)
        return items if items else None
    if not isinstance(value, dict) or not value or typ.atomic:
        return None
    out: dict[str, Any] = {}
    for key, item in value.items():
        pe = field_pe(key)
        if pe in fields.members:
            continue
        sub = fields.with_prefix(pe)
        if not sub.empty():
            ctype = _child_type(typ, pe)
            if ctype is not None:
                item = remove_items(item, sub, ctype)
        out[key] = item
    return out if out else None


def validate(value: Any, typ: Type) -> list[tuple[str, str]]:
    """Problems SMD finds converting an unstructured object to a typed value.

    Unknown fields (``field not declared in schema``), values of the wrong kind, list items
    without their keys and duplicate list items, sorted by path.
    """
    problems: list[tuple[str, str]] = []
    _validate(value, typ, (), problems)
    problems.sort()
    return problems


def _kind_ok(kind: str, value: Any) -> bool:
    if kind == "any":
        return not isinstance(value, dict | list)
    if kind in ("string", "time"):
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind in ("integer", "number"):
        return isinstance(value, int | float) and not isinstance(value, bool)
    return True


def _validate(value: Any, typ: Type, path: Path, out: list[tuple[str, str]]) -> None:
    where = path_to_string(path)
    if value is None or isinstance(typ, Untyped):
        return
    if isinstance(typ, Scalar):
        if not _kind_ok(typ.kind, value):
            expected = {"time": "string", "integer": "numeric", "number": "numeric"}.get(
                typ.kind, typ.kind
            )
            out.append((where, f"expected {expected}, got {go_marshal(value)}"))
        return
    if isinstance(typ, List):
        if not isinstance(value, list):
            out.append((where, f"expected list, got {go_marshal(value)}"))
            return
        seen: set[PE] = set()
        for index, item in enumerate(value):
            try:
                pe = list_item_pe(typ, index, item)
            except SchemaError as error:
                out.append((where, f"element {index}: {error.problems[0][1]}"))
                continue
            if typ.list_type != "atomic":
                if pe in seen:
                    out.append((where, f"duplicate entries for key {pe_to_string(pe)}"))
                    continue
                seen.add(pe)
            _validate(item, typ.items, (*path, pe), out)
        return
    if not isinstance(value, dict):
        out.append((where, f"expected map, got {go_marshal(value)}"))
        return
    for key, item in value.items():
        ctype = _child_type(typ, field_pe(key))
        if ctype is None:
            out.append((path_to_string((*path, field_pe(key))), "field not declared in schema"))
            continue
        _validate(item, ctype, (*path, field_pe(key)), out)


# --- managers ------------------------------------------------------------------------------------

UPDATE = "Update"
APPLY = "Apply"
FIELDS_V1 = "FieldsV1"
MAX_UPDATE_MANAGERS = 10
ANCIENT_CHANGES = "ancient-changes"
CURRENT_OPERATION = "current-operation"

STRIPPED = FieldSet.of(
    [
        (field_pe("apiVersion"),),
        (field_pe("kind"),),
        (field_pe("metadata"),),
        *(
            (field_pe("metadata"), field_pe(name))
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    ]
)
"""Paths nobody owns (``stripmeta.go``)."""


@attrs.define
class ManagerEntry:
    """One ``managedFields`` entry while it is being worked on."""

    manager: str
    operation: str
    api_version: str
    fields: FieldSet
    time: str | None = None
    subresource: str = ""

    @property
    def applied(self) -> bool:
        return self.operation == APPLY

    def identifier(self) -> str:
        return manager_identifier(self.manager, self.operation, self.api_version, self.subresource)


Managers = dict[str, ManagerEntry]
"""Entries by manager identifier (``BuildManagerIdentifier``)."""


@functools.lru_cache(maxsize=1024)
def manager_identifier(
    manager: str, operation: str, api_version: str, subresource: str = ""
) -> str:
    """The JSON kube keys entries by: no time, no fields, and no apiVersion for appliers."""
    entry: dict[str, str] = {}
    if manager:
        entry["manager"] = manager
    if operation:
        entry["operation"] = operation
    if api_version and operation != APPLY:
        entry["apiVersion"] = api_version
    if subresource:
        entry["subresource"] = subresource
    return go_marshal(entry, sort_keys=False)


def print_manager(identifier: str) -> str:
    """``"mgr"``, ``"mgr" using v1`` for updaters (``conflict.go`` ``printManager``)."""
    try:
        entry = json.loads(identifier)
    except ValueError:
        return go_quote(identifier)
    if not isinstance(entry, dict):
        return go_quote(identifier)
    text = go_quote(str(entry.get("manager", "")))
    if entry.get("subresource"):
        text += f" with subresource {go_quote(str(entry['subresource']))}"
    if entry.get("operation") == UPDATE:
        text += f" using {entry.get('apiVersion', '')}"
    return text


def decode_managed_fields(entries: Any) -> Managers:
    """The entries of ``metadata.managedFields``; ``ValueError`` worded as kube words it."""
    managers: Managers = {}
    if entries is None:
        return managers
    if not isinstance(entries, list):
        raise ValueError("managedFields must be a list")
    for index, raw in enumerate(entries):
        if not isinstance(raw, dict):
            raise ValueError(f"managed fields entry {index} is not an object")
        operation = raw.get("operation") or ""
        if operation not in (APPLY, UPDATE):
            raise ValueError("operation must be `Apply` or `Update`")
        api_version = raw.get("apiVersion") or ""
        if not api_version:
            raise ValueError("apiVersion must not be empty")
        fields_type = raw.get("fieldsType") or ""
        if fields_type == "":
            raise ValueError(f"missing fieldsType in managed fields entry {index}")
        if fields_type != FIELDS_V1:
            raise ValueError(
                f"invalid fieldsType {go_quote(fields_type)} in managed fields entry {index}"
            )
        fields_v1 = raw.get("fieldsV1")
        fields = FieldSet.from_fields_v1(fields_v1) if fields_v1 is not None else FieldSet()
        entry = ManagerEntry(
            manager=str(raw.get("manager") or ""),
            operation=operation,
            api_version=api_version,
            fields=fields,
            time=raw.get("time") or None,
            subresource=str(raw.get("subresource") or ""),
        )
        managers[entry.identifier()] = entry
    return managers


def _seconds(time: str | None) -> int:
    if not time:
        return 0
    try:
        return int(datetime.fromisoformat(time.replace("Z", "+00:00")).timestamp())
    except ValueError:
        return 0


def encode_managed_fields(managers: Managers) -> list[dict[str, Any]]:
    """Entries in ``ManagedFieldsEntry`` key order, sorted as kube sorts them."""
    entries = []
    for entry in managers.values():
        encoded: dict[str, Any] = {"manager": entry.manager, "operation": entry.operation}
        if entry.api_version:
            encoded["apiVersion"] = entry.api_version
        if entry.time:
            encoded["time"] = entry.time
        encoded["fieldsType"] = FIELDS_V1
        encoded["fieldsV1"] = entry.fields.to_fields_v1()
        if entry.subresource:
            encoded["subresource"] = entry.subresource
        if not entry.manager:
            del encoded["manager"]
        entries.append((entry, encoded))
    entries.sort(
        key=lambda pair: (
            pair[0].operation,
            _seconds(pair[0].time),
            pair[0].manager,
            pair[0].api_version,
            pair[0].subresource,
        )
    )
    return [encoded for _, encoded in entries]


def strip(fields: FieldSet) -> FieldSet:
    return fields.difference(STRIPPED)


def cap_update_managers(managers: Managers, limit: int = MAX_UPDATE_MANAGERS) -> None:
    """Fold the oldest Update entries into ``ancient-changes`` until at most ``limit`` remain."""
    updaters = [mid for mid, entry in managers.items() if not entry.applied]
    if len(updaters) <= limit:
        return
    updaters.sort(key=lambda mid: (_seconds(managers[mid].time), mid))
    count = len(updaters)
    for mid in updaters:
        if count <= limit:
            break
        entry = managers[mid]
        bucket = manager_identifier(ANCIENT_CHANGES, UPDATE, entry.api_version)
        if mid == bucket:
            continue
        previous = managers.get(bucket)
        if previous is not None:
            previous.fields = entry.fields.union(previous.fields)
            previous.time = entry.time
        else:
            managers[bucket] = ManagerEntry(
                ANCIENT_CHANGES, UPDATE, entry.api_version, entry.fields, entry.time
            )
            count += 1
        del managers[mid]
        count -= 1


# --- typed objects -----------------------------------------------------------------------------

VersionViews = Mapping[str, tuple[Type, Callable[[dict[str, Any]], dict[str, Any]]]]
"""For each other served apiVersion: its schema and a converter from the request's version."""


def typed_object(obj: dict[str, Any] | None, schema: Type) -> dict[str, Any]:
    """An object as the field manager sees it: Go's view of it, without managedFields/TypeMeta.

    ``None`` (a create) stands for the empty object of the type, as kube uses ``New()``.
    """
    source = deep_copy(obj) if obj else {}
    meta = source.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    source.pop("apiVersion", None)
    source.pop("kind", None)
    normalized = go_normalize(source, schema)
    assert isinstance(normalized, dict)
    return normalized


class Conflicts(Exception):
    """Fields other managers own that a request changes (SMD's ``merge.Conflicts``)."""

    def __init__(self, conflicts: dict[str, FieldSet]) -> None:
        self.conflicts = conflicts
        super().__init__(f"{len(conflicts)} managers conflict")

    def items(self) -> list[tuple[str, Path]]:
        """(manager identifier, path) pairs, managers sorted, paths in set order."""
        return [
            (mid, path) for mid in sorted(self.conflicts) for path in self.conflicts[mid].paths()
        ]


def structured_update(
    old: dict[str, Any],
    new: dict[str, Any],
    api_version: str,
    managers: Managers,
    workflow: str,
    force: bool,
    schema: Type,
    views: VersionViews | None = None,
) -> Comparison:
    """``Updater.update``: other managers lose fields that changed or went away.

    With ``force`` false, changed fields other managers own raise :class:`Conflicts`. Managers
    of an apiVersion missing from ``views`` (when ``views`` is given) are dropped, as kube
    drops managers of versions it no longer serves. Returns the comparison in ``api_version``.
    """
    comparison = compare(old, new, schema)
    by_version: dict[str, Comparison] = {api_version: comparison}
    conflicts: dict[str, FieldSet] = {}
    removed: dict[str, FieldSet] = {}
    for mid, entry in list(managers.items()):
        if mid == workflow:
            continue
        found = by_version.get(entry.api_version)
        if found is None:
            if views is None:
                found = comparison
            else:
                view = views.get(entry.api_version)
                if view is None:
                    del managers[mid]
                    continue
                vschema, convert = view
                found = compare(
                    typed_object(convert(old), vschema),
                    typed_object(convert(new), vschema),
                    vschema,
                )
            by_version[entry.api_version] = found
        conflict = entry.fields.intersection(found.modified.union(found.added))
        if not conflict.empty():
            conflicts[mid] = conflict
        if not found.removed.empty():
            removed[mid] = found.removed
    if conflicts and not force:
        raise Conflicts(conflicts)
    for mid, conflict in conflicts.items():
        managers[mid].fields = managers[mid].fields.difference(conflict)
    for mid, gone in removed.items():
        managers[mid].fields = managers[mid].fields.difference(gone)
    for mid in [mid for mid, entry in managers.items() if entry.fields.empty()]:
        del managers[mid]
    return comparison


def _is_reset(entries: Any) -> bool:
    if isinstance(entries, list):
        if not entries:
            return True
        return len(entries) == 1 and entries[0] == {}
    return False


def _decode_live_or_new(live: dict[str, Any] | None, new: dict[str, Any]) -> Managers:
    live_entries = ((live or {}).get("metadata") or {}).get("managedFields")
    new_meta = new.get("metadata") if isinstance(new.get("metadata"), dict) else {}
    new_entries = (new_meta or {}).get("managedFields")
    if _is_reset(new_entries):
        return {}
    try:
        managers = decode_managed_fields(new_entries)
    except ValueError:
        managers = {}
    if managers:
        return managers
    try:
        return decode_managed_fields(live_entries)
    except ValueError:
        return {}


def field_set(obj: dict[str, Any], schema: Type) -> FieldSet:
    """The fields an object sets, as an applier of it would own them (metadata stripped)."""
    return strip(to_field_set(obj, schema))


def update_managed_fields(
    live_before: dict[str, Any] | None,
    new_obj: dict[str, Any],
    manager: str,
    operation: str,
    api_version: str,
    now: str,
    schema: Type,
    *,
    subresource: str = "",
    views: VersionViews | None = None,
) -> list[dict[str, Any]]:
    """The ``managedFields`` to store after a create, update or non-apply patch.

    ``live_before`` is the stored object (``None`` on create), ``new_obj`` the object about to
    be stored, both in ``api_version``'s shape; ``now`` is an RFC 3339 time in whole seconds.
    Follows kube's ``FieldManager.UpdateNoErrors``: should the objects not fit the schema,
    managed fields are dropped rather than failing the request.
    """
    managers = _decode_live_or_new(live_before, new_obj)
    try:
        old_typed = typed_object(live_before, schema)
        new_typed = typed_object(new_obj, schema)
        comparison = structured_update(
            old_typed, new_typed, api_version, managers, CURRENT_OPERATION, True, schema, views
        )
    except SchemaError:
        return []
    gained = comparison.modified.union(comparison.added).difference(comparison.removed)
    gained = strip(gained)
    if not gained.empty():
        identifier = manager_identifier(manager or "unknown", operation, api_version, subresource)
        previous = managers.get(identifier)
        if previous is not None:
            previous.fields = gained.union(previous.fields)
            previous.time = now
        else:
            managers[identifier] = ManagerEntry(
                manager or "unknown", operation, api_version, gained, now, subresource
            )
    cap_update_managers(managers)
    return encode_managed_fields(managers)
