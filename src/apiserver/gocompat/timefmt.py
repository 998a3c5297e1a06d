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


#: Go's zero ``time.Time`` (0001-01-01 UTC) in Unix seconds.
ZERO_TIME_SECONDS = -62135596800


def format_go_time_string(seconds: float) -> str:
    """``time.Unix(seconds).UTC().String()``: ``2006-01-02 15:04:05.5 +0000 UTC``; a time
    before year 1 prints as Go's zero time."""
    when = datetime(1, 1, 1, tzinfo=UTC)
    if seconds > ZERO_TIME_SECONDS:
        when = datetime.fromtimestamp(int(seconds), UTC)
    text = when.strftime("%Y-%m-%d %H:%M:%S")
    fraction = seconds - int(seconds)
    if fraction > 0:
        text += f"{fraction:.9f}"[1:].rstrip("0")
    return text + " +0000 UTC"


__all__ = [
    "ZERO_TIME_SECONDS",
    "format_go_time_string",
    "format_rfc3339",
    "format_rfc3339_micro",
    "to_utc",
]
