"""The etcd3 storage backend: :class:`apiserver.storage.interface.Store` over etcd's ``/v3/``
JSON gateway.

It follows kube-apiserver's etcd3 store (k8s.io/apiserver/pkg/storage/etcd3/store.go):

- create is a transaction ``If(CreateRevision(key) == 0) Then(Put) Else(Get)``;
- update/delete with an expected revision compare ``ModRevision``, and the else branch reads
  the key so a conflict carries the current value (ConflictError.current) and a vanished key
  is told apart (KeyNotFoundError); an unconditional update/delete compares ``Version > 0``,
  so it never resurrects a deleted key;
- TTLs are etcd leases, reused for a while (see :mod:`.lease`);
- compaction runs every ``compaction_interval`` seconds like kube-apiserver's compactor: the
  apiservers sharing one etcd agree through the version of ``compact_rev_key`` on who compacts,
  and each compaction goes to the revision seen one interval earlier (one round is
  :meth:`Etcd3Store.compact_once`; the loop is the store's own with ``run_maintenance``, else
  its owner's, see :meth:`Etcd3Store.maintenance`);
- the health and readiness checks read ``health_key`` (kube-apiserver reads
  ``<prefix>/health``) within the caller's timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.storage.etcd3.gateway import (
    EtcdTLSPolicy,
    Gateway,
    LeaseNotFoundError,
    as_int,
    b64,
    normalize_endpoint,
    prefix_end,
)
from apiserver.storage.etcd3.lease import LeaseManager
from apiserver.storage.etcd3.watch import Etcd3Watch, kv_from_json
from apiserver.storage.interface import (
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    PeriodicTask,
    RangeResult,
    StorageError,
    StoreCapabilities,
    WatchEvent,
)
from apiserver.storage.periodic import PeriodicRunner

log = Logger()

#: The key kube-apiserver's compactor uses to elect, per interval, the apiserver that compacts
#: (outside any --etcd-prefix, so every apiserver on the cluster shares it).
COMPACT_REV_KEY = b"compact_rev_key"


class Etcd3Store:
    """A :class:`~apiserver.storage.interface.Store` on an etcd 3.4+ cluster.

    ``endpoints`` are client URLs (``http://host:2379``, ``https://...``) tried in order.
    ``reactor`` provides TCP/TLS and the clock.
    ``ca_file``/``cert_file``/``key_file`` configure TLS (kube-apiserver's ``--etcd-cafile``,
    ``--etcd-certfile``, ``--etcd-keyfile``). ``lease_reuse_seconds`` and
    ``max_keys_per_lease`` tune lease reuse (``--lease-reuse-duration-seconds``),
    ``compaction_interval`` is ``--etcd-compaction-interval`` in seconds (0 disables),
    ``request_timeout`` bounds every request, ``health_key`` is the key the health checks read.
    ``run_maintenance`` (default, for use on its own): the store runs its compaction loop
    itself; the server passes False and runs it as a child service of its tree.

    Capabilities: none. Other API servers write to the same etcd, so no revision this process
    knows is the cluster's committed revision, and a watch cache in front of this store can
    never prove itself current: it must never declare ``committed_revision`` (see
    :class:`~apiserver.storage.interface.StoreCapabilities`). Watch streams deliver as etcd
    sends (no pause; the registry adds flow control).
    """

    capabilities = StoreCapabilities()
    kind = "etcd"

    def __init__(
        self,
        endpoints: list[str],
        reactor: Any,
        *,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        lease_reuse_seconds: int = 60,
        max_keys_per_lease: int = 1000,
        compaction_interval: float = 300.0,
        request_timeout: float = 10.0,
        health_key: bytes = b"/registry/health",
        run_maintenance: bool = True,
    ) -> None:
        self._reactor = reactor
        self._clock: Any = reactor  # IReactorTime
        tls_files = ca_file is not None or cert_file is not None or key_file is not None
        urls = [normalize_endpoint(e, tls_files) for e in endpoints]
        tls_policy = None
        if tls_files or any(u.startswith("https://") for u in urls):
            tls_policy = EtcdTLSPolicy(ca_file, cert_file, key_file)
        self._gateway = Gateway(
            urls,
            reactor,
            request_timeout,
            tls_policy=tls_policy,
            on_revision=self._saw_revision,
        )
        self._leases = LeaseManager(
            self._grant_lease, self._clock, lease_reuse_seconds, max_keys_per_lease
        )
        self._tasks: tuple[PeriodicTask, ...] = ()
        if compaction_interval > 0:
            self._tasks = (PeriodicTask("compaction", compaction_interval, self.compact_once),)
        #: The loop the store runs itself (``run_maintenance``), started by :meth:`start`.
        self._runners = (
            [PeriodicRunner(t, self._clock) for t in self._tasks] if run_maintenance else []
        )
        # kube-apiserver's compactor state: the compact_rev_key version we expect, and the
        # revision seen at the previous tick (what the next compaction goes to).
        self._compact_time = 0
        self._compact_rev = 0
        self._health_key = health_key
        self._watches: set[Etcd3Watch] = set()
        self._last_revision = 0
        self._compacted_revision = 0

    @property
    def endpoints(self) -> list[str]:
        return list(self._gateway.endpoints)

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> Deferred[None]:
        """Check that etcd answers, then start the periodic compaction (``run_maintenance``)."""

        def started(_: object) -> None:
            for runner in self._runners:
                runner.start()

        return self.current_revision().addCallback(started)

    def stop(self) -> Deferred[None]:
        for runner in self._runners:
            runner.stop()  # a round in progress ends with the gateway's close
        for watch in list(self._watches):
            watch.cancel()
        return self._gateway.close()

    def _saw_revision(self, revision: int) -> None:
        if revision > self._last_revision:
            self._last_revision = revision

    # -- reads --------------------------------------------------------------------------------

    def current_revision(self) -> Deferred[int]:
        d = self._gateway.call(
            "/v3/kv/range",
            {"key": b64(self._health_key), "count_only": True},
            idempotent=True,
        )
        return d.addCallback(_header_revision)

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        payload: dict[str, Any] = {"key": b64(key)}
        if revision > 0:
            payload["revision"] = str(revision)

        def got(response: dict[str, Any]) -> KeyValue:
            kvs = response.get("kvs")
            if not kvs:
                raise KeyNotFoundError(
                    f"key {key!r} not found", key=key, revision=_header_revision(response)
                )
            return kv_from_json(kvs[0])

        d = self._gateway.call("/v3/kv/range", payload, idempotent=True)
        return d.addCallbacks(got, self._read_error, errbackArgs=(key, revision))

    def range(
        self,
        prefix: bytes,
        start_key: bytes = b"",
        limit: int = 0,
        revision: int = 0,
    ) -> Deferred[RangeResult]:
        payload: dict[str, Any] = {
            "key": b64(start_key or prefix),
            "range_end": b64(prefix_end(prefix)),
        }
        if limit > 0:
            payload["limit"] = str(limit)
        if revision > 0:
            payload["revision"] = str(revision)

        def got(response: dict[str, Any]) -> RangeResult:
            # etcd's header carries its current revision even for a read at an older one;
            # the contract (and kube-apiserver's continue tokens) want the served-at revision.
            return RangeResult(
                kvs=tuple(kv_from_json(kv) for kv in response.get("kvs") or ()),
                revision=revision if revision > 0 else _header_revision(response),
                more=bool(response.get("more")),
                count=as_int(response.get("count")),
            )

        d = self._gateway.call("/v3/kv/range", payload, idempotent=True)
        return d.addCallbacks(got, self._read_error, errbackArgs=(prefix, revision))

    def count(self, prefix: bytes) -> Deferred[int]:
        payload = {
            "key": b64(prefix),
            "range_end": b64(prefix_end(prefix)),
            "count_only": True,
        }
        d = self._gateway.call("/v3/kv/range", payload, idempotent=True)
        return d.addCallback(lambda response: as_int(response.get("count")))

    def _read_error(self, failure: Failure, key: bytes, revision: int) -> Failure:
        error = failure.value
        if isinstance(error, CompactedError):
            error.key = key
            error.revision = self._compacted_revision or revision
        elif isinstance(error, FutureRevisionError):
            error.key = key
            error.revision = revision
        return failure

    # -- writes -------------------------------------------------------------------------------

    def create(self, key: bytes, value: bytes, ttl: int = 0) -> Deferred[KeyValue]:
        return ensureDeferred(self._create(key, value, ttl))

    async def _create(self, key: bytes, value: bytes, ttl: int) -> KeyValue:
        k = b64(key)
        compare = {"key": k, "target": "CREATE", "result": "EQUAL", "create_revision": "0"}
        response, lease = await self._put_txn(key, value, ttl, compare, prev_kv=False)
        revision = _header_revision(response)
        if response.get("succeeded"):
            return KeyValue(key, value, revision, revision, lease)
        current = _failure_kv(response)
        raise KeyExistsError(
            f"key {key!r} already exists",
            key=key,
            revision=current.mod_revision if current else revision,
        )

    def update(
        self, key: bytes, value: bytes, expected_revision: int, ttl: int = 0
    ) -> Deferred[KeyValue]:
        return ensureDeferred(self._update(key, value, expected_revision, ttl))

    async def _update(self, key: bytes, value: bytes, expected_revision: int, ttl: int) -> KeyValue:
        compare = _expect(key, expected_revision)
        response, lease = await self._put_txn(key, value, ttl, compare, prev_kv=True)
        revision = _header_revision(response)
        if response.get("succeeded"):
            put = _first_response(response, "response_put")
            prev = put.get("prev_kv") or {}
            return KeyValue(key, value, as_int(prev.get("create_revision")), revision, lease)
        raise _mismatch(key, expected_revision, revision, _failure_kv(response))

    async def _put_txn(
        self, key: bytes, value: bytes, ttl: int, compare: dict[str, Any], prev_kv: bool
    ) -> tuple[dict[str, Any], int]:
        k = b64(key)
        for attempt in range(2):
            lease = await self._leases.get_lease(ttl) if ttl > 0 else 0
            put: dict[str, Any] = {"key": k, "value": b64(value)}
            if lease:
                put["lease"] = str(lease)
            if prev_kv:
                put["prev_kv"] = True
            txn = {
                "compare": [compare],
                "success": [{"request_put": put}],
                "failure": [{"request_range": {"key": k}}],
            }
            try:
                response = await self._gateway.call("/v3/kv/txn", txn)
            except LeaseNotFoundError:
                # The cached lease expired or was revoked behind our back: grant a new one.
                self._leases.forget(lease)
                if attempt:
                    raise
                continue
            return response, lease
        raise AssertionError("unreachable")

    def delete(self, key: bytes, expected_revision: int = 0) -> Deferred[KeyValue]:
        k = b64(key)
        txn = {
            "compare": [_expect(key, expected_revision)],
            "success": [{"request_delete_range": {"key": k, "prev_kv": True}}],
            "failure": [{"request_range": {"key": k}}],
        }

        def deleted(response: dict[str, Any]) -> KeyValue:
            revision = _header_revision(response)
            if response.get("succeeded"):
                result = _first_response(response, "response_delete_range")
                prev_kvs = result.get("prev_kvs") or [{}]
                prev = kv_from_json(prev_kvs[0])
                return KeyValue(key, prev.value, prev.create_revision, revision, prev.lease)
            raise _mismatch(key, expected_revision, revision, _failure_kv(response))

        return self._gateway.call("/v3/kv/txn", txn).addCallback(deleted)

    def _grant_lease(self, ttl: int) -> Deferred[int]:
        d = self._gateway.call("/v3/lease/grant", {"TTL": str(ttl)})
        return d.addCallback(lambda response: as_int(response.get("ID")))

    # -- watch --------------------------------------------------------------------------------

    def watch(
        self,
        prefix: bytes,
        start_revision: int,
        callback: Callable[[WatchEvent], None],
    ) -> Etcd3Watch:
        """See the interface. ``start_revision`` 0 ("from now on") starts right after the
        newest revision this store has seen in any answer, so every write this process makes
        after the call is delivered even though the stream is set up asynchronously (if that
        revision has been compacted meanwhile, the watch falls back to etcd's "now")."""
        guessed = False
        if start_revision <= 0 and self._last_revision > 0:
            start_revision = self._last_revision + 1
            guessed = True
        watch = Etcd3Watch(self, prefix, max(start_revision, 0), callback, guessed_start=guessed)
        self._watches.add(watch)
        watch.start()
        return watch

    def _watch_finished(self, watch: Etcd3Watch) -> None:
        self._watches.discard(watch)

    # -- compaction ---------------------------------------------------------------------------

    def compact(self, revision: int) -> Deferred[None]:
        """Compact etcd's history to ``revision``. Compacting to a revision already compacted
        is a no-op (the history before it is gone either way)."""

        def compacted(_: object) -> None:
            self._compacted_revision = max(self._compacted_revision, revision)

        def already(failure: Failure) -> None:
            failure.trap(CompactedError)
            self._compacted_revision = max(self._compacted_revision, revision)

        def future(failure: Failure) -> Failure:
            if isinstance(failure.value, FutureRevisionError):
                failure.value.revision = revision
            return failure

        d = self._gateway.call("/v3/kv/compaction", {"revision": str(revision)})
        return d.addCallbacks(compacted, already).addErrback(future)

    def maintenance(self) -> Sequence[PeriodicTask]:
        """The periodic compactor (unless ``compaction_interval`` is 0), unless the store runs
        it itself."""
        return () if self._runners else self._tasks

    def compact_once(self) -> Deferred[None]:
        """One round of kube-apiserver's compactor (storage/etcd3/compact.go): whoever moves
        ``compact_rev_key``'s version from the value it last saw compacts to the revision it
        saw one interval ago; the others learn the new version and wait for the next round."""
        return ensureDeferred(self._compact_once())

    async def _compact_once(self) -> None:
        k = b64(COMPACT_REV_KEY)
        txn = {
            "compare": [
                {
                    "key": k,
                    "target": "VERSION",
                    "result": "EQUAL",
                    "version": str(self._compact_time),
                }
            ],
            "success": [{"request_put": {"key": k, "value": b64(str(self._compact_rev).encode())}}],
            "failure": [{"request_range": {"key": k}}],
        }
        response = await self._gateway.call("/v3/kv/txn", txn)
        current = _header_revision(response)
        if not response.get("succeeded"):
            kv = _first_response(response, "response_range").get("kvs") or [{}]
            self._compact_time = as_int(kv[0].get("version"))
            self._compact_rev = current
            return
        self._compact_time += 1
        target, self._compact_rev = self._compact_rev, current
        if target == 0:
            return  # no compaction on the first round, like kube-apiserver
        await self.compact(target)
        log.debug("etcd: compacted to revision {rev}", rev=target)

    # -- health -------------------------------------------------------------------------------

    def db_size(self) -> Deferred[int | None]:
        """The database size etcd reports (``/v3/maintenance/status`` ``dbSize``), for the
        ``apiserver_storage_db_total_size_in_bytes`` metric."""
        d = self._gateway.call("/v3/maintenance/status", {}, idempotent=True)
        return d.addCallback(lambda response: int(response.get("dbSize", 0) or 0))

    def check_health(self, timeout: float) -> Deferred[None]:
        """kube-apiserver's ``etcd`` livez/healthz check: a GET of the health key within
        ``timeout``. A permission error still proves etcd answers, as upstream treats it."""
        d = self._gateway.call(
            "/v3/kv/range",
            {"key": b64(self._health_key), "count_only": True},
            idempotent=True,
            timeout=timeout,
        )

        def permission_denied(failure: Failure) -> Failure | None:
            if failure.check(StorageError) and "permission denied" in str(failure.value):
                return None
            return failure

        return d.addCallbacks(lambda _: None, permission_denied)

    def check_ready(self, timeout: float) -> Deferred[None]:
        """kube-apiserver's ``etcd-readiness`` check: the same read as the health check."""
        return self.check_health(timeout)


def _header_revision(response: dict[str, Any]) -> int:
    return as_int((response.get("header") or {}).get("revision"))


def _first_response(response: dict[str, Any], kind: str) -> dict[str, Any]:
    for r in response.get("responses") or ():
        if kind in r:
            return r[kind] or {}
    return {}


def _failure_kv(response: dict[str, Any]) -> KeyValue | None:
    kvs = _first_response(response, "response_range").get("kvs")
    return kv_from_json(kvs[0]) if kvs else None


def _expect(key: bytes, expected_revision: int) -> dict[str, Any]:
    k = b64(key)
    if expected_revision:
        return {
            "key": k,
            "target": "MOD",
            "result": "EQUAL",
            "mod_revision": str(expected_revision),
        }
    return {"key": k, "target": "VERSION", "result": "GREATER", "version": "0"}


def _mismatch(
    key: bytes, expected_revision: int, revision: int, current: KeyValue | None
) -> StorageError:
    if current is None:
        return KeyNotFoundError(f"key {key!r} not found", key=key, revision=revision)
    return ConflictError(
        f"key {key!r} is at revision {current.mod_revision}, not {expected_revision}",
        key=key,
        revision=current.mod_revision,
        current=current,
    )
