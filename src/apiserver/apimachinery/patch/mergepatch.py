"""JSON merge patch (RFC 7386, ``application/merge-patch+json``) as kube-apiserver applies it.

kube-apiserver calls ``github.com/evanphx/json-patch`` v4 ``MergePatch`` on the JSON of the
current object (``pkg/endpoints/handlers/patch.go``). Its behaviour, kept here:

* an object patch merges into an object: ``null`` deletes a member, objects merge
  recursively, anything else replaces;
* values that are added (member not there before or ``null``, or replacing a non-object) lose their
  ``null`` members recursively -- including ``null`` items of arrays; an array replacing an
  object member is taken as is;
* an array patch replaces the whole document (its ``null`` items dropped); a patch that is
  ``null``, a string, a number or a boolean is 400 ``Invalid JSON Patch``.

Before that, with ``fieldValidation`` Warn (the default) or Strict, the body is decoded into a
``map[string]interface{}``: invalid JSON or a non-object is 400 ``error decoding patch: <Go
error>``, and duplicate keys are strict problems. Written here because the RFC 7386 packages on
PyPI keep ``null`` items in arrays and accept scalar patches.
"""

from __future__ import annotations

from typing import Any

from apiserver.apimachinery.errors import bad_request
from apiserver.apimachinery.strict import ANY, loads_pairs, strict_errors_in
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import deep_copy, go_json_kind, rebuild, to_plain

BAD_PATCH = "Invalid JSON Patch"


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_prune(v) for v in value if v is not None]
    return value


def prune_nulls(value: Any) -> Any:
    """``pruneNulls``: drop ``null`` members of objects and ``null`` items of arrays.

    Values nested past the recursion limit (Go merges up to its decoder's 10,000 levels)
    are pruned again with an explicit stack (docs/hostile-input.md)."""
    try:
        return _prune(value)
    except RecursionError:
        return rebuild(value, drop_nulls=True)


def _merge(current: Any, patch: Any) -> Any:
    if not isinstance(current, dict):
        return prune_nulls(patch)
    if not isinstance(patch, dict):
        return deep_copy(patch)
    _merge_docs(current, patch)
    return current


def _merge_docs(document: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            document.pop(key, None)
        elif document.get(key) is None:
            document[key] = prune_nulls(value)
        else:
            document[key] = _merge(document[key], value)


def merge_patch(document: Any, patch: Any) -> Any:
    """``MergePatch(document, patch)`` on decoded values; 400 ``Invalid JSON Patch`` if unusable."""
    if isinstance(patch, list):
        return prune_nulls(patch)
    if not isinstance(patch, dict):
        raise bad_request(BAD_PATCH)
    if not isinstance(document, dict):
        return prune_nulls(patch)
    result = deep_copy(document)
    _merge_docs(result, patch)
    return result


def decode_merge_patch(raw: bytes, *, validation: str = "Warn") -> tuple[Any, list[str]]:
    """The decoded patch body and its strict problems (duplicate keys).

    Raises the 400s kube-apiserver sends for bodies it cannot use.
    """
    syntax = go_json_syntax_error(raw)
    strict = validation in ("Warn", "Strict")
    if syntax is not None:
        raise bad_request(f"error decoding patch: {syntax}" if strict else BAD_PATCH)
    document = loads_pairs(raw)
    problems: list[str] = []
    if strict:
        if document is not None and go_json_kind(document) != "object":
            raise bad_request(
                "error decoding patch: json: cannot unmarshal "
                f"{go_json_kind(document)} into Go value of type map[string]interface {{}}"
            )
        problems = strict_errors_in(document, ANY)
    return to_plain(document), problems


def json_merge_patch(
    document: Any, raw: bytes, *, validation: str = "Warn"
) -> tuple[Any, list[str]]:
    """Decode and apply a merge patch body: (patched document, strict problems of the body)."""
    patch, problems = decode_merge_patch(raw, validation=validation)
    return merge_patch(document, patch), problems
