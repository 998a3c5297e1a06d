"""Strict decoding checks (``unknown field``/``duplicate field``) and Go's JSON error texts.

kube-apiserver decodes request bodies with ``sigs.k8s.io/json``'s ``UnmarshalStrict`` when
``fieldValidation`` is ``Warn`` (the default) or ``Strict`` (k8s.io/apiserver
``pkg/endpoints/handlers/rest.go``). That decoder keeps
going after an unknown or duplicate field and returns the list of such problems, each worded
``unknown field "<path>"`` or ``duplicate field "<path>"`` where the path joins field names
with ``.`` and list indexes as ``[i]`` (``spec.containers[0].foo``); repeated texts are kept
once and at most 100 are kept. The value of an unknown field is not looked into; the value of a
duplicate field is. Types with their own ``UnmarshalJSON`` (times, ``FieldsV1``) are opaque.

YAML bodies are turned into JSON first (``sigs.k8s.io/yaml``): duplicate keys are reported by
a strict YAML pass as one error, ``error converting YAML to JSON: yaml: unmarshal errors:\\n
line N: key "k" already set in map``, and the unknown fields are found in the converted JSON,
whose object keys Go's encoder sorted -- so for YAML they come in sorted order, not document
order (``k8s.io/apimachinery`` ``pkg/runtime/serializer/json/json.go``).

Syntax errors come from Go's scanner (:mod:`apiserver.gocompat.jsonscan`).
"""

from __future__ import annotations

import json
from typing import Any, Literal

import yaml

from apiserver.apimachinery.schema import (
    List,
    Map,
    PathElement,
    Scalar,
    Struct,
    Type,
    Untyped,
    format_path,
)
from apiserver.gocompat import deepjson, yamlguard
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import Pairs
from apiserver.gocompat.quote import go_quote

MAX_STRICT_ERRORS = 100

ANY = Scalar("any")
"""Go's ``interface{}``: objects inside are checked for duplicate keys, never for unknown ones."""


def loads_pairs(data: bytes) -> Any:
    """Decode JSON keeping duplicate keys (objects become :class:`Pairs`).

    Raises ``ValueError`` with Go's wording if ``data`` is not valid JSON.
    """
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text, object_pairs_hook=Pairs)
    except ValueError:
        # Only a body that does not parse pays for the Go-worded scan (a hot path otherwise).
        error = go_json_syntax_error(data)
        raise ValueError(error or "invalid JSON") from None
    except RecursionError:
        # Nested past what json's C scanner recurses to: read again without recursion, up to
        # Go's own limit (docs/hostile-input.md); DeepJSONError is a ValueError with Go's text.
        return deepjson.loads(text.encode(), pairs=True)


# --- the strict walk ---------------------------------------------------------------------------


class _Collector:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.seen: set[str] = set()

    def add(self, kind: str, path: tuple[PathElement, ...]) -> None:
        if len(self.errors) >= MAX_STRICT_ERRORS:
            return
        text = f"{kind} field {go_quote(format_path(path))}"
        if text not in self.seen:
            self.seen.add(text)
            self.errors.append(text)


def _members(value: Any, sort_keys: bool) -> list[tuple[str, Any]] | None:
    if isinstance(value, Pairs):
        members = list(value)
    elif isinstance(value, dict):
        members = list(value.items())
    else:
        return None
    if sort_keys:
        members.sort(key=lambda kv: kv[0].encode("utf-8"))
    return members


def _walk(
    value: Any, typ: Type, path: tuple[PathElement, ...], out: _Collector, sort_keys: bool
) -> None:
    if isinstance(typ, Untyped):
        return
    if isinstance(typ, Scalar):
        if typ.kind != "any":
            return
        members = _members(value, sort_keys)
        if members is not None:
            seen: set[str] = set()
            for key, item in members:
                if key in seen:
                    out.add("duplicate", (*path, key))
                seen.add(key)
                _walk(item, ANY, (*path, key), out, sort_keys)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                _walk(item, ANY, (*path, index), out, sort_keys)
        return
    if isinstance(typ, Struct):
        members = _members(value, sort_keys)
        if members is None:
            return
        seen = set()
        for key, item in members:
            field = typ.field(key)
            if field is None:
                out.add("unknown", (*path, key))
                continue
            if key in seen:
                out.add("duplicate", (*path, key))
            seen.add(key)
            _walk(item, field.type, (*path, key), out, sort_keys)
        return
    if isinstance(typ, Map):
        members = _members(value, sort_keys)
        if members is None:
            return
        seen = set()
        for key, item in members:
            if key in seen:
                out.add("duplicate", (*path, key))
            seen.add(key)
            _walk(item, typ.values, (*path, key), out, sort_keys)
        return
    if isinstance(typ, List) and isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, typ.items, (*path, index), out, sort_keys)


