"""List continue tokens, encoded and decoded byte for byte as kube-apiserver does it.

Follows k8s.io/apiserver ``pkg/storage/continue.go`` (``EncodeContinue``/``DecodeContinue``) and
the etcd3 store's wrapping of its errors (``invalid continue token: <err>``, a 400). A token is
the unpadded base64url of Go's ``json.Marshal`` of ``{"v","rv","start"}``; ``start`` is the key
relative to the resource prefix with a trailing NUL (the first key *after* the last one
returned). Decoding repeats Go's steps and error texts: base64 (``illegal base64 data at input
byte N``), ``encoding/json`` (syntax and type errors, case-insensitive field names), the version
check, ``rv`` 0 and empty ``start`` checks, and the ``path.Clean`` guard against ``..``, ``//``
and trailing ``/`` in the start key.

The Go-compatible JSON reader below (:func:`go_json_parse`) is public because other request
decoders need Go's error texts too; Python's :mod:`json` words its errors differently and
accepts things Go refuses (NaN, lone surrogates).
"""

from __future__ import annotations

import base64
from typing import Any

from apiserver.apimachinery.errors import StatusError, bad_request
from apiserver.gocompat.intparse import go_parse_int64
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import GoNumber, GoObject, go_json_kind
from apiserver.gocompat.marshal import go_json_string
from apiserver.gocompat.quote import go_quote_char

API_VERSION = "meta.k8s.io/v1"

_INVALID = "continue key is not valid"
ERR_INVALID_START_RV = (
    "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
)
ERR_EMPTY_START_KEY = "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
ERR_UNRECOGNIZED_VERSION = (
    "continue key is not valid: server does not recognize this encoded version"
)


class ContinueTokenError(ValueError):
    """A token kube-apiserver refuses; ``str()`` is the whole 400 message."""

    def to_status(self) -> StatusError:
        return bad_request(str(self))


# --- Go's JSON: reading ---------------------------------------------------------------------

_HEX = "0123456789abcdef"


class GoJSONSyntaxError(ValueError):
    """``*json.SyntaxError``: the scanner's message, e.g. ``unexpected end of JSON input``."""


_WS = b" \t\r\n"


def go_decode_utf8(data: bytes) -> str:
    """Bytes to text the way Go's JSON decoder does it: each invalid byte becomes U+FFFD."""
    text = data.decode("utf-8", errors="surrogateescape")
    if not any("\udc80" <= ch <= "\udcff" for ch in text):
        return text
    return "".join("\ufffd" if "\udc80" <= ch <= "\udcff" else ch for ch in text)


_EOF_MSG = "unexpected end of JSON input"


