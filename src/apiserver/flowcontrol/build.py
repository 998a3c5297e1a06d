"""What fills the chain's ``flow_control`` slot, from the command line.

kube-apiserver (k8s.io/apiserver/pkg/server/config.go, ``DefaultBuildHandlerChain``) uses
``WithPriorityAndFairness`` when ``--enable-priority-and-fairness`` (the default) and
``WithMaxInFlightLimit`` otherwise; the latter is left out when both limits are 0.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

import attrs
from twisted.internet.interfaces import IReactorTime

from apiserver.apimachinery.uid import new_uuid
from apiserver.flowcontrol.apf import PriorityAndFairness, Terminations
from apiserver.flowcontrol.debug import install_debug
from apiserver.flowcontrol.maxinflight import MaxInFlight
from apiserver.flowcontrol.metrics import FlowControlCollector
from apiserver.http.app import Filter, Router


class MetricsSink(Terminations, Protocol):
    """What is needed of ``apiserver.metrics.Metrics``."""

    @property
    def registry(self) -> Any: ...

    @property
    def disabled(self) -> set[str]: ...


@attrs.define
class FlowControl:
    #: The stage for ``build_handler_chain(flow_control=...)``, or None (no limit at all).
    stage: Filter | None
    apf: PriorityAndFairness | None = None
    max_in_flight: MaxInFlight | None = None


def build_flow_control(
    config: Any,
    clock: IReactorTime,
    metrics: MetricsSink | None,
    router: Router,
    object_count: Callable[[str], int | None],
) -> FlowControl:
    """Priority and fairness (with its debug dumps and metrics) or max-in-flight."""
    read_only = int(config.max_requests_inflight)
    mutating = int(config.max_mutating_requests_inflight)
    if not config.enable_priority_and_fairness:
        limit = MaxInFlight(read_only, mutating, metrics)
        return FlowControl(limit if limit.active else None, max_in_flight=limit)
    created = datetime.fromtimestamp(clock.seconds(), UTC)
    apf = PriorityAndFairness(
        clock,
        total_concurrency=read_only + mutating,
        request_timeout=float(config.request_timeout),
        new_uid=new_uuid,
        created=created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        object_count=object_count,
        terminations=metrics,
    )
    install_debug(router, apf)
    if metrics is not None:
        metrics.registry.register(FlowControlCollector(apf, metrics.disabled))
    return FlowControl(apf, apf=apf)
