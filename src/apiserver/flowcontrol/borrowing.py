"""Borrowing of seats between priority levels (kube 1.29+): the pieces.

Follows k8s.io/apiserver/pkg/util/flowcontrol/apf_controller.go (``seatDemandStats``) and
conc_alloc.go (``computeConcurrencyAllocation``); the round that uses them is
``PriorityAndFairness.update_borrowing`` (``updateBorrowingLocked``):

- every 10 s each Limited level's seat demand (seats in use plus seats asked for by waiting
  requests) over the period is summarised as its time-weighted average, standard deviation
  and high watermark (the level's queue set integrates it as it changes);
- the *envelope* is average + deviation; the *smoothed* demand is the larger of the envelope
  and ``0.977 * previous smoothed + 0.023 * envelope`` (an EWMA that only decays slowly);
- the seats are shared out as ``clamp(fairFrac * target, lower, upper)`` per level with the
  one ``fairFrac`` that makes the allocations add up to the required sum.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import attrs

#: apf_controller.go: ``borrowingAdjustmentPeriod``.
PERIOD = 10.0
#: apf_controller.go: ``seatDemandSmoothingCoefficient``.
SMOOTHING = 0.977
#: conc_alloc.go: targets below this count as this (a level that asked for nothing still
#: gets a share of what nobody else wants).
MIN_TARGET = 0.001


@attrs.define
class SeatDemand:
    """``seatDemandStats``: the last period's figures and the smoothed envelope."""

    average: float = 0.0
    deviation: float = 0.0
    high_watermark: int = 0
    smoothed: float = 0.0

    def update(self, average: float, deviation: float, high: int, duration: float) -> None:
        self.high_watermark = high
        if duration <= 0:
            return
        self.average = average
        self.deviation = deviation
        envelope = average + deviation
        self.smoothed = max(envelope, SMOOTHING * self.smoothed + (1 - SMOOTHING) * envelope)


@attrs.frozen
class Claim:
    """One level's ``allocProblemItem``."""

    lower: float
    upper: float
    target: float


def _total(claims: Sequence[Claim], fair: float) -> float:
    return sum(min(max(fair * c.target, c.lower), c.upper) for c in claims)


def allocate_concurrency(required: int, claims: Sequence[Claim]) -> tuple[list[float], float]:
    """(allocations, fairFrac): ``clamp(fairFrac * target, lower, upper)`` per claim, adding
    up to ``required`` (``computeConcurrencyAllocation``). Raises ValueError when the bounds
    cannot add up to it."""
    if not claims:
        return [], 0.0
    lower = sum(c.lower for c in claims)
    upper = sum(c.upper for c in claims)
    if lower > required:
        raise ValueError(f"sum of lower bounds {lower} is more than {required}")
    if upper < required:
        raise ValueError(f"sum of upper bounds {upper} is less than {required}")
    claims = [Claim(c.lower, c.upper, max(c.target, MIN_TARGET)) for c in claims]
    # The total is continuous and non-decreasing in fairFrac: each claim's allocation moves
    # linearly between two breakpoints (lower/target and upper/target). Find the segment
    # that holds ``required`` and solve it exactly.
    points = sorted(
        {0.0} | {c.lower / c.target for c in claims} | {c.upper / c.target for c in claims}
    )
    fair = points[-1]
    for low, high in itertools.pairwise(points):
        at_high = _total(claims, high)
        if at_high >= required:
            at_low = _total(claims, low)
            if at_high == at_low:
                fair = high
            else:
                fair = low + (required - at_low) / (at_high - at_low) * (high - low)
            break
    return [min(max(fair * c.target, c.lower), c.upper) for c in claims], fair
