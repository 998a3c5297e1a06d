"""Table rows for Events, as the server prints them for ``as=Table``
(k8s.io/kubernetes ``pkg/printers/internalversion/printers.go``, ``printEvent``).

Follows ``k8s/k8s`` ``pkg/printers/internalversion/printers.go`` (``eventColumnDefinitions``,
``printEvent`` with ``Wide`` set -- the server always renders every column and kubectl hides
those of priority 1 -- ``formatEventSource``, ``translateTimestampSince``) and
``apimachinery`` ``pkg/util/duration`` for ages. Column descriptions are the core v1 Event
swagger docs (``k8s.io/api`` ``core/v1/types_swagger_doc_generated.go``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.api.events.convert import wire_time_to_epoch
from apiserver.apimachinery.duration import human_duration

_NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
_FIELD_PATH_DOC = (
    "If referring to a piece of an object instead of an entire object, this string should "
    "contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. "
    "For example, if the object reference is to a container within a pod, this would take on a "
    'value like: "spec.containers{name}" (where "name" refers to the name of the container that '
    'triggered the event) or if no container name is specified "spec.containers[2]" (container '
    "with index 2 in this pod). This syntax is chosen only to have some well-defined way of "
    "referencing a part of an object."
)


def _column(name: str, description: str, priority: int = 0, fmt: str = "") -> dict[str, Any]:
    return {
        "name": name,
        "type": "string",
        "format": fmt,
        "description": description,
        "priority": priority,
    }


#: ``eventColumnDefinitions``, in TableColumnDefinition JSON field order.
COLUMN_DEFINITIONS: list[dict[str, Any]] = [
    _column(
        "Last Seen", "The time at which the most recent occurrence of this event was recorded."
    ),
    _column("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
    _column(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the "
        "transition into the object's current status.",
    ),
    _column("Object", "The object that this event is about."),
    _column("Subobject", _FIELD_PATH_DOC, 1),
    _column(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
        1,
    ),
    _column("Message", "A human-readable description of the status of this operation."),
    _column(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        1,
    ),
    _column("Count", "The number of times this event has occurred.", 1),
    _column("Name", _NAME_DOC, 1, "name"),
]

# Go's unicode.IsSpace (strings.TrimSpace): Python's str.strip() would also drop \x1c-\x1f.
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680"
    + "".join(map(chr, range(0x2000, 0x200B)))
    + ("\u2028\u2029\u202f\u205f\u3000")
)


def _s(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def translate_timestamp_since(timestamp: str | None, now: float) -> str:
    """``translateTimestampSince``: the age of a wire time, ``<unknown>`` when unset."""
    if not timestamp:
        return "<unknown>"
    return human_duration(now - wire_time_to_epoch(timestamp))


def format_event_source(source: Mapping[str, Any], controller: str, instance: str) -> str:
    """``formatEventSource``: component (or reporting controller), then ``, host`` (or
    reporting instance) when there is one."""
    component = _s(source, "component") or controller
    host = _s(source, "host") or instance
    return component if not host else f"{component}, {host}"


def event_row(internal: Mapping[str, Any], now: float) -> list[str | int]:
    """The ten cells of ``printEvent`` (wide) for an internal Event at Unix time ``now``."""
    first_seen = translate_timestamp_since(internal.get("firstTimestamp"), now)
    if not internal.get("firstTimestamp"):
        first_seen = translate_timestamp_since(internal.get("eventTime"), now)
    last_seen = translate_timestamp_since(internal.get("lastTimestamp"), now)
    if not internal.get("lastTimestamp"):
        last_seen = first_seen
    count = internal.get("count") or 0
    series = internal.get("series")
    if series is not None:
        last_seen = translate_timestamp_since(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif count == 0:
        count = 1  # singleton events of the new API carry no count
    involved = internal.get("involvedObject") or {}
    kind = _s(involved, "kind").lower()
    name = _s(involved, "name")
    target = f"{kind}/{name}" if name else kind
    return [
        last_seen,
        _s(internal, "type"),
        _s(internal, "reason"),
        target,
        _s(involved, "fieldPath"),
        format_event_source(
            internal.get("source") or {},
            _s(internal, "reportingComponent"),
            _s(internal, "reportingInstance"),
        ),
        _s(internal, "message").strip(_GO_SPACE),
        first_seen,
        count,
        _s(internal.get("metadata") or {}, "name"),
    ]
