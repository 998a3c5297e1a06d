"""core/v1 Events: the stored shape, and conversion between the two API versions.

kube-apiserver serves ``/api/v1`` and ``/apis/events.k8s.io/v1`` events from one store and
stores them as core/v1 (k8s.io/kubernetes ``pkg/kubeapiserver/default_storage_factory_builder.go``
``AddCohabitatingResources``; the encode version of events is ``v1``). The field mapping is
``pkg/apis/events/v1/conversion.go``: every field has a counterpart, so conversion is lossless
both ways (``note`` = ``message``, ``regarding`` = ``involvedObject``, ``deprecatedSource`` =
``source``, ``deprecatedFirstTimestamp`` = ``firstTimestamp``, ``reportingController`` =
``reportingComponent``, ...).

The registry's objects are the internal form of :mod:`.convert` (core/v1 names, zero values
absent). The stored shape is a core/v1 Event as Go's ``encoding/json`` writes it
(k8s.io/api ``core/v1/types.go``): ``involvedObject`` and ``source`` always (``{}``), the
three times always (``null`` when unset), ``reportingComponent``/``reportingInstance``
always (``""``), ``metadata.creationTimestamp`` always, no ``resourceVersion``
(``pkg/storage/etcd3/store.go`` clears it). :func:`internal_to_stored` and
:func:`stored_to_internal` are the registry's :class:`~apiserver.registry.store.StorageConversion`
for events; both are written for speed (one pass over the top-level keys), since every write
encodes and every new revision is decoded once. Data written by older releases of this
server in the events.k8s.io/v1 shape (``regarding``, ``note``, ...) is still read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.api.events import convert
from apiserver.protobuf import codec as pbcodec
from apiserver.registry.store import StorageConversion

Obj = dict[str, Any]

STORED_TYPE_META = {"kind": convert.KIND, "apiVersion": convert.CORE_API_VERSION}

#: Top-level fields Go always writes for core/v1 (no ``omitempty``), with their zero JSON.
_ALWAYS: dict[str, Any] = {
    "involvedObject": None,  # {} (a fresh dict each time)
    "source": None,
    "firstTimestamp": None,
    "lastTimestamp": None,
    "eventTime": None,
    "reportingComponent": "",
    "reportingInstance": "",
}
_FRESH_DICT = ("involvedObject", "source")
_BODY_ORDER: tuple[str, ...] = tuple(k for k in convert.INTERNAL_ORDER if k != "metadata")
_ZERO_DROPPED = ("reason", "message", "count", "type", "action")

#: Keys only the events.k8s.io/v1 shape has: their presence marks data stored in that shape.
_V1_ONLY = frozenset(
    {
        "regarding",
        "note",
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
        "reportingController",
    }
)


def _stored_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    if "resourceVersion" in meta:
        meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
    if "creationTimestamp" not in meta or "ownerReferences" in meta:
        # Rare: Go writes a null creationTimestamp and every OwnerReference string.
        return convert.encode_object_meta(meta)
    return meta  # type: ignore[return-value]


def _internal_meta(meta: dict[str, Any]) -> dict[str, Any]:
    if meta.get("creationTimestamp", "") is None:
        del meta["creationTimestamp"]
    refs = meta.get("ownerReferences")
    if refs:
        meta["ownerReferences"] = [
            {k: v for k, v in ref.items() if v != ""} if isinstance(ref, dict) else ref
            for ref in refs
        ]
    return meta


def _series(series: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    count = series.get("count")
    if count:
        out["count"] = count
    out["lastObservedTime"] = series.get("lastObservedTime")
    return out


def internal_to_stored(obj: Mapping[str, Any]) -> Obj:
    """The core/v1 Event kube-apiserver would store for internal ``obj``, ``kind`` and
    ``apiVersion`` first, without ``metadata.resourceVersion``. Equal to
    ``convert.internal_to_core_v1(obj)`` minus the resourceVersion, for canonical ``obj``."""
    out: Obj = {**STORED_TYPE_META, "metadata": _stored_meta(obj.get("metadata") or {})}
    get = obj.get
    for key in _BODY_ORDER:
        value = get(key)
        if value is None:
            if key in _ALWAYS:
                out[key] = {} if key in _FRESH_DICT else _ALWAYS[key]
        elif key == "series":
            out[key] = _series(value)
        else:
            out[key] = value
    return out


def stored_to_internal(stored: Obj) -> Obj:
    """The internal form of a decoded stored Event (core/v1 as Go writes it, or the
    events.k8s.io/v1 shape of older releases); ``stored`` is reused.

    Go's emission rules are undone: ``null`` times, empty strings and a zero count are
    dropped, ``involvedObject``/``source`` are kept (``{}``), keys come in core order.
    """
    if not _V1_ONLY.isdisjoint(stored):
        return convert.v1_to_internal(stored)
    out: Obj = {}
    meta = stored.get("metadata")
    out["metadata"] = _internal_meta(meta) if isinstance(meta, dict) else {}
    for key in _BODY_ORDER:
        value = stored.get(key)
        if value is None or (not value and key in _ZERO_DROPPED):
            if key in _FRESH_DICT:
                out[key] = {}
            continue
        if value == "" and key in _ALWAYS:
            continue
        if key == "series" and isinstance(value, dict):
            value = {k: v for k, v in value.items() if v}
        out[key] = value
    return out


_TO_PROTOBUF = pbcodec.object_encoder(convert.CORE_API_VERSION, convert.KIND)


def internal_to_protobuf(obj: Mapping[str, Any]) -> bytes | None:
    """The protobuf value of :func:`internal_to_stored`'s shape, from ``obj`` itself, or None.

    For a canonical ``obj`` the two dicts fill the core/v1 Event message alike: the stored
    shape adds only zero values (``{}``, ``null``, ``""``, a dropped zero series count),
    which the message's filler leaves at the zeros it starts from, and its ``kind`` and
    ``apiVersion``, which are the envelope's. The metadata is the same dict, except where
    :func:`_stored_meta` changes it (a ``resourceVersion`` to drop, no
    ``creationTimestamp``, ``ownerReferences``): those go the stored shape's way (None)."""
    meta = obj.get("metadata")
    if (
        not meta
        or "creationTimestamp" not in meta
        or "resourceVersion" in meta
        or "ownerReferences" in meta
    ):
        return None
    return _TO_PROTOBUF(obj)


#: The registry's conversion for events.
STORAGE = StorageConversion(internal_to_stored, stored_to_internal, internal_to_protobuf)


def v1_to_core(obj: Mapping[str, Any], *, include_type_meta: bool = True) -> Obj:
    """An events.k8s.io/v1 Event (JSON dict) as core/v1, Go's emission rules for core.

    Raises :class:`convert.DecodeError` for a document Go would refuse."""
    return convert.internal_to_core_v1(
        convert.v1_to_internal(obj), include_type_meta=include_type_meta
    )


def core_to_v1(obj: Mapping[str, Any], *, include_type_meta: bool = True) -> Obj:
    """A core/v1 Event (JSON dict) as events.k8s.io/v1."""
    return convert.internal_to_v1(
        convert.core_v1_to_internal(obj), include_type_meta=include_type_meta
    )


__all__ = [
    "STORAGE",
    "core_to_v1",
    "internal_to_stored",
    "stored_to_internal",
    "v1_to_core",
]
