"""The truncating backend (k8s.io/apiserver plugin/pkg/audit/truncate/truncate.go)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from twisted.internet.defer import Deferred, succeed

from apiserver.audit.encoding import encode_event
from apiserver.audit.interface import AuditEvent, NoMetrics, TruncateOptions
from apiserver.audit.truncate import TruncatingSink, all_accepted


class Recorder:
    name = "webhook"

    def __init__(self, answers: list[bool | Deferred[bool]] | None = None) -> None:
        self.batches: list[list[AuditEvent]] = []
        self.answers = answers or []

    def process_events(self, events: Sequence[AuditEvent]) -> bool | Deferred[bool]:
        self.batches.append(list(events))
        return self.answers.pop(0) if self.answers else True

    def start(self) -> None:
        pass

    def shutdown(self) -> Deferred[None]:
        return succeed(None)


class Metrics(NoMetrics):
    def __init__(self) -> None:
        self.errors: list[tuple[str, int]] = []

    def error(self, plugin: str, count: int) -> None:
        self.errors.append((plugin, count))


def event(n: int, level: str = "RequestResponse", body: int = 0, **extra: Any) -> AuditEvent:
    ev: AuditEvent = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": level,
        "auditID": f"id-{n}",
        "stage": "ResponseComplete",
    }
    if body:
        ev["requestObject"] = {"data": "x" * body}
        ev["responseObject"] = {"data": "y" * body}
    ev.update(extra)
    return ev


def sink(
    max_event: int = 400, max_batch: int = 1000, answers: list[bool | Deferred[bool]] | None = None
) -> tuple[TruncatingSink, Recorder, Metrics]:
    delegate = Recorder(answers)
    metrics = Metrics()
    options = TruncateOptions(enabled=True, max_event_size=max_event, max_batch_size=max_batch)
    return TruncatingSink(delegate, options, metrics), delegate, metrics


def test_small_events_pass_unchanged() -> None:
    s, delegate, metrics = sink()
    events = [event(1, body=10), event(2)]
    assert s.process_events(events) is True
    assert delegate.batches == [events]
    assert metrics.errors == []
    assert s.name == "webhook"


def test_large_event_loses_its_objects_and_is_annotated() -> None:
    s, delegate, metrics = sink()
    big = event(1, body=300, annotations={"authorization.k8s.io/decision": "allow", "b.io/x": "y"})
    assert s.process_events([big]) is True
    (sent,) = delegate.batches[0]
    assert "requestObject" not in sent and "responseObject" not in sent
    # In the order Go encodes a map: sorted keys.
    assert list(sent["annotations"].items()) == [
        ("audit.k8s.io/truncated", "true"),
        ("authorization.k8s.io/decision", "allow"),
        ("b.io/x", "y"),
    ]
    assert "requestObject" in big  # the caller's event is not changed
    assert "audit.k8s.io/truncated" not in big["annotations"]
    assert metrics.errors == []


def test_size_is_the_json_line_with_its_newline() -> None:
    ev = event(1, body=50)
    size = len(encode_event(ev))
    s, delegate, _ = sink(max_event=size)
    s.process_events([ev])
    assert "requestObject" in delegate.batches[0][0]
    s, delegate, _ = sink(max_event=size - 1)
    s.process_events([ev])
    assert "requestObject" not in delegate.batches[0][0]


def test_metadata_event_too_large_is_dropped_not_truncated() -> None:
    # Level below Request: nothing to strip, so the event is dropped at once.
    s, delegate, metrics = sink(max_event=150)
    big = event(1, level="Metadata", userAgent="u" * 200)
    assert s.process_events([big, event(2)]) is True  # upstream answers the delegate's answer
    assert [e["auditID"] for b in delegate.batches for e in b] == ["id-2"]
    assert metrics.errors == [("truncate", 1)]


def test_still_too_large_after_truncating_is_dropped_and_logged() -> None:
    s, delegate, metrics = sink(max_event=150)
    big = event(1, body=500, userAgent="u" * 200)
    s.process_events([big])
    assert delegate.batches == []
    assert metrics.errors == [("truncate", 1)]


def test_batches_are_split_by_size() -> None:
    ev = event(1, body=30)
    size = len(encode_event(ev))
    s, delegate, _ = sink(max_event=size, max_batch=2 * size + 1)
    events = [event(n, body=30) for n in range(5)]
    assert all(len(encode_event(e)) == size for e in events)
    assert s.process_events(events) is True
    assert [[e["auditID"] for e in b] for b in delegate.batches] == [
        ["id-0", "id-1"],
        ["id-2", "id-3"],
        ["id-4"],
    ]


def test_answer_is_false_when_one_delegate_call_fails() -> None:
    size = len(encode_event(event(0, body=30)))
    s, _, _ = sink(max_event=size, max_batch=size, answers=[True, False, True])
    assert s.process_events([event(n, body=30) for n in range(3)]) is False


def test_deferred_answers_are_combined() -> None:
    size = len(encode_event(event(0, body=30)))
    first: Deferred[bool] = Deferred()
    s, _, _ = sink(max_event=size, max_batch=size, answers=[first, True])
    answer = s.process_events([event(n, body=30) for n in range(2)])
    assert isinstance(answer, Deferred)
    assert not answer.called
    first.callback(True)
    assert answer.result is True
    failing: Deferred[bool] = Deferred()
    combined = all_accepted([True, failing])
    assert isinstance(combined, Deferred)
    failing.callback(False)
    assert combined.result is False
