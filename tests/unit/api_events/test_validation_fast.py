"""The shortcut of ``validate_create`` for events.k8s.io/v1 (``_surely_valid_v1``): it may
only answer "valid" where the full rules of ``pkg/apis/core/validation/events.go`` find
nothing, whatever the object."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from apiserver.api.events import validation
from apiserver.api.events.validation import validate_create

V1 = "events.k8s.io/v1"


def good() -> dict[str, Any]:
    return {
        "metadata": {"name": "e1", "namespace": "ns", "generateName": "e-"},
        "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p"},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "reportingComponent": "example.com/ctl",
        "reportingInstance": "ctl-1",
        "action": "Do",
        "reason": "Done",
        "message": "note",
        "type": "Normal",
        "source": {},
    }


def full_rules(ev: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    with monkeypatch.context() as patched:
        patched.setattr(validation, "_surely_valid_v1", lambda ev: False)
        return validate_create(ev, api=V1)


STRINGS = st.sampled_from(
    ["", "ns", "default", "kube-system", "Bad_Name", "a/b", "x" * 129, "é", "-", "a.b", "ns-"]
)
VALUES = st.one_of(
    STRINGS,
    st.none(),
    st.integers(-2, 3),
    st.sampled_from([{}, {"a": "b"}, {"component": "c"}, {"host": "h"}, [], ["x"]]),
    st.just({"count": 1, "lastObservedTime": "2024-01-01T00:00:00.000000Z"}),
    st.just({"count": 2, "lastObservedTime": "2024-01-01T00:00:00.000000Z"}),
    st.just([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u"}]),
    st.just([{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": ""}]),
    st.sampled_from([{"a": "bad value!"}, {"a/b/c": "x"}, ["a/b/c"], [{"operation": "X"}]]),
)
TOP = st.sampled_from(
    [
        "involvedObject",
        "eventTime",
        "reportingComponent",
        "reportingInstance",
        "action",
        "reason",
        "message",
        "type",
        "source",
        "series",
        "firstTimestamp",
        "lastTimestamp",
        "count",
    ]
)
META = st.sampled_from(
    [
        "name",
        "namespace",
        "generateName",
        "generation",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), TOP, META, st.booleans(), VALUES), max_size=4),
    st.sampled_from(["ns", "other", ""]),
)
def test_the_shortcut_never_accepts_what_the_rules_refuse(
    changes: list[tuple[bool, str, str, bool, Any]], involved_ns: str
) -> None:
    ev = good()
    ev["involvedObject"]["namespace"] = involved_ns
    for in_meta, top, meta_key, delete, value in changes:
        target, key = (ev["metadata"], meta_key) if in_meta else (ev, top)
        if delete:
            target.pop(key, None)
        else:
            target[key] = copy.deepcopy(value)
    with pytest.MonkeyPatch.context() as monkeypatch:
        try:
            expected = full_rules(ev, monkeypatch)
        except (TypeError, AttributeError):
            reject()  # a shape the decoder never produces (a dict where a string goes)
    assert validate_create(ev, api=V1) == expected


def test_a_good_event_takes_the_shortcut() -> None:
    assert validation._surely_valid_v1(good())
    ev = good()
    ev["metadata"]["labels"] = {"app": "web"}
    assert validation._surely_valid_v1(ev)
    ev["metadata"]["labels"] = {"app": "bad value!"}
    assert not validation._surely_valid_v1(ev)
    assert validate_create(ev, api=V1)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("labels", {"a": "bad value!"}),
        ("annotations", {"a/b/c": "x"}),
        ("finalizers", ["a/b/c"]),
        ("ownerReferences", [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": ""}]),
        ("managedFields", [{"operation": "X", "manager": "m"}]),
        ("generation", -1),
        ("generateName", "Bad_"),
        ("name", "a/b"),
        ("namespace", "a.b"),
    ],
)
def test_each_metadata_rule_still_reports(
    key: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = good()
    ev["metadata"][key] = value
    expected = full_rules(ev, monkeypatch)
    assert expected
    assert validate_create(ev, api=V1) == expected


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("reportingComponent", "a/b/c"),
        ("reportingInstance", "x" * 129),
        ("action", ""),
        ("reason", "é" * 65),
        ("message", "x" * 1025),
        ("type", "Other"),
        ("source", {"host": "h"}),
        ("series", {"count": 1}),
        ("count", 1),
        ("firstTimestamp", "2024-01-01T00:00:00Z"),
        ("eventTime", None),
    ],
)
def test_each_event_rule_still_reports(
    key: str, value: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ev = good()
    ev[key] = value
    expected = full_rules(ev, monkeypatch)
    assert expected
    assert validate_create(ev, api=V1) == expected
