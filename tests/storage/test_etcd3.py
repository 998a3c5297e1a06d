"""etcd-specific tests of the etcd3 backend against a real etcd (Debian's etcd-server 3.4).

The backend-neutral behaviour is covered by the shared conformance suite; these tests cover
what only etcd has: several endpoints, restarts and freezes of the server, two apiservers on
one etcd, lease reuse, server-side compaction and TLS towards etcd.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import json
import socket
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.internet import reactor
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectionLost, ConnectionRefusedError
from twisted.internet.task import Clock, deferLater
from twisted.python.failure import Failure
from twisted.web.client import ResponseFailed
from twisted.web.resource import Resource
from twisted.web.server import Site

from apiserver.storage.etcd3 import COMPACT_REV_KEY, Etcd3Store, EtcdTLSPolicy
from apiserver.storage.etcd3 import gateway as gateway_module
from apiserver.storage.etcd3.gateway import Gateway, b64, prefix_end
from apiserver.storage.etcd3.lease import LeaseManager
from apiserver.storage.interface import (
    CompactedError,
    ConflictError,
    FutureRevisionError,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    NoSpaceError,
    StorageTimeoutError,
    Store,
    UnavailableError,
    Watch,
    WatchEvent,
)
from tests.storage.etcdserver import EtcdServer, etcd_available

needs_etcd = pytest.mark.skipif(not etcd_available(), reason="etcd (etcd-server) not installed")


def sleep(seconds: float) -> Deferred[None]:
    return deferLater(reactor, seconds, lambda: None)


async def eventually(check: Any, timeout: float = 10.0, interval: float = 0.05) -> None:
    """Poll ``check()`` (truthy when done) until ``timeout``."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await sleep(interval)


@contextlib.contextmanager
def refused_url() -> Iterator[str]:
    """A loopback URL that refuses connections: a port bound but not listening, held for the
    test so that no other process can take it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def unique_prefix() -> bytes:
    return f"/registry/test-{uuid.uuid4().hex[:12]}/".encode()


@pytest.fixture(scope="module")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if not etcd_available():
        pytest.skip("etcd (etcd-server) not installed")
    server = EtcdServer(str(tmp_path_factory.mktemp("etcd3") / "data"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_etcd(tmp_path: Path) -> Any:
    """An etcd of the test's own, for tests that stop or freeze it."""
    if not etcd_available():
        pytest.skip("etcd (etcd-server) not installed")
    server = EtcdServer(str(tmp_path / "etcd"))
    server.start()
    yield server
    server.stop()


@pytest_twisted.async_yield_fixture
async def store(etcd: EtcdServer) -> AsyncIterator[Etcd3Store]:
    s = Etcd3Store([etcd.client_url], reactor, request_timeout=5.0)
    await s.start()
    yield s
    await s.stop()


# -- pure unit tests (no etcd) ------------------------------------------------------------------


def test_prefix_end() -> None:
    assert prefix_end(b"/a/") == b"/a0"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") == b"\x00"
    assert prefix_end(b"") == b"\x00"


def test_store_satisfies_protocol() -> None:
    s = Etcd3Store(["http://127.0.0.1:1"], reactor=Clock())
    assert isinstance(s, Store)


def test_lease_manager_reuses_within_window() -> None:
    clock = Clock()
    granted: list[int] = []

    def grant(ttl: int) -> Deferred[int]:
        granted.append(ttl)
        d: Deferred[int] = Deferred()
        d.callback(len(granted))
        return d

    leases = LeaseManager(grant, clock, reuse_seconds=60, max_keys_per_lease=3)
    results: list[int] = []
    # 5% of 3600 s is 180 s, capped at 60 s: the lease lives 3660 s.
    leases.get_lease(3600).addCallback(results.append)
    assert granted == [3660]
    clock.advance(30)
    leases.get_lease(3600).addCallback(results.append)
    leases.get_lease(3600).addCallback(results.append)
    assert results == [1, 1, 1]
    # The fourth key is over max_keys_per_lease: a new lease.
    leases.get_lease(3600).addCallback(results.append)
    assert results[-1] == 2
    # Past the reuse window the lease would not be "sufficient": a new one.
    clock.advance(61)
    leases.get_lease(3600).addCallback(results.append)
    assert results[-1] == 3
    # Another TTL gets its own lease; a short TTL (5% < 1 s) is never reused, like upstream.
    leases.get_lease(10).addCallback(results.append)
    leases.get_lease(10).addCallback(results.append)
    assert results[-2:] == [4, 5]
    assert granted[-2:] == [10, 10]


