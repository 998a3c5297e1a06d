"""``etcd_request_duration_seconds``, ``etcd_requests_total`` and
``etcd_request_errors_total`` for either backend.

kube-apiserver times every call its etcd3 store makes (k8s.io/apiserver
``pkg/storage/etcd3/metrics/metrics.go`` ``RecordEtcdRequest``), labelled with the operation
(``get``, ``create``, ``update``, ``delete``, ``list``, ``getCurrentResourceVersion``) and the
group and resource of the key. Here :class:`TimedStore` wraps the backend, SQLite or etcd,
below the watch cache (so reads the cache answers are not counted, as kube's cacher does not
reach etcd for them either), and the counts are plain integers made into metric families at
scrape time (:class:`StorageCollector`), as the request series are.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from apiserver.metrics.requests import DURATION_BUCKETS, go_bound

#: store method -> kube's operation label.
OPERATIONS = {
    "get": "get",
    "create": "create",
    "update": "update",
    "delete": "delete",
    "range": "list",
    "count": "listWithCount",
    "current_revision": "getCurrentResourceVersion",
}
#: The API group of each stored resource (the key's first segment after the prefix).
GROUPS = {
    "events": "",
    "serviceaccounts": "",
    "flowschemas": "flowcontrol.apiserver.k8s.io",
    "prioritylevelconfigurations": "flowcontrol.apiserver.k8s.io",
}
LABELS = ("operation", "group", "resource")
#: The families written here (all disabled: the store is not wrapped).
STORAGE_SERIES = (
    "etcd_request_duration_seconds",
    "etcd_requests_total",
    "etcd_request_errors_total",
)
_N = len(DURATION_BUCKETS)
_LE = [go_bound(b) for b in DURATION_BUCKETS] + ["+Inf"]


class _Series:
    __slots__ = ("buckets", "errors", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (_N + 1)
        self.sum = 0.0
        self.errors = 0


class StoreTimings:
    """The counts, per (operation, group, resource)."""

    def __init__(self, prefix: bytes) -> None:
        self.prefix = prefix.rstrip(b"/") + b"/"
        self.series: dict[tuple[str, bytes], _Series] = {}
        self.labels: dict[tuple[str, bytes], tuple[str, str, str]] = {}

    def series_for(self, operation: str, key: object) -> _Series:
        segment = b""
        if isinstance(key, bytes) and key.startswith(self.prefix):
            segment = key[len(self.prefix) :].split(b"/", 1)[0]
        found = self.series.get((operation, segment))
        if found is None:
            resource = segment.decode("utf-8", "replace")
            found = self.series[(operation, segment)] = _Series()
            self.labels[(operation, segment)] = (operation, GROUPS.get(resource, ""), resource)
        return found


class TimedStore:
    """A store whose calls are timed into :class:`StoreTimings`; everything else (watches,
    capabilities, health, maintenance) is the wrapped store's."""

    def __init__(self, store: Any, timings: StoreTimings, clock: IReactorTime) -> None:
        self._store = store
        for method, operation in OPERATIONS.items():
            inner = getattr(store, method, None)
            if inner is not None:
                setattr(self, method, _timed(inner, operation, timings, clock))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def committed_revision(self) -> int:
        """The wrapped store's (the watch cache asks on every GET and LIST it answers from
        memory: a method of its own spares each call the AttributeError that reaching
        ``__getattr__`` costs). Looked up on the store at each call, because the embedded
        store rebinds it once opened with several workers."""
        revision: int = self._store.committed_revision()
        return revision


def _timed(
    inner: Callable[..., Any], operation: str, timings: StoreTimings, clock: IReactorTime
) -> Callable[..., Any]:
    seconds = clock.seconds

    def timed(*args: Any, **kwargs: Any) -> Any:
        series = timings.series_for(operation, args[0] if args else b"")
        started = seconds()
        result = inner(*args, **kwargs)
        if not isinstance(result, Deferred):
            return result

        def done(value: object) -> object:
            elapsed = seconds() - started
            series.buckets[bisect_left(DURATION_BUCKETS, elapsed)] += 1
            series.sum += elapsed
            if isinstance(value, Failure):
                series.errors += 1
            return value

        return result.addBoth(done)

    return timed


class StorageCollector(Collector):
    """The three families, built from :class:`StoreTimings` when scraped."""

    def __init__(self, timings: StoreTimings, enabled: Callable[[str], bool]) -> None:
        self.timings = timings
        self.enabled = enabled

    def describe(self) -> Iterator[Any]:
        return iter(())

    def collect(self) -> Iterator[Any]:
        timings = self.timings
        rows = [(timings.labels[key], series) for key, series in list(timings.series.items())]
        if self.enabled("etcd_request_duration_seconds"):
            family = HistogramMetricFamily(
                "etcd_request_duration_seconds",
                "Etcd request latency in seconds for each operation and object type.",
                labels=LABELS,
            )
            for labels, series in rows:
                total = 0
                buckets = []
                for le, count in zip(_LE, series.buckets, strict=True):
                    total += count
                    buckets.append((le, total))
                family.add_metric(list(labels), buckets, series.sum)
            yield family
        for name, doc, value in (
            (
                "etcd_requests_total",
                "Etcd request counts for each operation and object type.",
                lambda s: sum(s.buckets),
            ),
            (
                "etcd_request_errors_total",
                "Etcd failed request counts for each operation and object type.",
                lambda s: s.errors,
            ),
        ):
            if self.enabled(name):
                counter = CounterMetricFamily(name, doc, labels=LABELS)
                for labels, series in rows:
                    counter.add_metric(list(labels), value(series))
                yield counter
