"""The authorizer chain from flags and from an AuthorizationConfiguration file; build_auth."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from apiserver.auth import build_auth
from apiserver.auth.authz.abac import ABACAuthorizer
from apiserver.auth.authz.builtin import AlwaysDeny, PrivilegedGroups
from apiserver.auth.authz.config import (
    build_authorizer,
    load_authorization_config,
    parse_authorization_config,
    specs_from_flags,
)
from apiserver.auth.authz.node import NodeAuthorizer
from apiserver.auth.authz.rbac import RBACAuthorizer
from apiserver.auth.authz.union import Union
from apiserver.auth.authz.webhook import WebhookAuthorizer
from apiserver.auth.filter import AuthStages
from apiserver.auth.interface import ALLOW, DENY, NO_OPINION, Attributes, UserInfo
from apiserver.options.config import ServerConfig


class StubTransport:
    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.bodies: list[bytes] = []

    def post(self, body: bytes, timeout: float) -> Deferred[tuple[int, bytes]]:
        self.bodies.append(body)
        return succeed((200, json.dumps({"status": {"allowed": True}}).encode()))


def transport(kubeconfig: str, reactor: Any) -> StubTransport:
    return StubTransport(kubeconfig)


def webhook_entry(name: str, kubeconfig: str, **overrides: Any) -> dict[str, Any]:
    webhook: dict[str, Any] = {
        "timeout": "3s",
        "subjectAccessReviewVersion": "v1",
        "failurePolicy": "Deny",
        "connectionInfo": {"type": "KubeConfigFile", "kubeConfigFile": kubeconfig},
    }
    webhook.update(overrides)
    return {"type": "Webhook", "name": name, "webhook": webhook}


def document(authorizers: list[Any], version: str = "v1") -> str:
    return json.dumps(
        {
            "apiVersion": f"apiserver.config.k8s.io/{version}",
            "kind": "AuthorizationConfiguration",
            "authorizers": authorizers,
        }
    )


@pytest.fixture
def kubeconfig(tmp_path: Path) -> str:
    path = tmp_path / "webhook.kubeconfig"
    path.write_text("apiVersion: v1\nkind: Config\n")
    return str(path)


def test_default_is_always_allow() -> None:
    config = ServerConfig.defaults()
    assert [s.type for s in specs_from_flags(config)] == ["AlwaysAllow"]
    assert build_authorizer(config, Clock()) is None


def test_modes_from_flags(tmp_path: Path) -> None:
    policy = tmp_path / "abac.jsonl"
    policy.write_text('{"user":"alice"}\n')
    config = ServerConfig.defaults().evolve(
        authorization_mode=("Node", "RBAC", "ABAC", "AlwaysDeny", "Webhook"),
        authorization_policy_file=str(policy),
        authorization_webhook_config_file="/etc/hook.kubeconfig",
        authorization_webhook_version="v1",
        authorization_webhook_cache_authorized_ttl=10.0,
    )
    chain = build_authorizer(config, Clock(), transport)
    assert isinstance(chain, Union)
    kinds = [type(a) for a in chain.authorizers]
    assert kinds == [
        PrivilegedGroups,
        NodeAuthorizer,
        RBACAuthorizer,
        ABACAuthorizer,
        AlwaysDeny,
        WebhookAuthorizer,
    ]
    webhook = chain.authorizers[-1]
    assert isinstance(webhook, WebhookAuthorizer)
    assert (webhook.version, webhook.authorized_ttl, webhook.unauthorized_ttl) == ("v1", 10, 30)
    assert (webhook.timeout, webhook.decision_on_error) == (30.0, NO_OPINION)
    assert isinstance(webhook.transport, StubTransport)
    assert webhook.transport.kubeconfig == "/etc/hook.kubeconfig"


def test_always_allow_first_needs_no_authorizer() -> None:
    config = ServerConfig.defaults().evolve(authorization_mode=("AlwaysAllow", "AlwaysDeny"))
    assert build_authorizer(config, Clock()) is None
    config = ServerConfig.defaults().evolve(authorization_mode=("RBAC", "AlwaysAllow"))
    assert isinstance(build_authorizer(config, Clock()), Union)


def test_bad_abac_file_names_the_file(tmp_path: Path) -> None:
    policy = tmp_path / "abac.jsonl"
    policy.write_text("{oops\n")
    config = ServerConfig.defaults().evolve(
        authorization_mode=("ABAC",), authorization_policy_file=str(policy)
    )
    with pytest.raises(ValueError, match=f"error reading policy file {policy}, line 1"):
        build_auth(config, Clock(), None)


def test_authorization_config(tmp_path: Path, kubeconfig: str) -> None:
    path = tmp_path / "authz.yaml"
    path.write_text(
        f"""
apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: first
  webhook:
    timeout: 3s
    authorizedTTL: 1m
    subjectAccessReviewVersion: v1beta1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo: {{type: KubeConfigFile, kubeConfigFile: {kubeconfig}}}
    matchConditions:
    - expression: has(request.resourceAttributes)
- {{type: Node, name: node}}
- {{type: RBAC, name: rbac}}
- type: Webhook
  name: second
  webhook:
    timeout: 30s
    subjectAccessReviewVersion: v1
    failurePolicy: NoOpinion
    connectionInfo: {{type: KubeConfigFile, kubeConfigFile: {kubeconfig}}}
"""
    )
    specs = load_authorization_config(str(path))
    assert [(s.type, s.name) for s in specs] == [
        ("Webhook", "first"),
        ("Node", "node"),
        ("RBAC", "rbac"),
        ("Webhook", "second"),
    ]
    first = specs[0].webhook
    assert first is not None
    assert (first.timeout, first.authorized_ttl, first.unauthorized_ttl) == (3.0, 60.0, 30.0)
    assert (first.version, first.failure_policy) == ("v1beta1", DENY)
    assert [p.expression for p in first.match_conditions] == ["has(request.resourceAttributes)"]
    config = ServerConfig.defaults().evolve(authorization_config=str(path))
    chain = build_authorizer(config, Clock(), transport)
    assert isinstance(chain, Union)
    hook = chain.authorizers[1]
    assert isinstance(hook, WebhookAuthorizer)
    assert (hook.name, hook.timeout, hook.decision_on_error) == ("first", 3.0, DENY)
    assert hook.matcher is not None
    # The match condition skips the first webhook for a non-resource request.
    anon = Attributes(UserInfo("system:anonymous"), "get", False, path="/livez/ping")
    decision = chain.authorize(anon)
    assert isinstance(decision, Deferred) or decision.decision == ALLOW
    assert isinstance(hook.transport, StubTransport) and hook.transport.bodies == []


@pytest.mark.parametrize("version", ["v1beta1", "v1alpha1"])
def test_older_versions(version: str) -> None:
    specs = parse_authorization_config(document([{"type": "RBAC", "name": "rbac"}], version))
    assert specs[0].type == "RBAC"


@pytest.mark.parametrize(
    ("authorizers", "message"),
    [
        ([], "authorizers: Required value: at least one authorization mode must be defined"),
        (
            [{"type": "RBAC", "name": "rbac"}, {"type": "RBAC", "name": "rbac2"}],
            'authorizers[1].type: Duplicate value: "RBAC"',
        ),
        (
            [{"type": "RBAC", "name": "a"}, {"type": "Node", "name": "a"}],
            'authorizers[1].name: Duplicate value: "a"',
        ),
        (
            [{"type": "RBAC", "name": "Bad_Name"}],
            'authorizers[0].name: Invalid value: "Bad_Name": authorizer name is invalid: a '
            "lowercase RFC 1123 subdomain",
        ),
        (
            [{"type": "Fancy", "name": "a"}],
            'authorizers[0].type: Unsupported value: "Fancy": supported values: "ABAC", '
            '"AlwaysAllow", "AlwaysDeny", "Node", "RBAC", "Webhook"',
        ),
        ([{"name": "a"}], "authorizers[0].type: Required value"),
        ([{"type": "RBAC"}], "authorizers[0].name: Required value"),
        (
            [{"type": "Webhook", "name": "a"}],
            "authorizers[0].webhook: Required value: required when type=Webhook",
        ),
        (
            [{"type": "RBAC", "name": "rbac", "webhook": {}}],
            'authorizers[0].webhook: Invalid value: "non-null": may only be specified when '
            "type=Webhook",
        ),
        (
            [{"type": "RBAC", "name": "authz"}],
            "expected name rbac for authorizer RBAC instead of authz",
        ),
        ([{"type": "RBAC", "name": "rbac", "extra": 1}], 'unknown field "authorizers[0].extra"'),
    ],
)
def test_validation(authorizers: list[Any], message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_authorization_config(document(authorizers))
    assert message in str(caught.value)


def test_webhook_validation(kubeconfig: str) -> None:
    broken = webhook_entry(
        "w",
        kubeconfig,
        timeout="45s",
        failurePolicy="Sometimes",
        subjectAccessReviewVersion="v2",
        authorizedTTL="-1s",
        matchConditions=[{"expression": "true"}],
    )
    with pytest.raises(ValueError) as caught:
        parse_authorization_config(document([broken]))
    message = str(caught.value)
    for part in (
        'authorizers[0].timeout: Invalid value: "45s": must be > 0s and <= 30s',
        'authorizers[0].authorizedTTL: Invalid value: "-1s": must be > 0s',
        'authorizers[0].subjectAccessReviewVersion: Unsupported value: "v2": supported '
        'values: "v1", "v1beta1"',
        "authorizers[0].matchConditionSubjectAccessReviewVersion: Required value: required "
        "if match conditions are specified",
        'authorizers[0].failurePolicy: Unsupported value: "Sometimes"',
    ):
        assert part in message, (part, message)
    missing = webhook_entry("w", "/nonexistent/kubeconfig")
    with pytest.raises(ValueError, match=r"kubeConfigFile: Invalid value.*error loading file"):
        parse_authorization_config(document([missing]))
    relative = webhook_entry("w", "relative/kubeconfig")
    with pytest.raises(ValueError, match="must be an absolute path"):
        parse_authorization_config(document([relative]))
    no_timeout = webhook_entry("w", kubeconfig)
    del no_timeout["webhook"]["timeout"]
    with pytest.raises(ValueError, match=r"authorizers\[0\].timeout: Required value"):
        parse_authorization_config(document([no_timeout]))
    in_cluster = webhook_entry("w", kubeconfig, connectionInfo={"type": "InClusterConfig"})
    with pytest.raises(ValueError, match="not supported by this server"):
        parse_authorization_config(document([in_cluster]))
    cel = webhook_entry(
        "w",
        kubeconfig,
        matchConditionSubjectAccessReviewVersion="v1",
        matchConditions=[{"expression": "request.nope == 1"}, {"expression": "1 * 2 == 2"}],
    )
    with pytest.raises(ValueError) as caught:
        parse_authorization_config(document([cel]))
    assert (
        'authorizers[0].matchConditions[0].expression: Invalid value: "request.nope == 1": '
        "compilation failed: undefined field 'nope'"
    ) in str(caught.value)
    assert "not supported by this server's CEL subset" in str(caught.value)


def test_bad_documents(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="Object 'Kind' is missing"):
        parse_authorization_config("authorizers: []")
    with pytest.raises(ValueError, match='no kind "AuthorizationConfiguration" is registered'):
        parse_authorization_config(document([], "v9"))
    with pytest.raises(ValueError, match="failed to load"):
        parse_authorization_config("a: [")
    path = tmp_path / "authz.yaml"
    path.write_text(document([]))
    with pytest.raises(ValueError, match=f"--authorization-config {path}: "):
        load_authorization_config(str(path))
    with pytest.raises(ValueError, match="cannot read"):
        load_authorization_config(str(tmp_path / "missing.yaml"))


def test_build_auth_default_allows_anonymous() -> None:
    stages = build_auth(ServerConfig.defaults(), Clock(), None)
    assert isinstance(stages, AuthStages)
    assert stages.authorization.authorizer is None
    assert stages.impersonation.authorizer is None


def test_authorization_config_is_reloaded(tmp_path: Path) -> None:
    path = tmp_path / "authz.yaml"
    path.write_text(document([{"type": "AlwaysDeny", "name": "alwaysdeny"}]))
    clock = Clock()
    config = ServerConfig.defaults().evolve(authorization_config=str(path))
    stages = build_auth(config, clock, None)
    assert isinstance(stages, AuthStages)
    assert stages.reloader is not None
    assert stages.background == [stages.reloader]
    assert not clock.getDelayedCalls()  # building schedules nothing: the tree starts it
    stages.reloader.start()

    def current() -> object:
        # Impersonation and authorization always ask the same authorizer.
        assert stages.impersonation.authorizer is stages.authorization.authorizer
        return stages.authorization.authorizer

    first = current()
    assert isinstance(first, Union)
    clock.advance(60)
    assert current() is first  # unchanged file: nothing rebuilt
    path.write_text(document([{"type": "RBAC", "name": "not-rbac"}]))
    clock.advance(60)
    assert current() is first  # invalid: the running chain stays
    path.write_text(document([{"type": "AlwaysAllow", "name": "alwaysallow"}]))
    clock.advance(60)
    assert current() is None
    path.write_text(document([{"type": "RBAC", "name": "rbac"}]))
    clock.advance(60)
    chain = current()
    assert isinstance(chain, Union)
    assert isinstance(chain.authorizers[1], RBACAuthorizer)
    assert stages.reloader is not None
    stages.reloader.stop()
