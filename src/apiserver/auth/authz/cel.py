"""The CEL subset of the match conditions of authorization webhooks.

kube-apiserver compiles ``matchConditions[].expression`` with cel-go against one variable,
``request``: the ``authorization.k8s.io/v1`` SubjectAccessReviewSpec of the request
(``AS/pkg/authorization/cel/compile.go``). The expression must be a bool. Fields absent from
the spec cannot be read (``no such key``), which is why conditions test them with ``has()``.

The engine is the shared one in :mod:`apiserver.auth.cel`; this module is its authorization
dialect (the subset conditions use, refused otherwise at start-up with a clear message:
``compilation failed: ... is not supported by this server's CEL subset``), the static check
against the SubjectAccessReviewSpec, and the entry points :func:`compile_condition` and
:func:`all_match`:

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

from apiserver.auth import cel
from apiserver.auth.cel import (
    Binary,
    Call,
    Cond,
    Has,
    Ident,
    Index,
    ListLit,
    Lit,
    Macro,
    Node,
    Select,
    Unary,
    size,
    type_name,
)

#: The expression cannot be compiled (a start-up error for its configuration).
CELCompileError = cel.CELCompileError
#: The expression failed at run time (``failurePolicy`` decides what follows).
CELEvaluationError = cel.CELEvaluationError

#: The tail of every "outside the subset" message.
_SUBSET = "is not supported by this server's CEL subset"
_SUBSET_PLURAL = "are not supported by this server's CEL subset"

DIALECT = cel.Dialect(
    optional_syntax=False,
    upper_hex_prefix=True,
    msg_bad_char="Syntax error: token recognition error at: {char!r}",
    msg_unsigned="unsigned integers " + _SUBSET_PLURAL,
    msg_bad_escape="invalid escape sequence at position {pos}",
    check_names=False,
    nested_ternary=False,
    arithmetic=False,
    msg_operator="operator {op!r} " + _SUBSET,
    chained_comparisons=True,
    msg_chained="",
    generic_call_args=True,
    msg_expected="Syntax error: expected {want!r}, found {shown}",
    msg_trailing="Syntax error: unexpected {value!r} at position {pos}",
    msg_field_name="Syntax error: expected a field or method name after '.'",
    msg_unexpected_end="Syntax error: unexpected end of input",
    msg_unexpected="Syntax error: unexpected {shown}",
    msg_map_literal="map literals " + _SUBSET_PLURAL,
    msg_qualified_name="qualified names " + _SUBSET_PLURAL,
    msg_unknown_function="function {name!r} " + _SUBSET,
    msg_arity="found no matching overload for '{name}'",
    msg_macro_variable="{name}() takes a variable name and a predicate",
    msg_undeclared="",
    functions={"size": ((1,), size)},
    methods=cel.STRING_METHODS,
    macros=frozenset({"exists", "all", "exists_one"}),
    cel_equality=False,
    bool_ordering=False,
    ordering_overload="{op}",
    select_overload_error=True,
    msg_has_non_map=None,
    msg_index_range="index out of range: {index}",
    index_overload_error=True,
    first_logic_error=False,
    macro_absorbs_errors=True,
    args_before_target=False,
)


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
    if isinstance(node, Lit):
        return _NULL if node.value is None else _LIT_TYPES[type(node.value)]
    if isinstance(node, Ident):
        if node.name in scope:
            return _DYN
        if node.name == "request":
            return REQUEST_SHAPE
        raise CELCompileError(f"undeclared reference to '{node.name}' (in container '')")
    if isinstance(node, Select | Has):
        operand = _check(node.operand, scope)
        if isinstance(operand, dict):
            if node.field not in operand:
                raise CELCompileError(f"undefined field '{node.field}'")
            field_type = operand[node.field]
            return _BOOL if isinstance(node, Has) else field_type
        if operand not in (_DYN, _MAP):
            raise CELCompileError(f"type '{operand}' does not support field selection")
        return _BOOL if isinstance(node, Has) else _DYN
    if isinstance(node, Index):
        _check(node.operand, scope)
        _check(node.index, scope)
        return _DYN
    if isinstance(node, ListLit):
        for item in node.items:
            _check(item, scope)
        return _LIST
    if isinstance(node, Unary):
        operand = _check(node.operand, scope)
        if node.op == "!":
            if operand not in (_BOOL, _DYN):
                raise CELCompileError(
                    "found no matching overload for '!_' applied to " + str(operand)
                )
            return _BOOL
        return operand
    if isinstance(node, Binary):
        op = node.op
        left = _check(node.left, scope)
        right = _check(node.right, scope)
        if op in ("&&", "||"):
            for side in (left, right):
                if side not in (_BOOL, _DYN):
                    raise CELCompileError(f"found no matching overload for '_{op}_'")
            return _BOOL
        if op in ("+", "-"):
            return left if isinstance(left, str) else _DYN
        return _BOOL
    if isinstance(node, Cond):
        _check(node.test, scope)
        then = _check(node.then, scope)
        other = _check(node.otherwise, scope)
        return then if then == other and isinstance(then, str) else _DYN
    if isinstance(node, Call):
        if node.target is not None:
            _check(node.target, scope)
        for arg in node.args:
            _check(arg, scope)
        if node.name == "size":
            return _INT
        if node.name in ("lowerAscii", "upperAscii"):
            return _STRING
        if node.name == "matches" and isinstance(node.args[0], Lit):
            try:
                re.compile(node.args[0].value)
            except re.error as error:
                raise CELCompileError(f"invalid regular expression: {error}") from None
        return _BOOL
    if isinstance(node, Macro):
        _check(node.target, scope)
        _check(node.body, scope | {node.var})
        return _BOOL
    raise CELCompileError(f"unsupported expression {type(node).__name__}")  # pragma: no cover


# --- programs ----------------------------------------------------------------------------------


@attrs.frozen
class Program:
    """A compiled condition: call it with the request's v1 SubjectAccessReviewSpec."""

    expression: str
    ast: Node

    def __call__(self, request: Mapping[str, Any]) -> bool:
        try:
            value = self.ast.eval({"request": request}, DIALECT)
        except RecursionError:
            raise CELEvaluationError("expression too deeply nested") from None
        if not isinstance(value, bool):
            raise CELEvaluationError(f"expected a bool, got {type_name(value)}")
        return value


def compile_condition(expression: str) -> Program:
    """Parse and check ``expression``; raises :class:`CELCompileError`."""
    try:
        ast = cel.parse(expression, DIALECT)
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


__all__ = [
    "DIALECT",
    "REQUEST_SHAPE",
    "CELCompileError",
    "CELEvaluationError",
    "Program",
    "all_match",
    "compile_condition",
]
