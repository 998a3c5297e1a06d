"""What a user may do: the rule resolvers behind SelfSubjectRulesReview.

kube-apiserver keeps a ``RuleResolver`` next to each authorizer
(``AS/pkg/authorization/authorizer/interfaces.go`` ``RulesFor(ctx, user, namespace)``) and
joins them as ``AS/pkg/authorization/union/union.go`` ``unionAuthzRulesHandler`` does: the
rule lists are concatenated in chain order, ``incomplete`` is true if any resolver says so,
and their errors are aggregated into one (``evaluationError``).

An authorizer here offers its rules through an optional ``rules_for(user, namespace)``
method returning a :class:`RuleSet` (:class:`RuleResolver`); one without it (the
``system:masters`` authorizer that ``KK/pkg/kubeapiserver/authorizer/reload.go`` puts
first, which has no rule resolver there either) contributes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import attrs

from apiserver.apimachinery.errors import aggregate_text
from apiserver.auth.interface import UserInfo


@attrs.frozen
class ResourceRule:
    """``authorizer.DefaultResourceRuleInfo``."""

    verbs: tuple[str, ...]
    api_groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        """``authorizationv1.ResourceRule``: ``verbs`` always, the rest ``omitempty``."""
        out: dict[str, list[str]] = {"verbs": list(self.verbs)}
        if self.api_groups:
            out["apiGroups"] = list(self.api_groups)
        if self.resources:
            out["resources"] = list(self.resources)
        if self.resource_names:
            out["resourceNames"] = list(self.resource_names)
        return out


@attrs.frozen
class NonResourceRule:
    """``authorizer.DefaultNonResourceRuleInfo``."""

    verbs: tuple[str, ...]
    non_resource_urls: tuple[str, ...] = ()

    def to_json(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {"verbs": list(self.verbs)}
        if self.non_resource_urls:
            out["nonResourceURLs"] = list(self.non_resource_urls)
        return out


@attrs.frozen
class RuleSet:
    """One resolver's answer: ``(resourceRules, nonResourceRules, incomplete, err)``."""

    resource_rules: tuple[ResourceRule, ...] = ()
    non_resource_rules: tuple[NonResourceRule, ...] = ()
    incomplete: bool = False
    error: str = ""


EMPTY = RuleSet()

#: AlwaysAllow's rules (``authorizerfactory.alwaysAllowAuthorizer.RulesFor``).
EVERYTHING = RuleSet(
    (ResourceRule(("*",), ("*",), ("*",)),),
    (NonResourceRule(("*",), ("*",)),),
)


@runtime_checkable
class RuleResolver(Protocol):
    def rules_for(self, user: UserInfo, namespace: str) -> RuleSet: ...


def union_rules(resolvers: Iterable[object], user: UserInfo, namespace: str) -> RuleSet:
    """``unionAuthzRulesHandler.RulesFor`` over the authorizers that resolve rules."""
    resource: list[ResourceRule] = []
    non_resource: list[NonResourceRule] = []
    incomplete = False
    problems: list[str] = []
    for resolver in resolvers:
        if not isinstance(resolver, RuleResolver):
            continue
        try:
            rules = resolver.rules_for(user, namespace)
        except Exception as error:  # a resolver's failure is an evaluation error, as in Go
            problems.append(str(error))
            incomplete = True
            continue
        resource.extend(rules.resource_rules)
        non_resource.extend(rules.non_resource_rules)
        incomplete = incomplete or rules.incomplete
        if rules.error:
            problems.append(rules.error)
    return RuleSet(
        tuple(resource),
        tuple(non_resource),
        incomplete,
        aggregate_text(problems) if problems else "",
    )


def rules_of(authorizer: object | None, user: UserInfo, namespace: str) -> RuleSet:
    """The rules of the server's authorizer: None is an AlwaysAllow chain (see
    ``apiserver.auth.authz.config.build_chain``); a union asks each of its authorizers."""
    if authorizer is None:
        return EVERYTHING
    members: Sequence[object] | None = getattr(authorizer, "authorizers", None)
    if members is None:
        members = (authorizer,)
    return union_rules(members, user, namespace)


__all__ = [
    "EMPTY",
    "EVERYTHING",
    "NonResourceRule",
    "ResourceRule",
    "RuleResolver",
    "RuleSet",
    "rules_of",
    "union_rules",
]
