"""The queue set of one priority level on a fake clock (apiserver.flowcontrol.queueset)."""

from __future__ import annotations

from twisted.internet.task import Clock

from apiserver.flowcontrol.queueset import (
    CANCELLED,
    CONCURRENCY_LIMIT,
    QUEUE_FULL,
    TIME_OUT,
    QueueSet,
    Waiting,
    deal,
    flow_hash,
)


def queued(outcome: Waiting | str) -> Waiting:
    assert isinstance(outcome, Waiting), outcome
    return outcome


def test_deal_is_deterministic_distinct_and_in_range() -> None:
    hand = deal(flow_hash("global-default", "alice"), 128, 6)
    assert hand == deal(flow_hash("global-default", "alice"), 128, 6)
    assert len(set(hand)) == 6 and all(0 <= card < 128 for card in hand)
    assert hand != deal(flow_hash("global-default", "bob"), 128, 6)


def test_deal_matches_the_mixed_radix_rule() -> None:
    # digits (7 % 4, 7 // 4 % 3) = (3, 1); the second card (1 < 3) is not bumped.
    assert deal(7, 4, 2) == [3, 1]
    # digits (1, 1): the second card is bumped past the first (1 >= 1) to 2.
    assert deal(5, 4, 2) == [1, 2]
    assert deal(0, 5, 5) == [0, 1, 2, 3, 4]


def test_fast_path_takes_seats_until_the_limit() -> None:
    qs = QueueSet(Clock(), 2, 4, 2, 10)
    assert qs.try_acquire(1, 0.0) and qs.try_acquire(1, 0.0)
    assert not qs.try_acquire(1, 0.0)
    qs.release(1, 0.0)
    assert qs.try_acquire(1, 0.0)
    assert qs.seats_in_use == 2 and qs.executing == 2 and qs.dispatched == 3


def test_a_request_wider_than_the_limit_runs_alone() -> None:
    qs = QueueSet(Clock(), 2, 4, 2, 10)
    assert qs.try_acquire(5, 0.0)
    assert not qs.try_acquire(1, 0.0)
    qs.release(5, 0.0)
    assert qs.seats_in_use == 0


def test_queued_request_dispatched_when_a_seat_frees() -> None:
    clock = Clock()
    qs = QueueSet(clock, 1, 8, 2, 10)
    assert qs.try_acquire(1, 0.0)
    waiting = queued(qs.enqueue(1, flow_hash("fs", "a"), 15.0, "fs", "a"))
    fired: list[bool] = []
    waiting.deferred.addCallback(fired.append)
    assert qs.waiting == 1 and not fired
    clock.advance(3)
    qs.release(1, 0.0)
    assert fired == [True] and waiting.started == 3.0
    assert qs.seats_in_use == 1 and qs.waiting == 0
    assert not clock.getDelayedCalls()  # the wait timer was cancelled
    qs.finish(waiting)
    assert qs.seats_in_use == 0 and qs.executing == 0


def test_queue_length_limit_rejects() -> None:
    qs = QueueSet(Clock(), 1, 1, 1, 2)
    assert qs.try_acquire(1, 0.0)
    h = flow_hash("fs", "a")
    queued(qs.enqueue(1, h, 0, "fs", "a"))
    queued(qs.enqueue(1, h, 0, "fs", "a"))
    assert qs.enqueue(1, h, 0, "fs", "a") == QUEUE_FULL
    assert qs.rejected == 1


def test_reject_type_level_has_no_queues() -> None:
    qs = QueueSet(Clock(), 1)
    assert qs.try_acquire(1, 0.0)
    assert qs.enqueue(1, 1, 15.0, "catch-all", "u") == CONCURRENCY_LIMIT


