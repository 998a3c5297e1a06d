"""Authorizers: the ``--authorization-mode`` / ``--authorization-config`` chain.

Each authorizer follows ``apiserver.auth.interface.Authorizer``: ``authorize(attributes)``
returns a :class:`~apiserver.auth.interface.Decision` (Allow, Deny or NoOpinion with a
reason) or a Deferred of one. Go's authorizers return ``(decision, reason, err)``; a non-nil
``err`` is expressed here by raising (or failing the Deferred with) :class:`AuthorizerError`,
which carries the decision and reason that came with it. The union
(``AS/pkg/authorization/union/union.go``) turns those into the filter's outcome: an Allow
always lets the request through, a refusal that came with an error is a 500, any other
refusal is a 403.
"""

from __future__ import annotations

from collections.abc import Sequence

from apiserver.apimachinery.errors import aggregate_text
from apiserver.auth.interface import NO_OPINION


class AuthorizerError(Exception):
    """An authorizer's error (Go: the non-nil ``err`` next to ``decision`` and ``reason``)."""

    def __init__(self, message: str, decision: str = NO_OPINION, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.decision = decision
        self.reason = reason

    def __str__(self) -> str:
        return self.message


def aggregate_messages(messages: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message, or ``[a, b]`` without repeats."""
    return aggregate_text(messages)


__all__ = ["AuthorizerError", "aggregate_messages"]
