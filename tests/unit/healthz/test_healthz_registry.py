"""Which checks each health endpoint runs, in which order, and the livez grace period."""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from apiserver.healthz.checks import (
    HealthCheck,
    HealthCheckError,
    PostStartHooks,
    ShutdownCheck,
    ping_check,
    run_check,
)
from apiserver.healthz.registry import ENDPOINTS, HealthRegistry


def result_of(d: Deferred[Any]) -> Any:
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "Deferred has not fired"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


def names(registry: HealthRegistry, endpoint: str) -> list[str]:
    return [check.name for check in registry.checks(endpoint)]


def ok(name: str) -> HealthCheck:
    return HealthCheck(name, lambda: None)


def test_endpoints() -> None:
    assert ENDPOINTS == ("healthz", "livez", "readyz")


def test_registration_order_and_endpoint_selection() -> None:
    registry = HealthRegistry(Clock(), 0)
    registry.add(ping_check())
    registry.add(ok("log"))
    registry.add(ok("etcd"))
    registry.add(ok("etcd-readiness"), healthz=False, livez=False)
    registry.add(ok("informer-sync"), healthz=False, livez=False)
    registry.add(ok("kms-providers"), livez=False)
    registry.add(ok("poststarthook/a"), boot_sequence=True)
    assert names(registry, "healthz") == [
        "ping",
        "log",
        "etcd",
        "kms-providers",
        "poststarthook/a",
    ]
    assert names(registry, "livez") == ["ping", "log", "etcd", "poststarthook/a"]
    assert names(registry, "readyz") == [
        "ping",
        "log",
        "etcd",
        "etcd-readiness",
        "informer-sync",
        "kms-providers",
        "poststarthook/a",
    ]


def test_shutdown_is_last_and_readyz_only() -> None:
    registry = HealthRegistry(Clock(), 0)
    registry.add(ping_check())
    shutdown = ShutdownCheck()
    registry.add_last_readyz(shutdown)
    registry.add(ok("poststarthook/late"), boot_sequence=True)
    assert names(registry, "readyz") == ["ping", "poststarthook/late", "shutdown"]
    assert registry.checks("readyz")[-1] is shutdown
    assert "shutdown" not in names(registry, "livez")
    assert "shutdown" not in names(registry, "healthz")


def test_duplicate_names_rejected_per_endpoint() -> None:
    registry = HealthRegistry(Clock(), 0)
    registry.add(ok("a"), readyz=False)
    with pytest.raises(ValueError):
        registry.add(ok("a"))
    assert names(registry, "readyz") == []  # nothing half added
    registry.add(ok("a"), healthz=False, livez=False)
    assert names(registry, "readyz") == ["a"]
    registry.add_last_readyz(ShutdownCheck())
    with pytest.raises(ValueError):
        registry.add(ok("shutdown"))
    with pytest.raises(ValueError):
        registry.add_last_readyz(ShutdownCheck())


def test_unknown_endpoint_and_negative_grace() -> None:
    registry = HealthRegistry(Clock(), 0)
    with pytest.raises(ValueError):
        registry.checks("metrics")
    with pytest.raises(ValueError):
        HealthRegistry(Clock(), -1)


def test_check_lookup() -> None:
    registry = HealthRegistry(Clock(), 0)
    check = ok("poststarthook/rbac/bootstrap-roles")
    registry.add(check)
    assert registry.check("readyz", "poststarthook/rbac/bootstrap-roles") is check
    assert registry.check("readyz", "poststarthook/rbac") is None


def test_grace_period_wraps_boot_sequence_checks_on_livez_only() -> None:
    clock = Clock()
    clock.advance(1000)
    registry = HealthRegistry(clock, livez_grace_period=30)
    assert registry.start_time == 1000
    assert registry.grace_deadline == 1030
    hooks = PostStartHooks(clock)
    calls: list[str] = []
    pending: Deferred[None] = Deferred()

    def hook() -> Deferred[None]:
        return pending

    hook_check = hooks.add("bootstrap", hook)
    real_fn = hook_check.fn

    def counting() -> Deferred[None] | None:
        calls.append("called")
        return real_fn()

    hook_check.fn = counting
    registry.add(hook_check, boot_sequence=True)
    hooks.run_all()

    def livez() -> str | None:
        check = registry.check("livez", "poststarthook/bootstrap")
        assert check is not None
        return result_of(run_check(check))

    # healthz and readyz get the real check, never wrapped.
    assert registry.check("readyz", "poststarthook/bootstrap") is hook_check
    assert registry.check("healthz", "poststarthook/bootstrap") is hook_check
    assert result_of(run_check(hook_check)) == "not finished"
    calls.clear()

    assert livez() is None
    clock.advance(30)  # exactly at the deadline: still inside (Go: Now().After(deadline))
    assert livez() is None
    assert calls == []  # the real check was not called
    clock.advance(0.001)
    assert livez() == "not finished"
    assert calls == ["called"]
    pending.callback(None)
    assert livez() is None


def test_grace_period_counts_from_given_start_time() -> None:
    clock = Clock()
    clock.advance(100)

    def failing() -> None:
        raise HealthCheckError("not finished")

    registry = HealthRegistry(clock, livez_grace_period=60, start_time=50)
    registry.add(HealthCheck("poststarthook/x", failing), boot_sequence=True)
    check = registry.check("livez", "poststarthook/x")
    assert check is not None
    assert result_of(run_check(check)) is None  # 100 <= 110
    clock.advance(10.5)
    assert result_of(run_check(check)) == "not finished"


def test_zero_grace_never_skips() -> None:
    def failing() -> None:
        raise HealthCheckError("not finished")

    registry = HealthRegistry(Clock(), livez_grace_period=0)
    registry.add(HealthCheck("poststarthook/x", failing), boot_sequence=True)
    check = registry.check("livez", "poststarthook/x")
    assert check is not None
    assert result_of(run_check(check)) == "not finished"


def test_non_boot_sequence_checks_not_wrapped_on_livez() -> None:
    def failing() -> None:
        raise HealthCheckError("down")

    registry = HealthRegistry(Clock(), livez_grace_period=100)
    check = HealthCheck("etcd", failing)
    registry.add(check)
    assert registry.check("livez", "etcd") is check


def test_mark_ready_fires_once() -> None:
    registry = HealthRegistry(Clock(), 0)
    fired: list[object] = []
    registry.has_been_ready.addCallback(fired.append)
    registry.mark_ready()
    registry.mark_ready()
    assert fired == [None]
