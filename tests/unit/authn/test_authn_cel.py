"""The CEL subset used by AuthenticationConfiguration expressions."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth.authn.cel import CELError, CELSyntaxError, compile_expression

CLAIMS = {
    "sub": "alice",
    "email": "a@example.com",
    "email_verified": True,
    "groups": ["dev", "ops"],
    "n": 3,
    "nested": {"team": "blue"},
}


def ev(source: str, env: dict[str, Any] | None = None) -> Any:
    return compile_expression(source, ["claims"]).evaluate(env or {"claims": CLAIMS})


@pytest.mark.parametrize(
    ("source", "value"),
    [
        ("claims.sub", "alice"),
        ("claims['sub']", "alice"),
        ("claims.nested.team", "blue"),
        ("claims.sub == 'alice'", True),
        ('claims.sub != "alice"', False),
        ("has(claims.sub)", True),
        ("has(claims.missing)", False),
        ("'oidc:' + claims.sub", "oidc:alice"),
        ("claims.groups + ['x']", ["dev", "ops", "x"]),
        ("'dev' in claims.groups", True),
        ("claims.n > 2 && claims.n <= 3", True),
        ("claims.n * 2 + 1", 7),
        ("claims.n / 2", 1),
        ("claims.n % 2", 1),
        ("-claims.n", -3),
        ("claims.email_verified ? claims.email : ''", "a@example.com"),
        ("claims.?missing.orValue('none')", "none"),
        ("claims.?sub.orValue('none')", "alice"),
        ("claims.?nested.team.orValue('')", "blue"),
        ("claims.?missing.hasValue()", False),
        ("claims.groups.map(g, 'oidc:' + g)", ["oidc:dev", "oidc:ops"]),
        ("claims.groups.filter(g, g.startsWith('d'))", ["dev"]),
        ("claims.groups.exists(g, g == 'ops')", True),
        ("claims.groups.all(g, size(g) == 3)", True),
        ("claims.groups.exists_one(g, g.endsWith('s'))", True),
        ("claims.email.split('@')[1]", "example.com"),
        ("claims.groups.join(',')", "dev,ops"),
        ("claims.sub.upperAscii()", "ALICE"),
        ("claims.email.contains('@') && !claims.sub.matches('^b')", True),
        ("string(claims.n) + 'x'", "3x"),
        ("size(claims.groups)", 2),
        ("1 == 1.0", True),
        ("'1' == 1", False),
        ("[1, 2,]", [1, 2]),
        ("r'a\\d' + '\\t'", "a\\d\t"),
        ("true || claims.missing", True),
        ("claims.missing || true", True),
        ("false && claims.missing", False),
    ],
)
def test_values(source: str, value: Any) -> None:
    assert ev(source) == value


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("claims.missing", "no such key: missing"),
        ("claims.sub + 1", "no such overload"),
        ("claims.missing && true", "no such key: missing"),
        ("claims.groups[5]", "index out of bounds"),
        ("!claims.sub", "no such overload"),
    ],
)
def test_runtime_errors(source: str, message: str) -> None:
    with pytest.raises(CELError, match=message):
        ev(source)


@pytest.mark.parametrize(
    "source",
    [
        "",
        "claims.sub ==",
        "request.path",
        "claims.sub.frobnicate()",
        "frobnicate(claims)",
        "{'a': 1}",
        "has(claims)",
        "1u",
        "a < b < c",
        "claims.sub @ 1",
    ],
)
def test_unsupported_is_refused_at_compile_time(source: str) -> None:
    with pytest.raises(CELSyntaxError):
        compile_expression(source, ["claims"])


def test_uses() -> None:
    program = compile_expression("claims.email_verified ? claims.email : claims.sub", ["claims"])
    assert program.uses("claims", "email")
    assert program.uses("claims", "email_verified")
    assert not program.uses("claims", "groups")
    assert compile_expression("claims.?email.orValue('')", ["claims"]).uses("claims", "email")


def test_user_variable() -> None:
    program = compile_expression("!user.username.startsWith('system:')", ["user"])
    assert program.evaluate({"user": {"username": "bob"}}) is True
