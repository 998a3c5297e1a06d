"""``strconv.ParseBool``: exactly the twelve spellings Go accepts (golang.org/src/strconv/atob.go).

Not to be confused with how apimachinery reads a *query* boolean (``0`` or ``false`` in any case
is false, anything else true: ``apimachinery.queryparams.parse_query_bool``), nor with
``--runtime-config`` where a bare key means true (``discovery.documents``).
"""

from __future__ import annotations

from apiserver.gocompat.errors import GoValueError
from apiserver.gocompat.quote import go_quote

_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def go_parse_bool(text: str) -> bool | None:
    """``strconv.ParseBool``: the value, or None where Go returns an error."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def parse_bool_error(text: str) -> str:
    """The text of ``strconv.ParseBool``'s error (a ``*strconv.NumError``: the input is
    printed with ``strconv.Quote``)."""
    return f"strconv.ParseBool: parsing {go_quote(text)}: invalid syntax"


def parse_bool(text: str) -> bool:
    """``strconv.ParseBool``, raising :class:`GoValueError` with Go's text on an error."""
    value = go_parse_bool(text)
    if value is None:
        raise GoValueError(parse_bool_error(text))
    return value


__all__ = ["go_parse_bool", "parse_bool", "parse_bool_error"]
