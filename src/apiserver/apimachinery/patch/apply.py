"""Server-side apply (``application/apply-patch+yaml``), as kube-apiserver does it.

Follows ``k8s.io/apiserver`` ``pkg/endpoints/handlers/patch.go`` (``applyPatcher``),
``k8s.io/apimachinery`` ``pkg/util/managedfields/internal`` (``versioncheck.go``,
``structuredmerge.go``, ``stripmeta.go``, ``managedfieldsupdater.go``, ``capmanagers.go``,
``conflict.go``) and ``sigs.k8s.io/structured-merge-diff`` ``merge/update.go``
(``Updater.Apply``, ``prune``):

1. the configuration must name the endpoint's apiVersion and kind (400 ``invalid object type:
   <group>/<version>, Kind=<kind>``) and carry no ``metadata.managedFields`` (400
   ``metadata.managedFields must be nil``); fields the schema does not know fail the request
   with a 500 ``failed to create typed patch object (<ns>/<name>; <gvk>): .foo: field not
   declared in schema``;
2. the configuration is merged into the live object (its values win; granular maps and keyed
   lists merge item by item; atomic values such as ``regarding`` are replaced whole);
3. the applier now owns exactly the fields of its configuration; fields it owned last time and
   left out are removed, unless another manager (applier or updater) also owns them;
4. any value that changes and belongs to another manager is a conflict: 409 ``Conflict`` with
   one ``FieldManagerConflict`` cause per field, unless ``force`` is set, in which case the
   other managers lose those fields;
5. the applier's entry gets a new ``time`` only if the object changed.

The strict check of the YAML itself (duplicate keys) runs after the apply, as in kube, so
:func:`decode_apply_patch` returns the problem and :func:`strict_apply_error` makes the 400.
"""

from __future__ import annotations

from typing import Any

import yaml

from apiserver.apimachinery.errors import StatusError, bad_request
from apiserver.apimachinery.managedfields import (
    APPLY,
    Conflicts,
    FieldSet,
    ManagerEntry,
    Managers,
    SchemaError,
    VersionViews,
    cap_update_managers,
    decode_managed_fields,
    encode_managed_fields,
    ensure_named_fields_are_members,
    manager_identifier,
    merge_values,
    path_to_string,
    print_manager,
    remove_items,
    strip,
    structured_update,
    to_field_set,
    typed_object,
    validate,
    values_equal,
)
from apiserver.apimachinery.schema import Type
from apiserver.apimachinery.strict import yaml_duplicate_key_error
from apiserver.gocompat import yamlguard
from apiserver.gocompat.jsonvalues import deep_copy, go_json_kind

# --- decoding ---------------------------------------------------------------------------------

