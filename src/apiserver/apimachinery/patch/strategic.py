"""Strategic merge patch (``application/strategic-merge-patch+json``) for typed objects.

A port of the apply side of ``k8s.io/apimachinery`` ``pkg/util/strategicpatch/patch.go``
(``StrategicMergeMapPatch`` with ``MergeParallelList`` and ``IgnoreUnmatchedNulls``), as
kube-apiserver runs it in ``pkg/endpoints/handlers/patch.go`` (``strategicPatchObject``):

* maps merge key by key; ``null`` deletes; a value whose Go type differs replaces; new values
  lose their ``null`` members;
* lists merge only where the Go struct tag says ``patchStrategy:"merge"``
  (``metadata.finalizers``: scalars joined and de-duplicated; ``metadata.ownerReferences``:
  items matched by ``patchMergeKey:"uid"`` and merged); every other list is replaced. SMP reads
  only these tags, so ``x-kubernetes-map-type: atomic`` structs such as ``regarding`` are
  merged key by key (server-side apply, not SMP, treats them as atomic);
* directives: ``$patch: replace|delete`` in a map, ``$patch: delete|replace`` items in a merge
  list (``$patch: merge`` there is refused), ``$retainKeys``, ``$setElementOrder/<list>``,
  ``$deleteFromPrimitiveList/<list>``;
* order of merged lists: patch items in patch (or ``$setElementOrder``) order, interleaved
  with server-only items in their old order, with Go's stable sort reproduced exactly.

Errors: undecodable bodies are 400 with the bare Go JSON error; the "bad format" errors are
400, ``lists of lists are not supported``/``patch content doesn't match retainKeys list`` are
422 ``the server rejected our request due to an error in our request`` and all others (merge
key missing, unknown ``$patch`` value, element type mismatches) are 500 with the message and no
reason, as kube-apiserver answers errors that are not API statuses
(``interpretStrategicMergePatchError``). Written here: nothing on PyPI implements SMP.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.apimachinery.errors import StatusError, bad_request
from apiserver.apimachinery.patch.jsonpatch import rejected
from apiserver.apimachinery.schema import List, Map, Struct, Type
from apiserver.apimachinery.strict import ANY, loads_pairs, strict_errors_in
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import deep_copy, go_json_kind, to_plain

DIRECTIVE = "$patch"
RETAIN_KEYS = "$retainKeys"
SET_ELEMENT_ORDER = "$setElementOrder"
DELETE_FROM_PRIMITIVE_LIST = "$deleteFromPrimitiveList"

BAD_JSON_DOC = "invalid JSON document"
NO_LIST_OF_LISTS = "lists of lists are not supported"
BAD_PRIMITIVE_LIST = "invalid patch format of primitive list"
BAD_RETAIN_KEYS = "invalid patch format of retainKeys"
BAD_SET_ELEMENT_ORDER = "invalid patch format of setElementOrder list"
NOT_MATCH_RETAIN_KEYS = "patch content doesn't match retainKeys list"
UNSUPPORTED_FORMAT = "strategic merge patch format is not supported"

_BAD_REQUEST = {
    BAD_JSON_DOC,
    BAD_PRIMITIVE_LIST,
    BAD_RETAIN_KEYS,
    BAD_SET_ELEMENT_ORDER,
    UNSUPPORTED_FORMAT,
}
_UNPROCESSABLE = {NO_LIST_OF_LISTS, NOT_MATCH_RETAIN_KEYS}


class SMPError(Exception):
    """A strategic merge patch failure with Go's text."""


def to_status(error: SMPError) -> StatusError:
    """The Status kube-apiserver answers for ``error`` (see the module docstring)."""
    message = str(error)
    if message in _BAD_REQUEST:
        return bad_request(message)
    if message in _UNPROCESSABLE:
        return rejected()
    return StatusError(500, "", message)


# --- Go formatting ------------------------------------------------------------------------------


