"""Priority and fairness on a fake clock: live reconfiguration (requests in flight and
queued kept, the memo dropped), borrowing between levels every 10 s, and the final seats of
a write that watchers hear of (apiserver.flowcontrol.apf, borrowing, estimate)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from tests.unit.flowcontrol.test_filters import EVENTS, make_apf, request_for
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from apiserver.flowcontrol.apf import PriorityAndFairness
from apiserver.flowcontrol.borrowing import Claim, SeatDemand, allocate_concurrency
from apiserver.flowcontrol.debug import dump_priority_levels
from apiserver.flowcontrol.estimate import WatchTracker, mutating_seats
from apiserver.flowcontrol.metrics import FlowControlCollector
from apiserver.flowcontrol.queueset import QueueSet


def tiny_level(uid: str = "tiny-uid", shares: int = 1, **limited: Any) -> dict[str, Any]:
    """A level that neither lends nor borrows (its current limit is its nominal one)."""
    limited.setdefault("borrowingLimitPercent", 0)
    return {
        "metadata": {"name": "tiny", "uid": uid},
        "spec": {
            "type": "Limited",
            "limited": {
                "nominalConcurrencyShares": shares,
                "lendablePercent": 0,
                "limitResponse": {
                    "type": "Queue",
                    "queuing": {"queues": 1, "handSize": 1, "queueLengthLimit": 5},
                },
                **limited,
            },
        },
    }


def schema_for(user: str, level: str = "tiny", uid: str = "fs-uid") -> dict[str, Any]:
    return {
        "metadata": {"name": "mine", "uid": uid},
        "spec": {
            "priorityLevelConfiguration": {"name": level},
            "matchingPrecedence": 50,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [
                {
                    "subjects": [{"kind": "User", "user": {"name": user}}],
                    "resourceRules": [
                        {
                            "verbs": ["*"],
                            "apiGroups": ["*"],
                            "resources": ["*"],
                            "namespaces": ["*"],
                            "clusterScope": True,
                        }
                    ],
                }
            ],
        },
    }


def with_config(
    apf: PriorityAndFairness,
    schemas: list[dict[str, Any]],
    levels: list[dict[str, Any]],
) -> None:
    apf.reconfigure(
        [*copy.deepcopy(apf.flow_schema_objects), *schemas],
        [*copy.deepcopy(apf.priority_level_objects), *levels],
    )


def level_header(request: Any) -> bytes:
    values = request.responseHeaders.getRawHeaders(b"x-kubernetes-pf-prioritylevel-uid")
    assert values
    return bytes(values[0])


def test_a_new_schema_takes_effect_and_the_memo_is_dropped() -> None:
    apf = make_apf(Clock(), total=600)
    request, info = request_for("GET", EVENTS, user="bob")
    assert apf(request, info) is None
    assert level_header(request) == apf.levels["global-default"].uid
    with_config(apf, [schema_for("bob")], [tiny_level()])
    request, info = request_for("GET", EVENTS, user="bob")
    assert apf(request, info) is None
    assert level_header(request) == b"tiny-uid"
    assert apf.levels["tiny"].nominal == 3  # ceil(600 * 1 / 246)


def test_a_dangling_schema_matches_nothing() -> None:
    apf = make_apf(Clock(), total=600)
    with_config(apf, [schema_for("bob", level="absent")], [])
    assert "mine" not in {s.name for s in apf.classifier.schemas}
    request, info = request_for("GET", EVENTS, user="bob")
    apf(request, info)
    assert level_header(request) == apf.levels["global-default"].uid


def test_mandatory_objects_stand_in_when_missing() -> None:
    apf = make_apf(Clock(), total=600)
    apf.reconfigure([], [])
    assert set(apf.levels) == {"exempt", "catch-all"}
    assert {s.name for s in apf.classifier.schemas} == {"exempt", "catch-all"}


def test_requests_executing_and_queued_survive_a_change() -> None:
    clock = Clock()
    apf = make_apf(clock, total=600)
    with_config(apf, [schema_for("bob")], [tiny_level()])
    tiny = apf.levels["tiny"]
    assert tiny.queues is not None
    running = []
    for _ in range(3):
        request, info = request_for("POST", EVENTS, user="bob")
        assert apf(request, info) is None
        running.append(request)
    queued_request, info = request_for("POST", EVENTS, user="bob")
    waiting = apf(queued_request, info)
    assert isinstance(waiting, Deferred) and not waiting.called
    # The level's shares change: same queue set, requests kept, a larger limit.
    with_config(apf, [schema_for("bob")], [tiny_level(shares=2)])
    assert apf.levels["tiny"] is tiny and tiny.queues.executing == 4
    assert waiting.called  # the larger limit dispatched it
    for request in running:
        request.finish()
    queued_request.finish()
    assert tiny.queues.executing == 0 and tiny.queues.seats_in_use == 0


def test_a_removed_level_drains_while_quiescing() -> None:
    clock = Clock()
    apf = make_apf(clock, total=600)
    with_config(apf, [schema_for("bob")], [tiny_level()])
    tiny = apf.levels["tiny"]
    running = []
    for _ in range(3):
        request, info = request_for("POST", EVENTS, user="bob")
        apf(request, info)
        running.append(request)
    queued_request, info = request_for("POST", EVENTS, user="bob")
    waiting = apf(queued_request, info)
    assert isinstance(waiting, Deferred)
    with_config(apf, [], [])
    assert "tiny" not in apf.levels and apf.quiescing["tiny"] is tiny
    # While it lingers it still counts in the shares (its nominal limit stays).
    assert tiny.nominal == 3
    dump = dump_priority_levels(apf).decode()
    assert any(line.startswith("tiny") and "true" in line for line in dump.splitlines())
    running[0].finish()
    assert waiting.called  # the old queue set still dispatches its own requests
    for request in [*running[1:], queued_request]:
        request.finish()
    assert tiny.queues is not None and tiny.queues.executing == 0
    apf.update_borrowing()  # a drained level is forgotten
    assert "tiny" not in apf.quiescing


def test_queue_count_change_keeps_a_waiting_queue_until_it_drains() -> None:
    clock = Clock()
    qs = QueueSet(clock, 1, 4, 2, 10)
    assert qs.try_acquire(1, 0.0)
    waiting = qs.enqueue(1, 7, 0, "s", "d")
    assert not isinstance(waiting, str)
    index = waiting.queue.index if waiting.queue is not None else -1
    qs.configure(1, 1, 1, 10)
    assert len(qs.queues) == max(1, index + 1)
    qs.release(1, 0.0)
    assert waiting.deferred.called
    qs.finish(waiting)
    assert len(qs.queues) == 1


# --- borrowing -------------------------------------------------------------------------------


def test_allocation_shares_the_sum_fairly_within_bounds() -> None:
    claims = [Claim(5, 20, 30), Claim(2, 20, 1), Claim(0, 100, 0)]
    allocations, fair = allocate_concurrency(30, claims)
    assert 0 < fair
    assert sum(allocations) == pytest.approx(30)
    assert allocations[0] == 20  # capped at its upper bound
    assert allocations[1] >= 2 and allocations[2] >= 0
    with pytest.raises(ValueError):
        allocate_concurrency(5, [Claim(3, 4, 1), Claim(3, 4, 1)])


def test_smoothing_keeps_the_larger_of_envelope_and_decay() -> None:
    demand = SeatDemand()
    demand.update(10.0, 2.0, 14, 10.0)
    assert demand.smoothed == 12.0
    demand.update(0.0, 0.0, 0, 10.0)
    assert demand.smoothed == pytest.approx(0.977 * 12.0)


def test_seat_demand_is_integrated_on_the_clock() -> None:
    qs = QueueSet(Clock(), 10, 1, 1, 10)
    assert qs.try_acquire(4, 0.0)
    qs.release(4, 5.0)  # 4 seats for 5 s, then nothing for 5 s
    average, deviation, high, duration = qs.take_demand(10.0)
    assert (average, high, duration) == (2.0, 4, 10.0)
    assert deviation == pytest.approx(2.0)


def test_a_busy_level_borrows_from_idle_ones_every_ten_seconds() -> None:
    clock = Clock()
    apf = make_apf(clock, total=600)
    apf.start()
    try:
        busy = apf.levels["global-default"]
        assert busy.nominal == 49
        start = busy.current  # the allocation at configuration time, on no demand
        assert busy.queues is not None
        held = []
        for i in range(start):
            request, info = request_for("POST", EVENTS, user=f"u{i}")
            assert apf(request, info) is None
            held.append(request)
        queued = []
        for i in range(40):
            request, info = request_for("POST", EVENTS, user=f"w{i}")
            queued.append(apf(request, info))
        clock.advance(10)
        # Idle levels lend what they may; global-default gets more than before.
        assert busy.current > start
        assert busy.demand.high_watermark == start + 40
        assert sum(level.current for level in apf.levels.values() if not level.exempt) in (
            range(600 - 8, 600 + 8)
        )
        idle = apf.levels["workload-low"]
        assert idle.current >= idle.min_limit
        registry = CollectorRegistry()
        registry.register(FlowControlCollector(apf))
        text = generate_latest(registry).decode()
        assert (
            f'apiserver_flowcontrol_current_limit_seats{{priority_level="global-default"}} '
            f"{float(busy.current)}" in text
        )
        assert (
            "apiserver_flowcontrol_demand_seats_high_watermark"
            f'{{priority_level="global-default"}} {float(start + 40)}' in text
        )
        assert "apiserver_flowcontrol_seat_fair_frac" in text
        for request in held:
            request.finish()
        for d in queued:
            assert isinstance(d, Deferred) and d.called
    finally:
        apf.stop()
    assert clock.getDelayedCalls() == [] or all(
        not call.active() for call in clock.getDelayedCalls()
    )


def test_borrowing_limit_zero_keeps_the_nominal_limit() -> None:
    clock = Clock()
    apf = make_apf(clock, total=600)
    with_config(apf, [schema_for("bob")], [tiny_level(borrowingLimitPercent=0)])
    apf.start()
    try:
        for _ in range(8):
            request, info = request_for("POST", EVENTS, user="bob")
            apf(request, info)
        clock.advance(10)
        assert apf.levels["tiny"].current == apf.levels["tiny"].nominal
    finally:
        apf.stop()


# --- a write's watchers ----------------------------------------------------------------------


def test_mutating_seats_from_watch_count() -> None:
    assert mutating_seats(9, 10) == (0, 0.0)
    assert mutating_seats(10, 10) == (1, 0.005)
    seats, latency = mutating_seats(250, 10)
    assert seats == 10 and latency == pytest.approx(25 * 0.005 / 10)


def test_watch_tracker_counts_interested_watches() -> None:
    tracker = WatchTracker()
    everywhere = tracker.register("events.k8s.io", "events", "", "")
    tracker.register("events.k8s.io", "events", "default", "")
    tracker.register("events.k8s.io", "events", "other", "")
    tracker.register("events.k8s.io", "events", "default", "x")
    assert tracker.interested("events.k8s.io", "events", "default", "x") == 3
    assert tracker.interested("events.k8s.io", "events", "default", "") == 2
    tracker.forget(everywhere)
    assert tracker.interested("events.k8s.io", "events", "default", "") == 1
    assert tracker.interested("", "pods", "default", "") == 0


def test_a_write_with_many_watchers_holds_final_seats_after_it_ends() -> None:
    clock = Clock()
    apf = make_apf(clock, total=600)
    watches = []
    for i in range(30):
        request, info = request_for("GET", EVENTS + "?watch=1", user=f"watcher{i}")
        apf(request, info)
        watches.append(request)
    assert apf.watches.interested("events.k8s.io", "events", "default", "") == 30
    level = apf.levels["global-default"]
    assert level.queues is not None
    request, info = request_for("POST", EVENTS, user="writer")
    assert apf(request, info) is None
    assert level.queues.seats_in_use == 3  # ceil(30 / 10)
    request.finish()
    assert level.queues.seats_in_use == 3  # held for the fan-out
    clock.advance(0.005)
    assert level.queues.seats_in_use == 0
    for watch in watches:
        watch.finish()
    assert apf.watches.counts == {}
    request, info = request_for("POST", EVENTS, user="writer")
    apf(request, info)
    assert level.queues.seats_in_use == 1
