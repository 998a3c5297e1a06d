"""One priority level's seats and queues: fair queuing with shuffle sharding.

Follows k8s.io/apiserver/pkg/util/flowcontrol/fairqueuing/queueset/queueset.go, simplified
where the difference cannot be seen from outside a single server:

- A request is *dispatched at once* (no queue, no Deferred) when nothing is waiting and the
  level has the seats it asks for; kube-apiserver would put it in a queue and take it out in
  the same step. A request wider than the whole limit runs alone, as there.
- Otherwise the flow is shuffle-sharded onto ``handSize`` of the ``queues`` (kube's
  ``shufflesharding.Dealer`` over the same flow hash, sha256 of schema name and
  distinguisher), and joins the hand's queue with the fewest seats waiting (from a rotating
  offset in the hand, as there);
  a queue holding ``queueLengthLimit`` requests refuses it (reason ``queue-full``).
- Queues are served by start-time fair queuing in seats: each queue has a virtual start, the
  queue with the smallest is served next, and its start moves on by the seats it dispatched.
  kube-apiserver's queueset accounts the seat-seconds actually used (it learns each request's
  duration); here every request counts as the same length, so a flow that sends slow
  requests gets the same number of dispatches as one that sends fast ones.
- A request waits at most its wait limit (a quarter of its deadline, at most a minute,
  ``priority-and-fairness.go``'s ``getRequestWaitContext``), measured on the injected clock,
  then is refused (``time-out``). A client that goes away while waiting is ``cancelled``.

The limit is the level's *current* limit (``apf.py`` sets it: its nominal limit adjusted by
borrowing between levels). A configuration change (:meth:`QueueSet.configure`) keeps the
requests waiting and executing: queues are added, or removed once empty (queueset.go's
``BeginConfigChange``: a queue beyond the new count is dropped when it drains).
"""

from __future__ import annotations

import hashlib
import math
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime

#: ``Rejected`` reasons (k8s.io/apiserver/pkg/util/flowcontrol/metrics: ``reason`` label).
QUEUE_FULL = "queue-full"
TIME_OUT = "time-out"
CONCURRENCY_LIMIT = "concurrency-limit"
CANCELLED = "cancelled"


def flow_hash(schema: str, distinguisher: str) -> int:
    """apf_controller.go's ``hashFlowID``: sha256 of ``schema \\0 distinguisher``, the first
    eight bytes little-endian."""
    digest = hashlib.sha256(schema.encode() + b"\0" + distinguisher.encode()).digest()
    return int.from_bytes(digest[:8], "little")


def deal(hash_value: int, deck_size: int, hand_size: int) -> list[int]:
    """The hand of ``hand_size`` distinct queue indexes for ``hash_value`` (k8s.io/apimachinery/
    pkg/util/shufflesharding: mixed-radix digits of the hash, each skipping the cards already
    dealt)."""
    remainders = []
    for i in range(hand_size):
        base = deck_size - i
        hash_value, rem = divmod(hash_value, base)
        remainders.append(rem)
    hand = []
    for i in range(hand_size):
        card = remainders[i]
        for j in range(i, 0, -1):
            if card >= remainders[j - 1]:
                card += 1
        hand.append(card)
    return hand


class Waiting:
    """A request in a queue (and, once dispatched from one, executing)."""

    __slots__ = (
        "arrived",
        "deferred",
        "details",
        "distinguisher",
        "queue",
        "schema",
        "seats",
        "started",
        "timer",
    )

    def __init__(
        self, seats: int, queue: Queue, arrived: float, schema: str, distinguisher: str
    ) -> None:
        self.seats = seats
        self.queue: Queue | None = queue
        self.deferred: Deferred[bool] = Deferred()
        self.arrived = arrived
        self.started: float | None = None
        self.timer: IDelayedCall | None = None
        self.schema = schema
        self.distinguisher = distinguisher
        #: What ``dump_requests?includeRequestDetails=1`` adds (user, verb, path, ...).
        self.details: tuple[str, ...] = ()


class Queue:
    __slots__ = ("executing", "index", "seats_in_use", "seats_waiting", "virtual_start", "waiting")

    def __init__(self, index: int) -> None:
        self.index = index
        self.waiting: deque[Waiting] = deque()
        self.seats_waiting = 0
        self.executing: list[Waiting] = []
        self.seats_in_use = 0
        self.virtual_start = 0.0


