"""``/metrics``: the request and storage series of kube-apiserver, in Prometheus text.

Follows k8s.io/apiserver ``pkg/endpoints/metrics/metrics.go`` (``apiserver_request_total``,
``apiserver_request_duration_seconds``, ``apiserver_current_inflight_requests``,
``apiserver_longrunning_requests``) and ``pkg/storage/etcd3/metrics`` (``apiserver_storage_objects``
polled every ``--store-count-metric-poll-period``, ``apiserver_storage_db_total_size_in_bytes``
every ``--store-db-metric-poll-interval``). prometheus-client does the bookkeeping and the text
format; ``--disabled-metrics`` names are never registered, as in component-base.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from apiserver.http.app import RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

log = Logger()

DURATION_BUCKETS = (
    0.005,
    0.025,
    0.05,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    1.25,
    1.5,
    2,
    3,
    4,
    5,
    6,
    8,
    10,
    15,
    20,
    30,
    45,
    60,
)
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


class _Disabled:
    """Stands in for a metric turned off by --disabled-metrics."""

    def labels(self, *args: Any, **kwargs: Any) -> _Disabled:
        return self

    def inc(self, *args: Any) -> None:
        return None

    def dec(self, *args: Any) -> None:
        return None

    def set(self, *args: Any) -> None:
        return None

    def observe(self, *args: Any) -> None:
        return None


class Metrics:
    """The server's metric registry and what records into it."""

    def __init__(self, disabled: Iterable[str] = ()) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.disabled = set(disabled)
        self.requests = self._make(
            Counter,
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, "
            "version, resource, scope, component, and HTTP response code.",
            REQUEST_LABELS,
        )
        self.durations = self._make(
            Histogram,
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, "
            "version, resource, subresource, scope and component.",
            REQUEST_LABELS[:-1],
            buckets=DURATION_BUCKETS,
        )
        self.inflight = self._make(
            Gauge,
            "apiserver_current_inflight_requests",
            "Maximal number of currently used inflight request limit of this apiserver per "
            "request kind in last second.",
            ("request_kind",),
        )
        self.longrunning = self._make(
            Gauge,
            "apiserver_longrunning_requests",
            "Gauge of all active long-running apiserver requests broken out by verb, group, "
            "version, resource, scope and component.",
            ("verb", "group", "version", "resource", "subresource", "scope", "component"),
        )
        self.terminations = self._make(
            Counter,
            "apiserver_request_terminations_total",
            "Number of requests which apiserver terminated in self-defense.",
            ("verb", "group", "version", "resource", "subresource", "scope", "component", "code"),
        )
        self.storage_objects = self._make(
            Gauge,
            "apiserver_storage_objects",
            "Number of stored objects at the time of last check split by kind.",
            ("resource",),
        )
        self.storage_db_size = self._make(
            Gauge,
            "apiserver_storage_db_total_size_in_bytes",
            "Total size of the storage database file physically allocated in bytes.",
            ("endpoint",),
        )
        # Ours (kube-apiserver's etcd has its quota alarm instead): the embedded store ran
        # out of disk space, once per episode (writes refused until space is freed).
        self.storage_out_of_space = self._make(
            Counter,
            "apiserver_storage_out_of_space_total",
            "Number of times the embedded store ran out of disk space and refused writes.",
            ("endpoint",),
        )
        # Audit (k8s.io/apiserver pkg/audit/metrics.go), recorded through AuditRecorder.
        self.audit_events = self._make(
            Counter,
            "apiserver_audit_event_total",
            "Counter of audit events generated and sent to the audit backend.",
            (),
        )
        self.audit_errors = self._make(
            Counter,
            "apiserver_audit_error_total",
            "Counter of audit events that failed to be audited properly. "
            "Plugin identifies the plugin affected by the error.",
            ("plugin",),
        )
        self.audit_levels = self._make(
            Counter,
            "apiserver_audit_level_total",
            "Counter of policy levels for audit events (1 per request).",
            ("level",),
        )
        self.audit_rejected = self._make(
            Counter,
            "apiserver_audit_requests_rejected_total",
            "Counter of apiserver requests rejected due to an error in audit logging backend.",
            (),
        )
        #: Run before each exposition (see :meth:`before_collect`).
        self._before_collect: list[Callable[[], None]] = []
        self._inflight = {"readOnly": 0, "mutating": 0}
        # prometheus-client's ``labels()`` validates and locks on every call; the children
        # are fixed per label set (their number is the metric's cardinality), so they are
        # looked up once and kept. ``reset`` forgets them with the metrics' values.
        self._children: dict[tuple[Any, ...], tuple[Any, Any]] = {}
        self._inflight_children: dict[str, Any] = {}

    def _make(self, kind: Any, name: str, doc: str, labels: Iterable[str], **kw: Any) -> Any:
        if name in self.disabled:
            return _Disabled()
        return kind(name, doc, list(labels), registry=self.registry, **kw)

    # --- requests ----------------------------------------------------------------------

    def request_started(self, info: RequestInfo) -> None:
        if info.long_running:
            self.longrunning.labels(*_resource_labels(info, "WATCH", _parts(info))[:7]).inc()
            return
        kind = "readOnly" if info.method in ("GET", "HEAD") else "mutating"
        count = self._inflight[kind] = self._inflight[kind] + 1
        self._inflight_child(kind).set(count)

    def request_finished(self, info: RequestInfo, code: int, seconds: float) -> None:
        parts = _parts(info)
        labels = _resource_labels(info, request_verb(info, parts), parts)
        if info.long_running:
            self.longrunning.labels(*labels[:7]).dec()
        else:
            kind = "readOnly" if info.method in ("GET", "HEAD") else "mutating"
            count = self._inflight[kind] = self._inflight[kind] - 1
            self._inflight_child(kind).set(count)
        dry_run = "All" if b"dryRun" in info.query else ""
        key = (labels, dry_run, code)
        children = self._children.get(key)
        if children is None:
            full = (labels[0], dry_run, *labels[1:])
            children = (self.requests.labels(*full, str(code)), self.durations.labels(*full))
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def request_terminated(self, info: RequestInfo, code: int) -> None:
        """``RecordRequestTermination`` (max-in-flight's 429s): the rare path, so labels are
        looked up each time."""
        parts = _parts(info)
        labels = _resource_labels(info, request_verb(info, parts), parts)
        self.terminations.labels(*labels, str(code)).inc()

    def _inflight_child(self, kind: str) -> Any:
        child = self._inflight_children.get(kind)
        if child is None:
            child = self._inflight_children[kind] = self.inflight.labels(kind)
        return child

    # --- serving -----------------------------------------------------------------------

    def handler(self, profiling: bool) -> Callable[[Any, RequestInfo], Response]:
        def handle(request: HTTPRequest, info: RequestInfo) -> Response:
            if info.method == "DELETE" and profiling:
                self.reset()
                return Response(
                    200, (("Content-Type", "text/plain; charset=utf-8"),), b"metrics reset\n"
                )
            return Response(200, (("Content-Type", CONTENT_TYPE_LATEST),), self.exposition())

        return handle

    def before_collect(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before each exposition: a recorder that counts in plain integers on
        a hot path (prometheus-client takes a lock per increment) adds them to its metrics
        then."""
        self._before_collect.append(hook)

    def exposition(self) -> bytes:
        """The registry in Prometheus text, with every pending count added first."""
        for hook in self._before_collect:
            hook()
        return bytes(generate_latest(self.registry))

    def reset(self) -> None:
        """``DELETE /metrics`` (with profiling on): start the counters anew."""
        for metric in (self.requests, self.durations):
            clear = getattr(metric, "clear", None)
            if clear is not None:
                clear()
        self._children.clear()


class AuditRecorder:
    """The audit metrics of :class:`Metrics` (``apiserver.audit.interface.AuditMetrics``, and
    the filter's per-request ``policy_level``), as ``pkg/audit/metrics.go`` records them.

    The two counts made for every request (its policy level, and each event sent) are kept
    in plain integers and added to the prometheus-client metrics before each exposition
    (:meth:`Metrics.before_collect`): an increment of those takes a lock, and they were a
    measurable part of an audited request. Label children are looked up once per value.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._events = metrics.audit_events
        self._errors = metrics.audit_errors
        self._rejected = metrics.audit_rejected
        self._level_metric = metrics.audit_levels
        self._plugins: dict[str, Any] = {}
        self._pending_events = 0
        self._pending_levels: dict[str, int] = {}
        metrics.before_collect(self.flush)

    def event(self, level: str) -> None:
        """``ObserveEvent``: one event sent to the backends."""
        self._pending_events += 1

    def policy_level(self, level: str) -> None:
        """``ObservePolicyLevel``: one request's level, None included."""
        levels = self._pending_levels
        levels[level] = levels.get(level, 0) + 1

    def flush(self) -> None:
        """Add the pending counts to the metrics."""
        if self._pending_events:
            self._events.inc(self._pending_events)
            self._pending_events = 0
        levels, self._pending_levels = self._pending_levels, {}
        for level, count in levels.items():
            self._level_metric.labels(level).inc(count)

    def error(self, plugin: str, count: int) -> None:
        """``HandlePluginError``: ``count`` events a backend failed to write or dropped."""
        child = self._plugins.get(plugin)
        if child is None:
            child = self._plugins[plugin] = self._errors.labels(plugin)
        child.inc(count)

    def rejected(self) -> None:
        """A request failed because its audit record could not be stored."""
        self._rejected.inc()


def _parts(info: RequestInfo) -> list[str]:
    """The path's segments, split once for the verb and the labels."""
    return [p for p in info.path.split("/") if p]


def request_verb(info: RequestInfo, parts: list[str]) -> str:
    """kube's upper-case metric verb: LIST and WATCH split off GET, APPLY off PATCH."""
    method = info.method
    if not info.api:
        return method
    if info.long_running:
        return "WATCH"
    if method == "GET":
        return "GET" if _is_item(parts) else "LIST"
    if method == "DELETE" and not _is_item(parts):
        return "DELETECOLLECTION"
    if method == "POST":
        return "POST"
    return method


def _is_item(parts: list[str]) -> bool:
    # /apis/<group>/<version>/namespaces/<ns>/<resource>/<name>
    return len(parts) == 7 and parts[3] == "namespaces"


def _resource_labels(info: RequestInfo, verb: str, parts: list[str]) -> tuple[str, ...]:
    if info.api and len(parts) >= 4 and parts[0] == "apis":
        group, version = parts[1], parts[2]
        rest = parts[3:]
        if rest and rest[0] == "watch":
            rest = rest[1:]
        if len(rest) >= 3 and rest[0] == "namespaces":
            return (verb, group, version, rest[2], "", "namespace", "apiserver")
        if rest:
            return (verb, group, version, rest[0], "", "cluster", "apiserver")
    return (verb, "", "", "", info.path if not info.api else "", "", "")


class StorageMetricsPoller:
    """Polls the object count and the database size on the configured periods (0: off)."""

    def __init__(
        self,
        metrics: Metrics,
        clock: IReactorTime,
        *,
        count: Callable[[], Deferred[int]],
        db_size: Callable[[], Deferred[int | None]],
        endpoint: str,
        count_period: float,
        db_period: float,
        resource: str = "events.events.k8s.io",
    ) -> None:
        self.metrics = metrics
        self.loops: list[LoopingCall] = []
        self.count_period, self.db_period = count_period, db_period
        self.clock = clock
        self._count, self._db_size = count, db_size
        self.endpoint, self.resource = endpoint, resource
        #: The last object count polled, or None (priority and fairness estimates lists
        #: with it, as kube's object count tracker is fed by the same poll).
        self.last_count: int | None = None

    def start(self) -> None:
        for period, fn in ((self.count_period, self.poll_count), (self.db_period, self.poll_db)):
            if period > 0:
                loop = LoopingCall(fn)
                loop.clock = self.clock
                loop.start(period, now=True).addErrback(
                    lambda f: log.failure("storage metric poll failed", f)
                )
                self.loops.append(loop)

    def stop(self) -> None:
        for loop in self.loops:
            if loop.running:
                loop.stop()
        self.loops = []

    def poll_count(self) -> Deferred[None]:
        def record(count: int) -> None:
            self.last_count = count
            self.metrics.storage_objects.labels(self.resource).set(count)

        def failed(failure: Any) -> None:
            log.debug("object count failed: {e}", e=failure.getErrorMessage())

        return self._count().addCallbacks(record, failed)

    def poll_db(self) -> Any:
        from twisted.internet.defer import maybeDeferred

        d: Deferred[Any] = maybeDeferred(self._db_size)

        def record(size: Any) -> None:
            if size is not None:
                self.metrics.storage_db_size.labels(self.endpoint).set(size)

        d.addCallback(record)
        d.addErrback(lambda f: log.debug("db size failed: {e}", e=f.getErrorMessage()))
        return d
