"""Event validation (k8s.io/kubernetes ``pkg/apis/core/validation/events.go``), on the internal
form of :mod:`.convert`.

Follows ``k8s/k8s`` ``pkg/apis/core/validation/events.go`` (``ValidateEventCreate``,
``ValidateEventUpdate``, ``legacyValidateEvent``, ``validateV1EventSeries``) as of
Kubernetes 1.35, including its quirks:

* field paths are the internal/core names even for events.k8s.io requests (``involvedObject``,
  ``message``, ``source``), except that the reporting controller is called
  ``reportingComponent`` for core v1 requests and ``reportingController`` otherwise;
* the bad value of length and "needs to be unset" errors is always ``""``; lengths are bytes;
* ``reason`` is checked twice for immutability (so a changed reason gives two causes);
* ``series`` is re-validated on update only when it changed; an ``eventTime`` change smaller
  than a microsecond is tolerated (canonical times already have microsecond precision);
* immutable struct values print as Go's JSON of the *internal* type (Go field names, zero
  values included), times through ``time.Time.String()`` and a nil pointer as ``"null"``
  (``field.Error.ErrorBody``).

The 422 itself is ``errors.invalid_error("Event", name, errs)`` -- core kind, no group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from apiserver.apimachinery import errors
from apiserver.apimachinery import validation as v
from apiserver.apimachinery.errors import FieldError

API_V1 = "events.k8s.io/v1"
API_CORE = "v1"
API_V1BETA1 = "events.k8s.io/v1beta1"

REPORTING_INSTANCE_LIMIT = 128
ACTION_LIMIT = 128
REASON_LIMIT = 128
NOTE_LIMIT = 1024

_LEGACY_ONLY = (API_CORE, API_V1BETA1)


def _s(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    return value if isinstance(value, str) else ""


def _d(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key)
    # A dict is told at once; the ABC check is slow and only needed for other mappings.
    return value if isinstance(value, dict) or isinstance(value, Mapping) else {}


def _too_many(path: str, limit: int) -> FieldError:
    return errors.invalid(path, "", f"can have at most {limit} characters")


def _legacy(ev: Mapping[str, Any], api: str) -> list[FieldError]:
    """``legacyValidateEvent``."""
    errs: list[FieldError] = []
    namespace = _s(_d(ev, "metadata"), "namespace")
    involved_ns = _s(_d(ev, "involvedObject"), "namespace")
    if not ev.get("eventTime"):
        # An "old" event: the namespaces must agree ("" or default for a cluster object).
        if not involved_ns:
            mismatch = namespace not in ("", "default")
        else:
            mismatch = namespace != involved_ns
    else:
        mismatch = not involved_ns and namespace not in ("default", "kube-system")
    if mismatch:
        errs.append(
            errors.invalid(
                "involvedObject.namespace", involved_ns, "does not match event.namespace"
            )
        )
    if ev.get("eventTime"):
        controller_path = "reportingComponent" if api == API_CORE else "reportingController"
        controller = _s(ev, "reportingComponent")
        if not controller:
            errs.append(errors.required(controller_path))
        errs.extend(
            errors.invalid(controller_path, controller, msg)
            for msg in v.is_qualified_name(controller)
        )
        for key, limit in (
            ("reportingInstance", REPORTING_INSTANCE_LIMIT),
            ("action", ACTION_LIMIT),
            ("reason", REASON_LIMIT),
        ):
            value = _s(ev, key)
            if not value:
                errs.append(errors.required(key))
            if v.go_len(value) > limit:
                errs.append(_too_many(key, limit))
        if v.go_len(_s(ev, "message")) > NOTE_LIMIT:
            errs.append(_too_many("message", NOTE_LIMIT))
    errs.extend(
        errors.invalid("namespace", namespace, msg) for msg in v.is_dns1123_subdomain(namespace)
    )
    return errs


def _series(ev: Mapping[str, Any]) -> list[FieldError]:
    """``validateV1EventSeries``."""
    series = ev.get("series")
    if series is None:
        return []
    errs: list[FieldError] = []
    if (series.get("count") or 0) < 2:
        errs.append(errors.invalid("series.count", "", "should be at least 2"))
    if not series.get("lastObservedTime"):
        errs.append(errors.required("series.lastObservedTime"))
    return errs


#: Strings already found valid, per check: clients send the same few namespaces, reporting
#: controllers and generateName prefixes again and again. Bounded; emptied when full.
#: One memo per check, so that a hit is one ``in`` on a string (no key tuple, no call).
_KNOWN_VALID: tuple[dict[str, None], ...] = ({}, {}, {}, {})
_KNOWN_VALID_SIZE = 1024
_QUALIFIED, _SUBDOMAIN, _LABEL, _PREFIX = 0, 1, 2, 3
_QUALIFIED_OK, _SUBDOMAIN_OK, _LABEL_OK, _PREFIX_OK = _KNOWN_VALID
_CHECKS = {
    _QUALIFIED: v.is_qualified_name,
    _SUBDOMAIN: v.is_dns1123_subdomain,
    _LABEL: lambda value: v.name_is_dns_label(value, False),
    _PREFIX: lambda value: v.name_is_dns_subdomain(value, True),
}
#: Metadata fields whose absence (or emptiness) means their rules have nothing to say.
_META_RULES = (
    ("labels", v.validate_labels),
    ("annotations", v.validate_annotations),
    ("ownerReferences", v.validate_owner_references),
    ("finalizers", v.validate_finalizers),
    ("managedFields", v.validate_managed_fields),
)


def _valid(check: int, value: str) -> bool:
    """Whether ``value`` passes ``check``, remembered when it does (the callers test the
    memo first, in line)."""
    known = _KNOWN_VALID[check]
    if value in known:
        return True
    if _CHECKS[check](value):
        return False
    if len(known) >= _KNOWN_VALID_SIZE:
        known.clear()
    known[value] = None
    return True


def _surely_valid_v1(ev: Mapping[str, Any]) -> bool:
    """True only where :func:`validate_create` for events.k8s.io/v1 finds nothing (False
    says nothing: the full rules then run and report). Why: nearly every create is valid,
    and this check, with its memo of valid strings, costs a fraction of the rules it stands
    for; each test below implies that one group of them passes."""
    meta = ev.get("metadata")
    if type(meta) is not dict or not ev.get("eventTime"):
        return False
    namespace = meta.get("namespace")
    involved = ev.get("involvedObject")
    if (
        type(namespace) is not str
        or not namespace
        or type(involved) is not dict
        or not (
            (type(involved.get("namespace")) is str and involved["namespace"])
            or namespace in ("default", "kube-system")
        )
    ):
        return False
    controller = ev.get("reportingComponent")
    if (
        type(controller) is not str
        or not controller
        or (controller not in _QUALIFIED_OK and not _valid(_QUALIFIED, controller))
    ):
        return False
    # Short ASCII strings: their length in bytes is their length.
    for key in ("reportingInstance", "action", "reason"):
        value = ev.get(key)
        if not value or type(value) is not str or not value.isascii() or len(value) > 128:
            return False
    message = ev.get("message")
    if message and (type(message) is not str or not message.isascii() or len(message) > NOTE_LIMIT):
        return False
    if (namespace not in _SUBDOMAIN_OK and not _valid(_SUBDOMAIN, namespace)) or (
        namespace not in _LABEL_OK and not _valid(_LABEL, namespace)
    ):
        return False
    generate = meta.get("generateName")
    if generate and (
        type(generate) is not str or (generate not in _PREFIX_OK and not _valid(_PREFIX, generate))
    ):
        return False
    name = meta.get("name")
    if type(name) is not str or not name or v.name_is_dns_subdomain(name, False):
        return False
    if (meta.get("generation") or 0) < 0:
        return False
    for key, rule in _META_RULES:
        if meta.get(key) and rule(meta[key], "metadata." + key):
            return False
    if ev.get("series") is not None and _series(ev):
        return False
    if ev.get("type") not in ("Normal", "Warning"):
        return False
    for key in ("firstTimestamp", "lastTimestamp", "count"):
        if ev.get(key):
            return False
    source = ev.get("source")
    if source and (type(source) is not dict or source.get("component") or source.get("host")):
        return False
    return True


def validate_create(ev: Mapping[str, Any], *, api: str) -> list[FieldError]:
    """``ValidateEventCreate``: legacy rules, then (events.k8s.io/v1) the strict ones.

    ``api`` is the request's group/version: ``"events.k8s.io/v1"`` or ``"v1"``. For core v1,
    when the legacy rules find nothing, the generic ObjectMeta rules follow with path-segment
    names (k8s.io/apiserver ``pkg/registry/rest/create.go`` ``BeforeCreate`` runs
    ``ValidateObjectMetaAccessor`` with ``path.ValidatePathSegmentName`` only on an object the
    strategy found valid): a body name ``a/b`` is a 422.
    """
    if api == API_V1 and _surely_valid_v1(ev):
        return []
    errs = _legacy(ev, api)
    if api == API_CORE:
        if errs:
            return errs
        return v.validate_object_meta(
            _d(ev, "metadata"), namespaced=True, name_fn=v.validate_path_segment_name
        )
    if api in _LEGACY_ONLY:
        return errs
    errs.extend(
        v.validate_object_meta(_d(ev, "metadata"), namespaced=True, name_fn=v.name_is_dns_subdomain)
    )
    errs.extend(_series(ev))
    if not ev.get("eventTime"):
        errs.append(errors.required("eventTime"))
    event_type = _s(ev, "type")
    if event_type not in ("Normal", "Warning"):
        errs.append(errors.invalid("type", "", f"has invalid value: {event_type}"))
    for key in ("firstTimestamp", "lastTimestamp", "count"):
        if ev.get(key):
            errs.append(errors.invalid(key, "", "needs to be unset"))
    source = _d(ev, "source")
    if _s(source, "component") or _s(source, "host"):
        errs.append(errors.invalid("source", "", "needs to be unset"))
    return errs


# --- immutability -------------------------------------------------------------------------


def _object_reference(ref: Mapping[str, Any]) -> dict[str, str]:
    """An ObjectReference as Go marshals the internal ``core.ObjectReference``."""
    return {
        "Kind": _s(ref, "kind"),
        "Namespace": _s(ref, "namespace"),
        "Name": _s(ref, "name"),
        "UID": _s(ref, "uid"),
        "APIVersion": _s(ref, "apiVersion"),
        "ResourceVersion": _s(ref, "resourceVersion"),
        "FieldPath": _s(ref, "fieldPath"),
    }


def _event_source(source: Mapping[str, Any]) -> dict[str, str]:
    return {"Component": _s(source, "component"), "Host": _s(source, "host")}


def _immutable_string(
    path: str, new: Mapping[str, Any], old: Mapping[str, Any], key: str
) -> list[FieldError]:
    return v.immutable(path, _s(new, key), _s(old, key))


def _immutable(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    new_ref, old_ref = (
        _object_reference(_d(new, "involvedObject")),
        _object_reference(_d(old, "involvedObject")),
    )
    errs.extend(v.immutable("involvedObject", new_ref, old_ref, v.go_json(new_ref)))
    errs.extend(_immutable_string("reason", new, old, "reason"))
    errs.extend(_immutable_string("message", new, old, "message"))
    new_src, old_src = _event_source(_d(new, "source")), _event_source(_d(old, "source"))
    errs.extend(v.immutable("source", new_src, old_src, v.go_json(new_src)))
    for key in ("firstTimestamp", "lastTimestamp"):
        new_t, old_t = new.get(key) or None, old.get(key) or None
        errs.extend(v.immutable(key, new_t, old_t, v.go_time_string(new_t)))
    errs.extend(v.immutable("count", new.get("count") or 0, old.get("count") or 0))
    errs.extend(_immutable_string("reason", new, old, "reason"))
    errs.extend(_immutable_string("type", new, old, "type"))
    new_e, old_e = new.get("eventTime") or None, old.get("eventTime") or None
    errs.extend(v.immutable("eventTime", new_e, old_e, v.go_time_string(new_e)))
    errs.extend(_immutable_string("action", new, old, "action"))
    new_rel, old_rel = new.get("related"), old.get("related")
    new_rel_go = None if new_rel is None else _object_reference(new_rel)
    old_rel_go = None if old_rel is None else _object_reference(old_rel)
    errs.extend(
        v.immutable(
            "related",
            new_rel_go,
            old_rel_go,
            '"null"' if new_rel_go is None else v.go_json(new_rel_go),
        )
    )
    errs.extend(
        v.immutable(
            "reportingController", _s(new, "reportingComponent"), _s(old, "reportingComponent")
        )
    )
    errs.extend(_immutable_string("reportingInstance", new, old, "reportingInstance"))
    return errs


def _series_value(ev: Mapping[str, Any]) -> tuple[int, str] | None:
    series = ev.get("series")
    if series is None:
        return None
    return (series.get("count") or 0, series.get("lastObservedTime") or "")


def validate_update(
    new: Mapping[str, Any], old: Mapping[str, Any], *, api: str
) -> list[FieldError]:
    """``ValidateEventUpdate``: legacy rules on ``new``; for events.k8s.io/v1 also ObjectMeta
    update rules, series (if changed) and the immutability of everything else. For core v1
    the ObjectMeta update rules come first (``pkg/registry/rest/update.go``
    ``validateCommonFields``), then the legacy rules; every Event field is mutable."""
    if api == API_CORE:
        errs = v.validate_object_meta_update(_d(new, "metadata"), _d(old, "metadata"))
        return errs + _legacy(new, api)
    errs = _legacy(new, api)
    if api in _LEGACY_ONLY:
        return errs
    errs.extend(v.validate_object_meta_update(_d(new, "metadata"), _d(old, "metadata")))
    if _series_value(new) != _series_value(old):
        errs.extend(_series(new))
    errs.extend(_immutable(new, old))
    return errs
