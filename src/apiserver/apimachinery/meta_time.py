"""``metav1.Time`` and ``metav1.MicroTime``: parsing and printing as the API server does.

Follows k8s.io/apimachinery ``pkg/apis/meta/v1/time.go`` and ``micro_time.go``:

- Time is read with ``time.Parse(time.RFC3339, s)`` and written as
  ``t.UTC().Format(time.RFC3339)`` -- whole seconds (truncated), ``Z``.
- MicroTime is read with layout ``2006-01-02T15:04:05.000000Z07:00`` -- exactly six fraction
  digits, so ``...:23Z`` fails (kubernetes issue #94748) -- and written UTC with six digits.

``time.Parse`` is reimplemented for these two layouts (Go's general layout parser, which is
what decides both acceptance and the error text): RFC3339 also takes any number of fraction
digits after ``.`` or ``,``, a one-digit hour, and zone offsets up to ``+24:60``. Error texts
are Go's ``*time.ParseError`` messages, e.g. ``parsing time "x" as
"2006-01-02T15:04:05Z07:00": cannot parse "x" as "2006"``.

Results are timezone-aware UTC datetimes truncated to microseconds (Go keeps nanoseconds;
neither format prints below microseconds). Year 0 and other dates Python cannot hold raise
:class:`TimeParseError`.
"""

from __future__ import annotations

import functools
import time as _time
from datetime import UTC, datetime, timedelta

from apiserver.gocompat.quote import time_quote
from apiserver.gocompat.timefmt import format_rfc3339, format_rfc3339_micro, to_utc

RFC3339 = "2006-01-02T15:04:05Z07:00"
RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00"

#: ``metav1.Time`` is written ``t.UTC().Format(time.RFC3339)``: whole seconds (truncated), ``Z``.
format_time = format_rfc3339
#: ``metav1.MicroTime`` is written ``t.UTC().Format(RFC3339Micro)``: six fraction digits, ``Z``.
format_micro_time = format_rfc3339_micro

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class TimeParseError(ValueError):
    """A time Go's ``time.Parse`` refuses; ``str()`` is Go's error text."""


def _is_digit(value: bytes, i: int) -> bool:
    return i < len(value) and 0x30 <= value[i] <= 0x39


def _getnum(value: bytes, fixed: bool) -> tuple[int, bytes] | None:
    if not _is_digit(value, 0):
        return None
    if not _is_digit(value, 1):
        if fixed:
            return None
        return value[0] - 0x30, value[1:]
    return (value[0] - 0x30) * 10 + (value[1] - 0x30), value[2:]


def _atoi(value: bytes) -> int | None:
    """Go's time-package ``atoi``: optional sign, then at least one digit, nothing else."""
    neg = False
    if value[:1] in (b"-", b"+"):
        neg = value[:1] == b"-"
        value = value[1:]
    if not value or not all(0x30 <= b <= 0x39 for b in value):
        return None
    number = int(value)
    return -number if neg else number


def _days_in(month: int, year: int) -> int:
    if month == 2:
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        return 29 if leap else 28
    return 30 if month in (4, 6, 9, 11) else 31


class _Failure(Exception):
    def __init__(self, layout_elem: str, value_elem: bytes, message: str = "") -> None:
        super().__init__(message)
        self.layout_elem = layout_elem
        self.value_elem = value_elem
        self.message = message


def _parse(layout: str, text: str) -> datetime:
    """Go's ``time.parse`` specialised to RFC3339 and RFC3339Micro."""
    micro = layout == RFC3339_MICRO
    raw = text.encode("utf-8", errors="surrogateescape")
    try:
        return _parse_bytes(raw, micro)
    except _Failure as failure:
        value_q = time_quote(raw)
        if failure.message:
            raise TimeParseError(f"parsing time {value_q}{failure.message}") from None
        layout_q = time_quote(layout.encode())
        elem_q = time_quote(failure.layout_elem.encode())
        raise TimeParseError(
            f"parsing time {value_q} as {layout_q}: cannot parse "
            f"{time_quote(failure.value_elem)} as {elem_q}"
        ) from None


def _skip(value: bytes, literal: str) -> bytes:
    if not value or value[0] != ord(literal):
        raise _Failure(literal, value)
    return value[1:]


def _parse_nanoseconds(value: bytes, nbytes: int) -> tuple[int, str]:
    """``parseNanoseconds``: (nanoseconds, range-error name or "")."""
    if value[0] not in b".,":
        raise ValueError
    if nbytes > 10:
        value = value[:10]
        nbytes = 10
    ns = _atoi(value[1:nbytes])
    if ns is None:
        raise ValueError
    if ns < 0:
        return 0, "fractional second"
    return ns * 10 ** (10 - nbytes), ""


