"""One valid events.k8s.io/v1 Event, the body every suite starts from (unit and integration)."""

from __future__ import annotations

from typing import Any


def event_dict(
    name: str,
    namespace: str,
    *,
    labels: dict[str, str] | None = None,
    note: str = "n",
    **extra: Any,
) -> dict[str, Any]:
    """A valid Event named ``name`` in ``namespace``; ``labels`` None leaves the key out;
    ``extra`` replaces top-level fields."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels is not None:
        metadata["labels"] = labels
    event: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": metadata,
        "eventTime": "2026-11-22T10:00:00.000001Z",
        "reportingController": "example.com/c",
        "reportingInstance": "c-1",
        "action": "Create",
        "reason": "Created",
        "type": "Normal",
        "note": note,
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "p"},
    }
    event.update(extra)
    return event
