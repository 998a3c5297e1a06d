"""Token buckets and the least-recently-used cache EventRateLimit keeps them in.

``TokenBucket`` is client-go's ``flowcontrol.NewTokenBucketRateLimiterWithClock``
(k8s.io/client-go/util/flowcontrol/throttle.go), which is golang.org/x/time/rate's
``Limiter``: it starts full (``burst`` tokens), refills at ``qps`` tokens a second up to
``burst``, and ``try_accept`` takes one token if there is one (``AllowN(now, 1)``). Time comes
from the injected clock, so the tests run on a ``twisted.internet.task.Clock``.

``LRUCache`` is hashicorp/golang-lru's ``Cache`` as EventRateLimit uses it
(k8s.io/kubernetes plugin/pkg/admission/eventratelimit/cache.go): a lookup makes the entry the
most recent, adding past the size evicts the least recent, and an evicted key comes back with a
new (full) bucket.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

from twisted.internet.interfaces import IReactorTime

V = TypeVar("V")


class TokenBucket:
    """One bucket of ``burst`` tokens refilled at ``qps`` a second (see the module doc)."""

    __slots__ = ("_clock", "_last", "_tokens", "burst", "qps")

    def __init__(self, qps: float, burst: int, clock: IReactorTime) -> None:
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._last = clock.seconds()

    def try_accept(self) -> bool:
        """Take one token if one is there (``RateLimiter.TryAccept``)."""
        now = self._clock.seconds()
        elapsed = now - self._last
        if elapsed > 0:
            self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)
            self._last = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False


class LRUCache(Generic[V]):
    """At most ``size`` values by key, made on first use by ``factory``; the least recently
    used is evicted first."""

    __slots__ = ("_entries", "_factory", "size")

    def __init__(self, size: int, factory: Callable[[], V]) -> None:
        if size <= 0:
            # golang-lru's New refuses it ("must provide a positive size").
            raise ValueError("must provide a positive size")
        self.size = size
        self._factory = factory
        self._entries: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V:
        entries = self._entries
        value = entries.get(key)
        if value is not None:
            entries.move_to_end(key)
            return value
        value = self._factory()
        entries[key] = value
        if len(entries) > self.size:
            entries.popitem(last=False)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
