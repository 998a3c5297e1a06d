"""A small CEL subset for the match conditions of authorization webhooks.

kube-apiserver compiles ``matchConditions[].expression`` with cel-go against one variable,
``request``: the ``authorization.k8s.io/v1`` SubjectAccessReviewSpec of the request
(``AS/pkg/authorization/cel/compile.go``). The expression must be a bool. Fields absent from
the spec cannot be read (``no such key``), which is why conditions test them with ``has()``.

No CEL implementation ships with our dependencies, and the conditions people write are small,
so this module implements the subset they use and refuses everything else at start-up with a
clear message (``compilation failed: ... is not supported by this server's CEL subset``):

- literals: strings (``'..'``, ``".."``, with the usual escapes; ``r'..'``), integers,
  floats, ``true``, ``false``, ``null``, lists ``[a, b]``;
- ``request`` and its fields (``request.resourceAttributes.namespace``, ...), ``a[i]``,
  ``m['key']``;
- ``!``, unary ``-``, ``&&``, ``||`` (with CEL's error absorption: ``false && <error>`` is
  false), ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``+``, ``-``, ``c ? a : b``;
- ``has(x.f)``, ``size(x)`` / ``x.size()``, ``s.startsWith(p)``, ``s.endsWith(p)``,
  ``s.contains(p)``, ``s.matches(re)``, ``s.lowerAscii()``, ``s.upperAscii()``,
  ``list.exists(v, pred)``, ``list.all(v, pred)``, ``list.exists_one(v, pred)``.

Field names under ``request`` are checked at compile time (``undefined field 'x'``), as are
names (``undeclared reference to 'x'``) and the result type (``must evaluate to bool``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs


class CELCompileError(ValueError):
    """The expression cannot be compiled (a start-up error for its configuration)."""


class CELEvaluationError(Exception):
    """The expression failed at run time (``failurePolicy`` decides what follows)."""


# --- lexer -------------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<float>\d+\.\d+(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>0[xX][0-9a-fA-F]+|\d+)(?P<unsigned>[uU])?
  | (?P<string>[rR]?(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>&&|\|\||==|!=|<=|>=|[<>!+\-*/%?:.,()\[\]{}])
    """,
    re.VERBOSE,
)

_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "v": "\v",
    "`": "`",
    "?": "?",
}


@attrs.frozen
class _Tok:
    kind: str
    value: Any
    pos: int


def _unquote(text: str, pos: int) -> str:
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
            raise CELCompileError(f"invalid escape sequence at position {pos + i}")
    return "".join(out)


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise CELCompileError(f"Syntax error: token recognition error at: {text[pos]!r}")
        kind = match.lastgroup
        value = match.group(0)
        if match.group("int") is not None:
            if match.group("unsigned"):
                raise CELCompileError(
                    "unsigned integers are not supported by this server's CEL subset"
                )
            out.append(_Tok("lit", int(match.group("int"), 0), pos))
        elif kind == "float":
            out.append(_Tok("lit", float(value), pos))
        elif kind == "string":
            out.append(_Tok("lit", _unquote(value, pos), pos))
        elif kind == "ident":
            if value in ("true", "false"):
                out.append(_Tok("lit", value == "true", pos))
            elif value == "null":
                out.append(_Tok("lit", None, pos))
            elif value == "in":
                out.append(_Tok("op", "in", pos))
            else:
                out.append(_Tok("ident", value, pos))
        elif kind == "op":
            out.append(_Tok("op", value, pos))
        pos = match.end()
    out.append(_Tok("eof", None, pos))
    return out


# --- AST ---------------------------------------------------------------------------------------

Node = tuple[Any, ...]  # ("lit", v) ("ident", n) ("select", x, f) ("has", x, f) ("index", x, i)
# ("list", items) ("unary", op, x) ("binary", op, l, r) ("cond", c, a, b)
# ("call", name, target|None, args) ("macro", name, target, var, body)

