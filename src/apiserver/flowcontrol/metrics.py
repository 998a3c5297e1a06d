"""The ``apiserver_flowcontrol_*`` series of k8s.io/apiserver/pkg/util/flowcontrol/metrics.

The request path only adds to plain integers on :class:`~apiserver.flowcontrol.apf.
SchemaStats` and the queue sets; this collector turns them into metric families when
``/metrics`` is scraped, so no label look-up or lock is paid per request.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)

from apiserver.flowcontrol.apf import BUCKETS, Histogram, PriorityAndFairness

PREFIX = "apiserver_flowcontrol_"


def _buckets(histogram: Histogram) -> list[tuple[str, float]]:
    cumulative = 0
    out: list[tuple[str, float]] = []
    for bound, count in zip((*BUCKETS, float("inf")), histogram.counts, strict=True):
        cumulative += count
        out.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
    return out


class FlowControlCollector:
    """A prometheus-client collector over one :class:`PriorityAndFairness`."""

    def __init__(self, apf: PriorityAndFairness, disabled: Iterable[str] = ()) -> None:
        self.apf = apf
        self.disabled = set(disabled)

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        apf = self.apf
        families: list[Any] = []
        dispatched = CounterMetricFamily(
            PREFIX + "dispatched_requests",
            "Number of requests executed by API Priority and Fairness subsystem",
            labels=["priority_level", "flow_schema"],
        )
        rejected = CounterMetricFamily(
            PREFIX + "rejected_requests",
            "Number of requests rejected by API Priority and Fairness subsystem",
            labels=["priority_level", "flow_schema", "reason"],
        )
        inqueue = GaugeMetricFamily(
            PREFIX + "current_inqueue_requests",
            "Number of requests currently pending in queues of the API Priority and Fairness "
            "subsystem",
            labels=["priority_level", "flow_schema"],
        )
        executing = GaugeMetricFamily(
            PREFIX + "current_executing_requests",
            "Number of requests in initial (for a WATCH) or any (for a non-WATCH) execution "
            "stage in the API Priority and Fairness subsystem",
            labels=["priority_level", "flow_schema"],
        )
        wait = HistogramMetricFamily(
            PREFIX + "request_wait_duration_seconds",
            "Length of time a request spent waiting in its queue",
            labels=["priority_level", "flow_schema", "execute"],
        )
        run = HistogramMetricFamily(
            PREFIX + "request_execution_seconds",
            "Duration of initial stage (for a WATCH) or any (for a non-WATCH) stage of request "
            "execution in the API Priority and Fairness subsystem",
            labels=["priority_level", "flow_schema", "type"],
        )
        for schema in apf.classifier.schemas:
            stats = apf.stats[schema.name]
            level = schema.level
            if stats.dispatched:
                dispatched.add_metric([level, schema.name], stats.dispatched)
            for reason, count in sorted(stats.rejected.items()):
                rejected.add_metric([level, schema.name, reason], count)
            if stats.dispatched or stats.waiting:
                inqueue.add_metric([level, schema.name], stats.waiting)
                executing.add_metric([level, schema.name], stats.executing)
            for execute, histogram in (("true", stats.wait), ("false", stats.rejected_wait)):
                if histogram.count:
                    wait.add_metric(
                        [level, schema.name, execute], _buckets(histogram), histogram.total
                    )
            if stats.run.count:
                run.add_metric(
                    [level, schema.name, "regular"], _buckets(stats.run), stats.run.total
                )
        families += [dispatched, rejected, inqueue, executing, wait, run]
        nominal = GaugeMetricFamily(
            PREFIX + "nominal_limit_seats",
            "Nominal number of execution seats configured for each priority level",
            labels=["priority_level"],
        )
        current = GaugeMetricFamily(
            PREFIX + "current_limit_seats",
            "current derived number of execution seats available to each priority level",
            labels=["priority_level"],
        )
        lendable = GaugeMetricFamily(
            PREFIX + "lower_limit_seats",
            "Configured lower bound on number of execution seats available to each priority level",
            labels=["priority_level"],
        )
        upper = GaugeMetricFamily(
            PREFIX + "upper_limit_seats",
            "Configured upper bound on number of execution seats available to each priority level",
            labels=["priority_level"],
        )
        demand = {
            suffix: GaugeMetricFamily(PREFIX + name, text, labels=["priority_level"])
            for suffix, name, text in (
                (
                    "high",
                    "demand_seats_high_watermark",
                    "High watermark, over last adjustment period, of demand_seats",
                ),
                (
                    "average",
                    "demand_seats_average",
                    "Time-weighted average, over last adjustment period, of demand_seats",
                ),
                (
                    "stdev",
                    "demand_seats_stdev",
                    "Time-weighted standard deviation, over last adjustment period, of "
                    "demand_seats",
                ),
                ("smoothed", "demand_seats_smoothed", "Smoothed seat demands"),
                ("target", "target_seats", "Seat allocation targets"),
            )
        }
        for name, level_state in sorted(apf.levels.items()):
            if level_state.exempt:
                continue
            nominal.add_metric([name], level_state.nominal)
            current.add_metric([name], level_state.current)
            # SetPriorityLevelConfiguration: nominal + borrowingCL (the server's whole limit
            # when borrowingLimitPercent is absent).
            upper.add_metric([name], level_state.max_limit)
            lendable.add_metric([name], level_state.min_limit)
            seat_demand = level_state.demand
            demand["high"].add_metric([name], seat_demand.high_watermark)
            demand["average"].add_metric([name], seat_demand.average)
            demand["stdev"].add_metric([name], seat_demand.deviation)
            demand["smoothed"].add_metric([name], seat_demand.smoothed)
            demand["target"].add_metric([name], level_state.target)
        fair = GaugeMetricFamily(
            PREFIX + "seat_fair_frac",
            "Fair fraction of server's concurrency to allocate to each priority level that "
            "can use it",
        )
        fair.add_metric([], apf.fair_frac)
        families += [*demand.values(), fair]
        families += [nominal, current, lendable, upper]
        for family in families:
            if family.name not in self.disabled and family.name + "_total" not in self.disabled:
                yield family
