"""Mode ``Node``: what kubelets may do (brief).

Follows ``KK/plugin/pkg/auth/authorizer/node/node_authorizer.go`` and
``KK/pkg/auth/nodeidentifier/default.go``:

- It has an opinion only about nodes: users named ``system:node:<name>`` in group
  ``system:nodes``. Everyone else gets NoOpinion with no reason; a node user with an empty
  name gets NoOpinion ``unknown node for user "<user>"``.
- Requests for objects the reference checks against its node graph (secrets, configmaps,
  persistent volumes and claims, resource claims, service account tokens, volume
  attachments, ...) are answered from that graph. This server stores none of those objects,
  so no node is ever related to one: NoOpinion
  ``no relationship found between node '<name>' and this object``.
- Everything else is checked against the static node rules (``NodeRules()`` in
  bootstrappolicy); the part that matters here is that nodes may create, update and patch
  ``events`` in the core and ``events.k8s.io`` groups.
"""

from __future__ import annotations

from apiserver.auth.authz.rbac import PolicyRule
from apiserver.auth.authz.rules import EMPTY, RuleSet
from apiserver.auth.interface import ALLOW, NO_OPINION, Attributes, Decision, UserInfo
from apiserver.gocompat.quote import go_quote

NODES_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"

_READ = ("get", "list", "watch")

#: A subset of bootstrappolicy ``NodeRules()`` (the resources this server could ever see).
NODE_RULES: tuple[PolicyRule, ...] = (
    PolicyRule(verbs=_READ, api_groups=("",), resources=("services", "endpoints")),
    PolicyRule(verbs=_READ, api_groups=("",), resources=("nodes",)),
    PolicyRule(verbs=("create", "update", "patch"), api_groups=("",), resources=("nodes/status",)),
    PolicyRule(verbs=("update", "patch"), api_groups=("",), resources=("nodes",)),
    PolicyRule(
        verbs=("create", "update", "patch"),
        api_groups=("", "events.k8s.io"),
        resources=("events",),
    ),
    PolicyRule(verbs=_READ, api_groups=("",), resources=("pods",)),
    PolicyRule(verbs=("create", "delete"), api_groups=("",), resources=("pods",)),
    PolicyRule(verbs=("update", "patch"), api_groups=("",), resources=("pods/status",)),
    PolicyRule(verbs=("create",), api_groups=("",), resources=("pods/eviction",)),
    PolicyRule(
        verbs=("create",),
        api_groups=("authentication.k8s.io",),
        resources=("tokenreviews",),
    ),
    PolicyRule(
        verbs=("create",),
        api_groups=("authorization.k8s.io",),
        resources=("subjectaccessreviews", "localsubjectaccessreviews"),
    ),
    PolicyRule(
        verbs=("create", "get", "list", "watch"),
        api_groups=("certificates.k8s.io",),
        resources=("certificatesigningrequests",),
    ),
    PolicyRule(verbs=_READ, api_groups=("node.k8s.io",), resources=("runtimeclasses",)),
)

#: (group, resource[/subresource]) the reference checks against the node graph.
GRAPH_RESOURCES = frozenset(
    {
        ("", "secrets"),
        ("", "configmaps"),
        ("", "persistentvolumeclaims"),
        ("", "persistentvolumes"),
        ("", "serviceaccounts/token"),
        ("resource.k8s.io", "resourceclaims"),
        ("resource.k8s.io", "resourceslices"),
        ("storage.k8s.io", "volumeattachments"),
        ("storage.k8s.io", "csinodes"),
        ("coordination.k8s.io", "leases"),
    }
)

_NO_OPINION = Decision(NO_OPINION)
_ALLOWED = Decision(ALLOW)


class NodeAuthorizer:
    """See the module docstring."""

    def __init__(self, rules: tuple[PolicyRule, ...] = NODE_RULES) -> None:
        self.rules = rules

    def rules_for(self, user: UserInfo, namespace: str) -> RuleSet:
        """``NodeAuthorizer.RulesFor``: a node's permissions are not enumerated."""
        if user.name.startswith(NODE_USER_PREFIX) and NODES_GROUP in user.groups:
            return RuleSet(
                incomplete=True, error="node authorizer does not support user rule resolution"
            )
        return EMPTY

    def authorize(self, attributes: Attributes) -> Decision:
        user = attributes.user
        if not user.name.startswith(NODE_USER_PREFIX) or NODES_GROUP not in user.groups:
            return _NO_OPINION
        node = user.name[len(NODE_USER_PREFIX) :]
        if not node:
            return Decision(NO_OPINION, f"unknown node for user {go_quote(user.name)}")
        if attributes.resource_request:
            resource = attributes.resource
            if attributes.subresource:
                resource += "/" + attributes.subresource
            if (attributes.api_group, resource) in GRAPH_RESOURCES or (
                attributes.api_group,
                attributes.resource,
            ) in GRAPH_RESOURCES:
                return Decision(
                    NO_OPINION, f"no relationship found between node '{node}' and this object"
                )
        for rule in self.rules:
            if rule.allows(attributes):
                return _ALLOWED
        return _NO_OPINION