def _go_g(value: float) -> str:
    """``strconv.FormatFloat(v, 'g', -1, 64)`` (``%v``): %e when the exponent is < -4 or >= 6."""
    if value == 0:
        return "0"
    text = repr(value)
    digits_part, _, exp_part = text.lower().partition("e")
    sign = "-" if digits_part.startswith("-") else ""
    digits_part = digits_part.lstrip("-")
    whole, _, fraction = digits_part.partition(".")
    exponent = int(exp_part or 0)
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return "0"
    leading_zeros = len(whole + fraction) - len((whole + fraction).lstrip("0"))
    point = len(whole) - leading_zeros + exponent
    digits = digits.rstrip("0") or "0"
    exp = point - 1
    if exp < -4 or exp >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def go_sprint(value: Any) -> str:
    """Go's ``fmt.Sprintf("%v", value)`` for decoded JSON (maps print sorted, as fmt does);
    a value nested past the recursion limit is printed without recursion."""
    try:
        return _sprint(value)
    except RecursionError:
        return _sprint_deep(value)


def _sprint_deep(value: Any) -> str:
    out: list[str] = []
    # Each entry: a value to print, or (text,) printed as is.
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, tuple):
            out.append(item[0])
        elif isinstance(item, dict):
            todo: list[Any] = [("map[",)]
            for index, key in enumerate(sorted(item, key=lambda k: k.encode("utf-8"))):
                todo.append((f"{' ' if index else ''}{key}:",))
                todo.append(item[key])
            todo.append(("]",))
            stack.extend(reversed(todo))
        elif isinstance(item, list):
            todo = [("[",)]
            for index, element in enumerate(item):
                if index:
                    todo.append((" ",))
                todo.append(element)
            todo.append(("]",))
            stack.extend(reversed(todo))
        else:
            out.append(_sprint(item))
    return "".join(out)


def _sprint(value: Any) -> str:
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return _go_g(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        keys = sorted(value, key=lambda k: k.encode("utf-8"))
        return "map[" + " ".join(f"{k}:{_sprint(value[k])}" for k in keys) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_sprint(v) for v in value) + "]"
    return str(value)


def _go_type(value: Any) -> str:
    """``reflect.TypeOf(value).String()`` for decoded JSON values."""
    if value is None:
        return "%!s(<nil>)"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "[]interface {}"
    return "map[string]interface {}"


def _bad_arg_type(expected: str, actual: Any) -> SMPError:
    return SMPError(f"expected a {expected}, but received a {_go_type(actual)}")


def _no_merge_key(item: dict[str, Any], key: str) -> SMPError:
    return SMPError(f"map: {go_sprint(item)} does not contain declared merge key: {key}")


def _bad_patch_type(directive: Any, patch: dict[str, Any]) -> SMPError:
    return SMPError(f"unknown patch type: {go_sprint(directive)} in map: {go_sprint(patch)}")


def _same(a: Any, b: Any) -> bool:
    """Go's ``==`` on ``interface{}`` scalars: same dynamic type and value."""
    return _go_type(a) == _go_type(b) and a == b


def _key(value: Any) -> tuple[str, Any]:
    return (_go_type(value), value if not isinstance(value, dict | list) else id(value))


# --- Go's sort.SliceStable --------------------------------------------------------------------


