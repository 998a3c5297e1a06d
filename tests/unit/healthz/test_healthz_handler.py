"""``/healthz``, ``/livez``, ``/readyz`` and per-check answers, byte for byte."""

from __future__ import annotations

import ast
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from apiserver.healthz.checks import (
    HealthCheck,
    HealthCheckError,
    PostStartHooks,
    ShutdownCheck,
    ping_check,
)
from apiserver.healthz.handler import all_paths, go_quote, render_endpoint, render_single
from apiserver.healthz.registry import HealthRegistry
from apiserver.http.response import Response

TEXT = ("Content-Type", "text/plain; charset=utf-8")
NOSNIFF = ("X-Content-Type-Options", "nosniff")


def result_of(d: Deferred[Any]) -> Any:
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "Deferred has not fired"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    return results[0]


def ok(name: str) -> HealthCheck:
    return HealthCheck(name, lambda: None)


def failing(name: str, why: str = "boom") -> HealthCheck:
    def fn() -> None:
        raise HealthCheckError(why)

    return HealthCheck(name, fn)


def render(registry: HealthRegistry, endpoint: str, query: str = "") -> Response:
    args: dict[bytes, list[bytes]] = {}
    for part in query.split("&") if query else []:
        key, _, value = part.partition("=")
        args.setdefault(key.encode(), []).append(value.encode())
    return result_of(render_endpoint(registry, endpoint, args))


def single(registry: HealthRegistry, endpoint: str, name: str) -> Response:
    d = render_single(registry, endpoint, name)
    assert d is not None
    return result_of(d)


def basic(*extra: HealthCheck) -> HealthRegistry:
    registry = HealthRegistry(Clock(), 0)
    registry.add(ping_check())
    registry.add(ok("log"))
    for check in extra:
        registry.add(check)
    return registry


# --- aggregate endpoints -----------------------------------------------------------------


def test_all_pass_not_verbose() -> None:
    for endpoint in ("healthz", "livez", "readyz"):
        response = render(basic(), endpoint)
        assert response == Response(200, (TEXT, NOSNIFF), b"ok")


def test_verbose_key_presence_is_enough() -> None:
    for query in ("verbose", "verbose=", "verbose=false", "verbose=0", "verbose=1"):
        response = render(basic(), "livez", query)
        assert response.code == 200
        assert response.headers == (TEXT, NOSNIFF)
        assert response.body == b"[+]ping ok\n[+]log ok\nlivez check passed\n"


def test_failure_is_always_verbose() -> None:
    registry = basic(failing("etcd", "secret detail"))
    for query in ("", "verbose"):
        response = render(registry, "livez", query)
        assert response == Response(
            500,
            (TEXT, NOSNIFF),
            b"[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\nlivez check failed\n",
        )


def test_failure_in_middle_still_runs_later_checks() -> None:
    calls: list[str] = []

    def recorder(name: str, fail: bool) -> HealthCheck:
        def fn() -> None:
            calls.append(name)
            if fail:
                raise HealthCheckError("x")

        return HealthCheck(name, fn)

    registry = HealthRegistry(Clock(), 0)
    registry.add(recorder("a", True))
    registry.add(recorder("b", False))
    response = render(registry, "readyz")
    assert calls == ["a", "b"]
    assert response.body == b"[-]a failed: reason withheld\n[+]b ok\nreadyz check failed\n"


def test_exclude() -> None:
    registry = basic(failing("etcd"))
    response = render(registry, "readyz", "exclude=etcd")
    assert response == Response(200, (TEXT, NOSNIFF), b"ok")
    response = render(registry, "readyz", "verbose&exclude=etcd")
    assert response.body == b"[+]ping ok\n[+]log ok\n[+]etcd excluded: ok\nreadyz check passed\n"


def test_repeated_exclude() -> None:
    registry = basic(failing("etcd"))
    response = render(registry, "readyz", "exclude=etcd&exclude=log&verbose")
    assert response.body == (
        b"[+]ping ok\n[+]log excluded: ok\n[+]etcd excluded: ok\nreadyz check passed\n"
    )


