"""The admission interface (k8s.io/apiserver/pkg/admission/interfaces.go).

See :mod:`apiserver.admission` for where the REST layer calls it.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

import attrs
from twisted.internet.defer import Deferred

from apiserver.auth.interface import UserInfo

Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
CREATE: Operation = "CREATE"
UPDATE: Operation = "UPDATE"
DELETE: Operation = "DELETE"
CONNECT: Operation = "CONNECT"


@attrs.define(slots=True)
class Attributes:
    """``admission.Attributes``: what is being done to which object, by whom.

    ``obj`` is the object as it will be stored (the internal form the REST layer keeps);
    mutating admission changes it in place. ``old_obj`` is the stored object on UPDATE and
    DELETE.
    """

    operation: Operation
    group: str
    version: str
    resource: str
    kind: str
    namespace: str
    name: str
    obj: dict[str, Any] | None
    old_obj: dict[str, Any] | None = None
    subresource: str = ""
    dry_run: bool = False
    #: The user the request acts as (after impersonation), when the chain authenticated it.
    user: UserInfo | None = None


class Admission(Protocol):
    """One admission plugin, or a chain of them.

    ``admit`` (``MutationInterface.Admit``) may change ``attributes.obj``; ``validate``
    (``ValidationInterface.Validate``) may not. Either refuses by raising (normally a
    ``StatusError``), synchronously or through the Deferred it returns; None or a Deferred
    that fires with None lets the request go on. ``handles`` says which operations it
    cares about (``Interface.Handles``); the others skip both calls.
    """

    def handles(self, operation: Operation) -> bool: ...

    def admit(self, attributes: Attributes) -> Deferred[None] | None: ...

    def validate(self, attributes: Attributes) -> Deferred[None] | None: ...


class AlwaysAdmit:
    """The no-op admission (kube's ``AlwaysAdmit`` plugin): handles nothing."""

    def handles(self, operation: Operation) -> bool:
        return False

    def admit(self, attributes: Attributes) -> None:
        return None

    def validate(self, attributes: Attributes) -> None:
        return None


async def run_mutating(admission: Admission, attributes: Attributes) -> None:
    """Mutating admission for ``attributes``, if ``admission`` handles the operation."""
    if admission.handles(attributes.operation):
        waiting = admission.admit(attributes)
        if waiting is not None:
            await waiting


async def run_validating(admission: Admission, attributes: Attributes) -> None:
    """Validating admission for ``attributes``, if ``admission`` handles the operation."""
    if admission.handles(attributes.operation):
        waiting = admission.validate(attributes)
        if waiting is not None:
            await waiting
