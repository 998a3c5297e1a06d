"""The one small CEL engine behind authentication and authorization configurations.

kube-apiserver evaluates CEL (cel-go) in two places this server implements:

- ``AuthenticationConfiguration`` claim mappings, claim validation rules and user validation
  rules (``AS/pkg/authentication/cel``), over ``claims`` or ``user`` --
  :mod:`apiserver.auth.authn.cel`;
- ``AuthorizationConfiguration`` webhook ``matchConditions`` (``AS/pkg/authorization/cel``),
  over ``request``, a SubjectAccessReviewSpec -- :mod:`apiserver.auth.authz.cel`.

No CEL implementation ships with our dependencies, and a complete one is far more than these
expressions need, so this module implements the subset they use: a lexer, a parser to one
syntax tree, and an evaluator with CEL's semantics for it. Everything outside the subset is
refused when the configuration is loaded, so a server never starts with an expression it
would evaluate differently.

The two uses were first written separately and grew different subsets, different error
texts and a few different evaluation details. Those texts are what users read at start-up
and in logs, and tests pin them, so they are kept exactly: a :class:`Dialect` carries each
use's wording, the features it accepts, and the evaluation details in which the two differ
(each field says which side does what, and which one is cel-go's behaviour). The two
modules named above hold only their dialect, their entry points and (authorization) the
static check of field names against the SubjectAccessReviewSpec.

Supported: literals (strings ``'x'``/``"x"``/``r'x'`` with the usual escapes, integers,
floats, ``true``/``false``/``null``, lists); identifiers, field selection ``a.f``, indexing
``a[i]``; ``! -`` (unary), ``* / %``, ``+ -``, ``== != < <= > >= in``, ``&& ||`` (with CEL's
commutative error handling), ``c ? a : b``; ``has(a.f)``; the functions, methods and
comprehension macros a dialect lists; optional selection ``a.?f`` where a dialect enables it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs


class CELCompileError(ValueError):
    """The expression is not CEL, or not in the subset (a start-up error for its file)."""


class CELEvaluationError(Exception):
    """Evaluation failed: the expression is fine, the data does not fit it."""


@attrs.frozen
class Optional_:
    """CEL's ``optional_type`` value (``a.?f``)."""

    present: bool
    value: Any = None


# --- dialects -------------------------------------------------------------------------------

Env = Mapping[str, Any]
#: A function or method: the argument counts it takes, and its implementation (a method gets
#: its target first).
Builtin = tuple[tuple[int, ...], Callable[..., Any]]


