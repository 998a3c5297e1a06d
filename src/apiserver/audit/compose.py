"""How a backend is wrapped per its mode and truncation flags, as kube-apiserver does.

k8s.io/apiserver ``pkg/server/options/audit.go`` builds each backend as
``truncate(mode(backend))``: ``AuditLogOptions.newBackend`` (and ``newUntruncatedBackend``
followed by ``TruncateOptions.wrapBackend`` for the webhook) first applies the mode
(``AuditBatchOptions.wrapBackend``) and then, when ``--audit-<b>-truncate-enabled`` is set,
puts the truncating backend outermost. The mode decides what the filter sees:

- ``batch``: the buffered backend (:mod:`apiserver.audit.buffered`), which queues and answers
  True at once;
- ``blocking``: ``ignoreErrorsBackend``, which waits for the backend and answers True whatever
  happened (failures are only counted and logged by the backend);
- ``blocking-strict``: the backend itself, so a failed write answers False and the filter
  fails the request at ``RequestReceived`` (``failed to store audit event``).

So the filter needs no notion of the mode: it fails the request whenever the answer at
``RequestReceived`` is False, as ``pkg/endpoints/filters/audit.go`` does.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from apiserver.audit.buffered import BufferedSink
from apiserver.audit.interface import AuditEvent, AuditMetrics, BackendOptions, LineSink, Sink
from apiserver.audit.truncate import TruncatingSink

__all__ = ["IgnoreErrorsSink", "wrap"]


def _true(_: object) -> bool:
    return True


class IgnoreErrorsSink:
    """``ignoreErrorsBackend`` (``pkg/server/options/audit.go``): blocking mode. The request
    still waits for a backend that answers a Deferred, but the answer is always True."""

    def __init__(self, delegate: Sink) -> None:
        self.delegate = delegate
        self.name = delegate.name

    def process_events(self, events: Sequence[AuditEvent]) -> bool | Deferred[bool]:
        result = self.delegate.process_events(events)
        if isinstance(result, Deferred):
            return result.addBoth(_true)
        return True

    def start(self) -> None:
        self.delegate.start()

    def shutdown(self) -> Deferred[None]:
        return self.delegate.shutdown()

    def __repr__(self) -> str:
        return f"ignoreErrors<{self.delegate!r}>"


def wrap(
    delegate: Sink,
    options: BackendOptions,
    clock: IReactorTime,
    metrics: AuditMetrics,
    *,
    lines: LineSink | None = None,
) -> Sink:
    """The backend as the server uses it: the mode's wrapper, then truncation outermost
    (``newBackend`` in k8s.io/apiserver ``pkg/server/options/audit.go``).

    As there, truncation sees what the filter sends (usually one event per call) and splits
    only those calls; in batch mode the buffered backend then batches by event count.
    ``lines`` is the delegate again when its events are independent lines (the log
    backend): batch mode then encodes each event as it comes and writes every due batch at
    once (see :mod:`apiserver.audit.buffered`).
    """
    sink: Sink
    if options.mode == "batch":
        sink = BufferedSink(delegate, options.batch, clock, metrics, lines=lines)
    elif options.mode == "blocking":
        sink = IgnoreErrorsSink(delegate)
    else:
        sink = delegate
    if options.truncate.enabled:
        sink = TruncatingSink(sink, options.truncate, metrics)
    return sink