_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):
    """Safe YAML without timestamp resolution: yaml.v2 gives ``interface{}`` plain strings."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _json_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return "null"
    return str(key)


def _jsonable(value: Any) -> Any:
    """YAML values as ``sigs.k8s.io/yaml`` turns them into JSON (keys become strings);
    values nested past the recursion limit (go-yaml reads 10,000 levels) are converted
    again by :func:`_jsonable_deep`."""
    try:
        return _jsonable_shallow(value)
    except RecursionError:
        return _jsonable_deep(value)


def _jsonable_shallow(value: Any) -> Any:
    if isinstance(value, dict):
        return {_json_key(key): _jsonable_shallow(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_jsonable_shallow(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value


def _jsonable_deep(value: Any) -> Any:
    holder: list[Any] = [None]
    # Each entry: a value to convert, and the container and slot its result goes into.
    stack: list[tuple[Any, Any, Any]] = [(value, holder, 0)]
    while stack:
        item, into, slot = stack.pop()
        if isinstance(item, dict):
            members = {_json_key(key): member for key, member in item.items()}
            out: dict[str, Any] = dict.fromkeys(members)
            into[slot] = out
            stack.extend((member, out, key) for key, member in members.items())
        elif isinstance(item, list):
            copied: list[Any] = [None] * len(item)
            into[slot] = copied
            stack.extend((v, copied, i) for i, v in enumerate(item))
        else:
            into[slot] = item.decode("latin-1") if isinstance(item, bytes) else item
    return holder[0]


def decode_apply_patch(raw: bytes) -> dict[str, Any] | None:
    """The apply configuration; 400 ``error decoding YAML: ...`` if it is not a YAML map.

    ``None`` for an empty or ``null`` body (kube then fails the kind check).
    """
    try:
        documents = yamlguard.load_all(raw, _Loader)
        value = next(iter(documents), None)
    except yamlguard.JSONDepthError as error:
        # sigs.k8s.io/yaml's Unmarshal: the JSON it made nests past encoding/json's limit.
        raise bad_request(
            f"error decoding YAML: error unmarshaling JSON: while decoding JSON: {error}"
        ) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        raise bad_request(
            f"error decoding YAML: error converting YAML to JSON: yaml: {line}{error.problem}"
        ) from error
    except yaml.YAMLError as error:
        raise bad_request(
            f"error decoding YAML: error converting YAML to JSON: yaml: {error}"
        ) from error
    value = _jsonable(value)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise bad_request(
            "error decoding YAML: error unmarshaling JSON: while decoding JSON: json: cannot "
            f"unmarshal {go_json_kind(value)} into Go value of type map[string]interface {{}}"
        )
    return value


def strict_apply_problem(raw: bytes) -> str | None:
    """The duplicate-key problem ``fieldValidation=Strict|Warn`` reports for an apply body."""
    return yaml_duplicate_key_error(raw)


def strict_apply_error(problem: str) -> StatusError:
    """400 for ``fieldValidation=Strict`` (Warn sends ``problem`` as a warning instead)."""
    return bad_request(f"error strict decoding YAML: {problem}")


# --- errors -----------------------------------------------------------------------------------


def conflict_error(conflicts: Conflicts) -> StatusError:
    """409 ``Conflict``: ``Apply failed with N conflict(s): ...`` (``internal/conflict.go``)."""
    items = conflicts.items()
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {print_manager(mid)}",
            "field": path_to_string(path),
        }
        for mid, path in items
    ]
    if len(items) == 1:
        mid, path = items[0]
        message = (
            f"Apply failed with 1 conflict: conflict with {print_manager(mid)}: "
            f"{path_to_string(path)}"
        )
    else:
        lines: list[str] = []
        for mid in sorted(conflicts.conflicts):
            lines.append(f"conflicts with {print_manager(mid)}:")
            lines.extend(f"- {path_to_string(p)}" for p in conflicts.conflicts[mid].paths())
        message = f"Apply failed with {len(items)} conflicts: " + "\n".join(lines)
    return StatusError(409, "Conflict", message, {"causes": causes})


def _group_version(api_version: Any) -> tuple[str, str]:
    if not isinstance(api_version, str) or not api_version:
        return "", ""
    if "/" not in api_version:
        return "", api_version
    parts = api_version.split("/")
    if len(parts) != 2:
        return "", ""
    return parts[0], parts[1]


# --- apply ------------------------------------------------------------------------------------


def _prune(
    merged: dict[str, Any],
    managers: Managers,
    last: ManagerEntry | None,
    schema: Type,
) -> dict[str, Any]:
    """Drop what the applier owned last time and no longer applies, unless someone owns it."""
    if last is None or last.fields.empty():
        return merged
    last_set = ensure_named_fields_are_members(last.fields, schema)
    pruned = remove_items(merged, last_set, schema) or {}
    managed = FieldSet()
    for entry in managers.values():
        managed = managed.union(entry.fields)
    merged_set = ensure_named_fields_are_members(to_field_set(merged, schema), schema)
    pruned_set = ensure_named_fields_are_members(to_field_set(pruned, schema), schema)
    keep = pruned_set.union(ensure_named_fields_are_members(managed, schema))
    pruned = remove_items(merged, merged_set.difference(keep), schema) or {}
    pruned_set = ensure_named_fields_are_members(to_field_set(pruned, schema), schema)
    dangling = merged_set.difference(pruned_set).intersection(last_set)
    result = remove_items(merged, dangling, schema)
    return result if isinstance(result, dict) else {}


def apply(
    live: dict[str, Any] | None,
    applied: dict[str, Any] | None,
    manager: str,
    api_version: str,
    force: bool,
    now: str,
    schema: Type,
    *,
    kind: str = "Event",
    subresource: str = "",
    views: VersionViews | None = None,
) -> dict[str, Any]:
    """Apply ``applied`` (a decoded configuration) to ``live`` (``None``: not there yet).

    Both are in ``api_version``'s shape. Returns the object to store, in that shape, with its
    ``metadata.managedFields`` (left out when there is none). When nothing but ownership
    changes, that is ``live`` itself with new managed fields. Raises :class:`StatusError` as
    kube-apiserver answers (400 kind/managedFields checks, 409 conflicts, 500 schema errors).
    """
    config = applied if isinstance(applied, dict) else {}
    group, version = _group_version(config.get("apiVersion"))
    config_kind = config.get("kind") if isinstance(config.get("kind"), str) else ""
    if (group, version, config_kind) != (*_group_version(api_version), kind):
        raise bad_request(f"invalid object type: {group}/{version}, Kind={config_kind}")
    gvk = f"{group}/{version}, Kind={config_kind}"
    meta = config.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("managedFields"), list):
        raise bad_request("metadata.managedFields must be nil")

    live_entries = ((live or {}).get("metadata") or {}).get("managedFields")
    try:
        managers = decode_managed_fields(live_entries)
    except ValueError as error:
        raise StatusError(500, "", f"failed to decode managed fields: {error}") from error

    problems = validate(config, schema)
    if problems:
        meta = meta if isinstance(meta, dict) else {}
        namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
        name = meta.get("name") if isinstance(meta.get("name"), str) else ""
        raise StatusError(
            500,
            "",
            f"failed to create typed patch object ({namespace}/{name}; {gvk}): "
            + SchemaError(problems).text(),
        )

    live_typed = {"kind": kind, "apiVersion": api_version, **typed_object(live, schema)}
    identifier = manager_identifier(manager, APPLY, api_version, subresource)
    merged = merge_values(live_typed, config, schema)
    if not isinstance(merged, dict):
        merged = {}
    last = managers.get(identifier)
    managers[identifier] = ManagerEntry(
        manager,
        APPLY,
        api_version,
        to_field_set(config, schema),
        last.time if last is not None else None,
        subresource,
    )
    merged = _prune(merged, managers, last, schema)
    try:
        structured_update(
            live_typed, merged, api_version, managers, identifier, force, schema, views
        )
    except Conflicts as conflicts:
        raise conflict_error(conflicts) from conflicts
    changed = not values_equal(live_typed, merged)

    entry = managers.get(identifier)
    if entry is not None:
        entry.fields = strip(entry.fields)
        if entry.fields.empty():
            del managers[identifier]
        elif changed:
            entry.time = now
    cap_update_managers(managers)
    encoded = encode_managed_fields(managers)

    result = merged if (changed or live is None) else deep_copy(live)
    metadata = result.get("metadata")
    if not isinstance(metadata, dict):
        metadata = result["metadata"] = {}
    if encoded:
        metadata["managedFields"] = encoded
    else:
        metadata.pop("managedFields", None)
    return result
