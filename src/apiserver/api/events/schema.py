"""Structural schemas of ``events.k8s.io/v1`` Event and core ``v1`` Event.

The field lists, list types and map types follow the OpenAPI document kube-apiserver publishes
(``/openapi/v3/apis/events.k8s.io/v1``, kept in ``tests/reference/``:
``x-kubernetes-map-type: atomic`` on
ObjectReference and OwnerReference, ``x-kubernetes-patch-strategy: merge`` plus
``x-kubernetes-patch-merge-key: uid`` on ``ownerReferences``, ``merge`` on ``finalizers``), as
updated for Kubernetes 1.35 (``clusterName`` was removed from ObjectMeta in 1.25; ``finalizers``
is ``+listType=set`` and ``ownerReferences`` ``+listType=map`` with key ``uid``). The Go facts
(``omitempty``, pointers) come from ``k8s.io/api`` ``events/v1/types.go``,
``core/v1/types.go`` and ``k8s.io/apimachinery`` ``pkg/apis/meta/v1/types.go``.

Consequences worth knowing: ``regarding``/``related``/``involvedObject`` are atomic for
server-side apply (one ``f:regarding`` leaf) but strategic merge patch merges them
key by key (SMP only reads ``patchStrategy`` tags, and ObjectReference has none);
``managedFields`` is an atomic list with an opaque ``fieldsV1``.
"""

from __future__ import annotations

from apiserver.apimachinery.schema import (
    BOOLEAN,
    INTEGER,
    STRING,
    TIME,
    UNTYPED,
    Field,
    List,
    Map,
    Struct,
)

OBJECT_REFERENCE = Struct(
    "ObjectReference",
    (
        Field("kind", STRING),
        Field("namespace", STRING),
        Field("name", STRING),
        Field("uid", STRING),
        Field("apiVersion", STRING),
        Field("resourceVersion", STRING),
        Field("fieldPath", STRING),
    ),
    atomic=True,
)

EVENT_SOURCE = Struct(
    "EventSource",
    (Field("component", STRING), Field("host", STRING)),
)

OWNER_REFERENCE = Struct(
    "OwnerReference",
    (
        Field("apiVersion", STRING, omitempty=False),
        Field("kind", STRING, omitempty=False),
        Field("name", STRING, omitempty=False),
        Field("uid", STRING, omitempty=False),
        Field("controller", BOOLEAN, pointer=True),
        Field("blockOwnerDeletion", BOOLEAN, pointer=True),
    ),
    atomic=True,
)

MANAGED_FIELDS_ENTRY = Struct(
    "ManagedFieldsEntry",
    (
        Field("manager", STRING),
        Field("operation", STRING),
        Field("apiVersion", STRING),
        Field("time", TIME, pointer=True),
        Field("fieldsType", STRING),
        Field("fieldsV1", UNTYPED, pointer=True),
        Field("subresource", STRING),
    ),
)

OBJECT_META = Struct(
    "ObjectMeta",
    (
        Field("name", STRING),
        Field("generateName", STRING),
        Field("namespace", STRING),
        Field("selfLink", STRING),
        Field("uid", STRING),
        Field("resourceVersion", STRING),
        Field("generation", INTEGER),
        Field("creationTimestamp", TIME),
        Field("deletionTimestamp", TIME, pointer=True),
        Field("deletionGracePeriodSeconds", INTEGER, pointer=True),
        Field("labels", Map(STRING)),
        Field("annotations", Map(STRING)),
        Field(
            "ownerReferences",
            List(
                OWNER_REFERENCE,
                "map",
                ("uid",),
                patch_strategy="merge",
                patch_merge_key="uid",
            ),
        ),
        Field("finalizers", List(STRING, "set", patch_strategy="merge")),
        Field("managedFields", List(MANAGED_FIELDS_ENTRY, "atomic")),
    ),
)

EVENT_SERIES_V1 = Struct(
    "EventSeries",
    (
        Field("count", INTEGER, omitempty=False),
        Field("lastObservedTime", TIME, omitempty=False),
    ),
)

EVENT_V1 = Struct(
    "Event",
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field("metadata", OBJECT_META),
        Field("eventTime", TIME, omitempty=False),
        Field("series", EVENT_SERIES_V1, pointer=True),
        Field("reportingController", STRING),
        Field("reportingInstance", STRING),
        Field("action", STRING),
        Field("reason", STRING),
        Field("regarding", OBJECT_REFERENCE),
        Field("related", OBJECT_REFERENCE, pointer=True),
        Field("note", STRING),
        Field("type", STRING),
        Field("deprecatedSource", EVENT_SOURCE),
        Field("deprecatedFirstTimestamp", TIME),
        Field("deprecatedLastTimestamp", TIME),
        Field("deprecatedCount", INTEGER),
    ),
)
"""``events.k8s.io/v1`` Event (``k8s.io/api/events/v1/types.go``)."""

EVENT_SERIES_CORE = Struct(
    "EventSeries",
    (Field("count", INTEGER), Field("lastObservedTime", TIME)),
)

EVENT_CORE_V1 = Struct(
    "Event",
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field("metadata", OBJECT_META),
        Field("involvedObject", OBJECT_REFERENCE, omitempty=False),
        Field("reason", STRING),
        Field("message", STRING),
        Field("source", EVENT_SOURCE),
        Field("firstTimestamp", TIME),
        Field("lastTimestamp", TIME),
        Field("count", INTEGER),
        Field("type", STRING),
        Field("eventTime", TIME),
        Field("series", EVENT_SERIES_CORE, pointer=True),
        Field("action", STRING),
        Field("related", OBJECT_REFERENCE, pointer=True),
        Field("reportingComponent", STRING, omitempty=False),
        Field("reportingInstance", STRING, omitempty=False),
    ),
)
"""Core ``v1`` Event (``k8s.io/api/core/v1/types.go``), the shape the server stores."""

SCHEMAS: dict[str, Struct] = {"events.k8s.io/v1": EVENT_V1, "v1": EVENT_CORE_V1}
"""The Event schema of each served apiVersion (managed fields are recorded per version)."""
