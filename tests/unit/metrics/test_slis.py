"""/metrics/slis: each health check's last result and counts (apiserver.metrics.slis)."""

from __future__ import annotations

from twisted.internet.task import Clock

from apiserver.healthz.checks import HealthCheck, HealthCheckError
from apiserver.healthz.handler import render_endpoint
from apiserver.healthz.registry import HealthRegistry
from apiserver.http.app import RequestInfo
from apiserver.metrics.slis import HealthSLIs


class Flaky:
    fail = False

    def __call__(self) -> None:
        if self.fail:
            raise HealthCheckError("down")


def test_health_checks_are_observed_per_endpoint() -> None:
    registry = HealthRegistry(Clock(), 0)
    check = Flaky()
    registry.add(HealthCheck("flaky", check))
    slis = HealthSLIs()
    registry.observe = slis.observe
    render_endpoint(registry, "readyz", {})
    check.fail = True
    render_endpoint(registry, "readyz", {})
    render_endpoint(registry, "livez", {b"exclude": [b"flaky"]})
    info = RequestInfo("GET", "/metrics/slis", {}, False, False)
    out = slis.handler(profiling=True)(None, info).body.decode()
    assert 'kubernetes_healthcheck{name="flaky",type="readyz"} 0.0' in out
    assert 'kubernetes_healthchecks_total{name="flaky",status="success",type="readyz"} 1.0' in out
    assert 'kubernetes_healthchecks_total{name="flaky",status="error",type="readyz"} 1.0' in out
    assert 'type="livez"' not in out  # excluded checks are not run, so not observed
    reset = slis.handler(profiling=True)(
        None, RequestInfo("DELETE", "/metrics/slis", {}, False, False)
    )
    assert reset.body == b"metrics reset\n"
    assert "flaky" not in slis.handler(profiling=True)(None, info).body.decode()
