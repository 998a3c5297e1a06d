"""JSON nested past the fast parsers' limits, read without recursion, bounded as Go bounds it.

orjson stops at 1,024 levels and Python's :mod:`json` recurses (a RecursionError from about
1,000); Go's ``encoding/json`` (and ``sigs.k8s.io/json``, its fork that kube-apiserver decodes
with) accepts up to ``maxNestingDepth`` = 10,000 levels and fails beyond with the scanner's
``invalid character '{' exceeded max depth`` (``scanner.go`` ``pushParseState``).

:func:`loads` is the fallback for that range only: the callers try their fast parser first
and come here when it reports its depth limit, so a shallow body never pays for this reader.
It keeps an explicit stack (no recursion, whatever the depth); each scalar token is handed to
the parser the caller would have used (orjson for request bodies, :mod:`json` where objects
keep their duplicate keys as :class:`~apiserver.gocompat.jsonvalues.Pairs`), so numbers and
strings come out exactly as the fast path would give them. A 10,000-level document is a few
tens of KiB and reads in milliseconds; memory is linear in the input.

Syntax errors are worded as Go's scanner words them
(:func:`apiserver.gocompat.jsonscan.go_json_syntax_error`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

from apiserver.gocompat.jsonscan import MAX_NESTING_DEPTH, go_json_syntax_error
from apiserver.gocompat.jsonvalues import Pairs

MAX_DEPTH_TEXT = "exceeded max depth"
#: The largest input this reader takes (512 KiB). It costs about a microsecond a token on
#: the reactor thread, where orjson refuses any deep input in milliseconds: a 3 MiB body of
#: small tokens inside 1,025 levels would hold every other request for seconds. A document
#: that only nests deep is small (10,000 levels of ``{"a":`` are under 64 KiB); a larger one
#: is refused with Go's max-depth text, where Go would read it (docs/hostile-input.md).
MAX_INPUT_BYTES = 512 * 1024

# One token after optional white space: a structural byte, a string, a number or a literal.
# The string and number shapes are loose on purpose: the token's own parser checks escapes,
# UTF-8 and number syntax, and anything odd sends the whole input to Go's scanner for words.
# A separator (``,`` or ``:``) comes with the token after it, to halve the steps. A plain
# string (no escape, no control character) and a short integer are read here; any other
# string or number goes to the caller's parser.
_TOKEN = re.compile(
    rb'[ \t\r\n]*([,:]?)[ \t\r\n]*(?:([{}\[\],:])|"([^"\\\x00-\x1f]*)"|("(?:[^"\\]|\\.)*")'
    rb"|(-?(?:0|[1-9][0-9]*)(?![0-9.eE+\-]))|(-?[0-9][0-9.eE+\-]*)|(true|false|null))",
    re.DOTALL,
)
_TRAILING = re.compile(rb"[ \t\r\n]*")
_LITERALS: dict[bytes, Any] = {b"true": True, b"false": False, b"null": None}


class DeepJSONError(ValueError):
    """Invalid JSON or nested past Go's limit; ``str()`` is Go's ``*json.SyntaxError`` text."""


def _fail(data: bytes) -> DeepJSONError:
    return DeepJSONError(go_json_syntax_error(data) or "unexpected end of JSON input")


def max_depth_error(opener: int) -> str:
    """Go's text when the ``opener`` (``{`` or ``[``) one past the limit is read."""
    return f"invalid character {chr(opener)!r} {MAX_DEPTH_TEXT}"


def loads(data: bytes, *, pairs: bool = False, max_depth: int = MAX_NESTING_DEPTH) -> Any:
    """``data`` decoded without recursion: dicts (orjson's values), or with ``pairs``
    objects as :class:`Pairs` (``json.loads(..., object_pairs_hook=Pairs)``'s values).

    Raises :class:`DeepJSONError` with Go's text for a syntax error or more than
    ``max_depth`` nested containers, and the max-depth text for an input over
    :data:`MAX_INPUT_BYTES`.
    """
    if len(data) > MAX_INPUT_BYTES:
        opener = data.lstrip(b" \t\r\n")[:1]
        raise DeepJSONError(max_depth_error(opener[0] if opener in (b"{", b"[") else 123))
    scalar: Callable[[bytes], Any] = json.loads if pairs else orjson.loads
    match = _TOKEN.match
    # Each open container: [container, its pending key, True for an object]
    stack: list[list[Any]] = []
    pos = 0
    end = len(data)
    result: Any = None
    # The states: 0 a value, 1 a value or ']', 2 a key or '}', 3 a key, 4 ':' (then a
    # value), 5 ',' (then a key or value) or a closer.
    state = 0
    while True:
        token = match(data, pos)
        if token is None:
            raise _fail(data)
        pos = token.end()
        separator, punct, plain, string, integer, number, literal = token.groups()
        if plain is not None:
            try:
                string = plain.decode()
            except UnicodeDecodeError:
                raise _fail(data) from None
        if separator:
            # Only after a key (':') or a member or item (','); then the token is read in
            # the state the separator leads to.
            if state == 4 and separator == b":":
                state = 0
            elif state == 5 and separator == b",":
                state = 3 if stack[-1][2] else 0
            else:
                raise _fail(data)
        elif state == 4:
            raise _fail(data)
        if state == 5:
            top = stack[-1]
            closer = b"}" if top[2] else b"]"
            if punct != closer:
                raise _fail(data)
            stack.pop()
            value = top[0]
            if pairs and closer == b"}":
                value = Pairs(value)
        elif state in (2, 3):
            if punct == b"}" and state == 2:
                top = stack.pop()
                value = Pairs(top[0]) if pairs else top[0]
            elif plain is not None:
                stack[-1][1] = string
                state = 4
                continue
            elif string is not None:
                try:
                    stack[-1][1] = scalar(string)
                except ValueError:
                    raise _fail(data) from None
                state = 4
                continue
            else:
                raise _fail(data)
        else:
            if punct == b"{" or punct == b"[":
                if len(stack) >= max_depth:
                    raise DeepJSONError(max_depth_error(punct[0]))
                if punct == b"[":
                    stack.append([[], None, False])
                    state = 1
                else:
                    stack.append([[] if pairs else {}, None, True])
                    state = 2
                continue
            if punct == b"]" and state == 1:
                value = stack.pop()[0]
            elif punct is not None:
                raise _fail(data)
            elif plain is not None:
                value = string
            elif literal is not None:
                value = _LITERALS[literal]
            elif integer is not None and (pairs or len(integer) < 19):
                value = int(integer)
            else:
                try:
                    value = scalar(string if string is not None else integer or number)
                except ValueError:
                    raise _fail(data) from None
        # A value is complete: put it into its parent, or it is the document.
        if not stack:
            result = value
            break
        top = stack[-1]
        container = top[0]
        if not top[2]:
            container.append(value)
        elif pairs:
            container.append((top[1], value))
        else:
            container[top[1]] = value
        state = 5
    if _TRAILING.match(data, pos).end() != end:  # type: ignore[union-attr]
        raise _fail(data)
    return result
