"""The watch cache's series, read from its counters when ``/metrics`` is scraped.

Follows k8s.io/apiserver ``pkg/storage/cacher/metrics/metrics.go``: per (group, resource),
``apiserver_watch_cache_events_received_total``, ``..._events_dispatched_total``,
``..._initializations_total``, ``..._resource_version`` and ``..._capacity``, and (no
``watch_cache`` subsystem in their names) ``apiserver_init_events_total`` and
``apiserver_terminated_watchers_total``. The cache counts in plain integers
(``apiserver.storage.cacher.CacheStats``): nothing is added to its fan-out but an increment.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["WatchCacheCollector"]

LABELS = ("group", "resource")

#: (name, help, attribute of the counts), the counters.
_COUNTERS = (
    (
        "apiserver_watch_cache_events_received_total",
        "Counter of events received in watch cache broken by resource type.",
        "received",
    ),
    (
        "apiserver_watch_cache_events_dispatched_total",
        "Counter of events dispatched in watch cache broken by resource type.",
        "dispatched",
    ),
    (
        "apiserver_init_events_total",
        "Counter of init events processed in watch cache broken by resource type.",
        "init_events",
    ),
    (
        "apiserver_watch_cache_initializations_total",
        "Counter of watch cache initializations broken by resource type.",
        "initializations",
    ),
    (
        "apiserver_terminated_watchers_total",
        "Counter of watchers closed due to unresponsiveness broken by resource type.",
        "terminated",
    ),
)
RESOURCE_VERSION = "apiserver_watch_cache_resource_version"
CAPACITY = "apiserver_watch_cache_capacity"
#: ``resource_version`` keeps the 15 least significant digits (a float64's exact range).
_RV_MODULUS = 10**15


class WatchCacheCollector:
    """``rows()`` gives (prefix, counts, revision, capacity) per cached prefix and
    ``resource_of(prefix)`` its (group, resource); ``enabled(name)`` is the metrics policy."""

    def __init__(
        self,
        rows: Callable[[], Sequence[tuple[bytes, Any, int, int]]],
        resource_of: Callable[[bytes], tuple[str, str]],
        enabled: Callable[[str], bool],
    ) -> None:
        self.rows = rows
        self.resource_of = resource_of
        self.enabled = enabled

    def collect(self) -> Iterator[Any]:
        rows = [(list(self.resource_of(prefix)), *rest) for prefix, *rest in self.rows()]
        for name, doc, attribute in _COUNTERS:
            if not self.enabled(name):
                continue
            counter = CounterMetricFamily(name[: -len("_total")], doc, labels=LABELS)
            for labels, counts, _, _ in rows:
                counter.add_metric(labels, getattr(counts, attribute))
            yield counter
        if self.enabled(RESOURCE_VERSION):
            family = GaugeMetricFamily(
                RESOURCE_VERSION,
                "Current resource version of watch cache broken by resource type. This is "
                "truncated to the 15 least significant digits.",
                labels=LABELS,
            )
            for labels, _, revision, _ in rows:
                family.add_metric(labels, revision % _RV_MODULUS)
            yield family
        if self.enabled(CAPACITY):
            capacities = GaugeMetricFamily(
                CAPACITY, "Total capacity of watch cache broken by resource type.", labels=LABELS
            )
            for labels, _, _, capacity in rows:
                capacities.add_metric(labels, capacity)
            yield capacities
