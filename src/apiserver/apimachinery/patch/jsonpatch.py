"""JSON patch (RFC 6902, ``application/json-patch+json``) as kube-apiserver applies it.

kube-apiserver uses ``github.com/evanphx/json-patch`` v4 (``pkg/endpoints/handlers/patch.go``
``applyJSPatch``), whose behaviour differs from the RFC in places that clients can see, and is
kept here:

* a path is split on ``/`` and the part before the first ``/`` is ignored (``a/b`` acts on
  ``/b``); the empty path only works for ``replace`` (value must be an object or array) and
  ``test``;
* ``replace`` of a missing object member adds it; ``add`` replaces an existing member;
* array indexes may be negative (counted from the end; for ``add``, ``-1`` appends), ``-``
  appends, and ``+1``/``01`` are accepted (Go's ``strconv.Atoi``);
* a member whose value is ``null`` counts as missing when a path goes through it and for
  ``test``; ``copy`` from a missing member copies ``null``; a missing ``value`` is ``null``;
* an unknown ``op`` fails the patch when it is reached.

Errors: a body that does not decode is 400 (``error decoding patch: <Go error>`` when
``fieldValidation`` is Warn or Strict, else the bare Go error); more than 10000 operations is
413 ``Request entity too large: The allowed maximum operations in a JSON patch is 10000, got
N``; any failure while applying is 422 with the fixed text ``the server rejected our request
due to an error in our request`` and ``details: {}`` (``errors.NewGenericServerResponse`` drops
the library's message), so the library's wording is kept only as the exception's cause.

Scalars are compared by value for ``test`` (Go compares the raw JSON text): ``1`` and ``1.0``
differ, but ``"a"`` and ``"\\u0061"`` are equal here. Written here rather than taken from the
``jsonpatch`` package on PyPI, which follows the RFC and so differs in all the points above.
"""

from __future__ import annotations

import re
from typing import Any

from apiserver.apimachinery.errors import StatusError, bad_request
from apiserver.apimachinery.schema import STRING, Field, List, Struct
from apiserver.apimachinery.strict import ANY, loads_pairs, strict_errors_in
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import Pairs, deep_copy, go_json_kind, to_plain

MAX_OPERATIONS = 10000

REJECTED = "the server rejected our request due to an error in our request"

_OP = Struct(
    "jsonPatchOp",
    (Field("op", STRING), Field("path", STRING), Field("from", STRING), Field("value", ANY)),
)

_INT = re.compile(r"[+-]?[0-9]+\Z")


class JSONPatchError(Exception):
    """Why evanphx/json-patch refused an operation (kept as the cause of the 422)."""


def rejected() -> StatusError:
    """422 as ``errors.NewGenericServerResponse(422, ...)`` builds it."""
    return StatusError(422, "Invalid", REJECTED, {})


def too_many_operations(count: int) -> StatusError:
    return StatusError(
        413,
        "RequestEntityTooLarge",
        "Request entity too large: The allowed maximum operations in a JSON patch is "
        f"{MAX_OPERATIONS}, got {count}",
    )


def _type_error(kind: str, target: str) -> str:
    return f"json: cannot unmarshal {kind} into Go value of type {target}"


def decode_json_patch(
    raw: bytes, *, validation: str = "Warn"
) -> tuple[list[dict[str, Any]], list[str]]:
    """The operations of a JSON patch body and its strict-decoding problems.

    Problems (``json patch unknown field "[0].foo"``, ``json patch duplicate field "[0].op"``)
    are only looked for with ``validation`` Warn or Strict; kube adds them in front of the
    problems of the patched object.
    """
    strict = validation in ("Warn", "Strict")
    syntax = go_json_syntax_error(raw)
    if syntax is not None:
        raise bad_request(f"error decoding patch: {syntax}" if strict else syntax)
    document = loads_pairs(raw)
    problems: list[str] = []
    if strict:
        error = _typed_decode_error(document)
        if error is not None:
            raise bad_request(f"error decoding patch: {error}")
        problems = ["json patch " + p for p in _op_strict_errors(document)]
    if document is None:
        operations: list[Any] = []
    elif not isinstance(document, list):
        raise bad_request(_type_error(go_json_kind(document), "jsonpatch.Patch"))
    else:
        operations = document
    result: list[dict[str, Any]] = []
    for item in operations:
        if item is None:
            result.append({})
        elif not isinstance(item, Pairs):
            raise bad_request(_type_error(go_json_kind(item), "jsonpatch.Operation"))
        else:
            result.append({k: to_plain(v) for k, v in item})
    if len(result) > MAX_OPERATIONS:
        raise too_many_operations(len(result))
    return result, problems