class _Reader:
    def __init__(self, data: bytes, shallow: int | None = None) -> None:
        self.data = data
        self.pos = 0
        #: Containers nested this deep are skipped and read as empty ones of their kind
        #: (for input Go's scanner already found valid; see :func:`_skip_container`).
        self.shallow = shallow
        self.depth = 0

    def _err(self, c: int, context: str) -> GoJSONSyntaxError:
        return GoJSONSyntaxError(f"invalid character {go_quote_char(c)} {context}")

    def peek(self) -> int:
        if self.pos >= len(self.data):
            raise GoJSONSyntaxError(_EOF_MSG)
        return self.data[self.pos]

    def skip_ws(self) -> None:
        while self.pos < len(self.data) and self.data[self.pos] in _WS:
            self.pos += 1

    def value(self) -> Any:
        self.skip_ws()
        c = self.peek()
        if self.shallow is not None and self.depth >= self.shallow and c in b"{[":
            self.pos = _skip_container(self.data, self.pos)
            return GoObject(()) if c == ord("{") else []
        if c == ord("{"):
            self.depth += 1
            result: Any = self.obj()
            self.depth -= 1
            return result
        if c == ord("["):
            self.depth += 1
            result = self.arr()
            self.depth -= 1
            return result
        if c == ord('"'):
            return self.string()
        if c == ord("-") or ord("0") <= c <= ord("9"):
            return self.number()
        if c == ord("t"):
            return self.literal(b"true", True)
        if c == ord("f"):
            return self.literal(b"false", False)
        if c == ord("n"):
            return self.literal(b"null", None)
        raise self._err(c, "looking for beginning of value")

    def literal(self, word: bytes, result: Any) -> Any:
        name = word.decode()
        self.pos += 1
        for expected in word[1:]:
            c = self.peek()
            if c != expected:
                raise self._err(c, f"in literal {name} (expecting {go_quote_char(expected)})")
            self.pos += 1
        return result

    def number(self) -> GoNumber:
        start = self.pos
        if self.peek() == ord("-"):
            self.pos += 1
            c = self.peek()
            if not ord("0") <= c <= ord("9"):
                raise self._err(c, "in numeric literal")
        if self.peek() == ord("0"):
            self.pos += 1
        else:
            while self.pos < len(self.data) and ord("0") <= self.data[self.pos] <= ord("9"):
                self.pos += 1
        if self.pos < len(self.data) and self.data[self.pos] == ord("."):
            self.pos += 1
            c = self.peek()
            if not ord("0") <= c <= ord("9"):
                raise self._err(c, "after decimal point in numeric literal")
            while self.pos < len(self.data) and ord("0") <= self.data[self.pos] <= ord("9"):
                self.pos += 1
        if self.pos < len(self.data) and self.data[self.pos] in b"eE":
            self.pos += 1
            if self.peek() in b"+-":
                self.pos += 1
            c = self.peek()
            if not ord("0") <= c <= ord("9"):
                raise self._err(c, "in exponent of numeric literal")
            while self.pos < len(self.data) and ord("0") <= self.data[self.pos] <= ord("9"):
                self.pos += 1
        return GoNumber(self.data[start : self.pos].decode("ascii"))

    def string(self) -> str:
        self.pos += 1  # opening quote
        out: list[str] = []
        chunk_start = self.pos
        while True:
            c = self.peek()
            if c == ord('"'):
                out.append(go_decode_utf8(self.data[chunk_start : self.pos]))
                self.pos += 1
                return "".join(out)
            if c < 0x20:
                raise self._err(c, "in string literal")
            if c != ord("\\"):
                self.pos += 1
                continue
            out.append(go_decode_utf8(self.data[chunk_start : self.pos]))
            self.pos += 1
            e = self.peek()
            simple = {
                ord("b"): "\b",
                ord("f"): "\f",
                ord("n"): "\n",
                ord("r"): "\r",
                ord("t"): "\t",
                ord("\\"): "\\",
                ord("/"): "/",
                ord('"'): '"',
            }
            if e in simple:
                out.append(simple[e])
                self.pos += 1
            elif e == ord("u"):
                self.pos += 1
                out.append(self._unicode_escape())
            else:
                raise self._err(e, "in string escape code")
            chunk_start = self.pos

    def _hex4(self) -> int:
        value = 0
        for _ in range(4):
            c = self.peek()
            digit = chr(c).lower() if c < 0x80 else ""
            if not digit or digit not in _HEX:
                raise self._err(c, "in \\u hexadecimal character escape")
            value = value * 16 + _HEX.index(digit)
            self.pos += 1
        return value

    def _unicode_escape(self) -> str:
        code = self._hex4()
        if 0xD800 <= code < 0xDC00:
            # A high surrogate pairs only with an immediately following \uDC00-\uDFFF.
            save = self.pos
            if self.data[self.pos : self.pos + 2] == b"\\u":
                self.pos += 2
                low = self._hex4()
                if 0xDC00 <= low <= 0xDFFF:
                    return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
            self.pos = save
            return "\ufffd"
        if 0xDC00 <= code <= 0xDFFF:
            return "\ufffd"
        return chr(code)

    def obj(self) -> GoObject:
        self.pos += 1
        pairs: list[tuple[str, Any]] = []
        self.skip_ws()
        if self.peek() == ord("}"):
            self.pos += 1
            return GoObject(())
        while True:
            self.skip_ws()
            c = self.peek()
            if c != ord('"'):
                raise self._err(c, "looking for beginning of object key string")
            key = self.string()
            self.skip_ws()
            c = self.peek()
            if c != ord(":"):
                raise self._err(c, "after object key")
            self.pos += 1
            pairs.append((key, self.value()))
            self.skip_ws()
            c = self.peek()
            if c == ord(","):
                self.pos += 1
                continue
            if c == ord("}"):
                self.pos += 1
                return GoObject(tuple(pairs))
            raise self._err(c, "after object key:value pair")

    def arr(self) -> list[Any]:
        self.pos += 1
        items: list[Any] = []
        self.skip_ws()
        if self.peek() == ord("]"):
            self.pos += 1
            return items
        while True:
            items.append(self.value())
            self.skip_ws()
            c = self.peek()
            if c == ord(","):
                self.pos += 1
                continue
            if c == ord("]"):
                self.pos += 1
                return items
            raise self._err(c, "after array element")