def test_exclude_name_with_slashes() -> None:
    registry = basic(failing("poststarthook/rbac/bootstrap-roles", "not finished"))
    response = render(registry, "livez", "verbose")
    assert response.code == 500
    assert b"[-]poststarthook/rbac/bootstrap-roles failed: reason withheld\n" in response.body
    response = render(registry, "livez", "verbose&exclude=poststarthook/rbac/bootstrap-roles")
    assert response.code == 200
    assert response.body == (
        b"[+]ping ok\n[+]log ok\n[+]poststarthook/rbac/bootstrap-roles excluded: ok\n"
        b"livez check passed\n"
    )
    # A prefix is not a match.
    response = render(registry, "livez", "exclude=poststarthook/rbac")
    assert response.code == 500


def test_unknown_exclude_warn_line_sorted_and_quoted() -> None:
    registry = basic()
    response = render(registry, "healthz", "verbose&exclude=zeta&exclude=ping&exclude=alpha")
    assert response.code == 200
    assert response.body == (
        b"[+]ping excluded: ok\n[+]log ok\n"
        b'warn: some health checks cannot be excluded: no matches for "alpha","zeta"\n'
        b"healthz check passed\n"
    )
    # Not verbose: the warning is not shown, and unknown names never cause a failure.
    assert render(registry, "healthz", "exclude=nosuch").body == b"ok"


def test_unknown_exclude_duplicates_and_empty_value() -> None:
    registry = basic()
    response = render(registry, "livez", "verbose&exclude=b&exclude=b&exclude=")
    assert response.body == (
        b"[+]ping ok\n[+]log ok\n"
        b'warn: some health checks cannot be excluded: no matches for "","b"\n'
        b"livez check passed\n"
    )


def test_warn_line_escapes_and_byte_order() -> None:
    registry = basic()
    args = {
        b"verbose": [b""],
        b"exclude": [b'a"b', b"tab\there", "é".encode(), b"\xff", b"Z"],
    }
    response = result_of(render_endpoint(registry, "livez", args))
    # Sorted by bytes as Go sorts strings: "Z" < "a\"b" < "tab..." < "é" (0xc3) < 0xff.
    assert response.body == (
        b"[+]ping ok\n[+]log ok\n"
        b"warn: some health checks cannot be excluded: no matches for "
        + '"Z","a\\"b","tab\\there","é","\\xff"'.encode()
        + b"\nlivez check passed\n"
    )


def test_warn_line_with_failure() -> None:
    registry = basic(failing("etcd"))
    response = render(registry, "readyz", "exclude=nosuch")
    assert response.code == 500
    assert response.body == (
        b"[+]ping ok\n[+]log ok\n[-]etcd failed: reason withheld\n"
        b'warn: some health checks cannot be excluded: no matches for "nosuch"\n'
        b"readyz check failed\n"
    )


def test_checks_run_sequentially_in_order_on_every_request() -> None:
    calls: list[str] = []
    gates: list[Deferred[None]] = []

    def slow(name: str) -> HealthCheck:
        def fn() -> Deferred[None]:
            calls.append(name)
            gate: Deferred[None] = Deferred()
            gates.append(gate)
            return gate

        return HealthCheck(name, fn)

    registry = HealthRegistry(Clock(), 0)
    registry.add(slow("first"))
    registry.add(slow("second"))
    d = render_endpoint(registry, "readyz", {b"verbose": [b""]})
    assert calls == ["first"]  # second waits for first
    gates[0].callback(None)
    assert calls == ["first", "second"]
    assert not d.called
    gates[1].errback(RuntimeError("x"))
    response = result_of(d)
    assert response.body == b"[+]first ok\n[-]second failed: reason withheld\nreadyz check failed\n"
    # No caching: a second request runs both again.
    d2 = render_endpoint(registry, "readyz", {})
    gates[2].callback(None)
    gates[3].callback(None)
    assert calls == ["first", "second", "first", "second"]
    assert result_of(d2).body == b"ok"