class QueueSet:
    """The seats of one Limited priority level (``Reject`` levels have ``queues == 0``)."""

    def __init__(
        self,
        clock: IReactorTime,
        limit: int,
        queues: int = 0,
        hand_size: int = 0,
        queue_length_limit: int = 0,
    ) -> None:
        self.clock = clock
        self.limit = limit
        self.hand_size = min(hand_size, queues)
        self.queue_length_limit = queue_length_limit
        self.queues = [Queue(i) for i in range(queues)]
        #: How many queues the configuration asks for (``queues`` may hold more, still
        #: draining, after a change made it smaller); only these are dealt.
        self.desired_queues = queues
        self.seats_in_use = 0
        #: Seats asked for by the requests waiting in every queue.
        self.seats_waiting = 0
        self.executing = 0
        self.waiting = 0
        self.virtual_time = 0.0
        # The seat demand (seats in use + seats waiting) integrated over time since the last
        # borrowing period (apf_controller.go's ``seatDemandIntegrator``), and its maximum.
        self._demand = 0
        self._demand_since = self._demand_last = clock.seconds()
        self._demand_area = 0.0
        self._demand_square = 0.0
        self.demand_high = 0
        self.dispatched = 0
        self.rejected = 0
        self.timed_out = 0
        self.cancelled = 0
        self._hands: dict[int, list[int]] = {}
        self._dispatching = False
        self.enqueues = 0
        self._robin = -1
        #: Called with the reason when a queued request is refused (metrics).
        self.on_reject: Callable[[Waiting, str], None] | None = None

    def configure(self, limit: int, queues: int, hand_size: int, queue_length_limit: int) -> None:
        """A new configuration (or current limit) for the level; waiting and executing
        requests stay where they are."""
        self.limit = limit
        self.hand_size = min(hand_size, queues)
        self.queue_length_limit = queue_length_limit
        if queues != self.desired_queues:
            self.desired_queues = queues
            self._hands.clear()
            while len(self.queues) < queues:
                self.queues.append(Queue(len(self.queues)))
            self._trim()
        if self.waiting:
            self._dispatch_as_much_as_possible()

    def _trim(self) -> None:
        """Drop the empty queues beyond the desired count."""
        queues = self.queues
        while (
            len(queues) > self.desired_queues
            and not queues[-1].waiting
            and not queues[-1].executing
        ):
            queues.pop()

    # --- the fast path ---------------------------------------------------------------------

    def try_acquire(self, seats: int, now: float) -> bool:
        """Take ``seats`` now if nobody waits and they are free (or nothing runs at all)."""
        if self.waiting:
            return False
        in_use = self.seats_in_use
        if in_use + seats > self.limit and in_use:
            return False
        self.seats_in_use = in_use + seats
        self.executing += 1
        self.dispatched += 1
        # demand_changed(now), inlined (the fast path; nobody waits, so demand = in use).
        elapsed = now - self._demand_last
        if elapsed > 0:
            demand = self._demand
            self._demand_area += demand * elapsed
            self._demand_square += demand * demand * elapsed
            self._demand_last = now
        demand = in_use + seats
        self._demand = demand
        if demand > self.demand_high:
            self.demand_high = demand
        return True

    def release(self, seats: int, now: float) -> None:
        """A request that got its seats from :meth:`try_acquire` finished."""
        self.seats_in_use -= seats
        self.executing -= 1
        if self.waiting:
            self.demand_changed(now)
            self._dispatch_as_much_as_possible()
            return
        # demand_changed(now), inlined: nothing waits, the demand only went down.
        elapsed = now - self._demand_last
        if elapsed > 0:
            demand = self._demand
            self._demand_area += demand * elapsed
            self._demand_square += demand * demand * elapsed
            self._demand_last = now
        self._demand = self.seats_in_use

    def release_later(self, seats: int) -> None:
        """:meth:`release` on the clock's time (a write's final seats, held after it ends)."""
        self.release(seats, self.clock.seconds())

    # --- seat demand -----------------------------------------------------------------------

    def demand_changed(self, now: float) -> None:
        """Account the demand so far up to ``now`` and take the new one."""
        elapsed = now - self._demand_last
        if elapsed > 0:
            demand = self._demand
            self._demand_area += demand * elapsed
            self._demand_square += demand * demand * elapsed
            self._demand_last = now
        demand = self.seats_in_use + self.seats_waiting
        self._demand = demand
        if demand > self.demand_high:
            self.demand_high = demand

    def take_demand(self, now: float) -> tuple[float, float, int, float]:
        """(average, standard deviation, maximum, duration) of the seat demand since the last
        call, then start a new period (``Integrator.Reset``)."""
        self.demand_changed(now)
        duration = now - self._demand_since
        high = self.demand_high
        if duration > 0:
            average = self._demand_area / duration
            variance = self._demand_square / duration - average * average
            deviation = math.sqrt(variance) if variance > 0 else 0.0
        else:
            average = deviation = 0.0
        self._demand_since = now
        self._demand_area = self._demand_square = 0.0
        self.demand_high = self._demand
        return average, deviation, high, duration

    # --- queuing ---------------------------------------------------------------------------

    def enqueue(
        self, seats: int, hash_value: int, wait_limit: float, schema: str, distinguisher: str
    ) -> Waiting | str:
        """Queue a request; its ``deferred`` fires True when it gets its seats (or False when it
        is refused later). Answers a reason instead when it is refused at once."""
        if not self.desired_queues:
            self.rejected += 1
            return CONCURRENCY_LIMIT
        hand = self._hands.get(hash_value)
        if hand is None:
            hand = deal(hash_value, self.desired_queues, self.hand_size)
            if len(self._hands) > 4096:
                self._hands.clear()
            self._hands[hash_value] = hand
        # queueset.go's shuffleShardLocked: the hand's queue with the least work waiting,
        # starting at a rotating offset so that ties do not always pick the same queue.
        queues = self.queues
        size = len(hand)
        offset = self.enqueues % size
        self.enqueues += 1
        best = queues[hand[offset]]
        best_load = best.seats_waiting
        for i in range(1, size):
            queue = queues[hand[(offset + i) % size]]
            if queue.seats_waiting < best_load:
                best, best_load = queue, queue.seats_waiting
        if len(best.waiting) >= self.queue_length_limit:
            self.rejected += 1
            return QUEUE_FULL
        request = Waiting(seats, best, self.clock.seconds(), schema, distinguisher)
        if not best.waiting:
            best.virtual_start = max(best.virtual_start, self.virtual_time)
        best.waiting.append(request)
        best.seats_waiting += seats
        self.seats_waiting += seats
        self.waiting += 1
        self.demand_changed(request.arrived)
        if wait_limit > 0:
            request.timer = self.clock.callLater(wait_limit, self._timed_out, request)
        self._dispatch_as_much_as_possible()
        return request

    def finish(self, request: Waiting) -> None:
        """A request dispatched from a queue finished."""
        queue = request.queue
        if queue is not None:
            queue.executing.remove(request)
            queue.seats_in_use -= request.seats
        self.seats_in_use -= request.seats
        self.executing -= 1
        self.demand_changed(self.clock.seconds())
        if self.waiting:
            self._dispatch_as_much_as_possible()
        if len(self.queues) > self.desired_queues:
            self._trim()

    def cancel(self, request: Waiting) -> None:
        """The client went away while ``request`` waited."""
        if self._remove(request):
            self.cancelled += 1
            self._refused(request, CANCELLED)

    def _timed_out(self, request: Waiting) -> None:
        request.timer = None
        if self._remove(request):
            self.timed_out += 1
            self.rejected += 1
            self._refused(request, TIME_OUT)

    def _refused(self, request: Waiting, reason: str) -> None:
        if self.on_reject is not None:
            self.on_reject(request, reason)
        request.deferred.callback(False)

    def _remove(self, request: Waiting) -> bool:
        queue = request.queue
        if queue is None or request.started is not None:
            return False
        try:
            queue.waiting.remove(request)
        except ValueError:
            return False
        queue.seats_waiting -= request.seats
        self.seats_waiting -= request.seats
        self.waiting -= 1
        self.demand_changed(self.clock.seconds())
        if request.timer is not None and request.timer.active():
            request.timer.cancel()
        request.timer = None
        return True

    def _dispatch_as_much_as_possible(self) -> None:
        # A dispatched request's handler runs inside ``deferred.callback`` and may finish
        # (and free its seats) before it returns: that nested call leaves the dispatching to
        # this loop, so a long queue of quick requests does not nest one call per request.
        if self._dispatching:
            return
        self._dispatching = True
        try:
            self._dispatch_loop()
        finally:
            self._dispatching = False

    def _dispatch_loop(self) -> None:
        while self.waiting:
            queue = self._next_queue()
            if queue is None:
                return
            head = queue.waiting[0]
            if self.seats_in_use + head.seats > self.limit and self.seats_in_use:
                return
            queue.waiting.popleft()
            queue.seats_waiting -= head.seats
            self.seats_waiting -= head.seats
            self.waiting -= 1
            self.virtual_time = queue.virtual_start
            queue.virtual_start += head.seats
            queue.executing.append(head)
            queue.seats_in_use += head.seats
            self.seats_in_use += head.seats
            self.executing += 1
            self.dispatched += 1
            if head.timer is not None and head.timer.active():
                head.timer.cancel()
            head.timer = None
            head.started = now = self.clock.seconds()
            self.demand_changed(now)
            head.deferred.callback(True)

    def _next_queue(self) -> Queue | None:
        """The non-empty queue with the smallest virtual start; ties go round-robin, from
        after the last queue served (queueset.go's ``robinIndex``)."""
        queues = self.queues
        count = len(queues)
        start = self._robin + 1
        best: Queue | None = None
        for i in range(count):
            queue = queues[(start + i) % count]
            if queue.waiting and (best is None or queue.virtual_start < best.virtual_start):
                best = queue
        if best is not None:
            self._robin = best.index
        return best

    # --- what the debug dumps read ---------------------------------------------------------

    def active_queues(self) -> int:
        return sum(1 for q in self.queues if q.waiting)

    def dump(self) -> dict[str, Any]:
        return {"queues": self.queues, "waiting": self.waiting, "executing": self.executing}
