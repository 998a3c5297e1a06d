"""Go's JSON syntax check: the state machine of ``encoding/json``'s ``scanner.go``, so that
syntax errors read exactly like kube-apiserver's (``invalid character 'x' looking for
beginning of value``, ``unexpected end of JSON input``).

``json.Unmarshal`` runs this check (``checkValid``) before decoding anything, so its text is
the error of every Go-style JSON reader here: request bodies, patches, continue tokens,
DeleteOptions. At the end of the input the scanner is fed one space (``scanner.eof``), which
is why a truncated literal reads ``invalid character ' ' in literal true (expecting 'r')``
rather than ``unexpected end of JSON input``. Python's ``json`` module words its errors
differently and accepts ``NaN``.
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver.gocompat.quote import go_quote_char

_SPACE = frozenset(b" \t\r\n")

MAX_NESTING_DEPTH = 10000
"""``maxNestingDepth`` (encoding/json scanner.go): one more open container is a syntax error,
``invalid character '{' exceeded max depth``."""


_DIGITS = frozenset(b"0123456789")


_HEX = frozenset(b"0123456789abcdefABCDEF")


class _Scanner:
    """``encoding/json``'s scanner: one method per state, a stack of open containers."""

    OBJECT_KEY, OBJECT_VALUE, ARRAY_VALUE = 0, 1, 2

    def __init__(self) -> None:
        self.step: Callable[[int], None] = self.begin_value
        self.stack: list[int] = []
        self.end_top = False
        self.err: str | None = None

    def fail(self, c: int, context: str) -> None:
        self.step = self.stop
        self.err = f"invalid character {go_quote_char(c)} {context}"

    def stop(self, c: int) -> None:
        return None

    def begin_value_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("]"):
            self.end_value(c)
            return
        self.begin_value(c)

    def begin_value(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("{"):
            self.step = self.begin_string_or_empty
            self.stack.append(self.OBJECT_KEY)
            if len(self.stack) > MAX_NESTING_DEPTH:
                self.fail(c, "exceeded max depth")
        elif c == ord("["):
            self.step = self.begin_value_or_empty
            self.stack.append(self.ARRAY_VALUE)
            if len(self.stack) > MAX_NESTING_DEPTH:
                self.fail(c, "exceeded max depth")
        elif c == ord('"'):
            self.step = self.in_string
        elif c == ord("-"):
            self.step = self.neg
        elif c == ord("0"):
            self.step = self.zero
        elif c == ord("t"):
            self.step = self._literal("true", 1)
        elif c == ord("f"):
            self.step = self._literal("false", 1)
        elif c == ord("n"):
            self.step = self._literal("null", 1)
        elif 0x31 <= c <= 0x39:
            self.step = self.one
        else:
            self.fail(c, "looking for beginning of value")

    def begin_string_or_empty(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord("}"):
            self.stack[-1] = self.OBJECT_VALUE
            self.end_value(c)
            return
        self.begin_string(c)

    def begin_string(self, c: int) -> None:
        if c in _SPACE:
            return
        if c == ord('"'):
            self.step = self.in_string
            return
        self.fail(c, "looking for beginning of object key string")

    def end_value(self, c: int) -> None:
        if not self.stack:
            self.step = self.end_top_step
            self.end_top = True
            self.end_top_step(c)
            return
        if c in _SPACE:
            self.step = self.end_value
            return
        top = self.stack[-1]
        if top == self.OBJECT_KEY:
            if c == ord(":"):
                self.stack[-1] = self.OBJECT_VALUE
                self.step = self.begin_value
                return
            self.fail(c, "after object key")
        elif top == self.OBJECT_VALUE:
            if c == ord(","):
                self.stack[-1] = self.OBJECT_KEY
                self.step = self.begin_string
                return
            if c == ord("}"):
                self.pop()
                return
            self.fail(c, "after object key:value pair")
        else:
            if c == ord(","):
                self.step = self.begin_value
                return
            if c == ord("]"):
                self.pop()
                return
            self.fail(c, "after array element")

    def pop(self) -> None:
        self.stack.pop()
        if not self.stack:
            self.step = self.end_top_step
            self.end_top = True
        else:
            self.step = self.end_value

    def end_top_step(self, c: int) -> None:
        if c not in _SPACE:
            self.fail(c, "after top-level value")

    def in_string(self, c: int) -> None:
        if c == ord('"'):
            self.step = self.end_value
        elif c == ord("\\"):
            self.step = self.in_string_esc
        elif c < 0x20:
            self.fail(c, "in string literal")

    def in_string_esc(self, c: int) -> None:
        if c in b'bfnrt\\/"':
            self.step = self.in_string
        elif c == ord("u"):
            self.step = self._esc_u(4)
        else:
            self.fail(c, "in string escape code")

    def _esc_u(self, remaining: int) -> Callable[[int], None]:
        def step(c: int) -> None:
            if c not in _HEX:
                self.fail(c, "in \\u hexadecimal character escape")
            elif remaining == 1:
                self.step = self.in_string
            else:
                self.step = self._esc_u(remaining - 1)

        return step

    def neg(self, c: int) -> None:
        if c == ord("0"):
            self.step = self.zero
        elif 0x31 <= c <= 0x39:
            self.step = self.one
        else:
            self.fail(c, "in numeric literal")

    def one(self, c: int) -> None:
        if c in _DIGITS:
            return
        self.zero(c)

    def zero(self, c: int) -> None:
        if c == ord("."):
            self.step = self.dot
        elif c in b"eE":
            self.step = self.exp
        else:
            self.end_value(c)

    def dot(self, c: int) -> None:
        if c in _DIGITS:
            self.step = self.dot0
        else:
            self.fail(c, "after decimal point in numeric literal")

    def dot0(self, c: int) -> None:
        if c in _DIGITS:
            return
        if c in b"eE":
            self.step = self.exp
            return
        self.end_value(c)

    def exp(self, c: int) -> None:
        if c in b"+-":
            self.step = self.exp_sign
            return
        self.exp_sign(c)

    def exp_sign(self, c: int) -> None:
        if c in _DIGITS:
            self.step = self.exp0
        else:
            self.fail(c, "in exponent of numeric literal")

    def exp0(self, c: int) -> None:
        if c in _DIGITS:
            return
        self.end_value(c)

    def _literal(self, word: str, at: int) -> Callable[[int], None]:
        def step(c: int) -> None:
            if c != ord(word[at]):
                self.fail(c, f"in literal {word} (expecting {go_quote_char(ord(word[at]))})")
            elif at + 1 == len(word):
                self.step = self.end_value
            else:
                self.step = self._literal(word, at + 1)

        return step


def go_json_syntax_error(data: bytes) -> str | None:
    """The text of the ``*json.SyntaxError`` Go's ``json.Unmarshal`` gives, or None if valid."""
    scanner = _Scanner()
    for c in data:
        scanner.step(c)
        if scanner.err is not None:
            return scanner.err
    if scanner.end_top:
        return None
    scanner.step(0x20)
    if scanner.end_top:
        return None
    return scanner.err or "unexpected end of JSON input"


__all__ = ["MAX_NESTING_DEPTH", "go_json_syntax_error"]
