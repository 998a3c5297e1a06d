"""The CEL subset of ``AuthenticationConfiguration`` expressions.

kube-apiserver compiles claim mappings, claim validation rules and user validation rules with
cel-go (``AS/pkg/authentication/cel``): the variable ``claims`` (the JWT payload as a map) or
``user`` (``username``, ``uid``, ``groups``, ``extra``). The engine is the shared one in
:mod:`apiserver.auth.cel`; this module is its authentication dialect (what it accepts, how it
words errors) and the entry points :func:`compile_expression` and :class:`Program`. An
expression outside the subset is refused when the file is loaded (so a server never starts
with an expression it would evaluate differently):

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

from collections.abc import Sequence
from typing import Any

import attrs

from apiserver.auth import cel
from apiserver.auth.cel import Env, Node, Optional_, no_overload, size, string_method

#: An evaluation error (the expression is fine, the data does not fit).
CELError = cel.CELEvaluationError
#: The expression is not in the supported subset (or not CEL at all).
CELSyntaxError = cel.CELCompileError


def _to_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    raise no_overload("string", value)


def _to_int(value: Any) -> int:
    if isinstance(value, bool):
        raise no_overload("int", value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value, 10)
        except ValueError:
            raise CELError(f"cannot convert {value!r} to int") from None
    raise no_overload("int", value)


def _to_double(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise CELError(f"cannot convert {value!r} to double") from None
    raise no_overload("double", value)


def _join(target: Any, *args: Any) -> str:
    if not isinstance(target, list | tuple) or not all(isinstance(v, str) for v in target):
        raise no_overload("join", target, *args)
    sep = args[0] if args else ""
    if not isinstance(sep, str):
        raise no_overload("join", target, *args)
    return sep.join(target)


def _or_value(target: Any, default: Any) -> Any:
    if not isinstance(target, Optional_):
        raise no_overload("orValue", target, default)
    return target.value if target.present else default


def _has_value(target: Any) -> bool:
    if not isinstance(target, Optional_):
        raise no_overload("hasValue", target)
    return target.present


def _substring(target: str, start: int, end: int | None = None) -> str:
    stop = len(target) if end is None else end
    if not 0 <= start <= stop <= len(target):
        raise CELError(f"index out of range: {start}")
    return target[start:stop]


def _text_method(name: str, impl: Any) -> Any:
    # These take ints (substring) as well as strings.
    return string_method(name, impl, (str, int))


DIALECT = cel.Dialect(
    optional_syntax=True,
    upper_hex_prefix=False,
    msg_bad_char="unexpected character {char!r} at offset {pos}",
    msg_unsigned="unsigned integer literals are not supported",
    msg_bad_escape="invalid escape sequence \\{char}",
    check_names=True,
    nested_ternary=True,
    arithmetic=True,
    msg_operator="",
    chained_comparisons=False,
    msg_chained="chained comparisons are not supported",
    generic_call_args=False,
    msg_expected="expected {want!r}, found {value!r}",
    msg_trailing="unexpected {value!r}",
    msg_field_name="expected a field name, found {value!r}",
    msg_unexpected_end="unexpected end of expression",
    msg_unexpected="unexpected {value!r}",
    msg_map_literal=None,
    msg_qualified_name=None,
    msg_unknown_function="unsupported function {name}()",
    msg_arity="wrong number of arguments to {name}()",
    msg_macro_variable="{name}() needs a variable name as its first argument",
    msg_undeclared="undeclared reference to {name!r}",
    functions={
        "size": ((1,), size),
        "string": ((1,), _to_string),
        "int": ((1,), _to_int),
        "double": ((1,), _to_double),
    },
    methods={
        **cel.STRING_METHODS,
        "trim": ((0,), _text_method("trim", lambda s: s.strip())),
        "split": ((1,), _text_method("split", lambda s, sep: s.split(sep) if sep else list(s))),
        "replace": ((2,), _text_method("replace", lambda s, a, b: s.replace(a, b))),
        "indexOf": ((1,), _text_method("indexOf", lambda s, p: s.find(p))),
        "substring": ((1, 2), _text_method("substring", _substring)),
        "join": ((0, 1), _join),
        "orValue": ((1,), _or_value),
        "hasValue": ((0,), _has_value),
    },
    macros=frozenset({"map", "filter", "all", "exists", "exists_one"}),
    cel_equality=True,
    bool_ordering=True,
    ordering_overload="_{op}_",
    select_overload_error=False,
    msg_has_non_map="invalid type for field selection.",
    msg_index_range="index out of bounds: {index}",
    index_overload_error=False,
    first_logic_error=True,
    macro_absorbs_errors=False,
    args_before_target=True,
)


@attrs.frozen
class Program:
    """A compiled expression."""

    source: str
    root: Node

    def evaluate(self, env: Env) -> Any:
        """The value, or CELError. An optional result is unwrapped (absent: CELError)."""
        value = self.root.eval(env, DIALECT)
        if isinstance(value, Optional_):
            raise CELError("expression returned an optional value")
        return value

    def uses(self, operand: str, field: str) -> bool:
        return self.root.selects(operand, field)


def compile_expression(source: str, variables: Sequence[str]) -> Program:
    """Parse ``source`` with ``variables`` declared; CELSyntaxError when not supported."""
    if not source.strip():
        raise CELSyntaxError("expression is empty")
    return Program(source, cel.parse(source, DIALECT, variables))


__all__ = ["DIALECT", "CELError", "CELSyntaxError", "Optional_", "Program", "compile_expression"]
