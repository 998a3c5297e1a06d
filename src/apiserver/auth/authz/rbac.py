"""RBAC over the bootstrap policy only.

This server has no ``rbac.authorization.k8s.io`` API, so mode ``RBAC`` evaluates the cluster
roles and bindings kube-apiserver creates at start-up
(``KK/plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``) and nothing else; the
ones that matter for what this server serves are:

============================  ==========================================  ====================
ClusterRole(Binding)          Subjects                                    Grants
============================  ==========================================  ====================
cluster-admin                 group system:masters                        everything
system:public-info-viewer     system:authenticated, system:unauthenticated get /livez /readyz
                                                                          /healthz /version
                                                                          /version/ (exact)
system:discovery              system:authenticated                        the above plus
                                                                          /openapi[/*] /api[/*]
                                                                          /apis[/*]
system:basic-user             system:authenticated                        create self*reviews
system:monitoring             group system:monitoring                     get /metrics,
                                                                          /metrics/slis and the
                                                                          per-check health paths
============================  ==========================================  ====================

Plus the events rules of the bootstrap roles of the control-plane components
(``system:kube-scheduler``, ``system:kube-controller-manager``), bound to their users, since
those components write events.

Rule matching follows ``KK/plugin/pkg/auth/authorizer/rbac/rbac.go`` (``RuleAllows``) and
``KK/pkg/apis/rbac/v1/evaluation_helpers.go``: verbs and API groups equal or ``*``; resources
equal to ``resource[/subresource]``, ``*``, or ``*/<subresource>``; resource names empty or
containing the name; non-resource URLs equal, ``*``, or a prefix ending in ``*``. The allow
reason is ``RBAC: allowed by ClusterRoleBinding "<b>" of ClusterRole "<r>" to Group "<g>"``;
no match is a NoOpinion with an empty reason. Bindings are visited in name order (kube visits
its informer cache, whose order is not defined).
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from apiserver.auth.authz.rules import NonResourceRule, ResourceRule, RuleSet
from apiserver.auth.interface import (
    ALLOW,
    AUTHENTICATED,
    MASTERS,
    NO_OPINION,
    UNAUTHENTICATED,
    Attributes,
    Decision,
    UserInfo,
)
from apiserver.gocompat.quote import go_quote

MONITORING = "system:monitoring"


@attrs.frozen
class PolicyRule:
    """``rbacv1.PolicyRule``."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()
    non_resource_urls: tuple[str, ...] = ()

    def allows(self, attributes: Attributes) -> bool:
        if "*" not in self.verbs and attributes.verb not in self.verbs:
            return False
        if not attributes.resource_request:
            return _url_matches(self.non_resource_urls, attributes.path)
        if "*" not in self.api_groups and attributes.api_group not in self.api_groups:
            return False
        if not _resource_matches(self.resources, attributes.resource, attributes.subresource):
            return False
        return not self.resource_names or attributes.name in self.resource_names


def _url_matches(patterns: Sequence[str], path: str) -> bool:
    for pattern in patterns:
        if pattern == "*" or pattern == path:
            return True
        if pattern.endswith("*") and path.startswith(pattern.rstrip("*")):
            return True
    return False