@attrs.frozen
class Dialect:
    """What one user of the engine accepts, how it words errors, and how it evaluates.

    Message fields are ``str.format`` templates; the fields each one may use are named in
    its comment.
    """

    # -- lexer --
    #: ``a.?f`` (optional selection) is a token; without it, ``.?`` is ``.`` then ``?``.
    optional_syntax: bool
    #: ``0X1F`` is a hex literal (CEL itself spells only ``0x``).
    upper_hex_prefix: bool
    #: A character no token starts with: ``{char}``, ``{pos}``.
    msg_bad_char: str
    #: An unsigned literal ``1u``.
    msg_unsigned: str
    #: A bad string escape: ``{char}`` (after the backslash), ``{pos}`` (token start plus its
    #: offset inside the quotes).
    msg_bad_escape: str

    # -- parser --
    #: The parser refuses names other than the declared variables (and macro variables in
    #: scope) with ``msg_undeclared``; otherwise a check after parsing must do it.
    check_names: bool
    #: ``a ? b ? c : d : e`` parses (CEL's grammar wants the middle operand parenthesized).
    nested_ternary: bool
    #: ``*``, ``/`` and ``%`` are supported; otherwise ``msg_operator`` (``{op}``).
    arithmetic: bool
    msg_operator: str
    #: ``a < b < c`` parses (as CEL's grammar does); otherwise ``msg_chained``.
    chained_comparisons: bool
    msg_chained: str
    #: Call arguments are a comma list (trailing comma allowed) checked after parsing:
    #: ``has(x)`` must get one selection, a macro a name and a predicate. Otherwise
    #: ``has(`` takes exactly one expression, a macro's first token must be a name, and a
    #: trailing comma is a syntax error.
    generic_call_args: bool
    #: Expected one token, found another: ``{want}``, ``{value}`` (the token's value, None at
    #: the end) and ``{shown}`` (``end of input`` or the value's repr).
    msg_expected: str
    #: Text after a complete expression: ``{value}``, ``{pos}``.
    msg_trailing: str
    #: No name after ``.``: ``{value}``.
    msg_field_name: str
    #: The expression ends where an operand should start.
    msg_unexpected_end: str
    #: A token that cannot start an operand: ``{value}``, ``{shown}``.
    msg_unexpected: str
    #: ``{``: map literals (None: ``msg_unexpected``).
    msg_map_literal: str | None
    #: A leading ``.``: qualified names (None: ``msg_unexpected``).
    msg_qualified_name: str | None
    #: An unknown function or method: ``{name}``.
    msg_unknown_function: str
    #: A known one with a wrong argument count: ``{name}``.
    msg_arity: str
    #: A macro whose first argument is not a variable name: ``{name}``.
    msg_macro_variable: str
    #: A name that is not declared (parser check): ``{name}``.
    msg_undeclared: str
    functions: Mapping[str, Builtin]
    methods: Mapping[str, Builtin]
    macros: frozenset[str]

    # -- evaluation --
    #: CEL's heterogeneous equality (cel-go), element by element in lists and maps; otherwise
    #: both sides of the same kind and equal as Python values (``[1] == [true]`` holds).
    cel_equality: bool
    #: ``false < true`` is defined (it is in CEL); otherwise no such overload.
    bool_ordering: bool
    #: How a missing overload of ``<`` names the operator: ``{op}`` (cel-go: ``_<_``).
    ordering_overload: str
    #: Selecting a field of something that is not a map is "no such overload: select(...)";
    #: otherwise "no such key: <field>".
    select_overload_error: bool
    #: ``has()`` on something that is not a map: None for "no such overload: has(...)".
    msg_has_non_map: str | None
    #: A list index out of range: ``{index}``.
    msg_index_range: str
    #: A list index that is not an int is "no such overload: _[_](...)" (a bool counts as an
    #: int); otherwise only ints (not bools) index lists and anything else is "no such key".
    index_overload_error: bool
    #: With errors on both sides of ``&&``/``||``, the left one is raised (cel-go); otherwise
    #: the right one.
    first_logic_error: bool
    #: Comprehensions absorb errors as cel-go's folds do (``exists`` is true as soon as one
    #: element is, whatever the others raised); otherwise the first element's error is raised.
    macro_absorbs_errors: bool
    #: A call evaluates its arguments before its target (otherwise the target first, as
    #: cel-go does).
    args_before_target: bool


def _fmt(template: str, **fields: Any) -> str:
    return template.format(**fields)


# --- tokens ---------------------------------------------------------------------------------


@attrs.frozen
class Token:
    kind: str  # "lit", "ident", "op" or "end"
    value: Any
    pos: int


def _token_pattern(optional: bool, upper_hex: bool) -> re.Pattern[str]:
    hex_prefix = "0[xX]" if upper_hex else "0x"
    optional_op = r"\.\?|" if optional else ""
    return re.compile(
        rf"""
    (?P<ws>\s+)
  | (?P<float>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>{hex_prefix}[0-9a-fA-F]+|\d+)(?P<uint>[uU])?
  | (?P<str>[rR]?(?:'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|{optional_op}[<>!+\-*/%?:.()\[\]{{}},])
    """,
        re.VERBOSE,
    )


_PATTERNS = {
    (optional, upper): _token_pattern(optional, upper)
    for optional in (False, True)
    for upper in (False, True)
}

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "`": "`", "?": "?"}  # fmt: skip


def _unquote(text: str, pos: int, d: Dialect) -> str:
    raw = text[0] in "rR"
    body = text[2:-1] if raw else text[1:-1]
    if raw:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ESCAPES:
            out.append(_ESCAPES[nxt])
            i += 2
        elif nxt in "uU":
            width = 4 if nxt == "u" else 8
            out.append(chr(int(body[i + 2 : i + 2 + width], 16)))
            i += 2 + width
        elif nxt in "xX":
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        else:
            raise CELCompileError(_fmt(d.msg_bad_escape, char=nxt, pos=pos + i))
    return "".join(out)


