"""Label selectors: the ``labelSelector`` query parameter, parsed and matched as kube does.

Follows k8s.io/apimachinery ``pkg/labels/selector.go`` (its Lexer, Parser, ``NewRequirement``,
``Requirement.Matches`` and ``String``) and ``pkg/api/validate/content/kube.go`` /
``pkg/util/validation/validation.go`` for key and value rules. Error texts are the ones
kube-apiserver returns in the 400 Status, e.g. ``unable to parse requirement: found '',
expected: identifier``. Written by hand because no Python library reproduces that grammar and
those messages.

Grammar (whitespace is `` \\t\\r\\n``; ``,`` is AND)::

    selector    := requirement ("," requirement)*
    requirement := ["!"] KEY [ ("in" | "notin") "(" values ")"
                             | ("=" | "==" | "!=" | ">" | "<") VALUE ]

Length wording: kube 1.35 era messages say ``must be no more than 63 characters``
(``validation.MAX_LEN_UNIT``); apimachinery HEAD says ``bytes``. Lengths are counted in UTF-8 bytes
either way, as Go's ``len`` does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from apiserver.apimachinery.errors import (
    FieldError,
    StatusError,
    aggregate_text,
    bad_request,
    invalid,
)
from apiserver.apimachinery.validation import (
    is_dns1123_subdomain,
    is_label_key,
    is_valid_label_value,
    max_len_error,
    regex_error,
)
from apiserver.gocompat.intparse import go_parse_int64

# --- key and value validation (validate/content) --------------------------------------------

# The validators and their messages live in :mod:`apiserver.apimachinery.validation` (one copy
# for object metadata and selectors). ``is_qualified_name`` here is ``IsLabelKey`` (its
# message for more than one ``/`` says ``a valid label key``), under the name this module has
# always exported.
is_qualified_name = is_label_key
is_label_value = is_valid_label_value


# --- selector model --------------------------------------------------------------------------


class SelectorParseError(ValueError):
    """A selector that kube-apiserver refuses; ``str()`` is the 400 message."""

    def to_status(self) -> StatusError:
        """The 400 BadRequest StatusError carrying this message."""
        return bad_request(str(self))


# selection.Operator values, as Go spells them.
IN = "in"
NOT_IN = "notin"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
GREATER_THAN = "gt"
LESS_THAN = "lt"
EXISTS = "exists"
DOES_NOT_EXIST = "!"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)


@attrs.frozen
class Requirement:
    """One term: ``key`` related by ``operator`` to ``values`` (sorted, distinct)."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """``Requirement.Matches``: absent keys satisfy only ``!=``, ``notin`` and ``!``."""
        op = self.operator
        if op in (IN, EQUALS, DOUBLE_EQUALS):
            return self.key in labels and labels[self.key] in self.values
        if op in (NOT_IN, NOT_EQUALS):
            return self.key not in labels or labels[self.key] not in self.values
        if op == EXISTS:
            return self.key in labels
        if op == DOES_NOT_EXIST:
            return self.key not in labels
        if op in (GREATER_THAN, LESS_THAN):
            if self.key not in labels or len(self.values) != 1:
                return False
            have = go_parse_int64(labels[self.key])
            want = go_parse_int64(self.values[0])
            if have is None or want is None:
                return False
            return have > want if op == GREATER_THAN else have < want
        return False

    def __str__(self) -> str:
        """``Requirement.String``: ``!k``, ``k``, ``k=v``, ``k in (a,b)``, ``k>1``..."""
        op = self.operator
        if op == DOES_NOT_EXIST:
            return "!" + self.key
        if op == EXISTS:
            return self.key
        sign = {
            EQUALS: "=",
            DOUBLE_EQUALS: "==",
            NOT_EQUALS: "!=",
            IN: " in ",
            NOT_IN: " notin ",
            GREATER_THAN: ">",
            LESS_THAN: "<",
        }[op]
        values = self.values[0] if len(self.values) == 1 else ",".join(sorted(self.values))
        if op in (IN, NOT_IN):
            values = "(" + values + ")"
        return self.key + sign + values


@attrs.frozen
class LabelSelector:
    """AND of requirements, kept sorted by key (stable) as ``labels.Parse`` leaves them."""

    requirements: tuple[Requirement, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    def requires_exact_match(self, label: str) -> str | None:
        """``RequiresExactMatch``: the single value an ``=``/``==``/one-value ``in`` demands."""
        for r in self.requirements:
            if r.key == label:
                if r.operator in (EQUALS, DOUBLE_EQUALS, IN) and len(r.values) == 1:
                    return r.values[0]
                return None
        return None

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


# --- lexer -----------------------------------------------------------------------------------

_ERROR = "error"
_EOS = "eos"
_CLOSE_PAR = "closepar"
_COMMA = "comma"
_NOT = "not"
_DOUBLE_EQ = "doubleeq"
_EQ = "eq"
_GT = "gt"
_IDENT = "ident"
_IN = "in"
_LT = "lt"
_NOT_EQ = "noteq"
_NOT_IN = "notin"
_OPEN_PAR = "openpar"

_STRING_TO_TOKEN = {
    ")": _CLOSE_PAR,
    ",": _COMMA,
    "!": _NOT,
    "==": _DOUBLE_EQ,
    "=": _EQ,
    ">": _GT,
    "in": _IN,
    "<": _LT,
    "!=": _NOT_EQ,
    "notin": _NOT_IN,
    "(": _OPEN_PAR,
}

_WHITESPACE = " \t\r\n"
_SPECIAL = "=!(),><"


class _Lexer:
    """Go's byte-wise Lexer; a NUL character reads like the end of input, as in Go."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.pos = 0

    def read(self) -> str:
        if self.pos < len(self.s):
            ch = self.s[self.pos]
            self.pos += 1
            return ch
        return "\0"

    def unread(self) -> None:
        self.pos -= 1

    def scan_id_or_keyword(self) -> tuple[str, str]:
        buf: list[str] = []
        while True:
            ch = self.read()
            if ch == "\0":
                break
            if ch in _SPECIAL or ch in _WHITESPACE:
                self.unread()
                break
            buf.append(ch)
        literal = "".join(buf)
        return _STRING_TO_TOKEN.get(literal, _IDENT), literal

    def scan_special_symbol(self) -> tuple[str, str]:
        last: tuple[str, str] | None = None
        buf = ""
        while True:
            ch = self.read()
            if ch == "\0":
                break
            if ch in _SPECIAL:
                buf += ch
                token = _STRING_TO_TOKEN.get(buf)
                if token is not None:
                    last = (token, buf)
                elif last is not None:
                    self.unread()
                    break
            else:
                self.unread()
                break
        if last is None:
            return _ERROR, f"error expected: keyword found '{buf}'"
        return last

    def lex(self) -> tuple[str, str]:
        ch = self.read()
        while ch in _WHITESPACE and ch != "\0":
            ch = self.read()
        if ch == "\0":
            return _EOS, ""
        self.unread()
        if ch in _SPECIAL:
            return self.scan_special_symbol()
        return self.scan_id_or_keyword()


