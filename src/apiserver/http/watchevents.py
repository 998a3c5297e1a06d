"""What every watch stream sent, per (group, version, resource), for ``/metrics``.

kube-apiserver counts each event it writes to a watch client and observes its encoded size
(k8s.io/apiserver ``pkg/endpoints/handlers/watch.go``: ``apiserver_watch_events_total`` and
``apiserver_watch_events_sizes``, buckets 1 KiB to 128 KiB). The streams add to plain
integers here (an add and a bisect per event); ``apiserver.metrics`` reads them when scraped.
"""

from __future__ import annotations

from bisect import bisect_left

__all__ = ["SIZE_BOUNDS", "WatchEventCounts", "all_counts", "watch_event_counts"]

#: ``ExponentialBuckets(1024, 2.0, 8)``.
SIZE_BOUNDS = tuple(1024.0 * 2**i for i in range(8))


class WatchEventCounts:
    """The events written to the watch clients of one (group, version, resource)."""

    __slots__ = ("count", "size_sum", "sizes")

    def __init__(self) -> None:
        self.count = 0
        #: Events per size bucket (the last slot: above 128 KiB).
        self.sizes = [0] * (len(SIZE_BOUNDS) + 1)
        self.size_sum = 0

    def sent(self, size: int) -> None:
        self.count += 1
        self.sizes[bisect_left(SIZE_BOUNDS, size)] += 1
        self.size_sum += size


_COUNTS: dict[tuple[str, str, str], WatchEventCounts] = {}


def watch_event_counts(group: str, version: str, resource: str) -> WatchEventCounts:
    """The counts of ``group/version/resource``, shared by every stream of it."""
    key = (group, version, resource)
    counts = _COUNTS.get(key)
    if counts is None:
        counts = _COUNTS[key] = WatchEventCounts()
    return counts


def all_counts() -> list[tuple[tuple[str, str, str], WatchEventCounts]]:
    return list(_COUNTS.items())
