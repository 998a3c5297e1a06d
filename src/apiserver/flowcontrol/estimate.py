"""How many seats a request takes: k8s.io/apiserver/pkg/util/flowcontrol/request/width.go.

Lists are estimated as ``list_work_estimator.go`` does with the object count (kube 1.32's
``seatsBasedOnObjectCount``): the objects the list must touch, one seat per 100, at least one
seat and at most the level's maximum (``max_seats``, itself at most 10). Writes
(create, update, patch, delete) take one seat while they run and, when at least ten watches
will hear of them, extra *final* seats for the fan-out (``mutating_work_estimator.go``): one
per ten watchers, at most the level's maximum, held for 5 ms per uncapped seat spread over
the capped ones after the request finishes. The watchers are counted as kube's
``watch_tracker.go`` counts them: every watch that passes priority and fairness registers
its (group, resource, namespace, name) until it ends (:class:`WatchTracker`). Other requests
take one seat.
"""

from __future__ import annotations

import math
from collections.abc import Callable

OBJECTS_PER_SEAT = 100.0
MINIMUM_SEATS = 1
MAXIMUM_LIST_SEATS = 10
#: mutating_work_estimator.go: ``watchesPerSeat`` and ``eventAdditionalDuration``.
WATCHES_PER_SEAT = 10
EVENT_ADDITIONAL_DURATION = 0.005
#: The verbs the mutating estimator sees (width.go's ``EstimateWork`` switch).
MUTATING_VERBS = frozenset({"create", "update", "patch", "delete"})


def _first(query: dict[bytes, list[bytes]], key: bytes) -> bytes:
    values = query.get(key)
    return values[0] if values else b""


def list_from_storage(query: dict[bytes, list[bytes]]) -> bool:
    """``shouldListFromStorage`` (consistent lists are served from the cache, kube 1.31+):
    continuations, paginated lists other than at ``resourceVersion=0``, and an exact
    ``resourceVersionMatch`` go to storage."""
    if _first(query, b"continue"):
        return True
    rv = _first(query, b"resourceVersion")
    limit = _first(query, b"limit")
    if limit and rv != b"0":
        try:
            if int(limit) > 0:
                return True
        except ValueError:
            pass
    match = _first(query, b"resourceVersionMatch")
    return bool(match) and match != b"NotOlderThan"


def list_seats(
    query: dict[bytes, list[bytes]],
    name: str,
    count: int | None,
    max_seats: int,
) -> int:
    """The initial seats of a list (``listWorkEstimator.estimate``). ``count`` is the stored
    object count of the resource, None when unknown (then the minimum, as for
    ``ObjectCountNotFoundErr``)."""
    if max_seats <= 0 or max_seats > MAXIMUM_LIST_SEATS:
        max_seats = MAXIMUM_LIST_SEATS
    if count is None:
        return MINIMUM_SEATS
    limit = count
    raw_limit = _first(query, b"limit")
    if raw_limit:
        try:
            asked = int(raw_limit)
        except ValueError:
            asked = 0
        if 0 < asked < count:
            limit = asked
    if name:
        objects = 1
    elif not list_from_storage(query):
        objects = count
    elif _first(query, b"fieldSelector") or _first(query, b"labelSelector"):
        objects = count + limit
    else:
        objects = 2 * limit
    seats = math.ceil(objects / OBJECTS_PER_SEAT)
    return max(MINIMUM_SEATS, min(seats, max_seats))


ObjectCounts = Callable[[str], "int | None"]

WatchKey = tuple[str, str, str, str]


class WatchTracker:
    """The watches in progress per (API group, resource, namespace, name): kube's
    ``watchTracker`` (k8s.io/apiserver/pkg/util/flowcontrol/watch_tracker.go)."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[WatchKey, int] = {}

    def register(self, group: str, resource: str, namespace: str, name: str) -> WatchKey:
        key = (group, resource, namespace, name)
        self.counts[key] = self.counts.get(key, 0) + 1
        return key

    def forget(self, key: WatchKey) -> None:
        left = self.counts.get(key, 0) - 1
        if left > 0:
            self.counts[key] = left
        else:
            self.counts.pop(key, None)

    def interested(self, group: str, resource: str, namespace: str, name: str) -> int:
        """``GetInterestedWatchCount``: watches of every object of the resource, of its
        namespace, and of this object."""
        counts = self.counts
        if not counts:
            return 0
        total = counts.get((group, resource, "", ""), 0)
        if namespace:
            total += counts.get((group, resource, namespace, ""), 0)
        if name:
            total += counts.get((group, resource, namespace, name), 0)
        return total


def mutating_seats(watchers: int, max_seats: int) -> tuple[int, float]:
    """(final seats, additional latency in seconds) of a write that ``watchers`` watches
    hear of (``mutatingWorkEstimator.estimate``); (0, 0.0) under ten watchers."""
    if watchers < WATCHES_PER_SEAT:
        return 0, 0.0
    if max_seats <= 0 or max_seats > MAXIMUM_LIST_SEATS:
        max_seats = MAXIMUM_LIST_SEATS
    final = math.ceil(watchers / WATCHES_PER_SEAT)
    work = final * EVENT_ADDITIONAL_DURATION
    if final > max_seats:
        final = max_seats
    return final, work / final