# --- parser ----------------------------------------------------------------------------------


class _RequirementError(Exception):
    """An error inside one requirement; ``parse`` prefixes ``unable to parse requirement: ``."""


class _Parser:
    def __init__(self, text: str) -> None:
        lexer = _Lexer(text)
        self.items: list[tuple[str, str]] = []
        while True:
            token, literal = lexer.lex()
            self.items.append((token, literal))
            if token == _EOS:
                break
        self.position = 0

    @staticmethod
    def _in_values(token: str) -> str:
        return _IDENT if token in (_IN, _NOT_IN) else token

    def lookahead(self, values: bool) -> tuple[str, str]:
        token, literal = self.items[self.position]
        return (self._in_values(token) if values else token), literal

    def consume(self, values: bool) -> tuple[str, str]:
        self.position += 1
        token, literal = self.items[self.position - 1]
        return (self._in_values(token) if values else token), literal

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead(True)
            if token in (_IDENT, _NOT):
                try:
                    requirements.append(self.parse_requirement())
                except _RequirementError as exc:
                    raise SelectorParseError(f"unable to parse requirement: {exc}") from None
                token, literal = self.consume(True)
                if token == _EOS:
                    return requirements
                if token == _COMMA:
                    token2, literal2 = self.lookahead(True)
                    if token2 not in (_IDENT, _NOT):
                        raise SelectorParseError(
                            f"found '{literal2}', expected: identifier after ','"
                        )
                    continue
                raise SelectorParseError(f"found '{literal}', expected: ',' or 'end of string'")
            if token == _EOS:
                return requirements
            raise SelectorParseError(
                f"found '{literal}', expected: !, identifier, or 'end of string'"
            )

    def parse_requirement(self) -> Requirement:
        key, operator = self.parse_key_and_infer_operator()
        if operator in (EXISTS, DOES_NOT_EXIST):
            return new_requirement(key, operator, [])
        operator = self.parse_operator()
        if operator in (IN, NOT_IN):
            values = self.parse_values()
        else:
            values = self.parse_exact_value()
        return new_requirement(key, operator, sorted(values))

    def parse_key_and_infer_operator(self) -> tuple[str, str]:
        operator = ""
        token, literal = self.consume(True)
        if token == _NOT:
            operator = DOES_NOT_EXIST
            token, literal = self.consume(True)
        if token != _IDENT:
            raise _RequirementError(f"found '{literal}', expected: identifier")
        errs = is_label_key(literal)
        if errs:
            # labels.validateLabelKey with the parser's nil path: Go prints it as "<nil>".
            raise _RequirementError(str(invalid("<nil>", literal, "; ".join(errs))))
        if self.lookahead(True)[0] in (_EOS, _COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        return literal, operator

    def parse_operator(self) -> str:
        token, literal = self.consume(False)
        operator = {
            _IN: IN,
            _EQ: EQUALS,
            _DOUBLE_EQ: DOUBLE_EQUALS,
            _GT: GREATER_THAN,
            _LT: LESS_THAN,
            _NOT_IN: NOT_IN,
            _NOT_EQ: NOT_EQUALS,
        }.get(token)
        if operator is None:
            raise _RequirementError(f"found '{literal}', expected: {', '.join(_BINARY_OPERATORS)}")
        return operator

    def parse_values(self) -> set[str]:
        token, literal = self.consume(True)
        if token != _OPEN_PAR:
            raise _RequirementError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead(True)
        if token in (_IDENT, _COMMA):
            values = self.parse_identifiers_list()
            if self.consume(True)[0] != _CLOSE_PAR:
                raise _RequirementError(f"found '{literal}', expected: ')'")
            return values
        if token == _CLOSE_PAR:
            self.consume(True)
            return {""}
        raise _RequirementError(f"found '{literal}', expected: ',', ')' or identifier")

    def parse_identifiers_list(self) -> set[str]:
        values: set[str] = set()
        while True:
            token, literal = self.consume(True)
            if token == _IDENT:
                values.add(literal)
                token2, literal2 = self.lookahead(True)
                if token2 == _COMMA:
                    continue
                if token2 == _CLOSE_PAR:
                    return values
                raise _RequirementError(f"found '{literal2}', expected: ',' or ')'")
            if token == _COMMA:
                if not values:
                    values.add("")
                token2, _ = self.lookahead(True)
                if token2 == _CLOSE_PAR:
                    values.add("")
                    return values
                if token2 == _COMMA:
                    self.consume(True)
                    values.add("")
                continue
            raise _RequirementError(f"found '{literal}', expected: ',', or identifier")

    def parse_exact_value(self) -> set[str]:
        token, _ = self.lookahead(True)
        if token in (_EOS, _COMMA):
            return {""}
        token, literal = self.consume(True)
        if token == _IDENT:
            return {literal}
        raise _RequirementError(f"found '{literal}', expected: identifier")


def new_requirement(key: str, operator: str, values: Sequence[str]) -> Requirement:
    """``labels.NewRequirement``: validates key, value count and values, all errors at once.

    Raises ``_RequirementError`` whose text is the aggregate of the field errors.
    """
    errs: list[FieldError] = []
    key_errs = is_label_key(key)
    if key_errs:
        errs.append(invalid("key", key, "; ".join(key_errs)))
    vals = list(values)
    if operator in (IN, NOT_IN):
        if not vals:
            errs.append(
                invalid("values", vals, "for 'in', 'notin' operators, values set can't be empty")
            )
    elif operator in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            errs.append(
                invalid("values", vals, "exact-match compatibility requires one single value")
            )
    elif operator in (EXISTS, DOES_NOT_EXIST):
        if vals:
            errs.append(
                invalid("values", vals, "values set must be empty for exists and does not exist")
            )
    elif operator in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            errs.append(
                invalid("values", vals, "for 'Gt', 'Lt' operators, exactly one value is required")
            )
        for i, value in enumerate(vals):
            if go_parse_int64(value) is None:
                errs.append(
                    invalid(
                        f"values[{i}]",
                        value,
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    )
                )
    for i, value in enumerate(vals):
        value_errs = is_valid_label_value(value)
        if value_errs:
            errs.append(invalid(f"values[{i}][{key}]", value, "; ".join(value_errs)))
    if errs:
        raise _RequirementError(aggregate_text(errs))
    return Requirement(key, operator, tuple(vals))


def parse_label_selector(text: str) -> LabelSelector:
    """``labels.Parse``: the selector, or :class:`SelectorParseError` with kube's message."""
    requirements = _Parser(text).parse()
    # sort.Sort(ByKey) on the few requirements a selector has is an insertion sort: stable.
    requirements.sort(key=lambda r: r.key.encode("utf-8", errors="surrogatepass"))
    return LabelSelector(tuple(requirements))


EVERYTHING = LabelSelector()

__all__ = [
    "EVERYTHING",
    "LabelSelector",
    "Requirement",
    "SelectorParseError",
    "is_dns1123_subdomain",
    "is_label_value",
    "is_qualified_name",
    "max_len_error",
    "parse_label_selector",
    "regex_error",
]
