"""The graceful-shutdown state machine of kube-apiserver, on an injected clock.

Follows k8s.io/apiserver/pkg/server/{genericapiserver.go,lifecycle_signals.go} and the filters
with_retry_after.go, waitgroup.go and watch_termination.go:

1. ShutdownInitiated (first SIGTERM/SIGINT): the readyz ``shutdown`` check fails; serving
   goes on normally.
2. After ``--shutdown-delay-duration``: NotAcceptingNewRequest.
   - default: the listener closes at once; a new request on an existing connection gets 503
     ``apiserver is shutting down`` with ``Retry-After: 1``;
   - ``--shutdown-send-retry-after``: the listener stays open and every new request gets 429
     with ``Retry-After: 5`` and ``Connection: close``.
   Health probes, ``/metrics`` and ``kube-apiserver/`` user agents are exempt.
3. InFlightRequestsDrained: non-long-running requests have finished (bounded by
   ``--request-timeout``) and, with ``--shutdown-watch-termination-grace-period`` > 0, the
   watches have been ended (bounded by that grace).
4. The listener closes (if still open) and the process stops.

A second signal exits at once with status 1, as the reference does.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList, inlineCallbacks, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from apiserver.http.app import RequestInfo
from apiserver.http.response import NOSNIFF, TEXT_PLAIN, Response
from apiserver.http.status import status_response
from apiserver.service.timers import OwnedCalls

log = Logger()

EXEMPT_PREFIXES = ("/readyz", "/livez", "/healthz", "/metrics")
RETRY_AFTER_BODY = b"The apiserver is shutting down, please try again later.\n"


class Terminable(Protocol):
    """An active watch the lifecycle can end cleanly."""

    def terminate(self) -> None: ...


def _timeout(calls: OwnedCalls, d: Deferred[Any], seconds: float) -> Deferred[Any]:
    """``d``, or a result of None once ``seconds`` pass (without cancelling ``d``)."""
    out: Deferred[Any] = Deferred()

    def expire() -> None:
        if not out.called:
            out.callback(None)

    timer = calls.later(seconds, expire)

    def fire(result: object) -> object:
        calls.cancel(timer)
        if not out.called:
            out.callback(None)
        return result

    d.addBoth(fire)
    return out


class Lifecycle:
    """Tracks in-flight requests and watches, and runs the shutdown sequence."""

    def __init__(
        self,
        clock: IReactorTime,
        *,
        shutdown_delay: float = 0.0,
        send_retry_after: bool = False,
        watch_grace: float = 0.0,
        request_timeout: float = 60.0,
        stop_listening: Callable[[], Deferred[Any] | None] = lambda: None,
        stop_process: Callable[[], None] = lambda: None,
        on_initiated: Callable[[], None] = lambda: None,
        exit_now: Callable[[int], None] = os._exit,
    ) -> None:
        self.clock = clock
        #: Every timer of the shutdown sequence (the ``--shutdown-delay-duration`` wait, the
        #: drain bounds, the watch-ending steps): :class:`LifecycleService` cancels what is
        #: still pending when the service tree stops.
        self.calls = OwnedCalls(clock)
        self.shutdown_delay = shutdown_delay
        self.send_retry_after = send_retry_after
        self.watch_grace = watch_grace
        self.request_timeout = request_timeout
        self._stop_listening = stop_listening
        self._stop_process = stop_process
        self._on_initiated = on_initiated
        self._exit_now = exit_now
        self.initiated = False
        self.not_accepting = False
        self.drained = False
        self.inflight = 0
        self._idle: list[Deferred[None]] = []
        self.watches: set[Terminable] = set()
        self.signals = 0
        self.done: Deferred[None] = Deferred()

    # --- signals -------------------------------------------------------------------------

    def on_signal(self, signum: int = 15) -> None:
        """First signal starts the graceful shutdown; the second exits at once."""
        self.signals += 1
        if self.signals > 1:
            log.warn("received a second termination signal ({sig}), exiting now", sig=signum)
            self._exit_now(1)
            return
        log.info("received signal {sig}, starting graceful shutdown", sig=signum)
        self.initiate()

    def initiate(self) -> None:
        """ShutdownInitiated: readyz fails now, the rest follows on the clock."""
        if self.initiated:
            return
        self.initiated = True
        self._on_initiated()
        if self.shutdown_delay > 0:
            self.calls.later(self.shutdown_delay, self._stop_accepting)
        else:
            self._stop_accepting()

    @inlineCallbacks
    def _stop_accepting(self) -> Any:
        self.not_accepting = True
        log.info("no longer accepting new requests")
        if not self.send_retry_after:
            yield self._call_stop_listening()
        waits = [_timeout(self.calls, self.wait_idle(), self.request_timeout)]
        if self.watch_grace > 0:
            waits.append(_timeout(self.calls, self._end_watches(), self.watch_grace))
        yield DeferredList(waits)
        self.drained = True
        log.info("in-flight requests drained")
        if self.send_retry_after:
            yield self._call_stop_listening()
        self._stop_process()
        self.done.callback(None)

    def _call_stop_listening(self) -> Deferred[Any]:
        result = self._stop_listening()
        return result if result is not None else succeed(None)

    def _end_watches(self) -> Deferred[None]:
        """End every watch, at least 200 a second, spread over the grace period."""
        watches = list(self.watches)
        if not watches:
            return succeed(None)
        rate = max(len(watches) / self.watch_grace, 200.0)
        finished: Deferred[None] = Deferred()

        def step(index: int) -> None:
            if index >= len(watches):
                finished.callback(None)
                return
            watches[index].terminate()
            self.calls.later(1.0 / rate, step, index + 1)

        step(0)
        return finished

    # --- request accounting ----------------------------------------------------------------

    def gate(self, info: RequestInfo, user_agent: str) -> Response | None:
        """The answer for a request arriving after NotAcceptingNewRequest, else None."""
        if not self.not_accepting:
            return None
        if info.path.startswith(EXEMPT_PREFIXES) or user_agent.startswith("kube-apiserver/"):
            return None
        if self.send_retry_after:
            return Response(
                429,
                (TEXT_PLAIN, NOSNIFF, ("Retry-After", "5"), ("Connection", "close")),
                RETRY_AFTER_BODY,
            )
        return status_response(
            503, "ServiceUnavailable", "apiserver is shutting down", None, (("Retry-After", "1"),)
        )

    def request_started(self, info: RequestInfo) -> None:
        if not info.long_running:
            self.inflight += 1

    def request_finished(self, info: RequestInfo) -> None:
        if info.long_running:
            return
        self.inflight -= 1
        if self.inflight == 0 and self._idle:
            waiting, self._idle = self._idle, []
            for d in waiting:
                d.callback(None)

    def wait_idle(self) -> Deferred[None]:
        """Fires when no non-long-running request is in flight."""
        if self.inflight == 0:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._idle.append(d)
        return d

    def add_watch(self, watch: Terminable) -> None:
        self.watches.add(watch)

    def remove_watch(self, watch: Terminable) -> None:
        self.watches.discard(watch)


class LifecycleService(Service):
    """The last child of the service tree: owns the :class:`Lifecycle`'s timers.

    Started last and so stopped first: when the tree stops (the process ends, or a test
    stops it), the shutdown-delay timer and the drain bounds still pending are cancelled,
    so no call of the shutdown sequence outlives the server (kube-apiserver's
    ``ShutdownDelayDuration`` wait also ends with its stop channel, genericapiserver.go).
    """

    name = "lifecycle"

    def __init__(self, lifecycle: Lifecycle) -> None:
        self.lifecycle = lifecycle

    def stopService(self) -> None:
        super().stopService()
        self.lifecycle.calls.cancel_all()
