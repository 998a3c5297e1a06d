"""An ordered chain of authorizers (``AS/pkg/authorization/union/union.go``).

The first Allow or Deny decides, with the reason and error of the authorizer that gave it.
NoOpinion passes to the next one; if everyone passes, the result is NoOpinion with the
non-empty reasons joined by newlines (Kubernetes 1.35 does not prefix them with the
authorizer's name; 1.37 will) and the errors aggregated.

Authorizers may answer synchronously or with a Deferred; the chain stays synchronous as long
as every authorizer it asks does, so the common path (privileged groups, RBAC, ABAC) costs no
Deferred at all.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from apiserver.auth.authz import AuthorizerError, aggregate_messages
from apiserver.auth.interface import ALLOW, DENY, NO_OPINION, Attributes, Authorizer, Decision


class Union:
    """Ask ``authorizers`` in order; see the module docstring."""

    def __init__(self, authorizers: Sequence[Authorizer]) -> None:
        self.authorizers = tuple(authorizers)

    def authorize(self, attributes: Attributes) -> Decision | Deferred[Decision]:
        """The chain's decision; raises :class:`AuthorizerError` when it came with errors.

        The error carries the decision: an Allow with an error still allows a request (the
        filter checks the decision first), but not an impersonation.
        """
        return self._run(attributes, 0, [], [])

    def _run(
        self, attributes: Attributes, start: int, reasons: list[str], errors: list[str]
    ) -> Decision | Deferred[Decision]:
        authorizers = self.authorizers
        for index in range(start, len(authorizers)):
            result: Decision | Deferred[Decision] | AuthorizerError
            try:
                result = authorizers[index].authorize(attributes)
            except AuthorizerError as error:
                result = error
            except Exception as error:  # a bug in an authorizer: an error, as Go would see it
                result = AuthorizerError(str(error))
            # Decision first: Deferred is an ABC (typing.Awaitable), so isinstance() of
            # anything else runs ABCMeta.__instancecheck__ in Python.
            if type(result) is not Decision and isinstance(result, Deferred):
                return result.addCallbacks(
                    self._resume,
                    self._resume_failure,
                    callbackArgs=(attributes, index + 1, reasons, errors),
                    errbackArgs=(attributes, index + 1, reasons, errors),
                )
            final = _step(result, reasons, errors)
            if final is not None:
                return final
        return _finish(reasons, errors)

    def _resume(
        self,
        result: Decision,
        attributes: Attributes,
        start: int,
        reasons: list[str],
        errors: list[str],
    ) -> Decision | Deferred[Decision]:
        final = _step(result, reasons, errors)
        if final is not None:
            return final
        return self._run(attributes, start, reasons, errors)

    def _resume_failure(
        self,
        failure: Failure,
        attributes: Attributes,
        start: int,
        reasons: list[str],
        errors: list[str],
    ) -> Decision | Deferred[Decision]:
        error = failure.value
        if not isinstance(error, AuthorizerError):
            error = AuthorizerError(str(error))
        final = _step(error, reasons, errors)
        if final is not None:
            return final
        return self._run(attributes, start, reasons, errors)


def _step(
    result: Decision | AuthorizerError, reasons: list[str], errors: list[str]
) -> Decision | None:
    """Record one answer; the final Decision if it decides (raising if it came with an error)."""
    if isinstance(result, AuthorizerError):
        decision, reason = result.decision, result.reason
        errors.append(result.message)
        error: AuthorizerError | None = result
    else:
        decision, reason = result.decision, result.reason
        error = None
    if reason:
        reasons.append(reason)
    if decision in (ALLOW, DENY):
        if error is not None:
            raise error  # the deciding authorizer's error goes along (an Allow still allows)
        assert isinstance(result, Decision)
        return result
    return None


def _finish(reasons: list[str], errors: list[str]) -> Decision:
    reason = "\n".join(reasons)
    if errors:
        raise AuthorizerError(aggregate_messages(errors), NO_OPINION, reason)
    return Decision(NO_OPINION, reason)
