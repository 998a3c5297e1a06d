"""HumanDuration / ShortHumanDuration boundaries (pkg/util/duration/duration.go)."""

from __future__ import annotations

import pytest

from apiserver.apimachinery.duration import human_duration, short_human_duration

M = 60
H = 60 * M
D = 24 * H
Y = 365 * D


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-2, "<invalid>"),
        (-1.999, "0s"),
        (-1, "0s"),
        (-0.5, "0s"),
        (0, "0s"),
        (0.999, "0s"),
        (1, "1s"),
        (2 * M - 0.001, "119s"),
        (2 * M, "2m"),
        (2 * M + 5, "2m5s"),
        (10 * M - 1, "9m59s"),
        (10 * M, "10m"),
        (3 * H - 1, "179m"),
        (3 * H, "3h"),
        (3 * H + 30 * M, "3h30m"),
        (8 * H - 1, "7h59m"),
        (8 * H, "8h"),
        (48 * H - 1, "47h"),
        (48 * H, "2d"),
        (2 * D + 5 * H, "2d5h"),
        (8 * D - 1, "7d23h"),
        (8 * D, "8d"),
        (2 * Y - 1, "729d"),
        (2 * Y, "2y"),
        (2 * Y + 20 * D, "2y20d"),
        (8 * Y - 1, "7y364d"),
        (8 * Y, "8y"),
        (100 * Y, "100y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-2, "<invalid>"),
        (-1, "0s"),
        (0, "0s"),
        (59, "59s"),
        (60, "1m"),
        (H - 1, "59m"),
        (H, "1h"),
        (D - 1, "23h"),
        (D, "1d"),
        (Y - 1, "364d"),
        (Y, "1y"),
        (3 * Y + 100 * D, "3y"),
    ],
)
def test_short_human_duration(seconds: float, text: str) -> None:
    assert short_human_duration(seconds) == text
