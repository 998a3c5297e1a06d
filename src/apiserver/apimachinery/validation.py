"""Generic validators worded exactly as apimachinery words them.

Follows k8s.io/apimachinery as shipped with Kubernetes 1.35:

* ``pkg/util/validation/validation.go`` -- ``IsDNS1123Label``, ``IsDNS1123Subdomain``,
  ``IsQualifiedName``, ``IsValidLabelValue`` and their messages (``MaxLenError``,
  ``RegexError``, ``EmptyError``). 1.35 still says ``characters``; later releases moved
  these to ``pkg/api/validate/content`` and say ``bytes`` (:data:`MAX_LEN_UNIT`). Also
  ``IsLabelKey`` (``pkg/api/validate/content``), which label selectors use. These are the
  only copies: :mod:`apiserver.apimachinery.labels` checks selector keys and values here.
* ``pkg/api/validation/path/name.go`` -- ``ValidatePathSegmentName``.
* ``pkg/api/validation/generic.go`` and ``objectmeta.go`` -- ``NameIsDNSSubdomain``,
  ``ValidateObjectMeta``, ``ValidateObjectMetaUpdate``, owner references, finalizers,
  annotations (size limit 256 KiB).
* ``pkg/apis/meta/v1/validation/validation.go`` -- labels, managed fields, field manager.

Metadata dicts are the decoded ``metadata`` of an object (JSON names). Missing keys are
zero values. Times are the wire strings produced by :mod:`apiserver.api.events.convert`.

Go prints some bad values in ways :func:`apiserver.apimachinery.errors.format_value` does
not (a ``time.Time`` through its ``String()`` method, a nil pointer as the quoted text
``"null"``, structs as Go's JSON with HTML escaping): :class:`RenderedValueError` carries
a value already rendered and :func:`go_json` / :func:`go_time_string` render them.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from apiserver.apimachinery import errors
from apiserver.apimachinery.errors import FieldError
from apiserver.gocompat.marshal import go_marshal
from apiserver.gocompat.timefmt import format_time_string

#: Unit word of ``MaxLenError`` in Kubernetes 1.35 (``bytes`` from 1.36 on).
MAX_LEN_UNIT = "characters"

FIELD_IMMUTABLE = "field is immutable"
IS_NEGATIVE = "must be greater than or equal to 0"
TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024
FIELD_MANAGER_MAX_LENGTH = 128
MAX_SUBRESOURCE_NAME_LENGTH = 256

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
QUALIFIED_NAME_MAX = 63
LABEL_VALUE_MAX = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_QNAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QNAME_FMT + ")?"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_QNAME_RE = re.compile(_QNAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)

_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character"
)
_QNAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
    "with an alphanumeric character"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character"
)

FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"

#: ``(group, version, kind)`` triples that may not own anything (``BannedOwners``).
BANNED_OWNERS = frozenset({("", "v1", "Event")})

NameFunc = Callable[[str, bool], list[str]]


# --- message helpers ----------------------------------------------------------------------


def max_len_error(length: int) -> str:
    """``MaxLenError``."""
    return f"must be no more than {length} {MAX_LEN_UNIT}"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``: note the double space Go leaves before each ``or``."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i > 0:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{fmt}')"


def empty_error() -> str:
    return "must be non-empty"


def go_len(value: str) -> int:
    """Go's ``len`` of a string: its UTF-8 byte count (the character count of ASCII text,
    which is nearly all text here and says so without encoding it)."""
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))


def _full(regex: re.Pattern[str], value: str) -> bool:
    # Go's regexp "^...$" has no multi-line mode: "$" matches only at the very end.
    return regex.fullmatch(value) is not None


# --- pkg/util/validation ------------------------------------------------------------------


def is_dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``."""
    errs: list[str] = []
    if go_len(value) > DNS1123_LABEL_MAX:
        errs.append(max_len_error(DNS1123_LABEL_MAX))
    if not _full(_DNS1123_LABEL_RE, value):
        if _full(_DNS1123_SUBDOMAIN_RE, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain``."""
    errs: list[str] = []
    if go_len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX))
    if not _full(_DNS1123_SUBDOMAIN_RE, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def _qualified_name(value: str, what: str) -> list[str]:
    """The body ``IsQualifiedName`` and ``IsLabelKey`` share; ``what`` names the whole value
    in the one message that differs between them (more than one ``/``)."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + empty_error())
        else:
            errs.extend("prefix part " + msg for msg in is_dns1123_subdomain(prefix))
    else:
        return [
            what
            + " "
            + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + empty_error())
    elif go_len(name) > QUALIFIED_NAME_MAX:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX))
    if not _full(_QNAME_RE, name):
        errs.append(
            "name part " + regex_error(_QNAME_MSG, _QNAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def is_qualified_name(value: str) -> list[str]:
    """``IsQualifiedName``: optional DNS-subdomain prefix, ``/``, a name of at most 63."""
    return _qualified_name(value, "a qualified name")


def is_label_key(value: str) -> list[str]:
    """``IsLabelKey`` (``pkg/api/validate/content``): the rules of ``IsQualifiedName``, but a
    value with more than one ``/`` is called ``a valid label key``. Label selectors
    (``pkg/labels/selector.go``) check their keys with it."""
    return _qualified_name(value, "a valid label key")


def is_valid_label_value(value: str) -> list[str]:
    """``IsValidLabelValue``."""
    errs: list[str] = []
    if go_len(value) > LABEL_VALUE_MAX:
        errs.append(max_len_error(LABEL_VALUE_MAX))
    if not _full(_LABEL_VALUE_RE, value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


# --- pkg/api/validation/path --------------------------------------------------------------


def validate_path_segment_name(name: str, prefix: bool = False) -> list[str]:
    """``ValidatePathSegmentName``: what may stand in a URL path segment or storage key.

    Used for core v1 names (400 ``Name parameter invalid: "<name>": <msg>``, built by the
    caller). A prefix is not checked against ``.``/``..`` since a suffix follows it.
    """
    if not prefix:
        for illegal in (".", ".."):
            if name == illegal:
                return [f"may not be '{illegal}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]


# --- pkg/api/validation/generic.go --------------------------------------------------------


def _mask_trailing_dash(name: str) -> str:
    # Go replaces the last *two* bytes by "a" (a long-standing quirk kept for fidelity).
    if len(name) > 1 and name.endswith("-"):
        return name[:-2] + "a"
    return name


def name_is_dns_subdomain(name: str, prefix: bool) -> list[str]:
    """``NameIsDNSSubdomain``: a generateName prefix may end in ``-``."""
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool) -> list[str]:
    """``NameIsDNSLabel`` (also ``ValidateNamespaceName``)."""
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


# --- how Go prints bad values ---------------------------------------------------------------


def go_json(value: Any) -> str:
    """Compact JSON the way Go's ``encoding/json`` writes it (HTML-safe escaping).

    Dict keys keep their order: pass them in Go struct field order. This is
    :func:`apiserver.apimachinery.strict.go_marshal` without key sorting (one writer of Go's
    JSON for the tree).
    """
    return go_marshal(value, sort_keys=False)


def parse_wire_time(value: str) -> _dt.datetime:
    """Parse a time string already normalised by the codec (``...Z``, UTC)."""
    return _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))


def go_time_string(value: str | None) -> str:
    """``time.Time.String()`` of a decoded ``metav1.Time``/``MicroTime`` (UTC, as a server
    with no TZ configured shows it); ``None`` is Go's zero time."""
    return format_time_string(parse_wire_time(value) if value else None)


@attrs.frozen
class RenderedValueError(FieldError):
    """An ``Invalid value`` error whose bad value is already rendered as Go prints it."""

    def body(self) -> str:
        text = f"Invalid value: {self.bad_value}"
        if self.detail:
            text += ": " + self.detail
        return text


def invalid_rendered(field: str, rendered: str, detail: str) -> FieldError:
    return RenderedValueError(errors.INVALID, field, rendered, detail)


def immutable(field: str, new: Any, old: Any, rendered: str | None = None) -> list[FieldError]:
    """``ValidateImmutableField``: ``new`` and ``old`` compared as given."""
    if new == old:
        return []
    if rendered is None:
        return [errors.invalid(field, new, FIELD_IMMUTABLE)]
    return [invalid_rendered(field, rendered, FIELD_IMMUTABLE)]


# --- pkg/apis/meta/v1/validation ------------------------------------------------------------


def validate_labels(labels: Mapping[str, str] | None, path: str) -> list[FieldError]:
    """``ValidateLabels``: each key a qualified name, each value a label value."""
    errs: list[FieldError] = []
    for key, value in (labels or {}).items():
        errs.extend(errors.invalid(path, key, msg) for msg in is_qualified_name(key))
        errs.extend(errors.invalid(path, value, msg) for msg in is_valid_label_value(value))
    return errs


def _go_is_print(ch: str) -> bool:
    # unicode.IsPrint: categories L, M, N, P, S and the ASCII space; Python agrees.
    return ch == " " or ch.isprintable()


def validate_field_manager(manager: str, path: str) -> list[FieldError]:
    """``ValidateFieldManager``: at most 128 bytes, printable characters only."""
    errs: list[FieldError] = []
    if go_len(manager) > FIELD_MANAGER_MAX_LENGTH:
        errs.append(errors.too_long(path, FIELD_MANAGER_MAX_LENGTH))
    if manager.isprintable():  # every character is (the space included): nothing to report
        return errs
    position = 0
    for ch in manager:
        if not _go_is_print(ch):
            errs.append(
                errors.invalid(
                    path, manager, f"invalid character U+{ord(ch):04X} (at position {position})"
                )
            )
        position += go_len(ch)
    return errs


def validate_managed_fields(
    entries: Sequence[Mapping[str, Any]] | None, path: str
) -> list[FieldError]:
    """``ValidateManagedFields``."""
    errs: list[FieldError] = []
    for i, entry in enumerate(entries or ()):
        item = f"{path}[{i}]"
        operation = entry.get("operation") or ""
        if operation not in ("Apply", "Update"):
            errs.append(
                errors.invalid(f"{item}.operation", operation, "must be `Apply` or `Update`")
            )
        fields_type = entry.get("fieldsType") or ""
        if fields_type and fields_type != "FieldsV1":
            errs.append(errors.invalid(f"{item}.fieldsType", fields_type, "must be `FieldsV1`"))
        errs.extend(validate_field_manager(entry.get("manager") or "", f"{item}.manager"))
        if go_len(entry.get("subresource") or "") > MAX_SUBRESOURCE_NAME_LENGTH:
            errs.append(errors.too_long(f"{item}.subresource", MAX_SUBRESOURCE_NAME_LENGTH))
    return errs


# --- pkg/api/validation/objectmeta.go -------------------------------------------------------


def validate_annotations(annotations: Mapping[str, str] | None, path: str) -> list[FieldError]:
    """``ValidateAnnotations``: keys are qualified names ignoring case; total size limit."""
    errs: list[FieldError] = []
    annotations = annotations or {}
    for key in annotations:
        errs.extend(errors.invalid(path, key, msg) for msg in is_qualified_name(key.lower()))
    total = sum(go_len(k) + go_len(v) for k, v in annotations.items())
    if total > TOTAL_ANNOTATION_SIZE_LIMIT:
        errs.append(errors.too_long(path, TOTAL_ANNOTATION_SIZE_LIMIT))
    return errs


def _parse_group_version(api_version: str) -> tuple[str, str] | None:
    """``schema.ParseGroupVersion``: None on a malformed value."""
    if api_version in ("", "/"):
        return ("", "")
    parts = api_version.split("/")
    if len(parts) == 1:
        return ("", api_version)
    if len(parts) == 2:
        return (parts[0], parts[1])
    return None


def owner_reference_json(ref: Mapping[str, Any]) -> dict[str, Any]:
    """An OwnerReference in ``metav1.OwnerReference`` JSON field order."""
    out: dict[str, Any] = {
        "apiVersion": ref.get("apiVersion") or "",
        "kind": ref.get("kind") or "",
        "name": ref.get("name") or "",
        "uid": ref.get("uid") or "",
    }
    for key in ("controller", "blockOwnerDeletion"):
        if ref.get(key) is not None:
            out[key] = ref[key]
    return out


def _validate_owner_reference(ref: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    api_version = ref.get("apiVersion") or ""
    kind = ref.get("kind") or ""
    gv = _parse_group_version(api_version)
    group, version = gv if gv is not None else ("", "")
    if not version:
        errs.append(errors.invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
    if not kind:
        errs.append(errors.invalid(f"{path}.kind", kind, "must not be empty"))
    if not (ref.get("name") or ""):
        errs.append(errors.invalid(f"{path}.name", ref.get("name") or "", "must not be empty"))
    if not (ref.get("uid") or ""):
        errs.append(errors.invalid(f"{path}.uid", ref.get("uid") or "", "must not be empty"))
    if (group, version, kind) in BANNED_OWNERS:
        errs.append(
            invalid_rendered(
                path,
                go_json(owner_reference_json(ref)),
                f"{group}/{version}, Kind={kind} is disallowed from being an owner",
            )
        )
    return errs


def validate_owner_references(
    refs: Sequence[Mapping[str, Any]] | None, path: str
) -> list[FieldError]:
    """``ValidateOwnerReferences``: each reference complete, at most one controller."""
    errs: list[FieldError] = []
    refs = list(refs or ())
    first_controller = ""
    for ref in refs:
        errs.extend(_validate_owner_reference(ref, path))
        if ref.get("controller") is True:
            current = f"{ref.get('kind') or ''}/{ref.get('name') or ''}"
            if first_controller:
                errs.append(
                    invalid_rendered(
                        path,
                        go_json([owner_reference_json(r) for r in refs]),
                        'Only one reference can have Controller set to true. Found "true" in '
                        f"references for {first_controller} and {current}",
                    )
                )
            else:
                first_controller = current
    return errs


def validate_finalizers(finalizers: Sequence[str] | None, path: str) -> list[FieldError]:
    """``ValidateFinalizers``: qualified names; ``orphan`` and ``foregroundDeletion``
    exclude each other."""
    errs: list[FieldError] = []
    finalizers = list(finalizers or ())
    for finalizer in finalizers:
        errs.extend(errors.invalid(path, finalizer, msg) for msg in is_qualified_name(finalizer))
    if FINALIZER_ORPHAN in finalizers and FINALIZER_FOREGROUND in finalizers:
        errs.append(
            invalid_rendered(
                path,
                go_json(finalizers),
                f"finalizer {FINALIZER_ORPHAN} and {FINALIZER_FOREGROUND} cannot be both set",
            )
        )
    return errs


def validate_object_meta(
    meta: Mapping[str, Any],
    *,
    namespaced: bool,
    name_fn: NameFunc,
    path: str = "metadata",
) -> list[FieldError]:
    """``ValidateObjectMeta`` (create): name/generateName, namespace, generation, labels,
    annotations, ownerReferences, finalizers, managedFields -- in Go's order."""
    errs: list[FieldError] = []
    generate_name = meta.get("generateName") or ""
    name = meta.get("name") or ""
    if generate_name:
        errs.extend(
            errors.invalid(f"{path}.generateName", generate_name, msg)
            for msg in name_fn(generate_name, True)
        )
    if not name:
        errs.append(errors.required(f"{path}.name", "name or generateName is required"))
    else:
        errs.extend(errors.invalid(f"{path}.name", name, msg) for msg in name_fn(name, False))

    namespace = meta.get("namespace") or ""
    if namespaced:
        if not namespace:
            errs.append(errors.required(f"{path}.namespace"))
        else:
            errs.extend(
                errors.invalid(f"{path}.namespace", namespace, msg)
                for msg in name_is_dns_label(namespace, False)
            )
    elif namespace:
        errs.append(errors.forbidden(f"{path}.namespace", "not allowed on this type"))

    generation = meta.get("generation") or 0
    if generation < 0:
        errs.append(errors.invalid(f"{path}.generation", generation, IS_NEGATIVE))
    errs.extend(validate_labels(meta.get("labels"), f"{path}.labels"))
    errs.extend(validate_annotations(meta.get("annotations"), f"{path}.annotations"))
    errs.extend(validate_owner_references(meta.get("ownerReferences"), f"{path}.ownerReferences"))
    errs.extend(validate_finalizers(meta.get("finalizers"), f"{path}.finalizers"))
    errs.extend(validate_managed_fields(meta.get("managedFields"), f"{path}.managedFields"))
    return errs


def _go_string_slice(values: Sequence[str]) -> str:
    """``%#v`` of a ``[]string``."""
    return "[]string{" + ", ".join(errors.go_quote(v) for v in values) + "}"


def validate_no_new_finalizers(
    new: Sequence[str] | None, old: Sequence[str] | None, path: str
) -> list[FieldError]:
    """``ValidateNoNewFinalizers`` (only called while the object is being deleted)."""
    extra = sorted(set(new or ()) - set(old or ()))
    if not extra:
        return []
    return [
        errors.forbidden(
            path,
            "no new finalizers can be added if the object is being deleted, found new "
            f"finalizers {_go_string_slice(extra)}",
        )
    ]


def _pointer_time(value: str | None) -> str:
    # A nil *metav1.Time prints as the Go string "null" (quoted); else its String().
    return '"null"' if value is None else go_time_string(value)


def validate_object_meta_update(
    new: Mapping[str, Any], old: Mapping[str, Any], path: str = "metadata"
) -> list[FieldError]:
    """``ValidateObjectMetaUpdate``.

    The ``resourceVersion must be specified for an update`` check is left out: the store
    always fills the resource version before validating, so kube-apiserver never reports
    it (k8s.io/apiserver ``pkg/registry/rest/update.go``).
    """
    errs: list[FieldError] = []
    if old.get("deletionTimestamp"):
        errs.extend(
            validate_no_new_finalizers(
                new.get("finalizers"), old.get("finalizers"), f"{path}.finalizers"
            )
        )
    new_generation = new.get("generation") or 0
    if new_generation < (old.get("generation") or 0):
        errs.append(errors.invalid(f"{path}.generation", new_generation, "must not be decremented"))

    for key in ("name", "namespace", "uid"):
        errs.extend(immutable(f"{path}.{key}", new.get(key) or "", old.get(key) or ""))
    new_created = new.get("creationTimestamp") or None
    errs.extend(
        immutable(
            f"{path}.creationTimestamp",
            new_created,
            old.get("creationTimestamp") or None,
            go_time_string(new_created),
        )
    )
    new_deleted = new.get("deletionTimestamp") or None
    errs.extend(
        immutable(
            f"{path}.deletionTimestamp",
            new_deleted,
            old.get("deletionTimestamp") or None,
            _pointer_time(new_deleted),
        )
    )
    new_grace = new.get("deletionGracePeriodSeconds")
    errs.extend(
        immutable(
            f"{path}.deletionGracePeriodSeconds",
            new_grace,
            old.get("deletionGracePeriodSeconds"),
            '"null"' if new_grace is None else str(new_grace),
        )
    )
    errs.extend(validate_labels(new.get("labels"), f"{path}.labels"))
    errs.extend(validate_annotations(new.get("annotations"), f"{path}.annotations"))
    errs.extend(validate_owner_references(new.get("ownerReferences"), f"{path}.ownerReferences"))
    errs.extend(validate_managed_fields(new.get("managedFields"), f"{path}.managedFields"))
    return errs
