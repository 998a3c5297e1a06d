"""Field selectors: the ``fieldSelector`` query parameter, parsed and matched as kube does.

Follows k8s.io/apimachinery ``pkg/fields/selector.go``: terms split on unescaped ``,`` and
sorted; each term split at the first ``!=``, ``==`` or ``=``; values unescaped (``\\,``,
``\\=``, ``\\\\``; any other escape, a lone trailing ``\\`` or an unescaped ``,``/``=`` in a
value is an error). ``==`` and ``=`` mean the same. Error texts are what kube-apiserver puts
in the 400, e.g. ``invalid selector: 'a'; can't understand 'a'``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from apiserver.apimachinery.labels import SelectorParseError

EQUALS = "="
NOT_EQUALS = "!="

_TERM_OPERATORS = ("!=", "==", "=")


@attrs.frozen
class Requirement:
    """``field op value``; ``op`` is ``=`` (for ``=`` and ``==``) or ``!=``."""

    field: str
    op: str
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        have = fields.get(self.field, "")
        return have == self.value if self.op == EQUALS else have != self.value

    def __str__(self) -> str:
        return f"{self.field}{self.op}{escape_value(self.value)}"


def escape_value(value: str) -> str:
    """``fields.EscapeValue``: backslash-escape ``\\``, ``,`` and ``=``."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def unescape_value(value: str) -> str:
    """``fields.UnescapeValue`` with Go's error texts."""
    if not any(ch in value for ch in "\\,="):
        return value
    out: list[str] = []
    in_slash = False
    for ch in value:
        if in_slash:
            if ch in "\\,=":
                out.append(ch)
            else:
                raise SelectorParseError(f"invalid field selector: invalid escape sequence: \\{ch}")
            in_slash = False
            continue
        if ch == "\\":
            in_slash = True
        elif ch in ",=":
            # Go prints the rune with %v: its number.
            raise SelectorParseError(
                f"invalid field selector: unescaped character in value: {ord(ch)}"
            )
        else:
            out.append(ch)
    if in_slash:
        raise SelectorParseError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_terms(selector: str) -> list[str]:
    if not selector:
        return []
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(selector):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


@attrs.frozen
class FieldSelector:
    """AND of requirements, in the order ``fields.ParseSelector`` leaves them."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, fields: Mapping[str, str]) -> bool:
        """True when every term holds; a field absent from ``fields`` reads as ``""``."""
        return all(r.matches(fields) for r in self.requirements)

    def requires_exact_match(self, field: str) -> str | None:
        """The value of the first ``=`` term on ``field``, or None (``RequiresExactMatch``)."""
        for r in self.requirements:
            if r.op == EQUALS and r.field == field:
                return r.value
        return None

    def transform(self, fn: Callable[[str, str], tuple[str, str]]) -> FieldSelector:
        """``Selector.Transform``: map each term; a term mapped to ``("", "")`` is dropped.

        ``fn`` may raise (for example a 400 ``field label not supported: x``); the error
        propagates unchanged.
        """
        out: list[Requirement] = []
        for r in self.requirements:
            field, value = fn(r.field, r.value)
            if not field and not value:
                continue
            out.append(Requirement(field, r.op, value))
        return FieldSelector(tuple(out))

    def fields(self) -> set[str]:
        return {r.field for r in self.requirements}

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


def parse_field_selector(text: str) -> FieldSelector:
    """``fields.ParseSelector``; raises :class:`SelectorParseError` with kube's message."""
    parts = sorted(_split_terms(text), key=lambda p: p.encode("utf-8", errors="surrogatepass"))
    requirements: list[Requirement] = []
    for part in parts:
        if part == "":
            continue
        split = _split_term(part)
        if split is None:
            raise SelectorParseError(f"invalid selector: '{text}'; can't understand '{part}'")
        lhs, op, rhs = split
        value = unescape_value(rhs)
        requirements.append(Requirement(lhs, NOT_EQUALS if op == "!=" else EQUALS, value))
    return FieldSelector(tuple(requirements))


def one_term_equal_selector(field: str, value: str) -> FieldSelector:
    """``fields.OneTermEqualSelector`` (a path name acting as ``metadata.name=<name>``)."""
    return FieldSelector((Requirement(field, EQUALS, value),))


EVERYTHING = FieldSelector()

__all__ = [
    "EVERYTHING",
    "FieldSelector",
    "Requirement",
    "SelectorParseError",
    "escape_value",
    "one_term_equal_selector",
    "parse_field_selector",
    "unescape_value",
]