def _skip_container(data: bytes, pos: int) -> int:
    """The position just past the object or array opening at ``pos`` of valid JSON, found
    without recursion (strings are stepped over whole, escapes included)."""
    depth = 0
    end = len(data)
    while pos < end:
        c = data[pos]
        if c == 0x22:  # '"'
            pos += 1
            while data[pos] != 0x22:
                pos += 2 if data[pos] == 0x5C else 1
        elif c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
            if depth == 0:
                return pos + 1
        pos += 1
    return pos


def go_json_parse_shallow(data: bytes, depth: int) -> Any:
    """:func:`go_json_parse` for a reader that looks only ``depth`` levels down: objects and
    arrays below are read as empty ones of their kind (which is all a type error names).
    Valid JSON nested past the recursion limit but within Go's 10,000 levels is read without
    recursion; anything Go's scanner refuses (deeper, or invalid) raises its error."""
    error = go_json_syntax_error(data)
    if error is not None:
        raise GoJSONSyntaxError(error)
    reader = _Reader(data, shallow=depth)
    return reader.value()


def go_json_parse(data: bytes) -> Any:
    """Parse JSON with Go's grammar and syntax-error texts.

    Objects come back as :class:`GoObject`, numbers as :class:`GoNumber`, strings as ``str``
    (invalid UTF-8 and unpaired surrogate escapes become U+FFFD, as in Go), ``true``/``false``
    as ``bool`` and ``null`` as None. Raises :class:`GoJSONSyntaxError`, whose text is the
    one of Go's scanner (:func:`apiserver.gocompat.jsonscan.go_json_syntax_error`): this
    reader finds the same inputs invalid, but Go's ``Unmarshal`` words the error as its
    ``checkValid`` pass does (a truncated literal is not "unexpected end of JSON input").
    """
    try:
        reader = _Reader(data)
        result = reader.value()
        reader.skip_ws()
        if reader.pos < len(data):
            raise reader._err(data[reader.pos], "after top-level value")
    except GoJSONSyntaxError as error:
        raise GoJSONSyntaxError(go_json_syntax_error(data) or str(error)) from None
    return result


def go_fold_name(name: str) -> str:
    """encoding/json's ``foldName``: the key that case-insensitive field matching compares."""
    out: list[str] = []
    for ch in name:
        if ch.isascii():
            out.append(ch.upper())
        else:
            folded = ch.lower().upper()
            out.append(folded if len(folded) == 1 else ch)
    return "".join(out)


def unmarshal_type_error(value: str, go_type: str, struct: str = "", field: str = "") -> str:
    """``*json.UnmarshalTypeError``'s text (Go 1.20+ wording)."""
    if struct or field:
        return (
            f"json: cannot unmarshal {value} into Go struct field {struct}.{field} "
            f"of type {go_type}"
        )
    return f"json: cannot unmarshal {value} into Go value of type {go_type}"


# --- base64 (RawURLEncoding) ----------------------------------------------------------------

_B64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_B64_MAP = {c: i for i, c in enumerate(_B64_ALPHABET)}


class _Base64Error(ValueError):
    pass


def _b64_raw_url_decode(src: bytes) -> bytes:
    """``base64.RawURLEncoding.DecodeString``: CR/LF skipped, error offsets as Go reports."""
    out = bytearray()
    si = 0
    n = len(src)
    while si < n:
        dbuf = [0, 0, 0, 0]
        dlen = 4
        j = 0
        while j < 4:
            if si == n:
                if j == 0:
                    return bytes(out)
                if j == 1:
                    raise _Base64Error(f"illegal base64 data at input byte {si - j}")
                dlen = j
                break
            c = src[si]
            si += 1
            value = _B64_MAP.get(c)
            if value is not None:
                dbuf[j] = value
                j += 1
                continue
            if c in (0x0A, 0x0D):
                continue
            raise _Base64Error(f"illegal base64 data at input byte {si - 1}")
        val = dbuf[0] << 18 | dbuf[1] << 12 | dbuf[2] << 6 | dbuf[3]
        out += bytes(((val >> 16) & 0xFF, (val >> 8) & 0xFF, val & 0xFF))[: dlen - 1]
    return bytes(out)


def _b64_raw_url_encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# --- path.Clean -----------------------------------------------------------------------------