def test_cancel_stops_running_checks() -> None:
    calls: list[str] = []
    cancelled: list[str] = []

    def slow(name: str) -> HealthCheck:
        def fn() -> Deferred[None]:
            calls.append(name)
            return Deferred(lambda _: cancelled.append(name))

        return HealthCheck(name, fn)

    registry = HealthRegistry(Clock(), 0)
    registry.add(slow("first"))
    registry.add(slow("second"))
    d = render_endpoint(registry, "livez", {})
    d.cancel()
    assert cancelled == ["first"]
    assert calls == ["first"]
    failures: list[Failure] = []
    d.addErrback(failures.append)
    assert len(failures) == 1


def test_no_checks() -> None:
    registry = HealthRegistry(Clock(), 0)
    assert render(registry, "readyz").body == b"ok"
    assert render(registry, "readyz", "verbose").body == b"readyz check passed\n"


# --- has_been_ready ----------------------------------------------------------------------


def test_has_been_ready_fires_once_at_first_successful_readyz() -> None:
    flaky = {"fail": True}

    def fn() -> None:
        if flaky["fail"]:
            raise HealthCheckError("no")

    registry = HealthRegistry(Clock(), 0)
    registry.add(HealthCheck("etcd", fn))
    fired: list[object] = []
    registry.has_been_ready.addCallback(fired.append)
    render(registry, "readyz")
    assert fired == []
    flaky["fail"] = False
    render(registry, "livez")
    render(registry, "healthz")
    single(registry, "readyz", "etcd")
    assert fired == []
    render(registry, "readyz", "verbose")
    assert fired == [None]
    render(registry, "readyz")
    assert fired == [None]


def test_readyz_success_with_exclusion_counts_as_ready() -> None:
    registry = basic(failing("etcd"))
    render(registry, "readyz", "exclude=etcd")
    assert registry.has_been_ready.called


# --- per-check endpoints -----------------------------------------------------------------


def test_single_pass_and_fail() -> None:
    registry = basic(failing("etcd", "error getting data from etcd: context deadline exceeded"))
    assert single(registry, "livez", "ping") == Response(200, (TEXT,), b"ok")
    assert single(registry, "livez", "etcd") == Response(
        500,
        (TEXT, NOSNIFF),
        b"internal server error: error getting data from etcd: context deadline exceeded\n",
    )


def test_single_unknown_is_none() -> None:
    registry = basic()
    assert render_single(registry, "livez", "nosuch") is None
    assert render_single(registry, "livez", "") is None
    assert render_single(registry, "livez", "shutdown") is None


def test_single_post_start_hook_with_slashes() -> None:
    clock = Clock()
    registry = HealthRegistry(clock, 0)
    hooks = PostStartHooks(clock)
    gate: Deferred[None] = Deferred()
    registry.add(
        hooks.add("start-kube-apiserver-admission-initializer", lambda: gate), boot_sequence=True
    )
    registry.add(hooks.add("rbac/bootstrap-roles", lambda: None), boot_sequence=True)
    hooks.run_all()
    name = "poststarthook/start-kube-apiserver-admission-initializer"
    assert single(registry, "readyz", name) == Response(
        500, (TEXT, NOSNIFF), b"internal server error: not finished\n"
    )
    assert single(registry, "readyz", "poststarthook/rbac/bootstrap-roles").body == b"ok"
    assert render_single(registry, "readyz", "poststarthook/rbac") is None
    gate.callback(None)
    assert single(registry, "readyz", name).body == b"ok"


def test_single_livez_uses_grace_wrapped_check() -> None:
    clock = Clock()
    registry = HealthRegistry(clock, livez_grace_period=10)
    hooks = PostStartHooks(clock)
    registry.add(hooks.add("slow", lambda: Deferred()), boot_sequence=True)
    hooks.run_all()
    name = "poststarthook/slow"
    assert single(registry, "livez", name) == Response(200, (TEXT,), b"ok")
    assert single(registry, "readyz", name).code == 500
    assert render(registry, "livez").code == 200
    assert render(registry, "readyz").code == 500
    assert render(registry, "healthz").code == 500
    clock.advance(11)
    assert single(registry, "livez", name).body == b"internal server error: not finished\n"
    assert render(registry, "livez", "").body == (
        b"[-]poststarthook/slow failed: reason withheld\nlivez check failed\n"
    )


# --- shutdown, whole-server shape --------------------------------------------------------


