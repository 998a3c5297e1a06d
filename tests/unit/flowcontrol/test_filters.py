"""The flow_control stages on a fake clock: priority and fairness, max-in-flight, list seats,
Retry-After, the debug dumps and the metrics (apiserver.flowcontrol)."""

from __future__ import annotations

import itertools

from prometheus_client import CollectorRegistry, generate_latest
from tests.unit.fake_request import FakeRequest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from apiserver.auth.interface import UserInfo
from apiserver.auth.requestinfo import parse_request_info
from apiserver.flowcontrol.apf import PriorityAndFairness, allocate
from apiserver.flowcontrol.debug import dump_priority_levels, dump_requests, tabwrite
from apiserver.flowcontrol.estimate import list_seats
from apiserver.flowcontrol.maxinflight import MaxInFlight
from apiserver.flowcontrol.metrics import FlowControlCollector
from apiserver.flowcontrol.retry import DroppedRequests
from apiserver.http.app import RequestInfo, parse_query
from apiserver.http.response import Response

AUTH = "system:authenticated"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


def request_for(
    method: str, uri: str, user: str = "alice", groups: tuple[str, ...] = (AUTH,)
) -> tuple[FakeRequest, RequestInfo]:
    path, _, _ = uri.partition("?")
    query = parse_query(uri.encode())
    resolved = parse_request_info(method, path, query)
    long_running = resolved.verb == "watch"
    info = RequestInfo(method, path, query, long_running, path.startswith("/api"))
    info.resolved = resolved
    info.user = UserInfo(user, groups=groups)
    return FakeRequest(method.encode(), uri.encode()), info


class Terminated:
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def request_terminated(self, info: RequestInfo, code: int) -> None:
        self.seen.append((info.path, code))


def make_apf(
    clock: Clock, total: int = 4, timeout: float = 60.0, terminations: Terminated | None = None
) -> PriorityAndFairness:
    ids = itertools.count()
    return PriorityAndFairness(
        clock,
        total_concurrency=total,
        request_timeout=timeout,
        new_uid=lambda: f"uid-{next(ids)}",
        created="2026-01-01T00:00:00Z",
        object_count=lambda resource: 1000 if resource == "events" else None,
        terminations=terminations,
    )


def test_nominal_limits_from_the_two_inflight_flags() -> None:
    apf = make_apf(Clock(), total=600)
    nominal = {name: level.nominal for name, level in apf.levels.items()}
    assert nominal == {
        "exempt": 0,
        "system": 74,
        "node-high": 98,
        "leader-election": 25,
        "workload-high": 98,
        "workload-low": 245,
        "global-default": 49,
        "catch-all": 13,
    }
    assert apf.levels["global-default"].lendable == 24  # round(49 * 0.5)
    assert apf.levels["global-default"].max_seats == 8  # min(ceil(49 * .15), 49 // 6)
    assert apf.levels["exempt"].queues is None
    allocate(apf.levels.values(), 2, Clock())
    assert apf.levels["global-default"].nominal == 1


def test_headers_and_synchronous_dispatch() -> None:
    apf = make_apf(Clock())
    request, info = request_for("POST", EVENTS)
    assert apf(request, info) is None
    headers = request.responseHeaders
    fs_uid = headers.getRawHeaders(b"x-kubernetes-pf-flowschema-uid")
    pl_uid = headers.getRawHeaders(b"x-kubernetes-pf-prioritylevel-uid")
    schema = next(s for s in apf.classifier.schemas if s.name == "global-default")
    assert fs_uid == [schema.uid] and pl_uid == [apf.levels["global-default"].uid]
    queues = apf.levels["global-default"].queues
    assert queues is not None and queues.seats_in_use == 1
    request.finish()
    assert queues.seats_in_use == 0
    assert apf.stats["global-default"].dispatched == 1


