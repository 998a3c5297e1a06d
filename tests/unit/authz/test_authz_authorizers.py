"""The synchronous authorizers and the union: AlwaysAllow/Deny, masters, ABAC, RBAC, Node."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from twisted.internet.defer import Deferred, fail, succeed
from twisted.trial.unittest import SynchronousTestCase

from apiserver.auth.authz import AuthorizerError, aggregate_messages
from apiserver.auth.authz.abac import (
    ABACAuthorizer,
    Policy,
    PolicyFileError,
    load_policy_file,
    parse_policy_line,
)
from apiserver.auth.authz.builtin import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from apiserver.auth.authz.node import NodeAuthorizer
from apiserver.auth.authz.rbac import RBACAuthorizer
from apiserver.auth.authz.union import Union
from apiserver.auth.interface import ALLOW, DENY, NO_OPINION, Attributes, Decision, UserInfo

ANON = UserInfo("system:anonymous", groups=("system:unauthenticated",))
BOB = UserInfo("bob", groups=("devs", "system:authenticated"))
ADMIN = UserInfo("admin", groups=("system:masters", "system:authenticated"))


def path(user: UserInfo, p: str, verb: str = "get") -> Attributes:
    return Attributes(user=user, verb=verb, resource_request=False, path=p)


def res(
    user: UserInfo,
    verb: str,
    resource: str = "events",
    namespace: str = "default",
    group: str = "",
    name: str = "",
    subresource: str = "",
) -> Attributes:
    return Attributes(
        user=user,
        verb=verb,
        resource_request=True,
        namespace=namespace,
        api_group=group,
        api_version="v1",
        resource=resource,
        subresource=subresource,
        name=name,
    )


# --- builtin and union ---------------------------------------------------------------------


def test_builtin() -> None:
    assert AlwaysAllow().authorize(path(ANON, "/")) == Decision(ALLOW)
    assert AlwaysDeny().authorize(path(ADMIN, "/")) == Decision(
        NO_OPINION, "Everything is forbidden."
    )
    masters = PrivilegedGroups()
    assert masters.authorize(path(ADMIN, "/")) == Decision(ALLOW, "")
    assert masters.authorize(path(BOB, "/")) == Decision(NO_OPINION, "")


def deferred(result: Decision | Deferred[Decision]) -> Deferred[Decision]:
    """The Deferred an authorizer with a deferred member answers (not an immediate Decision)."""
    assert isinstance(result, Deferred), result
    return result


class Fixed:
    def __init__(self, decision: str, reason: str = "", error: str = "") -> None:
        self.decision, self.reason, self.error = decision, reason, error
        self.calls = 0

    def authorize(self, attributes: Attributes) -> Decision:
        self.calls += 1
        if self.error:
            raise AuthorizerError(self.error, self.decision, self.reason)
        return Decision(self.decision, self.reason)


class Later:
    def __init__(self, result: Decision | Exception) -> None:
        self.result = result

    def authorize(self, attributes: Attributes) -> Deferred[Decision]:
        if isinstance(self.result, Exception):
            return fail(self.result)
        return succeed(self.result)


class UnionTests(SynchronousTestCase):
    def test_first_decision_wins(self) -> None:
        later = Fixed(ALLOW)
        union = Union([Fixed(NO_OPINION, "a"), Fixed(DENY, "no"), later])
        assert union.authorize(path(BOB, "/")) == Decision(DENY, "no")
        assert later.calls == 0

    def test_no_opinion_reasons_joined(self) -> None:
        union = Union([Fixed(NO_OPINION, "a"), Fixed(NO_OPINION, ""), Fixed(NO_OPINION, "b")])
        assert union.authorize(path(BOB, "/")) == Decision(NO_OPINION, "a\nb")

    def test_errors_aggregate_and_allow_still_wins(self) -> None:
        union = Union([Fixed(NO_OPINION, error="e1"), Fixed(NO_OPINION, "r", error="e2")])
        with pytest.raises(AuthorizerError) as caught:
            union.authorize(path(BOB, "/"))
        assert (caught.value.message, caught.value.decision, caught.value.reason) == (
            "[e1, e2]",
            NO_OPINION,
            "r",
        )
        union = Union([Fixed(NO_OPINION, error="e1"), Fixed(ALLOW, "ok")])
        assert union.authorize(path(BOB, "/")) == Decision(ALLOW, "ok")
        with pytest.raises(AuthorizerError) as caught:
            Union([Fixed(DENY, "both", error="bad")]).authorize(path(BOB, "/"))
        assert caught.value.decision == DENY

    def test_unexpected_exception_is_an_error(self) -> None:
        class Broken:
            def authorize(self, attributes: Attributes) -> Decision:
                raise KeyError("x")

        with pytest.raises(AuthorizerError):
            Union([Broken()]).authorize(path(BOB, "/"))

    def test_deferred_members(self) -> None:
        union = Union([Later(Decision(NO_OPINION, "x")), Fixed(NO_OPINION, "y")])
        assert self.successResultOf(deferred(union.authorize(path(BOB, "/")))) == Decision(
            NO_OPINION, "x\ny"
        )
        union = Union([Later(AuthorizerError("down")), Later(Decision(ALLOW))])
        assert self.successResultOf(deferred(union.authorize(path(BOB, "/")))) == Decision(ALLOW)
        union = Union([Later(AuthorizerError("down")), Fixed(NO_OPINION)])
        failure = self.failureResultOf(union.authorize(path(BOB, "/")), AuthorizerError)
        assert failure.value.message == "down"
        union = Union([Later(ValueError("weird"))])
        self.failureResultOf(union.authorize(path(BOB, "/")), AuthorizerError)


def test_aggregate_messages() -> None:
    assert aggregate_messages(["a"]) == "a"
    assert aggregate_messages(["a", "a"]) == "a"
    assert aggregate_messages(["a", "b", "a"]) == "[a, b]"


# --- ABAC ----------------------------------------------------------------------------------


def v1beta1(**spec: object) -> str:
    return json.dumps(
        {"apiVersion": "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": spec}
    )


def test_abac_file(tmp_path: Path) -> None:
    policy = tmp_path / "policy.jsonl"
    policy.write_text(
        "\n".join(
            [
                "# comment",
                "",
                v1beta1(
                    user="alice", readonly=True, apiGroup="*", resource="events", namespace="*"
                ),
                v1beta1(group="devs", apiGroup="events.k8s.io", resource="*", namespace="dev"),
                v1beta1(group="system:unauthenticated", readonly=True, nonResourcePath="/healthz"),
                v1beta1(user="*", readonly=True, nonResourcePath="/api*"),
                v1beta1(user="ops", nonResourcePath="*"),
                "  " + v1beta1(readonly=True, nonResourcePath="*"),  # neither user nor group
            ]
        )
    )
    abac = load_policy_file(str(policy))
    alice = UserInfo("alice")
    denied = Decision(NO_OPINION, "No policy matched.")
    assert abac.authorize(res(alice, "list")) == Decision(ALLOW)
    assert (
        abac.authorize(res(alice, "watch", group="events.k8s.io", namespace="x")).decision == ALLOW
    )
    assert abac.authorize(res(alice, "create")) == denied
    assert abac.authorize(res(alice, "get", resource="pods")) == denied
    assert abac.authorize(res(BOB, "create", group="events.k8s.io", namespace="dev")) == Decision(
        ALLOW
    )
    assert abac.authorize(res(BOB, "create", group="", namespace="dev")) == denied
    assert abac.authorize(res(BOB, "create", group="events.k8s.io", namespace="")) == denied
    assert abac.authorize(path(ANON, "/healthz")).decision == ALLOW
    assert abac.authorize(path(ANON, "/healthz", "post")) == denied
    assert abac.authorize(path(ANON, "/readyz")) == denied
    # user "*" means every authenticated user, not anonymous.
    assert abac.authorize(path(BOB, "/apis/events.k8s.io")).decision == ALLOW
    assert abac.authorize(path(ANON, "/apis")) == denied
    assert abac.authorize(path(UserInfo("ops"), "/anything", "delete")).decision == ALLOW
    assert abac.authorize(res(UserInfo("ops"), "get")) == denied  # non-resource only


def test_abac_unversioned_lines() -> None:
    policy, old = parse_policy_line('{"user":"scheduler","readonly":true,"resource":"pods"}')
    assert old
    assert policy == Policy(
        user="scheduler", readonly=True, api_group="*", resource="pods", namespace="*"
    )
    policy, _ = parse_policy_line('{"readonly": true}')
    assert policy == Policy(
        group="system:authenticated",
        readonly=True,
        api_group="*",
        resource="*",
        namespace="*",
        non_resource_path="*",
    )
    policy, _ = parse_policy_line('{"user":"*","namespace":"ns"}')
    assert (policy.user, policy.group, policy.namespace, policy.non_resource_path) == (
        "",
        "system:authenticated",
        "ns",
        "",
    )
    _, old = parse_policy_line(v1beta1(user="a"))
    assert not old


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "Expecting property name"),
        ("[1, 2]", "expected a JSON object"),
        (v1beta1(user=5), "spec.user: expected a string, got 5"),
        (v1beta1(readonly="yes"), 'spec.readonly: expected a boolean, got "yes"'),
    ],
)
def test_abac_bad_lines_name_file_and_line(tmp_path: Path, line: str, problem: str) -> None:
    policy = tmp_path / "bad.jsonl"
    policy.write_text(v1beta1(user="a") + "\n" + line + "\n")
    with pytest.raises(PolicyFileError) as caught:
        load_policy_file(str(policy))
    message = str(caught.value)
    assert message.startswith(f"error reading policy file {policy}, line 2: {line}: ")
    assert problem in message


def test_abac_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"error reading policy file .*nope\.jsonl: No such file"):
        load_policy_file(str(tmp_path / "nope.jsonl"))


def test_abac_empty_list() -> None:
    assert ABACAuthorizer([]).authorize(path(BOB, "/")).reason == "No policy matched."


# --- RBAC ----------------------------------------------------------------------------------


def test_rbac_public_info_and_monitoring() -> None:
    rbac = RBACAuthorizer()
    for endpoint in ("/healthz", "/livez", "/readyz", "/version", "/version/"):
        decision = rbac.authorize(path(ANON, endpoint))
        assert decision == Decision(
            ALLOW,
            'RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of ClusterRole '
            '"system:public-info-viewer" to Group "system:unauthenticated"',
        )
    for endpoint in ("/readyz/ping", "/livez/etcd", "/healthz/log", "/metrics", "/", "/api"):
        assert rbac.authorize(path(ANON, endpoint)) == Decision(NO_OPINION, "")
    assert rbac.authorize(path(ANON, "/healthz", "head")).decision == NO_OPINION
    monitoring = UserInfo("prom", groups=("system:monitoring",))
    for endpoint in ("/readyz/ping", "/livez/etcd", "/metrics", "/metrics/slis", "/healthz"):
        assert rbac.authorize(path(monitoring, endpoint)).decision == ALLOW
    assert rbac.authorize(path(monitoring, "/api")).decision == NO_OPINION


def test_rbac_discovery_and_basic_user_for_authenticated() -> None:
    rbac = RBACAuthorizer()
    for endpoint in ("/api", "/api/v1", "/apis", "/apis/events.k8s.io/v1", "/openapi/v3"):
        decision = rbac.authorize(path(BOB, endpoint))
        assert decision.decision == ALLOW, endpoint
        assert '"system:discovery"' in decision.reason
    assert rbac.authorize(path(ANON, "/apis")).decision == NO_OPINION
    assert rbac.authorize(path(BOB, "/healthz")).reason.startswith(
        'RBAC: allowed by ClusterRoleBinding "system:discovery"'
    )
    review = res(BOB, "create", "selfsubjectaccessreviews", "", "authorization.k8s.io")
    assert rbac.authorize(review).decision == ALLOW
    review = res(BOB, "create", "selfsubjectreviews", "", "authentication.k8s.io")
    assert rbac.authorize(review).decision == ALLOW
    assert rbac.authorize(res(BOB, "list")).decision == NO_OPINION


def test_rbac_cluster_admin_and_components() -> None:
    rbac = RBACAuthorizer()
    decision = rbac.authorize(res(ADMIN, "deletecollection", "events", "x", "events.k8s.io"))
    assert decision == Decision(
        ALLOW,
        'RBAC: allowed by ClusterRoleBinding "cluster-admin" of ClusterRole "cluster-admin" '
        'to Group "system:masters"',
    )
    assert rbac.authorize(path(ADMIN, "/anything", "post")).decision == ALLOW
    scheduler = UserInfo("system:kube-scheduler", groups=("system:authenticated",))
    decision = rbac.authorize(res(scheduler, "create", group="events.k8s.io"))
    assert decision.reason == (
        'RBAC: allowed by ClusterRoleBinding "system:kube-scheduler" of ClusterRole '
        '"system:kube-scheduler" to User "system:kube-scheduler"'
    )
    assert rbac.authorize(res(scheduler, "delete", name="e")).decision == NO_OPINION


def test_rbac_rule_matching() -> None:
    from apiserver.auth.authz.rbac import ClusterRole, ClusterRoleBinding, PolicyRule, Subject

    roles = [
        ClusterRole(
            "r",
            (
                PolicyRule(("get",), ("",), ("*/status",)),
                PolicyRule(("update",), ("",), ("events",), resource_names=("only",)),
            ),
        )
    ]
    sa = Subject("ServiceAccount", "sa", "ns")
    rbac = RBACAuthorizer(roles, [ClusterRoleBinding("b", "r", (sa,))])
    user = UserInfo("system:serviceaccount:ns:sa")
    assert rbac.authorize(res(user, "get", "pods", subresource="status", name="p")).reason == (
        'RBAC: allowed by ClusterRoleBinding "b" of ClusterRole "r" to ServiceAccount "ns/sa"'
    )
    assert rbac.authorize(res(user, "get", "pods", name="p")).decision == NO_OPINION
    assert rbac.authorize(res(user, "update", name="only")).decision == ALLOW
    assert rbac.authorize(res(user, "update", name="other")).decision == NO_OPINION
    assert rbac.authorize(res(UserInfo("x"), "update", name="only")).decision == NO_OPINION


# --- Node ----------------------------------------------------------------------------------


def test_node() -> None:
    node = NodeAuthorizer()
    kubelet = UserInfo("system:node:n1", groups=("system:nodes", "system:authenticated"))
    assert node.authorize(res(kubelet, "create", group="events.k8s.io")) == Decision(ALLOW)
    assert node.authorize(res(kubelet, "patch", name="e")) == Decision(ALLOW)
    assert node.authorize(res(kubelet, "delete", name="e")) == Decision(NO_OPINION)
    assert node.authorize(res(kubelet, "get", "secrets", name="s")) == Decision(
        NO_OPINION, "no relationship found between node 'n1' and this object"
    )
    assert node.authorize(res(BOB, "create")) == Decision(NO_OPINION)
    not_a_node = UserInfo("system:node:n1", groups=("system:authenticated",))
    assert node.authorize(res(not_a_node, "create")) == Decision(NO_OPINION)
    nameless = UserInfo("system:node:", groups=("system:nodes",))
    assert node.authorize(res(nameless, "create")) == Decision(
        NO_OPINION, 'unknown node for user "system:node:"'
    )
