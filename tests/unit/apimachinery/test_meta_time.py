"""metav1.Time / MicroTime parsing and printing (Go's time.Parse and Format)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.apimachinery.meta_time import (
    TimeParseError,
    format_micro_time,
    format_time,
    now_micro_time,
    now_time,
    parse_micro_time,
    parse_time,
    truncate_seconds,
)

T = '"2006-01-02T15:04:05Z07:00"'
M = '"2006-01-02T15:04:05.000000Z07:00"'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2024-01-02T03:04:05Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05+01:30", datetime(2024, 1, 2, 1, 34, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05-00:00", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05.5Z", datetime(2024, 1, 2, 3, 4, 5, 500000, tzinfo=UTC)),
        ("2024-01-02T03:04:05,25Z", datetime(2024, 1, 2, 3, 4, 5, 250000, tzinfo=UTC)),
        ("2024-01-02T03:04:05.123456789Z", datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)),
        ("2024-01-02T3:04:05Z", datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
        ("2024-01-02T03:04:05+24:00", datetime(2024, 1, 1, 3, 4, 5, tzinfo=UTC)),
        ("2024-02-29T00:00:00Z", datetime(2024, 2, 29, tzinfo=UTC)),
    ],
)
def test_parse_time_ok(text: str, expected: datetime) -> None:
    assert parse_time(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x", f'parsing time "x" as {T}: cannot parse "x" as "2006"'),
        ("", f'parsing time "" as {T}: cannot parse "" as "2006"'),
        ("2024", f'parsing time "2024" as {T}: cannot parse "" as "-"'),
        (
            "2024-1-02T03:04:05Z",
            f'parsing time "2024-1-02T03:04:05Z" as {T}: cannot parse "1-02T03:04:05Z" as "01"',
        ),
        ("2024-13-02T03:04:05Z", 'parsing time "2024-13-02T03:04:05Z": month out of range'),
        ("2024-02-30T03:04:05Z", 'parsing time "2024-02-30T03:04:05Z": day out of range'),
        ("2023-02-29T03:04:05Z", 'parsing time "2023-02-29T03:04:05Z": day out of range'),
        (
            "2024-01-02 03:04:05Z",
            f'parsing time "2024-01-02 03:04:05Z" as {T}: cannot parse " 03:04:05Z" as "T"',
        ),
        ("2024-01-02T24:04:05Z", 'parsing time "2024-01-02T24:04:05Z": hour out of range'),
        ("2024-01-02T03:60:05Z", 'parsing time "2024-01-02T03:60:05Z": minute out of range'),
        ("2024-01-02T03:04:60Z", 'parsing time "2024-01-02T03:04:60Z": second out of range'),
        (
            "2024-01-02T03:04:05",
            f'parsing time "2024-01-02T03:04:05" as {T}: cannot parse "" as "Z07:00"',
        ),
        (
            "2024-01-02T03:04:05z",
            f'parsing time "2024-01-02T03:04:05z" as {T}: cannot parse "z" as "Z07:00"',
        ),
        ("2024-01-02T03:04:05Zx", 'parsing time "2024-01-02T03:04:05Zx": extra text: "x"'),
        (
            "2024-01-02T03:04:05+25:00",
            'parsing time "2024-01-02T03:04:05+25:00": time zone offset hour out of range',
        ),
        (
            "2024-01-02T03:04:05+01:61",
            'parsing time "2024-01-02T03:04:05+01:61": time zone offset minute out of range',
        ),
        (
            "2024-01-02T03:04:05*01:00",
            f'parsing time "2024-01-02T03:04:05*01:00" as {T}: cannot parse "*01:00" as "Z07:00"',
        ),
        (
            "2024-01-02T03:04:05.Z",
            f'parsing time "2024-01-02T03:04:05.Z" as {T}: cannot parse ".Z" as "Z07:00"',
        ),
        ("é", f'parsing time "\\xc3\\xa9" as {T}: cannot parse "\\xc3\\xa9" as "2006"'),
        ('a"b', f'parsing time "a\\"b" as {T}: cannot parse "a\\"b" as "2006"'),
    ],
)
def test_parse_time_errors(text: str, message: str) -> None:
    with pytest.raises(TimeParseError) as info:
        parse_time(text)
    assert str(info.value) == message


def test_parse_micro_time() -> None:
    assert parse_micro_time("2023-01-01T10:00:23.123456Z") == datetime(
        2023, 1, 1, 10, 0, 23, 123456, tzinfo=UTC
    )
    assert parse_micro_time("2023-01-01T10:00:23,000001+02:00") == datetime(
        2023, 1, 1, 8, 0, 23, 1, tzinfo=UTC
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "2023-01-01T10:00:23Z",
            f'parsing time "2023-01-01T10:00:23Z" as {M}: cannot parse "Z" as ".000000"',
        ),
        (
            "2023-01-01T10:00:23.123Z",
            f'parsing time "2023-01-01T10:00:23.123Z" as {M}: cannot parse ".123Z" as ".000000"',
        ),
        (
            "2023-01-01T10:00:23.12345aZ",
            f'parsing time "2023-01-01T10:00:23.12345aZ" as {M}: '
            'cannot parse ".12345aZ" as ".000000"',
        ),
        (
            "2023-01-01T10:00:23.1234567Z",
            f'parsing time "2023-01-01T10:00:23.1234567Z" as {M}: cannot parse "7Z" as "Z07:00"',
        ),
        (
            "2023-01-01T10:00:23.-12345Z",
            'parsing time "2023-01-01T10:00:23.-12345Z": fractional second out of range',
        ),
    ],
)
def test_parse_micro_time_errors(text: str, message: str) -> None:
    with pytest.raises(TimeParseError) as info:
        parse_micro_time(text)
    assert str(info.value) == message


def test_format() -> None:
    dt = datetime(2024, 8, 29, 14, 37, 4, 999999, tzinfo=timezone(timedelta(hours=2)))
    assert format_time(dt) == "2024-08-29T12:37:04Z"
    assert format_micro_time(dt) == "2024-08-29T12:37:04.999999Z"
    naive = datetime(2024, 1, 1, 0, 0, 0, 5)
    assert format_micro_time(naive) == "2024-01-01T00:00:00.000005Z"
    assert format_time(naive) == "2024-01-01T00:00:00Z"


def test_now_helpers_take_a_clock() -> None:
    assert now_time(1_700_000_000.75) == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    assert now_micro_time(1_700_000_000.5) == datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=UTC)
    assert now_time().tzinfo is UTC
    assert truncate_seconds(datetime(2024, 1, 1, 0, 0, 1, 7, tzinfo=UTC)).microsecond == 0


_DATES = st.datetimes(
    min_value=datetime(1000, 1, 2), max_value=datetime(9998, 12, 30), timezones=st.just(UTC)
)


@given(_DATES)
def test_micro_round_trip(dt: datetime) -> None:
    assert parse_micro_time(format_micro_time(dt)) == dt


@given(_DATES)
def test_time_round_trip(dt: datetime) -> None:
    assert parse_time(format_time(dt)) == dt.replace(microsecond=0)


def test_format_seconds_truncates_a_clock_reading_to_whole_seconds() -> None:
    from apiserver.apimachinery.meta_time import format_seconds

    assert format_seconds(1_700_000_000.999) == "2023-11-14T22:13:20Z"
    assert format_seconds(0) == "1970-01-01T00:00:00Z"


@settings(deadline=None)
@given(st.lists(st.floats(0, 4e9), max_size=40))
def test_format_seconds_kept_texts_match_fresh_ones(readings: list[float]) -> None:
    from apiserver.apimachinery.meta_time import format_seconds

    for seconds in readings:
        fresh = format_time(datetime.fromtimestamp(int(seconds), UTC))
        assert format_seconds(seconds) == fresh
