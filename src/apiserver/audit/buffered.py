"""The buffered backend: batch mode (``--audit-<b>-mode=batch``).

Follows k8s.io/apiserver ``plugin/pkg/audit/buffered/buffered.go``, with the goroutine and
channel replaced by a queue and timers on the injected clock:

- ``process_events`` never waits: events are put in a queue of
  ``--audit-<b>-batch-buffer-size`` events; when it is full the event and the rest of the call
  are dropped, counted under the plugin ``buffered`` and logged ``audit buffer queue blocked``
  (here at most once a second, with the number dropped since, instead of once per call). The
  answer is True even then, as upstream; after ``shutdown`` it is False.
- A batch goes to the delegate when ``--audit-<b>-batch-max-size`` events are queued, or when
  ``--audit-<b>-batch-max-wait`` has passed since the oldest queued event was queued (upstream
  restarts a timer at each batch; both bound how long an event waits). With a max size of 1
  there is no waiting: each event is sent on the next turn of the reactor.
- With ``--audit-<b>-batch-throttle-enable`` each batch takes a token of a bucket refilled at
  ``--audit-<b>-batch-throttle-qps`` holding ``--audit-<b>-batch-throttle-burst`` tokens, full
  at first (client-go ``flowcontrol.NewTokenBucketRateLimiter``; ``Accept`` waits for a token).
- Upstream deep-copies each event because its filter keeps changing the one event it has for
  the next stage; here the filter renders a new event per stage and never changes one it sent
  (the :class:`~apiserver.audit.interface.Sink` contract), so the queue holds them as they are.
- With ``lines`` (the log backend, a :class:`~apiserver.audit.interface.LineSink`, whose
  batches are only lines appended to a file) each event is encoded as it comes, while it is
  still in the processor's cache, and the queue holds its line; every batch that is due is
  then handed over in one call, so a turn of the reactor that has many one-event batches due
  (``--audit-log-batch-max-size`` is 1 by default) writes them with one ``write``: the file
  gets the same lines in the same order. Under load such a write happens at most every
  :data:`COALESCE_INTERVAL` (5 ms; the first events after a quiet spell go out on the next
  turn): a ``write`` and a timer per turn of the reactor cost more than encoding the events.
  When every queued line is due at once (batches of one event, no throttle: the
  defaults), a request's ``RequestReceived`` line may be held without scheduling the pump
  (:meth:`BufferedSink.hold_line`, used by the audit stage for a request whose lines come
  from a template): its ``ResponseComplete`` (:meth:`BufferedSink.end_line`) writes the
  queue at once when the last write is :data:`COALESCE_INTERVAL` old, else schedules the
  pump, so that a request answered at once costs no timer. Any other line schedules the
  pump for held lines too; the file gets the same lines in the same order.
  Events are in memory until written, as in any batch mode (blocking mode writes each one
  before the request goes on). With a throttle, which counts batches, they keep
  their size. An event that cannot be encoded is counted and logged by the backend then, as
  it would be when written.
- One batch is with the delegate at a time: the next is sent when the delegate answered (its
  Deferred fired). Upstream sends webhook batches concurrently; one at a time keeps the order
  of the records and bounds the memory a slow receiver can pin.
- ``shutdown`` stops accepting, sends every queued event in batches without waiting for
  ``max-wait`` (the throttle still applies, as upstream's shutdown loop calls ``Accept`` too),
  then shuts the delegate down, and fires when all that is done: no acknowledged request's
  record is lost on a graceful shutdown.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.audit.interface import AuditEvent, AuditMetrics, BatchOptions, LineSink, Sink

__all__ = ["BufferedSink", "TokenBucket"]

log = Logger()

PLUGIN_NAME = "buffered"

#: Seconds a line backend's due events may wait so that one ``write`` takes them all: under
#: load, a write (and a timer) per turn of the reactor cost more than the events' encoding.
COALESCE_INTERVAL = 0.005
#: Seconds a request's held ``RequestReceived`` line (:meth:`BufferedSink.hold_line`) may
#: wait for a line that sends it; then it is sent alone. Upstream's log backend writes it
#: at once; this keeps the difference within a second for a slow request on a quiet server.
HOLD_MAX = 1.0

#: Seconds between two ``audit buffer queue blocked`` messages.
BLOCKED_LOG_INTERVAL = 1.0


class TokenBucket:
    """client-go's token bucket (``golang.org/x/time/rate.Limiter`` under
    ``flowcontrol.NewTokenBucketRateLimiter``): ``burst`` tokens at first, ``qps`` more per
    second up to ``burst``. :meth:`reserve` takes a token now, possibly going into debt, and
    says how long to wait before using it (``Limiter.Wait``)."""

    def __init__(self, qps: float, burst: int, clock: IReactorTime) -> None:
        self.qps = qps
        self.burst = float(burst)
        self.clock = clock
        self.tokens = float(burst)
        self.last = clock.seconds()

    def reserve(self) -> float:
        now = self.clock.seconds()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.qps)
        self.last = now
        self.tokens -= 1.0
        if self.tokens >= 0 or self.qps <= 0:  # a rate of 0 is refused by option validation
            return 0.0
        return -self.tokens / self.qps


class BufferedSink:
    """``buffered.NewBackend``: batches events for ``delegate`` (see the module docstring)."""

    def __init__(
        self,
        delegate: Sink,
        options: BatchOptions,
        clock: IReactorTime,
        metrics: AuditMetrics,
        *,
        lines: LineSink | None = None,
    ) -> None:
        self.delegate = delegate
        self.name = delegate.name
        self.clock = clock
        self.metrics = metrics
        self.buffer_size = options.buffer_size
        self.max_size = max(1, options.max_size)
        self.max_wait = options.max_wait
        self.bucket = (
            TokenBucket(options.throttle_qps, options.throttle_burst, clock)
            if options.throttle_enable
            else None
        )
        #: Queue encoded lines, and hand every due batch over in one call (see the module
        #: docstring).
        self.lines = lines
        self.coalesce = lines is not None and self.bucket is None
        # (time queued, event), oldest first.
        self.queue: deque[tuple[float, Any]] = deque()
        self.started = False
        self.accepting = True
        self.draining = False
        self.in_flight = False
        self.pumping = False
        self.token_reserved = False
        #: A pump is scheduled for every queued event already.
        self.due_now = False
        #: Seconds between two writes of a line backend (0: none), and the last pump's time.
        self.interval = COALESCE_INTERVAL if self.coalesce else 0.0
        #: Every queued line is due at once (a line backend, batches of one event, no
        #: throttle): :meth:`hold_line` and :meth:`end_line` apply.
        self.eager = self.coalesce and self.max_size == 1
        self.last_pump = float("-inf")
        self.call: IDelayedCall | None = None
        #: The timer that sends held lines (:meth:`hold_line`) no later than HOLD_MAX.
        self.hold_call: IDelayedCall | None = None
        self.dropped_unlogged = 0
        self.last_blocked_log: float | None = None
        self.drained: list[Deferred[None]] = []
        self.delegate_shutdown: Deferred[None] | None = None

    # -- the Sink contract -------------------------------------------------------------------

    def process_events(self, events: Sequence[AuditEvent]) -> bool:
        if not self.accepting:
            # Upstream sends on a closed channel, recovers and answers false.
            self._plugin_error(len(events), "audit backend shut down")
            return False
        queue = self.queue
        if self.due_now and len(events) == 1 and len(queue) < self.buffer_size:
            # The usual call under load: one event, and a pump already due (so every queued
            # event is, and its queued time is never read).
            self._enqueue(0.0, events[0])
            return True
        now = self.clock.seconds()
        was_empty = not queue
        for index, event in enumerate(events):
            if len(queue) >= self.buffer_size:
                self._blocked(len(events) - index)
                break
            self._enqueue(now, event)
        self._queued(now, was_empty)
        return True

    def process_line(self, line: bytes) -> bool:
        """:meth:`process_events` of one event already encoded as its backend's line (a
        line backend only: :mod:`apiserver.audit.templates`)."""
        queue = self.queue
        if self.due_now and len(queue) < self.buffer_size:
            queue.append((0.0, line))  # as the usual call of process_events
            return True
        if not self.accepting:
            self._plugin_error(1, "audit backend shut down")
            return False
        if len(queue) >= self.buffer_size:
            self._blocked(1)
            return True
        now = self.clock.seconds()
        queue.append((now, line))
        if len(queue) == 1 or len(queue) >= self.max_size:
            # Otherwise the pump is already due for the queue's head (see _queued).
            self._queued(now, len(queue) == 1)
        return True

    def hold_line(self, line: bytes) -> bool:
        """:meth:`process_line` of a line another will follow soon, which sends both (a
        request's ``RequestReceived``, followed by its ``ResponseComplete`` through
        :meth:`end_line` when the request ends; the audit stage sees to it that one
        follows): when every queued line is due at once (:attr:`eager`), it is queued
        without scheduling the pump, so that a request answered at once costs no timer."""
        queue = self.queue
        if self.eager and self.accepting and len(queue) < self.buffer_size:
            queue.append((0.0, line))  # its queued time is never read (eager)
            if self.hold_call is None:
                # A bound on how late a slow request's first line may reach the backend:
                # one timer per HOLD_MAX at most, whatever the request rate.
                self.hold_call = self.clock.callLater(HOLD_MAX, self._hold_expired)
            return True
        return self.process_line(line)

    def _hold_expired(self) -> None:
        self.hold_call = None
        self.release()

    def end_line(self, line: bytes) -> bool:
        """:meth:`process_line` of the line that ends a request's records: when every
        queued line is due at once (:attr:`eager`) and the last write is
        :data:`COALESCE_INTERVAL` old, the queue is written now, without a timer; else as
        :meth:`process_line`, which schedules the pump for the held lines too."""
        queue = self.queue
        if self.due_now:
            if len(queue) < self.buffer_size:
                queue.append((0.0, line))  # as the usual call of process_line
                return True
        elif (
            self.eager
            and self.accepting
            and len(queue) < self.buffer_size
            and self.started
            and not self.in_flight
            and not self.pumping
            and self.call is None
        ):
            now = self.clock.seconds()
            if now >= self.last_pump + COALESCE_INTERVAL:
                queue.append((0.0, line))
                self.last_pump = now
                self._send([item[1] for item in queue])
                queue.clear()
                return True
        return self.process_line(line)

    def release(self) -> None:
        """Schedule the pump for held lines (:meth:`hold_line`) that no line followed."""
        if self.queue and not self.due_now:
            self._queued(self.clock.seconds(), False)

    def _queued(self, now: float, was_empty: bool) -> None:
        """Schedule the pump for what was just queued."""
        queue = self.queue
        if self.started and queue:
            if len(queue) >= self.max_size or self.max_size == 1:
                if not self.due_now:
                    self.due_now = True
                    # A line backend writes at most once per COALESCE_INTERVAL: the first
                    # event after a quiet spell goes out on the next turn of the reactor.
                    self._schedule(max(0.0, self.last_pump + self.interval - now))
            elif was_empty:
                self._schedule(self.max_wait)

    def _enqueue(self, now: float, event: AuditEvent) -> None:
        """Queue the event, or its line for a line backend (one it cannot encode is counted
        and logged there, and left out)."""
        lines = self.lines
        if lines is None:
            self.queue.append((now, event))
            return
        try:
            self.queue.append((now, lines.encode(event)))
        except (TypeError, ValueError) as problem:
            lines.encode_failed(problem)

    def start(self) -> None:
        """``Run``: start the delegate, and send what was queued before."""
        self.started = True
        self.delegate.start()
        if self.queue:
            self._pump()

    def shutdown(self) -> Deferred[None]:
        """``Shutdown``: send everything queued, then shut the delegate down."""
        self.accepting = False
        self.draining = True
        hold_call, self.hold_call = self.hold_call, None
        if hold_call is not None and hold_call.active():
            hold_call.cancel()
        done: Deferred[None] = Deferred()
        self.drained.append(done)
        if not self.pumping:
            self._pump()
        return done

    def __repr__(self) -> str:
        return f"{PLUGIN_NAME}<{self.delegate!r}>"

    # -- batching ------------------------------------------------------------------------------

    def _schedule(self, delay: float) -> None:
        """Run :meth:`_pump` in ``delay`` seconds, unless it is due sooner already."""
        call = self.call
        if call is not None and call.active():
            if call.getTime() <= self.clock.seconds() + delay:
                return
            call.reset(delay)
            return
        self.call = self.clock.callLater(delay, self._pump)

    def _pump(self) -> None:
        """Send every batch that is due, one at a time, until one must wait."""
        call, self.call = self.call, None
        if call is not None and call.active():
            call.cancel()
        self.due_now = False
        if self.interval:
            self.last_pump = self.clock.seconds()
        self.pumping = True
        try:
            self._send_due()
        finally:
            self.pumping = False
        if self.draining and not self.queue and not self.in_flight:
            self._finish_drain()

    def _send_due(self) -> None:
        queue = self.queue
        while queue and not self.in_flight:
            if not self.draining and len(queue) < self.max_size:
                due = queue[0][0] + self.max_wait
                now = self.clock.seconds()
                if now < due:
                    self._schedule(due - now)
                    return
            if self.bucket is not None and not self.token_reserved:
                self.token_reserved = True
                wait = self.bucket.reserve()
                if wait > 0:
                    self._schedule(wait)
                    return
            self.token_reserved = False
            count = min(self.max_size, len(queue))
            if self.coalesce and count < len(queue):
                # Every full batch is due, and the partial last one if its wait is over.
                full = len(queue) - len(queue) % self.max_size
                due = full == len(queue) or self.draining or self._oldest_due(full)
                count = len(queue) if due else full
            self._send([queue.popleft()[1] for _ in range(count)])

    def _oldest_due(self, index: int) -> bool:
        """Whether the event at ``index`` has waited ``max_wait``."""
        return self.queue[index][0] + self.max_wait <= self.clock.seconds()

    def _send(self, batch: list[Any]) -> None:
        self.in_flight = True
        try:
            if self.lines is not None:
                answer: bool | Deferred[bool] = self.lines.write_lines(batch)
            else:
                answer = self.delegate.process_events(batch)
        except Exception:
            log.failure("audit backend {name} failed on a batch", name=self.name)
            answer = False
        # A bool first: Deferred is an ABC, so isinstance against it is slow.
        if type(answer) is not bool and isinstance(answer, Deferred):
            answer.addErrback(self._delegate_failed).addCallback(self._answered)
        else:
            self.in_flight = False

    def _delegate_failed(self, failure: Failure) -> bool:
        log.failure("audit backend {name} failed on a batch", failure, name=self.name)
        return False

    def _answered(self, _: object) -> None:
        self.in_flight = False
        if not self.pumping:
            self._pump()

    def _finish_drain(self) -> None:
        if self.delegate_shutdown is None:
            self.delegate_shutdown = self.delegate.shutdown()
            self.delegate_shutdown.addErrback(
                lambda f: log.failure("audit backend {name} shutdown", f, name=self.name)
            )
            self.delegate_shutdown.addBoth(self._fire_drained)
        elif self.delegate_shutdown.called:
            self._fire_drained(None)

    def _fire_drained(self, _: object) -> None:
        waiting, self.drained = self.drained, []
        for done in waiting:
            done.callback(None)

    # -- errors --------------------------------------------------------------------------------

    def _blocked(self, count: int) -> None:
        """A full buffer: count every dropped event, log now and then."""
        self.metrics.error(PLUGIN_NAME, count)
        self.dropped_unlogged += count
        now = self.clock.seconds()
        last = self.last_blocked_log
        if last is None or now - last >= BLOCKED_LOG_INTERVAL:
            self.last_blocked_log = now
            count, self.dropped_unlogged = self.dropped_unlogged, 0
            log.error(
                "Error in audit plugin '{plugin}' affecting {count} audit events: "
                "audit buffer queue blocked",
                plugin=PLUGIN_NAME,
                count=count,
            )

    def _plugin_error(self, count: int, reason: str) -> None:
        self.metrics.error(PLUGIN_NAME, count)
        log.error(
            "Error in audit plugin '{plugin}' affecting {count} audit events: {reason}",
            plugin=PLUGIN_NAME,
            count=count,
            reason=reason,
        )
