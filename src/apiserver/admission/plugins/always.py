"""AlwaysAdmit and AlwaysDeny (k8s.io/kubernetes plugin/pkg/admission/admit and .../deny).

Both are deprecated in kube-apiserver ("no real meaning") but still selectable. AlwaysAdmit
handles every operation and lets each through; AlwaysDeny refuses every operation, in mutating
admission already (so before validation), with ``admission.NewForbidden``'s 403 (``<resource>
"<name>" is forbidden: admission control is denying all modifications``).
"""

from __future__ import annotations

from typing import Any

from apiserver.admission.interface import Attributes, Operation
from apiserver.apimachinery import errors

DENY_MESSAGE = "admission control is denying all modifications"


class AlwaysAdmitPlugin:
    """``admit.alwaysAdmit``: handles everything, refuses nothing."""

    def handles(self, operation: Operation) -> bool:
        return True

    def admit(self, attributes: Attributes) -> None:
        return None

    def validate(self, attributes: Attributes) -> None:
        return None


def forbidden(attributes: Attributes, reason: str) -> errors.StatusError:
    """``admission.NewForbidden`` (k8s.io/apiserver/pkg/admission/errors.go): the name from the
    attributes, else from the object; the resource as ``<resource>.<group>``."""
    name = attributes.name
    if not name:
        obj: Any = attributes.obj
        if obj is not None:
            name = (obj.get("metadata") or {}).get("name") or ""
    group, resource = attributes.group, attributes.resource
    qualified = f"{resource}.{group}" if group else resource
    if name:
        message = f'{qualified} "{name}" is forbidden: {reason}'
    else:
        message = f"{qualified} is forbidden: {reason}"
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = resource
    return errors.forbidden_error(message, details)


class AlwaysDenyPlugin:
    """``deny.alwaysDeny``: refuses every operation, mutating and validating."""

    def handles(self, operation: Operation) -> bool:
        return True

    def admit(self, attributes: Attributes) -> None:
        raise forbidden(attributes, DENY_MESSAGE)

    def validate(self, attributes: Attributes) -> None:
        raise forbidden(attributes, DENY_MESSAGE)
