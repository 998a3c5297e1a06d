"""Event decoding/encoding/conversion: Go field order, omitempty, strict times, Go errors."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.api.events import convert as c
from apiserver.api.events.convert import DecodeError
from apiserver.apimachinery.meta_time import format_seconds


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


FULL_V1: dict[str, Any] = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {
        "managedFields": [
            {
                "manager": "kube-scheduler",
                "operation": "Update",
                "apiVersion": "events.k8s.io/v1",
                "time": "2024-08-29T14:37:04Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:action": {}, "f:note": {}},
            }
        ],
        "name": "e1",
        "namespace": "ns",
        "uid": "u-1",
        "resourceVersion": "7",
        "creationTimestamp": "2024-08-29T14:37:04Z",
        "labels": {"a": "b"},
        "annotations": {"x": "y"},
        "ownerReferences": [
            {"uid": "o", "name": "p", "kind": "Pod", "apiVersion": "v1", "controller": True}
        ],
        "finalizers": ["f.io/x"],
    },
    "deprecatedCount": 3,
    "note": "hello",
    "eventTime": "2024-08-29T14:37:04.123456Z",
    "series": {"lastObservedTime": "2024-08-29T14:38:04.000001Z", "count": 2},
    "reportingController": "kube-scheduler",
    "reportingInstance": "sched-1",
    "action": "Binding",
    "reason": "Scheduled",
    "regarding": {"fieldPath": "spec", "kind": "Pod", "name": "p", "namespace": "ns", "uid": "u"},
    "related": {"kind": "Node", "name": "n1"},
    "type": "Normal",
    "deprecatedSource": {"host": "h", "component": "c"},
    "deprecatedFirstTimestamp": "2024-08-29T14:37:04Z",
    "deprecatedLastTimestamp": "2024-08-29T14:37:05Z",
}


def test_v1_encoding_follows_go_struct_order() -> None:
    out = c.internal_to_v1(c.v1_to_internal(FULL_V1))
    assert list(out) == [
        "kind",
        "apiVersion",
        "metadata",
        "eventTime",
        "series",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "regarding",
        "related",
        "note",
        "type",
        "deprecatedSource",
        "deprecatedFirstTimestamp",
        "deprecatedLastTimestamp",
        "deprecatedCount",
    ]
    assert list(out["metadata"]) == [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ]
    assert dumps(out["regarding"]) == (
        '{"kind":"Pod","namespace":"ns","name":"p","uid":"u","fieldPath":"spec"}'
    )
    assert dumps(out["metadata"]["ownerReferences"]) == (
        '[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"o","controller":true}]'
    )
    assert dumps(out["metadata"]["managedFields"][0]) == (
        '{"manager":"kube-scheduler","operation":"Update","apiVersion":"events.k8s.io/v1",'
        '"time":"2024-08-29T14:37:04Z","fieldsType":"FieldsV1",'
        '"fieldsV1":{"f:action":{},"f:note":{}}}'
    )
    assert dumps(out["series"]) == '{"count":2,"lastObservedTime":"2024-08-29T14:38:04.000001Z"}'
    assert out["deprecatedSource"] == {"component": "c", "host": "h"}


def test_core_encoding_follows_go_struct_order() -> None:
    out = c.internal_to_core_v1(c.v1_to_internal(FULL_V1))
    assert list(out) == [
        "kind",
        "apiVersion",
        "metadata",
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "type",
        "eventTime",
        "series",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    ]
    assert out["apiVersion"] == "v1"
    assert out["message"] == "hello"
    assert out["count"] == 3
    assert out["reportingComponent"] == "kube-scheduler"


def test_minimal_v1_event_always_emits_structs_and_times() -> None:
    internal = c.v1_to_internal({"metadata": {"name": "x"}})
    assert dumps(c.internal_to_v1(internal)) == (
        '{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"x",'
        '"creationTimestamp":null},"eventTime":null,"regarding":{},"deprecatedSource":{},'
        '"deprecatedFirstTimestamp":null,"deprecatedLastTimestamp":null}'
    )


def test_minimal_core_event_always_emits_reporting_fields() -> None:
    internal = c.core_v1_to_internal({"metadata": {"name": "x"}})
    assert dumps(c.internal_to_core_v1(internal)) == (
        '{"kind":"Event","apiVersion":"v1","metadata":{"name":"x","creationTimestamp":null},'
        '"involvedObject":{},"source":{},"firstTimestamp":null,"lastTimestamp":null,'
        '"eventTime":null,"reportingComponent":"","reportingInstance":""}'
    )


def test_list_items_carry_no_type_meta() -> None:
    internal = c.v1_to_internal({"metadata": {"name": "x"}})
    assert "kind" not in c.internal_to_v1(internal, include_type_meta=False)
    assert "apiVersion" not in c.internal_to_core_v1(internal, include_type_meta=False)
    assert next(iter(c.internal_to_v1(internal, include_type_meta=False))) == "metadata"


def test_empty_strings_and_zero_count_are_omitted() -> None:
    internal = c.v1_to_internal(
        {
            "metadata": {"name": "x", "labels": {}, "finalizers": []},
            "note": "",
            "deprecatedCount": 0,
        }
    )
    out = c.internal_to_v1(internal)
    assert "note" not in out and "deprecatedCount" not in out
    assert out["metadata"] == {"name": "x", "creationTimestamp": None}


def test_series_fields_are_emitted_even_when_zero() -> None:
    internal = c.v1_to_internal({"series": {}})
    assert internal["series"] == {}
    assert c.internal_to_v1(internal)["series"] == {"count": 0, "lastObservedTime": None}
    # core v1's EventSeries has count omitempty
    assert c.internal_to_core_v1(internal)["series"] == {"lastObservedTime": None}


def test_null_pointer_versus_empty_struct() -> None:
    assert "related" not in c.v1_to_internal({"related": None})
    assert c.v1_to_internal({"related": {}})["related"] == {}
    assert c.internal_to_v1(c.v1_to_internal({"related": {}}))["related"] == {}


def test_deletion_grace_period_zero_is_kept() -> None:
    internal = c.v1_to_internal({"metadata": {"deletionGracePeriodSeconds": 0}})
    assert internal["metadata"] == {"deletionGracePeriodSeconds": 0}
    out = c.internal_to_v1(internal)["metadata"]
    assert out == {"creationTimestamp": None, "deletionGracePeriodSeconds": 0}


def test_owner_reference_strings_are_always_emitted() -> None:
    internal = c.v1_to_internal({"metadata": {"ownerReferences": [{}]}})
    out = c.internal_to_v1(internal)["metadata"]["ownerReferences"]
    assert out == [{"apiVersion": "", "kind": "", "name": "", "uid": ""}]


def test_unknown_fields_are_dropped_and_names_are_case_sensitive() -> None:
    internal = c.v1_to_internal({"foo": 1, "Note": "x", "metadata": {"bar": 2, "Name": "y"}})
    assert internal == {"metadata": {}, "involvedObject": {}, "source": {}}


def test_field_renames_between_apis() -> None:
    internal = c.v1_to_internal(FULL_V1)
    assert internal["involvedObject"]["kind"] == "Pod"
    assert internal["message"] == "hello"
    assert internal["source"] == {"component": "c", "host": "h"}
    assert internal["firstTimestamp"] == "2024-08-29T14:37:04Z"
    assert internal["lastTimestamp"] == "2024-08-29T14:37:05Z"
    assert internal["count"] == 3
    assert internal["reportingComponent"] == "kube-scheduler"
    assert list(internal)[:5] == ["metadata", "involvedObject", "reason", "message", "source"]
    core = c.internal_to_core_v1(internal)
    assert c.core_v1_to_internal(core) == internal
    assert c.v1_to_internal(c.internal_to_v1(internal)) == internal


def test_empty_bookmark_events() -> None:
    assert dumps(c.empty_v1_event()) == (
        '{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"creationTimestamp":null},'
        '"eventTime":null,"regarding":{},"deprecatedSource":{},"deprecatedFirstTimestamp":null,'
        '"deprecatedLastTimestamp":null}'
    )
    bookmark = c.empty_v1_event(
        {"annotations": {"k8s.io/initial-events-end": "true"}, "resourceVersion": "42"}
    )
    assert dumps(bookmark["metadata"]) == (
        '{"resourceVersion":"42","creationTimestamp":null,'
        '"annotations":{"k8s.io/initial-events-end":"true"}}'
    )
    assert dumps(c.empty_core_event()) == (
        '{"kind":"Event","apiVersion":"v1","metadata":{"creationTimestamp":null},'
        '"involvedObject":{},"source":{},"firstTimestamp":null,"lastTimestamp":null,'
        '"eventTime":null,"reportingComponent":"","reportingInstance":""}'
    )


# --- times ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z"),
        ("2024-01-01T00:00:00.999999999Z", "2024-01-01T00:00:00Z"),
        ("2024-01-01T02:30:00+02:30", "2024-01-01T00:00:00Z"),
        ("2023-12-31T23:00:00-01:00", "2024-01-01T00:00:00Z"),
        ("2024-01-01T00:00:00,5Z", "2024-01-01T00:00:00Z"),
        ("2024-01-01T1:00:00Z", "2024-01-01T01:00:00Z"),
    ],
)
def test_time_is_normalised_to_utc_whole_seconds(given: str, expected: str) -> None:
    assert c.v1_to_internal({"deprecatedFirstTimestamp": given})["firstTimestamp"] == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("2024-01-01T00:00:00.123456Z", "2024-01-01T00:00:00.123456Z"),
        ("2024-01-01T02:00:00.000001+02:00", "2024-01-01T00:00:00.000001Z"),
        ("2024-01-01T00:00:00,100000Z", "2024-01-01T00:00:00.100000Z"),
    ],
)
def test_micro_time_keeps_six_digits(given: str, expected: str) -> None:
    assert c.v1_to_internal({"eventTime": given})["eventTime"] == expected


def test_zero_time_is_unset() -> None:
    internal = c.v1_to_internal(
        {"eventTime": "0001-01-01T00:00:00.000000Z", "deprecatedLastTimestamp": None}
    )
    assert "eventTime" not in internal and "lastTimestamp" not in internal


LAYOUT_MICRO = '"2006-01-02T15:04:05.000000Z07:00"'
LAYOUT = '"2006-01-02T15:04:05Z07:00"'


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            "2024-01-01T00:00:00Z",
            f'parsing time "2024-01-01T00:00:00Z" as {LAYOUT_MICRO}: cannot parse "Z" as ".000000"',
        ),
        (
            "2024-01-01T00:00:00.123Z",
            f'parsing time "2024-01-01T00:00:00.123Z" as {LAYOUT_MICRO}: '
            'cannot parse ".123Z" as ".000000"',
        ),
        (
            "2021-04-27T14:48:16.2408726Z",
            f'parsing time "2021-04-27T14:48:16.2408726Z" as {LAYOUT_MICRO}: '
            'cannot parse "6Z" as "Z07:00"',
        ),
        ("", f'parsing time "" as {LAYOUT_MICRO}: cannot parse "" as "2006"'),
        (
            "2024-01-01 00:00:00.000000Z",
            f'parsing time "2024-01-01 00:00:00.000000Z" as {LAYOUT_MICRO}: '
            'cannot parse " 00:00:00.000000Z" as "T"',
        ),
        (
            "2024-02-30T00:00:00.000000Z",
            'parsing time "2024-02-30T00:00:00.000000Z": day out of range',
        ),
        (
            "2024-01-01T24:00:00.000000Z",
            'parsing time "2024-01-01T24:00:00.000000Z": hour out of range',
        ),
        (
            "2024-01-01T00:00:00.000000Zjunk",
            'parsing time "2024-01-01T00:00:00.000000Zjunk": extra text: "junk"',
        ),
    ],
)
def test_micro_time_is_strict_like_go(given: str, message: str) -> None:
    with pytest.raises(DecodeError) as info:
        c.v1_to_internal({"eventTime": given})
    assert info.value.message == message


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("yesterday", f'parsing time "yesterday" as {LAYOUT}: cannot parse "yesterday" as "2006"'),
        ("2024-13-01T00:00:00Z", 'parsing time "2024-13-01T00:00:00Z": month out of range'),
        (
            "2024-1-01T00:00:00Z",
            f'parsing time "2024-1-01T00:00:00Z" as {LAYOUT}: '
            'cannot parse "1-01T00:00:00Z" as "01"',
        ),
        (
            "2024-01-01T00:00:00",
            f'parsing time "2024-01-01T00:00:00" as {LAYOUT}: cannot parse "" as "Z07:00"',
        ),
        (
            "2024-01-01T00:00:00é",
            f'parsing time "2024-01-01T00:00:00\\xc3\\xa9" as {LAYOUT}: '
            'cannot parse "\\xc3\\xa9" as "Z07:00"',
        ),
    ],
)
def test_time_errors_like_go(given: str, message: str) -> None:
    with pytest.raises(DecodeError) as info:
        c.v1_to_internal({"deprecatedFirstTimestamp": given})
    assert info.value.message == message


# --- type errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"note": 5},
            "json: cannot unmarshal number into Go struct field Event.note of type string",
        ),
        (
            {"type": True},
            "json: cannot unmarshal bool into Go struct field Event.type of type string",
        ),
        (
            {"regarding": "x"},
            "json: cannot unmarshal string into Go struct field Event.regarding of type "
            "v1.ObjectReference",
        ),
        (
            {"regarding": {"uid": []}},
            "json: cannot unmarshal array into Go struct field ObjectReference.regarding.uid of "
            "type types.UID",
        ),
        (
            {"deprecatedCount": "3"},
            "json: cannot unmarshal string into Go struct field Event.deprecatedCount of type "
            "int32",
        ),
        (
            {"deprecatedCount": 1.5},
            "json: cannot unmarshal number 1.5 into Go struct field Event.deprecatedCount of type "
            "int32",
        ),
        (
            {"deprecatedCount": 2**31},
            "json: cannot unmarshal number 2147483648 into Go struct field Event.deprecatedCount "
            "of type int32",
        ),
        (
            {"metadata": {"labels": {"a": 1}}},
            "json: cannot unmarshal number into Go struct field ObjectMeta.metadata.labels of type "
            "string",
        ),
        (
            {"metadata": {"finalizers": "x"}},
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.finalizers of "
            "type []string",
        ),
        (
            {"metadata": {"ownerReferences": [{"controller": "yes"}]}},
            "json: cannot unmarshal string into Go struct field "
            "OwnerReference.metadata.ownerReferences.controller of type bool",
        ),
        (
            {"metadata": {"generation": "1"}},
            "json: cannot unmarshal string into Go struct field ObjectMeta.metadata.generation of "
            "type int64",
        ),
        (
            {"series": {"count": "2"}},
            "json: cannot unmarshal string into Go struct field EventSeries.series.count of type "
            "int32",
        ),
        (
            {"eventTime": 12},
            "json: cannot unmarshal number into Go struct field Event.eventTime of type string",
        ),
        (
            {"metadata": {"creationTimestamp": {}}},
            "json: cannot unmarshal object into Go struct field "
            "ObjectMeta.metadata.creationTimestamp of type string",
        ),
    ],
)
def test_type_errors_read_like_go(body: dict[str, Any], message: str) -> None:
    with pytest.raises(DecodeError) as info:
        c.v1_to_internal(body)
    assert info.value.message == message


def test_first_type_error_wins_but_time_errors_stop_at_once() -> None:
    with pytest.raises(DecodeError) as info:
        c.v1_to_internal({"note": 1, "type": 2})
    assert "Event.note" in info.value.message
    with pytest.raises(DecodeError) as info:
        c.v1_to_internal({"note": 1, "eventTime": "bad"})
    assert info.value.message.startswith('parsing time "bad"')


def test_top_level_must_be_an_object() -> None:
    with pytest.raises(DecodeError) as info:
        c.v1_to_internal([])  # type: ignore[arg-type]
    assert info.value.message == "json: cannot unmarshal array into Go value of type v1.Event"


def test_core_decode_reports_core_names() -> None:
    with pytest.raises(DecodeError) as info:
        c.core_v1_to_internal({"message": 1})
    assert info.value.message == (
        "json: cannot unmarshal number into Go struct field Event.message of type string"
    )


def test_time_helpers() -> None:
    assert format_seconds(1704067200.9) == "2024-01-01T00:00:00Z"
    assert c.now_micro_time(1704067200.5) == "2024-01-01T00:00:00.500000Z"
    assert c.wire_time_to_epoch("2024-01-01T00:00:00.500000Z") == 1704067200.5


# --- round trips ---------------------------------------------------------------------------

_text = st.text(max_size=8)
_nonempty = st.text(min_size=1, max_size=8)
_moments = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 1, 1)).map(
    lambda d: d.replace(tzinfo=dt.UTC)
)
_times = _moments.map(c.format_time)
_micros = _moments.map(c.format_micro_time)


def _sparse(draw: Any, fields: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for key, strategy in fields.items():
        if draw(st.booleans()):
            out[key] = draw(strategy)
    return out


@st.composite
def _refs(draw: Any) -> dict[str, Any]:
    keys = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    return _sparse(draw, dict.fromkeys(keys, _nonempty))


@st.composite
def _metas(draw: Any) -> dict[str, Any]:
    return _sparse(
        draw,
        {
            "name": _nonempty,
            "generateName": _nonempty,
            "namespace": _nonempty,
            "uid": _nonempty,
            "resourceVersion": _nonempty,
            "generation": st.integers(min_value=1, max_value=2**40),
            "creationTimestamp": _times,
            "deletionTimestamp": _times,
            "deletionGracePeriodSeconds": st.integers(min_value=0, max_value=100),
            "labels": st.dictionaries(_text, _text, min_size=1, max_size=3),
            "annotations": st.dictionaries(_text, _text, min_size=1, max_size=3),
            "ownerReferences": st.lists(
                st.fixed_dictionaries(
                    {"apiVersion": _text, "kind": _text, "name": _text, "uid": _text},
                    optional={"controller": st.booleans(), "blockOwnerDeletion": st.booleans()},
                ).map(lambda r: {k: v for k, v in r.items() if v != ""}),
                min_size=1,
                max_size=2,
            ),
            "finalizers": st.lists(_text, min_size=1, max_size=3),
            "managedFields": st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "manager": _nonempty,
                        "operation": st.sampled_from(["Apply", "Update"]),
                        "time": _times,
                        "fieldsType": st.just("FieldsV1"),
                        "fieldsV1": st.dictionaries(_nonempty, st.just({}), max_size=2),
                    },
                ),
                min_size=1,
                max_size=2,
            ),
        },
    )


@st.composite
def internal_events(draw: Any) -> dict[str, Any]:
    body = _sparse(
        draw,
        {
            "reason": _nonempty,
            "message": _nonempty,
            "firstTimestamp": _times,
            "lastTimestamp": _times,
            "count": st.integers(min_value=1, max_value=2**31 - 1),
            "type": _nonempty,
            "eventTime": _micros,
            "series": st.fixed_dictionaries(
                {},
                optional={
                    "count": st.integers(min_value=1, max_value=100),
                    "lastObservedTime": _micros,
                },
            ),
            "action": _nonempty,
            "related": _refs(),
            "reportingComponent": _nonempty,
            "reportingInstance": _nonempty,
        },
    )
    body["metadata"] = draw(_metas())
    body["involvedObject"] = draw(_refs())
    body["source"] = _sparse(draw, {"component": _nonempty, "host": _nonempty})
    return {k: body[k] for k in c.INTERNAL_ORDER if k in body}


@settings(max_examples=150, deadline=None)
@given(internal_events())
def test_round_trip_through_v1(ev: dict[str, Any]) -> None:
    wire = json.loads(json.dumps(c.internal_to_v1(ev)))
    assert c.v1_to_internal(wire) == ev


@settings(max_examples=150, deadline=None)
@given(internal_events())
def test_round_trip_through_core(ev: dict[str, Any]) -> None:
    wire = json.loads(json.dumps(c.internal_to_core_v1(ev)))
    assert c.core_v1_to_internal(wire) == ev
    # and across the two APIs
    assert c.v1_to_internal(c.internal_to_v1(c.core_v1_to_internal(wire))) == ev


@settings(max_examples=100, deadline=None)
@given(internal_events())
def test_encoding_is_stable(ev: dict[str, Any]) -> None:
    once = c.internal_to_v1(ev)
    assert c.internal_to_v1(c.v1_to_internal(once)) == once


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{6})?Z\Z"),
)
def test_canonical_fast_path_agrees_with_go_parser(value: str) -> None:
    micro = "." in value
    try:
        expected: str | None = None
        t = c.parse_go_time(value, micro)
        if t != dt.datetime(1, 1, 1, tzinfo=dt.UTC):
            expected = c.format_micro_time(t) if micro else c.format_time(t)
    except DecodeError as error:
        with pytest.raises(DecodeError) as info:
            c.v1_to_internal({"eventTime" if micro else "deprecatedFirstTimestamp": value})
        assert info.value.message == error.message
        return
    internal = c.v1_to_internal({"eventTime" if micro else "deprecatedFirstTimestamp": value})
    assert internal.get("eventTime" if micro else "firstTimestamp") == expected


def _reference_canonical(value: str) -> str | None:
    """What the canonical-time shortcut must answer: the value when it names a real instant
    ("" for the zero time), else None (left to the general parser)."""
    import datetime as dt

    try:
        parsed = dt.datetime.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None
    zero = parsed == dt.datetime(1, 1, 1) and value[19:] in ("Z", ".000000Z")
    return "" if zero else value


@pytest.mark.parametrize(
    "value",
    [
        "0001-01-01T00:00:00.000000Z",
        "0001-01-01T00:00:00.000001Z",
        "2024-02-29T23:59:59.500000Z",
        "2023-02-29T00:00:00.000000Z",
        "2024-04-31T00:00:00.000000Z",
        "2024-13-01T00:00:00.000000Z",
        "2024-12-31T24:00:00.000000Z",
        "2024-12-31T23:60:00.000000Z",
        "2024-12-31T23:59:60.000000Z",
        "0000-01-01T00:00:00.000000Z",
    ],
)
def test_canonical_micro_time_shortcut(value: str) -> None:
    assert c._canonical_time(value, True) == _reference_canonical(value)
    whole = value[:19] + "Z"
    assert c._canonical_time(whole, False) == _reference_canonical(whole)
