"""The built-in health checks: ping, log, store probe, shutdown, post-start hooks."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import CancelledError, Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from apiserver.healthz.checks import (
    HealthCheck,
    HealthCheckError,
    LogCheck,
    PostStartHooks,
    ShutdownCheck,
    StoreCheck,
    ping_check,
    run_check,
)


def result_of(d: Deferred[Any]) -> Any:
    """The result of an already-fired Deferred (raises its failure)."""
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "Deferred has not fired"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


def reason(check: HealthCheck) -> str | None:
    """Run a check that answers at once: None (passed) or the failure reason."""
    return result_of(run_check(check))


# --- HealthCheck / run_check -------------------------------------------------------------


def test_run_check_outcomes() -> None:
    def raises() -> None:
        raise HealthCheckError("nope")

    assert reason(HealthCheck("a", lambda: None)) is None
    assert reason(HealthCheck("b", lambda: succeed(None))) is None
    assert reason(HealthCheck("c", raises)) == "nope"
    assert reason(HealthCheck("d", lambda: fail(ValueError("bad value")))) == "bad value"


def test_run_check_waits_for_deferred() -> None:
    pending: Deferred[None] = Deferred()
    d = run_check(HealthCheck("slow", lambda: pending))
    assert not d.called
    pending.errback(RuntimeError("late"))
    assert result_of(d) == "late"


def test_ping() -> None:
    check = ping_check()
    assert check.name == "ping"
    assert reason(check) is None


# --- log ---------------------------------------------------------------------------------


def test_log_check_loop_starts_on_first_call_and_flushes_every_minute() -> None:
    clock = Clock()
    flushes: list[float] = []
    check = LogCheck(clock, flush=lambda: flushes.append(clock.seconds()))
    assert check.name == "log"
    assert flushes == []
    assert clock.getDelayedCalls() == []
    assert reason(check) is None
    assert flushes == [0.0]  # at once
    clock.advance(60)
    clock.advance(60)
    assert flushes == [0.0, 60.0, 120.0]
    assert check.last_verified == 120.0
    assert reason(check) is None
    assert flushes == [0.0, 60.0, 120.0]  # a later call does not start a second loop
    check.stop()
    assert clock.getDelayedCalls() == []


def test_log_check_fails_when_stamp_is_two_minutes_old() -> None:
    clock = Clock()
    blocked = False

    def flush() -> None:
        if blocked:
            raise OSError("stuck")

    check = LogCheck(clock, flush=flush)
    assert reason(check) is None  # stamped at 0
    blocked = True
    clock.advance(60)  # flush fails: no stamp, loop goes on
    clock.advance(59.5)
    assert reason(check) is None  # 119.5 s old
    clock.advance(0.5)  # 120 s: loop tick fails again
    assert reason(check) == "logging blocked"
    blocked = False
    clock.advance(60)  # flush works again, stamp renewed
    assert reason(check) is None
    check.stop()


def test_log_check_stop_before_start_and_twice() -> None:
    clock = Clock()
    check = LogCheck(clock, flush=lambda: None)
    check.stop()
    assert reason(check) is None
    check.stop()
    check.stop()
    assert clock.getDelayedCalls() == []


def test_log_check_default_flush_works() -> None:
    clock = Clock()
    check = LogCheck(clock)
    assert reason(check) is None
    clock.advance(60)
    assert check.last_verified == 60.0
    check.stop()


# --- store -------------------------------------------------------------------------------


class Probe:
    """A scripted store probe: each call returns the next Deferred/outcome."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self.pending: list[Deferred[None]] = []
        self.cancelled = 0
        self.mode: str = "ok"

    def __call__(self, timeout: float) -> Deferred[None]:
        self.calls.append(timeout)
        if self.mode == "ok":
            return succeed(None)
        if self.mode == "fail":
            return fail(ConnectionRefusedError("dial tcp 127.0.0.1:2379: connection refused"))
        if self.mode == "raise":
            raise RuntimeError("exploded")

        def cancel(_: Deferred[None]) -> None:
            self.cancelled += 1

        d: Deferred[None] = Deferred(cancel)
        self.pending.append(d)
        return d


