"""The trivial authorizers: AlwaysAllow, AlwaysDeny and the privileged-group authorizer.

- ``AS/pkg/authorization/authorizerfactory/builtin.go``: AlwaysAllow allows everything with
  no reason; **AlwaysDeny returns NoOpinion** (not Deny) with ``Everything is forbidden.``, so
  later authorizers still get a say; the privileged-group authorizer allows members of the
  given groups and has no opinion about everyone else.
- ``KK/pkg/kubeapiserver/authorizer/reload.go`` always puts a ``system:masters`` privileged
  group authorizer in front of the configured chain.
"""

from __future__ import annotations

from collections.abc import Iterable

from apiserver.auth.authz.rules import EMPTY, EVERYTHING, RuleSet
from apiserver.auth.interface import ALLOW, MASTERS, NO_OPINION, Attributes, Decision, UserInfo

ALLOWED = Decision(ALLOW)
NO_OPINION_EMPTY = Decision(NO_OPINION)
EVERYTHING_FORBIDDEN = Decision(NO_OPINION, "Everything is forbidden.")


class AlwaysAllow:
    """Mode ``AlwaysAllow``."""

    def authorize(self, attributes: Attributes) -> Decision:
        return ALLOWED

    def rules_for(self, user: UserInfo, namespace: str) -> RuleSet:
        """Everything (``alwaysAllowAuthorizer.RulesFor``)."""
        return EVERYTHING


class AlwaysDeny:
    """Mode ``AlwaysDeny`` (a NoOpinion, as in the reference)."""

    def authorize(self, attributes: Attributes) -> Decision:
        return EVERYTHING_FORBIDDEN

    def rules_for(self, user: UserInfo, namespace: str) -> RuleSet:
        """Nothing, and complete (``alwaysDenyAuthorizer.RulesFor``)."""
        return EMPTY


class PrivilegedGroups:
    """Allow members of any of ``groups``; NoOpinion otherwise."""

    def __init__(self, groups: Iterable[str] = (MASTERS,)) -> None:
        self.groups = frozenset(groups)

    def authorize(self, attributes: Attributes) -> Decision:
        groups = self.groups
        for group in attributes.user.groups:
            if group in groups:
                return ALLOWED
        return NO_OPINION_EMPTY