def test_shutdown_fails_readyz_only_and_is_last() -> None:
    clock = Clock()
    registry = HealthRegistry(clock, 0)
    registry.add(ping_check())
    registry.add(ok("log"))
    registry.add(ok("etcd"))
    registry.add(ok("etcd-readiness"), healthz=False, livez=False)
    shutdown = ShutdownCheck()
    registry.add_last_readyz(shutdown)
    registry.add(ok("poststarthook/rbac/bootstrap-roles"), boot_sequence=True)
    assert render(registry, "readyz", "verbose").body == (
        b"[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n"
        b"[+]poststarthook/rbac/bootstrap-roles ok\n[+]shutdown ok\nreadyz check passed\n"
    )
    shutdown.initiate()
    assert render(registry, "readyz").body == (
        b"[+]ping ok\n[+]log ok\n[+]etcd ok\n[+]etcd-readiness ok\n"
        b"[+]poststarthook/rbac/bootstrap-roles ok\n[-]shutdown failed: reason withheld\n"
        b"readyz check failed\n"
    )
    assert single(registry, "readyz", "shutdown").body == (
        b"internal server error: process is shutting down\n"
    )
    assert render(registry, "livez").body == b"ok"
    assert render(registry, "healthz").body == b"ok"


def test_all_paths() -> None:
    registry = HealthRegistry(Clock(), 0)
    registry.add(ping_check())
    registry.add(ok("etcd-readiness"), healthz=False, livez=False)
    registry.add(ok("poststarthook/rbac/bootstrap-roles"), boot_sequence=True)
    registry.add_last_readyz(ShutdownCheck())
    assert all_paths(registry) == [
        "/healthz",
        "/healthz/ping",
        "/healthz/poststarthook/rbac/bootstrap-roles",
        "/livez",
        "/livez/ping",
        "/livez/poststarthook/rbac/bootstrap-roles",
        "/readyz",
        "/readyz/etcd-readiness",
        "/readyz/ping",
        "/readyz/poststarthook/rbac/bootstrap-roles",
        "/readyz/shutdown",
    ]


# --- go_quote ----------------------------------------------------------------------------


def test_go_quote_examples() -> None:
    # Expected values are what Go's strconv.Quote prints.
    cases: list[tuple[str | bytes, str]] = [
        ("abc", '"abc"'),
        ("", '""'),
        ('a"b\\c', '"a\\"b\\\\c"'),
        ("\a\b\f\n\r\t\v", '"\\a\\b\\f\\n\\r\\t\\v"'),
        ("\x00\x1b\x1f\x7f", '"\\x00\\x1b\\x1f\\x7f"'),
        ("héllo ☺ 日本", '"héllo ☺ 日本"'),
        ("\U0001f600", '"\U0001f600"'),
        ("\u00a0", '"\\u00a0"'),
        ("\u00ad", '"\\u00ad"'),
        ("\u200b", '"\\u200b"'),
        ("\u2028", '"\\u2028"'),
        ("\x85", '"\\u0085"'),
        ("\U000e0001", '"\\U000e0001"'),
        ("\ufffd", '"\ufffd"'),
        (b"\xef\xbf\xbd", '"\ufffd"'),
        (b"\xff\xfe", '"\\xff\\xfe"'),
        (b"a\xe2\x82z", '"a\\xe2\\x82z"'),
        (b"\xed\xa0\x80", '"\\xed\\xa0\\x80"'),  # an encoded surrogate is invalid UTF-8
        (b"poststarthook/rbac/bootstrap-roles", '"poststarthook/rbac/bootstrap-roles"'),
    ]
    for value, expected in cases:
        assert go_quote(value) == expected, value


@given(st.text(alphabet=st.characters(codec="utf-8")))  # valid text: no surrogates
def test_go_quote_round_trips_through_a_string_literal(value: str) -> None:
    # Go's escapes for valid text (\a..\v, \\, \", \xNN below 0x80, \uNNNN, \UNNNNNNNN) mean
    # the same in a Python string literal.
    quoted = go_quote(value)
    assert quoted.startswith('"') and quoted.endswith('"')
    assert ast.literal_eval(quoted) == value
    assert go_quote(value.encode()) == quoted
