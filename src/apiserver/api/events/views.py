"""The two API versions events are served in: ``events.k8s.io/v1`` and core ``v1``.

kube-apiserver serves both from one REST storage (k8s.io/kubernetes
``pkg/registry/core/event/storage/storage.go``, re-used by
``pkg/registry/events/rest/storage_events.go``); what differs per request group/version is
only at the edges, and that is what an :class:`EventView` holds: the path prefix, the group
(error texts and Status details name ``events`` or ``events.events.k8s.io``), the JSON
conversion of the internal form (``pkg/apis/events/v1/conversion.go`` against the generated
core conversion), the schema for strict decoding, patches and managed fields, and the field
labels accepted by selectors (``pkg/apis/core/v1/conversion.go`` /
``pkg/apis/events/v1/conversion.go``). Validation picks its rule set from
``api_version``, as ``pkg/registry/core/event/strategy.go`` does from the request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from apiserver.api.events import convert, fastdecode, printer, selection
from apiserver.api.events.schema import EVENT_CORE_V1, EVENT_V1
from apiserver.apimachinery import errors
from apiserver.apimachinery.managedfields import VersionViews
from apiserver.apimachinery.schema import Struct

Obj = dict[str, Any]


@attrs.frozen
class EventView:
    """One served group/version of events."""

    group: str
    version: str
    #: ``/apis/events.k8s.io/v1/`` or ``/api/v1/``.
    base: str
    schema: Struct
    #: internal -> this version's JSON (``type_meta=False`` for list items).
    to_wire: Callable[..., Obj]
    #: this version's JSON -> internal; raises :class:`convert.DecodeError`.
    to_internal: Callable[[Mapping[str, Any]], Obj]
    kind: str = "Event"
    # What another namespaced resource served by the same REST implementation changes (see
    # "How to add a resource" in docs/architecture.md); the defaults are the events'.
    #: The resource's plural name (paths, admission, Status details).
    resource: str = "events"
    #: Validation of a create / an update (a list of field errors); None: the events' rules
    #: for this version (``validation.validate_create`` / ``validate_update``).
    validate_create: Callable[[Obj], list[errors.FieldError]] | None = None
    validate_update: Callable[[Obj, Obj], list[errors.FieldError]] | None = None
    #: What label and field selectors match, and the field labels this version accepts
    #: (``(label, value) -> (internal label, value)``; None: the events' of this version).
    labels_of: Callable[[Obj], Mapping[str, str]] = selection.event_labels
    fields_of: Callable[[Obj], Mapping[str, str]] = selection.event_fields
    field_label: Callable[[str, str], tuple[str, str]] | None = None
    #: The Table columns kubectl prints: the cells of one object at a time, and their
    #: definitions.
    table_row: Callable[[Obj, float], list[Any]] = printer.event_row
    columns: tuple[dict[str, Any], ...] = tuple(printer.COLUMN_DEFINITIONS)
    #: The other served versions of the same stored objects (managed fields); None: the
    #: events' (:func:`other_versions`).
    versions: VersionViews | None = None
    #: ``to_internal`` of the usual body, generated, that also vouches for no unknown field
    #: (:mod:`.fastdecode`); None where it cannot say, or for a resource without one.
    decode_fast: fastdecode.FastDecoder | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> errors.GroupResource:
        return errors.GroupResource(self.group, self.resource)


def _to_v1(internal: Obj, type_meta: bool = True) -> Obj:
    return convert.internal_to_v1(internal, include_type_meta=type_meta)


def _to_core(internal: Obj, type_meta: bool = True) -> Obj:
    return convert.internal_to_core_v1(internal, include_type_meta=type_meta)


EVENTS_V1 = EventView(
    group="events.k8s.io",
    version="v1",
    base="/apis/events.k8s.io/v1/",
    schema=EVENT_V1,
    to_wire=_to_v1,
    to_internal=convert.v1_to_internal,
    decode_fast=fastdecode.V1,
)

CORE_V1 = EventView(
    group="",
    version="v1",
    base="/api/v1/",
    schema=EVENT_CORE_V1,
    to_wire=_to_core,
    to_internal=convert.core_v1_to_internal,
    decode_fast=fastdecode.CORE_V1,
)


def _v1_to_core(obj: dict[str, Any]) -> Obj:
    return convert.internal_to_core_v1(convert.v1_to_internal(obj))


def _core_to_v1(obj: dict[str, Any]) -> Obj:
    return convert.internal_to_v1(convert.core_v1_to_internal(obj))


#: For each view, the other served version of the same stored object: its schema and a
#: converter from the view's JSON. Managed fields recorded through one version are compared
#: in their own version's field names (``f:note`` and ``f:message`` are one field), as kube's
#: field manager converts with its versionConverter
#: (k8s.io/apimachinery ``pkg/util/managedfields/internal/versionconverter.go``).
_OTHER_VERSIONS: dict[str, VersionViews] = {
    EVENTS_V1.api_version: {CORE_V1.api_version: (CORE_V1.schema, _v1_to_core)},
    CORE_V1.api_version: {EVENTS_V1.api_version: (EVENTS_V1.schema, _core_to_v1)},
}


def other_versions(view: EventView) -> VersionViews:
    """:data:`_OTHER_VERSIONS` of ``view`` (managed fields of any other version are dropped,
    as kube drops managers of versions it does not serve)."""
    if view.versions is not None:
        return view.versions
    return _OTHER_VERSIONS[view.api_version]


__all__ = ["CORE_V1", "EVENTS_V1", "EventView", "other_versions"]
