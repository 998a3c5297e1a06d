"""Go's ``encoding/json`` output: ``json.Marshal`` and ``json.MarshalIndent(v, "", "  ")``
(golang.org/src/encoding/json/encode.go).

What differs from Python's ``json.dumps``: ``<``, ``>``, ``&``, U+2028 and U+2029 escaped inside
strings (HTML-safe), an unpaired surrogate (invalid UTF-8 in Go) written as ``\\ufffd``, floats
as ``strconv.AppendFloat`` with ``'f'`` or ``'e'`` as Go picks (``1e-7``, ``1e+21``, ``1`` for
1.0), map keys sorted by their bytes. Bodies, ETags (hashed bytes) and error texts depend on it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from apiserver.gocompat.jsonvalues import Pairs

_GO_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\b": "\\b",
    "\f": "\\f",
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def go_json_string(text: str) -> str:
    """A JSON string as Go's ``json.Marshal`` writes it: HTML-safe (``\\u003c``...), control
    characters as ``\\u00xx``, U+2028/U+2029 escaped, an unpaired surrogate (invalid UTF-8
    in Go) as ``\\ufffd``."""
    out = ['"']
    for ch in text:
        escaped = _GO_ESCAPES.get(ch)
        if escaped is not None:
            out.append(escaped)
        elif ord(ch) < 0x20:
            out.append(f"\\u00{ord(ch):02x}")
        elif 0xD800 <= ord(ch) <= 0xDFFF:
            out.append("\\ufffd")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_float(value: float) -> str:
    """``strconv.AppendFloat(f, 'f' or 'e', -1, 64)`` the way ``encoding/json`` picks it."""
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"json: unsupported value: {value}")
    if value == 0:
        return "-0" if str(value).startswith("-") else "0"
    magnitude = abs(value)
    text = repr(value)
    if 1e-6 <= magnitude < 1e21:
        if "e" in text or "E" in text:
            from decimal import Decimal

            text = format(Decimal(text), "f")
        if text.endswith(".0"):
            text = text[:-2]
        return text
    # Python's repr already has Go's two-digit exponent; Go then trims "e-07" to "e-7".
    mantissa, _, exponent = text.partition("e")
    if mantissa.endswith(".0"):
        mantissa = mantissa[:-2]
    if len(exponent) == 3 and exponent.startswith("-0"):
        exponent = "-" + exponent[2]
    return f"{mantissa}e{exponent}"


def go_marshal(value: Any, *, sort_keys: bool = True) -> str:
    """Compact JSON the way Go's ``json.Marshal`` writes it (sorted map keys, HTML escaped).

    A value nested past the recursion limit (Go writes up to its decoder's 10,000 levels)
    is written again by :func:`_marshal_deep`, without recursion."""
    try:
        return _marshal(value, sort_keys)
    except RecursionError:
        return _marshal_deep(value, sort_keys)


def _marshal_deep(value: Any, sort_keys: bool) -> str:
    """:func:`go_marshal` with an explicit stack of pieces still to write."""
    out: list[str] = []
    # Each entry: a value to write, or a str written as is (punctuation, keys).
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, _Text):
            out.append(item.text)
            continue
        if isinstance(item, Pairs):
            item = item.as_dict()
        if isinstance(item, dict):
            keys = sorted(item, key=lambda k: k.encode("utf-8")) if sort_keys else list(item)
            todo: list[Any] = [_Text("{")]
            for index, key in enumerate(keys):
                prefix = "," if index else ""
                todo.append(_Text(prefix + go_json_string(key) + ":"))
                todo.append(item[key])
            todo.append(_Text("}"))
            stack.extend(reversed(todo))
        elif isinstance(item, list | tuple):
            todo = [_Text("[")]
            for index, element in enumerate(item):
                if index:
                    todo.append(_Text(","))
                todo.append(element)
            todo.append(_Text("]"))
            stack.extend(reversed(todo))
        else:
            out.append(_marshal(item, sort_keys))
    return "".join(out)


class _Text:
    """Output written as is by :func:`_marshal_deep` (never a JSON value)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _marshal(value: Any, sort_keys: bool) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_json_string(value)
    if isinstance(value, Pairs):
        value = value.as_dict()
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-8")) if sort_keys else list(value)
        inner = ",".join(go_json_string(k) + ":" + _marshal(value[k], sort_keys) for k in keys)
        return "{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(_marshal(v, sort_keys) for v in value) + "]"
    raise TypeError(f"json: unsupported type: {type(value).__name__}")