def _parse_bytes(value: bytes, micro: bool) -> datetime:
    # 2006: four digits.
    hold = value
    if len(value) < 4 or not _is_digit(value, 0):
        raise _Failure("2006", hold)
    year = _atoi(value[:4])
    if year is None:
        raise _Failure("2006", hold)
    value = _skip(value[4:], "-")
    # 01: two-digit month.
    hold = value
    got = _getnum(value, True)
    if got is None:
        raise _Failure("01", hold)
    month, value = got
    if not 0 < month <= 12:
        raise _Failure("01", value, ": month out of range")
    value = _skip(value, "-")
    hold = value
    got = _getnum(value, True)
    if got is None:
        raise _Failure("02", hold)
    day, value = got
    value = _skip(value, "T")
    # 15: one or two digits.
    hold = value
    got = _getnum(value, False)
    if got is None:
        raise _Failure("15", hold)
    hour, value = got
    if not 0 <= hour < 24:
        raise _Failure("15", value, ": hour out of range")
    value = _skip(value, ":")
    hold = value
    got = _getnum(value, True)
    if got is None:
        raise _Failure("04", hold)
    minute, value = got
    if not 0 <= minute < 60:
        raise _Failure("04", value, ": minute out of range")
    value = _skip(value, ":")
    hold = value
    got = _getnum(value, True)
    if got is None:
        raise _Failure("05", hold)
    second, value = got
    if not 0 <= second < 60:
        raise _Failure("05", value, ": second out of range")
    nsec = 0
    if micro:
        # .000000: exactly seven bytes, a '.' or ',' then six digits.
        hold = value
        if len(value) < 7:
            raise _Failure(".000000", hold)
        try:
            nsec, range_err = _parse_nanoseconds(value, 7)
        except ValueError:
            raise _Failure(".000000", hold) from None
        value = value[7:]
        if range_err:
            raise _Failure(".000000", value, f": {range_err} out of range")
    elif len(value) >= 2 and value[0] in b".," and _is_digit(value, 1):
        # A fraction the layout does not name is still taken after the seconds.
        n = 2
        while n < len(value) and _is_digit(value, n):
            n += 1
        try:
            nsec, range_err = _parse_nanoseconds(value, n)
        except ValueError:
            raise _Failure("05", hold) from None
        value = value[n:]
        if range_err:
            raise _Failure("05", value, f": {range_err} out of range")
    # Z07:00
    hold = value
    offset = 0
    if value[:1] == b"Z":
        value = value[1:]
    else:
        if len(value) < 6 or value[3] != ord(":"):
            raise _Failure("Z07:00", hold)
        sign, hours, minutes, value = value[:1], value[1:3], value[4:6], value[6:]
        bad = False
        hr = mm = 0
        got = _getnum(hours, True)
        if got is None:
            bad = True
        else:
            hr = got[0]
            got = _getnum(minutes, True)
            if got is None:
                bad = True
            else:
                mm = got[0]
        # Go checks ranges (">" on purpose: offsets of 24h/60m are accepted) before the
        # sign, and a range error wins over a syntax error.
        range_err = ""
        if hr > 24:
            range_err = "time zone offset hour"
        if mm > 60:
            range_err = "time zone offset minute"
        if sign not in (b"+", b"-"):
            bad = True
        if range_err:
            raise _Failure("Z07:00", value, f": {range_err} out of range")
        if bad:
            raise _Failure("Z07:00", hold)
        offset = (hr * 60 + mm) * 60
        if sign == b"-":
            offset = -offset
    if value:
        raise _Failure("", value, ": extra text: " + time_quote(value))
    if day < 1 or day > _days_in(month, year):
        raise _Failure("", value, ": day out of range")
    try:
        local = datetime(year, month, day, hour, minute, second, nsec // 1000, tzinfo=UTC)
        return local - timedelta(seconds=offset)
    except (ValueError, OverflowError):
        raise _Failure("", value, ": year out of range") from None


def parse_time(text: str) -> datetime:
    """``metav1.Time`` from its JSON string (``time.Parse(time.RFC3339, s)``), UTC."""
    return _parse(RFC3339, text)


def parse_micro_time(text: str) -> datetime:
    """``metav1.MicroTime`` from its JSON string: exactly six fraction digits required."""
    return _parse(RFC3339_MICRO, text)


def format_seconds(seconds: float) -> str:
    """A clock reading (Unix seconds) as a ``metav1.Time`` wire string: whole seconds, UTC
    (what ``metav1.Now()`` serializes to, e.g. a creationTimestamp)."""
    return _format_whole_seconds(int(seconds))


@functools.lru_cache(maxsize=16)
def _format_whole_seconds(seconds: int) -> str:
    # Kept: every write within the same second stamps the same text (twice per create).
    return format_time(datetime.fromtimestamp(seconds, UTC))


def _from_seconds(seconds: float | None) -> datetime:
    value = _time.time() if seconds is None else seconds
    return _EPOCH + timedelta(microseconds=round(value * 1_000_000))


def now_time(seconds: float | None = None) -> datetime:
    """``metav1.Now()`` as it will be stored: UTC, truncated to the second.

    ``seconds`` is a clock reading (``reactor.seconds()``); None reads the wall clock.
    """
    return _from_seconds(seconds).replace(microsecond=0)


def now_micro_time(seconds: float | None = None) -> datetime:
    """``metav1.NowMicro()`` as it will be stored: UTC, microsecond precision."""
    return _from_seconds(seconds)


def truncate_seconds(dt: datetime) -> datetime:
    """The value a Time keeps after a round trip through JSON."""
    return to_utc(dt).replace(microsecond=0)


__all__ = [
    "RFC3339",
    "RFC3339_MICRO",
    "TimeParseError",
    "format_micro_time",
    "format_seconds",
    "format_time",
    "now_micro_time",
    "now_time",
    "parse_micro_time",
    "parse_time",
    "truncate_seconds",
]
