"""JSON values as Go's ``encoding/json`` sees them, and the words it names their kinds with.

The Go-style JSON readers keep what Python's ``json`` would lose: an object's members in
document order with duplicate keys (:class:`Pairs`, :class:`GoObject`) and a number's literal
text (:class:`GoNumber`), because Go's decoders decide with them (last duplicate wins, a number
is read per target type). :func:`go_json_kind` is the kind word of ``json.UnmarshalTypeError``
(``json: cannot unmarshal <kind> into Go value of type ...``), the same for values of any reader.
"""

from __future__ import annotations

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
    if isinstance(value, Pairs):
        return value.as_dict()
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


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