def _go_stable_sort(data: list[Any], less: Callable[[Any, Any], bool]) -> None:
    """``sort.SliceStable``: insertion sort in blocks of 20, then ``symMerge`` (Go's code path).

    Reproduced exactly because SMP's comparison is not a strict order.
    """

    def lt(i: int, j: int) -> bool:
        return less(data[i], data[j])

    def swap(i: int, j: int) -> None:
        data[i], data[j] = data[j], data[i]

    def insertion_sort(a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and lt(j, j - 1):
                swap(j, j - 1)
                j -= 1

    def swap_range(a: int, b: int, n: int) -> None:
        for i in range(n):
            swap(a + i, b + i)

    def rotate(a: int, m: int, b: int) -> None:
        i = m - a
        j = b - m
        while i != j:
            if i > j:
                swap_range(m - i, m, j)
                i -= j
            else:
                swap_range(m - i, m + j - i, i)
                j -= i
        swap_range(m - i, m, i)

    def sym_merge(a: int, m: int, b: int) -> None:
        if m - a == 1:
            i, j = m, b
            while i < j:
                h = (i + j) // 2
                if lt(h, a):
                    i = h + 1
                else:
                    j = h
            for k in range(a, i - 1):
                swap(k, k + 1)
            return
        if b - m == 1:
            i, j = a, m
            while i < j:
                h = (i + j) // 2
                if not lt(m, h):
                    i = h + 1
                else:
                    j = h
            for k in range(m, i, -1):
                swap(k, k - 1)
            return
        mid = (a + b) // 2
        n = mid + m
        if m > mid:
            start, r = n - b, mid
        else:
            start, r = a, m
        p = n - 1
        while start < r:
            c = (start + r) // 2
            if not lt(p - c, c):
                start = c + 1
            else:
                r = c
        end = n - start
        if start < m < end:
            rotate(start, m, end)
        if a < start < mid:
            sym_merge(a, start, mid)
        if mid < end < b:
            sym_merge(mid, end, b)

    n = len(data)
    block = 20
    a, b = 0, block
    while b <= n:
        insertion_sort(a, b)
        a, b = b, b + block
    insertion_sort(a, n)
    while block < n:
        a, b = 0, 2 * block
        while b <= n:
            sym_merge(a, a + block, b)
            a, b = b, b + 2 * block
        if a + block < n:
            sym_merge(a, a + block, n)
        block *= 2


# --- schema lookups ----------------------------------------------------------------------------


def _lookup(typ: Type | None, key: str) -> tuple[Type, str, str]:
    """(sub-schema, patch strategy, merge key) of ``key`` (``LookupPatchMetadataFor*``)."""
    if isinstance(typ, Map):
        return typ.values, "", ""
    if isinstance(typ, Struct):
        found = typ.field(key)
        if found is not None:
            sub = found.type
            if isinstance(sub, List):
                return sub, sub.patch_strategy, sub.patch_merge_key
            return sub, "", ""
        raise SMPError(f'unable to find api field in struct {typ.name} for the json field "{key}"')
    raise SMPError(f'unable to find api field for the json field "{key}"')


def _element_kind(*lists: list[Any]) -> str:
    """``sliceElementType``: the one Go type of all elements (``map``, ``scalar``)."""
    previous: str | None = None
    for items in lists:
        for item in items:
            current = _go_type(item)
            if previous is None:
                previous = current
                if isinstance(item, list):
                    raise SMPError(NO_LIST_OF_LISTS)
            elif previous != current:
                raise SMPError(
                    "list element types are not identical: " + go_sprint([list(x) for x in lists])
                )
    if previous is None:
        raise SMPError("no elements in any of the given slices")
    return "map" if previous == "map[string]interface {}" else "scalar"


def _extract_key(key: str, prefix: str) -> str:
    parts = key.split("/", 1)
    if len(parts) <= 1 or parts[0] != prefix:
        if prefix == DELETE_FROM_PRIMITIVE_LIST:
            raise SMPError(BAD_PRIMITIVE_LIST)
        if prefix == SET_ELEMENT_ORDER:
            raise SMPError(BAD_SET_ELEMENT_ORDER)
        raise SMPError(f'fail to find unknown prefix "{prefix}" in {key}\n')
    return parts[1]


# --- list helpers -----------------------------------------------------------------------------


def _find_map(items: list[Any], key: str, value: Any) -> tuple[dict[str, Any] | None, int]:
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise SMPError(f"value for key {index} is not a map.")
        if key in item and _same(item[key], value):
            return item, index
    return None, -1


def _index_of(items: list[Any], value: Any, merge_key: str, kind: str) -> int:
    def get(item: Any) -> Any:
        if kind == "map":
            return item.get(merge_key) if isinstance(item, dict) else None
        return item

    wanted = get(value)
    for index, item in enumerate(items):
        if _same(get(item), wanted) or (get(item) is None and wanted is None):
            return index
    return -1


def _validate_merge_key(merge_key: str, *lists: list[Any]) -> None:
    for items in lists:
        for item in items:
            if not isinstance(item, dict):
                raise _bad_arg_type("map[string]interface {}", item)
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)


def _split_deletes(items: list[Any]) -> tuple[list[Any], list[Any]]:
    keep: list[Any] = []
    delete: list[Any] = []
    for item in items:
        if not isinstance(item, dict):
            raise _bad_arg_type("map[string]interface {}", item)
        if DIRECTIVE in item and _same(item[DIRECTIVE], "delete"):
            delete.append(item)
        else:
            keep.append(item)
    return keep, delete


