"""The max-in-flight limit, used when priority and fairness is off.

Follows k8s.io/apiserver/pkg/server/filters/maxinflight.go (``WithMaxInFlightLimit``):
read-only requests (verbs get, list, watch) count against ``--max-requests-inflight``, the
rest against ``--max-mutating-requests-inflight``; 0 turns a limit off. Long-running
requests are not counted. There is no queue: a request over the limit gets 429 at once with
``Retry-After: 1`` and Go's ``http.Error`` text, unless its user is in ``system:masters``.
Every other path is limited too, ``/livez`` and ``/readyz`` included, as in kube-apiserver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from apiserver.flowcontrol.apf import Terminations, too_many_requests
from apiserver.http.app import RequestInfo, Verdict, when_finished

if TYPE_CHECKING:
    from apiserver.http.request import HTTPRequest

READ_ONLY_VERBS = frozenset(("get", "list", "watch"))
PRIVILEGED_GROUP = "system:masters"
REJECTED = too_many_requests(1)


class MaxInFlight:
    """The ``flow_control`` stage when ``--enable-priority-and-fairness=false``."""

    def __init__(
        self, read_only_limit: int, mutating_limit: int, metrics: Terminations | None = None
    ) -> None:
        self.read_only_limit = read_only_limit
        self.mutating_limit = mutating_limit
        self.read_only = 0
        self.mutating = 0
        #: Refused requests by kind (``readOnly``, ``mutating``).
        self.rejected = {"readOnly": 0, "mutating": 0}
        self.metrics = metrics

    @property
    def active(self) -> bool:
        """False when both limits are 0: kube-apiserver then leaves the filter out."""
        return bool(self.read_only_limit or self.mutating_limit)

    def __call__(self, request: HTTPRequest, info: RequestInfo, /) -> Verdict:
        if info.long_running:
            return None
        resolved = info.resolved
        verb = resolved.verb if resolved is not None else info.method.lower()
        if verb in READ_ONLY_VERBS:
            limit = self.read_only_limit
            if not limit:
                return None
            if self.read_only < limit:
                self.read_only += 1
                when_finished(request, info, self._read_only_done)
                return None
            kind = "readOnly"
        else:
            limit = self.mutating_limit
            if not limit:
                return None
            if self.mutating < limit:
                self.mutating += 1
                when_finished(request, info, self._mutating_done)
                return None
            kind = "mutating"
        user = info.user
        if user is not None and PRIVILEGED_GROUP in user.groups:
            return None
        self.rejected[kind] += 1
        if self.metrics is not None:
            self.metrics.request_terminated(info, 429)
        return REJECTED

    def _read_only_done(self, _: object) -> None:
        self.read_only -= 1

    def _mutating_done(self, _: object) -> None:
        self.mutating -= 1