def test_store_check_rate_limits_to_one_probe_per_half_timeout() -> None:
    clock = Clock()
    probe = Probe()
    check = StoreCheck("etcd", probe, 2.0, clock)
    assert check.name == "etcd"
    assert reason(check) is None
    assert probe.calls == [2.0]
    probe.mode = "fail"
    clock.advance(0.5)
    assert reason(check) is None  # within 1 s: last result, no probe
    assert len(probe.calls) == 1
    clock.advance(0.5)  # 1.0 s after the last probe
    err = "error getting data from etcd: dial tcp 127.0.0.1:2379: connection refused"
    assert reason(check) == err
    assert len(probe.calls) == 2
    probe.mode = "ok"
    clock.advance(0.999)
    assert reason(check) == err  # the last error again, still no probe
    assert reason(check) == err
    assert len(probe.calls) == 2
    clock.advance(0.001)
    assert reason(check) is None
    assert len(probe.calls) == 3
    assert clock.getDelayedCalls() == []  # timeouts of finished probes are cancelled


def test_store_check_backend_word_is_configurable() -> None:
    clock = Clock()
    probe = Probe()
    probe.mode = "fail"
    check = StoreCheck("etcd-readiness", probe, 2.0, clock, backend="sqlite")
    assert reason(check) == (
        "error getting data from sqlite: dial tcp 127.0.0.1:2379: connection refused"
    )


def test_store_check_probe_raising_synchronously() -> None:
    probe = Probe()
    probe.mode = "raise"
    check = StoreCheck("etcd", probe, 2.0, Clock())
    assert reason(check) == "error getting data from etcd: exploded"


def test_store_check_timeout_cancels_probe() -> None:
    clock = Clock()
    probe = Probe()
    probe.mode = "hang"
    check = StoreCheck("etcd", probe, 2.0, clock)
    d = run_check(check)
    clock.advance(1.999)
    assert not d.called
    assert probe.cancelled == 0
    clock.advance(0.001)
    assert probe.cancelled == 1
    assert result_of(d) == "error getting data from etcd: context deadline exceeded"
    assert clock.getDelayedCalls() == []
    # The next probe is allowed (timeout > timeout/2); while it runs, rate-limited calls get
    # the error of the one that timed out.
    second = run_check(check)
    assert len(probe.calls) == 2
    clock.advance(0.5)
    assert reason(check) == "error getting data from etcd: context deadline exceeded"
    assert len(probe.calls) == 2
    probe.pending[1].callback(None)
    assert result_of(second) is None
    assert probe.cancelled == 1


def test_store_check_concurrent_call_gets_initial_error_while_first_probe_runs() -> None:
    clock = Clock()
    probe = Probe()
    probe.mode = "hang"
    check = StoreCheck("etcd", probe, 2.0, clock)
    first = run_check(check)
    clock.advance(0.2)
    assert reason(check) == "etcd client connection not yet established"
    probe.pending[0].callback(None)
    assert result_of(first) is None
    assert reason(check) is None
    assert len(probe.calls) == 1


def test_store_check_keeps_result_of_last_sent_probe() -> None:
    clock = Clock()
    probe = Probe()
    probe.mode = "hang"
    check = StoreCheck("etcd", probe, 4.0, clock)
    older = run_check(check)  # sent at 0
    clock.advance(2)
    newer = run_check(check)  # sent at 2
    probe.pending[1].callback(None)
    assert result_of(newer) is None
    probe.pending[0].errback(RuntimeError("slow failure"))  # answers last, was sent first
    assert result_of(older) == "error getting data from etcd: slow failure"
    clock.advance(1)
    assert reason(check) is None  # rate-limited: result of the probe sent last


def test_store_check_caller_cancel_does_not_cancel_probe() -> None:
    clock = Clock()
    probe = Probe()
    probe.mode = "hang"
    check = StoreCheck("etcd", probe, 2.0, clock)
    d = check.fn()
    assert isinstance(d, Deferred)
    d.cancel()
    with pytest.raises(CancelledError):
        result_of(d)
    assert probe.cancelled == 0
    probe.pending[0].errback(RuntimeError("down"))
    clock.advance(0.1)
    assert reason(check) == "error getting data from etcd: down"


def test_store_check_close() -> None:
    clock = Clock()
    probe = Probe()
    check = StoreCheck("etcd", probe, 2.0, clock)
    assert not check.closed
    assert reason(check) is None
    check.close()
    assert check.closed
    clock.advance(10)
    assert reason(check) == "server is shutting down"
    assert len(probe.calls) == 1


def test_store_check_zero_timeout_is_not_rate_limited() -> None:
    probe = Probe()
    check = StoreCheck("etcd", probe, 0.0, Clock())
    assert reason(check) is None
    assert reason(check) is None
    assert len(probe.calls) == 2