def _resource_matches(patterns: Sequence[str], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for pattern in patterns:
        if pattern == "*" or pattern == combined:
            return True
        if subresource and pattern == "*/" + subresource:
            return True
    return False


@attrs.frozen
class Subject:
    """``rbacv1.Subject``: kind ``User``, ``Group`` or ``ServiceAccount``."""

    kind: str
    name: str
    namespace: str = ""

    def applies_to(self, user: UserInfo) -> bool:
        if self.kind == "User":
            return user.name == self.name
        if self.kind == "Group":
            return self.name in user.groups
        if self.kind == "ServiceAccount":
            return user.name == f"system:serviceaccount:{self.namespace}:{self.name}"
        return False

    def describe(self) -> str:
        if self.kind == "ServiceAccount" and self.namespace:
            return f"{self.kind} {go_quote(self.namespace + '/' + self.name)}"
        return f"{self.kind} {go_quote(self.name)}"


@attrs.frozen
class ClusterRole:
    name: str
    rules: tuple[PolicyRule, ...]


@attrs.frozen
class ClusterRoleBinding:
    name: str
    role: str
    subjects: tuple[Subject, ...]


def _get_urls(*urls: str) -> PolicyRule:
    return PolicyRule(verbs=("get",), non_resource_urls=urls)


_PUBLIC_INFO_URLS = ("/livez", "/readyz", "/healthz", "/version", "/version/")
_EVENT_WRITE = PolicyRule(
    verbs=("create", "patch", "update"), api_groups=("", "events.k8s.io"), resources=("events",)
)

BOOTSTRAP_ROLES: tuple[ClusterRole, ...] = (
    ClusterRole(
        "cluster-admin",
        (
            PolicyRule(verbs=("*",), api_groups=("*",), resources=("*",)),
            PolicyRule(verbs=("*",), non_resource_urls=("*",)),
        ),
    ),
    ClusterRole("system:public-info-viewer", (_get_urls(*_PUBLIC_INFO_URLS),)),
    ClusterRole(
        "system:discovery",
        (
            _get_urls(
                *_PUBLIC_INFO_URLS,
                "/openapi",
                "/openapi/*",
                "/api",
                "/api/*",
                "/apis",
                "/apis/*",
            ),
        ),
    ),
    ClusterRole(
        "system:basic-user",
        (
            PolicyRule(
                verbs=("create",),
                api_groups=("authorization.k8s.io",),
                resources=("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
            ),
            PolicyRule(
                verbs=("create",),
                api_groups=("authentication.k8s.io",),
                resources=("selfsubjectreviews",),
            ),
        ),
    ),
    ClusterRole(
        "system:monitoring",
        (
            _get_urls(
                "/metrics",
                "/metrics/slis",
                "/livez",
                "/readyz",
                "/healthz",
                "/livez/*",
                "/readyz/*",
                "/healthz/*",
            ),
        ),
    ),
    ClusterRole(
        "system:auth-delegator",
        (
            PolicyRule(
                verbs=("create",),
                api_groups=("authentication.k8s.io",),
                resources=("tokenreviews",),
            ),
            PolicyRule(
                verbs=("create",),
                api_groups=("authorization.k8s.io",),
                resources=("subjectaccessreviews",),
            ),
        ),
    ),
    ClusterRole("system:kube-scheduler", (_EVENT_WRITE,)),
    ClusterRole("system:kube-controller-manager", (_EVENT_WRITE,)),
)

BOOTSTRAP_BINDINGS: tuple[ClusterRoleBinding, ...] = (
    ClusterRoleBinding("cluster-admin", "cluster-admin", (Subject("Group", MASTERS),)),
    ClusterRoleBinding(
        "system:basic-user", "system:basic-user", (Subject("Group", AUTHENTICATED),)
    ),
    ClusterRoleBinding("system:discovery", "system:discovery", (Subject("Group", AUTHENTICATED),)),
    ClusterRoleBinding(
        "system:kube-controller-manager",
        "system:kube-controller-manager",
        (Subject("User", "system:kube-controller-manager"),),
    ),
    ClusterRoleBinding(
        "system:kube-scheduler",
        "system:kube-scheduler",
        (Subject("User", "system:kube-scheduler"),),
    ),
    ClusterRoleBinding("system:monitoring", "system:monitoring", (Subject("Group", MONITORING),)),
    ClusterRoleBinding(
        "system:public-info-viewer",
        "system:public-info-viewer",
        (Subject("Group", AUTHENTICATED), Subject("Group", UNAUTHENTICATED)),
    ),
)

_NO_MATCH = Decision(NO_OPINION)


class RBACAuthorizer:
    """RBAC over a fixed set of cluster roles and bindings (the bootstrap policy)."""

    def __init__(
        self,
        roles: Sequence[ClusterRole] = BOOTSTRAP_ROLES,
        bindings: Sequence[ClusterRoleBinding] = BOOTSTRAP_BINDINGS,
    ) -> None:
        by_name = {role.name: role for role in roles}
        # The allow reasons are fixed per (binding, subject): build them once.
        self._bindings = tuple(
            (
                tuple(
                    (
                        subject,
                        Decision(
                            ALLOW,
                            f"RBAC: allowed by ClusterRoleBinding {go_quote(binding.name)} of "
                            f"ClusterRole {go_quote(binding.role)} to {subject.describe()}",
                        ),
                    )
                    for subject in binding.subjects
                ),
                by_name[binding.role].rules,
            )
            for binding in sorted(bindings, key=lambda b: b.name)
            if binding.role in by_name
        )

    def authorize(self, attributes: Attributes) -> Decision:
        user = attributes.user
        for subjects, rules in self._bindings:
            for subject, allowed in subjects:
                if not subject.applies_to(user):
                    continue
                for rule in rules:
                    if rule.allows(attributes):
                        return allowed
                break  # the binding applies; its rules did not allow
        return _NO_MATCH

    def rules_for(self, user: UserInfo, namespace: str) -> RuleSet:
        """``RBACAuthorizer.RulesFor`` (``KK/plugin/pkg/auth/authorizer/rbac/rbac.go``): the
        rules of every binding that applies to the user (there are no namespaced
        RoleBindings here), each split into its resource and non-resource halves."""
        resource: list[ResourceRule] = []
        non_resource: list[NonResourceRule] = []
        for subjects, rules in self._bindings:
            if not any(subject.applies_to(user) for subject, _ in subjects):
                continue
            for rule in rules:
                if rule.resources:
                    resource.append(
                        ResourceRule(
                            rule.verbs, rule.api_groups, rule.resources, rule.resource_names
                        )
                    )
                if rule.non_resource_urls:
                    non_resource.append(NonResourceRule(rule.verbs, rule.non_resource_urls))
        return RuleSet(tuple(resource), tuple(non_resource))
