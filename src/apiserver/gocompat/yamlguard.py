"""YAML loading bounded as kube-apiserver's YAML decoder bounds it.

Every YAML the server reads (request bodies, apply patches, DeleteOptions, config files,
kubeconfigs) goes through :func:`load`, :func:`load_all` or :func:`compose` here, so that a
hostile document costs what its size says and never more:

- **Alias expansion** ("billion laughs"). PyYAML shares the object an alias names, so loading
  is cheap, but everything after it (conversion to JSON, strict checks, the apply patch's
  field walk) expands every alias, exponentially. Go's YAML decoder (go-yaml, which
  ``sigs.k8s.io/yaml`` vendors as ``goyaml.v2``, ``decode.go`` ``allowedAliasRatio``) counts
  the nodes it decodes and those it decodes through an alias, and fails with ``document
  contains excessive aliasing`` once more than 100 aliased nodes and more than 1,000 nodes in
  all have been decoded with an aliased share above 99 % (up to 400,000 nodes; falling to
  10 % at 4,000,000). :func:`check_aliasing` runs the same count over the composed node
  graph, in document order, without expanding anything (each node's expanded size is
  computed once), and an alias to a node that contains it fails as go-yaml's ``anchor ...
  value contains itself`` does.
- **Depth.** go-yaml's scanner (``scannerc.go``) refuses more than 10,000 nested flow
  collections (``max_flow_level``) or block indentation levels (``max_indents``) with
  ``exceeded max depth of 10000``. libyaml (PyYAML's C loader, used here whenever it is
  built) stops at 1,000 by default; its limit is a process-wide setting
  (``yaml_set_max_nest_level``, libyaml 0.2.5) that PyYAML does not expose but whose symbol
  its extension exports, so it is raised (:func:`_prepare`, before each parse) to
  10,001: block nesting then stops exactly where go-yaml's does, flow nesting one level
  later, and :func:`check_depth` refuses that one level (looked for only in documents of
  more than 20,000 characters, so ordinary documents pay nothing). Both
  refusals read as go-yaml's (``line N: exceeded max depth of 10000``, the line given only
  past the first, as go-yaml's ``parser.fail`` does). Block and flow levels are bounded
  apart, but the JSON made of the document is bounded as a whole by ``encoding/json``
  (10,000): :class:`JSONDepthError` carries that refusal for the callers to word. The C
  composer handles 10,001 levels
  on a default 8 MiB thread stack (tests/unit/gocompat/test_yamlguard.py composes in a
  thread). PyYAML's pure-Python loader recurses and would fail with a RecursionError from
  about 300 levels, so the C loader is the default, and a RecursionError from a pure-Python
  loader is turned into a YAML error, never a 500.
- **Size.** Request bodies are bounded before they are decoded (3 MiB, see
  ``apiserver.http.bodylimit``), as kube-apiserver bounds them before its decoder runs.

Callers catch :class:`yaml.YAMLError` as before; the texts above are the exception's ``str``,
so ``error converting YAML to JSON: yaml: {error}`` reads as kube-apiserver's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import yaml

#: PyYAML's C loader when it is built, else its own.
LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

#: go-yaml's ``max_flow_level`` and ``max_indents`` (scannerc.go).
MAX_DEPTH = 10000
DEPTH_TEXT = f"exceeded max depth of {MAX_DEPTH}"
_LIBYAML_NESTING = "exceeded maximum nesting depth"


LIBYAML_DEFAULT_NEST_LEVEL = 1000
DEEP_FLOW_BYTES = 128 * 1024
"""The largest document allowed past 1,000 flow levels. libyaml checks every open flow
level's simple key at each token (``yaml_parser_stale_simple_keys``), so a document costs
its tokens times its flow depth: at 10,000 levels about 0.1 ms a token, minutes for 3 MiB.
Past this size a document with more than 1,000 flow openers keeps libyaml's own limit of
1,000 (a 400 where go-yaml, linear, would read on; docs/hostile-input.md)."""


def _libyaml_setter() -> Callable[[int], None] | None:
    """``yaml_set_max_nest_level`` of the libyaml copy PyYAML's C extension carries (its
    symbol is exported), or None when the extension or the symbol is missing."""
    try:
        import ctypes

        from yaml import _yaml

        library = ctypes.CDLL(_yaml.__file__)
        setter = library.yaml_set_max_nest_level
        setter.argtypes = [ctypes.c_int]
        setter.restype = None
        library.yaml_get_max_nest_level.restype = ctypes.c_int
    except (ImportError, OSError, AttributeError):
        return None
    return setter


_SET_LEVEL = _libyaml_setter()
_level = LIBYAML_DEFAULT_NEST_LEVEL


def _nest_level(level: int) -> None:
    """Make ``level`` libyaml's nesting limit (a process-wide setting, read as it parses)."""
    global _level
    if _SET_LEVEL is not None and level != _level:
        _SET_LEVEL(level)
        _level = level


