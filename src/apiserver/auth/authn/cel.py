"""A small subset of CEL for ``AuthenticationConfiguration`` expressions.

kube-apiserver compiles claim mappings, claim validation rules and user validation rules with
cel-go (``AS/pkg/authentication/cel``): the variable ``claims`` (the JWT payload as a map) or
``user`` (``username``, ``uid``, ``groups``, ``extra``). There is no CEL implementation among
this project's dependencies, and a complete one is far more than these expressions need, so
this module implements the part that authentication configurations use in practice, with
CEL's semantics for it, and refuses everything else when the file is loaded (so a server never
starts with an expression it would evaluate differently):

- literals: strings (``'x'``, ``"x"``, ``r'x'``), integers, floats, ``true``/``false``/``null``,
  lists ``[a, b]``;
- ``claims.x``, ``claims['x']``, optional selection ``claims.?x`` with ``.orValue(v)`` /
  ``.hasValue()``, ``has(claims.x)``;
- operators ``! - * / % + - == != < <= > >= in && || ?:`` (``+`` concatenates strings and
  lists), CEL's commutative error handling of ``&&``/``||``;
- functions ``size``, ``string``, ``int``, ``double``; string methods ``startsWith``,
  ``endsWith``, ``contains``, ``matches``, ``lowerAscii``, ``upperAscii``, ``trim``, ``split``,
  ``replace``, ``indexOf``, ``substring``, ``size``; list ``join``; macros ``map``,
  ``filter``, ``all``, ``exists``, ``exists_one``.

A missing map key is the runtime error ``no such key: <key>``, as in cel-go.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs


class CELError(Exception):
    """An evaluation error (the expression is fine, the data does not fit)."""


class CELSyntaxError(ValueError):
    """The expression is not in the supported subset (or not CEL at all)."""


@attrs.frozen
class Optional_:
    """CEL's ``optional_type`` value."""

    present: bool
    value: Any = None