def _typed_decode_error(document: Any) -> str | None:
    """The first error of ``json.Unmarshal`` into ``[]handlers.jsonPatchOp``."""
    if document is None:
        return None
    if not isinstance(document, list):
        return _type_error(go_json_kind(document), "[]handlers.jsonPatchOp")
    for item in document:
        if item is None:
            continue
        if not isinstance(item, Pairs):
            return _type_error(go_json_kind(item), "handlers.jsonPatchOp")
        for key, value in item:
            if key in ("op", "path", "from") and value is not None and not isinstance(value, str):
                return (
                    f"json: cannot unmarshal {go_json_kind(value)} into Go struct field "
                    f"jsonPatchOp.{key} of type string"
                )
    return None


def _op_strict_errors(document: Any) -> list[str]:
    if not isinstance(document, list):
        return []
    return strict_errors_in(document, List(_OP))


# --- applying ---------------------------------------------------------------------------------


def _same_json(a: Any, b: Any) -> bool:
    """``lazyNode.equal``: Go compares scalars by their JSON text, so ``1`` is not ``1.0``."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _decode_key(key: str) -> str:
    return key.replace("~1", "/").replace("~0", "~")


def _atoi(key: str) -> int:
    if not _INT.match(key):
        raise JSONPatchError(f'strconv.Atoi: parsing "{key}": invalid syntax')
    value = int(key)
    if not -(2**63) <= value < 2**63:
        raise JSONPatchError(f'strconv.Atoi: parsing "{key}": value out of range')
    return value


def _get(container: Any, key: str) -> Any:
    """``container.get``: a missing object member (or a ``null`` one) is ``None``."""
    if isinstance(container, dict):
        return container.get(key)
    index = _atoi(key)
    if index < 0:
        if index < -len(container):
            raise JSONPatchError(f"Unable to access invalid index: {index}")
        index += len(container)
    if index >= len(container):
        raise JSONPatchError(f"Unable to access invalid index: {index}")
    return container[index]


def _find(root: Any, path: str) -> tuple[Any, str] | None:
    """``findObject``: the container holding the last part of ``path``, and that part."""
    parts = path.split("/")
    if len(parts) < 2:
        return None
    node = root
    for part in parts[1:-1]:
        try:
            node = _get(node, _decode_key(part))
        except JSONPatchError:
            return None
        if not isinstance(node, dict | list):
            return None
    return node, _decode_key(parts[-1])


def _add(container: Any, key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    if key == "-":
        container.append(value)
        return
    index = _atoi(key)
    size = len(container) + 1
    if index >= size:
        raise JSONPatchError(f"Unable to access invalid index: {index}")
    if index < 0:
        if index < -size:
            raise JSONPatchError(f"Unable to access invalid index: {index}")
        index += size
    container.insert(index, value)


def _remove(container: Any, key: str) -> None:
    if isinstance(container, dict):
        if key not in container:
            raise JSONPatchError(f"Unable to remove nonexistent key: {key}: missing value")
        del container[key]
        return
    index = _atoi(key)
    if index >= len(container):
        raise JSONPatchError(f"Unable to remove invalid index: {index}")
    if index < 0:
        if index < -len(container):
            raise JSONPatchError(f"Unable to remove invalid index: {index}")
        index += len(container)
    del container[index]


def _set(container: Any, key: str, value: Any) -> None:
    if isinstance(container, dict):
        container[key] = value
        return
    index = _atoi(key)
    if index < 0:
        index += len(container)
    container[index] = value


def _path(operation: dict[str, Any], name: str) -> str:
    value = operation.get(name)
    if not isinstance(value, str):
        raise JSONPatchError(f"{operation.get('op')} operation failed to decode {name}")
    return value


def _apply_one(holder: list[Any], operation: dict[str, Any]) -> None:
    op = operation.get("op")
    kind = op if isinstance(op, str) else "unknown"
    value = deep_copy(operation.get("value"))
    if kind == "add":
        path = _path(operation, "path")
        found = _find(holder[0], path)
        if found is None:
            raise JSONPatchError(f'add operation does not apply: doc is missing path: "{path}"')
        _add(found[0], found[1], value)
    elif kind == "remove":
        path = _path(operation, "path")
        found = _find(holder[0], path)
        if found is None:
            raise JSONPatchError(f'remove operation does not apply: doc is missing path: "{path}"')
        _remove(found[0], found[1])
    elif kind == "replace":
        path = _path(operation, "path")
        if path == "":
            if not isinstance(value, dict | list):
                raise JSONPatchError("replace operation value must be object or array")
            holder[0] = value
            return
        found = _find(holder[0], path)
        if found is None:
            raise JSONPatchError(f"replace operation does not apply: doc is missing path: {path}")
        _get(found[0], found[1])
        _set(found[0], found[1], value)
    elif kind == "move":
        source = _path(operation, "from")
        found = _find(holder[0], source)
        if found is None:
            raise JSONPatchError(
                f"move operation does not apply: doc is missing from path: {source}"
            )
        moved = _get(found[0], found[1])
        _remove(found[0], found[1])
        path = _path(operation, "path")
        target = _find(holder[0], path)
        if target is None:
            raise JSONPatchError(
                f"move operation does not apply: doc is missing destination path: {path}"
            )
        _add(target[0], target[1], moved)
    elif kind == "copy":
        source = _path(operation, "from")
        found = _find(holder[0], source)
        if found is None:
            raise JSONPatchError(
                f"copy operation does not apply: doc is missing from path: {source}"
            )
        copied = deep_copy(_get(found[0], found[1]))
        path = _path(operation, "path")
        target = _find(holder[0], path)
        if target is None:
            raise JSONPatchError(
                f"copy operation does not apply: doc is missing destination path: {path}"
            )
        _add(target[0], target[1], copied)
    elif kind == "test":
        path = _path(operation, "path")
        if path == "":
            if not _same_json(holder[0], value):
                raise JSONPatchError(f"testing value {path} failed: test failed")
            return
        found = _find(holder[0], path)
        if found is None:
            raise JSONPatchError(f"test operation does not apply: is missing path: {path}")
        actual = _get(found[0], found[1])
        if actual is None or value is None:
            if actual is None and value is None:
                return
            raise JSONPatchError(f"testing value {path} failed: test failed")
        if not _same_json(actual, value):
            raise JSONPatchError(f"testing value {path} failed: test failed")
    else:
        raise JSONPatchError(f"Unexpected kind: {kind}")


def apply_json_patch(document: Any, operations: list[dict[str, Any]]) -> Any:
    """Apply decoded operations to a copy of ``document``; 422 if one of them fails."""
    holder = [deep_copy(document)]
    for operation in operations:
        try:
            _apply_one(holder, operation)
        except JSONPatchError as error:
            raise rejected() from error
    return holder[0]


def json_patch(document: Any, raw: bytes, *, validation: str = "Warn") -> tuple[Any, list[str]]:
    """Decode and apply a JSON patch body: (patched document, strict problems of the body)."""
    operations, problems = decode_json_patch(raw, validation=validation)
    return apply_json_patch(document, operations), problems
