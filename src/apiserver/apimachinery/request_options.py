"""Request options (list/watch, create/update/patch, delete): decoding and validation.

Follows k8s.io/apimachinery and k8s.io/apiserver:

- query decoding: the generated ``Convert_url_Values_To_v1_*Options`` functions and
  ``pkg/runtime/conversion.go`` (first value wins; booleans false only for ``0``/``false``;
  integers via ``strconv.ParseInt``, a bad one is a 400 with Go's text), then
  ``Convert_v1_ListOptions_To_internalversion_ListOptions`` (label selector parsed before the
  field selector). Errors surface in that order.
- ``pkg/apis/meta/internalversion/defaults.go`` ``SetListOptionsDefaults`` (WatchList on, as
  in 1.34+) and ``validation/validation.go`` ``ValidateListOptions``.
- ``pkg/apis/meta/v1/validation/validation.go``: ``ValidateCreateOptions``,
  ``ValidateUpdateOptions``, ``ValidatePatchOptions``, ``ValidateDeleteOptions``,
  ``ValidateFieldManager``, ``ValidateDryRun``, ``ValidateFieldValidation``.
- ``pkg/endpoints/handlers/rest.go`` ``prefixFromUserAgent`` (the default field manager) and
  ``handlers/delete.go`` (DeleteOptions from a non-empty body, else from the query).

422 errors are ``<Kind>.meta.k8s.io "" is invalid: <errs>`` (``errors.invalid_error`` with
group ``meta.k8s.io``). A DELETE body that cannot be decoded is not turned into a
BadRequest by kube-apiserver: the decoder's plain error reaches ``ErrorToAPIStatus`` and
becomes a 500 with an empty reason; that is reproduced here (see :func:`parse_delete_options`).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Sequence
from typing import Any

import yaml

from apiserver.apimachinery.continue_token import (
    GoJSONSyntaxError,
    go_fold_name,
    go_json_parse,
    go_json_parse_shallow,
    unmarshal_type_error,
)
from apiserver.apimachinery.errors import (
    FieldError,
    StatusError,
    bad_request,
    forbidden,
    invalid,
    invalid_error,
    not_supported,
    required,
    too_long,
)
from apiserver.apimachinery.fields import EVERYTHING as EVERY_FIELD
from apiserver.apimachinery.fields import FieldSelector, parse_field_selector
from apiserver.apimachinery.labels import EVERYTHING as EVERY_LABEL
from apiserver.apimachinery.labels import LabelSelector, SelectorParseError, parse_label_selector
from apiserver.apimachinery.queryparams import (
    Query,
    query_bool,
    query_int,
    query_str,
    query_values,
)
from apiserver.gocompat import yamlguard
from apiserver.gocompat.intparse import go_parse_int64
from apiserver.gocompat.jsonvalues import GoNumber, GoObject, go_json_kind
from apiserver.gocompat.marshal import go_marshal

META_GROUP = "meta.k8s.io"

EXACT = "Exact"
NOT_OLDER_THAN = "NotOlderThan"

DRY_RUN_ALL = "All"
FIELD_VALIDATION_VALUES = ("", "Ignore", "Strict", "Warn")
FIELD_MANAGER_MAX_LENGTH = 128

PATCH_JSON = "json"
PATCH_MERGE = "merge"
PATCH_STRATEGIC = "strategic"
PATCH_APPLY = "apply"

PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")


# --- list / watch ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ListOptions:
    """``metainternalversion.ListOptions`` after decoding the query."""

    label_selector: LabelSelector = EVERY_LABEL
    field_selector: FieldSelector = EVERY_FIELD
    resource_version: str = ""
    resource_version_match: str = ""
    limit: int = 0
    continue_: str = ""
    watch: bool = False
    allow_watch_bookmarks: bool = False
    send_initial_events: bool | None = None
    timeout_seconds: int | None = None


def parse_list_options(query: Query, watch_path: bool = False) -> ListOptions:
    """Decode list/watch query parameters; 400 (BadRequest) on the first bad one.

    ``watch_path`` marks the deprecated ``/watch/`` routes: the result then has
    ``watch=True``. (Upstream leaves ``Watch`` false there and passes ``forceWatch`` to the
    handler, which makes ``ValidateListOptions`` apply the *list* rules to such watches; we
    apply the watch rules, which is what a client of those routes means.)
    """
    watch = query_bool(query, "watch") or False
    allow_bookmarks = query_bool(query, "allowWatchBookmarks") or False
    resource_version = query_str(query, "resourceVersion") or ""
    match = query_str(query, "resourceVersionMatch") or ""
    timeout_seconds = query_int(query, "timeoutSeconds")
    # A limit of 0 or less is no limit (k8s.io/apiserver pkg/storage/etcd3/store.go GetList
    # pages only when ``Limit > 0``; the cacher's ``shouldDelegateList`` reads it the same way).
    limit = max(query_int(query, "limit") or 0, 0)
    continue_ = query_str(query, "continue") or ""
    send_initial_events = query_bool(query, "sendInitialEvents")
    try:
        label_selector = parse_label_selector(query_str(query, "labelSelector") or "")
        field_selector = parse_field_selector(query_str(query, "fieldSelector") or "")
    except SelectorParseError as exc:
        raise bad_request(str(exc)) from None
    return ListOptions(
        label_selector=label_selector,
        field_selector=field_selector,
        resource_version=resource_version,
        resource_version_match=match,
        limit=limit,
        continue_=continue_,
        watch=watch or watch_path,
        allow_watch_bookmarks=allow_bookmarks,
        send_initial_events=send_initial_events,
        timeout_seconds=timeout_seconds,
    )


def default_watch_list(opts: ListOptions) -> ListOptions:
    """``SetListOptionsDefaults`` with WatchList enabled (kube 1.34+ default).

    A watch from ``resourceVersion`` ""/"0" that sets neither ``sendInitialEvents`` nor
    ``resourceVersionMatch`` becomes ``sendInitialEvents=true&resourceVersionMatch=NotOlderThan``.
    """
    if opts.send_initial_events is not None or opts.resource_version_match:
        return opts
    if opts.watch and opts.resource_version in ("", "0"):
        return dataclasses.replace(
            opts, send_initial_events=True, resource_version_match=NOT_OLDER_THAN
        )
    return opts


def list_options_errors(opts: ListOptions, is_watch: bool) -> list[FieldError]:
    """``ValidateListOptions`` (WatchList enabled): the field errors, in Go's order."""
    errs: list[FieldError] = []
    match = opts.resource_version_match
    path = "resourceVersionMatch"
    if is_watch:
        if opts.send_initial_events is not None and match != NOT_OLDER_THAN:
            errs.append(
                forbidden(
                    path, "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
                )
            )
        if match:
            if opts.send_initial_events is None:
                errs.append(
                    forbidden(
                        path,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents "
                        "is provided",
                    )
                )
            if match != NOT_OLDER_THAN:
                errs.append(not_supported(path, match, [NOT_OLDER_THAN]))
            if opts.continue_:
                errs.append(
                    forbidden(path, "resourceVersionMatch is forbidden when continue is provided")
                )
        return errs
    if match:
        if not opts.resource_version:
            errs.append(
                forbidden(
                    path, "resourceVersionMatch is forbidden unless resourceVersion is provided"
                )
            )
        if opts.continue_:
            errs.append(
                forbidden(path, "resourceVersionMatch is forbidden when continue is provided")
            )
        if match not in (EXACT, NOT_OLDER_THAN):
            errs.append(not_supported(path, match, [EXACT, NOT_OLDER_THAN, ""]))
        if match == EXACT and opts.resource_version == "0":
            errs.append(
                forbidden(path, 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
            )
    if opts.send_initial_events is not None:
        errs.append(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"))
    return errs


def validate_list_options(opts: ListOptions, is_watch: bool) -> None:
    """Raise the 422 ``ListOptions.meta.k8s.io "" is invalid: ...`` when a rule is broken.

    Call it after :func:`default_watch_list`, as the handler does.
    """
    errs = list_options_errors(opts, is_watch)
    if errs:
        raise invalid_error("ListOptions", "", errs, group=META_GROUP)


# --- create / update / patch ----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class WriteOptions:
    """The shared part of ``CreateOptions``, ``UpdateOptions`` and ``PatchOptions``.

    ``field_validation`` is the raw value ("" means the default, Warn: see
    :attr:`effective_field_validation`); ``field_manager`` is "" when not given.
    """

    dry_run: tuple[str, ...] = ()
    field_manager: str = ""
    field_validation: str = ""
    force: bool | None = None

    @property
    def is_dry_run(self) -> bool:
        return bool(self.dry_run)

    @property
    def effective_field_validation(self) -> str:
        return self.field_validation or "Warn"


#: The options of a write without a query string (most of them): all defaults, all valid.
NO_WRITE_OPTIONS = WriteOptions()


def parse_write_options(query: Query) -> WriteOptions:
    """Decode ``dryRun`` (all values), ``fieldManager``, ``fieldValidation`` and ``force``."""
    if not query:
        return NO_WRITE_OPTIONS
    return WriteOptions(
        dry_run=tuple(query_values(query, "dryRun") or ()),
        field_manager=query_str(query, "fieldManager") or "",
        field_validation=query_str(query, "fieldValidation") or "",
        force=query_bool(query, "force"),
    )


def _is_go_printable(ch: str) -> bool:
    """``unicode.IsPrint``: letters, marks, numbers, punctuation, symbols and U+0020.

    Python's ``isprintable`` draws the same line (everything but Other and Separator,
    except the ASCII space)."""
    return ch.isprintable()


def field_manager_errors(manager: str, path: str = "fieldManager") -> list[FieldError]:
    """``ValidateFieldManager``: ≤128 bytes, printable characters only."""
    errs: list[FieldError] = []
    if len(manager.encode("utf-8", errors="surrogatepass")) > FIELD_MANAGER_MAX_LENGTH:
        errs.append(too_long(path, FIELD_MANAGER_MAX_LENGTH))
    position = 0
    for ch in manager:
        if not _is_go_printable(ch):
            errs.append(
                invalid(
                    path, manager, f"invalid character U+{ord(ch):04X} (at position {position})"
                )
            )
        position += len(ch.encode("utf-8", errors="surrogatepass"))
    return errs


def dry_run_errors(dry_run: Sequence[str], path: str = "dryRun") -> list[FieldError]:
    """``ValidateDryRun``: every value must be ``All``."""
    if all(v == DRY_RUN_ALL for v in dry_run):
        return []
    return [not_supported(path, list(dry_run), [DRY_RUN_ALL])]


def field_validation_errors(value: str, path: str = "fieldValidation") -> list[FieldError]:
    """``ValidateFieldValidation``."""
    if value in FIELD_VALIDATION_VALUES:
        return []
    return [not_supported(path, value, list(FIELD_VALIDATION_VALUES))]


def _write_errors(opts: WriteOptions) -> list[FieldError]:
    if opts is NO_WRITE_OPTIONS:
        return []
    return [
        *field_manager_errors(opts.field_manager),
        *dry_run_errors(opts.dry_run),
        *field_validation_errors(opts.field_validation),
    ]


def validate_create_options(opts: WriteOptions) -> None:
    """422 ``CreateOptions.meta.k8s.io "" is invalid: ...``."""
    errs = _write_errors(opts)
    if errs:
        raise invalid_error("CreateOptions", "", errs, group=META_GROUP)


def validate_update_options(opts: WriteOptions) -> None:
    """422 ``UpdateOptions.meta.k8s.io "" is invalid: ...``."""
    errs = _write_errors(opts)
    if errs:
        raise invalid_error("UpdateOptions", "", errs, group=META_GROUP)


def validate_patch_options(opts: WriteOptions, patch_type: str) -> None:
    """422 ``PatchOptions.meta.k8s.io "" is invalid: ...``; ``patch_type`` as from
    ``negotiation.patch_type`` (``json``/``merge``/``strategic``/``apply``)."""
    errs: list[FieldError] = []
    if patch_type != PATCH_APPLY:
        if opts.force is not None:
            errs.append(forbidden("force", "may not be specified for non-apply patch"))
    elif not opts.field_manager:
        errs.append(required("fieldManager", "is required for apply patch"))
    errs.extend(_write_errors(opts))
    if errs:
        raise invalid_error("PatchOptions", "", errs, group=META_GROUP)


@functools.lru_cache(maxsize=256)
def default_field_manager(user_agent: str) -> str:
    """``prefixFromUserAgent``: the User-Agent up to the first ``/``, printable characters
    only, cut (at a character boundary) to 128 bytes. Kept per User-Agent (a pure function
    of it, and clients send the same few on every write)."""
    head = user_agent.split("/", 1)[0]
    out: list[str] = []
    size = 0
    for ch in head:
        if not _is_go_printable(ch):
            continue
        width = len(ch.encode("utf-8", errors="surrogatepass"))
        if size + width > FIELD_MANAGER_MAX_LENGTH:
            break
        out.append(ch)
        size += width
    return "".join(out)


def field_manager_or_user_agent(manager: str, user_agent: str) -> str:
    """``managerOrUserAgent``: the given manager, else the User-Agent prefix."""
    return manager or default_field_manager(user_agent)


# --- delete ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class DeleteOptions:
    """``metav1.DeleteOptions``."""

    grace_period_seconds: int | None = None
    preconditions_uid: str | None = None
    preconditions_resource_version: str | None = None
    orphan_dependents: bool | None = None
    propagation_policy: str | None = None
    dry_run: tuple[str, ...] = ()

    @property
    def is_dry_run(self) -> bool:
        return bool(self.dry_run)


def _decode_failure(message: str) -> StatusError:
    """A decoder error kube-apiserver does not wrap: 500 with an empty reason."""
    return StatusError(500, "", message)


_DELETE_FIELDS = {
    "gracePeriodSeconds": "int64",
    "preconditions": "v1.Preconditions",
    "orphanDependents": "bool",
    "propagationPolicy": "v1.DeletionPropagation",
    "dryRun": "[]string",
}
_META_SCHEME = "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:28"
# Object-kind keys the meta serializer recognises (metav1.TypeMeta); ignored otherwise.
_TYPE_META = ("kind", "apiVersion")


_DELETE_OPTIONS_DEPTH = 16
"""Deeper than any DeleteOptions field (``preconditions.uid`` is two levels down)."""


def _body_to_tree(body: bytes, content_type: str) -> Any:
    """The body as Go's JSON decoder sees it; YAML is first converted to JSON."""
    if content_type == "yaml":
        try:
            loaded = yamlguard.load(body)
        except yaml.YAMLError as exc:
            raise _decode_failure(f"error converting YAML to JSON: yaml: {exc}") from None
        try:
            try:
                body = json.dumps(loaded, separators=(",", ":"), default=str).encode()
            except RecursionError:
                # Nested past json's recursion (go-yaml reads 10,000 levels).
                body = go_marshal(loaded, sort_keys=False).encode()
        except (TypeError, ValueError) as exc:
            raise _decode_failure(f"error converting YAML to JSON: {exc}") from None
    try:
        try:
            return go_json_parse(body)
        except RecursionError:
            # DeleteOptions' fields lie a few levels down; a deeper container counts only by
            # its kind (a type error, or skipped under an unknown key), as Go reads up to
            # 10,000 levels (docs/hostile-input.md).
            return go_json_parse_shallow(body, _DELETE_OPTIONS_DEPTH)
    except GoJSONSyntaxError as exc:
        raise _decode_failure(f"couldn't get version/kind; json parse error: {exc}") from None


def _type_meta(tree: Any) -> tuple[str, str]:
    """``SimpleMetaFactory.Interpret``: kind and apiVersion (encoding/json, case-insensitive)."""
    kind = api_version = ""
    if tree is None:
        return kind, api_version
    if not isinstance(tree, GoObject):
        raise _decode_failure(
            "couldn't get version/kind; json parse error: "
            + unmarshal_type_error(
                go_json_kind(tree),
                "struct { APIVersion string "
                '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }',
            )
        )
    for key, value in tree.pairs:
        name = (
            key
            if key in _TYPE_META
            else {"KIND": "kind", "APIVERSION": "apiVersion"}.get(go_fold_name(key))
        )
        if name is None or value is None:
            continue
        if not isinstance(value, str):
            raise _decode_failure(
                "couldn't get version/kind; json parse error: "
                + unmarshal_type_error(go_json_kind(value), "string", "", name)
            )
        if name == "kind":
            kind = value
        else:
            api_version = value
    if api_version.count("/") > 1:
        raise _decode_failure(f"unexpected GroupVersion string: {api_version}")
    return kind, api_version


def _delete_options_from_tree(tree: Any) -> DeleteOptions:
    """Case-sensitive decoding into ``metav1.DeleteOptions`` (sigs.k8s.io/json); unknown
    fields are ignored, a wrong JSON type is the first ``UnmarshalTypeError``."""
    values: dict[str, Any] = {}
    first_error: str | None = None

    def save(message: str) -> None:
        nonlocal first_error
        if first_error is None:
            first_error = message

    if isinstance(tree, GoObject):
        for key, value in tree.pairs:
            if key not in _DELETE_FIELDS or value is None:
                if key in _DELETE_FIELDS:
                    values.pop(key, None)
                continue
            kind = go_json_kind(value)
            if key == "gracePeriodSeconds":
                if isinstance(value, GoNumber):
                    number = go_parse_int64(value.text)
                    if number is None:
                        save(
                            unmarshal_type_error(
                                f"number {value.text}", "int64", "DeleteOptions", key
                            )
                        )
                    else:
                        values[key] = number
                else:
                    save(unmarshal_type_error(kind, "int64", "DeleteOptions", key))
            elif key == "orphanDependents":
                if isinstance(value, bool):
                    values[key] = value
                else:
                    save(unmarshal_type_error(kind, "bool", "DeleteOptions", key))
            elif key == "propagationPolicy":
                if isinstance(value, str):
                    values[key] = value
                else:
                    save(unmarshal_type_error(kind, "v1.DeletionPropagation", "DeleteOptions", key))
            elif key == "dryRun":
                if isinstance(value, list):
                    items: list[str] = []
                    for item in value:
                        if isinstance(item, str):
                            items.append(item)
                        elif item is None:
                            items.append("")
                        else:
                            save(
                                unmarshal_type_error(
                                    go_json_kind(item), "string", "DeleteOptions", key
                                )
                            )
                    values[key] = tuple(items)
                else:
                    save(unmarshal_type_error(kind, "[]string", "DeleteOptions", key))
            elif key == "preconditions":
                if isinstance(value, GoObject):
                    pre: dict[str, str] = dict(values.get(key) or {})
                    for pkey, pvalue in value.pairs:
                        if pkey not in ("uid", "resourceVersion"):
                            continue
                        if pvalue is None:
                            pre.pop(pkey, None)
                        elif isinstance(pvalue, str):
                            pre[pkey] = pvalue
                        else:
                            go_type = "types.UID" if pkey == "uid" else "string"
                            save(
                                unmarshal_type_error(
                                    go_json_kind(pvalue),
                                    go_type,
                                    "Preconditions",
                                    f"preconditions.{pkey}",
                                )
                            )
                    values[key] = pre
                else:
                    save(unmarshal_type_error(kind, "v1.Preconditions", "DeleteOptions", key))
    elif tree is not None:
        save(unmarshal_type_error(go_json_kind(tree), "v1.DeleteOptions"))
    if first_error is not None:
        raise _decode_failure(first_error)
    pre = values.get("preconditions") or {}
    return DeleteOptions(
        grace_period_seconds=values.get("gracePeriodSeconds"),
        preconditions_uid=pre.get("uid"),
        preconditions_resource_version=pre.get("resourceVersion"),
        orphan_dependents=values.get("orphanDependents"),
        propagation_policy=values.get("propagationPolicy"),
        dry_run=values.get("dryRun", ()),
    )


def parse_delete_options(
    query: Query, body: bytes = b"", content_type: str = "json"
) -> DeleteOptions:
    """DeleteOptions from a non-empty body (then the query is ignored, as upstream), else
    from the query (``gracePeriodSeconds``, ``orphanDependents``, ``propagationPolicy``,
    ``dryRun``; preconditions only come in a body).

    ``content_type`` is the negotiated body format (``json``/``yaml``, from
    ``negotiation.negotiate_body``). A body kind other than ``DeleteOptions`` is refused.
    Decoding failures are 500s with an empty reason, as kube-apiserver sends them; a bad
    query integer is a 400.
    """
    if body:
        tree = _body_to_tree(body, content_type)
        kind, api_version = _type_meta(tree)
        if kind and kind != "DeleteOptions":
            # The scheme's name (file:line of its creation) is a best guess.
            raise _decode_failure(
                f'no kind "{kind}" is registered for version "{api_version or "meta.k8s.io/v1"}"'
                f' in scheme "{_META_SCHEME}"'
            )
        return _delete_options_from_tree(tree)
    grace = query_int(query, "gracePeriodSeconds")
    return DeleteOptions(
        grace_period_seconds=grace,
        orphan_dependents=query_bool(query, "orphanDependents"),
        propagation_policy=query_str(query, "propagationPolicy"),
        dry_run=tuple(query_values(query, "dryRun") or ()),
    )


def delete_options_errors(opts: DeleteOptions) -> list[FieldError]:
    """``ValidateDeleteOptions``."""
    errs: list[FieldError] = []
    policy = opts.propagation_policy
    if opts.orphan_dependents is not None and policy is not None:
        errs.append(
            invalid(
                "propagationPolicy",
                policy,
                "orphanDependents and deletionPropagation cannot be both set",
            )
        )
    if policy is not None and policy not in PROPAGATION_POLICIES:
        errs.append(not_supported("propagationPolicy", policy, [*PROPAGATION_POLICIES, "nil"]))
    errs.extend(dry_run_errors(opts.dry_run))
    return errs


def validate_delete_options(opts: DeleteOptions) -> None:
    """422 ``DeleteOptions.meta.k8s.io "" is invalid: ...``."""
    errs = delete_options_errors(opts)
    if errs:
        raise invalid_error("DeleteOptions", "", errs, group=META_GROUP)


__all__ = [
    "DeleteOptions",
    "ListOptions",
    "WriteOptions",
    "default_field_manager",
    "default_watch_list",
    "delete_options_errors",
    "dry_run_errors",
    "field_manager_errors",
    "field_manager_or_user_agent",
    "field_validation_errors",
    "list_options_errors",
    "parse_delete_options",
    "parse_list_options",
    "parse_write_options",
    "validate_create_options",
    "validate_delete_options",
    "validate_list_options",
    "validate_patch_options",
    "validate_update_options",
]