def test_lease_manager_shares_grant_in_flight() -> None:
    clock = Clock()
    pending: list[Deferred[int]] = []

    def grant(ttl: int) -> Deferred[int]:
        d: Deferred[int] = Deferred()
        pending.append(d)
        return d

    leases = LeaseManager(grant, clock, reuse_seconds=60, max_keys_per_lease=1000)
    results: list[int] = []
    for _ in range(5):
        leases.get_lease(3600).addCallback(results.append)
    assert len(pending) == 1
    pending[0].callback(42)
    assert results == [42] * 5
    # A failed grant fails its waiters and is not cached.
    errors: list[Any] = []
    leases.forget(42)
    leases.get_lease(3600).addErrback(errors.append)
    leases.get_lease(3600).addErrback(errors.append)
    pending[1].errback(UnavailableError("down"))
    assert len(errors) == 2
    leases.get_lease(3600)
    assert len(pending) == 3


def test_tls_config_builds(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    policy = EtcdTLSPolicy(pki["ca"], pki["client_cert"], pki["client_key"])
    assert policy.creatorForNetloc(b"127.0.0.1", 2379) is not None
    s = Etcd3Store(
        ["https://127.0.0.1:2379"],
        reactor=Clock(),
        ca_file=pki["ca"],
        cert_file=pki["client_cert"],
        key_file=pki["client_key"],
    )
    assert s.endpoints == ["https://127.0.0.1:2379"]
    with pytest.raises(ValueError):
        EtcdTLSPolicy(pki["ca"], pki["client_cert"], None)


# -- against a real etcd ----------------------------------------------------------------------


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_crud(store: Etcd3Store) -> None:
    p = unique_prefix()
    a = await store.create(p + b"a", b"1")
    assert a.key == p + b"a" and a.value == b"1"
    assert a.create_revision == a.mod_revision > 0 and a.lease == 0
    assert await store.get(p + b"a") == a
    with pytest.raises(KeyExistsError) as exists:
        await store.create(p + b"a", b"again")
    assert exists.value.revision == a.mod_revision

    b = await store.update(p + b"a", b"2", a.mod_revision)
    assert b.value == b"2" and b.create_revision == a.create_revision
    assert b.mod_revision > a.mod_revision
    assert (await store.get(p + b"a", revision=a.mod_revision)).value == b"1"

    for name in (b"b", b"c", b"d"):
        await store.create(p + name, name)
    assert await store.count(p) == 4
    page = await store.range(p, limit=2)
    assert [kv.key for kv in page.kvs] == [p + b"a", p + b"b"]
    assert page.more and page.count == 4
    rest = await store.range(p, start_key=p + b"b\x00", revision=page.revision)
    assert [kv.key for kv in rest.kvs] == [p + b"c", p + b"d"]
    assert not rest.more and rest.revision == page.revision
    old = await store.range(p, revision=b.mod_revision)
    assert [kv.value for kv in old.kvs] == [b"2"]
    assert await store.current_revision() >= page.revision

    deleted = await store.delete(p + b"a", b.mod_revision)
    assert deleted.value == b"2" and deleted.mod_revision > b.mod_revision
    with pytest.raises(KeyNotFoundError):
        await store.get(p + b"a")
    with pytest.raises(KeyNotFoundError):
        await store.delete(p + b"a")
    with pytest.raises(KeyNotFoundError):
        await store.update(p + b"a", b"3", 0)  # unconditional update needs the key
    with pytest.raises(FutureRevisionError):
        await store.range(p, revision=deleted.mod_revision + 1000)


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_cas_conflict_carries_current(store: Etcd3Store) -> None:
    p = unique_prefix()
    a = await store.create(p + b"x", b"1")
    b = await store.update(p + b"x", b"2", 0)
    with pytest.raises(ConflictError) as conflict:
        await store.update(p + b"x", b"3", a.mod_revision)
    assert conflict.value.current == KeyValue(p + b"x", b"2", a.create_revision, b.mod_revision)
    assert conflict.value.revision == b.mod_revision
    with pytest.raises(ConflictError) as conflict:
        await store.delete(p + b"x", a.mod_revision)
    assert conflict.value.current is not None and conflict.value.current.value == b"2"
    await store.delete(p + b"x", b.mod_revision)
    with pytest.raises(KeyNotFoundError):
        await store.update(p + b"x", b"4", b.mod_revision)


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_watch_delivers_in_order_with_prev(store: Etcd3Store) -> None:
    p = unique_prefix()
    events: list[WatchEvent] = []
    rev = await store.current_revision()
    watch = store.watch(p, rev + 1, events.append)
    assert isinstance(watch, Watch)
    a = await store.create(p + b"a", b"1")
    b = await store.update(p + b"a", b"2", a.mod_revision)
    await store.create(p.rstrip(b"/") + b"-sibling", b"not under the prefix")
    d = await store.delete(p + b"a")
    await eventually(lambda: len(events) >= 3)
    assert [e.type for e in events] == ["PUT", "PUT", "DELETE"]
    assert events[0].prev_kv is None and events[0].kv == a
    assert events[1].kv == b and events[1].prev_kv == a
    assert events[2].kv.key == p + b"a" and events[2].kv.mod_revision == d.mod_revision
    assert events[2].kv.value == b"" and events[2].prev_kv == b
    watch.cancel()
    await watch.done  # fires with None


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_watch_from_now_sees_next_write(store: Etcd3Store) -> None:
    p = unique_prefix()
    await store.create(p + b"before", b"0")
    events: list[WatchEvent] = []
    watch = store.watch(p, 0, events.append)
    kv = await store.create(p + b"after", b"1")
    await eventually(lambda: len(events) >= 1)
    assert [e.kv for e in events] == [kv]
    await store.stop()
    assert watch.done.called  # stop() ends every watch
    await watch.done


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_two_stores_share_one_etcd(store: Etcd3Store, etcd: EtcdServer) -> None:
    other = Etcd3Store([etcd.client_url], reactor)
    await other.start()
    try:
        p = unique_prefix()
        events: list[WatchEvent] = []
        watch = store.watch(p, (await store.current_revision()) + 1, events.append)
        kv = await other.create(p + b"k", b"v")
        await eventually(lambda: len(events) == 1)
        assert events[0].kv == kv
        assert await store.get(p + b"k") == kv
        watch.cancel()
    finally:
        await other.stop()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_lease_reuse(etcd: EtcdServer) -> None:
    s = Etcd3Store([etcd.client_url], reactor, max_keys_per_lease=2)
    await s.start()
    try:
        p = unique_prefix()
        a = await s.create(p + b"a", b"1", ttl=3600)
        b = await s.create(p + b"b", b"1", ttl=3600)
        c = await s.create(p + b"c", b"1", ttl=3600)  # over max_keys_per_lease
        other_ttl = await s.create(p + b"d", b"1", ttl=1800)
        assert a.lease != 0 and a.lease == b.lease
        assert c.lease not in (0, a.lease)
        assert other_ttl.lease not in (0, a.lease, c.lease)
        assert (await s.get(p + b"a")).lease == a.lease
        # The lease outlives the TTL by the reuse window (min(5% of TTL, 60 s)).
        ttl = await s._gateway.call("/v3/lease/timetolive", {"ID": str(a.lease)})
        assert 3600 < int(ttl["grantedTTL"]) <= 3660
        # An update without TTL detaches the key from its lease.
        u = await s.update(p + b"a", b"2", a.mod_revision)
        assert u.lease == 0 and (await s.get(p + b"a")).lease == 0
        # A lease etcd forgot (revoked) is replaced transparently.
        await s._gateway.call("/v3/kv/lease/revoke", {"ID": str(c.lease)})
        e = await s.create(p + b"e", b"1", ttl=3600)
        assert e.lease not in (0, c.lease)
        f = await s.create(p + b"f", b"1", ttl=3600)
        assert f.lease == e.lease
    finally:
        await s.stop()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_ttl_expiry_is_a_delete_event(store: Etcd3Store) -> None:
    p = unique_prefix()
    events: list[WatchEvent] = []
    watch = store.watch(p, (await store.current_revision()) + 1, events.append)
    kv = await store.create(p + b"short", b"1", ttl=1)
    await eventually(lambda: len(events) >= 2, timeout=15)
    assert events[1].type == "DELETE" and events[1].prev_kv == kv
    with pytest.raises(KeyNotFoundError):
        await store.get(p + b"short")
    watch.cancel()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_failover_skips_dead_endpoint(etcd: EtcdServer) -> None:
    with refused_url() as dead, refused_url() as dead2:
        s = Etcd3Store([dead, etcd.client_url], reactor, request_timeout=5.0)
        await s.start()
        try:
            p = unique_prefix()
            kv = await s.create(p + b"k", b"v")
            assert (await s.get(p + b"k")) == kv
            events: list[WatchEvent] = []
            w = s.watch(p, kv.mod_revision, events.append)
            await eventually(lambda: len(events) == 1)
            w.cancel()
            await s.check_health(2.0)
        finally:
            await s.stop()

        # Refused connections are UnavailableError (etcd is down), not a StorageTimeoutError
        # after request_timeout; how fast that is belongs in bench/, not in an assert.
        nowhere = Etcd3Store([dead, dead2], reactor, request_timeout=5.0)
        with pytest.raises(UnavailableError):
            await nowhere.start()
        with pytest.raises(UnavailableError):
            await nowhere.create(b"/registry/x", b"v")
        with pytest.raises(UnavailableError):
            await nowhere.check_health(2.0)
        await nowhere.stop()


class NoLeader(Resource):
    """A gateway of an etcd member cut off from its cluster: every request gets etcd's
    ``no leader`` error (gRPC Unavailable)."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    def render_POST(self, request: Any) -> bytes:
        self.requests += 1
        request.setResponseCode(503)
        request.setHeader(b"content-type", b"application/json")
        message = "etcdserver: no leader"
        return json.dumps({"error": message, "code": 14, "message": message}).encode()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_failover_past_member_without_leader(etcd: EtcdServer) -> None:
    resource = NoLeader()
    tcp: Any = reactor
    port = tcp.listenTCP(0, Site(resource), interface="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{port.getHost().port}"
        s = Etcd3Store([url, etcd.client_url], reactor)
        await s.start()  # a read: goes on to the healthy member
        p = unique_prefix()
        kv = await s.create(p + b"k", b"v")  # now sticks to the healthy member
        assert await s.get(p + b"k") == kv
        await s.stop()
        only = Etcd3Store([url], reactor)
        with pytest.raises(UnavailableError, match="no leader"):
            await only.create(p + b"x", b"v")
        with pytest.raises(UnavailableError):
            await only.check_health(2.0)
        await only.stop()
        assert resource.requests >= 3
    finally:
        await port.stopListening()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_compaction(store: Etcd3Store) -> None:
    p = unique_prefix()
    a = await store.create(p + b"k", b"1")
    b = await store.update(p + b"k", b"2", a.mod_revision)
    await store.compact(b.mod_revision)
    await store.compact(a.mod_revision)  # already compacted: no-op
    with pytest.raises(CompactedError) as compacted:
        await store.get(p + b"k", revision=a.mod_revision)
    assert compacted.value.revision >= b.mod_revision
    with pytest.raises(CompactedError):
        await store.range(p, revision=a.mod_revision)
    assert (await store.get(p + b"k", revision=b.mod_revision)).value == b"2"
    watch = store.watch(p, a.mod_revision, lambda e: None)
    with pytest.raises(CompactedError) as compacted:
        await watch.done
    assert compacted.value.revision == b.mod_revision
    # A "from now on" watch is not hurt by compaction.
    events: list[WatchEvent] = []
    w = store.watch(p, 0, events.append)
    c = await store.update(p + b"k", b"3", 0)
    await eventually(lambda: len(events) == 1)
    assert events[0].kv == c
    w.cancel()
    with pytest.raises(FutureRevisionError):
        await store.compact(c.mod_revision + 1000)


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_periodic_compaction(etcd: EtcdServer) -> None:
    s = Etcd3Store([etcd.client_url], reactor, compaction_interval=0.2)
    await s.start()
    try:
        p = unique_prefix()
        a = await s.create(p + b"k", b"1")
        await s.update(p + b"k", b"2", a.mod_revision)
        compacted: list[bool] = []

        async def probe() -> None:
            try:
                await s.get(p + b"k", revision=a.mod_revision)
            except CompactedError:
                compacted.append(True)

        deadline = time.monotonic() + 10
        while not compacted and time.monotonic() < deadline:
            await probe()
            await sleep(0.1)
        assert compacted
        raw = await s._gateway.call("/v3/kv/range", {"key": b64(COMPACT_REV_KEY)})
        assert int(raw["kvs"][0]["version"]) >= 2
    finally:
        await s.stop()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_with_an_owner_the_compactor_is_declared_and_not_run(etcd: EtcdServer) -> None:
    """In a server the compactor is a child service: the store declares one round of
    kube-apiserver's compactor and schedules nothing itself; 0 disables it."""
    assert Etcd3Store([etcd.client_url], reactor, compaction_interval=0).maintenance() == ()
    assert Etcd3Store([etcd.client_url], reactor).maintenance() == ()  # runs it itself
    clock = Clock()
    s = Etcd3Store([etcd.client_url], clock, compaction_interval=60, run_maintenance=False)
    (task,) = s.maintenance()
    assert (task.name, task.interval, task.now) == ("compaction", 60, False)
    s2 = Etcd3Store([etcd.client_url], reactor, run_maintenance=False)
    await s2.start()
    try:
        p = unique_prefix()
        a = await s2.create(p + b"k", b"1")
        (compact,) = s2.maintenance()
        await compact.run()  # the first round only notes the revision: nothing compacted
        await s2.get(p + b"k", revision=a.mod_revision)
        await s2.update(p + b"k", b"2", a.mod_revision)
        await compact.run()  # compacts to the revision seen one round ago
        with pytest.raises(CompactedError):
            await s2.get(p + b"k", revision=a.mod_revision - 1)
    finally:
        await s2.stop()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_watch_resumes_after_etcd_restart(own_etcd: EtcdServer) -> None:
    s = Etcd3Store([own_etcd.client_url], reactor, request_timeout=3.0)
    await s.start()
    try:
        p = unique_prefix()
        events: list[WatchEvent] = []
        start = await s.current_revision()
        watch = s.watch(p, start + 1, events.append)
        written: list[KeyValue] = []
        for i in range(5):
            written.append(await s.create(p + b"before-%d" % i, b"v"))
        await eventually(lambda: len(events) == 5)

        own_etcd.stop()
        await sleep(0.2)  # the stream breaks; the watch starts retrying
        with pytest.raises(UnavailableError):
            await s.create(p + b"while-down", b"v")
        own_etcd.start()  # same ports, same data directory

        async def write(key: bytes) -> KeyValue:
            for _ in range(50):
                try:
                    return await s.create(key, b"v")
                except UnavailableError:  # a pooled connection from before the restart
                    await sleep(0.1)
            raise AssertionError("etcd did not come back")

        for i in range(5):
            written.append(await write(p + b"after-%d" % i))
        await eventually(lambda: len(events) == 10, timeout=15)
        assert [e.kv for e in events] == written
        revisions = [e.kv.mod_revision for e in events]
        assert revisions == sorted(set(revisions))
        assert not watch.done.called
        watch.cancel()
    finally:
        await s.stop()


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_frozen_etcd_times_out_and_recovers(own_etcd: EtcdServer) -> None:
    s = Etcd3Store([own_etcd.client_url], reactor, request_timeout=1.0)
    await s.start()
    p = unique_prefix()
    try:
        await s.check_health(1.0)
        own_etcd.pause()
        try:
            started = time.monotonic()
            with pytest.raises(StorageTimeoutError):
                await s.check_health(0.5)
            assert time.monotonic() - started >= 0.4  # waited for the timeout, did not fail early
            with pytest.raises(StorageTimeoutError):
                await s.check_ready(0.5)
            with pytest.raises(StorageTimeoutError):  # request_timeout, not a hang
                await s.create(p + b"k", b"v")
            with pytest.raises(StorageTimeoutError):
                await s.get(p + b"k")
        finally:
            own_etcd.resume()
        await s.check_health(2.0)
        kv = await s.create(p + b"k2", b"v")
        assert (await s.get(p + b"k2")) == kv
    finally:
        await s.stop()


# -- TLS ----------------------------------------------------------------------------------------


def make_pki(directory: Path) -> dict[str, str]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files."""
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def write(filename: str, data: bytes) -> str:
        path = directory / filename
        path.write_bytes(data)
        return str(path)

    def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name("test-etcd-ca"))
        .issuer_name(name("test-etcd-ca"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )

    def leaf(cn: str, server: bool) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
        key = ec.generate_private_key(ec.SECP256R1())
        # etcd's own gateway dials etcd with the server certificate: it needs clientAuth too.
        usage = [ExtendedKeyUsageOID.CLIENT_AUTH]
        if server:
            usage.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn))
            .issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        return builder.sign(ca_key, hashes.SHA256()), key

    server_cert, server_key = leaf("etcd-server", server=True)
    client_cert, client_key = leaf("apiserver-etcd-client", server=False)
    pem = serialization.Encoding.PEM
    return {
        "ca": write("ca.crt", ca.public_bytes(pem)),
        "server_cert": write("server.crt", server_cert.public_bytes(pem)),
        "server_key": write("server.key", key_pem(server_key)),
        "client_cert": write("client.crt", client_cert.public_bytes(pem)),
        "client_key": write("client.key", key_pem(client_key)),
    }


@needs_etcd
@pytest_twisted.ensureDeferred
async def test_tls_with_client_certificate(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    server = EtcdServer(
        str(tmp_path / "etcd"),
        cert_file=pki["server_cert"],
        key_file=pki["server_key"],
        trusted_ca_file=pki["ca"],
    )
    server.start()
    try:
        assert server.client_url.startswith("https://")
        s = Etcd3Store(
            [server.client_url],
            reactor,
            ca_file=pki["ca"],
            cert_file=pki["client_cert"],
            key_file=pki["client_key"],
        )
        await s.start()
        try:
            p = unique_prefix()
            events: list[WatchEvent] = []
            w = s.watch(p, (await s.current_revision()) + 1, events.append)
            kv = await s.create(p + b"k", b"v", ttl=3600)
            assert (await s.get(p + b"k")) == kv
            await eventually(lambda: len(events) == 1)
            w.cancel()
            await s.check_health(2.0)
        finally:
            await s.stop()

        # Without a client certificate etcd refuses the handshake.
        anonymous = Etcd3Store([server.client_url], reactor, ca_file=pki["ca"], request_timeout=3.0)
        with pytest.raises(UnavailableError):
            await anonymous.start()
        await anonymous.stop()
        # A server certificate from another CA is not trusted.
        (tmp_path / "other").mkdir()
        other = make_pki(tmp_path / "other")
        untrusting = Etcd3Store(
            [server.client_url],
            reactor,
            ca_file=other["ca"],
            cert_file=pki["client_cert"],
            key_file=pki["client_key"],
            request_timeout=3.0,
        )
        with pytest.raises(UnavailableError):
            await untrusting.start()
        await untrusting.stop()
    finally:
        server.stop()


# --- failover without a real cluster (issue 17): a Clock and scripted answers -------------


class _Answer:
    def __init__(self, body: dict[str, Any]) -> None:
        self.code = 200
        self.body = json.dumps(body).encode()


class _ScriptedGateway(Gateway):
    """A gateway whose POSTs are answered by ``script(index, path)``."""

    script: Any
    posts: list[tuple[int, bytes]]

    def _post(self, index: int, path: bytes, body: bytes) -> Any:
        self.posts.append((index, path))
        return self.script(index, path)


def _scripted_gateway(
    monkeypatch: pytest.MonkeyPatch, script: Any
) -> tuple[Gateway, Clock, list[tuple[int, bytes]]]:
    clock = Clock()
    gateway = _ScriptedGateway(["http://a:1", "http://b:2"], clock, 5.0)
    gateway.script, gateway.posts = script, []
    monkeypatch.setattr(gateway_module.treq, "content", lambda response: succeed(response.body))
    return gateway, clock, gateway.posts


def test_lost_member_waits_for_a_new_leader_then_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    state = {"a_alive": True, "b_leader": "1"}

    def script(index: int, path: bytes) -> Any:
        if index == 0:
            if not state["a_alive"]:
                return fail(ConnectionRefusedError())
            return succeed(_Answer({"header": {"member_id": "1", "revision": "5"}}))
        if path == b"/v3/maintenance/status":
            return succeed(_Answer({"header": {"member_id": "2"}, "leader": state["b_leader"]}))
        return succeed(_Answer({"header": {"member_id": "2", "revision": "6"}}))

    gateway, clock, posts = _scripted_gateway(monkeypatch, script)
    first = gateway.call("/v3/kv/range", {}, idempotent=True)
    assert first.called  # member 1 answered and is known
    state["a_alive"] = False
    write = gateway.call("/v3/kv/txn", {})
    # Member 1 refused at once; member 2 still follows the dead leader: the write waits.
    assert not write.called
    assert (1, b"/v3/kv/txn") not in posts
    clock.advance(gateway_module.LEADER_POLL_INTERVAL)
    assert not write.called
    state["b_leader"] = "2"  # elected
    clock.advance(gateway_module.LEADER_POLL_INTERVAL)
    assert write.called and posts[-1] == (1, b"/v3/kv/txn")
    # From now on straight to member 2, no more status questions.
    n = len(posts)
    assert gateway.call("/v3/kv/txn", {}).called
    assert posts[n:] == [(1, b"/v3/kv/txn")]


def test_write_cut_off_answers_in_plain_words(monkeypatch: pytest.MonkeyPatch) -> None:
    def script(index: int, path: bytes) -> Any:
        return fail(ResponseFailed([Failure(ConnectionLost())]))

    gateway, _, _ = _scripted_gateway(monkeypatch, script)
    failures: list[Failure] = []
    gateway.call("/v3/kv/txn", {}).addErrback(failures.append)
    assert len(failures) == 1
    assert failures[0].check(UnavailableError)
    assert failures[0].getErrorMessage() == gateway_module.CONNECTION_LOST


def test_no_member_reachable_in_plain_words(monkeypatch: pytest.MonkeyPatch) -> None:
    gateway, _, _ = _scripted_gateway(monkeypatch, lambda i, p: fail(ConnectionRefusedError()))
    failures: list[Failure] = []
    gateway.call("/v3/kv/range", {}, idempotent=True).addErrback(failures.append)
    message = failures[0].getErrorMessage()
    assert message == (
        'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while '
        "dialing: dial tcp a:1: connect: connection refused; dial tcp b:2: connect: connection "
        'refused"'
    )


def test_no_space_is_its_own_error() -> None:
    error = gateway_module.error_from_message("etcdserver: mvcc: database space exceeded", 8)
    assert isinstance(error, NoSpaceError)
