"""Go's ``time.Time.Format`` with the RFC 3339 layouts, and ``time.Time.String``.

``time.RFC3339`` (``2006-01-02T15:04:05Z07:00``) prints whole seconds, truncated, and ``Z`` for
UTC; metav1's ``RFC3339Micro`` (``2006-01-02T15:04:05.000000Z07:00``, k8s.io/apimachinery
pkg/apis/meta/v1/micro_time.go) always six fraction digits. ``String`` (``%v`` of a time) is
``2006-01-02 15:04:05.999999999 -0700 MST``: fraction digits only when non-zero, trailing zeros
trimmed (golang.org/src/time/format.go).
"""

from __future__ import annotations

from datetime import UTC, datetime


def to_utc(dt: datetime) -> datetime:
    """``t.UTC()``; a naive datetime is taken as UTC already."""
    if dt.tzinfo is None:
        return dt.replace(tzinfo=UTC)
    return dt.astimezone(UTC)


def format_rfc3339(dt: datetime) -> str:
    """``t.UTC().Format(time.RFC3339)``: whole seconds (truncated), ``Z``."""
    u = to_utc(dt)
    return f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}Z"


def format_rfc3339_micro(dt: datetime) -> str:
    """``t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")`` (metav1's ``RFC3339Micro``):
    six fraction digits, ``Z``."""
    u = to_utc(dt)
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
        f".{u.microsecond:06d}Z"
    )


#: Go's zero ``time.Time`` (0001-01-01 UTC), and in Unix seconds.
ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)
ZERO_TIME_SECONDS = -62135596800
_UTC_SUFFIX = " +0000 UTC"


def format_time_string(when: datetime | None) -> str:
    """``t.UTC().String()`` (``%v`` of a time): ``2006-01-02 15:04:05.5 +0000 UTC``, the
    fraction only when non-zero and without trailing zeros; None is Go's zero time."""
    u = to_utc(when) if when is not None else ZERO_TIME
    text = f"{u.year:04d}-{u.month:02d}-{u.day:02d} {u.hour:02d}:{u.minute:02d}:{u.second:02d}"
    if u.microsecond:
        text += "." + f"{u.microsecond:06d}".rstrip("0")
    return text + _UTC_SUFFIX


def format_unix_time_string(seconds: float) -> str:
    """:func:`format_time_string` of a Unix time given in seconds, its fraction kept to the
    nanosecond (``time.Unix(s, ns).UTC().String()``); before year 1, Go's zero time."""
    whole = datetime.fromtimestamp(int(seconds), UTC) if seconds > ZERO_TIME_SECONDS else None
    text = format_time_string(whole)[: -len(_UTC_SUFFIX)]
    fraction = seconds - int(seconds)
    if fraction > 0:
        text += f"{fraction:.9f}"[1:].rstrip("0")
    return text + _UTC_SUFFIX


__all__ = [
    "ZERO_TIME",
    "ZERO_TIME_SECONDS",
    "format_rfc3339",
    "format_rfc3339_micro",
    "format_time_string",
    "format_unix_time_string",
    "to_utc",
]
