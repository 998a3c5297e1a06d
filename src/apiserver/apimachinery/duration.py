"""Human-readable ages, as kubectl and the server's Table printer show them.

Follows k8s.io/apimachinery ``pkg/util/duration/duration.go`` (``HumanDuration`` and
``ShortHumanDuration``). Go works on an integer count of nanoseconds and truncates toward
zero; so does this module. A clock skew of less than two seconds into the future still
reads ``0s``; more than that reads ``<invalid>``.
"""

from __future__ import annotations

_NS = 1_000_000_000
_MINUTE = 60 * _NS
_HOUR = 60 * _MINUTE


def _nanoseconds(seconds: float) -> int:
    return round(seconds * _NS)


def _trunc_div(a: int, b: int) -> int:
    """Go's integer division (truncates toward zero)."""
    q = abs(a) // b
    return q if a >= 0 else -q


def human_duration(seconds: float) -> str:
    """``HumanDuration``: about two significant figures (``90s``, ``3m5s``, ``5h2m``, ``2d``,
    ``3y20d``)."""
    d = _nanoseconds(seconds)
    secs = _trunc_div(d, _NS)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 60 * 2:
        return f"{secs}s"
    minutes = d // _MINUTE
    if minutes < 10:
        s = (d // _NS) % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = d // _HOUR
    if hours < 8:
        m = (d // _MINUTE) % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y" if dy == 0 else f"{years}y{dy}d"
    return f"{hours // 24 // 365}y"


def short_human_duration(seconds: float) -> str:
    """``ShortHumanDuration``: a single unit (``59s``, ``59m``, ``23h``, ``364d``, ``2y``)."""
    d = _nanoseconds(seconds)
    secs = _trunc_div(d, _NS)
    if secs < -1:
        return "<invalid>"
    if secs < 0:
        return "0s"
    if secs < 60:
        return f"{secs}s"
    minutes = d // _MINUTE
    if minutes < 60:
        return f"{minutes}m"
    hours = d // _HOUR
    if hours < 24:
        return f"{hours}h"
    if hours < 24 * 365:
        return f"{hours // 24}d"
    return f"{int(d / _HOUR / 24 / 365)}y"