def test_wait_limit_times_out_on_the_clock() -> None:
    clock = Clock()
    qs = QueueSet(clock, 1, 4, 2, 10)
    reasons: list[str] = []
    qs.on_reject = lambda request, reason: reasons.append(reason)
    assert qs.try_acquire(1, 0.0)
    waiting = queued(qs.enqueue(1, 42, 15.0, "fs", "a"))
    fired: list[bool] = []
    waiting.deferred.addCallback(fired.append)
    clock.advance(14.9)
    assert not fired
    clock.advance(0.2)
    assert fired == [False] and reasons == [TIME_OUT]
    assert qs.waiting == 0 and qs.timed_out == 1
    qs.release(1, 0.0)
    assert qs.seats_in_use == 0


def test_cancel_removes_a_waiting_request() -> None:
    clock = Clock()
    qs = QueueSet(clock, 1, 4, 2, 10)
    reasons: list[str] = []
    qs.on_reject = lambda request, reason: reasons.append(reason)
    assert qs.try_acquire(1, 0.0)
    waiting = queued(qs.enqueue(1, 42, 15.0, "fs", "a"))
    qs.cancel(waiting)
    assert reasons == [CANCELLED] and qs.waiting == 0 and qs.cancelled == 1
    assert not clock.getDelayedCalls()


def test_fairness_between_a_flooding_flow_and_a_quiet_one() -> None:
    """Flow A queues 20 requests, then B queues 2: B is served within the next few
    dispatches, not after A's backlog."""
    clock = Clock()
    qs = QueueSet(clock, 1, 16, 1, 50)
    assert qs.try_acquire(1, 0.0)
    a_hash, b_hash = flow_hash("fs", "flooder"), flow_hash("fs", "quiet")
    assert deal(a_hash, 16, 1) != deal(b_hash, 16, 1)
    order: list[str] = []
    running: list[Waiting] = []

    def submit(flow: str, hash_value: int) -> None:
        w = queued(qs.enqueue(1, hash_value, 0, "fs", flow))

        def started(ok: bool) -> None:
            order.append(flow)
            running.append(w)

        w.deferred.addCallback(started)

    for _ in range(20):
        submit("A", a_hash)
    for _ in range(2):
        submit("B", b_hash)
    qs.release(1, 0.0)
    while running:
        qs.finish(running.pop(0))
    assert len(order) == 22
    assert order.index("B") <= 2
    b_positions = [i for i, flow in enumerate(order) if flow == "B"]
    assert b_positions[1] <= 4


def test_seat_accounting_with_wide_requests() -> None:
    qs = QueueSet(Clock(), 4, 4, 2, 10)
    assert qs.try_acquire(3, 0.0)
    wide = queued(qs.enqueue(3, 9, 0, "fs", "a"))
    narrow = queued(qs.enqueue(1, 99, 0, "fs", "b"))
    # The head of the chosen queue (3 seats) does not fit in the 1 seat left: nothing moves.
    assert wide.started is None
    qs.release(3, 0.0)
    assert wide.started is not None and narrow.started is not None
    assert qs.seats_in_use == 4
    qs.finish(wide)
    qs.finish(narrow)
    assert qs.seats_in_use == 0 and qs.executing == 0


def test_requests_finishing_during_dispatch_do_not_nest() -> None:
    """2,000 queued requests that each finish as soon as they are dispatched (a synchronous
    handler) are served by one loop, not one nested call each (no RecursionError)."""
    qs = QueueSet(Clock(), 1, 64, 6, 50)
    assert qs.try_acquire(1, 0.0)
    served = []
    for i in range(2000):
        outcome = qs.enqueue(1, flow_hash("fs", f"u{i % 40}"), 0, "fs", f"u{i % 40}")
        if isinstance(outcome, str):
            continue
        w = outcome

        def run(ok: bool, w: Waiting = w) -> None:
            served.append(w)
            qs.finish(w)

        w.deferred.addCallback(run)
    qs.release(1, 0.0)
    assert len(served) == 2000 - qs.rejected > 1000
    assert qs.waiting == 0 and qs.seats_in_use == 0 and qs.executing == 0
