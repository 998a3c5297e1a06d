"""ABAC: ``--authorization-policy-file``, one JSON policy per line.

Follows ``KK/pkg/auth/authorizer/abac/abac.go`` and the conversions in
``KK/pkg/apis/abac/{v0,v1beta1}/conversion.go``:

- Lines are read one by one; blank lines and lines starting with ``#`` (after trimming) are
  skipped. A line of ``apiVersion: abac.authorization.kubernetes.io/v1beta1``,
  ``kind: Policy`` is read as a v1beta1 policy (fields under ``spec``). Any other line (no
  version or kind, an unknown version, or ``.../v0``) is read as the unversioned v0 form (the
  fields at the top level) and converted; a warning says the file has unversioned rules.
- A malformed line stops the load: ``error reading policy file <path>, line <n>: <line>:
  <problem>``.
- v1beta1: ``user: "*"`` or ``group: "*"`` means every authenticated user (group
  ``system:authenticated``). v0 also reads an empty user and group that way, an empty
  namespace or resource as ``*``, both empty as non-resource path ``*``, and any API group.
- A policy matches when its subject matches (a user or group must be set; ``*`` matches any),
  the request is read-only or the policy is not ``readonly``, and either the resource
  attributes (namespace, resource, apiGroup: equal or ``*``) or, for a non-resource request,
  the path (``*``, equal, or a prefix ending in ``*``) match. Any match allows; otherwise
  NoOpinion with ``No policy matched.``.

Field names are case-sensitive and unknown fields ignored, as kube's JSON decoder does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
from twisted.logger import Logger

from apiserver.auth.authz.rules import NonResourceRule, ResourceRule, RuleSet
from apiserver.auth.interface import (
    ALLOW,
    AUTHENTICATED,
    NO_OPINION,
    Attributes,
    Decision,
    UserInfo,
)

log = Logger()

API_VERSION = "abac.authorization.kubernetes.io/v1beta1"
_V0 = "abac.authorization.kubernetes.io/v0"
KIND = "Policy"
_READ_ONLY = frozenset({"get", "list", "watch"})
NO_POLICY_MATCHED = Decision(NO_OPINION, "No policy matched.")
_ALLOWED = Decision(ALLOW)

_SPEC_STRINGS = ("user", "group", "apiGroup", "namespace", "resource", "nonResourcePath")
_V0_STRINGS = ("user", "group", "namespace", "resource")


@attrs.frozen
class Policy:
    """The internal ``abac.PolicySpec``."""

    user: str = ""
    group: str = ""
    readonly: bool = False
    api_group: str = ""
    resource: str = ""
    namespace: str = ""
    non_resource_path: str = ""

    def subject_matches(self, user: UserInfo) -> bool:
        matched = False
        if self.user:
            if self.user == "*":
                matched = True
            elif self.user == user.name:
                matched = True
            else:
                return False
        if self.group:
            if self.group == "*":
                matched = True
            elif self.group in user.groups:
                matched = True
            else:
                return False
        return matched

    def resource_matches(self, attributes: Attributes) -> bool:
        return (
            attributes.resource_request
            and self.namespace in ("*", attributes.namespace)
            and self.resource in ("*", attributes.resource)
            and self.api_group in ("*", attributes.api_group)
        )

    def non_resource_matches(self, attributes: Attributes) -> bool:
        if attributes.resource_request:
            return False
        pattern = self.non_resource_path
        if pattern == "*" or pattern == attributes.path:
            return True
        return pattern.endswith("*") and attributes.path.startswith(pattern.rstrip("*"))

    def matches(self, attributes: Attributes) -> bool:
        if not self.subject_matches(attributes.user):
            return False
        if self.readonly and attributes.verb not in _READ_ONLY:
            return False
        return self.resource_matches(attributes) or self.non_resource_matches(attributes)


class PolicyFileError(ValueError):
    """The policy file cannot be loaded (``policyLoadError``)."""


class ABACAuthorizer:
    """A loaded policy list (``abac.PolicyList``)."""

    def __init__(self, policies: Sequence[Policy]) -> None:
        self.policies = tuple(policies)

    def authorize(self, attributes: Attributes) -> Decision:
        for policy in self.policies:
            if policy.matches(attributes):
                return _ALLOWED
        return NO_POLICY_MATCHED

    def rules_for(self, user: UserInfo, namespace: str) -> RuleSet:
        """``PolicyList.RulesFor`` (``KK/pkg/auth/authorizer/abac/abac.go``): each policy of
        the user in this namespace (or ``*``) as a rule; read-only ones allow get, list and
        watch, the others ``*``."""
        resource: list[ResourceRule] = []
        non_resource: list[NonResourceRule] = []
        for policy in self.policies:
            if not policy.subject_matches(user) or policy.namespace not in ("*", namespace):
                continue
            verbs = ("get", "list", "watch") if policy.readonly else ("*",)
            if policy.resource:
                resource.append(ResourceRule(verbs, (policy.api_group,), (policy.resource,)))
            if policy.non_resource_path:
                non_resource.append(NonResourceRule(verbs, (policy.non_resource_path,)))
        return RuleSet(tuple(resource), tuple(non_resource))


def _string(obj: dict[str, Any], key: str, where: str) -> str:
    value = obj.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{where}{key}: expected a string, got {json.dumps(value)}")
    return value


def _bool(obj: dict[str, Any], key: str, where: str) -> bool:
    value = obj.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ValueError(f"{where}{key}: expected a boolean, got {json.dumps(value)}")
    return value


def _v1beta1(obj: dict[str, Any]) -> Policy:
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        raise ValueError("spec: expected an object")
    values = {key: _string(spec, key, "spec.") for key in _SPEC_STRINGS}
    policy = Policy(
        user=values["user"],
        group=values["group"],
        readonly=_bool(spec, "readonly", "spec."),
        api_group=values["apiGroup"],
        resource=values["resource"],
        namespace=values["namespace"],
        non_resource_path=values["nonResourcePath"],
    )
    if policy.user == "*" or policy.group == "*":
        policy = attrs.evolve(policy, user="", group=AUTHENTICATED)
    return policy


def _v0(obj: dict[str, Any]) -> Policy:
    values = {key: _string(obj, key, "") for key in _V0_STRINGS}
    user, group = values["user"], values["group"]
    namespace, resource = values["namespace"], values["resource"]
    if not user and not group:
        group = AUTHENTICATED
    if user == "*" or group == "*":
        user, group = "", AUTHENTICATED
    return Policy(
        user=user,
        group=group,
        readonly=_bool(obj, "readonly", ""),
        api_group="*",
        resource=resource or "*",
        namespace=namespace or "*",
        non_resource_path="*" if not namespace and not resource else "",
    )


def parse_policy_line(line: str) -> tuple[Policy, bool]:
    """One policy and whether it was unversioned; raises ValueError for a bad line."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(str(error)) from None
    if not isinstance(obj, dict):
        raise ValueError(f"expected a JSON object, got {json.dumps(obj)[:60]}")
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if api_version == API_VERSION and kind == KIND:
        return _v1beta1(obj), False
    return _v0(obj), api_version != _V0 or kind != KIND


def load_policy_file(path: str) -> ABACAuthorizer:
    """Read ``path`` (``abac.NewFromFile``); raises :class:`PolicyFileError` naming it."""
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as handle:
            lines = handle.read().splitlines()
    except OSError as error:
        raise PolicyFileError(
            f"error reading policy file {path}: {error.strerror or error}"
        ) from None
    policies: list[Policy] = []
    unversioned = 0
    for number, line in enumerate(lines, start=1):
        trimmed = line.strip()
        if not trimmed or trimmed.startswith("#"):
            continue
        try:
            policy, old = parse_policy_line(line)
        except ValueError as error:
            raise PolicyFileError(
                f"error reading policy file {path}, line {number}: {line}: {error}"
            ) from None
        unversioned += old
        policies.append(policy)
    if unversioned:
        log.warn(
            "Policy file {path} contained unversioned rules. See docs/admin/authorization.md"
            "#abac-mode for ABAC file format details.",
            path=path,
        )
    return ABACAuthorizer(policies)