_MACROS = frozenset({"exists", "all", "exists_one"})
_METHODS = {
    "startsWith": 1,
    "endsWith": 1,
    "contains": 1,
    "matches": 1,
    "size": 0,
    "lowerAscii": 0,
    "upperAscii": 0,
}


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self, value: str | None = None) -> bool:
        tok = self.toks[self.i]
        return tok.kind == "op" and (value is None or tok.value == value)

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, value: str) -> None:
        tok = self.take()
        if tok.kind != "op" or tok.value != value:
            found = "end of input" if tok.kind == "eof" else repr(tok.value)
            raise CELCompileError(f"Syntax error: expected {value!r}, found {found}")

    def parse(self) -> Node:
        node = self.expr()
        tok = self.toks[self.i]
        if tok.kind != "eof":
            raise CELCompileError(f"Syntax error: unexpected {tok.value!r} at position {tok.pos}")
        return node

    def expr(self) -> Node:
        cond = self.or_()
        if self.peek("?"):
            self.take()
            then = self.or_()
            self.expect(":")
            other = self.expr()
            return ("cond", cond, then, other)
        return cond

    def or_(self) -> Node:
        node = self.and_()
        while self.peek("||"):
            self.take()
            node = ("binary", "||", node, self.and_())
        return node

    def and_(self) -> Node:
        node = self.relation()
        while self.peek("&&"):
            self.take()
            node = ("binary", "&&", node, self.relation())
        return node

    def relation(self) -> Node:
        node = self.additive()
        while self.peek() and self.toks[self.i].value in ("==", "!=", "<", "<=", ">", ">=", "in"):
            op = self.take().value
            node = ("binary", op, node, self.additive())
        return node

    def additive(self) -> Node:
        node = self.multiplicative()
        while self.peek() and self.toks[self.i].value in ("+", "-"):
            op = self.take().value
            node = ("binary", op, node, self.multiplicative())
        return node

    def multiplicative(self) -> Node:
        node = self.unary()
        if self.peek() and self.toks[self.i].value in ("*", "/", "%"):
            raise CELCompileError(
                f"operator {self.toks[self.i].value!r} is not supported by this server's CEL subset"
            )
        return node

    def unary(self) -> Node:
        if self.peek("!"):
            self.take()
            return ("unary", "!", self.unary())
        if self.peek("-"):
            self.take()
            return ("unary", "-", self.unary())
        return self.member()

    def member(self) -> Node:
        node = self.primary()
        while True:
            if self.peek("."):
                self.take()
                tok = self.take()
                if tok.kind != "ident":
                    raise CELCompileError("Syntax error: expected a field or method name after '.'")
                if self.peek("("):
                    self.take()
                    args = self.args(")")
                    node = self.method(node, tok.value, args)
                else:
                    node = ("select", node, tok.value)
            elif self.peek("["):
                self.take()
                index = self.expr()
                self.expect("]")
                node = ("index", node, index)
            else:
                return node

    def method(self, target: Node, name: str, args: list[Node]) -> Node:
        if name in _MACROS:
            if len(args) != 2 or args[0][0] != "ident":
                raise CELCompileError(f"{name}() takes a variable name and a predicate")
            return ("macro", name, target, args[0][1], args[1])
        if name not in _METHODS:
            raise CELCompileError(f"function {name!r} is not supported by this server's CEL subset")
        if len(args) != _METHODS[name]:
            raise CELCompileError(f"found no matching overload for '{name}'")
        return ("call", name, target, args)

    def args(self, close: str) -> list[Node]:
        out: list[Node] = []
        if self.peek(close):
            self.take()
            return out
        while True:
            out.append(self.expr())
            if self.peek(","):
                self.take()
                if self.peek(close):
                    self.take()
                    return out
                continue
            self.expect(close)
            return out

    def primary(self) -> Node:
        tok = self.take()
        if tok.kind == "lit":
            return ("lit", tok.value)
        if tok.kind == "ident":
            if self.peek("("):
                self.take()
                args = self.args(")")
                return self.function(tok.value, args)
            return ("ident", tok.value)
        if tok.kind == "op":
            if tok.value == "(":
                node = self.expr()
                self.expect(")")
                return node
            if tok.value == "[":
                return ("list", self.args("]"))
            if tok.value == "{":
                raise CELCompileError("map literals are not supported by this server's CEL subset")
            if tok.value == ".":
                raise CELCompileError(
                    "qualified names are not supported by this server's CEL subset"
                )
        found = "end of input" if tok.kind == "eof" else repr(tok.value)
        raise CELCompileError(f"Syntax error: unexpected {found}")

    def function(self, name: str, args: list[Node]) -> Node:
        if name == "has":
            if len(args) != 1 or args[0][0] != "select":
                raise CELCompileError("invalid argument to has() macro")
            return ("has", args[0][1], args[0][2])
        if name == "size":
            if len(args) != 1:
                raise CELCompileError("found no matching overload for 'size'")
            return ("call", "size", args[0], [])
        raise CELCompileError(f"function {name!r} is not supported by this server's CEL subset")


