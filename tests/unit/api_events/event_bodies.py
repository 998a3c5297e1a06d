"""Hypothesis strategies for events.k8s.io/v1 Event bodies, valid or nearly so.

Shared by the tests of the create path's shortcuts (memos, fast paths), which must agree with
the general code on every shape an Event can take: with and without labels, annotations,
series, related, owner references, finalizers, deprecated fields, optional fields missing,
empty strings and odd characters, and (``unknown=True``) fields the schema does not know.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

TEXT = st.sampled_from(["", "a", "web", "x" * 70, "ü<&>", "a.b/c", "2", "Pod"]) | st.text(
    max_size=8
)
KEYS = st.sampled_from(["app", "tier", "a/b", "x.io/y", "k1", "k2", "", "Bad Key"])
MICRO = st.sampled_from(
    [
        "2025-01-01T00:00:00.000000Z",
        "2025-01-01T00:00:00.123456+02:00",
        "0001-01-01T00:00:00.000000Z",
        "2025-03-01T10:00:00Z",
    ]
)
TIME = st.sampled_from(["2024-01-01T00:00:00Z", "0001-01-01T00:00:00Z"])


def _optional(d: dict[str, Any], draw: Any, key: str, strategy: Any) -> None:
    if draw(st.booleans()):
        d[key] = draw(strategy)


@st.composite
def references(draw: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {}
    for key in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"):
        _optional(ref, draw, key, TEXT)
    return ref


@st.composite
def metadata(draw: Any, unknown: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    _optional(meta, draw, "name", st.sampled_from(["e1", "ev-2", "", "Bad_Name"]))
    _optional(meta, draw, "generateName", st.sampled_from(["b-", "", "gen-"]))
    _optional(meta, draw, "namespace", st.sampled_from(["ns1", "", "default"]))
    _optional(meta, draw, "labels", st.dictionaries(KEYS, TEXT, max_size=3))
    _optional(meta, draw, "annotations", st.dictionaries(KEYS, TEXT, max_size=3))
    _optional(meta, draw, "finalizers", st.lists(st.sampled_from(["f1", "f2", "x.io/f"])))
    owners = st.lists(
        st.fixed_dictionaries(
            {
                "apiVersion": st.just("v1"),
                "kind": st.just("Pod"),
                "name": TEXT,
                "uid": st.sampled_from(["u1", "u2", "u3"]),
            },
            optional={"controller": st.booleans(), "blockOwnerDeletion": st.booleans()},
        ),
        max_size=3,
    )
    _optional(meta, draw, "ownerReferences", owners)
    if unknown:
        _optional(meta, draw, "clusterName", TEXT)
    return meta


@st.composite
def v1_events(draw: Any, unknown: bool = False) -> dict[str, Any]:
    """A v1 Event body; every field optional, values from small pools (so shapes repeat)."""
    event: dict[str, Any] = {}
    _optional(event, draw, "apiVersion", st.just("events.k8s.io/v1"))
    _optional(event, draw, "kind", st.just("Event"))
    event["metadata"] = draw(metadata(unknown))
    _optional(event, draw, "eventTime", MICRO)
    series = st.fixed_dictionaries(
        {}, optional={"count": st.integers(0, 5), "lastObservedTime": MICRO}
    )
    _optional(event, draw, "series", st.none() | series)
    for key in ("reportingController", "reportingInstance", "action", "reason", "note", "type"):
        _optional(event, draw, key, TEXT)
    _optional(event, draw, "regarding", references())
    _optional(event, draw, "related", st.none() | references())
    _optional(
        event,
        draw,
        "deprecatedSource",
        st.fixed_dictionaries({}, optional={"component": TEXT, "host": TEXT}),
    )
    _optional(event, draw, "deprecatedFirstTimestamp", TIME)
    _optional(event, draw, "deprecatedLastTimestamp", TIME)
    _optional(event, draw, "deprecatedCount", st.integers(0, 3))
    if unknown:
        _optional(event, draw, "bogus", st.integers() | st.dictionaries(KEYS, TEXT))
        if draw(st.booleans()) and isinstance(event.get("regarding"), dict):
            event["regarding"]["extra"] = 1
    if draw(st.booleans()):
        keys = draw(st.permutations(list(event)))
        event = {key: event[key] for key in keys}
    return event


@st.composite
def similar_v1_events(draw: Any, unknown: bool = False) -> list[dict[str, Any]]:
    """A few bodies that differ from one base by small edits: a value, a map key, a field
    more or less (so shortcuts keyed on shapes meet near misses as well as true hits)."""
    base = draw(v1_events(unknown))
    out = [base]
    for _ in range(draw(st.integers(1, 6))):
        body = copy.deepcopy(base)
        for _ in range(draw(st.integers(1, 2))):
            _edit(draw, body)
        out.append(body)
    return out


def _edit(draw: Any, body: dict[str, Any]) -> None:
    """Change one thing somewhere in ``body`` (an object holding objects and values)."""
    node = body
    while True:
        children = [k for k, v in node.items() if isinstance(v, dict)]
        if not children or draw(st.booleans()):
            break
        node = node[draw(st.sampled_from(children))]
    action = draw(st.sampled_from(["value", "rename", "drop", "add"]))
    keys = list(node)
    if action == "add" or not keys:
        node[draw(KEYS | st.sampled_from(list(EVENT_KEYS)))] = draw(TEXT)
        return
    key = draw(st.sampled_from(keys))
    if action == "value" and not isinstance(node[key], dict):
        node[key] = draw(TEXT | st.integers(0, 3) | st.none())
    elif action == "rename":
        node[draw(KEYS)] = node.pop(key)
    else:
        del node[key]


EVENT_KEYS = ("note", "reason", "action", "type", "labels", "kind", "name")


ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "x", "2024-01-01T00:00:00Z", "2024-13-01T00:00:00.000000Z"]),
    st.lists(st.integers(0, 3) | st.text(max_size=2), max_size=2),
    st.dictionaries(st.sampled_from(["a", "kind", "count"]), st.integers(0, 2), max_size=2),
)


@st.composite
def odd_bodies(draw: Any) -> dict[str, Any]:
    """Event bodies with a few values swapped for values of any JSON kind."""
    body = draw(v1_events(unknown=True))
    for _ in range(draw(st.integers(0, 3))):
        node = body
        while True:
            children = [v for v in node.values() if isinstance(v, dict) and v] + [
                item for v in node.values() if isinstance(v, list) for item in v if item
            ]
            children = [child for child in children if isinstance(child, dict)]
            if not children or draw(st.booleans()):
                break
            node = draw(st.sampled_from(children))
        keys = [*node, "series", "related", "labels", "ownerReferences", "deprecatedCount"]
        node[draw(st.sampled_from(keys))] = draw(ODD)
    return body