def test_exempt_is_never_queued() -> None:
    apf = make_apf(Clock(), total=2)
    for _ in range(50):
        request, info = request_for("POST", EVENTS, "admin", ("system:masters",))
        assert apf(request, info) is None
        request, info = request_for("GET", "/livez")
        assert apf(request, info) is None
    assert apf.levels["exempt"].exempt_dispatched == 100


def test_overload_queues_then_dispatches_fairly() -> None:
    """A flood of 30 queued requests spreads over its hand of 6 queues; a quiet user's one
    request is dispatched within one round of the queues, not after the backlog."""
    clock = Clock()
    apf = make_apf(clock, total=2)  # global-default: 1 seat
    first, info = request_for("POST", EVENTS, "flooder")
    assert apf(first, info) is None
    order: list[str] = []
    pending: dict[str, list[FakeRequest]] = {"flooder": [], "quiet": []}

    def submit(user: str) -> None:
        req, info = request_for("POST", EVENTS, user)
        verdict = apf(req, info)
        assert isinstance(verdict, Deferred)

        def started(_: object) -> None:
            order.append(user)
            pending[user].append(req)

        verdict.addCallback(started)

    for _ in range(30):
        submit("flooder")
    submit("quiet")
    assert b"quiet" in dump_requests(apf, True)
    assert "global-default" in dump_priority_levels(apf).decode()
    running = first
    while True:
        running.finish()
        if not order or len(order) == 31:
            break
        user = order[-1]
        running = pending[user][-1]
    assert len(order) == 31
    assert order.index("quiet") <= 6
    queues = apf.levels["global-default"].queues
    assert queues is not None and queues.seats_in_use == 1


def test_queue_wait_limit_gives_429_with_retry_after() -> None:
    clock = Clock()
    apf = make_apf(clock, total=2, timeout=8.0)  # wait limit 2 s
    holder, info = request_for("POST", EVENTS, "a")
    assert apf(holder, info) is None
    waiter, info = request_for("POST", EVENTS, "b")
    verdict = apf(waiter, info)
    assert isinstance(verdict, Deferred)
    got: list[Response | None] = []
    verdict.addCallback(got.append)
    clock.advance(2.1)
    assert len(got) == 1 and got[0] is not None and got[0].code == 429
    assert got[0].body == b"Too many requests, please try again later.\n"
    assert got[0].header("Retry-After") == "1"
    assert apf.stats["global-default"].rejected == {"time-out": 1}
    registry = CollectorRegistry()
    registry.register(FlowControlCollector(apf))
    text = generate_latest(registry).decode()
    assert (
        'apiserver_flowcontrol_rejected_requests_total{flow_schema="global-default",'
        'priority_level="global-default",reason="time-out"} 1.0' in text
    )
    assert 'apiserver_flowcontrol_nominal_limit_seats{priority_level="global-default"} 1.0' in (
        text
    )
    assert "apiserver_flowcontrol_current_executing_requests" in text
    assert "apiserver_flowcontrol_request_wait_duration_seconds_bucket" in text


def test_client_gone_while_queued_frees_its_place() -> None:
    apf = make_apf(Clock(), total=2)
    holder, info = request_for("POST", EVENTS, "a")
    apf(holder, info)
    waiter, info = request_for("POST", EVENTS, "b")
    assert isinstance(apf(waiter, info), Deferred)
    waiter.lose()
    queues = apf.levels["global-default"].queues
    assert queues is not None and queues.waiting == 0 and queues.cancelled == 1
    holder.finish()
    assert queues.seats_in_use == 0


def test_catch_all_rejects_without_queuing() -> None:
    terminated = Terminated()
    apf = make_apf(Clock(), total=2, terminations=terminated)  # catch-all: 1 seat, Reject
    one, info = request_for("GET", "/version", "nobody", ())
    assert apf(one, info) is None
    two, info = request_for("GET", "/version", "nobody", ())
    verdict = apf(two, info)
    assert isinstance(verdict, Response) and verdict.code == 429
    assert terminated.seen == [("/version", 429)]
    assert apf.stats["catch-all"].rejected == {"concurrency-limit": 1}