def _normalize_slice_order(
    items: list[Any], order: list[Any], merge_key: str, kind: str
) -> list[Any]:
    deletes: list[Any] = []
    if kind == "map":
        _validate_merge_key(merge_key, items, order)
        items, deletes = _split_deletes(items)
    items = list(items)

    def less(a: Any, b: Any) -> bool:
        ia = _index_of(order, a, merge_key, kind)
        if ia >= 0:
            ib = _index_of(order, b, merge_key, kind)
            if ib >= 0:
                return ia < ib
        return True

    _go_stable_sort(items, less)
    return items + deletes


def _merge_sorted(
    left: list[Any], right: list[Any], server_order: list[Any], merge_key: str, kind: str
) -> list[Any]:
    out: list[Any] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            out.append(right[j])
            j += 1
        elif j >= len(right):
            out.append(left[i])
            i += 1
        else:
            li = _index_of(server_order, left[i], merge_key, kind)
            ri = _index_of(server_order, right[j], merge_key, kind)
            if li >= 0 and ri >= 0 and li < ri:
                out.append(left[i])
                i += 1
            else:
                out.append(right[j])
                j += 1
    return out


def _normalize_element_order(
    patch: list[Any],
    server_only: list[Any],
    patch_order: list[Any],
    server_order: list[Any],
    merge_key: str,
    kind: str,
) -> list[Any]:
    patch = _normalize_slice_order(patch, patch_order, merge_key, kind)
    server_only = _normalize_slice_order(server_only, server_order, merge_key, kind)
    return _merge_sorted(server_only, patch, server_order, merge_key, kind)


def _partition(merged: list[Any], by: list[Any], merge_key: str) -> tuple[list[Any], list[Any]]:
    in_patch: list[Any] = []
    server_only: list[Any] = []
    if not merge_key:
        present = {_key(v) for v in by}
        for item in merged:
            (in_patch if _key(item) in present else server_only).append(item)
        return in_patch, server_only
    for item in merged:
        if not isinstance(item, dict):
            raise _bad_arg_type("map[string]interface {}", item)
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        found, _ = _find_map(by, merge_key, item[merge_key])
        (in_patch if found is not None else server_only).append(item)
    return in_patch, server_only


def _deduplicate_scalars(items: list[Any]) -> list[Any]:
    """Go's in-place de-duplication (a duplicate is overwritten by the last element)."""
    items = list(items)
    length = len(items) - 1
    i = 0
    while i < length:
        j = i + 1
        while j <= length:
            if _same(items[i], items[j]):
                items[j] = items[length]
                items = items[:length]
                length -= 1
                j -= 1
            j += 1
        i += 1
    return items


# --- merging ----------------------------------------------------------------------------------


def _discard_nulls(value: Any) -> None:
    """Drop ``null`` members of every map in ``value``, in place (``mergeMap``'s
    ``discardNullValuesFromPatch``); values nested past the recursion limit (Go merges up
    to its decoder's 10,000 levels) go through :func:`_discard_nulls_deep`."""
    try:
        _discard_nulls_shallow(value)
    except RecursionError:
        _discard_nulls_deep(value)


def _discard_nulls_shallow(value: Any) -> None:
    if isinstance(value, dict):
        for key in [k for k, v in value.items() if v is None]:
            del value[key]
        for item in value.values():
            _discard_nulls_shallow(item)
    elif isinstance(value, list):
        for item in value:
            _discard_nulls_shallow(item)


