"""Lease reuse for keys with a TTL, after kube-apiserver's etcd3 ``leaseManager``.

Why: granting one etcd lease per event would create a lease per write, and etcd's lessor does
work per lease (expiry checks, persistence). kube-apiserver
(k8s.io/apiserver/pkg/storage/etcd3/lease_manager.go) reuses a lease for a short while: a
lease is granted with ``ttl + reuse`` seconds, and later keys with the same TTL attach to it as
long as the lease still outlives them (``now + ttl < expiry``), was granted no more than
``reuse`` seconds ago (``now + ttl + reuse > expiry``) and holds fewer than
``max_keys_per_lease`` keys. ``reuse`` is 5% of the TTL, capped at
``--lease-reuse-duration-seconds`` (60 by default), so no key ever expires before its TTL and
none outlives it by more than the reuse window.

Differences from kube-apiserver, on purpose: one cached lease per TTL rather than one in
total (events all share one TTL, so this is the same in practice, and keys with another TTL do
not evict it), and concurrent callers that need a new lease share the grant in flight instead
of each granting their own. Time comes from the injected clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
from twisted.internet.defer import Deferred, succeed
from twisted.python.failure import Failure

#: Share of the TTL a lease is reused for (kube-apiserver's leaseReuseDurationPercent).
LEASE_REUSE_PERCENT = 0.05


@attrs.define
class _Lease:
    expiry: float
    count: int = 1
    id: int = 0
    waiters: list[Deferred[int]] | None = attrs.Factory(list)  # None once granted


class LeaseManager:
    """Hands out lease ids for keys with a TTL, reusing leases as described above."""

    def __init__(
        self,
        grant: Callable[[int], Deferred[int]],
        clock: Any,  # IReactorTime
        reuse_seconds: int = 60,
        max_keys_per_lease: int = 1000,
    ) -> None:
        self._grant = grant
        self._clock = clock
        self._reuse_seconds = max(0, reuse_seconds)
        self._max_keys = max(1, max_keys_per_lease)
        self._leases: dict[int, _Lease] = {}

    def reuse_seconds(self, ttl: int) -> int:
        return min(int(LEASE_REUSE_PERCENT * ttl), self._reuse_seconds)

    def get_lease(self, ttl: int) -> Deferred[int]:
        """A lease id that keeps a key alive for at least ``ttl`` seconds from now."""
        now = self._clock.seconds()
        reuse = self.reuse_seconds(ttl)
        lease = self._leases.get(ttl)
        if lease is not None and lease.count < self._max_keys:
            if lease.waiters is not None:
                # A grant for this TTL is in flight; it was asked for just now.
                lease.count += 1
                waiter: Deferred[int] = Deferred()
                lease.waiters.append(waiter)
                return waiter
            valid = now + ttl < lease.expiry
            sufficient = now + ttl + reuse > lease.expiry
            if valid and sufficient:
                lease.count += 1
                return succeed(lease.id)
        new = _Lease(expiry=now + ttl + reuse)
        self._leases[ttl] = new

        def granted(lease_id: int) -> int:
            new.id = lease_id
            waiters, new.waiters = new.waiters or [], None
            for w in waiters:
                w.callback(lease_id)
            return lease_id

        def failed(failure: Failure) -> Failure:
            if self._leases.get(ttl) is new:
                del self._leases[ttl]
            waiters, new.waiters = new.waiters or [], None
            for w in waiters:
                w.errback(failure)
            return failure

        return self._grant(ttl + reuse).addCallbacks(granted, failed)

    def forget(self, lease_id: int) -> None:
        """Drop a cached lease etcd no longer knows (expired or revoked)."""
        for ttl, lease in list(self._leases.items()):
            if lease.id == lease_id:
                del self._leases[ttl]