_HTML_SAFE = {k: v for k, v in _GO_ESCAPES.items() if k in "<>&\u2028\u2029"}
_HTML_SAFE_BYTES = {k.encode(): v.encode() for k, v in _HTML_SAFE.items()}
_HTML_BYTES_RE = re.compile(rb"[<>&]|\xe2\x80[\xa8\xa9]")


def html_safe(data: bytes) -> bytes:
    """UTF-8 JSON (orjson's, say) made HTML-safe as Go's ``encoding/json`` writes it: ``<``,
    ``>``, ``&``, U+2028 and U+2029 become ``\\u003c``... They can only occur inside strings,
    so a plain substitution is exact; the common case (none of them) costs one search."""
    # Four substring tests (memchr) are about twenty times faster than one search of the
    # alternation on a kilobyte of JSON, and most documents contain none of them.
    # ``isascii`` first: the two-byte search for U+2028/U+2029 costs more than the others.
    if (
        b"&" not in data
        and b"<" not in data
        and b">" not in data
        and (data.isascii() or b"\xe2\x80" not in data)
    ):
        return data
    return _HTML_BYTES_RE.sub(lambda m: _HTML_SAFE_BYTES[m.group(0)], data)


_HTML_RE = re.compile("[<>&\u2028\u2029]")


def go_marshal_plain(value: Any, *, sort_keys: bool = False) -> bytes:
    """:func:`go_marshal` as UTF-8, for values without floats: documents this server builds
    (discovery, OpenAPI), written by Python's C encoder and then made HTML-safe.

    Why: discovery answers are encoded per request, and the C encoder is ten times faster
    than :func:`go_marshal`. For such values the bytes are the same (a property test checks
    it): ``json.dumps`` escapes the same control characters the same way and sorts keys by
    code point, which is UTF-8 byte order. It must not be given floats (Python writes
    ``1e-07`` and ``1.0``) or lone surrogates (refused when encoding).
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=sort_keys)
    if _HTML_RE.search(text) is not None:
        text = _HTML_RE.sub(lambda m: _HTML_SAFE[m.group(0)], text)
    return text.encode()


def go_marshal_indent(value: Any, *, sort_keys: bool = False) -> str:
    """``json.MarshalIndent(value, "", "  ")``: members one per line, two spaces a level,
    ``": "`` after keys, empty objects and arrays as ``{}`` and ``[]``, no final newline."""
    return _indented(value, sort_keys, "\n")


def _indented(value: Any, sort_keys: bool, newline: str) -> str:
    if isinstance(value, Pairs):
        value = value.as_dict()
    if isinstance(value, dict):
        if not value:
            return "{}"
        inner = newline + "  "
        keys = sorted(value, key=lambda k: k.encode("utf-8")) if sort_keys else list(value)
        members = [go_json_string(k) + ": " + _indented(value[k], sort_keys, inner) for k in keys]
        return "{" + inner + ("," + inner).join(members) + newline + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        inner = newline + "  "
        items = [_indented(v, sort_keys, inner) for v in value]
        return "[" + inner + ("," + inner).join(items) + newline + "]"
    return go_marshal(value, sort_keys=sort_keys)


__all__ = [
    "go_float",
    "go_json_string",
    "go_marshal",
    "go_marshal_indent",
    "go_marshal_plain",
    "html_safe",
]
