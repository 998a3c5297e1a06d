"""Batch mode (k8s.io/apiserver plugin/pkg/audit/buffered/buffered.go) on a fake clock."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock
from twisted.logger import ILogObserver, LogEvent, formatEvent, globalLogPublisher
from zope.interface import implementer

from apiserver.audit.buffered import COALESCE_INTERVAL, HOLD_MAX, BufferedSink, TokenBucket
from apiserver.audit.compose import IgnoreErrorsSink, wrap
from apiserver.audit.interface import (
    AuditEvent,
    BackendOptions,
    BatchOptions,
    NoMetrics,
    TruncateOptions,
)
from apiserver.audit.truncate import TruncatingSink


class Recorder:
    """A delegate that records batches; with ``defer`` set it answers Deferreds the test fires."""

    name = "fake"

    def __init__(self, defer: bool = False, answer: bool = True) -> None:
        self.batches: list[list[AuditEvent]] = []
        self.defer = defer
        self.answer = answer
        self.pending: list[Deferred[bool]] = []
        self.started = False
        self.shut = False

    def process_events(self, events: Sequence[AuditEvent]) -> bool | Deferred[bool]:
        self.batches.append(list(events))
        if self.defer:
            d: Deferred[bool] = Deferred()
            self.pending.append(d)
            return d
        return self.answer

    def start(self) -> None:
        self.started = True

    def shutdown(self) -> Deferred[None]:
        self.shut = True
        return succeed(None)

    def ids(self) -> list[list[Any]]:
        return [[e["auditID"] for e in batch] for batch in self.batches]


class Metrics(NoMetrics):
    def __init__(self) -> None:
        self.errors: list[tuple[str, int]] = []

    def error(self, plugin: str, count: int) -> None:
        self.errors.append((plugin, count))


@pytest.fixture
def caplog_twisted() -> Iterator[list[str]]:
    """The text of what the audit modules log during the test."""
    lines: list[str] = []

    @implementer(ILogObserver)
    def observe(event: LogEvent) -> None:
        if str(event.get("log_namespace", "")).startswith("apiserver.audit"):
            lines.append(formatEvent(event))

    globalLogPublisher.addObserver(observe)
    yield lines
    globalLogPublisher.removeObserver(observe)


def ev(n: int) -> AuditEvent:
    return {"kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata", "auditID": n}


def options(**kw: Any) -> BatchOptions:
    base: dict[str, Any] = {
        "buffer_size": 100,
        "max_size": 3,
        "max_wait": 30.0,
        "throttle_enable": False,
        "throttle_qps": 0.0,
        "throttle_burst": 0,
    }
    base.update(kw)
    return BatchOptions(**base)


def make(
    delegate: Recorder | None = None, **kw: Any
) -> tuple[BufferedSink, Recorder, Clock, Metrics]:
    clock = Clock()
    delegate = delegate or Recorder()
    metrics = Metrics()
    sink = BufferedSink(delegate, options(**kw), clock, metrics)
    sink.start()
    return sink, delegate, clock, metrics


def test_name_is_the_delegates_and_start_starts_it() -> None:
    sink, delegate, _, _ = make()
    assert sink.name == "fake"
    assert delegate.started


def test_queues_without_sending_until_max_size() -> None:
    sink, delegate, clock, _ = make()
    assert sink.process_events([ev(1), ev(2)]) is True
    clock.advance(0)
    assert delegate.batches == []
    sink.process_events([ev(3), ev(4)])
    assert delegate.batches == []  # never in the caller's stack
    clock.advance(0)
    assert delegate.ids() == [[1, 2, 3]]
    clock.advance(29.9)
    assert delegate.ids() == [[1, 2, 3]]


def test_max_wait_sends_an_unfilled_batch() -> None:
    sink, delegate, clock, _ = make()
    sink.process_events([ev(1)])
    clock.advance(10)
    sink.process_events([ev(2)])
    clock.advance(19.9)
    assert delegate.batches == []
    clock.advance(0.1)
    assert delegate.ids() == [[1, 2]]
    # The timer starts again with the next event.
    clock.advance(100)
    sink.process_events([ev(3)])
    clock.advance(29)
    assert delegate.ids() == [[1, 2]]
    clock.advance(1)
    assert delegate.ids() == [[1, 2], [3]]


def test_max_size_one_sends_each_event_on_the_next_turn() -> None:
    # The log backend's batch default (defaultLogBatchConfig: MaxBatchSize 1).
    sink, delegate, clock, _ = make(max_size=1, max_wait=0.0)
    sink.process_events([ev(1), ev(2)])
    sink.process_events([ev(3)])
    assert delegate.batches == []
    clock.advance(0)
    assert delegate.ids() == [[1], [2], [3]]


def test_events_are_queued_as_sent_without_copies() -> None:
    # The filter never changes an event it sent (the Sink contract), so no copy is made.
    sink, delegate, clock, _ = make(max_size=1)
    event = ev(1) | {"annotations": {"a": "1"}}
    sink.process_events([event])
    clock.advance(0)
    assert delegate.batches[0][0] is event


class LineRecorder(Recorder):
    """A line backend (``LineSink``): events become lines when queued; ``write_lines``
    records each call as a batch. An event whose auditID is negative cannot be encoded."""

    def __init__(self, defer: bool = False) -> None:
        super().__init__(defer)
        self.encoded: list[Any] = []
        self.failures: list[str] = []

    def encode(self, event: AuditEvent) -> bytes:
        self.encoded.append(event["auditID"])
        if event["auditID"] < 0:
            raise ValueError("cannot encode")
        return str(event["auditID"]).encode()

    def encode_failed(self, problem: Exception) -> None:
        self.failures.append(str(problem))

    def write_lines(self, lines: Sequence[bytes]) -> Any:
        return self.process_events([{"auditID": int(line)} for line in lines])


def make_coalescing(
    delegate: LineRecorder | None = None, **kw: Any
) -> tuple[BufferedSink, LineRecorder, Clock]:
    clock = Clock()
    delegate = delegate or LineRecorder()
    sink = BufferedSink(delegate, options(**kw), clock, Metrics(), lines=delegate)
    sink.start()
    return sink, delegate, clock


def test_lines_are_encoded_as_events_come_and_bad_ones_left_out() -> None:
    sink, delegate, clock = make_coalescing(max_size=1, max_wait=0.0)
    assert sink.process_events([ev(1), ev(-2), ev(3)]) is True
    assert delegate.encoded == [1, -2, 3]  # before any pump
    assert delegate.failures == ["cannot encode"]
    assert delegate.batches == []
    clock.advance(0)
    assert delegate.ids() == [[1, 3]]


def test_coalescing_hands_every_due_batch_over_in_one_call() -> None:
    # The log backend: three one-event batches due on the same turn are one write.
    sink, delegate, clock = make_coalescing(max_size=1, max_wait=0.0)
    sink.process_events([ev(1)])
    sink.process_events([ev(2)])
    sink.process_events([ev(3)])
    assert delegate.batches == []
    assert len(clock.getDelayedCalls()) == 1  # one pump scheduled, not one per event
    clock.advance(0)
    assert delegate.ids() == [[1, 2, 3]]
    # Under load the next write waits for the coalescing interval, then takes everything.
    sink.process_events([ev(4)])
    clock.advance(0)
    sink.process_events([ev(5)])
    assert delegate.ids() == [[1, 2, 3]]
    assert len(clock.getDelayedCalls()) == 1
    clock.advance(COALESCE_INTERVAL)
    assert delegate.ids() == [[1, 2, 3], [4, 5]]
    # After a quiet spell an event goes out on the next turn again.
    clock.advance(1)
    sink.process_events([ev(6)])
    clock.advance(0)
    assert delegate.ids() == [[1, 2, 3], [4, 5], [6]]


def test_a_held_line_waits_for_the_line_that_ends_its_request() -> None:
    # A request answered at once: its RequestReceived is held (no timer), its
    # ResponseComplete writes both at once when the last write is old enough.
    sink, delegate, clock = make_coalescing(max_size=1, max_wait=0.0)
    clock.advance(1)
    assert sink.hold_line(b"1") is True
    assert delegate.batches == [] and sink.call is None  # no pump: only the hold bound
    assert sink.end_line(b"2") is True
    assert delegate.ids() == [[1, 2]] and sink.call is None
    # Within the coalescing interval of that write: the pump is scheduled instead.
    sink.hold_line(b"3")
    sink.end_line(b"4")
    assert delegate.ids() == [[1, 2]]
    assert sink.call is not None
    clock.advance(COALESCE_INTERVAL)
    assert delegate.ids() == [[1, 2], [3, 4]]


def test_any_other_line_sends_held_lines_and_release_does_when_none_follows() -> None:
    sink, delegate, clock = make_coalescing(max_size=1, max_wait=0.0)
    clock.advance(1)
    sink.hold_line(b"1")  # a slow request's RequestReceived
    sink.process_line(b"2")  # another request's line
    clock.advance(0)
    assert delegate.ids() == [[1, 2]]
    clock.advance(1)
    sink.hold_line(b"3")
    sink.release()  # its request ended without a line of its own
    clock.advance(0)
    assert delegate.ids() == [[1, 2], [3]]
    sink.release()  # nothing held: nothing scheduled
    assert sink.call is None


def test_a_held_line_nothing_follows_goes_out_within_hold_max() -> None:
    sink, delegate, clock = make_coalescing(max_size=1, max_wait=0.0)
    clock.advance(1)
    sink.hold_line(b"1")  # a slow request's RequestReceived, on a quiet server
    sink.hold_line(b"2")  # another one: still one timer
    assert len(clock.getDelayedCalls()) == 1
    clock.advance(HOLD_MAX - 0.01)
    assert delegate.ids() == []
    clock.advance(0.01)
    clock.advance(0)
    assert delegate.ids() == [[1, 2]]
    assert clock.getDelayedCalls() == []  # nothing held: no timer left
    sink.hold_line(b"3")
    sink.shutdown()  # drains the held line and cancels the bound
    assert delegate.ids() == [[1, 2], [3]] and clock.getDelayedCalls() == []


def test_lines_are_held_only_when_every_line_is_due_at_once() -> None:
    # Batches of two: hold_line and end_line are process_line.
    sink, delegate, clock = make_coalescing(max_size=2, max_wait=5.0)
    sink.hold_line(b"1")
    assert len(clock.getDelayedCalls()) == 1  # the max-wait timer
    sink.end_line(b"2")
    clock.advance(0)
    assert delegate.ids() == [[1, 2]]
    # After shutdown a line is refused (blocking-strict callers fail the request).
    sink.shutdown()
    assert sink.hold_line(b"3") is False and sink.end_line(b"4") is False


def test_held_lines_are_drained_on_shutdown() -> None:
    sink, delegate, _ = make_coalescing(max_size=1, max_wait=0.0)
    sink.hold_line(b"1")
    done = sink.shutdown()
    assert delegate.ids() == [[1]] and done.called


def test_coalescing_keeps_a_partial_batch_until_its_wait_is_over() -> None:
    sink, delegate, clock = make_coalescing(max_size=2, max_wait=5.0)
    sink.process_events([ev(1), ev(2), ev(3), ev(4), ev(5)])
    clock.advance(0)
    assert delegate.ids() == [[1, 2, 3, 4]]  # the two full batches; 5 waits
    clock.advance(4.9)
    assert delegate.ids() == [[1, 2, 3, 4]]
    clock.advance(0.1)
    assert delegate.ids() == [[1, 2, 3, 4], [5]]


def test_coalescing_sends_a_partial_batch_with_the_full_ones_once_it_is_due() -> None:
    # Events pile up while a batch is with a slow delegate; when it answers, the full
    # batches and the partial one whose wait is over leave together.
    sink, delegate, clock = make_coalescing(LineRecorder(defer=True), max_size=3, max_wait=5.0)
    sink.process_events([ev(1), ev(2), ev(3)])
    clock.advance(0)
    assert delegate.ids() == [[1, 2, 3]]
    sink.process_events([ev(4), ev(5), ev(6), ev(7)])
    clock.advance(6)  # 7's wait is over, but a batch is still in flight
    assert delegate.ids() == [[1, 2, 3]]
    delegate.pending[0].callback(True)
    assert delegate.ids() == [[1, 2, 3], [4, 5, 6, 7]]


def test_coalescing_drains_everything_on_shutdown() -> None:
    sink, delegate, _ = make_coalescing(max_size=2, max_wait=60.0)
    sink.process_events([ev(1), ev(2), ev(3)])
    done = sink.shutdown()
    assert delegate.ids() == [[1, 2, 3]]
    assert done.called and delegate.shut


def test_a_throttle_turns_coalescing_off() -> None:
    # The throttle counts batches, so they keep their size.
    sink, delegate, clock = make_coalescing(
        max_size=1, max_wait=0.0, throttle_enable=True, throttle_qps=100.0, throttle_burst=10
    )
    sink.process_events([ev(1), ev(2)])
    clock.advance(0)
    assert delegate.ids() == [[1], [2]]


def test_full_buffer_drops_counts_and_logs_rate_limited(caplog_twisted: list[str]) -> None:
    sink, delegate, clock, metrics = make(buffer_size=3, max_size=10)
    assert sink.process_events([ev(1), ev(2)]) is True
    assert sink.process_events([ev(3), ev(4), ev(5)]) is True  # 4 and 5 dropped, still True
    assert sink.process_events([ev(6)]) is True
    assert metrics.errors == [("buffered", 2), ("buffered", 1)]
    blocked = [line for line in caplog_twisted if "audit buffer queue blocked" in line]
    assert len(blocked) == 1
    assert "affecting 2 audit events" in blocked[0]
    clock.advance(1)
    sink.process_events([ev(7), ev(8), ev(9)])  # the max_wait timer has not fired: still full
    blocked = [line for line in caplog_twisted if "audit buffer queue blocked" in line]
    assert len(blocked) == 2
    assert "affecting 4 audit events" in blocked[1]  # 1 unlogged + 3 now
    clock.advance(29)
    assert delegate.ids() == [[1, 2, 3]]
    sink.process_events([ev(10)])  # room again
    assert metrics.errors[-1] == ("buffered", 3)
    assert len(sink.queue) == 1


def test_one_batch_in_flight_at_a_time() -> None:
    sink, delegate, clock, _ = make(Recorder(defer=True), max_size=2)
    sink.process_events([ev(n) for n in range(1, 6)])
    clock.advance(0)
    assert delegate.ids() == [[1, 2]]
    clock.advance(60)
    assert delegate.ids() == [[1, 2]]
    delegate.pending[0].callback(True)
    assert delegate.ids() == [[1, 2], [3, 4]]
    delegate.pending[1].errback(RuntimeError("receiver down"))  # logged, not fatal
    # [5] waited long enough already (queued at 0, max_wait 30).
    assert delegate.ids() == [[1, 2], [3, 4], [5]]


def test_throttle_limits_batches_per_second() -> None:
    sink, delegate, clock, _ = make(
        max_size=1, throttle_enable=True, throttle_qps=2.0, throttle_burst=2
    )
    sink.process_events([ev(n) for n in range(1, 7)])
    clock.advance(0)
    assert delegate.ids() == [[1], [2]]  # the burst
    clock.advance(0.49)
    assert len(delegate.batches) == 2
    clock.advance(0.01)
    assert len(delegate.batches) == 3
    clock.advance(0.5)
    assert len(delegate.batches) == 4
    clock.advance(0.5)
    clock.advance(0.5)
    assert len(delegate.batches) == 6
    clock.advance(10)
    # Idle time refills the bucket up to the burst, no more.
    sink.process_events([ev(n) for n in range(7, 11)])
    clock.advance(0)
    assert len(delegate.batches) == 8


def test_token_bucket() -> None:
    clock = Clock()
    bucket = TokenBucket(10.0, 3, clock)
    assert [bucket.reserve() for _ in range(3)] == [0.0, 0.0, 0.0]
    assert round(bucket.reserve(), 6) == 0.1
    assert round(bucket.reserve(), 6) == 0.2
    clock.advance(100)
    assert bucket.reserve() == 0.0


def test_shutdown_drains_everything_then_shuts_the_delegate() -> None:
    sink, delegate, clock, metrics = make(Recorder(defer=True), max_size=2, max_wait=3600.0)
    sink.process_events([ev(1)])
    clock.advance(10)
    sink.process_events([ev(2), ev(3)])
    clock.advance(0)
    assert delegate.ids() == [[1, 2]]
    sink.process_events([ev(4), ev(5), ev(6)])
    done = sink.shutdown()
    assert not done.called
    assert sink.process_events([ev(7)]) is False  # no longer accepting
    assert metrics.errors == [("buffered", 1)]
    delegate.pending[0].callback(True)
    assert delegate.ids() == [[1, 2], [3, 4]]  # no waiting for max_wait any more
    assert not done.called
    delegate.pending[1].callback(True)
    assert delegate.ids() == [[1, 2], [3, 4], [5, 6]]
    assert not done.called and not delegate.shut
    delegate.pending[2].callback(False)
    assert done.called and delegate.shut
    assert sink.shutdown().called


def test_shutdown_with_nothing_queued_fires_at_once() -> None:
    sink, delegate, _, _ = make()
    assert sink.shutdown().called
    assert delegate.shut


def test_shutdown_still_throttles() -> None:
    # buffered.go's Run loop calls processEvents, hence throttle.Accept, while draining.
    sink, delegate, clock, _ = make(
        max_size=1, throttle_enable=True, throttle_qps=1.0, throttle_burst=1
    )
    sink.process_events([ev(1), ev(2), ev(3)])
    done = sink.shutdown()
    assert delegate.ids() == [[1]]
    assert not done.called
    clock.advance(1)
    clock.advance(1)
    assert delegate.ids() == [[1], [2], [3]]
    assert done.called


def test_events_before_start_wait_for_start() -> None:
    clock = Clock()
    delegate = Recorder()
    sink = BufferedSink(delegate, options(max_size=1), clock, NoMetrics())
    sink.process_events([ev(1)])
    clock.advance(1)
    assert delegate.batches == []
    sink.start()
    assert delegate.ids() == [[1]]


def backend(mode: str, truncate: bool = False) -> BackendOptions:
    return BackendOptions(
        mode=mode,  # type: ignore[arg-type]
        batch=options(),
        truncate=TruncateOptions(enabled=truncate, max_event_size=100, max_batch_size=1000),
        version="audit.k8s.io/v1",
    )


def test_wrap_follows_the_modes() -> None:
    clock = Clock()
    failing = Recorder(answer=False)
    batch = wrap(failing, backend("batch"), clock, NoMetrics())
    assert isinstance(batch, BufferedSink)
    assert batch.process_events([ev(1)]) is True
    blocking = wrap(failing, backend("blocking"), clock, NoMetrics())
    assert isinstance(blocking, IgnoreErrorsSink)
    assert blocking.process_events([ev(1)]) is True
    assert wrap(failing, backend("blocking-strict"), clock, NoMetrics()) is failing
    assert failing.process_events([ev(1)]) is False
    # Truncation is outermost (pkg/server/options/audit.go newBackend).
    truncating = wrap(failing, backend("batch", truncate=True), clock, NoMetrics())
    assert isinstance(truncating, TruncatingSink)
    assert isinstance(truncating.delegate, BufferedSink)
    assert truncating.name == "fake"


def test_blocking_waits_for_a_deferred_and_answers_true() -> None:
    delegate = Recorder(defer=True)
    sink = wrap(delegate, backend("blocking"), Clock(), NoMetrics())
    answer = sink.process_events([ev(1)])
    assert isinstance(answer, Deferred)
    assert not answer.called
    delegate.pending[0].callback(False)
    assert answer.called
    assert answer.result is True