# A path as a chain of (parent, element) links: the deep walk below shares each prefix
# instead of copying it at every level (a 10,000-level path copied per level is 50 million
# elements).
_Link = tuple[Any, PathElement] | None


def _path_of(link: _Link) -> tuple[PathElement, ...]:
    elements: list[PathElement] = []
    while link is not None:
        link, element = link
        elements.append(element)
    elements.reverse()
    return tuple(elements)


def _walk_deep(root: Any, root_type: Type, out: _Collector, sort_keys: bool) -> None:
    """:func:`_walk` with an explicit stack, for values nested past the recursion limit.

    Same visits in the same order: each container's members are laid out in document order
    (a ``duplicate``/``unknown`` note, then the member's own walk) and pushed in reverse.
    """
    # Each entry: (value, type, path) to walk, or (None, "unknown"/"duplicate", path) to note.
    work: list[tuple[Any, Type | str, _Link]] = [(root, root_type, None)]
    while work:
        value, entry, link = work.pop()
        if isinstance(entry, str):
            out.add(entry, _path_of(link))
            continue
        typ = entry
        if isinstance(typ, Untyped) or (isinstance(typ, Scalar) and typ.kind != "any"):
            continue
        todo: list[tuple[Any, Type | str, _Link]] = []
        if isinstance(typ, (Scalar, Struct, Map)):
            members = _members(value, sort_keys)
            if members is None:
                if isinstance(typ, Scalar) and isinstance(value, list):
                    todo = [(item, ANY, (link, index)) for index, item in enumerate(value)]
                    work.extend(reversed(todo))
                continue
            seen: set[str] = set()
            for key, item in members:
                child = (link, key)
                if isinstance(typ, Struct):
                    field = typ.field(key)
                    if field is None:
                        todo.append((None, "unknown", child))
                        continue
                    item_type: Type = field.type
                else:
                    item_type = ANY if isinstance(typ, Scalar) else typ.values
                if key in seen:
                    todo.append((None, "duplicate", child))
                seen.add(key)
                todo.append((item, item_type, child))
        elif isinstance(typ, List) and isinstance(value, list):
            todo = [(item, typ.items, (link, index)) for index, item in enumerate(value)]
        work.extend(reversed(todo))


def strict_errors_in(value: Any, typ: Type, *, sort_keys: bool = False) -> list[str]:
    """Unknown and duplicate fields of an already decoded value (:class:`Pairs` or dicts)."""
    out = _Collector()
    try:
        _walk(value, typ, (), out, sort_keys)
    except RecursionError:
        # Nested past the recursion limit (an ``interface{}`` value of a patch, up to Go's
        # 10,000 levels): the same walk again, iteratively; shallow values never come here.
        out = _Collector()
        _walk_deep(value, typ, out, sort_keys)
    return out.errors


def find_unknown_fields(obj: Any, typ: Type) -> list[str]:
    """``unknown field`` problems of a decoded object, in Go's order for it.

    For an object that kube-apiserver re-encodes before decoding strictly (the result of a
    JSON or merge patch, ``json.Marshal`` sorts keys), so keys are visited in sorted order.
    """
    return strict_errors_in(obj, typ, sort_keys=True)


# --- YAML -------------------------------------------------------------------------------------

_MERGE_TAG = "tag:yaml.org,2002:merge"


def _go_key(node: yaml.Node, constructor: yaml.constructor.SafeConstructor) -> tuple[str, str]:
    """A mapping key as yaml.v2 sees it: (its Go type, its ``%#v`` text)."""
    if not isinstance(node, yaml.ScalarNode):
        return ("complex", repr(node.value))
    try:
        value = constructor.construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError):
        value = node.value
    if isinstance(value, bool):
        return ("bool", "true" if value else "false")
    if isinstance(value, int):
        return ("int", str(value))
    if isinstance(value, float):
        return ("float", repr(value))
    if value is None:
        return ("nil", "<nil>")
    return ("string", go_quote(value if isinstance(value, str) else str(node.value)))