# --- tokens -----------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<float>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>0x[0-9a-fA-F]+|\d+)(?P<uint>[uU])?
  | (?P<str>[rR]?(?:'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\|\||&&|==|!=|<=|>=|\.\?|[<>!+\-*/%?:.()\[\]{},])
    """,
    re.VERBOSE,
)

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
            "b": "\b", "f": "\f", "v": "\v", "`": "`", "?": "?"}  # fmt: skip


def _unquote(text: str) -> str:
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
            raise CELSyntaxError(f"invalid escape sequence \\{nxt}")
    return "".join(out)


def _tokenize(text: str) -> list[tuple[str, Any]]:
    tokens: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise CELSyntaxError(f"unexpected character {text[pos]!r} at offset {pos}")
        pos = m.end()
        kind = m.lastgroup
        if kind == "ws":
            continue
        if kind == "uint":
            raise CELSyntaxError("unsigned integer literals are not supported")
        if kind == "float":
            tokens.append(("lit", float(m.group("float"))))
        elif kind == "int":
            tokens.append(("lit", int(m.group("int"), 0)))
        elif kind == "str":
            tokens.append(("lit", _unquote(m.group("str"))))
        elif kind == "ident":
            word = m.group("ident")
            if word in ("true", "false"):
                tokens.append(("lit", word == "true"))
            elif word == "null":
                tokens.append(("lit", None))
            elif word == "in":
                tokens.append(("op", "in"))
            else:
                tokens.append(("ident", word))
        else:
            tokens.append(("op", m.group("op")))
    tokens.append(("end", None))
    return tokens


# --- AST ----------------------------------------------------------------------------------------

Env = Mapping[str, Any]


class Node:
    def eval(self, env: Env) -> Any:
        raise NotImplementedError

    def selects(self, operand: str, field: str) -> bool:
        """Whether ``operand.field`` (or ``operand.?field``) appears (``hasSelectExp``)."""
        return any(child.selects(operand, field) for child in self.children())

    def children(self) -> Sequence[Node]:
        return ()


@attrs.frozen
class Lit(Node):
    value: Any

    def eval(self, env: Env) -> Any:
        return self.value


@attrs.frozen
class Ident(Node):
    name: str

    def eval(self, env: Env) -> Any:
        if self.name not in env:
            raise CELError(f"no such attribute: {self.name}")
        return env[self.name]


@attrs.frozen
class ListLit(Node):
    items: tuple[Node, ...]

    def eval(self, env: Env) -> Any:
        return [item.eval(env) for item in self.items]

    def children(self) -> Sequence[Node]:
        return self.items


def _field(value: Any, name: Any) -> Any:
    if isinstance(value, Mapping):
        if name not in value:
            raise CELError(f"no such key: {name}")
        return value[name]
    if isinstance(value, list | tuple) and isinstance(name, int) and not isinstance(name, bool):
        if not 0 <= name < len(value):
            raise CELError(f"index out of bounds: {name}")
        return value[name]
    raise CELError(f"no such key: {name}")


@attrs.frozen
class Select(Node):
    operand: Node
    field: str
    optional: bool = False

    def eval(self, env: Env) -> Any:
        value = self.operand.eval(env)
        if isinstance(value, Optional_):
            if not value.present:
                return value
            value = value.value
            if isinstance(value, Mapping) and self.field in value:
                return Optional_(True, value[self.field])
            return Optional_(False)
        if self.optional:
            if isinstance(value, Mapping) and self.field in value:
                return Optional_(True, value[self.field])
            if isinstance(value, Mapping):
                return Optional_(False)
        return _field(value, self.field)

    def selects(self, operand: str, field: str) -> bool:
        if isinstance(self.operand, Ident) and self.operand.name == operand and self.field == field:
            return True
        return self.operand.selects(operand, field)

    def children(self) -> Sequence[Node]:
        return (self.operand,)


@attrs.frozen
class Index(Node):
    operand: Node
    index: Node

    def eval(self, env: Env) -> Any:
        return _field(self.operand.eval(env), self.index.eval(env))

    def children(self) -> Sequence[Node]:
        return (self.operand, self.index)


@attrs.frozen
class Has(Node):
    target: Select

    def eval(self, env: Env) -> Any:
        value = self.target.operand.eval(env)
        if isinstance(value, Mapping):
            return self.target.field in value
        raise CELError("invalid type for field selection.")

    def children(self) -> Sequence[Node]:
        return (self.target,)


def _type_name(value: Any) -> str:
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


def _no_overload(op: str, *values: Any) -> CELError:
    types = ", ".join(_type_name(v) for v in values)
    return CELError(f"no such overload: {op}({types})")


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


@attrs.frozen
class Unary(Node):
    op: str
    operand: Node

    def eval(self, env: Env) -> Any:
        value = self.operand.eval(env)
        if self.op == "!":
            if not isinstance(value, bool):
                raise _no_overload("!_", value)
            return not value
        if not _numeric(value):
            raise _no_overload("-_", value)
        return -value

    def children(self) -> Sequence[Node]:
        return (self.operand,)


@attrs.frozen
class Binary(Node):
    op: str
    left: Node
    right: Node

    def eval(self, env: Env) -> Any:
        op = self.op
        if op in ("&&", "||"):
            return self._logic(env)
        a = self.left.eval(env)
        b = self.right.eval(env)
        if op == "==":
            return cel_equal(a, b)
        if op == "!=":
            return not cel_equal(a, b)
        if op == "in":
            if isinstance(b, list | tuple):
                return any(cel_equal(a, x) for x in b)
            if isinstance(b, Mapping):
                return a in b
            raise _no_overload("@in", a, b)
        if op == "+":
            if isinstance(a, str) and isinstance(b, str):
                return a + b
            if isinstance(a, list | tuple) and isinstance(b, list | tuple):
                return [*a, *b]
            if _numeric(a) and _numeric(b) and type(a) is type(b):
                return a + b
            raise _no_overload("_+_", a, b)
        if op in ("-", "*", "/", "%"):
            if not (_numeric(a) and _numeric(b) and type(a) is type(b)):
                raise _no_overload(f"_{op}_", a, b)
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if b == 0 and isinstance(a, int):
                raise CELError("division by zero" if op == "/" else "modulus by zero")
            if op == "%":
                if not isinstance(a, int):
                    raise _no_overload("_%_", a, b)
                return int(a - b * int(a / b))
            return int(a / b) if isinstance(a, int) else a / b
        # Ordering.
        if not (
            (_numeric(a) and _numeric(b))
            or (isinstance(a, str) and isinstance(b, str))
            or (isinstance(a, bool) and isinstance(b, bool))
        ):
            raise _no_overload(f"_{op}_", a, b)
        if op == "<":
            return a < b
        if op == "<=":
            return a <= b
        if op == ">":
            return a > b
        return a >= b

    def _logic(self, env: Env) -> bool:
        # CEL's && and || are commutative with respect to errors: false && error is false.
        short = self.op == "||"
        error: CELError | None = None
        for side in (self.left, self.right):
            try:
                value = side.eval(env)
            except CELError as e:
                error = error or e
                continue
            if not isinstance(value, bool):
                error = error or _no_overload(f"_{self.op}_", value)
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

    def eval(self, env: Env) -> Any:
        test = self.test.eval(env)
        if not isinstance(test, bool):
            raise _no_overload("_?_:_", test)
        return self.then.eval(env) if test else self.otherwise.eval(env)

    def children(self) -> Sequence[Node]:
        return (self.test, self.then, self.otherwise)


def _size(value: Any) -> int:
    if isinstance(value, str | list | tuple | bytes) or isinstance(value, Mapping):
        return len(value)
    raise _no_overload("size", value)


def _to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise _no_overload("string", value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _no_overload("int", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 10)
        except ValueError:
            raise CELError(f"cannot convert {value!r} to int") from None
    raise _no_overload("int", value)


def _to_double(value: Any) -> float:
    if _numeric(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise CELError(f"cannot convert {value!r} to double") from None
    raise _no_overload("double", value)


_FUNCTIONS: dict[str, tuple[int, Callable[..., Any]]] = {
    "size": (1, _size),
    "string": (1, _to_string),
    "int": (1, _to_int),
    "double": (1, _to_double),
}


def _str_method(name: str, check: Callable[..., Any]) -> Callable[..., Any]:
    def call(target: Any, *args: Any) -> Any:
        if not isinstance(target, str) or not all(isinstance(a, str | int) for a in args):
            raise _no_overload(name, target, *args)
        return check(target, *args)

    return call


def _join(target: Any, *args: Any) -> str:
    if not isinstance(target, list | tuple) or not all(isinstance(v, str) for v in target):
        raise _no_overload("join", target, *args)
    sep = args[0] if args else ""
    if not isinstance(sep, str):
        raise _no_overload("join", target, *args)
    return sep.join(target)


def _or_value(target: Any, default: Any) -> Any:
    if not isinstance(target, Optional_):
        raise _no_overload("orValue", target, default)
    return target.value if target.present else default


def _has_value(target: Any) -> bool:
    if not isinstance(target, Optional_):
        raise _no_overload("hasValue", target)
    return target.present


def _substring(target: str, start: int, end: int | None = None) -> str:
    stop = len(target) if end is None else end
    if not 0 <= start <= stop <= len(target):
        raise CELError(f"index out of range: {start}")
    return target[start:stop]


_METHODS: dict[str, tuple[tuple[int, ...], Callable[..., Any]]] = {
    "startsWith": ((1,), _str_method("startsWith", lambda s, p: s.startswith(p))),
    "endsWith": ((1,), _str_method("endsWith", lambda s, p: s.endswith(p))),
    "contains": ((1,), _str_method("contains", lambda s, p: p in s)),
    "matches": ((1,), _str_method("matches", lambda s, p: re.search(p, s) is not None)),
    "lowerAscii": ((0,), _str_method("lowerAscii", lambda s: s.lower() if s.isascii() else
                                     "".join(c.lower() if c.isascii() else c for c in s))),
    "upperAscii": ((0,), _str_method("upperAscii", lambda s: "".join(
        c.upper() if c.isascii() else c for c in s))),
    "trim": ((0,), _str_method("trim", lambda s: s.strip())),
    "split": ((1,), _str_method("split", lambda s, sep: s.split(sep) if sep else list(s))),
    "replace": ((2,), _str_method("replace", lambda s, a, b: s.replace(a, b))),
    "indexOf": ((1,), _str_method("indexOf", lambda s, p: s.find(p))),
    "substring": ((1, 2), _str_method("substring", _substring)),
    "size": ((0,), _size),
    "join": ((0, 1), _join),
    "orValue": ((1,), _or_value),
    "hasValue": ((0,), _has_value),
}  # fmt: skip

_MACROS = ("map", "filter", "all", "exists", "exists_one")


@attrs.frozen
class Call(Node):
    name: str
    args: tuple[Node, ...]
    target: Node | None = None

    def eval(self, env: Env) -> Any:
        args = [a.eval(env) for a in self.args]
        if self.target is None:
            return _FUNCTIONS[self.name][1](*args)
        target = self.target.eval(env)
        return _METHODS[self.name][1](target, *args)

    def children(self) -> Sequence[Node]:
        return (*((self.target,) if self.target is not None else ()), *self.args)


@attrs.frozen
class Macro(Node):
    name: str
    target: Node
    var: str
    body: Node

    def eval(self, env: Env) -> Any:
        items = self.target.eval(env)
        if isinstance(items, Mapping):
            items = list(items)
        if not isinstance(items, list | tuple):
            raise _no_overload(self.name, items)
        results: list[Any] = []
        for item in items:
            scope = dict(env)
            scope[self.var] = item
            results.append(self.body.eval(scope))
        if self.name == "map":
            return results
        for value in results:
            if not isinstance(value, bool):
                raise _no_overload(self.name, value)
        if self.name == "filter":
            return [item for item, keep in zip(items, results, strict=True) if keep]
        if self.name == "all":
            return all(results)
        if self.name == "exists":
            return any(results)
        return sum(1 for r in results if r) == 1

    def children(self) -> Sequence[Node]:
        return (self.target, self.body)


# --- parser -------------------------------------------------------------------------------------


class _Parser:
    def __init__(self, text: str, variables: Sequence[str]) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0
        self.scopes: list[set[str]] = [set(variables)]

    def peek(self) -> tuple[str, Any]:
        return self.tokens[self.pos]

    def take(self) -> tuple[str, Any]:
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def expect(self, op: str) -> None:
        kind, value = self.take()
        if kind != "op" or value != op:
            raise CELSyntaxError(f"expected {op!r}, found {value!r}")

    def at(self, op: str) -> bool:
        kind, value = self.peek()
        return kind == "op" and value == op

    def parse(self) -> Node:
        node = self.conditional()
        kind, value = self.peek()
        if kind != "end":
            raise CELSyntaxError(f"unexpected {value!r}")
        return node

    def conditional(self) -> Node:
        test = self.binary(0)
        if self.at("?"):
            self.take()
            then = self.conditional()
            self.expect(":")
            otherwise = self.conditional()
            return Cond(test, then, otherwise)
        return test

    _LEVELS: tuple[tuple[str, ...], ...] = (
        ("||",),
        ("&&",),
        ("==", "!=", "<", "<=", ">", ">=", "in"),
        ("+", "-"),
        ("*", "/", "%"),
    )

    def binary(self, level: int) -> Node:
        if level == len(self._LEVELS):
            return self.unary()
        node = self.binary(level + 1)
        ops = self._LEVELS[level]
        while True:
            kind, value = self.peek()
            if kind == "op" and value in ops:
                self.take()
                right = self.binary(level + 1)
                node = Binary(value, node, right)
                if level == 2 and self.peek()[1] in ops and self.peek()[0] == "op":
                    raise CELSyntaxError("chained comparisons are not supported")
                continue
            return node

    def unary(self) -> Node:
        if self.at("!") or self.at("-"):
            op = self.take()[1]
            return Unary(op, self.unary())
        return self.postfix()

    def postfix(self) -> Node:
        node = self.primary()
        while True:
            if self.at(".") or self.at(".?"):
                optional = self.take()[1] == ".?"
                kind, name = self.take()
                if kind != "ident":
                    raise CELSyntaxError(f"expected a field name, found {name!r}")
                if not optional and self.at("("):
                    node = self.method(node, name)
                else:
                    node = Select(node, name, optional)
            elif self.at("["):
                self.take()
                index = self.conditional()
                self.expect("]")
                node = Index(node, index)
            else:
                return node

    def method(self, target: Node, name: str) -> Node:
        self.expect("(")
        if name in _MACROS:
            kind, var = self.take()
            if kind != "ident":
                raise CELSyntaxError(f"{name}() needs a variable name as its first argument")
            self.expect(",")
            self.scopes.append({var})
            body = self.conditional()
            self.scopes.pop()
            self.expect(")")
            return Macro(name, target, var, body)
        args = self.arguments()
        spec = _METHODS.get(name)
        if spec is None:
            raise CELSyntaxError(f"unsupported function {name}()")
        if len(args) not in spec[0]:
            raise CELSyntaxError(f"wrong number of arguments to {name}()")
        return Call(name, tuple(args), target)

    def arguments(self) -> list[Node]:
        args: list[Node] = []
        if self.at(")"):
            self.take()
            return args
        while True:
            args.append(self.conditional())
            if self.at(","):
                self.take()
                continue
            self.expect(")")
            return args

    def primary(self) -> Node:
        kind, value = self.take()
        if kind == "lit":
            return Lit(value)
        if kind == "op" and value == "(":
            node = self.conditional()
            self.expect(")")
            return node
        if kind == "op" and value == "[":
            items: list[Node] = []
            if self.at("]"):
                self.take()
                return ListLit(())
            while True:
                items.append(self.conditional())
                if self.at(","):
                    self.take()
                    if self.at("]"):
                        self.take()
                        break
                    continue
                self.expect("]")
                break
            return ListLit(tuple(items))
        if kind == "ident":
            if self.at("("):
                self.take()
                if value == "has":
                    arg = self.conditional()
                    self.expect(")")
                    if not isinstance(arg, Select) or arg.optional:
                        raise CELSyntaxError("invalid argument to has() macro")
                    return Has(arg)
                args = self.arguments()
                spec = _FUNCTIONS.get(value)
                if spec is None:
                    raise CELSyntaxError(f"unsupported function {value}()")
                if len(args) != spec[0]:
                    raise CELSyntaxError(f"wrong number of arguments to {value}()")
                return Call(value, tuple(args))
            if not any(value in scope for scope in self.scopes):
                raise CELSyntaxError(f"undeclared reference to {value!r}")
            return Ident(value)
        if kind == "end":
            raise CELSyntaxError("unexpected end of expression")
        raise CELSyntaxError(f"unexpected {value!r}")


@attrs.frozen
class Program:
    """A compiled expression."""

    source: str
    root: Node

    def evaluate(self, env: Env) -> Any:
        """The value, or CELError. An optional result is unwrapped (absent: CELError)."""
        value = self.root.eval(env)
        if isinstance(value, Optional_):
            raise CELError("expression returned an optional value")
        return value

    def uses(self, operand: str, field: str) -> bool:
        return self.root.selects(operand, field)


def compile_expression(source: str, variables: Sequence[str]) -> Program:
    """Parse ``source`` with ``variables`` declared; CELSyntaxError when not supported."""
    if not source.strip():
        raise CELSyntaxError("expression is empty")
    return Program(source, _Parser(source, variables).parse())
