"""Health check values and the checks kube-apiserver registers itself.

A check is a name and a function. The function passes by returning None (or a Deferred that
fires), and fails by raising or by returning a Deferred that errbacks; the exception's ``str``
is the reason (shown only by the per-check paths, withheld by the aggregate endpoints).

Reference: k8s.io/apiserver ``pkg/server/healthz/healthz.go`` (ping, log),
``pkg/server/hooks.go`` (post-start hooks), ``pkg/server/healthz.go`` (shutdown) and
``pkg/storage/storagebackend/factory/etcd3.go`` (the rate-limited etcd probe).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any, Protocol, cast

import attrs
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

_log = Logger()

CheckFn = Callable[[], "Deferred[None] | None"]
Hook = Callable[[], "Deferred[None] | None"]
FatalHandler = Callable[[str, Failure], None]


class _DelayedCall(Protocol):
    def active(self) -> bool: ...
    def cancel(self) -> None: ...


class _Clock(Protocol):
    """What is used of ``IReactorTime``, typed for mypy (which has no zope plugin here)."""

    def seconds(self) -> float: ...
    def callLater(
        self, delay: float, callable: Callable[..., object], *args: object, **kw: object
    ) -> Any: ...


def as_clock(clock: IReactorTime) -> _Clock:
    return cast(_Clock, clock)


def _maybe_deferred(fn: Callable[[], Deferred[None] | None]) -> Deferred[object]:
    """``maybeDeferred`` for a check or hook function (raises -> failed Deferred)."""
    return maybeDeferred(cast(Callable[[], object], fn))


class HealthCheckError(Exception):
    """A check failed; the message is the reason."""


@attrs.define(eq=False)
class HealthCheck:
    """One named health check (Go ``healthz.HealthChecker``).

    ``fn`` passes by returning None or a Deferred that fires; it fails by raising or
    errbacking. The failure's message is the reason.
    """

    name: str
    fn: CheckFn


def run_check(check: HealthCheck) -> Deferred[str | None]:
    """Run ``check`` once; fires with None when it passed, else with the reason.

    The returned Deferred never errbacks. Cancelling it cancels the check's own Deferred
    (which then counts as failed, with CancelledError's empty message as the reason).
    """
    d = _maybe_deferred(check.fn)

    def passed(_: object) -> str | None:
        return None

    def failed(failure: Failure) -> str | None:
        return str(failure.value)

    return d.addCallbacks(passed, failed)


def ping_check() -> HealthCheck:
    """``ping``: always passes (Go ``healthz.PingHealthz``)."""

    def ping() -> None:
        return None

    return HealthCheck("ping", ping)


def _flush_logging() -> None:
    """Flush every handler of the root logger and the standard streams.

    The Python counterpart of ``klog.Flush()``: if one of these blocks, the loop stops
    stamping and the check turns stale. A closed stream (a daemon without stdio) is skipped.
    """
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and not stream.closed:
            stream.flush()


class LogCheck(HealthCheck):
    """``log``: is the logging system still making progress? (Go ``healthz.LogHealthz``).

    The first call starts a loop on ``clock`` that flushes the logging system every
    ``interval`` seconds (at once, then periodically) and stamps "last verified" after each
    successful flush. The check fails with ``logging blocked`` once the stamp is
    ``max_age`` seconds old or older. ``flush`` is injectable for tests.
    """

    def __init__(
        self,
        clock: IReactorTime,
        flush: Callable[[], None] = _flush_logging,
        *,
        interval: float = 60.0,
        max_age: float = 120.0,
    ) -> None:
        super().__init__("log", self._check)
        self._reactor_time = clock
        self._clock = as_clock(clock)
        self._flush = flush
        self._interval = interval
        self._max_age = max_age
        self._loop: LoopingCall | None = None
        self._last_verified = 0.0

    @property
    def last_verified(self) -> float:
        """Clock time of the last successful flush (0 before the first call)."""
        return self._last_verified

    def _check(self) -> None:
        if self._loop is None:
            self._last_verified = self._clock.seconds()
            loop = LoopingCall(self._verify)
            loop.clock = self._reactor_time
            self._loop = loop
            loop.start(self._interval, now=True).addErrback(
                lambda f: _log.failure("log check loop ended", f)
            )
        if self._clock.seconds() - self._last_verified < self._max_age:
            return None
        raise HealthCheckError("logging blocked")

    def _verify(self) -> None:
        try:
            self._flush()
        except Exception:
            _log.failure("flushing the logging system failed")
            return
        self._last_verified = self._clock.seconds()

    def stop(self) -> None:
        """Cancel the loop (service shutdown). Later calls do not restart it."""
        if self._loop is not None and self._loop.running:
            self._loop.stop()


class StoreCheck(HealthCheck):
    """The store probe behind ``etcd`` and ``etcd-readiness`` (Go ``newETCD3Check``).

    - At most one real probe per ``timeout / 2`` seconds (a token bucket with burst 1); a
      call in between returns the result of the last probe *sent* (not the last one
      answered), which starts as ``<backend> client connection not yet established``.
    - ``probe(timeout)`` that has not answered after ``timeout`` seconds on ``clock`` is
      cancelled and counts as ``context deadline exceeded``.
    - Probe errors read ``error getting data from <backend>: <error>``; ``backend`` is
      ``etcd`` for the etcd backend (the exact upstream text), e.g. ``sqlite`` for the
      embedded one.
    - After :meth:`close` (kube-apiserver: once in-flight requests are drained) the check
      fails with ``server is shutting down``.

    Cancelling the Deferred a caller got back (the HTTP client went away) leaves the probe
    running: like upstream, the probe is not tied to one request.
    """

    def __init__(
        self,
        name: str,
        probe: Callable[[float], Deferred[None]],
        timeout: float,
        clock: IReactorTime,
        *,
        backend: str = "etcd",
    ) -> None:
        super().__init__(name, self._check)
        self._probe = probe
        self._timeout = timeout
        self._clock = as_clock(clock)
        self._backend = backend
        self._interval = timeout / 2
        self._last_allowed: float | None = None
        self._last_error: str | None = f"{backend} client connection not yet established"
        self._last_error_sent_at = float("-inf")
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """From now on fail with ``server is shutting down``."""
        self._closed = True

    def _allow(self, now: float) -> bool:
        if self._interval <= 0:
            return True
        if self._last_allowed is None or now - self._last_allowed >= self._interval:
            self._last_allowed = now
            return True
        return False

    def _check(self) -> Deferred[None] | None:
        if self._closed:
            raise HealthCheckError("server is shutting down")
        now = self._clock.seconds()
        if not self._allow(now):
            if self._last_error is None:
                return None
            raise HealthCheckError(self._last_error)
        return self._send(now)

    def _send(self, sent_at: float) -> Deferred[None]:
        answer: Deferred[None] = Deferred()
        timed_out = False
        probe_d = maybeDeferred(self._probe, self._timeout)

        def on_timeout() -> None:
            nonlocal timed_out
            timed_out = True
            probe_d.cancel()

        timer: _DelayedCall = self._clock.callLater(self._timeout, on_timeout)

        def done(result: object) -> None:
            if timer.active():
                timer.cancel()
            error: str | None = None
            if isinstance(result, Failure):
                reason = "context deadline exceeded" if timed_out else str(result.value)
                error = f"error getting data from {self._backend}: {reason}"
            if sent_at >= self._last_error_sent_at:
                self._last_error = error
                self._last_error_sent_at = sent_at
            if answer.called:  # the caller cancelled its wait
                return
            if error is None:
                answer.callback(None)
            else:
                answer.errback(HealthCheckError(error))

        probe_d.addBoth(done)
        return answer


class ShutdownCheck(HealthCheck):
    """``shutdown`` (readyz only, last): fails ``process is shutting down`` once
    :meth:`initiate` was called (kube-apiserver's ``ShutdownInitiated`` signal)."""

    def __init__(self) -> None:
        super().__init__("shutdown", self._check)
        self._initiated = False

    @property
    def initiated(self) -> bool:
        return self._initiated

    def initiate(self) -> None:
        self._initiated = True

    def _check(self) -> None:
        if self._initiated:
            raise HealthCheckError("process is shutting down")


@attrs.define(eq=False)
class _HookEntry:
    name: str
    hook: Hook
    check: HealthCheck
    done: bool = False
    started_at: float | None = None


class PostStartHooks:
    """Post-start hooks and their ``poststarthook/<name>`` checks (Go ``hooks.go``).

    :meth:`add` returns the hook's check (register it with ``boot_sequence=True``); it fails
    ``not finished`` until the hook completed successfully. :meth:`run_all` starts every hook
    at once. A hook that raises or errbacks is fatal: kube-apiserver exits
    (``klog.Fatalf("PostStartHook %q failed: %v")``); here ``on_fatal(name, failure)`` is
    called and its check stays ``not finished``.
    """

    def __init__(self, clock: IReactorTime, on_fatal: FatalHandler | None = None) -> None:
        self._clock = as_clock(clock)
        self._on_fatal = on_fatal
        self._entries: dict[str, _HookEntry] = {}
        self._called = False

    def add(self, name: str, hook: Hook) -> HealthCheck:
        """Register ``hook``; returns its ``poststarthook/<name>`` check."""
        if not name:
            raise ValueError("missing name")
        if self._called:
            raise ValueError(
                f"unable to add {name!r} because PostStartHooks have already been called"
            )
        if name in self._entries:
            raise ValueError(f"unable to add {name!r} because it was already registered")

        def check() -> None:
            if not entry.done:
                raise HealthCheckError("not finished")

        entry = _HookEntry(name, hook, HealthCheck(f"poststarthook/{name}", check))
        self._entries[name] = entry
        return entry.check

    def names(self) -> list[str]:
        """Hook names in registration order."""
        return list(self._entries)

    def checks(self) -> list[HealthCheck]:
        """The ``poststarthook/<name>`` checks in registration order."""
        return [entry.check for entry in self._entries.values()]

    def finished(self, name: str) -> bool:
        return self._entries[name].done

    def run_all(self, on_fatal: FatalHandler | None = None) -> Deferred[None]:
        """Start every hook concurrently; fires (None) once all have ended, well or not.

        ``on_fatal`` (or the one given to the constructor) is called for each hook that
        failed. Without any, the failure is logged as critical.
        """
        if self._called:
            raise RuntimeError("post-start hooks have already been run")
        self._called = True
        fatal = on_fatal or self._on_fatal
        return DeferredList(
            [self._run_one(entry, fatal) for entry in self._entries.values()],
            consumeErrors=True,
        ).addCallback(lambda _: None)

    def _run_one(self, entry: _HookEntry, fatal: FatalHandler | None) -> Deferred[None]:
        entry.started_at = self._clock.seconds()

        def ok(_: object) -> None:
            entry.done = True
            assert entry.started_at is not None
            _log.debug(
                "poststarthook/{name} finished in {seconds:.3f}s",
                name=entry.name,
                seconds=self._clock.seconds() - entry.started_at,
            )

        def failed(failure: Failure) -> None:
            _log.critical(
                "PostStartHook {name!r} failed: {error}", name=entry.name, error=failure.value
            )
            if fatal is None:
                return
            try:
                fatal(entry.name, failure)
            except Exception:
                _log.failure("on_fatal handler for post-start hook {name} raised", name=entry.name)

        d = _maybe_deferred(entry.hook)
        return d.addCallbacks(ok, failed)
