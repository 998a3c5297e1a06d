"""Go's quoting: ``strconv.Quote`` (``%q`` in ``fmt``), ``encoding/json``'s ``quoteChar`` and the
time package's own ``quote``.

Three functions because Go has three, and error texts differ by which one printed them: pflag's
``invalid argument %q``, field errors and ``strconv`` errors use ``strconv.Quote``; JSON syntax
errors name the offending byte with ``quoteChar``; ``time.Parse`` and ``time.ParseDuration``
use ``time.quote`` (golang.org/src/time/format.go), which escapes every non-ASCII byte.
"""

from __future__ import annotations

_SIMPLE_ESCAPES = {
    0x07: "\\a",
    0x08: "\\b",
    0x0C: "\\f",
    0x0A: "\\n",
    0x0D: "\\r",
    0x09: "\\t",
    0x0B: "\\v",
    0x5C: "\\\\",
    0x22: '\\"',
}


def go_quote(value: str | bytes) -> str:
    """Go's ``strconv.Quote`` (what ``fmt`` prints for ``%q`` of a string).

    The one implementation in the tree (field errors, strict decoding, health checks, authz
    and authn messages all use it). Printable characters stay (Python's ``str.isprintable``
    has the same definition as Go's ``unicode.IsPrint``: letters, marks, numbers,
    punctuation, symbols and the ASCII space), ``\\a \\b \\f \\n \\r \\t \\v \\\\ \\"``
    get their short escapes, other characters below U+0020 and U+007F become ``\\xNN``, the
    rest ``\\uNNNN`` / ``\\UNNNNNNNN``. Bytes that are not valid UTF-8 become ``\\xNN``
    each, as Go does byte by byte; so does text that carries such bytes as the lone
    surrogates U+DC80..U+DCFF of Python's ``surrogateescape``. Any other lone surrogate is
    not a valid rune: Go prints ``\\ufffd``.
    """
    if isinstance(value, bytes):
        # Each byte of an invalid sequence becomes a lone surrogate U+DC80..U+DCFF; strict
        # UTF-8 never decodes to a surrogate, so those stand for raw bytes only.
        value = value.decode("utf-8", "surrogateescape")
    out = ['"']
    for char in value:
        code = ord(char)
        if code in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[code])
        elif 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif char.isprintable():
            out.append(char)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\\ufffd")  # not a valid rune: Go prints U+FFFD
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


def go_quote_char(c: int) -> str:
    """``encoding/json``'s ``quoteChar``: the offending byte of a JSON syntax error.

    Quotes and apostrophes are special-cased; anything else is ``strconv.Quote`` of the rune
    with the double quotes swapped for single ones (``'\\x01'``, ``'é'`` for 0xE9).
    """
    if c == 0x27:
        return "'\\''"
    if c == 0x22:
        return "'\"'"
    return "'" + go_quote(chr(c))[1:-1] + "'"


def time_quote(data: bytes | str) -> str:
    """The time package's own ``quote`` (time/format.go), not ``strconv.Quote``: what
    ``time.Parse`` and ``time.ParseDuration`` errors print. Non-ASCII and control bytes
    become ``\\xNN`` each (so ``é`` is ``\\xc3\\xa9``, where ``strconv.Quote`` keeps it);
    only ``"`` and ``\\`` get a backslash."""
    if isinstance(data, str):
        data = data.encode("utf-8", errors="surrogateescape")
    out = ['"']
    text = data.decode("utf-8", errors="surrogateescape")
    for ch in text:
        code = ord(ch)
        if code >= 0x80 or code < 0x20:
            raw = ch.encode("utf-8", errors="surrogateescape")
            out.extend(f"\\x{b:02x}" for b in raw)
        else:
            if ch in ('"', "\\"):
                out.append("\\")
            out.append(ch)
    out.append('"')
    return "".join(out)


__all__ = ["go_quote", "go_quote_char", "time_quote"]
