"""API Priority and Fairness: the handler-chain stage and the priority levels behind it.

Follows k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go (the stage) and
pkg/util/flowcontrol/apf_controller.go, apf_filter.go (the levels). It starts with the
bootstrap configuration (:mod:`apiserver.flowcontrol.bootstrap`); the stored FlowSchemas and
PriorityLevelConfigurations replace it through :meth:`PriorityAndFairness.reconfigure`
(called by ``apiserver.api.flowcontrol.controller``, kube's config consumer).

The usual request costs a classification (a dict look-up for the user and a few set tests),
two response headers, a seat taken synchronously and one ``notifyFinish`` callback to give it
back; no Deferred is created unless the request must wait in a queue. A configuration change
replaces the classifier (so its memo starts empty) and keeps each level's queues, its waiting
and executing requests; a level that is gone keeps draining on its own (``quiescing``).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from apiserver.flowcontrol import estimate
from apiserver.flowcontrol.bootstrap import (
    MANDATORY,
    flow_schema_objects,
    priority_level_objects,
)
from apiserver.flowcontrol.borrowing import PERIOD, Claim, SeatDemand, allocate_concurrency
from apiserver.flowcontrol.classifier import Classifier, FlowSchema, compile_flow_schema
from apiserver.flowcontrol.queueset import QueueSet, Waiting, flow_hash
from apiserver.flowcontrol.retry import DroppedRequests
from apiserver.gocompat.duration import parse_go_duration
from apiserver.http.app import RequestInfo, Verdict, when_finished
from apiserver.http.response import Response

if TYPE_CHECKING:
    from apiserver.http.request import HTTPRequest

log = Logger()

FLOW_SCHEMA_HEADER = b"x-kubernetes-pf-flowschema-uid"
PRIORITY_LEVEL_HEADER = b"x-kubernetes-pf-prioritylevel-uid"
#: ``tooManyRequests`` (priority-and-fairness.go): Go's ``http.Error`` text.
TOO_MANY_BODY = b"Too many requests, please try again later.\n"
#: apf_controller.go: ``priorityLevelMaxSeatsPercent``.
MAX_SEATS_PERCENT = 0.15
#: priority-and-fairness.go: the wait limit is a quarter of the deadline, at most a minute.
MAX_WAIT = 60.0
#: metrics.go's buckets of ``request_wait_duration_seconds`` and ``request_execution_seconds``.
BUCKETS = (0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0)


def too_many_requests(retry_after: int) -> Response:
    """429 as Go's ``http.Error`` writes it, with ``Retry-After``."""
    return Response(
        429,
        (
            ("Retry-After", str(retry_after)),
            ("Content-Type", "text/plain; charset=utf-8"),
            ("X-Content-Type-Options", "nosniff"),
        ),
        TOO_MANY_BODY,
    )


class Terminations(Protocol):
    """Where a refused request is counted (``apiserver_request_terminations_total``, as
    ``RecordRequestTermination`` in both filters; apiserver.metrics.Metrics implements it)."""

    def request_terminated(self, info: RequestInfo, code: int) -> None: ...


class Histogram:
    """A Prometheus histogram kept as plain counts (observed on the request path without a
    lock or a label look-up; exported by :mod:`apiserver.flowcontrol.metrics`)."""

    __slots__ = ("count", "counts", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(BUCKETS) + 1)
        self.total = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(BUCKETS, value)] += 1
        self.total += value
        self.count += 1


class SchemaStats:
    """What the metrics report per (FlowSchema, its priority level)."""

    __slots__ = ("dispatched", "executing", "rejected", "rejected_wait", "run", "wait", "waiting")

    def __init__(self) -> None:
        self.dispatched = 0
        self.executing = 0
        self.waiting = 0
        self.rejected: dict[str, int] = {}
        self.wait = Histogram()
        self.rejected_wait = Histogram()
        self.run = Histogram()