def _yaml_duplicates(
    root: yaml.Node, out: list[str], active: set[int], constructor: yaml.constructor.SafeConstructor
) -> None:
    """Each mapping key given twice, in yaml.v2's order: a member's value is looked into
    before its key is checked. An explicit stack (no recursion): a document may nest up to
    go-yaml's 10,000 levels."""
    # Entries: ("node", node, None, None), ("key", key node, value node, seen keys of its
    # mapping) once the value is done, ("leave", node, None, None) when a collection is done.
    work: list[tuple[str, Any, Any, Any]] = [("node", root, None, None)]
    while work:
        step, node, value_node, seen = work.pop()
        if step == "leave":
            active.discard(id(node))
            continue
        if step == "key":
            if node.tag == _MERGE_TAG:
                continue
            key = _go_key(node, constructor)
            if key in seen:
                line = value_node.start_mark.line + 1
                out.append(f"line {line}: key {key[1]} already set in map")
            seen.add(key)
            continue
        if id(node) in active:
            continue
        if isinstance(node, yaml.MappingNode):
            active.add(id(node))
            keys: set[tuple[str, str]] = set()
            todo: list[tuple[str, Any, Any, Any]] = []
            for key_node, member in node.value:
                todo.append(("node", member, None, None))
                todo.append(("key", key_node, member, keys))
            todo.append(("leave", node, None, None))
            work.extend(reversed(todo))
        elif isinstance(node, yaml.SequenceNode):
            active.add(id(node))
            work.append(("leave", node, None, None))
            work.extend(("node", item, None, None) for item in reversed(node.value))


_PLAIN_DEPTH = 200
"""How deep :func:`_yaml_plain` copies: further down a value can only sit in an unknown
field, or in a field of the wrong type, of the served type (a few levels deep), where the
strict walk never looks, so it is cut there (no recursion past the limit)."""


def _yaml_plain(node: yaml.Node, depth: int = 0) -> Any:
    """A composed YAML node as sigs.k8s.io/yaml's JSON sees it (last duplicate key wins)."""
    if depth > _PLAIN_DEPTH:
        return None
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                sources = (
                    value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                )
                for source in sources:
                    plain = _yaml_plain(source, depth + 1)
                    if isinstance(plain, dict):
                        for key, item in plain.items():
                            merged.setdefault(key, item)
            elif isinstance(key_node, yaml.ScalarNode):
                result[str(key_node.value)] = _yaml_plain(value_node, depth + 1)
        return {**merged, **result}
    if isinstance(node, yaml.SequenceNode):
        return [_yaml_plain(item, depth + 1) for item in node.value]
    return node.value


def _compose(raw: bytes) -> yaml.Node | None:
    try:
        node: yaml.Node | None = yamlguard.compose(raw)
    except yaml.YAMLError:
        return None
    return node


def _duplicate_error(node: yaml.Node) -> str | None:
    problems: list[str] = []
    _yaml_duplicates(node, problems, set(), yaml.constructor.SafeConstructor())
    if not problems:
        return None
    return "error converting YAML to JSON: yaml: unmarshal errors:\n  " + "\n  ".join(problems)


def yaml_duplicate_key_error(raw: bytes) -> str | None:
    """The strict YAML-to-JSON error for duplicate mapping keys, worded as yaml.v2 words it."""
    node = _compose(raw)
    return _duplicate_error(node) if node is not None else None


# --- entry point --------------------------------------------------------------------------------


def find_strict_errors(
    raw: bytes, schema: Type, *, content_type: Literal["json", "yaml"] = "json"
) -> list[str]:
    """Strict-decoding problems of a request body, in the order kube-apiserver lists them.

    The caller joins them with ``, `` after ``strict decoding error: `` (Strict) or sends one
    ``Warning`` header per item (Warn). A body that does not parse yields no problems here:
    the ordinary decoder reports it.
    """
    if content_type == "yaml":
        node = _compose(raw)
        if node is None:
            return []
        duplicate = _duplicate_error(node)
        problems = [duplicate] if duplicate is not None else []
        problems.extend(strict_errors_in(_yaml_plain(node), schema, sort_keys=True))
        return problems
    try:
        value = loads_pairs(raw)
    except ValueError:
        return []
    return strict_errors_in(value, schema)


# --- Go's json.Marshal ------------------------------------------------------------------------


class _DuplicateNotingLoader(yamlguard.LOADER):
    """A safe YAML loader that notes the mapping keys given twice (the last one wins)."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self.duplicates: list[str] = []


def _noting_mapping(loader: _DuplicateNotingLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if key in seen:
            loader.duplicates.append(str(key))
        seen.add(key)
    return dict(loader.construct_pairs(node, deep=True))


_DuplicateNotingLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _noting_mapping
)


def load_yaml_noting_duplicates(text: str) -> tuple[Any, list[str]]:
    """One YAML document, and the keys it gives twice: config files (an audit policy, an
    AdmissionConfiguration) are decoded strictly first, as kube-apiserver's
    ``runtime.DecodeInto`` with a strict serializer does, and a duplicated key is one of the
    errors that makes it fall back to lenient decoding or fail."""
    loader = _DuplicateNotingLoader(text)
    return yamlguard.load_single(loader), loader.duplicates
