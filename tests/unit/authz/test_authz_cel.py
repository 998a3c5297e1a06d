"""The CEL subset of webhook match conditions."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.auth.authz.cel import (
    CELCompileError,
    CELEvaluationError,
    all_match,
    compile_condition,
)

RESOURCE: dict[str, Any] = {
    "resourceAttributes": {
        "namespace": "kube-system",
        "verb": "list",
        "group": "events.k8s.io",
        "version": "v1",
        "resource": "events",
    },
    "user": "system:serviceaccount:kube-system:sa",
    "groups": ["system:serviceaccounts", "system:authenticated"],
    "extra": {"scopes": ["a", "b"]},
    "uid": "42",
}
NON_RESOURCE: dict[str, Any] = {
    "nonResourceAttributes": {"path": "/healthz", "verb": "get"},
    "user": "system:anonymous",
    "groups": ["system:unauthenticated"],
}


@pytest.mark.parametrize(
    ("expression", "resource", "non_resource"),
    [
        ("has(request.resourceAttributes)", True, False),
        ("!has(request.resourceAttributes)", False, True),
        ("request.resourceAttributes.namespace == 'kube-system'", True, "error"),
        (
            "has(request.resourceAttributes) && request.resourceAttributes.namespace == 'x'",
            False,
            False,
        ),
        # false && error is false, true || error is true (commutative absorption).
        (
            "request.resourceAttributes.verb == 'get' && has(request.resourceAttributes)",
            False,
            False,
        ),
        ("request.resourceAttributes.verb == 'list' || true", True, True),
        ("'system:authenticated' in request.groups", True, False),
        ("request.user.startsWith('system:serviceaccount:')", True, False),
        ("request.user.endsWith(':sa') || request.user == \"system:anonymous\"", True, True),
        ("request.user.contains('kube')", True, False),
        ("request.user.matches('^system:(serviceaccount|anonymous)')", True, True),
        ("request.resourceAttributes.verb in ['get', 'list', 'watch']", True, "error"),
        ("size(request.groups) > 1", True, False),
        ("request.groups.size() == 1", False, True),
        ("request.groups.exists(g, g.startsWith('system:service'))", True, False),
        ("request.groups.all(g, g.startsWith('system:'))", True, True),
        ("request.groups.exists_one(g, g == 'system:authenticated')", True, False),
        ("'scopes' in request.extra && request.extra['scopes'][1] == 'b'", True, "error"),
        ("has(request.extra) ? request.extra.scopes.size() == 2 : false", True, False),
        ("request.uid + 'x' == '42x'", True, "error"),
        ("(1 + 2 == 3) && -1 < 0 && 2.5 >= 2.5 && 'a' < 'b'", True, True),
        ("request.user.lowerAscii() == request.user.upperAscii().lowerAscii()", True, True),
        ("r'a\\d' == 'a\\\\d' && \"\\u00e9\" == 'é'", True, True),
        ("null == null && [1, 2] == [1, 2]", True, True),
    ],
)
def test_evaluate(expression: str, resource: bool, non_resource: bool | str) -> None:
    program = compile_condition(expression)
    assert program(RESOURCE) is resource
    if non_resource == "error":
        with pytest.raises(CELEvaluationError):
            program(NON_RESOURCE)
    else:
        assert program(NON_RESOURCE) is non_resource


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("request.foo == 'x'", "undefined field 'foo'"),
        ("request.resourceAttributes.nme == 'x'", "undefined field 'nme'"),
        ("user == 'x'", "undeclared reference to 'user'"),
        ("request.user", "must evaluate to bool, not string"),
        ("size(request.groups)", "must evaluate to bool, not int"),
        ("request", "must evaluate to bool, not map"),
        ("1 * 2 == 2", "not supported by this server's CEL subset"),
        ("{'a': 1}.a == 1", "map literals are not supported"),
        ("request.user.split(':')[0] == 'x'", "function 'split' is not supported"),
        ("int('1') == 1", "function 'int' is not supported"),
        ("request.user ==", "Syntax error"),
        ("request.user == 'x' extra", "Syntax error"),
        ("request.user == 'x", "Syntax error"),
        ("1u == 1u", "unsigned integers are not supported"),
        ("has(request)", "invalid argument to has() macro"),
        ("request.user.matches('(')", "invalid regular expression"),
        ("'a' && true", "no matching overload"),
    ],
)
def test_compile_errors(expression: str, message: str) -> None:
    with pytest.raises(CELCompileError) as caught:
        compile_condition(expression)
    assert message in str(caught.value)


def test_all_match() -> None:
    matcher = all_match(
        [
            compile_condition("request.resourceAttributes.verb == 'list'"),
            compile_condition("request.user == 'nobody'"),
        ]
    )
    assert matcher(RESOURCE) is False
    # A false condition wins over another one's error.
    assert matcher(NON_RESOURCE) is False
    erroring = all_match([compile_condition("request.resourceAttributes.verb == 'get'")])
    with pytest.raises(CELEvaluationError, match="no such key: resourceAttributes"):
        erroring(NON_RESOURCE)
    assert all_match([compile_condition("true")])(NON_RESOURCE) is True