@attrs.define(eq=False)
class PriorityLevel:
    """A PriorityLevelConfiguration and its state (apf_controller.go's ``priorityLevelState``)."""

    name: str
    uid: bytes
    exempt: bool
    shares: int
    lendable_percent: int
    #: None: no limit on borrowing (``borrowingLimitPercent`` absent).
    borrowing_limit_percent: int | None = None
    nominal: int = 0
    lendable: int = 0
    #: ``borrowingCL``: round(nominal * borrowingLimitPercent), or the server's whole limit
    #: when the percentage is absent.
    borrowable: int = 0
    #: The concurrency limit in force: the nominal one, adjusted every 10 s by borrowing
    #: (:mod:`apiserver.flowcontrol.borrowing`).
    current: int = 0
    max_seats: int = 0
    queues: QueueSet | None = None
    dropped: DroppedRequests = attrs.field(factory=DroppedRequests)
    queuing: tuple[int, int, int] = (0, 0, 0)
    #: Exempt requests dispatched (they have no queue set).
    exempt_dispatched: int = 0
    #: Seat demand: the exponentially smoothed envelope and the last period's figures.
    demand: SeatDemand = attrs.field(factory=SeatDemand)
    #: The last borrowing period's allocation target.
    target: float = 0.0
    #: ``(uid,)``: the header's values, built once.
    header_values: tuple[bytes, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.header_values = (self.uid,)

    @property
    def min_limit(self) -> int:
        """``minCL``: the nominal limit less what it may lend."""
        return self.nominal - self.lendable

    @property
    def max_limit(self) -> int:
        """``maxCL``: the nominal limit plus what it may borrow (set by :func:`allocate`)."""
        return self.nominal + self.borrowable

    def take_config(self, fresh: PriorityLevel) -> None:
        """Adopt a new configuration of the same level (its queues, counters and seat
        demand stay)."""
        self.uid = fresh.uid
        self.header_values = fresh.header_values
        self.shares = fresh.shares
        self.lendable_percent = fresh.lendable_percent
        self.borrowing_limit_percent = fresh.borrowing_limit_percent
        self.queuing = fresh.queuing


def allocate(levels: Iterable[PriorityLevel], total: int, clock: IReactorTime) -> None:
    """apf_controller.go's concurrency arithmetic: each level's nominal limit is
    ``ceil(total * shares / sum of shares)``, its lendable part ``round(nominal * lendable%)``,
    what it may borrow ``round(nominal * borrowingLimit%)`` (``total`` when absent); the most
    seats one request may take is 15% of the nominal limit, at most nominal/handSize, at
    least 1. A new level's current limit starts at ``nominal - lendable // 2``
    (``finishQueueSetReconfigsLocked``); a level that has a queue set keeps it and its current
    limit (the borrowing computation that follows a change adjusts it)."""
    levels = list(levels)
    # The exempt level's shares count too (0 unless changed), though it is never limited.
    share_sum = sum(level.shares for level in levels)
    for level in levels:
        nominal = math.ceil(total * level.shares / share_sum) if share_sum else 0
        level.nominal = nominal
        level.lendable = round(nominal * level.lendable_percent / 100)
        percent = level.borrowing_limit_percent
        level.borrowable = total if percent is None else round(nominal * percent / 100)
        if level.exempt:
            level.current = level.min_limit
            continue
        if level.queues is None:
            level.current = nominal - level.lendable // 2
        queues, hand, length = level.queuing
        level.max_seats = 1
        if queues:
            level.max_seats = int(
                max(1, min(math.ceil(nominal * MAX_SEATS_PERCENT), nominal // hand))
            )
        if level.queues is None:
            level.queues = QueueSet(clock, level.current, queues, hand, length)
        else:
            level.queues.configure(level.current, queues, hand, length)


def _has_requests(level: PriorityLevel) -> bool:
    queues = level.queues
    return queues is not None and bool(queues.waiting or queues.executing)


def _level_from(obj: Mapping[str, Any]) -> PriorityLevel:
    spec = obj["spec"]
    meta = obj["metadata"]
    if spec["type"] == "Exempt":
        exempt = spec.get("exempt") or {}
        return PriorityLevel(
            meta["name"],
            meta["uid"].encode(),
            True,
            int(exempt.get("nominalConcurrencyShares") or 0),
            int(exempt.get("lendablePercent") or 0),
        )
    limited = spec["limited"]
    borrowing = limited.get("borrowingLimitPercent")
    level = PriorityLevel(
        meta["name"],
        meta["uid"].encode(),
        False,
        int(limited.get("nominalConcurrencyShares", 30)),
        int(limited.get("lendablePercent") or 0),
        None if borrowing is None else int(borrowing),
    )
    response = limited.get("limitResponse") or {}
    queuing = response.get("queuing")
    if response.get("type") == "Queue" and queuing:
        level.queuing = (
            int(queuing.get("queues", 64)),
            int(queuing.get("handSize", 8)),
            int(queuing.get("queueLengthLimit", 50)),
        )
    return level


class PriorityAndFairness:
    """The ``flow_control`` stage of the chain (``WithPriorityAndFairness``).

    ``total_concurrency`` is ``--max-requests-inflight`` plus
    ``--max-mutating-requests-inflight``; ``request_timeout`` gives the queue wait limit;
    ``object_count`` the stored count of a resource for list estimates (None: unknown).
    :meth:`start` and :meth:`stop` run the borrowing period on the clock.
    """

    def __init__(
        self,
        clock: IReactorTime,
        *,
        total_concurrency: int,
        request_timeout: float,
        new_uid: Callable[[], str],
        created: str,
        object_count: Callable[[str], int | None] = lambda _: None,
        terminations: Terminations | None = None,
    ) -> None:
        self.clock = clock
        self.total_concurrency = total_concurrency
        #: The bootstrap objects: the configuration until stored objects replace it, and what
        #: stands in for a mandatory object that is missing from storage.
        self.flow_schema_objects = flow_schema_objects(created, new_uid)
        self.priority_level_objects = priority_level_objects(created, new_uid)
        self.levels: dict[str, PriorityLevel] = {}
        #: Levels removed from the configuration that still have requests (kube's quiescing
        #: queue sets): they drain with their last limit.
        self.quiescing: dict[str, PriorityLevel] = {}
        self.stats: dict[str, SchemaStats] = {}
        self.classifier = Classifier(())
        self.request_timeout = request_timeout
        wait = request_timeout / 4 if request_timeout > 0 else 15.0
        self.wait_limit = min(wait, MAX_WAIT)
        self.object_count = object_count
        self.terminations = terminations
        self.watches = estimate.WatchTracker()
        #: fairFrac of the last borrowing period (``apiserver_flowcontrol_priority_level_
        #: seat_utilization``'s companion ``..._fair_frac``).
        self.fair_frac = 0.0
        self._loop: LoopingCall | None = None
        self.reconfigure(self.flow_schema_objects, self.priority_level_objects)

    # --- configuration ---------------------------------------------------------------------

    def reconfigure(
        self,
        flow_schemas: Iterable[Mapping[str, Any]],
        priority_levels: Iterable[Mapping[str, Any]],
    ) -> None:
        """Take a new configuration (apf_controller.go ``digestConfigObjects``).

        A mandatory object missing from ``flow_schemas``/``priority_levels`` is replaced by
        its bootstrap copy; a FlowSchema whose priority level does not exist is left out
        (kube's ``Dangling`` schemas match nothing). A level that stays keeps its queue set
        (reconfigured, its requests kept); a removed one keeps draining (``quiescing``).
        """
        level_objects: dict[str, Mapping[str, Any]] = {
            obj["metadata"]["name"]: obj for obj in priority_levels
        }
        for obj in self.priority_level_objects:
            if obj["metadata"]["name"] in MANDATORY:
                level_objects.setdefault(obj["metadata"]["name"], obj)
        schema_objects: dict[str, Mapping[str, Any]] = {
            obj["metadata"]["name"]: obj for obj in flow_schemas
        }
        for obj in self.flow_schema_objects:
            if obj["metadata"]["name"] in MANDATORY:
                schema_objects.setdefault(obj["metadata"]["name"], obj)
        old = {**self.quiescing, **self.levels}
        levels: dict[str, PriorityLevel] = {}
        for name, level_obj in level_objects.items():
            fresh = _level_from(level_obj)
            level = old.pop(name, None)
            if level is not None and level.exempt == fresh.exempt:
                level.take_config(fresh)
            else:
                if level is not None:
                    old[name] = level
                level = fresh
            levels[name] = level
        self.quiescing = {name: level for name, level in old.items() if _has_requests(level)}
        # Lingering levels still count in the shares, so their queues drain with some
        # seats (finishQueueSetReconfigsLocked).
        allocate([*levels.values(), *self.quiescing.values()], self.total_concurrency, self.clock)
        for level in levels.values():
            if level.queues is not None:
                level.queues.on_reject = partial(self._queued_rejected, level)
        schemas = []
        for schema_obj in schema_objects.values():
            schema = compile_flow_schema(schema_obj)
            target = levels.get(schema.level)
            if target is None:
                continue  # dangling
            schema.level_state = target
            stats = self.stats.get(schema.name)
            if stats is None:
                stats = self.stats[schema.name] = SchemaStats()
            schema.stats = stats
            schemas.append(schema)
        self.levels = levels
        # A new classifier: its memo of earlier answers goes with the old one.
        self.classifier = Classifier(schemas)
        # finishQueueSetReconfigsLocked ends with a borrowing computation (over the demand
        # seen since the last one).
        self.update_borrowing()

    def dangling(self, flow_schema: Mapping[str, Any]) -> bool:
        """Whether ``flow_schema`` names a priority level that is not configured."""
        return flow_schema["spec"]["priorityLevelConfiguration"]["name"] not in self.levels

    # --- borrowing -------------------------------------------------------------------------

    def start(self) -> None:
        """Run :meth:`update_borrowing` every 10 s (``borrowingAdjustmentPeriod``)."""
        if self._loop is None:
            self._loop = LoopingCall(self._borrowing_round)
            self._loop.clock = self.clock
            self._loop.start(PERIOD, now=False)

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is not None and loop.running:
            loop.stop()

    def _borrowing_round(self) -> None:
        try:
            self.update_borrowing()
        except Exception:  # the loop must go on; the limits stay as they were
            log.failure("adjusting the priority levels' concurrency limits failed")

    def update_borrowing(self) -> None:
        """apf_controller.go ``updateBorrowingLocked``: each level's seat demand over the
        period (since the last call) sets its bounds and target, and the current limits are
        the fair allocation of the sum of the nominal limits:

        - a Limited level's lower bound is ``max(minCL, min(nominalCL, high watermark))``,
          its target the larger of that and its smoothed demand, its upper bound ``maxCL``;
          an exempt level keeps ``max(minCL, high watermark)`` (here its high watermark is
          0: exempt requests are not counted) and that is taken off the seats to share;
        - when what is left is at most the sum of the ``minCL``, every Limited level gets its
          ``minCL``; when it is at most the sum of the lower bounds, each gets its ``minCL``
          plus the same fraction of the rest of its lower bound; otherwise the allocation of
          :func:`apiserver.flowcontrol.borrowing.allocate_concurrency`.
        """
        now = self.clock.seconds()
        remaining = 0
        limited: list[PriorityLevel] = []
        claims: list[Claim] = []
        min_sum = min_current_sum = 0
        self.quiescing = {
            name: level for name, level in self.quiescing.items() if _has_requests(level)
        }
        every = [*self.levels.values(), *self.quiescing.values()]
        for level in every:
            remaining += level.nominal
            if level.queues is None:
                level.demand.update(0.0, 0.0, 0, 0.0)
                level.current = max(level.min_limit, level.demand.high_watermark)
                level.target = float(level.current)
                remaining -= level.current
                continue
            level.demand.update(*level.queues.take_demand(now))
            min_current = max(level.min_limit, min(level.nominal, level.demand.high_watermark))
            level.target = max(float(min_current), level.demand.smoothed)
            limited.append(level)
            claims.append(Claim(float(min_current), float(level.max_limit), level.target))
            min_sum += level.min_limit
            min_current_sum += min_current
        nominal_sum = sum(level.nominal for level in every)
        if remaining <= min_sum:
            self.fair_frac = 0.0
            currents = [level.min_limit for level in limited]
        elif remaining <= min_current_sum:
            self.fair_frac = 0.0
            share = (remaining - min_sum) / (min_current_sum - min_sum)
            currents = [
                level.min_limit + round((claim.lower - level.min_limit) * share)
                for level, claim in zip(limited, claims, strict=True)
            ]
        else:
            try:
                allocations, self.fair_frac = allocate_concurrency(nominal_sum, claims)
            except ValueError as error:
                log.error("Unable to derive new concurrency limits: {error}", error=error)
                allocations = [float(level.current) for level in limited]
            currents = [round(allocation) for allocation in allocations]
        for level, current in zip(limited, currents, strict=True):
            if current != level.current:
                level.current = current
                assert level.queues is not None
                queues, hand, length = level.queuing
                level.queues.configure(current, queues, hand, length)

    # --- requests --------------------------------------------------------------------------

    def __call__(self, request: HTTPRequest, info: RequestInfo, /) -> Verdict:
        resolved = info.resolved
        if resolved is not None:
            verb = resolved.verb
            if info.long_running and verb != "watch":
                return None  # long-running requests other than watches are not limited
            resource_request = resolved.resource_request
            resource = resolved.resource
            if resolved.subresource:
                resource = f"{resource}/{resolved.subresource}"
            group, namespace = resolved.api_group, resolved.namespace
        else:
            verb = info.method.lower()
            resource_request, resource, group, namespace = False, "", "", ""
        user = info.user
        if user is not None:
            name, groups = user.name, user.groups
        else:
            name, groups = "system:anonymous", ("system:unauthenticated",)
        schema = self.classifier.classify(
            name, groups, resource_request, verb, group, resource, namespace, info.path
        )
        if schema is None:
            return None
        level: PriorityLevel = schema.level_state
        headers = request.responseHeaders
        headers.setRawHeaders(FLOW_SCHEMA_HEADER, schema.header_values)
        headers.setRawHeaders(PRIORITY_LEVEL_HEADER, level.header_values)
        stats: SchemaStats = schema.stats
        if verb == "watch" and resolved is not None:
            self._track_watch(request, info, resolved)
        queues = level.queues
        if queues is None:  # exempt: never queued
            level.exempt_dispatched += 1
            stats.dispatched += 1
            return None
        seats = 1
        final_latency = 0.0
        if resolved is not None:
            if verb == "list":
                seats = estimate.list_seats(
                    info.query,
                    resolved.name,
                    self.object_count(resolved.resource),
                    level.max_seats,
                )
            elif verb in estimate.MUTATING_VERBS and self.watches.counts:
                seats, final_latency = self._write_seats(resolved, level)
        now = self.clock.seconds()
        if queues.try_acquire(seats, now):
            stats.dispatched += 1
            stats.wait.counts[0] += 1
            stats.wait.count += 1
            if info.long_running:
                # A watch holds its seat only until it is set up: here, until dispatched.
                queues.release(seats, now)
                return None
            stats.executing += 1
            when_finished(
                request,
                info,
                partial(self._finished, queues, seats, stats, now, final_latency),
            )
            return None
        return self._wait(request, info, schema, level, queues, seats, stats, name, final_latency)

    def _write_seats(self, resolved: Any, level: PriorityLevel) -> tuple[int, float]:
        """A write's seats and how long they stay taken after it ends
        (:func:`apiserver.flowcontrol.estimate.mutating_seats`)."""
        if resolved.resource == "serviceaccounts" and resolved.subresource == "token":
            return 1, 0.0  # isRequestExemptFromWatchEvents: a token request makes no event
        watchers = self.watches.interested(
            resolved.api_group, resolved.resource, resolved.namespace, resolved.name
        )
        final, latency = estimate.mutating_seats(watchers, level.max_seats)
        return max(1, final), latency

    def _track_watch(self, request: HTTPRequest, info: RequestInfo, resolved: Any) -> None:
        """``RegisterWatch``: counted until the watch ends."""
        key = self.watches.register(
            resolved.api_group, resolved.resource, resolved.namespace, resolved.name
        )
        request.notifyFinish().addBoth(lambda _: self.watches.forget(key))

    def _finished(
        self,
        queues: QueueSet,
        seats: int,
        stats: SchemaStats,
        started: float,
        final_latency: float,
        result: object,
    ) -> None:
        stats.executing -= 1
        now = self.clock.seconds()
        stats.run.observe(now - started)
        if final_latency > 0:
            # queueset.go: the seats of a write with watchers stay taken for the fan-out.
            self.clock.callLater(final_latency, queues.release_later, seats)
        else:
            queues.release(seats, now)

    # --- the slow path: a queue ----------------------------------------------------------

    def _wait(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        schema: FlowSchema,
        level: PriorityLevel,
        queues: QueueSet,
        seats: int,
        stats: SchemaStats,
        user: str,
        final_latency: float = 0.0,
    ) -> Verdict:
        resolved = info.resolved
        if schema.distinguisher == "ByUser":
            distinguisher = user
        elif schema.distinguisher == "ByNamespace" and resolved is not None:
            distinguisher = resolved.namespace
        else:
            distinguisher = ""
        outcome = queues.enqueue(
            seats,
            flow_hash(schema.name, distinguisher),
            self._wait_limit(info),
            schema.name,
            distinguisher,
        )
        if isinstance(outcome, str):
            return self._reject(level, stats, outcome, info)
        waiting: Waiting = outcome
        if resolved is not None:
            waiting.details = (
                user,
                resolved.verb,
                resolved.path,
                resolved.namespace,
                resolved.name,
                f"{resolved.api_group}/{resolved.api_version}"
                if resolved.api_group
                else resolved.api_version,
                resolved.resource,
                resolved.subresource,
            )
        else:
            waiting.details = (user, info.method.lower(), info.path, "", "", "", "", "")
        stats.waiting += 1
        request.notifyFinish().addBoth(self._queued_finished, queues, waiting, stats, final_latency)
        if waiting.started is not None:
            self._started(waiting, stats, info, queues)
            return None
        answer: Deferred[Response | None] = Deferred()

        def decided(dispatched: bool) -> None:
            if dispatched:
                self._started(waiting, stats, info, queues)
                answer.callback(None)
            else:
                if self.terminations is not None:
                    self.terminations.request_terminated(info, 429)
                answer.callback(too_many_requests(level.dropped.retry_after))

        waiting.deferred.addCallback(decided)
        return answer

    def _wait_limit(self, info: RequestInfo) -> float:
        """``getRequestWaitContext``: a quarter of the request's deadline, which is
        ``--request-timeout`` or a shorter valid ``?timeout=`` (request_deadline.go), at
        most a minute."""
        values = info.query.get(b"timeout")
        if not values:
            return self.wait_limit
        try:
            asked = parse_go_duration(values[0].decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            return self.wait_limit
        if asked <= 0 or (self.request_timeout > 0 and asked >= self.request_timeout):
            return self.wait_limit
        return min(asked / 4, MAX_WAIT)

    def _started(
        self, waiting: Waiting, stats: SchemaStats, info: RequestInfo, queues: QueueSet
    ) -> None:
        stats.waiting -= 1
        stats.dispatched += 1
        started = waiting.started if waiting.started is not None else waiting.arrived
        stats.wait.observe(started - waiting.arrived)
        # Not part of the request's SLI latency (apiserver_request_sli_duration_seconds).
        info.unaccounted += started - waiting.arrived
        if info.long_running:
            # A watch gives its seat back once it is set up.
            queue = waiting.queue
            waiting.queue = None
            assert waiting.started is not None
            waiting.started = None
            if queue is not None:
                queue.executing.remove(waiting)
                queue.seats_in_use -= waiting.seats
            queues.release(waiting.seats, self.clock.seconds())
            return
        stats.executing += 1

    def _queued_finished(
        self,
        result: object,
        queues: QueueSet,
        waiting: Waiting,
        stats: SchemaStats,
        final_latency: float,
    ) -> None:
        if waiting.started is not None:
            stats.executing -= 1
            stats.run.observe(self.clock.seconds() - waiting.started)
            if final_latency > 0:
                self.clock.callLater(final_latency, queues.finish, waiting)
            else:
                queues.finish(waiting)
        elif waiting.queue is not None and not waiting.deferred.called:
            queues.cancel(waiting)

    def _queued_rejected(self, level: PriorityLevel, waiting: Waiting, reason: str) -> None:
        stats = self.stats[waiting.schema]
        stats.waiting -= 1
        stats.rejected_wait.observe(self.clock.seconds() - waiting.arrived)
        stats.rejected[reason] = stats.rejected.get(reason, 0) + 1
        if reason != "cancelled":
            level.dropped.record(self.clock.seconds())

    def _reject(
        self, level: PriorityLevel, stats: SchemaStats, reason: str, info: RequestInfo
    ) -> Response:
        stats.rejected[reason] = stats.rejected.get(reason, 0) + 1
        if self.terminations is not None:
            self.terminations.request_terminated(info, 429)
        return too_many_requests(level.dropped.record(self.clock.seconds()))
