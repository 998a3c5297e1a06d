"""Field and label selection of Events (k8s.io/kubernetes
``pkg/registry/core/event/strategy.go``, ``ToSelectableFields``).

Follows ``k8s/k8s`` ``pkg/apis/core/v1/conversion.go`` and ``pkg/apis/events/v1/conversion.go``
(which field labels each API accepts and what they mean on the internal object) and
``pkg/registry/core/event/strategy.go`` ``ToSelectableFields`` (the internal field set,
compared as exact strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.apimachinery import errors

_INVOLVED = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")

#: core v1 field label -> internal field label (the identity).
_CORE_MAP: dict[str, str] = {
    **{f"involvedObject.{k}": f"involvedObject.{k}" for k in _INVOLVED},
    "reason": "reason",
    "reportingComponent": "reportingComponent",
    "source": "source",
    "type": "type",
    "metadata.namespace": "metadata.namespace",
    "metadata.name": "metadata.name",
}

#: events.k8s.io/v1 field label -> internal field label.
_V1_MAP: dict[str, str] = {
    **{f"regarding.{k}": f"involvedObject.{k}" for k in _INVOLVED},
    "reason": "reason",
    "reportingController": "reportingComponent",
    "source": "source",
    "type": "type",
    "metadata.namespace": "metadata.namespace",
    "metadata.name": "metadata.name",
}

FIELDS_CORE: frozenset[str] = frozenset(_CORE_MAP)
FIELDS_V1: frozenset[str] = frozenset(_V1_MAP)


def convert_field_label(api: str, label: str, value: str) -> tuple[str, str]:
    """Map a field selector label of ``api`` (``"events.k8s.io/v1"`` or ``"v1"``) to the
    internal label; an unknown label is a 400 ``field label not supported: <label>``."""
    mapping = _CORE_MAP if api == "v1" else _V1_MAP
    internal = mapping.get(label)
    if internal is None:
        raise errors.bad_request(f"field label not supported: {label}")
    return internal, value


def _s(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def event_fields(internal: Mapping[str, Any]) -> dict[str, str]:
    """``ToSelectableFields``: the values field selectors compare against."""
    meta = internal.get("metadata") or {}
    involved = internal.get("involvedObject") or {}
    source = internal.get("source") or {}
    fields = {f"involvedObject.{k}": _s(involved, k) for k in _INVOLVED}
    fields.update(
        {
            "reason": _s(internal, "reason"),
            "reportingComponent": _s(internal, "reportingComponent"),
            "source": _s(source, "component") or _s(internal, "reportingComponent"),
            "type": _s(internal, "type"),
            "metadata.name": _s(meta, "name"),
            "metadata.namespace": _s(meta, "namespace"),
        }
    )
    return fields


def event_labels(internal: Mapping[str, Any]) -> dict[str, str]:
    """The labels label selectors match."""
    labels = (internal.get("metadata") or {}).get("labels") or {}
    return dict(labels)