def tokenize(text: str, d: Dialect) -> list[Token]:
    """The tokens of ``text``, ending with an ``end`` token; CELCompileError on bad input."""
    pattern = _PATTERNS[d.optional_syntax, d.upper_hex_prefix]
    tokens: list[Token] = []
    pos = 0
    while pos < len(text):
        m = pattern.match(text, pos)
        if m is None:
            raise CELCompileError(_fmt(d.msg_bad_char, char=text[pos], pos=pos))
        kind = m.lastgroup
        if kind == "uint":
            raise CELCompileError(d.msg_unsigned)
        if kind == "float":
            tokens.append(Token("lit", float(m.group("float")), pos))
        elif kind == "int":
            tokens.append(Token("lit", int(m.group("int"), 0), pos))
        elif kind == "str":
            tokens.append(Token("lit", _unquote(m.group("str"), pos, d), pos))
        elif kind == "ident":
            word = m.group("ident")
            if word in ("true", "false"):
                tokens.append(Token("lit", word == "true", pos))
            elif word == "null":
                tokens.append(Token("lit", None, pos))
            elif word == "in":
                tokens.append(Token("op", "in", pos))
            else:
                tokens.append(Token("ident", word, pos))
        elif kind == "op":
            tokens.append(Token("op", m.group("op"), pos))
        pos = m.end()
    tokens.append(Token("end", None, pos))
    return tokens


# --- values -----------------------------------------------------------------------------------