def go_path_clean(path: str) -> str:
    """Go's ``path.Clean``: the shortest equivalent slash-separated path."""
    if path == "":
        return "."
    rooted = path[0] == "/"
    n = len(path)
    out: list[str] = []
    r = 0
    dotdot = 0
    if rooted:
        out.append("/")
        r = dotdot = 1
    while r < n:
        if path[r] == "/":
            r += 1
        elif path[r] == "." and (r + 1 == n or path[r + 1] == "/"):
            r += 1
        elif (
            path[r] == "."
            and r + 1 < n
            and path[r + 1] == "."
            and (r + 2 == n or path[r + 2] == "/")
        ):
            r += 2
            if len(out) > dotdot:
                w = len(out) - 1
                while w > dotdot and out[w] != "/":
                    w -= 1
                del out[w:]
            elif not rooted:
                if out:
                    out.append("/")
                out.extend("..")
                dotdot = len(out)
        else:
            if (rooted and len(out) != 1) or (not rooted and out):
                out.append("/")
            while r < n and path[r] != "/":
                out.append(path[r])
                r += 1
    if not out:
        return "."
    return "".join(out)


# --- the token ------------------------------------------------------------------------------


def encode_continue(key_after: str, rv: int) -> str:
    """The token for a next page that starts after ``key_after`` (relative key) at ``rv``.

    ``key_after`` is the last returned key relative to the resource prefix (``<name>`` in a
    namespace, ``<ns>/<name>`` across namespaces); a NUL is appended so that the next range
    starts just past it, exactly as the etcd3 store does.
    """
    body = (
        '{"v":'
        + go_json_string(API_VERSION)
        + ',"rv":'
        + str(int(rv))
        + ',"start":'
        + go_json_string(key_after + "\0")
        + "}"
    )
    return _b64_raw_url_encode(body.encode("utf-8", errors="surrogatepass"))


def _fail(detail: str) -> ContinueTokenError:
    return ContinueTokenError(f"invalid continue token: {detail}")


def decode_continue(token: str, key_prefix: str) -> tuple[str, int]:
    """``DecodeContinue``: the full start key (``key_prefix`` + relative key) and the rv.

    Raises :class:`ContinueTokenError` whose text is the 400 message kube-apiserver sends.
    """
    try:
        data = _b64_raw_url_decode(token.encode("utf-8", errors="surrogatepass"))
    except _Base64Error as exc:
        raise _fail(f"{_INVALID}: {exc}") from None
    try:
        try:
            parsed = go_json_parse(data)
        except RecursionError:
            # Nested deeper than this reader recurses: the token's fields are read at the
            # top level only, so deeper containers are skipped (up to Go's 10,000 levels;
            # beyond, the scanner's "exceeded max depth"), docs/hostile-input.md.
            parsed = go_json_parse_shallow(data, 1)
    except GoJSONSyntaxError as exc:
        raise _fail(f"{_INVALID}: {exc}") from None

    version = ""
    rv = 0
    start = ""
    type_error: str | None = None

    def save(message: str) -> None:
        nonlocal type_error
        if type_error is None:
            type_error = message

    if isinstance(parsed, GoObject):
        for key, value in parsed.pairs:
            name = {"v": "v", "rv": "rv", "start": "start"}.get(key) or {
                "V": "v",
                "RV": "rv",
                "START": "start",
            }.get(go_fold_name(key))
            if name is None or value is None:
                continue
            kind = go_json_kind(value)
            if name == "rv":
                if isinstance(value, GoNumber):
                    number = go_parse_int64(value.text)
                    if number is None:
                        save(
                            unmarshal_type_error(
                                f"number {value.text}", "int64", "continueToken", "rv"
                            )
                        )
                    else:
                        rv = number
                else:
                    save(unmarshal_type_error(kind, "int64", "continueToken", "rv"))
            elif isinstance(value, str):
                if name == "v":
                    version = value
                else:
                    start = value
            else:
                save(unmarshal_type_error(kind, "string", "continueToken", name))
    elif parsed is not None:
        save(unmarshal_type_error(go_json_kind(parsed), "storage.continueToken"))
    if type_error is not None:
        raise _fail(f"{_INVALID}: {type_error}")

    if version != API_VERSION:
        raise _fail(f"{ERR_UNRECOGNIZED_VERSION} {version}")
    if rv == 0:
        raise _fail(ERR_INVALID_START_RV)
    if not start:
        raise _fail(ERR_EMPTY_START_KEY)
    # Defend against path traversal: the start key must already be a clean path, so that
    # prefix + key can never range outside the resource prefix.
    key = start if start.startswith("/") else "/" + start
    cleaned = go_path_clean(key)
    if cleaned != key:
        raise _fail(f"{_INVALID}: {start}")
    return key_prefix + cleaned[1:], rv


__all__ = [
    "API_VERSION",
    "ContinueTokenError",
    "GoJSONSyntaxError",
    "decode_continue",
    "encode_continue",
    "go_decode_utf8",
    "go_fold_name",
    "go_json_parse",
    "go_json_parse_shallow",
    "go_path_clean",
    "unmarshal_type_error",
]
