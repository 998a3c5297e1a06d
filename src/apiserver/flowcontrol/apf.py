"""API Priority and Fairness: the handler-chain stage and the priority levels behind it.

Follows k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go (the stage) and
pkg/util/flowcontrol/apf_controller.go, apf_filter.go (the levels), over the bootstrap
configuration (:mod:`apiserver.flowcontrol.bootstrap`), which is all there is: the objects
are served read-only.

The usual request costs a classification (a dict look-up for the user and a few set tests),
two response headers, a seat taken synchronously and one ``notifyFinish`` callback to give it
back; no Deferred is created unless the request must wait in a queue.
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

from apiserver.flowcontrol import estimate
from apiserver.flowcontrol.bootstrap import flow_schema_objects, priority_level_objects
from apiserver.flowcontrol.classifier import Classifier, FlowSchema, compile_flow_schema
from apiserver.flowcontrol.queueset import QueueSet, Waiting, flow_hash
from apiserver.flowcontrol.retry import DroppedRequests
from apiserver.gocompat.duration import parse_go_duration
from apiserver.http.app import RequestInfo, Verdict, when_finished
from apiserver.http.response import Response

if TYPE_CHECKING:
    from apiserver.http.request import HTTPRequest

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
    nominal: int = 0
    lendable: int = 0
    max_seats: int = 0
    queues: QueueSet | None = None
    dropped: DroppedRequests = attrs.field(factory=DroppedRequests)
    queuing: tuple[int, int, int] = (0, 0, 0)
    #: Exempt requests dispatched (they have no queue set).
    exempt_dispatched: int = 0
    #: ``(uid,)``: the header's values, built once.
    header_values: tuple[bytes, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.header_values = (self.uid,)


def allocate(levels: Iterable[PriorityLevel], total: int, clock: IReactorTime) -> None:
    """apf_controller.go's concurrency arithmetic: each Limited level's nominal limit is
    ``ceil(total * shares / sum of shares)``, its lendable part ``round(nominal * lendable%)``;
    the most seats one request may take is 15% of the nominal limit, at most nominal/handSize,
    at least 1."""
    levels = list(levels)
    share_sum = sum(level.shares for level in levels if not level.exempt)
    for level in levels:
        if level.exempt:
            continue
        nominal = math.ceil(total * level.shares / share_sum) if share_sum else 0
        level.nominal = nominal
        level.lendable = round(nominal * level.lendable_percent / 100)
        queues, hand, length = level.queuing
        if queues:
            level.max_seats = int(
                max(1, min(math.ceil(nominal * MAX_SEATS_PERCENT), nominal // hand))
            )
        level.queues = QueueSet(clock, nominal, queues, hand, length)


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
    level = PriorityLevel(
        meta["name"],
        meta["uid"].encode(),
        False,
        int(limited.get("nominalConcurrencyShares", 30)),
        int(limited.get("lendablePercent") or 0),
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
        self.flow_schema_objects = flow_schema_objects(created, new_uid)
        self.priority_level_objects = priority_level_objects(created, new_uid)
        self.levels: dict[str, PriorityLevel] = {
            level.name: level for level in map(_level_from, self.priority_level_objects)
        }
        allocate(self.levels.values(), total_concurrency, clock)
        self.classifier = Classifier(map(compile_flow_schema, self.flow_schema_objects))
        self.stats: dict[str, SchemaStats] = {
            s.name: SchemaStats() for s in self.classifier.schemas
        }
        self._schema_level = {s.name: s.level for s in self.classifier.schemas}
        for schema in self.classifier.schemas:
            schema.level_state = self.levels[schema.level]
            schema.stats = self.stats[schema.name]
        self.request_timeout = request_timeout
        wait = request_timeout / 4 if request_timeout > 0 else 15.0
        self.wait_limit = min(wait, MAX_WAIT)
        self.object_count = object_count
        self.terminations = terminations
        for level in self.levels.values():
            if level.queues is not None:
                level.queues.on_reject = self._queued_rejected

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
        queues = level.queues
        if queues is None:  # exempt: never queued
            level.exempt_dispatched += 1
            stats.dispatched += 1
            return None
        seats = 1
        if verb == "list" and resolved is not None:
            seats = estimate.list_seats(
                info.query, resolved.name, self.object_count(resolved.resource), level.max_seats
            )
        if queues.try_acquire(seats):
            stats.dispatched += 1
            stats.wait.counts[0] += 1
            stats.wait.count += 1
            if info.long_running:
                # A watch holds its seat only until it is set up: here, until dispatched.
                queues.release(seats)
                return None
            stats.executing += 1
            when_finished(
                request, info, partial(self._finished, queues, seats, stats, self.clock.seconds())
            )
            return None
        return self._wait(request, info, schema, level, queues, seats, stats, name)

    def _finished(
        self, queues: QueueSet, seats: int, stats: SchemaStats, started: float, result: object
    ) -> None:
        stats.executing -= 1
        stats.run.observe(self.clock.seconds() - started)
        queues.release(seats)

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
        request.notifyFinish().addBoth(self._queued_finished, queues, waiting, stats)
        if waiting.started is not None:
            self._started(waiting, stats, info)
            return None
        answer: Deferred[Response | None] = Deferred()

        def decided(dispatched: bool) -> None:
            if dispatched:
                self._started(waiting, stats, info)
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

    def _started(self, waiting: Waiting, stats: SchemaStats, info: RequestInfo) -> None:
        stats.waiting -= 1
        stats.dispatched += 1
        started = waiting.started if waiting.started is not None else waiting.arrived
        stats.wait.observe(started - waiting.arrived)
        if info.long_running:
            # A watch gives its seat back once it is set up.
            queue = waiting.queue
            waiting.queue = None
            assert waiting.started is not None
            waiting.started = None
            if queue is not None:
                queue.executing.remove(waiting)
                queue.seats_in_use -= waiting.seats
            level_queues = self.levels[self._schema_level[waiting.schema]].queues
            if level_queues is not None:
                level_queues.release(waiting.seats)
            return
        stats.executing += 1

    def _queued_finished(
        self, result: object, queues: QueueSet, waiting: Waiting, stats: SchemaStats
    ) -> None:
        if waiting.started is not None:
            stats.executing -= 1
            stats.run.observe(self.clock.seconds() - waiting.started)
            queues.finish(waiting)
        elif waiting.queue is not None and not waiting.deferred.called:
            queues.cancel(waiting)

    def _queued_rejected(self, waiting: Waiting, reason: str) -> None:
        stats = self.stats[waiting.schema]
        stats.waiting -= 1
        stats.rejected_wait.observe(self.clock.seconds() - waiting.arrived)
        stats.rejected[reason] = stats.rejected.get(reason, 0) + 1
        if reason != "cancelled":
            self.levels[self._schema_level[waiting.schema]].dropped.record(self.clock.seconds())

    def _reject(
        self, level: PriorityLevel, stats: SchemaStats, reason: str, info: RequestInfo
    ) -> Response:
        stats.rejected[reason] = stats.rejected.get(reason, 0) + 1
        if self.terminations is not None:
            self.terminations.request_terminated(info, 429)
        return too_many_requests(level.dropped.record(self.clock.seconds()))
