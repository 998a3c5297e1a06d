"""Go's ``time.ParseDuration`` and ``time.Duration.String`` (golang.org/src/time/format.go,
time.go): ``1h2m3.5s``, ``300ms``, ``-1.5h``, ``0``; printed back as ``1h2m3.5s``, ``300ms``,
``1.5µs``, ``0s``.

Flags (``--shutdown-delay-duration``...), configuration files (authorization webhooks) and
messages use them; errors are Go's texts, with the input quoted by the time package's own
``quote`` (``\\xNN`` for non-ASCII bytes).
"""

from __future__ import annotations

import decimal
import re

from apiserver.gocompat.errors import GoValueError
from apiserver.gocompat.quote import time_quote

_NANOS_PER_UNIT = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}


_MAX_NANOS = (1 << 63) - 1


def parse_go_duration_ns(text: str) -> int:
    """``time.ParseDuration`` in integer nanoseconds: ``1h2m3.5s``, ``300ms``, ``-1.5h``, ``0``."""
    invalid = GoValueError("time: invalid duration " + time_quote(text))
    rest = text
    negative = False
    if rest[:1] in ("-", "+"):
        negative = rest[0] == "-"
        rest = rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = decimal.Decimal(0)
    while rest:
        match = re.match(r"([0-9]*)(?:\.([0-9]*))?", rest)
        assert match is not None  # the pattern can match the empty string
        whole, frac = match.group(1), match.group(2)
        if not whole and not frac:
            raise invalid
        rest = rest[match.end() :]
        unit_end = 0
        while unit_end < len(rest) and rest[unit_end] not in ".0123456789":
            unit_end += 1
        if unit_end == 0:
            raise GoValueError("time: missing unit in duration " + time_quote(text))
        unit, rest = rest[:unit_end], rest[unit_end:]
        if unit not in _NANOS_PER_UNIT:
            raise GoValueError(
                "time: unknown unit " + time_quote(unit) + " in duration " + time_quote(text)
            )
        number = decimal.Decimal(f"{whole or '0'}.{frac or '0'}")
        total += number * _NANOS_PER_UNIT[unit]
        if total > _MAX_NANOS + (1 if negative else 0):
            raise invalid
    nanos = int(total)  # Go truncates the fractional nanoseconds
    return -nanos if negative else nanos


def parse_go_duration(text: str) -> float:
    """``time.ParseDuration`` as float seconds (the value type our config uses)."""
    return parse_go_duration_ns(text) / 1e9


def _fmt_frac(value: int, precision: int) -> tuple[str, int]:
    digits = ""
    printed = False
    for _ in range(precision):
        digit = value % 10
        printed = printed or digit != 0
        if printed:
            digits = str(digit) + digits
        value //= 10
    return ("." + digits if printed else ""), value


def format_go_duration_ns(nanos: int) -> str:
    """``time.Duration.String``: ``1h0m0s``, ``2s``, ``300ms``, ``1.5µs``, ``0s``, ``-1s``."""
    if nanos == 0:
        return "0s"
    negative = nanos < 0
    value = -nanos if negative else nanos
    if value < 1_000_000_000:
        if value < 1_000:
            precision, unit = 0, "ns"
        elif value < 1_000_000:
            precision, unit = 3, "\u00b5s"
        else:
            precision, unit = 6, "ms"
        frac, value = _fmt_frac(value, precision)
        text = f"{value}{frac}{unit}"
    else:
        frac, value = _fmt_frac(value, 9)
        text = f"{value % 60}{frac}s"
        value //= 60
        if value > 0:
            text = f"{value % 60}m{text}"
            value //= 60
            if value > 0:
                text = f"{value}h{text}"
    return "-" + text if negative else text


def format_go_duration(seconds: float) -> str:
    """Float seconds printed as Go prints a ``time.Duration``."""
    return format_go_duration_ns(round(seconds * 1e9))


__all__ = [
    "format_go_duration",
    "format_go_duration_ns",
    "parse_go_duration",
    "parse_go_duration_ns",
]