def _prepare(data: str | bytes) -> None:
    """Choose libyaml's limit for ``data``: go-yaml's, unless the document is large and may
    nest flow collections past 1,000 (see :data:`DEEP_FLOW_BYTES`)."""
    if len(data) > DEEP_FLOW_BYTES:
        openers = (
            data.count("{") + data.count("[")
            if isinstance(data, str)
            else data.count(b"{") + data.count(b"[")
        )
        if openers > LIBYAML_DEFAULT_NEST_LEVEL:
            _nest_level(LIBYAML_DEFAULT_NEST_LEVEL)
            return
    _nest_level(MAX_DEPTH + 1)


_nest_level(MAX_DEPTH + 1)
LIBYAML_MAX_NEST_LEVEL = _level
"""libyaml's limit for ordinary documents: 10,001 (see the module), or 1,000 without the
setter."""

# go-yaml decode.go: the alias ratio's range and the counts below which it is not checked.
_RATIO_LOW = 400_000
_RATIO_HIGH = 4_000_000
_MIN_ALIASED = 100
_MIN_DECODED = 1_000


class YAMLBoundError(yaml.YAMLError):
    """A document refused for its shape (aliasing, depth), worded as go-yaml words it."""


def allowed_alias_ratio(decoded: int) -> float:
    """go-yaml's ``allowedAliasRatio``: the aliased share allowed after ``decoded`` nodes."""
    if decoded <= _RATIO_LOW:
        return 0.99
    if decoded >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * ((decoded - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _excessive(aliased: int, decoded: int) -> bool:
    return (
        aliased > _MIN_ALIASED
        and decoded > _MIN_DECODED
        and aliased / decoded > allowed_alias_ratio(decoded)
    )


def check_aliasing(root: yaml.Node) -> None:
    """Raise :class:`YAMLBoundError` where go-yaml's decoder would stop on ``root``.

    One walk in document order, iterative (no recursion, whatever the depth): a node seen for
    the first time is decoded (one node); a node seen again is an alias, which go-yaml counts
    as one decoded node plus its target's whole expansion, all of it aliased. The counts only
    grow inside an alias, so checking at its end finds what go-yaml's check per node finds.
    """
    size: dict[int, int] = {}  # id(node) -> expanded node count, once the node is done
    open_: set[int] = {id(root)}
    decoded = 1
    aliased = 0
    # Frames: [node, its children, next child index, expanded size so far].
    stack: list[list[Any]] = [[root, _children(root), 0, 1]]
    while stack:
        frame = stack[-1]
        node, children, index = frame[0], frame[1], frame[2]
        if index == len(children):
            stack.pop()
            open_.discard(id(node))
            size[id(node)] = frame[3]
            if stack:
                stack[-1][3] += frame[3]
            continue
        frame[2] = index + 1
        child = children[index]
        key = id(child)
        done = size.get(key)
        if done is not None:
            # An alias: the alias node, then its target expanded, all of it aliased.
            decoded += 1 + done
            aliased += done
            frame[3] += 1 + done
            if _excessive(aliased, decoded):
                raise YAMLBoundError("document contains excessive aliasing")
            continue
        if key in open_:
            # PyYAML's graph does not keep the anchor's name, which go-yaml quotes here.
            raise YAMLBoundError("anchor value contains itself")
        decoded += 1
        if _excessive(aliased, decoded):
            raise YAMLBoundError("document contains excessive aliasing")
        open_.add(key)
        stack.append([child, _children(child), 0, 1])


def depth_error(line: int) -> YAMLBoundError:
    """go-yaml's scanner error past its depth limit at the 0-based ``line`` (``parser.fail``
    names a line only when it is not the first)."""
    where = f"line {line + 1}: " if line else ""
    return YAMLBoundError(where + DEPTH_TEXT)


def _may_nest_past(data: str | bytes) -> bool:
    """Whether ``data`` is long enough to nest past 10,000 levels (each level takes at least
    two characters: ``[]``, ``- ``); only such documents are walked by :func:`check_depth`."""
    return len(data) > 2 * MAX_DEPTH


class JSONDepthError(YAMLBoundError):
    """A document go-yaml reads but whose JSON ``encoding/json`` refuses: block and flow
    levels are bounded apart in go-yaml (10,000 each), while the JSON that
    ``sigs.k8s.io/yaml`` makes of them is bounded as a whole (``maxNestingDepth``, 10,000).
    ``str()`` is the JSON scanner's text, ``invalid character '{' exceeded max depth``."""


def check_depth(root: yaml.Node) -> None:
    """Raise go-yaml's depth error if flow collections nest more than 10,000 deep in
    ``root``, else :class:`JSONDepthError` if collections nest more than 10,000 deep in all.
    Iterative, each node once (an alias does not nest text; the expansion of aliases is not
    counted)."""
    seen: set[int] = set()
    deepest = 0
    # Each entry: a node, the flow level and the depth of its parent.
    stack: list[tuple[yaml.Node, int, int]] = [(root, 0, 0)]
    while stack:
        node, outer, depth = stack.pop()
        if id(node) in seen or not isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            continue
        seen.add(id(node))
        level = outer + 1 if node.flow_style else 0
        if level > MAX_DEPTH:
            raise depth_error(node.start_mark.line)
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, level, depth) for child in reversed(_children(node)))
    if deepest > MAX_DEPTH:
        raise JSONDepthError(f"invalid character {_json_opener(root)!r} exceeded max depth")