def _discard_nulls_deep(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in [k for k, v in item.items() if v is None]:
                del item[key]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def _merge_map(
    original: dict[str, Any] | None, patch: dict[str, Any], typ: Type | None
) -> dict[str, Any]:
    if DIRECTIVE in patch:
        directive = patch[DIRECTIVE]
        if _same(directive, "replace"):
            del patch[DIRECTIVE]
            return patch
        if _same(directive, "delete"):
            return {}
        raise _bad_patch_type(directive, patch)
    if original is None:
        original = {}
    _apply_retain_keys(original, patch)
    _merge_set_element_order(original, patch, typ)
    for key in list(patch):
        if key not in patch:
            continue
        value = patch[key]
        delete_list = False
        target = key
        if key.startswith(DELETE_FROM_PRIMITIVE_LIST):
            target = _extract_key(key, DELETE_FROM_PRIMITIVE_LIST)
            delete_list = True
        if value is None:
            original.pop(target, None)
            continue
        if target not in original:
            if not delete_list:
                _discard_nulls(value)
                original[target] = value
            continue
        current = original[target]
        if _go_type(current) != _go_type(value):
            if not delete_list:
                _discard_nulls(value)
                original[target] = value
            continue
        if isinstance(current, dict):
            sub, strategy, _ = _lookup(typ, target)
            if strategy == "replace":
                original[target] = value
            else:
                original[target] = _merge_map(current, value, sub)
        elif isinstance(current, list):
            sub, strategy, merge_key = _lookup(typ, target)
            original[target] = _merge_slice_handler(
                current, value, sub, strategy, merge_key, delete_list
            )
        else:
            original[target] = value
    return original


def _apply_retain_keys(original: dict[str, Any], patch: dict[str, Any]) -> None:
    if RETAIN_KEYS not in patch:
        return
    retain = patch.pop(RETAIN_KEYS)
    if not isinstance(retain, list):
        raise SMPError(BAD_RETAIN_KEYS)
    allowed = {_key(v) for v in retain}
    for key, value in patch.items():
        if value is None or key.startswith((DELETE_FROM_PRIMITIVE_LIST, SET_ELEMENT_ORDER)):
            continue
        if _key(key) not in allowed:
            raise SMPError(BAD_RETAIN_KEYS)
    for key in [k for k in original if _key(k) not in allowed]:
        del original[key]


def _validate_with_set_order(patch_list: Any, order: Any, merge_key: str) -> None:
    if not isinstance(order, list) or not isinstance(patch_list, list):
        raise SMPError(BAD_SET_ELEMENT_ORDER)
    if not order or not patch_list:
        return
    if merge_key:
        keep, _ = _split_deletes(patch_list)
    else:
        keep = patch_list
    pi = si = 0
    while pi < len(keep) and si < len(order):
        item = keep[pi]
        if isinstance(item, dict) and DIRECTIVE in item:
            pi += 1
            continue
        if _merge_key_equal(item, order[si], merge_key):
            pi += 1
        si += 1
    if pi < len(keep) and si >= len(order):
        raise SMPError(
            f"The order in patch list:\n{go_sprint(patch_list)}\n doesn't match "
            f"{SET_ELEMENT_ORDER} list:\n{go_sprint(order)}\n"
        )


def _merge_key_equal(left: Any, right: Any, merge_key: str) -> bool:
    if not merge_key:
        return _same(left, right)
    if not isinstance(left, dict):
        raise _bad_arg_type("map[string]interface {}", left)
    if not isinstance(right, dict):
        raise _bad_arg_type("map[string]interface {}", right)
    if merge_key not in left:
        raise _no_merge_key(left, merge_key)
    if merge_key not in right:
        raise _no_merge_key(right, merge_key)
    return _same(left[merge_key], right[merge_key])


def _merge_set_element_order(
    original: dict[str, Any], patch: dict[str, Any], typ: Type | None
) -> None:
    for key in list(patch):
        if not key.startswith(SET_ELEMENT_ORDER):
            continue
        order = patch.pop(key)
        if not isinstance(order, list):
            raise _bad_arg_type("[]interface {}", order)
        target = _extract_key(key, SET_ELEMENT_ORDER)
        found_original = target in original
        found_patch = target in patch
        original_list: list[Any] = []
        patch_list: list[Any] = []
        if found_original:
            if not isinstance(original[target], list):
                raise _bad_arg_type("[]interface {}", original[target])
            original_list = original[target]
        if found_patch:
            if not isinstance(patch[target], list):
                raise _bad_arg_type("[]interface {}", patch[target])
            patch_list = patch[target]
        sub, strategy, merge_key = _lookup(typ, target)
        _validate_with_set_order(patch_list, order, merge_key)
        if found_original and not found_patch:
            merged = original_list
        elif found_patch and not found_original:
            merged = patch_list
        elif found_original and found_patch:
            merged = _merge_slice_handler(
                original_list, patch_list, sub, strategy, merge_key, False
            )
        else:
            continue
        patch_items, server_only = _partition(merged, order, merge_key)
        kind = _element_kind(original_list, patch_list)
        original[target] = _normalize_element_order(
            patch_items, server_only, order, original_list, merge_key, kind
        )
        patch.pop(target, None)


def _merge_slice_handler(
    original: Any, patch: Any, typ: Type, strategy: str, merge_key: str, delete_list: bool
) -> list[Any]:
    if not isinstance(original, list):
        raise _bad_arg_type("[]interface {}", original)
    if not isinstance(patch, list):
        raise _bad_arg_type("[]interface {}", patch)
    if strategy == "merge":
        items = typ.items if isinstance(typ, List) else None
        return _merge_slice(original, patch, items, merge_key, delete_list)
    return patch


def _merge_slice(
    original: list[Any], patch: list[Any], items: Type | None, merge_key: str, delete_list: bool
) -> list[Any]:
    if not original and not patch:
        return original
    kind = _element_kind(original, patch)
    if kind != "map":
        if delete_list:
            doomed = {_key(v) for v in patch}
            return [v for v in original if _key(v) not in doomed]
        merged = _deduplicate_scalars(original + patch)
    else:
        if not merge_key:
            raise SMPError(f"cannot merge lists without merge key for {getattr(items, 'name', '')}")
        original, patch = _merge_special_elements(original, patch, merge_key)
        merged = _merge_plain_elements(original, patch, merge_key, items)
    patch_items, server_only = _partition(merged, patch, merge_key)
    return _normalize_element_order(patch_items, server_only, patch, original, merge_key, kind)


def _merge_special_elements(
    original: list[Any], patch: list[Any], merge_key: str
) -> tuple[list[Any], list[Any]]:
    plain: list[Any] = []
    replace = False
    for item in patch:
        if DIRECTIVE not in item:
            plain.append(item)
            continue
        directive = item[DIRECTIVE]
        if _same(directive, "delete"):
            if merge_key not in item:
                raise _no_merge_key(item, merge_key)
            while True:
                _, index = _find_map(original, merge_key, item[merge_key])
                if index < 0:
                    break
                original = original[:index] + original[index + 1 :]
        elif _same(directive, "replace"):
            replace = True
        elif _same(directive, "merge"):
            raise SMPError("merging lists cannot yet be specified in the patch")
        else:
            raise _bad_patch_type(directive, item)
    if replace:
        return plain, []
    return original, plain


def _merge_plain_elements(
    original: list[Any], patch: list[Any], merge_key: str, items: Type | None
) -> list[Any]:
    original = list(original)
    for item in patch:
        if merge_key not in item:
            raise _no_merge_key(item, merge_key)
        found, index = _find_map(original, merge_key, item[merge_key])
        if found is not None:
            original[index] = _merge_map(found, item, items)
        else:
            original.append(item)
    return original


# --- entry points ----------------------------------------------------------------------------


def decode_strategic_patch(
    raw: bytes, *, validation: str = "Warn"
) -> tuple[dict[str, Any] | None, list[str]]:
    """The patch map and its strict problems (duplicate keys with Warn/Strict).

    400 with Go's bare error text if the body is not JSON or not an object.
    """
    syntax = go_json_syntax_error(raw)
    if syntax is not None:
        raise bad_request(syntax)
    document = loads_pairs(raw)
    if document is not None and go_json_kind(document) != "object":
        raise bad_request(
            f"json: cannot unmarshal {go_json_kind(document)} into Go value of type "
            "map[string]interface {}"
        )
    problems = strict_errors_in(document, ANY) if validation in ("Warn", "Strict") else []
    plain = to_plain(document)
    return (plain if isinstance(plain, dict) else None), problems


def strategic_merge_patch(
    original: dict[str, Any], patch: dict[str, Any] | None, schema: Type
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Apply ``patch`` to ``original``: (result, the patch as the merge left it).

    The second value is what kube prints (``%+v``, see :func:`go_sprint`) in the 422 of a
    strict-decoding failure, after the merge consumed its directives. Raises
    :class:`StatusError` as kube-apiserver answers.
    """
    work = deep_copy(patch) if patch is not None else {}
    try:
        result = _merge_map(deep_copy(original), work, schema)
    except SMPError as error:
        raise to_status(error) from error
    return deep_copy(result), work
