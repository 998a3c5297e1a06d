"""How many seats a request takes: k8s.io/apiserver/pkg/util/flowcontrol/request/width.go.

Lists are estimated as ``list_work_estimator.go`` does with the object count (kube 1.32's
``seatsBasedOnObjectCount``): the objects the list must touch, one seat per 100, at least one
seat and at most the level's maximum (``max_seats``, itself at most 10). Every other request
takes one seat: the mutating estimator's extra seats for fanning a write out to watchers are
not estimated (this server does not count watchers per resource).
"""

from __future__ import annotations

import math
from collections.abc import Callable

OBJECTS_PER_SEAT = 100.0
MINIMUM_SEATS = 1
MAXIMUM_LIST_SEATS = 10


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
