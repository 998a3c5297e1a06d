"""The store's periodic maintenance as a child service (apiserver.service.maintenance) on a
fake clock: rounds at the interval, never two at once, a failed round logged and the next one
still run, and a stop that cancels the timer and waits for a round in progress, as
kube-apiserver's compactor loop (k8s.io/apiserver/pkg/storage/etcd3/compact.go) ends with
its owner."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import ILogObserver, LogLevel, globalLogPublisher
from zope.interface import implementer

from apiserver.service.maintenance import PeriodicTaskService
from apiserver.storage.interface import PeriodicTask, UnavailableError


class Rounds:
    """A task's ``run``: records each round; ``pending`` makes the next rounds slow."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.pending: list[Deferred[None]] = []
        self.slow = False
        self.errors: list[BaseException] = []

    def __call__(self, clock: Clock) -> Deferred[None]:
        self.times.append(clock.seconds())
        if self.errors:
            return defer.fail(self.errors.pop(0))
        if self.slow:
            d: Deferred[None] = Deferred()
            self.pending.append(d)
            return d
        return defer.succeed(None)


def service(
    clock: Clock, rounds: Rounds, now: bool = False, after: Any = None
) -> PeriodicTaskService:
    task = PeriodicTask("compaction", 10.0, lambda: rounds(clock), now=now)
    return PeriodicTaskService(task, clock, after=after)


@pytest.fixture
def logged() -> Iterator[list[dict[str, Any]]]:
    events: list[dict[str, Any]] = []

    @implementer(ILogObserver)
    def observe(event: dict[str, Any]) -> None:
        if event.get("log_namespace") == "apiserver.storage.periodic":
            events.append(event)

    globalLogPublisher.addObserver(observe)
    yield events
    globalLogPublisher.removeObserver(observe)


def test_named_after_its_task_and_runs_at_the_interval() -> None:
    clock, rounds = Clock(), Rounds()
    svc = service(clock, rounds)
    assert svc.name == "compaction"
    assert clock.getDelayedCalls() == []  # building schedules nothing
    svc.startService()
    assert rounds.times == []  # now=False: the first round is one interval after start
    clock.advance(10)
    clock.advance(10)
    clock.advance(5)
    assert rounds.times == [10.0, 20.0]


def test_now_runs_the_first_round_at_start() -> None:
    clock, rounds = Clock(), Rounds()
    service(clock, rounds, now=True).startService()
    assert rounds.times == [0.0]
    clock.advance(10)
    assert rounds.times == [0.0, 10.0]


def test_a_slow_round_is_never_overlapped() -> None:
    clock, rounds = Clock(), Rounds()
    service(clock, rounds).startService()
    rounds.slow = True
    clock.advance(10)
    assert rounds.times == [10.0]
    for _ in range(5):
        clock.advance(10)  # the round is still running: no other starts
    assert rounds.times == [10.0]
    assert clock.getDelayedCalls() == []
    rounds.slow = False
    rounds.pending.pop().callback(None)  # ends at t=60: the missed rounds are not bunched
    clock.advance(10)
    assert rounds.times == [10.0, 70.0]


def test_a_failed_round_is_logged_and_the_next_one_still_runs(
    logged: list[dict[str, Any]],
) -> None:
    clock, rounds = Clock(), Rounds()
    service(clock, rounds).startService()
    rounds.errors = [UnavailableError("etcd is away"), RuntimeError("a bug")]
    clock.advance(10)
    # A storage error is a warning without a traceback.
    assert [e["log_level"] for e in logged] == [LogLevel.warn]
    assert logged[0]["task"] == "compaction" and logged[0]["error"] == "etcd is away"
    assert "log_failure" not in logged[0]
    clock.advance(10)
    # Anything else is logged with its traceback.
    assert len(logged) == 2 and logged[1]["log_failure"].check(RuntimeError)
    clock.advance(10)
    assert rounds.times == [10.0, 20.0, 30.0]
    assert len(logged) == 2


def test_stop_cancels_the_timer() -> None:
    clock, rounds = Clock(), Rounds()
    svc = service(clock, rounds)
    svc.startService()
    clock.advance(10)
    assert clock.getDelayedCalls()
    stopped = svc.stopService()
    assert stopped.called and not svc.running
    assert clock.getDelayedCalls() == []
    clock.advance(100)
    assert rounds.times == [10.0]


def test_stop_waits_for_a_round_in_progress() -> None:
    clock, rounds = Clock(), Rounds()
    svc = service(clock, rounds)
    svc.startService()
    rounds.slow = True
    clock.advance(10)
    stopped = svc.stopService()
    assert not stopped.called  # the store must not stop under a running round
    assert clock.getDelayedCalls() == []
    rounds.pending.pop().callback(None)
    assert stopped.called
    assert clock.getDelayedCalls() == []  # nothing rescheduled after the last round
    clock.advance(100)
    assert rounds.times == [10.0]


def test_starts_once_the_store_is_up_and_never_if_stopped_before() -> None:
    clock, rounds = Clock(), Rounds()
    ready: Deferred[None] = Deferred()
    svc = service(clock, rounds, now=True, after=lambda: ready)
    svc.startService()
    assert rounds.times == [] and clock.getDelayedCalls() == []
    ready.callback(None)
    assert rounds.times == [0.0]
    assert svc.stopService().called

    late: Deferred[None] = Deferred()
    never = service(clock, rounds, now=True, after=lambda: late)
    never.startService()
    assert never.stopService().called
    late.callback(None)  # the store came up after the tree stopped: nothing starts
    assert rounds.times == [0.0]
    assert clock.getDelayedCalls() == []
