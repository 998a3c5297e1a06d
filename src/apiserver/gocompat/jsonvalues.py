"""JSON values as Go's ``encoding/json`` sees them, and the words it names their kinds with.

The Go-style JSON readers keep what Python's ``json`` would lose: an object's members in
document order with duplicate keys (:class:`Pairs`, :class:`GoObject`) and a number's literal
text (:class:`GoNumber`), because Go's decoders decide with them (last duplicate wins, a number
is read per target type). :func:`go_json_kind` is the kind word of ``json.UnmarshalTypeError``
(``json: cannot unmarshal <kind> into Go value of type ...``), the same for values of any reader.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import attrs


@attrs.frozen
class GoNumber:
    """A JSON number kept as its literal text (Go decides per target type how to read it)."""

    text: str


@attrs.frozen
class GoObject:
    """A JSON object as its key/value pairs in input order (duplicates kept)."""

    pairs: tuple[tuple[str, Any], ...]


class Pairs:
    """A JSON object with its members in document order and duplicate keys kept."""

    __slots__ = ("items",)

    def __init__(self, items: list[tuple[str, Any]]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pairs) and self.items == other.items

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Pairs({self.items!r})"

    def as_dict(self) -> dict[str, Any]:
        """Last value wins, as Go's decoders do."""
        return {k: to_plain(v) for k, v in self.items}


def to_plain(value: Any) -> Any:
    """Turn :class:`Pairs` back into ordinary dicts (duplicates: last one wins)."""
    try:
        if isinstance(value, Pairs):
            return value.as_dict()
        if isinstance(value, list):
            return [to_plain(v) for v in value]
    except RecursionError:
        return rebuild(value)
    return value


def deep_copy(value: Any) -> Any:
    """``copy.deepcopy`` of a JSON value, also for one nested past the recursion limit."""
    try:
        return copy.deepcopy(value)
    except RecursionError:
        return rebuild(value)


def rebuild(value: Any, *, drop_nulls: bool = False) -> Any:
    """A fresh copy of a JSON value (dicts, lists, scalars; :class:`Pairs` become dicts, last
    duplicate winning), made with an explicit stack: the fallback of the recursive helpers
    for values nested past the recursion limit (Go reads up to 10,000 levels). With
    ``drop_nulls``, ``null`` members and items go at every level (json-patch's
    ``pruneNulls``)."""
    holder: list[Any] = [None]
    # Each entry: a value to copy, and the container and slot its copy goes into.
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        item, into, slot = stack.pop()
        if isinstance(item, Pairs):
            item = dict(item.items)
        if isinstance(item, dict):
            members = {k: None for k, v in item.items() if not (drop_nulls and v is None)}
            into[slot] = members
            stack.extend((item[k], members, k) for k in members)
        elif isinstance(item, list):
            kept = [v for v in item if not (drop_nulls and v is None)]
            copied: list[Any] = [None] * len(kept)
            into[slot] = copied
            stack.extend((v, copied, i) for i, v in enumerate(kept))
        else:
            into[slot] = item
    return holder[0]


def go_json_kind(value: Any) -> str:
    """How ``json.UnmarshalTypeError`` names a JSON value: object, array, string, number,
    bool, null; for the values of either Go-style JSON reader (plain Python values with
    :class:`Pairs`, or :class:`GoObject` and :class:`GoNumber`)."""
    if isinstance(value, dict | Pairs | GoObject):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    if value is None:
        return "null"
    return "number"


__all__ = ["GoNumber", "GoObject", "Pairs", "go_json_kind", "to_plain"]
