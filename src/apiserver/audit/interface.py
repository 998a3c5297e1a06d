"""What the audit pieces agree on: the event value, the sink contract and the options.

kube-apiserver's audit has three parts (k8s.io/apiserver ``pkg/endpoints/filters/audit.go``,
``pkg/audit``, ``plugin/pkg/audit``): a filter that builds ``audit.k8s.io/v1`` Events per the
policy, backends that write them (log, webhook), and wrappers that batch and truncate
(``plugin/pkg/audit/buffered``, ``truncate``). This module is the contract between them, so
each can be built and tested alone:

- an event is a JSON-ready ``dict`` (:data:`AuditEvent`) whose keys are in the order Go's
  encoder writes ``audit.k8s.io/v1`` ``Event`` (``kind``, ``apiVersion``, ``level``,
  ``auditID``, ``stage``, ``requestURI``, ``verb``, ``user``, ``impersonatedUser``,
  ``sourceIPs``, ``userAgent``, ``objectRef``, ``responseStatus``, ``requestObject``,
  ``responseObject``, ``requestReceivedTimestamp``, ``stageTimestamp``, ``annotations``),
  optional fields left out rather than null, as ``omitempty`` does;
- a backend is a :class:`Sink` (``audit.Backend``: ``ProcessEvents``, ``Run``, ``Shutdown``);
- :class:`BackendOptions` is what ``--audit-log-*`` or ``--audit-webhook-*`` configure
  (``pkg/server/options/audit.go``), read by :func:`backend_options`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs
from twisted.internet.defer import Deferred

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

#: One ``audit.k8s.io/v1`` Event, ready for ``orjson.dumps`` (see the module docstring).
AuditEvent = dict[str, Any]

Level = Literal["None", "Metadata", "Request", "RequestResponse"]
Stage = Literal["RequestReceived", "ResponseStarted", "ResponseComplete", "Panic"]
Mode = Literal["batch", "blocking", "blocking-strict"]

LEVELS: tuple[Level, ...] = ("None", "Metadata", "Request", "RequestResponse")
STAGES: tuple[Stage, ...] = ("RequestReceived", "ResponseStarted", "ResponseComplete", "Panic")
API_VERSION = "audit.k8s.io/v1"


class Sink(Protocol):
    """An audit backend (``audit.Backend`` in k8s.io/apiserver ``pkg/audit/types.go``).

    ``process_events`` takes events in the order they happened. It answers True when every
    event was accepted (written, or queued in batch mode) and False when one was not; it
    never raises. A backend that must wait (a blocking webhook) answers a Deferred of that
    bool. Blocking-strict mode fails the request when the answer at ``RequestReceived`` is
    False (``failed to store audit event``); other modes only count the failure.

    Events are values once sent: the sender never changes an event it passed, and a sink
    that needs a different event (truncation) makes a new one. So a sink may keep them (a
    batch queue) without copying.

    ``start`` begins background work (batch timers); ``shutdown`` stops accepting events,
    delivers what is queued (the graceful shutdown loses no acknowledged request's record)
    and fires when done. Both are called by the server's service tree, never at build.
    """

    #: The plugin name, for ``apiserver_audit_error_total{plugin}`` (``log``, ``webhook``).
    name: str

    def process_events(self, events: Sequence[AuditEvent]) -> bool | Deferred[bool]: ...

    def start(self) -> None: ...

    def shutdown(self) -> Deferred[None]: ...


class LineSink(Sink, Protocol):
    """A :class:`Sink` whose events are independent lines appended somewhere (the log
    backend), so batch mode may encode each event as it comes, while its objects are still
    in the processor's cache, and hand any number of lines over in one call."""

    @property
    def encode(self) -> Callable[[AuditEvent], bytes]:
        """The event's line; raises TypeError or ValueError when it cannot be encoded."""

    def encode_failed(self, problem: Exception) -> None:
        """Count and log an event that :attr:`encode` refused."""

    def write_lines(self, lines: Sequence[bytes]) -> bool:
        """Append the lines; False (counted and logged) when some were not written."""


class AuditMetrics(Protocol):
    """What backends and the filter record (``pkg/audit/metrics.go``); the filter's
    per-request counts are ``apiserver.audit.filter.FilterMetrics.counts``."""

    def error(self, plugin: str, count: int) -> None:
        """``count`` events a backend failed to write or dropped:
        ``apiserver_audit_error_total{plugin}``."""

    def rejected(self) -> None:
        """A request failed because its audit record could not be stored (blocking-strict):
        ``apiserver_audit_requests_rejected_total``."""


class NoMetrics:
    """An :class:`AuditMetrics` that records nothing (tests, ``--disabled-metrics``)."""

    def error(self, plugin: str, count: int) -> None:
        pass

    def rejected(self) -> None:
        pass

    def counts(self, level: Level) -> list[int]:
        return [0, 0]


@attrs.frozen
class BatchOptions:
    """``--audit-<backend>-batch-*``: the buffered backend's settings (seconds for times)."""

    buffer_size: int
    max_size: int
    max_wait: float
    throttle_enable: bool
    throttle_qps: float
    throttle_burst: int


@attrs.frozen
class TruncateOptions:
    """``--audit-<backend>-truncate-*`` (sizes in bytes of the JSON encoding)."""

    enabled: bool
    max_event_size: int
    max_batch_size: int


@attrs.frozen
class BackendOptions:
    """Everything ``--audit-log-*`` or ``--audit-webhook-*`` says that both backends share."""

    mode: Mode
    batch: BatchOptions
    truncate: TruncateOptions
    version: str


def backend_options(config: ServerConfig, backend: Literal["log", "webhook"]) -> BackendOptions:
    """The shared options of one backend, from the validated command line."""
    values = config.values

    def get(name: str) -> Any:
        return values[f"audit-{backend}-{name}"]

    return BackendOptions(
        mode=get("mode"),
        batch=BatchOptions(
            buffer_size=int(get("batch-buffer-size")),
            max_size=int(get("batch-max-size")),
            max_wait=float(get("batch-max-wait")),
            throttle_enable=bool(get("batch-throttle-enable")),
            throttle_qps=float(get("batch-throttle-qps")),
            throttle_burst=int(get("batch-throttle-burst")),
        ),
        truncate=TruncateOptions(
            enabled=bool(get("truncate-enabled")),
            max_event_size=int(get("truncate-max-event-size")),
            max_batch_size=int(get("truncate-max-batch-size")),
        ),
        version=str(get("version")),
    )
