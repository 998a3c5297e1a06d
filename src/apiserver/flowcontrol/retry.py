"""``Retry-After`` of a priority level's 429s: k8s.io/apiserver/pkg/util/flowcontrol/
dropped_requests_tracker.go.

It starts at 1 s; when at least three times as many requests as the current value were
refused in the last that-many seconds (and the value has not changed for that long) it
doubles, up to 32; while fewer than the value are refused it goes down by one.
"""

from __future__ import annotations

MAX_RETRY_AFTER = 32


class DroppedRequests:
    __slots__ = ("_history", "_updated", "retry_after")

    def __init__(self) -> None:
        self.retry_after = 1
        #: ``[unix second, drops]``, oldest first.
        self._history: list[list[int]] = []
        self._updated = 0

    def record(self, now: float) -> int:
        """Count one refused request at ``now``; the ``Retry-After`` to send with it."""
        second = int(now)
        history = self._history
        if history and history[-1][0] == second:
            history[-1][1] += 1
            return self.retry_after
        self._update(second)
        history.append([second, 1])
        keep = min(2 * self.retry_after, MAX_RETRY_AFTER)
        while history and second - history[0][0] > keep:
            history.pop(0)
        return self.retry_after

    def _update(self, second: int) -> None:
        retry_after = self.retry_after
        dropped = 0
        for stamp, count in reversed(self._history):
            if second - stamp > retry_after:
                break
            if stamp < second:
                dropped += count
        if second - self._updated >= retry_after and dropped >= 3 * retry_after:
            self.retry_after = min(retry_after * 2, MAX_RETRY_AFTER)
            self._updated = second
        elif dropped < retry_after and retry_after > 1:
            self.retry_after = retry_after - 1