def type_name(value: Any) -> str:
    """CEL's name of a value's type, as cel-go's error messages show it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if value is None:
        return "null_type"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, Mapping):
        return "map"
    if isinstance(value, Optional_):
        return "optional_type"
    return type(value).__name__


def no_overload(op: str, *values: Any) -> CELEvaluationError:
    """cel-go's ``no such overload: <op>(<types>)``."""
    types = ", ".join(type_name(v) for v in values)
    return CELEvaluationError(f"no such overload: {op}({types})")


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def cel_equal(a: Any, b: Any) -> bool:
    """CEL heterogeneous equality: numbers compare by value, other types must match."""
    if _numeric(a) and _numeric(b):
        return bool(a == b)
    if (
        type(a) is not type(b)
        and not (isinstance(a, list | tuple) and isinstance(b, list | tuple))
        and not (isinstance(a, Mapping) and isinstance(b, Mapping))
    ):
        return False
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(cel_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping):
        return a.keys() == b.keys() and all(cel_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _same_kind(a: Any, b: Any) -> bool:
    ta, tb = type_name(a), type_name(b)
    return ta == tb or {ta, tb} == {"int", "double"}


def _equal(a: Any, b: Any, d: Dialect) -> bool:
    if d.cel_equality:
        return cel_equal(a, b)
    return _same_kind(a, b) and bool(a == b)


# --- syntax tree and evaluation ------------------------------------------------------------


class Node:
    """A node of the syntax tree; ``eval`` gives its value or raises CELEvaluationError."""

    def eval(self, env: Env, d: Dialect) -> Any:
        raise NotImplementedError

    def selects(self, operand: str, field: str) -> bool:
        """Whether ``operand.field`` (or ``operand.?field``) appears (``hasSelectExp``)."""
        return any(child.selects(operand, field) for child in self.children())

    def children(self) -> Sequence[Node]:
        return ()


@attrs.frozen
class Lit(Node):
    value: Any

    def eval(self, env: Env, d: Dialect) -> Any:
        return self.value


@attrs.frozen
class Ident(Node):
    name: str

    def eval(self, env: Env, d: Dialect) -> Any:
        if self.name not in env:
            raise CELEvaluationError(f"no such attribute: {self.name}")
        return env[self.name]


@attrs.frozen
class ListLit(Node):
    items: tuple[Node, ...]

    def eval(self, env: Env, d: Dialect) -> Any:
        return [item.eval(env, d) for item in self.items]

    def children(self) -> Sequence[Node]:
        return self.items


class _FieldAccess(Node):
    """``operand.field``: what :class:`Select` and :class:`Has` have in common."""

    operand: Node
    field: str

    def selects(self, operand: str, field: str) -> bool:
        if isinstance(self.operand, Ident) and self.operand.name == operand and self.field == field:
            return True
        return self.operand.selects(operand, field)

    def children(self) -> Sequence[Node]:
        return (self.operand,)


@attrs.frozen
class Select(_FieldAccess):
    operand: Node
    field: str
    optional: bool = False

    def eval(self, env: Env, d: Dialect) -> Any:
        value = self.operand.eval(env, d)
        if isinstance(value, Optional_):
            if not value.present:
                return value
            value = value.value
            if isinstance(value, Mapping) and self.field in value:
                return Optional_(True, value[self.field])
            return Optional_(False)
        if isinstance(value, Mapping):
            if self.field in value:
                return Optional_(True, value[self.field]) if self.optional else value[self.field]
            if self.optional:
                return Optional_(False)
        elif d.select_overload_error:
            raise no_overload("select", value)
        raise CELEvaluationError(f"no such key: {self.field}")


@attrs.frozen
class Index(Node):
    operand: Node
    index: Node

    def eval(self, env: Env, d: Dialect) -> Any:
        value = self.operand.eval(env, d)
        index = self.index.eval(env, d)
        if isinstance(value, Mapping):
            if index not in value:
                raise CELEvaluationError(f"no such key: {index}")
            return value[index]
        if isinstance(value, list | tuple) and isinstance(index, int):
            if d.index_overload_error or not isinstance(index, bool):
                if not 0 <= index < len(value):
                    raise CELEvaluationError(_fmt(d.msg_index_range, index=index))
                return value[index]
        if d.index_overload_error:
            raise no_overload("_[_]", value, index)
        raise CELEvaluationError(f"no such key: {index}")

    def children(self) -> Sequence[Node]:
        return (self.operand, self.index)


@attrs.frozen
class Has(_FieldAccess):
    """``has(operand.field)``."""

    operand: Node
    field: str

    def eval(self, env: Env, d: Dialect) -> Any:
        value = self.operand.eval(env, d)
        if isinstance(value, Mapping):
            return self.field in value
        if d.msg_has_non_map is None:
            raise no_overload("has", value)
        raise CELEvaluationError(d.msg_has_non_map)


@attrs.frozen
class Unary(Node):
    op: str
    operand: Node

    def eval(self, env: Env, d: Dialect) -> Any:
        value = self.operand.eval(env, d)
        if self.op == "!":
            if not isinstance(value, bool):
                raise no_overload("!_", value)
            return not value
        if not _numeric(value):
            raise no_overload("-_", value)
        return -value

    def children(self) -> Sequence[Node]:
        return (self.operand,)


@attrs.frozen
class Binary(Node):
    op: str
    left: Node
    right: Node

    def eval(self, env: Env, d: Dialect) -> Any:
        op = self.op
        if op in ("&&", "||"):
            return self._logic(env, d)
        a = self.left.eval(env, d)
        b = self.right.eval(env, d)
        if op == "==":
            return _equal(a, b, d)
        if op == "!=":
            return not _equal(a, b, d)
        if op == "in":
            if isinstance(b, list | tuple):
                return any(_equal(a, x, d) for x in b)
            if isinstance(b, Mapping):
                return a in b
            raise no_overload("@in", a, b)
        if op == "+":
            if isinstance(a, str) and isinstance(b, str):
                return a + b
            if isinstance(a, list | tuple) and isinstance(b, list | tuple):
                return [*a, *b]
            if _numeric(a) and _numeric(b) and type(a) is type(b):
                return a + b
            raise no_overload("_+_", a, b)
        if op in ("-", "*", "/", "%"):
            if not (_numeric(a) and _numeric(b) and type(a) is type(b)):
                raise no_overload(f"_{op}_", a, b)
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if b == 0 and isinstance(a, int):
                raise CELEvaluationError("division by zero" if op == "/" else "modulus by zero")
            if op == "%":
                if not isinstance(a, int):
                    raise no_overload("_%_", a, b)
                return int(a - b * int(a / b))
            return int(a / b) if isinstance(a, int) else a / b
        # Ordering.
        if not (
            (_numeric(a) and _numeric(b))
            or (isinstance(a, str) and isinstance(b, str))
            or (d.bool_ordering and isinstance(a, bool) and isinstance(b, bool))
        ):
            raise no_overload(_fmt(d.ordering_overload, op=op), a, b)
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        return a >= b

    def _logic(self, env: Env, d: Dialect) -> bool:
        # CEL's && and || are commutative with respect to errors: false && error is false.
        short = self.op == "||"
        error: CELEvaluationError | None = None
        for side in (self.left, self.right):
            try:
                value = side.eval(env, d)
                if not isinstance(value, bool):
                    raise no_overload(f"_{self.op}_", value)
            except CELEvaluationError as e:
                error = (error or e) if d.first_logic_error else e
                continue
            if value is short:
                return short
        if error is not None:
            raise error
        return not short

    def children(self) -> Sequence[Node]:
        return (self.left, self.right)


@attrs.frozen
class Cond(Node):
    test: Node
    then: Node
    otherwise: Node

    def eval(self, env: Env, d: Dialect) -> Any:
        test = self.test.eval(env, d)
        if not isinstance(test, bool):
            raise no_overload("_?_:_", test)
        return self.then.eval(env, d) if test else self.otherwise.eval(env, d)

    def children(self) -> Sequence[Node]:
        return (self.test, self.then, self.otherwise)


@attrs.frozen
class Call(Node):
    """A function (``target`` None) or method call the dialect knows."""

    name: str
    args: tuple[Node, ...]
    target: Node | None = None

    def eval(self, env: Env, d: Dialect) -> Any:
        if self.target is None:
            return d.functions[self.name][1](*(a.eval(env, d) for a in self.args))
        if d.args_before_target:
            args = [a.eval(env, d) for a in self.args]
            target = self.target.eval(env, d)
        else:
            target = self.target.eval(env, d)
            args = [a.eval(env, d) for a in self.args]
        return d.methods[self.name][1](target, *args)

    def children(self) -> Sequence[Node]:
        return (*((self.target,) if self.target is not None else ()), *self.args)


@attrs.frozen
class Macro(Node):
    """``target.name(var, body)``: map, filter, all, exists, exists_one."""

    name: str
    target: Node
    var: str
    body: Node

    def eval(self, env: Env, d: Dialect) -> Any:
        items = self.target.eval(env, d)
        if isinstance(items, Mapping):
            items = list(items)
        if not isinstance(items, list | tuple):
            raise no_overload(self.name, items)
        if d.macro_absorbs_errors:
            return self._fold(items, env, d)
        results: list[Any] = []
        for item in items:
            scope = dict(env)
            scope[self.var] = item
            results.append(self.body.eval(scope, d))
        if self.name == "map":
            return results
        for value in results:
            if not isinstance(value, bool):
                raise no_overload(self.name, value)
        if self.name == "filter":
            return [item for item, keep in zip(items, results, strict=True) if keep]
        if self.name == "all":
            return all(results)
        if self.name == "exists":
            return any(results)
        return sum(1 for r in results if r) == 1

    def _fold(self, items: Sequence[Any], env: Env, d: Dialect) -> bool:
        """``all``, ``exists``, ``exists_one`` as cel-go's folds: a deciding element wins over
        errors of the others; otherwise the last error is raised."""
        scope = dict(env)
        results: list[bool] = []
        error: CELEvaluationError | None = None
        for item in items:
            scope[self.var] = item
            try:
                value = self.body.eval(scope, d)
            except CELEvaluationError as exc:
                error = exc
                continue
            if not isinstance(value, bool):
                raise no_overload(self.name, value)
            if self.name == "exists" and value:
                return True
            if self.name == "all" and not value:
                return False
            results.append(value)
        if error is not None:
            raise error
        if self.name == "exists_one":
            return results.count(True) == 1
        return self.name == "all"

    def children(self) -> Sequence[Node]:
        return (self.target, self.body)


# --- functions and methods ------------------------------------------------------------------


def size(value: Any) -> int:
    """``size()`` of a string, list or map."""
    if isinstance(value, str | list | tuple | bytes) or isinstance(value, Mapping):
        return len(value)
    raise no_overload("size", value)


def _lower_ascii(s: str) -> str:
    return "".join(c.lower() if c.isascii() else c for c in s)


def _upper_ascii(s: str) -> str:
    return "".join(c.upper() if c.isascii() else c for c in s)


def _matches(s: str, pattern: str) -> bool:
    try:
        return re.search(pattern, s) is not None
    except re.error as error:
        raise CELEvaluationError(f"invalid regular expression: {error}") from None


def string_method(
    name: str, impl: Callable[..., Any], arg_types: tuple[type, ...] = (str,)
) -> Callable[..., Any]:
    """A method of strings: no such overload unless the target is a string and every argument
    is one of ``arg_types``."""

    def call(target: Any, *args: Any) -> Any:
        if not isinstance(target, str) or not all(isinstance(a, arg_types) for a in args):
            raise no_overload(name, target, *args)
        return impl(target, *args)

    return call


#: The string methods both dialects have.
STRING_METHODS: dict[str, Builtin] = {
    "startsWith": ((1,), string_method("startsWith", lambda s, p: s.startswith(p))),
    "endsWith": ((1,), string_method("endsWith", lambda s, p: s.endswith(p))),
    "contains": ((1,), string_method("contains", lambda s, p: p in s)),
    "matches": ((1,), string_method("matches", _matches)),
    "lowerAscii": ((0,), string_method("lowerAscii", _lower_ascii)),
    "upperAscii": ((0,), string_method("upperAscii", _upper_ascii)),
    "size": ((0,), size),
}


# --- parser ---------------------------------------------------------------------------------


def _shown(token: Token) -> str:
    return "end of input" if token.kind == "end" else repr(token.value)


_LEVELS: tuple[tuple[str, ...], ...] = (
    ("||",),
    ("&&",),
    ("==", "!=", "<", "<=", ">", ">=", "in"),
    ("+", "-"),
    ("*", "/", "%"),
)
_RELATIONS = 2
_MULTIPLICATIVE = 4


class Parser:
    """Recursive descent over CEL's grammar, restricted and worded by a :class:`Dialect`."""

    def __init__(self, text: str, d: Dialect, variables: Sequence[str] = ()) -> None:
        self.d = d
        self.tokens = tokenize(text, d)
        self.pos = 0
        self.scopes: list[set[str]] = [set(variables)]

    def error(self, template: str, **fields: Any) -> CELCompileError:
        return CELCompileError(_fmt(template, **fields))

    def peek(self) -> Token:
        return self.tokens[self.pos]

    def take(self) -> Token:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def at(self, op: str) -> bool:
        token = self.peek()
        return token.kind == "op" and token.value == op

    def expect(self, op: str) -> None:
        token = self.take()
        if token.kind != "op" or token.value != op:
            raise self.error(self.d.msg_expected, want=op, value=token.value, shown=_shown(token))

    def parse(self) -> Node:
        node = self.conditional()
        token = self.peek()
        if token.kind != "end":
            raise self.error(self.d.msg_trailing, value=token.value, pos=token.pos)
        return node

    def conditional(self) -> Node:
        test = self.binary(0)
        if self.at("?"):
            self.take()
            then = self.conditional() if self.d.nested_ternary else self.binary(0)
            self.expect(":")
            otherwise = self.conditional()
            return Cond(test, then, otherwise)
        return test

    def binary(self, level: int) -> Node:
        if level == len(_LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        ops = _LEVELS[level]
        while True:
            token = self.peek()
            if token.kind != "op" or token.value not in ops:
                return node
            if level == _MULTIPLICATIVE and not self.d.arithmetic:
                raise self.error(self.d.msg_operator, op=token.value)
            self.take()
            node = Binary(token.value, node, self.binary(level + 1))
            if level == _RELATIONS and not self.d.chained_comparisons:
                after = self.peek()
                if after.kind == "op" and after.value in ops:
                    raise self.error(self.d.msg_chained)

    def unary(self) -> Node:
        if self.at("!") or self.at("-"):
            op = self.take().value
            return Unary(op, self.unary())
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.at(".") or self.at(".?"):
                optional = self.take().value == ".?"
                token = self.take()
                if token.kind != "ident":
                    raise self.error(self.d.msg_field_name, value=token.value)
                if not optional and self.at("("):
                    node = self.method(node, token.value)
                else:
                    node = Select(node, token.value, optional)
            elif self.at("["):
                self.take()
                index = self.conditional()
                self.expect("]")
                node = Index(node, index)
            else:
                return node

    def sequence(self, close: str, trailing: bool) -> list[Node]:
        """Comma-separated expressions up to ``close`` (taken); ``trailing``: ``a, b,``."""
        items: list[Node] = []
        if self.at(close):
            self.take()
            return items
        while True:
            items.append(self.conditional())
            if self.at(","):
                self.take()
                if trailing and self.at(close):
                    self.take()
                    return items
                continue
            self.expect(close)
            return items

    def arguments(self) -> list[Node]:
        return self.sequence(")", trailing=self.d.generic_call_args)

    def method(self, target: Node, name: str) -> Node:
        self.expect("(")
        d = self.d
        if name in d.macros and not d.generic_call_args:
            token = self.take()
            if token.kind != "ident":
                raise self.error(d.msg_macro_variable, name=name)
            self.expect(",")
            self.scopes.append({token.value})
            body = self.conditional()
            self.scopes.pop()
            self.expect(")")
            return Macro(name, target, token.value, body)
        args = self.arguments()
        if name in d.macros:
            if len(args) != 2 or not isinstance(args[0], Ident):
                raise self.error(d.msg_macro_variable, name=name)
            return Macro(name, target, args[0].name, args[1])
        spec = d.methods.get(name)
        if spec is None:
            raise self.error(d.msg_unknown_function, name=name)
        if len(args) not in spec[0]:
            raise self.error(d.msg_arity, name=name)
        return Call(name, tuple(args), target)

    def function(self, name: str) -> Node:
        d = self.d
        if name == "has":
            if d.generic_call_args:
                args = self.arguments()
                arg = args[0] if len(args) == 1 else None
            else:
                arg = self.conditional()
                self.expect(")")
            if not isinstance(arg, Select) or arg.optional:
                raise self.error("invalid argument to has() macro")
            return Has(arg.operand, arg.field)
        args = self.arguments()
        spec = d.functions.get(name)
        if spec is None:
            raise self.error(d.msg_unknown_function, name=name)
        if len(args) not in spec[0]:
            raise self.error(d.msg_arity, name=name)
        return Call(name, tuple(args))

    def primary(self) -> Node:
        d = self.d
        token = self.take()
        if token.kind == "lit":
            return Lit(token.value)
        if token.kind == "ident":
            if self.at("("):
                self.take()
                return self.function(token.value)
            if d.check_names and not any(token.value in scope for scope in self.scopes):
                raise self.error(d.msg_undeclared, name=token.value)
            return Ident(token.value)
        if token.kind == "op":
            if token.value == "(":
                node = self.conditional()
                self.expect(")")
                return node
            if token.value == "[":
                return ListLit(tuple(self.sequence("]", trailing=True)))
            if token.value == "{" and d.msg_map_literal is not None:
                raise self.error(d.msg_map_literal)
            if token.value == "." and d.msg_qualified_name is not None:
                raise self.error(d.msg_qualified_name)
        if token.kind == "end":
            raise self.error(d.msg_unexpected_end)
        raise self.error(d.msg_unexpected, value=token.value, shown=_shown(token))


def parse(text: str, d: Dialect, variables: Sequence[str] = ()) -> Node:
    """The syntax tree of ``text``; CELCompileError when it is not in ``d``'s subset.

    ``variables`` are the names an expression may use (checked when ``d.check_names``).
    """
    return Parser(text, d, variables).parse()


__all__ = [
    "STRING_METHODS",
    "Binary",
    "Builtin",
    "CELCompileError",
    "CELEvaluationError",
    "Call",
    "Cond",
    "Dialect",
    "Env",
    "Has",
    "Ident",
    "Index",
    "ListLit",
    "Lit",
    "Macro",
    "Node",
    "Optional_",
    "Select",
    "Unary",
    "cel_equal",
    "no_overload",
    "parse",
    "size",
    "string_method",
    "tokenize",
    "type_name",
]
