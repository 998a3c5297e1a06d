"""The per-request series of kube-apiserver, counted in plain integers.

Follows k8s.io/apiserver ``pkg/endpoints/metrics/metrics.go`` (``MonitorRequest``,
``CleanScope``, ``CleanVerb``): ``apiserver_request_total``,
``apiserver_request_duration_seconds``, ``apiserver_request_sli_duration_seconds``,
``apiserver_response_sizes``, ``apiserver_current_inflight_requests`` and
``apiserver_longrunning_requests``, with the reference's names, labels and buckets.

Why not prometheus-client's ``Counter`` and ``Histogram`` here: each ``inc``/``observe`` takes
a lock and a histogram walks its buckets in Python, three metrics per request. The request
path runs on the reactor thread only, so a request adds one to a plain integer and to one
bucket slot of a :class:`Series` found by one dict look-up; everything else (cumulative
buckets, the label strings, the SLI histogram, the sums over codes) is built when
``/metrics`` is scraped, by :class:`RequestCollector`, a prometheus-client collector.

The SLI histogram is derived from the latency one at scrape time: its bucket bounds are a
subset of the latency buckets, so its cumulative counts are the latency histogram's at
those bounds (for the requests that are not dry-run, as ``MonitorRequest`` records it). The
reference subtracts webhook and priority-and-fairness queue waits from the SLI latency;
this server calls no admission webhooks, and a request queued by priority and fairness is
counted with its wait (documented in docs/architecture.md).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from apiserver.auth.requestinfo import RequestInfo as ResolvedInfo
    from apiserver.http.app import RequestInfo
    from apiserver.http.request import HTTPRequest

DURATION_BUCKETS: tuple[float, ...] = (
    0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20,
    30, 45, 60,
)  # fmt: skip
#: ``requestSliLatencies``: the latency buckets without 0.005 and 0.025.
SLI_BUCKETS: tuple[float, ...] = DURATION_BUCKETS[2:]
#: ``responseSizes``: ``ExponentialBuckets(1000, 10.0, 7)``.
SIZE_BUCKETS: tuple[float, ...] = tuple(1000.0 * 10**i for i in range(7))

#: The labels of ``apiserver_request_total``, in the reference's order.
REQUEST_LABELS = (
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
    "code",
)
#: ``apiserver_request_sli_duration_seconds``, ``apiserver_response_sizes`` and
#: ``apiserver_longrunning_requests``: no dry_run, no code.
RESOURCE_LABELS = ("verb", "group", "version", "resource", "subresource", "scope", "component")

#: The series :class:`RequestCollector` writes.
REQUEST_SERIES = (
    "apiserver_request_total",
    "apiserver_request_duration_seconds",
    "apiserver_request_sli_duration_seconds",
    "apiserver_response_sizes",
    "apiserver_current_inflight_requests",
    "apiserver_longrunning_requests",
)

#: requestinfo verbs to ``CanonicalVerb``/``CleanVerb``'s upper-case metric verbs.
_METRIC_VERBS = {
    "get": "GET",
    "list": "LIST",
    "watch": "WATCH",
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETECOLLECTION",
}
#: ``validConnectRequests``: subresources reported as CONNECT.
_CONNECT_SUBRESOURCES = frozenset(("log", "exec", "portforward", "attach", "proxy"))
_VALID_METHODS = frozenset(
    ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT")
)  # non-resource requests' verbs; any other method is counted as "other"
#: Non-resource paths remembered as their own ``subresource`` label value; past this many,
#: further unknown paths share one series (a scanner must not grow memory without bound).
MAX_NON_RESOURCE_PATHS = 256

_DURATION_N = len(DURATION_BUCKETS)
_SIZE_N = len(SIZE_BUCKETS)


class Series:
    """The counts of one label set (without the code); updated only on the reactor thread."""

    __slots__ = (
        "codes",
        "dry_run",
        "duration_sum",
        "durations",
        "labels",
        "longrunning",
        "size_sum",
        "sized",
        "sizes",
        "sli_corrections",
        "sli_sum_correction",
    )

    def __init__(self, labels: tuple[str, ...], dry_run: str) -> None:
        #: ``RESOURCE_LABELS`` values.
        self.labels = labels
        self.dry_run = dry_run
        #: Requests per HTTP code.
        self.codes: dict[int, int] = {}
        #: Observations per latency bucket (the last slot: above 60 s).
        self.durations = [0] * (_DURATION_N + 1)
        self.duration_sum = 0.0
        self.sizes: list[int] | None = [0] * (_SIZE_N + 1) if labels[0] in ("GET", "LIST") else None
        self.size_sum = 0.0
        self.sized = False
        #: Long-running requests of this label set in progress.
        self.longrunning = 0
        #: What the SLI histogram differs by from ``durations``: a request that waited in a
        #: priority and fairness queue moves from its latency's bucket to the bucket of its
        #: latency without the wait (None until one did).
        self.sli_corrections: list[int] | None = None
        self.sli_sum_correction = 0.0


def _scope(info: ResolvedInfo) -> str:
    """``CleanScope``."""
    if info.name or info.verb == "create":
        return "resource"
    if info.namespace:
        return "namespace"
    return "cluster" if info.resource_request else ""


class RequestRecorder:
    """Counts every request into its :class:`Series` (``App``'s ``RequestMetrics``)."""

    def __init__(self) -> None:
        self.series: dict[tuple[Any, ...], Series] = {}
        #: Requests in flight per kind, and the most seen since the last scrape
        #: (``currentInflightRequests`` reports the maximum of the last period).
        self.read_only = 0
        self.mutating = 0
        self.read_only_max = 0
        self.mutating_max = 0
        self._non_resource_paths: set[str] = set()

    # --- the request path -----------------------------------------------------------------

    def request_started(self, info: RequestInfo) -> None:
        if info.long_running:
            self.series_of(info).longrunning += 1
            return
        if info.method in ("GET", "HEAD"):
            self.read_only = n = self.read_only + 1
            if n > self.read_only_max:
                self.read_only_max = n
        else:
            self.mutating = n = self.mutating + 1
            if n > self.mutating_max:
                self.mutating_max = n

    def request_finished(
        self, info: RequestInfo, code: int, seconds: float, request: HTTPRequest | None = None
    ) -> None:
        series = self.series_of(info, request)
        if info.long_running:
            if series.longrunning > 0:
                series.longrunning -= 1
        elif info.method in ("GET", "HEAD"):
            self.read_only -= 1
        else:
            self.mutating -= 1
        codes = series.codes
        codes[code] = codes.get(code, 0) + 1
        series.durations[bisect_left(DURATION_BUCKETS, seconds)] += 1
        series.duration_sum += seconds
        unaccounted = info.unaccounted
        if unaccounted:
            corrections = series.sli_corrections
            if corrections is None:
                corrections = series.sli_corrections = [0] * (_DURATION_N + 1)
            corrections[bisect_left(DURATION_BUCKETS, seconds)] -= 1
            corrections[bisect_left(DURATION_BUCKETS, max(0.0, seconds - unaccounted))] += 1
            series.sli_sum_correction -= min(unaccounted, seconds)
        sizes = series.sizes
        if sizes is not None:
            size = request.sentLength if request is not None else 0
            sizes[bisect_left(SIZE_BUCKETS, size)] += 1
            series.size_sum += size
            series.sized = True

    # --- labels ---------------------------------------------------------------------------

    def series_of(self, info: RequestInfo, request: HTTPRequest | None = None) -> Series:
        """The request's series, made on the first request of its label set."""
        resolved = info.resolved
        if resolved is None:
            resolved = _resolve(info)
        if resolved is not None and resolved.resource_request:
            verb = resolved.verb
            dry_run = "All" if b"dryRun" in info.query else ""
            key: tuple[Any, ...] = (
                verb,
                resolved.api_group,
                resolved.api_version,
                resolved.resource,
                resolved.subresource,
                bool(resolved.name),
                bool(resolved.namespace),
                dry_run,
                verb == "patch" and _is_apply(request),
            )
            series = self.series.get(key)
            if series is None:
                series = self.series[key] = Series(_resource_labels(resolved, key[-1]), dry_run)
            return series
        path = info.path
        key = (info.method, path)
        series = self.series.get(key)
        if series is None:
            known = self._non_resource_paths
            if path not in known and len(known) >= MAX_NON_RESOURCE_PATHS:
                key = (info.method, "")
                series = self.series.get(key)
                if series is not None:
                    return series
                path = "other"
            else:
                known.add(path)
            method = info.method if info.method in _VALID_METHODS else "other"
            # kube-apiserver's non-resource handlers are instrumented with the path as the
            # subresource and empty group, version, resource, scope and component
            # (k8s.io/apiserver pkg/server/healthz/healthz.go InstallPathHandler).
            series = self.series[key] = Series((method, "", "", "", path, "", ""), "")
        return series

    # --- scraping -------------------------------------------------------------------------

    def take_inflight(self) -> tuple[int, int]:
        """The most requests in flight since the last call (read-only, mutating)."""
        result = (self.read_only_max, self.mutating_max)
        self.read_only_max, self.mutating_max = self.read_only, self.mutating
        return result

    def reset(self) -> None:
        """``DELETE /metrics``: forget the counts, keep what is in progress."""
        for series in self.series.values():
            series.codes.clear()
            series.durations = [0] * (_DURATION_N + 1)
            series.duration_sum = 0.0
            if series.sizes is not None:
                series.sizes = [0] * (_SIZE_N + 1)
            series.size_sum = 0.0
            series.sized = False


def _resolve(info: RequestInfo) -> ResolvedInfo | None:
    """The request info of a request answered before the resolver stage ran (the shutdown
    gate's 503, a bad ``?timeout=``): parsed here, on that rare path only."""
    from apiserver.auth.requestinfo import RequestInfoError, parse_request_info

    try:
        return parse_request_info(info.method, info.path, info.query)
    except RequestInfoError:
        return None


def _is_apply(request: HTTPRequest | None) -> bool:
    """``CleanVerb``: a PATCH with the apply content type is reported as APPLY (read only
    for PATCH requests)."""
    if request is None:
        return False
    content_type = request.getHeader(b"content-type") or b""
    return content_type.split(b";", 1)[0].strip() == b"application/apply-patch+yaml"


def _resource_labels(resolved: ResolvedInfo, apply: bool) -> tuple[str, ...]:
    verb = _METRIC_VERBS.get(resolved.verb, "other")
    if apply:
        verb = "APPLY"
    if resolved.subresource in _CONNECT_SUBRESOURCES:
        verb = "CONNECT"
    return (
        verb,
        resolved.api_group,
        resolved.api_version,
        resolved.resource,
        resolved.subresource,
        _scope(resolved),
        "apiserver",
    )


def _cumulative(counts: list[int]) -> list[int]:
    total = 0
    out = []
    for count in counts:
        total += count
        out.append(total)
    return out


def go_bound(bound: float) -> str:
    """A bucket bound as the Go client writes ``le`` (``strconv.FormatFloat(b, 'g', -1,
    64)``): ``1``, ``0.05``, ``1e+06``. For bounds of at most six significant digits that is
    Python's ``g`` format. prometheus-client writes ``1.0``, which the monitoring mixin's
    ``le="1"`` matchers (recording rules of the SLO burn rates) would not select."""
    return format(bound, "g")


_DURATION_LE = [go_bound(b) for b in DURATION_BUCKETS] + ["+Inf"]
_SIZE_LE = [go_bound(b) for b in SIZE_BUCKETS] + ["+Inf"]
#: Where each SLI bound sits among the latency buckets.
_SLI_INDEX = [DURATION_BUCKETS.index(b) for b in SLI_BUCKETS] + [_DURATION_N]
_SLI_LE = [go_bound(b) for b in SLI_BUCKETS] + ["+Inf"]

HELP = {
    "apiserver_request_total": "Counter of apiserver requests broken out for each verb, dry "
    "run value, group, version, resource, scope, component, and HTTP response code.",
    "apiserver_request_duration_seconds": "Response latency distribution in seconds for each "
    "verb, dry run value, group, version, resource, subresource, scope and component.",
    "apiserver_request_sli_duration_seconds": "Response latency distribution (not counting "
    "webhook duration and priority & fairness queue wait times) in seconds for each verb, "
    "group, version, resource, subresource, scope and component.",
    "apiserver_response_sizes": "Response size distribution in bytes for each group, version, "
    "verb, resource, subresource, scope and component.",
    "apiserver_current_inflight_requests": "Maximal number of currently used inflight request "
    "limit of this apiserver per request kind in last second.",
    "apiserver_longrunning_requests": "Gauge of all active long-running apiserver requests "
    "broken out by verb, group, version, resource, scope and component. Not all requests are "
    "tracked this way.",
}


class RequestCollector(Collector):
    """Turns a :class:`RequestRecorder`'s counts into the reference's metric families."""

    def __init__(self, recorder: RequestRecorder, enabled: Callable[[str], bool]) -> None:
        self.recorder = recorder
        self.enabled = enabled

    def describe(self) -> Iterator[Any]:
        return iter(())

    def collect(self) -> Iterator[Any]:
        on = self.enabled
        series = list(self.recorder.series.values())
        if on("apiserver_request_total"):
            total = CounterMetricFamily(
                "apiserver_request_total", HELP["apiserver_request_total"], labels=REQUEST_LABELS
            )
            for s in series:
                verb, *rest = s.labels
                for code, count in s.codes.items():
                    total.add_metric([verb, s.dry_run, *rest, str(code)], count)
            yield total
        if on("apiserver_request_duration_seconds"):
            yield self._histogram(
                "apiserver_request_duration_seconds",
                REQUEST_LABELS[:-1],
                ((s, [s.labels[0], s.dry_run, *s.labels[1:]]) for s in series if s.codes),
            )
        if on("apiserver_request_sli_duration_seconds"):
            yield self._sli(series)
        if on("apiserver_response_sizes"):
            sizes = HistogramMetricFamily(
                "apiserver_response_sizes", HELP["apiserver_response_sizes"], labels=RESOURCE_LABELS
            )
            merged: dict[tuple[str, ...], tuple[list[int], float]] = {}
            for s in series:
                if s.sizes is None or not s.sized:
                    continue
                counts, total_size = merged.get(s.labels, ([0] * (_SIZE_N + 1), 0.0))
                merged[s.labels] = (
                    [a + b for a, b in zip(counts, s.sizes, strict=True)],
                    total_size + s.size_sum,
                )
            for labels, (counts, total_size) in merged.items():
                sizes.add_metric(
                    list(labels), list(zip(_SIZE_LE, _cumulative(counts), strict=True)), total_size
                )
            yield sizes
        if on("apiserver_current_inflight_requests"):
            read_only, mutating = self.recorder.take_inflight()
            inflight = GaugeMetricFamily(
                "apiserver_current_inflight_requests",
                HELP["apiserver_current_inflight_requests"],
                labels=("request_kind",),
            )
            inflight.add_metric(["mutating"], mutating)
            inflight.add_metric(["readOnly"], read_only)
            yield inflight
        if on("apiserver_longrunning_requests"):
            gauge = GaugeMetricFamily(
                "apiserver_longrunning_requests",
                HELP["apiserver_longrunning_requests"],
                labels=RESOURCE_LABELS,
            )
            running: dict[tuple[str, ...], int] = {}
            for s in series:
                if s.longrunning or s.labels[0] == "WATCH":
                    running[s.labels] = running.get(s.labels, 0) + s.longrunning
            for labels, count in running.items():
                gauge.add_metric(list(labels), count)
            yield gauge

    def _histogram(
        self, name: str, labels: tuple[str, ...], rows: Iterator[tuple[Series, list[str]]]
    ) -> HistogramMetricFamily:
        family = HistogramMetricFamily(name, HELP[name], labels=labels)
        for s, values in rows:
            family.add_metric(
                values,
                list(zip(_DURATION_LE, _cumulative(s.durations), strict=True)),
                s.duration_sum,
            )
        return family

    def _sli(self, series: list[Series]) -> HistogramMetricFamily:
        name = "apiserver_request_sli_duration_seconds"
        family = HistogramMetricFamily(name, HELP[name], labels=RESOURCE_LABELS)
        merged: dict[tuple[str, ...], tuple[list[int], float]] = {}
        for s in series:
            if s.dry_run or not s.codes or not s.labels[6]:
                # Dry-run requests are not SLI requests; non-resource handlers have no
                # latency trackers in kube-apiserver (no component label).
                continue
            counts, total = merged.get(s.labels, ([0] * (_DURATION_N + 1), 0.0))
            durations = s.durations
            if s.sli_corrections is not None:
                durations = [a + b for a, b in zip(durations, s.sli_corrections, strict=True)]
            merged[s.labels] = (
                [a + b for a, b in zip(counts, durations, strict=True)],
                total + s.duration_sum + s.sli_sum_correction,
            )
        for labels, (counts, total) in merged.items():
            cumulative = _cumulative(counts)
            family.add_metric(
                list(labels),
                [(le, cumulative[i]) for le, i in zip(_SLI_LE, _SLI_INDEX, strict=True)],
                total,
            )
        return family
