"""Which checks each of ``/healthz``, ``/livez`` and ``/readyz`` runs, in which order.

Reference: k8s.io/apiserver ``pkg/server/healthz.go`` (``AddHealthChecks``,
``AddBootSequenceHealthChecks``, ``AddReadyzChecks``, ``AddLivezChecks``, the delayed livez
check) and ``genericapiserver.go`` ``PrepareRun`` (``shutdown`` appended to readyz last).
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from apiserver.healthz.checks import HealthCheck, as_clock

ENDPOINTS = ("healthz", "livez", "readyz")


class HealthRegistry:
    """The three ordered check lists and the ``HasBeenReady`` signal.

    ``boot_sequence`` checks (``poststarthook/*``, ``autoregister-completion``) are wrapped on
    livez only: until ``start_time + livez_grace_period`` (``start_time`` defaults to the
    clock's time at construction) the wrapper passes without calling the real check; after
    that it delegates. As in Go (``clock.Now().After(start)``), the instant of the deadline
    itself still counts as "before"; a zero grace period never skips the check.
    healthz and readyz get the real check.

    ``has_been_ready`` fires (None) once, at the first successful ``/readyz``.
    """

    def __init__(
        self,
        clock: IReactorTime,
        livez_grace_period: float,
        start_time: float | None = None,
    ) -> None:
        if livez_grace_period < 0:
            raise ValueError("livez grace period must not be negative")
        self._clock = as_clock(clock)
        self.livez_grace_period = livez_grace_period
        self.start_time = self._clock.seconds() if start_time is None else start_time
        self._lists: dict[str, list[HealthCheck]] = {name: [] for name in ENDPOINTS}
        #: Told each check's outcome on the three endpoints (name, endpoint, passed): the
        #: health SLIs of ``/metrics/slis`` (k8s.io/component-base ``metrics/prometheus/
        #: slis``, observed by ``handleRootHealth``); None: nobody listens.
        self.observe: Callable[[str, str, bool], None] | None = None
        self._last_readyz: list[HealthCheck] = []
        self.has_been_ready: Deferred[None] = Deferred()

    @property
    def grace_deadline(self) -> float:
        return self.start_time + self.livez_grace_period

    def _names(self, endpoint: str) -> set[str]:
        names = {check.name for check in self._lists[endpoint]}
        if endpoint == "readyz":
            names.update(check.name for check in self._last_readyz)
        return names

    def add(
        self,
        check: HealthCheck,
        *,
        healthz: bool = True,
        livez: bool = True,
        readyz: bool = True,
        boot_sequence: bool = False,
    ) -> None:
        """Append ``check`` to the chosen endpoints (registration order is run order).

        A name may appear once per endpoint (Go's mux would panic on the duplicate path).
        """
        targets = [
            endpoint
            for endpoint, wanted in zip(ENDPOINTS, (healthz, livez, readyz), strict=True)
            if wanted
        ]
        for endpoint in targets:
            if check.name in self._names(endpoint):
                raise ValueError(f"health check {check.name!r} already registered on {endpoint}")
        for endpoint in targets:
            if endpoint == "livez" and boot_sequence:
                self._lists[endpoint].append(self._delayed(check))
            else:
                self._lists[endpoint].append(check)

    def add_last_readyz(self, check: HealthCheck) -> None:
        """Add a readyz-only check that stays after every other one (``shutdown``)."""
        if check.name in self._names("readyz"):
            raise ValueError(f"health check {check.name!r} already registered on readyz")
        self._last_readyz.append(check)

    def checks(self, endpoint: str) -> list[HealthCheck]:
        """The checks of ``endpoint`` (``healthz``, ``livez`` or ``readyz``) in run order."""
        if endpoint not in self._lists:
            raise ValueError(f"unknown health endpoint {endpoint!r}")
        result = list(self._lists[endpoint])
        if endpoint == "readyz":
            result.extend(self._last_readyz)
        return result

    def check(self, endpoint: str, name: str) -> HealthCheck | None:
        """The check called ``name`` on ``endpoint`` (livez: the grace-wrapped one), or None."""
        for check in self.checks(endpoint):
            if check.name == name:
                return check
        return None

    def mark_ready(self) -> None:
        """Fire :attr:`has_been_ready` unless it already fired."""
        if not self.has_been_ready.called:
            self.has_been_ready.callback(None)

    def _delayed(self, check: HealthCheck) -> HealthCheck:
        def delayed() -> Deferred[None] | None:
            if self.livez_grace_period > 0 and self._clock.seconds() <= self.grace_deadline:
                return None
            return check.fn()

        return HealthCheck(check.name, delayed)
