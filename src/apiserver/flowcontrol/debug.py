"""``/debug/api_priority_and_fairness/dump_*``: k8s.io/apiserver/pkg/util/flowcontrol/
apf_controller_debug.go.

Rows are comma-separated cells laid out by Go's ``text/tabwriter`` (minimum cell width 8,
padding 1, blanks): :func:`tabwrite` does the same. Requests dispatched at once without a
queue (the fast path of :mod:`apiserver.flowcontrol.queueset`) are counted but not listed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from apiserver.flowcontrol.apf import PriorityAndFairness
from apiserver.flowcontrol.queueset import Waiting
from apiserver.http.app import RequestInfo, Router
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.http.status import not_found_text

SEP = ",\t"
PREFIX = "/debug/api_priority_and_fairness/"


def tabwrite(lines: Sequence[str], minwidth: int = 8, padding: int = 1) -> bytes:
    """Align the tab-terminated cells of ``lines`` in columns, as tabwriter does when every
    line has its cells in the same columns (the last cell of a line is not aligned)."""
    rows = [line.split("\t") for line in lines]
    widths: list[int] = []
    for cells in rows:
        for index, cell in enumerate(cells[:-1]):
            width = max(len(cell) + padding, minwidth)
            if index >= len(widths):
                widths.append(width)
            elif width > widths[index]:
                widths[index] = width
    out = []
    for cells in rows:
        text = "".join(cell.ljust(widths[i]) for i, cell in enumerate(cells[:-1]))
        out.append(text + cells[-1] + "\n")
    return "".join(out).encode()


def _go_bool(value: bool) -> str:
    return "true" if value else "false"


def _rfc3339nano(seconds: float) -> str:
    whole = int(seconds)
    frac = f"{seconds - whole:.9f}"[2:].rstrip("0")
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
    return f"{stamp}.{frac}Z" if frac else f"{stamp}Z"


def dump_priority_levels(apf: PriorityAndFairness) -> bytes:
    lines = [
        SEP.join(
            (
                "PriorityLevelName",
                "ActiveQueues",
                "IsIdle",
                "IsQuiescing",
                "WaitingRequests",
                "ExecutingRequests",
                "DispatchedRequests",
                "RejectedRequests",
                "TimedoutRequests",
                "CancelledRequests",
            )
        )
    ]
    every = {**apf.quiescing, **apf.levels}
    for name in sorted(every):
        level = every[name]
        quiescing = name in apf.quiescing and name not in apf.levels
        qs = level.queues
        if qs is None:
            row = (
                name,
                "0",
                "true",
                "false",
                "0",
                "0",
                str(level.exempt_dispatched),
                "0",
                "0",
                "0",
            )
        else:
            row = (
                name,
                str(qs.active_queues()),
                _go_bool(qs.waiting == 0 and qs.executing == 0),
                _go_bool(quiescing),
                str(qs.waiting),
                str(qs.executing),
                str(qs.dispatched),
                str(qs.rejected),
                str(qs.timed_out),
                str(qs.cancelled),
            )
        lines.append(SEP.join(row))
    return tabwrite(lines)


def dump_queues(apf: PriorityAndFairness) -> bytes:
    lines = [
        SEP.join(
            (
                "PriorityLevelName",
                "Index",
                "PendingRequests",
                "ExecutingRequests",
                "SeatsInUse",
                "NextDispatchR",
                "InitialSeatsSum",
                "MaxSeatsSum",
                "TotalWorkSum",
            )
        )
    ]
    for name, level in {**apf.quiescing, **apf.levels}.items():
        if level.queues is None:
            continue
        for queue in level.queues.queues:
            seats = sum(r.seats for r in queue.waiting)
            lines.append(
                SEP.join(
                    (
                        name,
                        str(queue.index),
                        str(len(queue.waiting)),
                        str(len(queue.executing)),
                        str(queue.seats_in_use),
                        f"{queue.virtual_start:.8f}ss",
                        str(seats),
                        str(seats),
                        f"{float(seats):.8f}ss",
                    )
                )
            )
    return tabwrite(lines)


def dump_requests(apf: PriorityAndFairness, details: bool) -> bytes:
    header = [
        "PriorityLevelName",
        "FlowSchemaName",
        "QueueIndex",
        "RequestIndexInQueue",
        "FlowDistingsher",
        "ArriveTime",
        "InitialSeats",
        "FinalSeats",
        "AdditionalLatency",
        "StartTime",
    ]
    if details:
        header += [
            "UserName",
            "Verb",
            "APIPath",
            "Namespace",
            "Name",
            "APIVersion",
            "Resource",
            "SubResource",
        ]
    lines = [SEP.join(header)]

    def row(level: str, queue: int, index: int, request: Waiting) -> None:
        cells = [
            level,
            request.schema,
            str(queue),
            str(index),
            request.distinguisher,
            _rfc3339nano(request.arrived),
            str(request.seats),
            "0",
            "0s",
            _rfc3339nano(request.started if request.started is not None else 0.0),
        ]
        if details:
            cells += list(request.details or ("",) * 8)
        lines.append(SEP.join(cells))

    for name, level in {**apf.quiescing, **apf.levels}.items():
        if level.queues is None:
            continue
        for queue in level.queues.queues:
            for index, waiting in enumerate(queue.waiting):
                row(name, queue.index, index, waiting)
            for running in queue.executing:
                row(name, queue.index, -1, running)
    return tabwrite(lines)


def install_debug(router: Router, apf: PriorityAndFairness) -> None:
    """Register the three dumps on ``router``, unlisted in ``/`` as kube installs them
    (``UnlistedHandleFunc``): one prefix route, anything else under it 404."""

    def text(body: bytes) -> Response:
        return Response(200, (("Content-Type", "text/plain; charset=utf-8"),), body)

    def handle(request: HTTPRequest, info: RequestInfo) -> Response:
        name = info.path[len(PREFIX) :]
        if name == "dump_priority_levels":
            return text(dump_priority_levels(apf))
        if name == "dump_queues":
            return text(dump_queues(apf))
        if name == "dump_requests":
            values = info.query.get(b"includeRequestDetails")
            return text(dump_requests(apf, bool(values and values[0])))
        return not_found_text()

    router.add_prefix(PREFIX, handle)