# --- checking ----------------------------------------------------------------------------------

_STRING, _BOOL, _INT, _DOUBLE, _LIST, _MAP, _NULL, _DYN = (
    "string",
    "bool",
    "int",
    "double",
    "list",
    "map",
    "null_type",
    "dyn",
)

#: The declared shape of ``request`` (SubjectAccessReviewSpec v1): field -> type or sub-shape.
REQUEST_SHAPE: dict[str, Any] = {
    "resourceAttributes": {
        "namespace": _STRING,
        "verb": _STRING,
        "group": _STRING,
        "version": _STRING,
        "resource": _STRING,
        "subresource": _STRING,
        "name": _STRING,
        "fieldSelector": _DYN,
        "labelSelector": _DYN,
    },
    "nonResourceAttributes": {"path": _STRING, "verb": _STRING},
    "user": _STRING,
    "groups": _LIST,
    "extra": _MAP,
    "uid": _STRING,
}

_LIT_TYPES: dict[type, str] = {str: _STRING, bool: _BOOL, int: _INT, float: _DOUBLE}


def _check(node: Node, scope: frozenset[str]) -> Any:
    """The static type of ``node`` (a shape dict for message fields of ``request``)."""
    kind = node[0]
    if kind == "lit":
        return _NULL if node[1] is None else _LIT_TYPES[type(node[1])]
    if kind == "ident":
        if node[1] in scope:
            return _DYN
        if node[1] == "request":
            return REQUEST_SHAPE
        raise CELCompileError(f"undeclared reference to '{node[1]}' (in container '')")
    if kind in ("select", "has"):
        operand = _check(node[1], scope)
        if isinstance(operand, dict):
            if node[2] not in operand:
                raise CELCompileError(f"undefined field '{node[2]}'")
            field_type = operand[node[2]]
            return _BOOL if kind == "has" else field_type
        if operand not in (_DYN, _MAP):
            raise CELCompileError(f"type '{operand}' does not support field selection")
        return _BOOL if kind == "has" else _DYN
    if kind == "index":
        _check(node[1], scope)
        _check(node[2], scope)
        return _DYN
    if kind == "list":
        for item in node[1]:
            _check(item, scope)
        return _LIST
    if kind == "unary":
        operand = _check(node[2], scope)
        if node[1] == "!":
            if operand not in (_BOOL, _DYN):
                raise CELCompileError(
                    "found no matching overload for '!_' applied to " + str(operand)
                )
            return _BOOL
        return operand
    if kind == "binary":
        op = node[1]
        left = _check(node[2], scope)
        right = _check(node[3], scope)
        if op in ("&&", "||"):
            for side in (left, right):
                if side not in (_BOOL, _DYN):
                    raise CELCompileError(f"found no matching overload for '_{op}_'")
            return _BOOL
        if op in ("+", "-"):
            return left if isinstance(left, str) else _DYN
        return _BOOL
    if kind == "cond":
        _check(node[1], scope)
        then = _check(node[2], scope)
        other = _check(node[3], scope)
        return then if then == other and isinstance(then, str) else _DYN
    if kind == "call":
        name = node[1]
        _check(node[2], scope)
        for arg in node[3]:
            _check(arg, scope)
        if name == "size":
            return _INT
        if name in ("lowerAscii", "upperAscii"):
            return _STRING
        if name == "matches" and node[3][0][0] == "lit":
            try:
                re.compile(node[3][0][1])
            except re.error as error:
                raise CELCompileError(f"invalid regular expression: {error}") from None
        return _BOOL
    if kind == "macro":
        _check(node[2], scope)
        _check(node[4], scope | {node[3]})
        return _BOOL
    raise CELCompileError(f"unsupported expression {kind}")  # pragma: no cover