# --- shutdown ----------------------------------------------------------------------------


def test_shutdown_check() -> None:
    check = ShutdownCheck()
    assert check.name == "shutdown"
    assert not check.initiated
    assert reason(check) is None
    check.initiate()
    assert check.initiated
    assert reason(check) == "process is shutting down"


# --- post-start hooks --------------------------------------------------------------------


def test_post_start_hook_not_finished_then_finished() -> None:
    hooks = PostStartHooks(Clock())
    pending: Deferred[None] = Deferred()
    check = hooks.add("rbac/bootstrap-roles", lambda: pending)
    assert check.name == "poststarthook/rbac/bootstrap-roles"
    assert reason(check) == "not finished"
    done = hooks.run_all()
    assert not done.called
    assert reason(check) == "not finished"
    assert not hooks.finished("rbac/bootstrap-roles")
    pending.callback(None)
    assert reason(check) is None
    assert hooks.finished("rbac/bootstrap-roles")
    assert result_of(done) is None


def test_post_start_hooks_start_concurrently() -> None:
    hooks = PostStartHooks(Clock())
    started: list[str] = []
    waits: dict[str, Deferred[None]] = {}

    def hook(name: str) -> Any:
        def run() -> Deferred[None]:
            started.append(name)
            waits[name] = Deferred()
            return waits[name]

        return run

    a = hooks.add("a", hook("a"))
    b = hooks.add("b", hook("b"))
    c = hooks.add("c", lambda: None)
    assert hooks.names() == ["a", "b", "c"]
    assert hooks.checks() == [a, b, c]
    done = hooks.run_all()
    assert sorted(started) == ["a", "b"]  # both started before either finished
    assert reason(c) is None
    waits["b"].callback(None)
    assert reason(b) is None
    assert reason(a) == "not finished"
    assert not done.called
    waits["a"].callback(None)
    assert reason(a) is None
    assert result_of(done) is None


def test_post_start_hook_error_is_fatal() -> None:
    fatal: list[tuple[str, Failure]] = []
    hooks = PostStartHooks(Clock(), on_fatal=lambda name, f: fatal.append((name, f)))
    pending: Deferred[None] = Deferred()

    def boom() -> None:
        raise RuntimeError("sync boom")

    bad = hooks.add("bad", boom)
    late = hooks.add("late", lambda: pending)
    ok = hooks.add("ok", lambda: None)
    done = hooks.run_all()
    assert [name for name, _ in fatal] == ["bad"]
    assert isinstance(fatal[0][1].value, RuntimeError)
    pending.errback(ValueError("async boom"))
    assert [name for name, _ in fatal] == ["bad", "late"]
    assert str(fatal[1][1].value) == "async boom"
    assert reason(bad) == "not finished"
    assert reason(late) == "not finished"
    assert reason(ok) is None
    assert result_of(done) is None


def test_post_start_on_fatal_given_to_run_all_wins() -> None:
    first: list[str] = []
    second: list[str] = []
    hooks = PostStartHooks(Clock(), on_fatal=lambda name, _: first.append(name))
    hooks.add("x", lambda: fail(RuntimeError("x")))
    hooks.run_all(on_fatal=lambda name, _: second.append(name))
    assert (first, second) == ([], ["x"])


def test_post_start_without_on_fatal_and_raising_on_fatal_do_not_break() -> None:
    hooks = PostStartHooks(Clock())
    hooks.add("x", lambda: fail(RuntimeError("x")))
    assert result_of(hooks.run_all()) is None

    def bad_handler(name: str, failure: Failure) -> None:
        raise RuntimeError("handler broke")

    hooks2 = PostStartHooks(Clock(), on_fatal=bad_handler)
    hooks2.add("y", lambda: fail(RuntimeError("y")))
    assert result_of(hooks2.run_all()) is None


def test_post_start_hook_registration_errors() -> None:
    hooks = PostStartHooks(Clock())
    hooks.add("a", lambda: None)
    with pytest.raises(ValueError):
        hooks.add("a", lambda: None)
    with pytest.raises(ValueError):
        hooks.add("", lambda: None)
    hooks.run_all()
    with pytest.raises(ValueError):
        hooks.add("b", lambda: None)
    with pytest.raises(RuntimeError):
        hooks.run_all()


def test_post_start_no_hooks() -> None:
    assert result_of(PostStartHooks(Clock()).run_all()) is None
