"""The truncating backend: too large events lose their objects, too large calls are split.

Follows k8s.io/apiserver ``plugin/pkg/audit/truncate/truncate.go``: an event whose JSON
encoding is larger than ``--audit-<b>-truncate-max-event-size`` and whose level is at least
``Request`` is replaced by a copy without ``requestObject`` and ``responseObject`` and with the
annotation ``audit.k8s.io/truncated: "true"``; if it is still too large it is dropped, logged
(``event is too large even after truncating``) and counted under the plugin ``truncate``. The
events kept are passed on in calls whose encodings add up to at most
``--audit-<b>-truncate-max-batch-size`` (one event alone may fill a call). The answer is the
delegate's: dropping an event does not make the call fail, as upstream.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet.defer import Deferred, gatherResults, succeed
from twisted.logger import Logger

from apiserver.audit.encoding import encode_event
from apiserver.audit.interface import AuditEvent, AuditMetrics, Sink, TruncateOptions

__all__ = ["TruncatingSink", "all_accepted"]

log = Logger()

PLUGIN_NAME = "truncate"
ANNOTATION_KEY = "audit.k8s.io/truncated"
ANNOTATION_VALUE = "true"

#: Levels at which an event can carry objects worth removing (``Level.GreaterOrEqual``).
_WITH_OBJECTS = frozenset({"Request", "RequestResponse"})


def _all_true(answers: list[bool]) -> bool:
    return all(answers)


def all_accepted(answers: Sequence[bool | Deferred[bool]]) -> bool | Deferred[bool]:
    """The answers of several delegate calls as one: True when all are (a Deferred when one
    is a Deferred), like upstream's ``success = ProcessEvents(...) && success``."""
    if not any(isinstance(answer, Deferred) for answer in answers):
        return all(answers)
    waiting = [answer if isinstance(answer, Deferred) else succeed(answer) for answer in answers]
    return gatherResults(waiting, consumeErrors=True).addCallback(_all_true)


def truncated(event: AuditEvent) -> AuditEvent:
    """A shallow copy without the objects and with the truncation annotation (``truncate``
    in truncate.go)."""
    copy = dict(event)
    copy.pop("requestObject", None)
    copy.pop("responseObject", None)
    annotations = dict(copy.get("annotations") or {})
    annotations[ANNOTATION_KEY] = ANNOTATION_VALUE
    # Go encodes a map with its keys sorted; keep the annotations in that order.
    copy["annotations"] = dict(sorted(annotations.items()))
    return copy


class TruncatingSink:
    """``truncate.NewBackend``: the sink ``delegate`` behind event and batch size limits."""

    def __init__(self, delegate: Sink, options: TruncateOptions, metrics: AuditMetrics) -> None:
        self.delegate = delegate
        self.name = delegate.name
        self.max_event_size = options.max_event_size
        self.max_batch_size = options.max_batch_size
        self.metrics = metrics

    def process_events(self, events: Sequence[AuditEvent]) -> bool | Deferred[bool]:
        answers: list[bool | Deferred[bool]] = []
        batch: list[AuditEvent] = []
        batch_size = 0
        dropped = 0
        for event in events:
            size = len(encode_event(event))
            if size > self.max_event_size and event.get("level") in _WITH_OBJECTS:
                event = truncated(event)
                size = len(encode_event(event))
            if size > self.max_event_size:
                dropped += 1
                continue
            if batch and batch_size + size > self.max_batch_size:
                answers.append(self.delegate.process_events(batch))
                batch = []
                batch_size = 0
            batch_size += size
            batch.append(event)
        if batch:
            answers.append(self.delegate.process_events(batch))
        if dropped:
            # audit.HandlePluginError (pkg/audit/metrics.go and format.go).
            self.metrics.error(PLUGIN_NAME, dropped)
            log.error(
                "Error in audit plugin '{plugin}' affecting {count} audit events: "
                "event is too large even after truncating",
                plugin=PLUGIN_NAME,
                count=dropped,
            )
        return all_accepted(answers)

    def start(self) -> None:
        self.delegate.start()

    def shutdown(self) -> Deferred[None]:
        return self.delegate.shutdown()

    def __repr__(self) -> str:
        return f"{PLUGIN_NAME}<{self.delegate!r}>"