def _json_opener(root: yaml.Node) -> str:
    """``{`` or ``[``: the opener of the first collection past 10,000 levels in the JSON
    ``sigs.k8s.io/yaml`` writes (``json.Marshal`` of maps: keys in sorted order)."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if id(node) in seen or not isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            continue
        seen.add(id(node))
        if depth > MAX_DEPTH:
            return "{" if isinstance(node, yaml.MappingNode) else "["
        if isinstance(node, yaml.MappingNode):
            members = sorted(node.value, key=lambda pair: str(pair[0].value).encode())
            children = [value for _, value in members]
        else:
            children = list(node.value)
        stack.extend((child, depth + 1) for child in reversed(children))
    return "{"


def _nesting(error: yaml.YAMLError) -> YAMLBoundError | None:
    """libyaml's nesting refusal as go-yaml's, or None for any other error."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem == _LIBYAML_NESTING:
        mark = error.problem_mark
        return depth_error(mark.line if mark is not None else 0)
    return None


@contextmanager
def _go_words() -> Iterator[None]:
    """A load's depth errors worded as go-yaml's: libyaml's nesting refusal
    (:func:`_nesting`), and a RecursionError of a pure-Python loader or of the constructor."""
    try:
        yield
    except RecursionError:
        raise YAMLBoundError("exceeded max depth") from None
    except yaml.YAMLError as error:
        bound = _nesting(error)
        if bound is None:
            raise
        raise bound from None


def _node(instance: Any, single: bool, deep: bool) -> yaml.Node | None:
    """The next (or single) node, the loader's depth errors worded as go-yaml's."""
    with _go_words():
        node: yaml.Node | None = instance.get_single_node() if single else instance.get_node()
    if node is not None and deep:
        check_depth(node)
    return node


def _construct(loader: Any, node: yaml.Node | None) -> Any:
    if node is None:
        return None
    check_aliasing(node)
    return loader.construct_document(node)


def load(data: str | bytes, loader: Any = LOADER) -> Any:
    """One YAML document (``yaml.safe_load``'s contract), bounded (see the module)."""
    _prepare(data)
    return load_single(loader(data), deep=_may_nest_past(data))


def load_single(instance: Any, *, deep: bool = False) -> Any:
    """One YAML document from a loader instance (its ``get_single_data``), bounded; the
    instance is disposed of. ``deep``: the document may nest past go-yaml's flow limit."""
    try:
        with _go_words():
            return _construct(instance, _node(instance, True, deep))
    finally:
        instance.dispose()


def load_all(data: str | bytes, loader: Any = LOADER) -> Iterator[Any]:
    """Each YAML document in turn (``yaml.load_all``'s contract), bounded (see the module)."""
    _prepare(data)
    instance = loader(data)
    deep = _may_nest_past(data)
    try:
        with _go_words():
            while instance.check_node():
                yield _construct(instance, _node(instance, False, deep))
    finally:
        instance.dispose()


def compose(data: str | bytes, loader: Any = LOADER) -> yaml.Node | None:
    """One YAML document's node graph, checked (see :func:`check_aliasing`)."""
    _prepare(data)
    instance = loader(data)
    try:
        node = _node(instance, True, _may_nest_past(data))
    finally:
        instance.dispose()
    if node is not None:
        check_aliasing(node)
    return node
