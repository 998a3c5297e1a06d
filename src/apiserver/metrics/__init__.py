"""``/metrics``: the request, storage, audit and process series of kube-apiserver.

Follows k8s.io/apiserver ``pkg/endpoints/metrics/metrics.go`` (the request series, counted
by :mod:`apiserver.metrics.requests`), ``pkg/storage/etcd3/metrics``
(``apiserver_resource_objects`` and the deprecated ``apiserver_storage_objects`` polled every
``--store-count-metric-poll-period``, ``apiserver_storage_size_bytes`` every
``--store-db-metric-poll-interval``), ``pkg/authentication/request/x509`` (client
certificate expiration), ``pkg/audit/metrics.go`` and component-base's ``process_*`` and
``kubernetes_build_info``. prometheus-client writes the text format; what component-base's
options do (``--disabled-metrics``, ``--show-hidden-metrics-for-version``,
``--allow-metric-labels``) is :mod:`apiserver.metrics.labels`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from apiserver.http.app import RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.metrics.labels import LabelPolicy
from apiserver.metrics.requests import (
    DURATION_BUCKETS,
    REQUEST_LABELS,
    REQUEST_SERIES,
    RequestCollector,
    RequestRecorder,
)
from apiserver.metrics.runtime import BuildInfoCollector, ThreadsCollector
from apiserver.metrics.watches import WatchEventsCollector

log = Logger()

__all__ = ["DURATION_BUCKETS", "REQUEST_LABELS", "AuditRecorder", "Metrics"]

#: ``clientCertificateExpirationHistogram`` (k8s.io/apiserver
#: pkg/authentication/request/x509/x509.go): seconds left on a client certificate.
CERT_EXPIRATION_BUCKETS = (
    0,
    1800,
    3600,
    7200,
    21600,
    43200,
    86400,
    172800,
    345600,
    604800,
    2592000,
    7776000,
    15552000,
    31104000,
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
    """The server's metric registry and what records into it.

    ``policy`` holds ``--disabled-metrics``, ``--show-hidden-metrics-for-version`` and
    ``--allow-metric-labels`` (:class:`apiserver.metrics.labels.LabelPolicy`); the request
    series are counted by :class:`apiserver.metrics.requests.RequestRecorder`.
    """

    def __init__(
        self,
        disabled: Iterable[str] = (),
        *,
        policy: LabelPolicy | None = None,
        git_version: str | None = None,
    ) -> None:
        self.policy = policy if policy is not None else LabelPolicy(disabled=frozenset(disabled))
        # Go's client exposes no ``_created`` series; prometheus-client's switch is
        # process-wide (the server has one registry, this one).
        disable_created_metrics()
        self.registry = CollectorRegistry(auto_describe=True)
        self.disabled = set(self.policy.disabled)
        self.recorder = RequestRecorder()
        self.registry.register(RequestCollector(self.recorder, self.policy.enabled))
        if self.policy.enabled("kubernetes_build_info"):
            self.registry.register(BuildInfoCollector(git_version))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.registry.register(ThreadsCollector(self.policy.enabled))
        self.registry.register(WatchEventsCollector(self.policy.enabled))
        self.terminations = self._make(
            Counter,
            "apiserver_request_terminations_total",
            "Number of requests which apiserver terminated in self-defense.",
            ("verb", "group", "version", "resource", "subresource", "scope", "component", "code"),
        )
        # pkg/storage/etcd3/metrics: apiserver_storage_objects is deprecated since 1.34 and
        # so hidden in 1.35 unless --show-hidden-metrics-for-version=1.34;
        # apiserver_resource_objects replaces it.
        self.storage_objects = self._make(
            Gauge,
            "apiserver_storage_objects",
            "(Deprecated since 1.34.0) Number of stored objects at the time of last check "
            "split by kind. In case of a fetching error, the value will be -1.",
            ("resource",),
            deprecated="1.34",
        )
        self.resource_objects = self._make(
            Gauge,
            "apiserver_resource_objects",
            "Number of stored objects at the time of last check split by kind. In case of a "
            "fetching error, the value will be -1.",
            ("group", "resource"),
        )
        self.storage_db_size = self._make(
            Gauge,
            "apiserver_storage_size_bytes",
            "Size of the storage database file physically allocated in bytes.",
            ("storage_cluster_id",),
        )
        self.client_cert_expiration = self._make(
            Histogram,
            "apiserver_client_certificate_expiration_seconds",
            "Distribution of the remaining lifetime on the certificate used to authenticate "
            "a request.",
            (),
            buckets=CERT_EXPIRATION_BUCKETS,
        )
        # k8s.io/apiserver pkg/server/secure_serving.go: tlsHandshakeErrorWriter counts every
        # "http: TLS handshake error" line of the HTTP server, EOF before the handshake included.
        self.tls_handshake_errors = self._make(
            Counter,
            "apiserver_tls_handshake_errors_total",
            "Number of requests dropped with 'TLS handshake error from' error",
            (),
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

    def _make(
        self,
        kind: Any,
        name: str,
        doc: str,
        labels: Iterable[str],
        deprecated: str | None = None,
        **kw: Any,
    ) -> Any:
        if not self.policy.enabled(name, deprecated):
            return _Disabled()
        if kind is Counter and name.endswith("_total"):
            # prometheus-client adds the _total suffix of a counter itself.
            name = name[: -len("_total")]
        return kind(name, doc, list(labels), registry=self.registry, **kw)

    # --- requests ----------------------------------------------------------------------

    @property
    def records_requests(self) -> bool:
        """False when ``--disabled-metrics`` names every request series: then the server
        gives the app no recorder and a request pays nothing for metrics."""
        return any(self.policy.enabled(name) for name in REQUEST_SERIES)

    def request_started(self, info: RequestInfo) -> None:
        self.recorder.request_started(info)

    def request_finished(
        self, info: RequestInfo, code: int, seconds: float, request: HTTPRequest | None = None
    ) -> None:
        self.recorder.request_finished(info, code, seconds, request)

    def bind_fast_path(self) -> None:
        """Let the app call the recorder directly (one call less per request)."""
        self.request_started = self.recorder.request_started  # type: ignore[method-assign]
        self.request_finished = self.recorder.request_finished  # type: ignore[method-assign]

    def request_terminated(self, info: RequestInfo, code: int) -> None:
        """``RecordRequestTermination`` (max-in-flight's 429s): the rare path, so labels are
        looked up each time."""
        labels = self.recorder.series_of(info).labels
        self.terminations.labels(*labels, str(code)).inc()

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
        """The registry in Prometheus text, with every pending count added first and
        ``--allow-metric-labels`` applied."""
        for hook in self._before_collect:
            hook()
        return bytes(generate_latest(self.policy.view(self.registry)))

    def reset(self) -> None:
        """``DELETE /metrics`` (with profiling on): start the counters anew."""
        self.recorder.reset()


class AuditRecorder:
    """The audit metrics of :class:`Metrics` (``apiserver.audit.interface.AuditMetrics``, and
    the filter's per-request ``counts``), as ``pkg/audit/metrics.go`` records them.

    The two counts made for every request (its policy level, and each event sent) are kept
    in plain integers the audit stage adds to (:meth:`counts`), added to the
    prometheus-client metrics before each exposition (:meth:`Metrics.before_collect`): an
    increment of those takes a lock, and they were a measurable part of an audited request.
    Label children are looked up once per value.
    """

    def __init__(self, metrics: Metrics) -> None:
        self._events = metrics.audit_events
        self._errors = metrics.audit_errors
        self._rejected = metrics.audit_rejected
        self._level_metric = metrics.audit_levels
        self._plugins: dict[str, Any] = {}
        #: ``[requests, events]`` per level, not yet added to the metrics (:meth:`counts`).
        self._pending: dict[str, list[int]] = {}
        metrics.before_collect(self.flush)

    def counts(self, level: str) -> list[int]:
        """The two counters of ``level`` the audit stage adds to: requests at that level
        (``ObservePolicyLevel``) and events sent (``ObserveEvent``)."""
        pair = self._pending.get(level)
        if pair is None:
            pair = self._pending[level] = [0, 0]
        return pair

    def flush(self) -> None:
        """Add the pending counts to the metrics."""
        for level, pair in self._pending.items():
            requests, events = pair
            if requests:
                self._level_metric.labels(level).inc(requests)
                pair[0] = 0
            if events:
                self._events.inc(events)
                pair[1] = 0

    def error(self, plugin: str, count: int) -> None:
        """``HandlePluginError``: ``count`` events a backend failed to write or dropped."""
        child = self._plugins.get(plugin)
        if child is None:
            child = self._plugins[plugin] = self._errors.labels(plugin)
        child.inc(count)

    def rejected(self) -> None:
        """A request failed because its audit record could not be stored."""
        self._rejected.inc()


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
            group, _, resource = self.resource.partition(".")[::-1]
            self.metrics.resource_objects.labels(group, resource).set(count)

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