# --- evaluation --------------------------------------------------------------------------------


def _type_name(value: Any) -> str:
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return _BOOL
    if isinstance(value, int):
        return _INT
    if isinstance(value, float):
        return _DOUBLE
    if isinstance(value, str):
        return _STRING
    if isinstance(value, (list, tuple)):
        return _LIST
    if isinstance(value, Mapping):
        return _MAP
    return type(value).__name__


def _same_kind(a: Any, b: Any) -> bool:
    ta, tb = _type_name(a), _type_name(b)
    return ta == tb or {ta, tb} == {_INT, _DOUBLE}


def _no_overload(op: str, *values: Any) -> CELEvaluationError:
    kinds = ", ".join(_type_name(v) for v in values)
    return CELEvaluationError(f"no such overload: {op}({kinds})")


def _eval(node: Node, env: Mapping[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "ident":
        return env[node[1]]
    if kind == "select":
        operand = _eval(node[1], env)
        if not isinstance(operand, Mapping):
            raise _no_overload("select", operand)
        if node[2] not in operand:
            raise CELEvaluationError(f"no such key: {node[2]}")
        return operand[node[2]]
    if kind == "has":
        operand = _eval(node[1], env)
        if not isinstance(operand, Mapping):
            raise _no_overload("has", operand)
        return node[2] in operand
    if kind == "index":
        operand = _eval(node[1], env)
        index = _eval(node[2], env)
        if isinstance(operand, Mapping):
            if index not in operand:
                raise CELEvaluationError(f"no such key: {index}")
            return operand[index]
        if isinstance(operand, (list, tuple)) and isinstance(index, int):
            if not 0 <= index < len(operand):
                raise CELEvaluationError(f"index out of range: {index}")
            return operand[index]
        raise _no_overload("_[_]", operand, index)
    if kind == "list":
        return [_eval(item, env) for item in node[1]]
    if kind == "unary":
        value = _eval(node[2], env)
        if node[1] == "!":
            if not isinstance(value, bool):
                raise _no_overload("!_", value)
            return not value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _no_overload("-_", value)
        return -value
    if kind == "binary":
        return _binary(node[1], node[2], node[3], env)
    if kind == "cond":
        cond = _eval(node[1], env)
        if not isinstance(cond, bool):
            raise _no_overload("_?_:_", cond)
        return _eval(node[2] if cond else node[3], env)
    if kind == "call":
        return _call(node[1], _eval(node[2], env), [_eval(a, env) for a in node[3]])
    if kind == "macro":
        return _macro(node, env)
    raise CELEvaluationError(f"unsupported expression {kind}")  # pragma: no cover


def _logical(op: str, left: Node, right: Node, env: Mapping[str, Any]) -> bool:
    absorbing = op == "||"  # true absorbs ||, false absorbs &&
    error: CELEvaluationError | None = None
    try:
        lv = _eval(left, env)
        if not isinstance(lv, bool):
            raise _no_overload(f"_{op}_", lv)
        if lv is absorbing:
            return absorbing
    except CELEvaluationError as exc:
        error = exc
    rv = _eval(right, env)
    if not isinstance(rv, bool):
        raise _no_overload(f"_{op}_", rv)
    if rv is absorbing:
        return absorbing
    if error is not None:
        raise error
    return not absorbing


def _binary(op: str, left: Node, right: Node, env: Mapping[str, Any]) -> Any:
    if op in ("&&", "||"):
        return _logical(op, left, right, env)
    lv = _eval(left, env)
    rv = _eval(right, env)
    if op == "==":
        return _same_kind(lv, rv) and lv == rv
    if op == "!=":
        return not (_same_kind(lv, rv) and lv == rv)
    if op == "in":
        if isinstance(rv, Mapping):
            return lv in rv
        if isinstance(rv, (list, tuple)):
            return any(_same_kind(lv, item) and lv == item for item in rv)
        raise _no_overload("@in", lv, rv)
    if op in ("<", "<=", ">", ">="):
        if not _same_kind(lv, rv) or isinstance(lv, (bool, list, tuple, Mapping)) or lv is None:
            raise _no_overload(op, lv, rv)
        return {
            "<": lv < rv,
            "<=": lv <= rv,
            ">": lv > rv,
            ">=": lv >= rv,
        }[op]
    if op == "+":
        if _type_name(lv) == _type_name(rv) and _type_name(lv) in (_STRING, _INT, _DOUBLE):
            return lv + rv
        if isinstance(lv, (list, tuple)) and isinstance(rv, (list, tuple)):
            return [*lv, *rv]
        raise _no_overload("_+_", lv, rv)
    if op == "-":
        if _type_name(lv) == _type_name(rv) and _type_name(lv) in (_INT, _DOUBLE):
            return lv - rv
        raise _no_overload("_-_", lv, rv)
    raise CELEvaluationError(f"unsupported operator {op}")  # pragma: no cover


def _call(name: str, target: Any, args: list[Any]) -> Any:
    if name == "size":
        if isinstance(target, (str, list, tuple, Mapping)):
            return len(target)
        raise _no_overload("size", target)
    if not isinstance(target, str):
        raise _no_overload(name, target, *args)
    if name in ("lowerAscii", "upperAscii"):
        table = str.maketrans(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if name == "lowerAscii" else "abcdefghijklmnopqrstuvwxyz",
            "abcdefghijklmnopqrstuvwxyz" if name == "lowerAscii" else "ABCDEFGHIJKLMNOPQRSTUVWXYZ",
        )
        return target.translate(table)
    arg = args[0]
    if not isinstance(arg, str):
        raise _no_overload(name, target, arg)
    if name == "startsWith":
        return target.startswith(arg)
    if name == "endsWith":
        return target.endswith(arg)
    if name == "contains":
        return arg in target
    try:
        return re.search(arg, target) is not None
    except re.error as error:
        raise CELEvaluationError(f"invalid regular expression: {error}") from None


def _macro(node: Node, env: Mapping[str, Any]) -> bool:
    name, target_node, var, body = node[1], node[2], node[3], node[4]
    target = _eval(target_node, env)
    if isinstance(target, Mapping):
        items: list[Any] = list(target)
    elif isinstance(target, (list, tuple)):
        items = list(target)
    else:
        raise _no_overload(name, target)
    scope = dict(env)
    results: list[bool] = []
    error: CELEvaluationError | None = None
    for item in items:
        scope[var] = item
        try:
            value = _eval(body, scope)
        except CELEvaluationError as exc:
            error = exc
            continue
        if not isinstance(value, bool):
            raise _no_overload(name, value)
        if name == "exists" and value:
            return True
        if name == "all" and not value:
            return False
        results.append(value)
    if error is not None:
        raise error
    if name == "exists_one":
        return results.count(True) == 1
    return name == "all"


@attrs.frozen
class Program:
    """A compiled condition: call it with the request's v1 SubjectAccessReviewSpec."""

    expression: str
    ast: Node

    def __call__(self, request: Mapping[str, Any]) -> bool:
        try:
            value = _eval(self.ast, {"request": request})
        except RecursionError:
            raise CELEvaluationError("expression too deeply nested") from None
        if not isinstance(value, bool):
            raise CELEvaluationError(f"expected a bool, got {_type_name(value)}")
        return value


def compile_condition(expression: str) -> Program:
    """Parse and check ``expression``; raises :class:`CELCompileError`."""
    try:
        ast = _Parser(expression).parse()
        result = _check(ast, frozenset())
    except RecursionError:
        raise CELCompileError("expression too deeply nested") from None
    if result not in (_BOOL, _DYN):
        shown = "map" if isinstance(result, dict) else result
        raise CELCompileError(f"must evaluate to bool, not {shown}")
    return Program(expression, ast)


def all_match(programs: list[Program]) -> Callable[[Mapping[str, Any]], bool]:
    """Every condition true (``CELMatcher.Eval``): a false one wins over errors of others."""

    def matcher(request: Mapping[str, Any]) -> bool:
        errors: list[str] = []
        for program in programs:
            try:
                if not program(request):
                    return False
            except CELEvaluationError as error:
                errors.append(f"expression '{program.expression}' resulted in error: {error}")
        if errors:
            raise CELEvaluationError("; ".join(errors))
        return True

    return matcher