def test_watch_takes_no_seat_after_dispatch() -> None:
    apf = make_apf(Clock(), total=2)
    watch, info = request_for("GET", EVENTS + "?watch=1", "a")
    assert apf(watch, info) is None
    queues = apf.levels["global-default"].queues
    assert queues is not None and queues.seats_in_use == 0


def test_list_seats_follow_the_object_count() -> None:
    q = parse_query
    assert list_seats(q(b"/x"), "", 1000, 10) == 10  # from cache: 1000 objects -> 10 seats
    assert list_seats(q(b"/x"), "", 250, 10) == 3
    assert list_seats(q(b"/x?limit=50"), "", 1000, 10) == 1  # storage: 2 * 50 -> 1
    assert list_seats(q(b"/x?limit=500"), "", 1000, 10) == 10
    assert list_seats(q(b"/x"), "name", 1000, 10) == 1
    assert list_seats(q(b"/x"), "", None, 10) == 1  # count unknown
    assert list_seats(q(b"/x"), "", 1000, 3) == 3  # the level's max seats


def test_retry_after_doubles_under_sustained_drops_and_decays() -> None:
    tracker = DroppedRequests()
    for _ in range(5):
        assert tracker.record(100.2) == 1
    assert tracker.record(101.0) == 2  # 5 drops >= 3 * 1 in the last second
    assert tracker.record(110.0) == 1  # quiet: back down


def test_tabwriter_alignment_matches_go() -> None:
    out = tabwrite(["A,\tBB,\tC", "looooooong,\tx,\ty"])
    assert out == b"A,          BB,     C\nlooooooong, x,      y\n"


def test_max_in_flight_limits_each_kind_and_exempts_masters() -> None:
    limit = MaxInFlight(1, 1)
    get1, info1 = request_for("GET", EVENTS)
    assert limit(get1, info1) is None
    get2, info2 = request_for("GET", "/livez")
    refused = limit(get2, info2)
    assert isinstance(refused, Response) and refused.code == 429
    assert refused.header("Retry-After") == "1"
    assert refused.header("Content-Type") == "text/plain; charset=utf-8"
    assert refused.body == b"Too many requests, please try again later.\n"
    post, info3 = request_for("POST", EVENTS)
    assert limit(post, info3) is None  # the mutating limit is separate
    admin, info4 = request_for("GET", EVENTS, "admin", ("system:masters",))
    assert limit(admin, info4) is None
    watch, info5 = request_for("GET", EVENTS + "?watch=1")
    assert limit(watch, info5) is None  # long-running: not counted
    get1.finish()
    again, info6 = request_for("GET", EVENTS)
    assert limit(again, info6) is None
    assert limit.rejected == {"readOnly": 1, "mutating": 0}


def test_max_in_flight_zero_disables_that_limit() -> None:
    limit = MaxInFlight(0, 1)
    for _ in range(5):
        req, info = request_for("GET", EVENTS)
        assert limit(req, info) is None
    assert MaxInFlight(0, 0).active is False


def test_wait_limit_is_a_quarter_of_a_shorter_timeout_parameter() -> None:
    clock = Clock()
    apf = make_apf(clock, total=2, timeout=60.0)  # default wait limit 15 s
    holder, info = request_for("POST", EVENTS, "a")
    assert apf(holder, info) is None
    waiter, info = request_for("POST", EVENTS + "?timeout=4s", "b")
    verdict = apf(waiter, info)
    assert isinstance(verdict, Deferred)
    got: list[Response | None] = []
    verdict.addCallback(got.append)
    clock.advance(0.9)
    assert got == []
    clock.advance(0.2)
    assert len(got) == 1 and got[0] is not None and got[0].code == 429
