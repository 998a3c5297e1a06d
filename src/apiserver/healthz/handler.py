"""Answers for ``/healthz``, ``/livez``, ``/readyz`` and their per-check paths.

Reference: k8s.io/apiserver ``pkg/server/healthz/healthz.go`` (``handleRootHealth``,
``adaptCheckToHandler``, ``formatQuoted``). Checks run one after another, in registration
order, on every request; nothing is cached here (a check may cache inside itself).
``formatQuoted`` is ``%q`` of each name: :func:`apiserver.apimachinery.errors.go_quote`,
re-exported here as ``go_quote``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.gocompat.quote import go_quote
from apiserver.healthz.checks import HealthCheck, run_check
from apiserver.healthz.registry import ENDPOINTS, HealthRegistry
from apiserver.http.response import Response, text

_log = Logger()


def _run_sequentially(checks: Sequence[HealthCheck]) -> Deferred[list[str | None]]:
    """Run ``checks`` one after another; fires with each one's reason (None: passed).

    Cancelling the result (the client went away) cancels the running check and runs no
    further ones.
    """
    reasons: list[str | None] = []
    cancelled = False
    chain: Deferred[None] = succeed(None)

    def cancel(_: Deferred[list[str | None]]) -> None:
        nonlocal cancelled
        cancelled = True
        chain.cancel()

    result: Deferred[list[str | None]] = Deferred(cancel)

    def step(_: object, check: HealthCheck) -> Deferred[None] | None:
        if cancelled:
            return None
        return run_check(check).addCallback(reasons.append)

    for check in checks:
        chain.addCallback(step, check)

    def finish(outcome: object) -> None:
        if result.called:
            return
        if isinstance(outcome, Failure):
            result.errback(outcome)
        else:
            result.callback(reasons)

    chain.addBoth(finish)
    return result


def render_endpoint(
    registry: HealthRegistry, endpoint: str, args: Mapping[bytes, Sequence[bytes]]
) -> Deferred[Response]:
    """Run every check of ``endpoint`` and build the answer (Go ``handleRootHealth``).

    ``args`` is the parsed query (Twisted's ``request.args``). ``exclude`` values name checks
    to skip (exact match, repeatable); ``verbose`` only needs to be present. A failure is
    always verbose and answers 500.
    """
    checks = registry.checks(endpoint)
    excluded: set[bytes] = set(args.get(b"exclude", ()))
    verbose = b"verbose" in args
    plan: list[tuple[HealthCheck, bool]] = []
    to_run: list[HealthCheck] = []
    for check in checks:
        key = check.name.encode("utf-8", "surrogateescape")
        if key in excluded:
            excluded.discard(key)
            plan.append((check, False))
        else:
            plan.append((check, True))
            to_run.append(check)
    unmatched = sorted(excluded)

    def build(reasons: list[str | None]) -> Response:
        lines: list[str] = []
        failed: list[str] = []
        details: list[str] = []
        ran = iter(reasons)
        observe = registry.observe
        for check, run in plan:
            if not run:
                lines.append(f"[+]{check.name} excluded: ok\n")
                continue
            reason = next(ran)
            if observe is not None:
                observe(check.name, endpoint, reason is None)
            if reason is None:
                lines.append(f"[+]{check.name} ok\n")
            else:
                lines.append(f"[-]{check.name} failed: reason withheld\n")
                details.append(f"[-]{check.name} failed: {reason}\n")
                failed.append(check.name)
        if unmatched:
            names = ",".join(go_quote(name) for name in unmatched)
            lines.append(f"warn: some health checks cannot be excluded: no matches for {names}\n")
        if failed:
            _log.debug(
                "{failed} check failed: {endpoint}\n{details}",
                failed=",".join(failed),
                endpoint=endpoint,
                details="".join(details),
            )
            return text(500, "".join(lines) + f"{endpoint} check failed\n")
        if endpoint == "readyz":
            registry.mark_ready()
        if not verbose:
            return text(200, "ok")
        return text(200, "".join(lines) + f"{endpoint} check passed\n")

    return _run_sequentially(to_run).addCallback(build)


def render_single(
    registry: HealthRegistry, endpoint: str, check_name: str
) -> Deferred[Response] | None:
    """Answer ``/<endpoint>/<check_name>`` (Go ``adaptCheckToHandler``); None if no such check.

    Pass: 200 ``ok`` with only the Content-Type Go's sniffing gives. Fail: 500
    ``internal server error: <reason>`` plus newline, as ``http.Error`` writes it. On livez the
    grace-wrapped check runs.
    """
    check = registry.check(endpoint, check_name)
    if check is None:
        return None

    def build(reason: str | None) -> Response:
        if reason is None:
            return text(200, "ok", nosniff=False)
        return text(500, f"internal server error: {reason}\n")

    return run_check(check).addCallback(build)


def all_paths(registry: HealthRegistry) -> list[str]:
    """``/healthz``, ``/livez``, ``/readyz`` and every ``/<endpoint>/<check>`` path, sorted."""
    paths = set()
    for endpoint in ENDPOINTS:
        paths.add(f"/{endpoint}")
        for check in registry.checks(endpoint):
            paths.add(f"/{endpoint}/{check.name}")
    return sorted(paths)
