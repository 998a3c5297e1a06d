"""``/metrics/slis``: the health checks' service level indicators.

Follows k8s.io/component-base ``metrics/prometheus/slis`` (``ObserveHealthcheck``, registered
on a registry of its own and served at ``/metrics/slis``; ``DELETE`` resets it with
``--profiling``): ``kubernetes_healthcheck{name,type}`` is 1 while the check last passed and 0
after a failure, ``kubernetes_healthchecks_total{name,status,type}`` counts the outcomes
(``success``, ``error``); ``type`` is ``healthz``, ``livez`` or ``readyz``. The health
handler reports each check it ran (:attr:`apiserver.healthz.registry.HealthRegistry.observe`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from apiserver.http.app import RequestInfo
from apiserver.http.response import Response


class HealthSLIs(Collector):
    """The counts per (check, endpoint), and the ``/metrics/slis`` handler."""

    def __init__(self) -> None:
        #: (name, type) -> [last passed, successes, errors]
        self.checks: dict[tuple[str, str], list[int]] = {}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def observe(self, name: str, endpoint: str, passed: bool) -> None:
        entry = self.checks.get((name, endpoint))
        if entry is None:
            entry = self.checks[(name, endpoint)] = [0, 0, 0]
        entry[0] = 1 if passed else 0
        entry[1 if passed else 2] += 1

    def describe(self) -> Iterator[Any]:
        return iter(())

    def collect(self) -> Iterator[Any]:
        gauge = GaugeMetricFamily(
            "kubernetes_healthcheck",
            "This metric records the result of a single healthcheck.",
            labels=("name", "type"),
        )
        total = CounterMetricFamily(
            "kubernetes_healthchecks_total",
            "This metric records the results of all healthcheck.",
            labels=("name", "status", "type"),
        )
        for (name, endpoint), (last, ok, errors) in sorted(self.checks.items()):
            gauge.add_metric([name, endpoint], last)
            total.add_metric([name, "success", endpoint], ok)
            if errors:
                total.add_metric([name, "error", endpoint], errors)
        yield gauge
        yield total

    def handler(self, profiling: bool) -> Callable[[Any, RequestInfo], Response]:
        def handle(request: Any, info: RequestInfo) -> Response:
            if info.method == "DELETE" and profiling:
                self.checks.clear()
                return Response(
                    200, (("Content-Type", "text/plain; charset=utf-8"),), b"metrics reset\n"
                )
            body = bytes(generate_latest(self.registry))
            return Response(200, (("Content-Type", CONTENT_TYPE_LATEST),), body)

        return handle
