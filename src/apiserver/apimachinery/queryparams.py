"""Query-string values read the way apimachinery's url.Values conversions read them.

Follows k8s.io/apimachinery ``pkg/runtime/conversion.go`` (``Convert_Slice_string_To_bool``,
``Convert_Slice_string_To_int64``, ``Convert_Slice_string_To_Pointer_*``) and Go's
``strconv.ParseInt`` / ``strconv.ParseBool``: only the first value of a repeated parameter
counts, a boolean is false only when it is ``0`` or ``false`` (any case) and true otherwise --
even when empty -- and a bad integer is a 400 whose text is ``strconv.ParseInt``'s error.

Queries are the ``Mapping[bytes, Sequence[bytes]]`` that Twisted's ``request.args`` holds; the
bytes are decoded as UTF-8 with invalid sequences replaced by U+FFFD (which is what Go's JSON
encoder would print for them in any error text anyway).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from apiserver.apimachinery.errors import bad_request
from apiserver.gocompat.errors import GoValueError
from apiserver.gocompat.intparse import parse_int

Query = Mapping[bytes, Sequence[bytes]]

#: ``strconv.ParseInt``'s error (:mod:`apiserver.gocompat.intparse`), as the 400's text.
GoParseIntError = GoValueError


def _decode(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def query_values(query: Query, name: str) -> list[str] | None:
    """All values of ``name`` in request order, or None when the parameter is absent."""
    values = query.get(name.encode())
    if not values:
        return None
    return [_decode(v) for v in values]


def query_str(query: Query, name: str) -> str | None:
    """The first value of ``name`` (``Convert_Slice_string_To_string``), None if absent."""
    values = query_values(query, name)
    return None if values is None else values[0]


def _equal_fold_false(value: str) -> bool:
    """``strings.EqualFold(value, "false")``; U+017F (long s) folds to ``s`` as in Go."""
    if len(value) != 5:
        return False
    folded = "".join("s" if ch == "\u017f" else ch.lower() for ch in value)
    return folded == "false"


def parse_query_bool(value: str) -> bool:
    """apimachinery's rule for one value: ``0`` or ``false`` (any case) is false, all else true."""
    return not (value == "0" or _equal_fold_false(value))


def query_bool(query: Query, name: str) -> bool | None:
    """``Convert_Slice_string_To_Pointer_bool``: None when absent, else the first value's truth."""
    value = query_str(query, name)
    return None if value is None else parse_query_bool(value)


def query_int(query: Query, name: str) -> int | None:
    """``Convert_Slice_string_To_Pointer_int64``: None when absent, 400 on a bad integer."""
    value = query_str(query, name)
    if value is None:
        return None
    try:
        return parse_int(value)
    except GoValueError as exc:
        raise bad_request(str(exc)) from None


__all__ = [
    "GoParseIntError",
    "Query",
    "parse_query_bool",
    "query_bool",
    "query_int",
    "query_str",
    "query_values",
]
