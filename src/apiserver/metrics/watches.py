"""``apiserver_watch_events_total`` and ``apiserver_watch_events_sizes`` (k8s.io/apiserver
``pkg/endpoints/metrics/metrics.go``), read at scrape time from what the watch streams
counted (:mod:`apiserver.http.watchevents`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily

from apiserver.http.watchevents import SIZE_BOUNDS, all_counts

__all__ = ["WatchEventsCollector"]

LABELS = ("group", "version", "resource")
TOTAL = "apiserver_watch_events_total"
SIZES = "apiserver_watch_events_sizes"
_LE = [str(int(bound)) for bound in SIZE_BOUNDS] + ["+Inf"]


class WatchEventsCollector:
    def __init__(self, enabled: Callable[[str], bool]) -> None:
        self.enabled = enabled

    def collect(self) -> Iterator[Any]:
        rows = all_counts()
        if self.enabled(TOTAL):
            total = CounterMetricFamily(
                TOTAL[: -len("_total")], "Number of events sent in watch clients", labels=LABELS
            )
            for key, counts in rows:
                total.add_metric(list(key), counts.count)
            yield total
        if self.enabled(SIZES):
            sizes = HistogramMetricFamily(
                SIZES, "Watch event size distribution in bytes", labels=LABELS
            )
            for key, counts in rows:
                buckets = list(zip(_LE, accumulate(counts.sizes), strict=True))
                sizes.add_metric(list(key), buckets, counts.size_sum)
            yield sizes
