"""Go's ``strconv.ParseInt`` / ``strconv.Atoi`` (golang.org/src/strconv/atoi.go).

Flags (``--secure-port=0x1A``, pflag's ``ParseInt(s, 0, 64)``), query parameters
(``?limit=``, ``ParseInt(s, 10, 64)``), label selectors (``gt``/``lt``) and JSON numbers
read into int64 fields all use it. What decides the error: an empty string, a sign alone, a
character that is not a digit of the base is ``invalid syntax``; digits are consumed one by
one and the number checked against the bit size as it grows, so a number that overflows is
``value out of range`` even when a bad character follows it. Base 0 reads the ``0b``,
``0o``, ``0x`` and ``0`` prefixes and allows ``_`` between digits (``underscoreOK``). The
error names the function (``ParseInt``, or ``Atoi``) and quotes the input with
``strconv.Quote``.
"""

from __future__ import annotations

from apiserver.gocompat.errors import GoValueError
from apiserver.gocompat.quote import go_quote

_UINT64_MAX = (1 << 64) - 1


def _error(func: str, text: str, reason: str) -> GoValueError:
    return GoValueError(f"strconv.{func}: parsing {go_quote(text)}: {reason}")


def _underscore_ok(text: str) -> bool:
    """``underscoreOK``: underscores only between digits (or after a base prefix)."""
    saw = "^"
    i = 0
    if text[:1] in ("+", "-"):
        text = text[1:]
    hexadecimal = False
    if len(text) >= 2 and text[0] == "0" and text[1].lower() in "box":
        i = 2
        saw = "0"
        hexadecimal = text[1].lower() == "x"
    while i < len(text):
        ch = text[i]
        if "0" <= ch <= "9" or (hexadecimal and "a" <= ch.lower() <= "f"):
            saw = "0"
        elif ch == "_":
            if saw != "0":
                return False
            saw = "_"
        elif saw == "_":
            return False
        else:
            saw = "!"
        i += 1
    return saw != "_"


def _parse_uint(digits: str, base: int, bits: int) -> tuple[int, str | None]:
    """``ParseUint`` of the unsigned part: the value, or the error's reason."""
    if not digits:
        return 0, "invalid syntax"
    base0 = base == 0
    body = digits
    if base0:
        base = 10
        if body[0] == "0":
            prefix = body[1:2].lower()
            if len(body) >= 3 and prefix in ("b", "o", "x"):
                base = {"b": 2, "o": 8, "x": 16}[prefix]
                body = body[2:]
            else:
                base = 8
                body = body[1:]
    cutoff = _UINT64_MAX // base + 1
    max_value = (1 << bits) - 1
    number = 0
    underscores = False
    for ch in body:
        code = ord(ch)
        if ch == "_" and base0:
            underscores = True
            continue
        if 0x30 <= code <= 0x39:
            digit = code - 0x30
        elif 0x61 <= (code | 0x20) <= 0x7A and code < 0x80:
            digit = (code | 0x20) - 0x61 + 10
        else:
            return 0, "invalid syntax"
        if digit >= base:
            return 0, "invalid syntax"
        if number >= cutoff:
            return max_value, "value out of range"
        number = number * base + digit
        if number > max_value:
            return max_value, "value out of range"
    if underscores and not _underscore_ok(digits):
        return 0, "invalid syntax"
    return number, None


def parse_int(text: str, base: int = 10, bits: int = 64, *, func: str = "ParseInt") -> int:
    """``strconv.ParseInt(text, base, bits)``; ``func="Atoi"`` words the error as
    ``strconv.Atoi`` does. Raises :class:`GoValueError` with Go's text."""
    if base == 10:
        # The everyday case, decided without the digit loop when it is plainly valid.
        body = text[1:] if text[:1] in ("+", "-") else text
        if body.isascii() and body.isdigit():
            value = int(text)
            limit = 1 << (bits - 1)
            if -limit <= value < limit:
                return value
    if not text:
        raise _error(func, text, "invalid syntax")
    negative = text[0] == "-"
    digits = text[1:] if text[0] in ("+", "-") else text
    number, reason = _parse_uint(digits, base, bits)
    if reason == "invalid syntax":
        raise _error(func, text, reason)
    cutoff = 1 << (bits - 1)
    if (not negative and number >= cutoff) or (negative and number > cutoff):
        raise _error(func, text, "value out of range")
    return -number if negative else number


def go_parse_int64(text: str) -> int | None:
    """``strconv.ParseInt(text, 10, 64)``, None where Go returns an error (label selector
    values, JSON numbers read into int64 fields)."""
    try:
        return parse_int(text)
    except GoValueError:
        return None


__all__ = ["go_parse_int64", "parse_int"]
