"""A small Twisted-native client for etcd's ``/v3/`` JSON gateway (grpc-gateway over HTTP/1.1).

Why written here rather than taken from a library: the Python etcd3 clients speak gRPC and
block the calling thread; kube-apiserver's clientv3 is Go. The gateway is plain HTTP + JSON, so
Twisted's Agent on a persistent connection pool (bodies read with treq) is all we need, and it
stays on the reactor.

Wire conventions of the gateway (etcd 3.4, ``/v3/``; ``/v3alpha/`` is not served):

- keys and values are base64 strings;
- int64 fields (revisions, lease ids, counts) are JSON strings;
- proto3 omits fields that hold their zero value (0, false, empty), so a missing field is 0;
- an error is a JSON object ``{"error": ..., "code": <grpc code>, "message": ...}``.

This module owns the endpoints (failover in order, sticking to the one that last worked, like
clientv3's balancer does for a single connection), TLS, per-request timeouts and the mapping of
gateway errors onto the typed errors of :mod:`apiserver.storage.interface`.

Failover: a member that refuses a connection or drops one mid-request is lost at once (a killed
process closes its sockets; nothing waits for a timeout). The next request starts at the next
endpoint, but first asks that member (``/v3/maintenance/status``, answered locally) until it
names a leader other than the lost member: while the survivors still follow a dead leader (up
to their election timeout) a proposal sent to them is forwarded into the void and would wait
for the full request timeout. Reads and writes that were never sent are retried on the next
endpoint; a write that may have reached etcd is not (clientv3's retry interceptor,
go.etcd.io/etcd/client/v3/retry_interceptor.go, retries only what is safe the same way).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

import attrs
import orjson
import treq
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL
from twisted.internet import ssl
from twisted.internet.defer import CancelledError, Deferred, ensureDeferred, succeed
from twisted.internet.endpoints import HostnameEndpoint, wrapClientTLS
from twisted.internet.error import ConnectError, ConnectionClosed, DNSLookupError
from twisted.internet.error import ConnectionRefusedError as TxConnectionRefusedError
from twisted.internet.error import TimeoutError as TxTimeoutError
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.client import Agent, HTTPConnectionPool, ResponseFailed
from twisted.web.http_headers import Headers
from twisted.web.iweb import IAgentEndpointFactory, IBodyProducer, IPolicyForHTTPS
from zope.interface import implementer

from apiserver.storage.interface import (
    CompactedError,
    FutureRevisionError,
    NoSpaceError,
    StorageError,
    StorageTimeoutError,
    UnavailableError,
)
from apiserver.storage.interface import prefix_end as _prefix_end

#: Idle keep-alive connections kept per etcd endpoint. Twisted's default is 2, which would make
#: every request beyond the second open a fresh TCP connection under concurrent load; the
#: daemon runs well below a few hundred concurrent storage requests.
MAX_PERSISTENT_PER_HOST = 256
#: Seconds an idle pooled connection is kept (etcd itself does not close idle gateway
#: connections).
CACHED_CONNECTION_TIMEOUT = 120

log = Logger()

_JSON_HEADERS = Headers({b"Content-Type": [b"application/json"]})

# gRPC status codes that etcd returns through the gateway.
_GRPC_DEADLINE_EXCEEDED = 4
_GRPC_UNAVAILABLE = 14

_CONNECT_ERRORS: tuple[type[Exception], ...] = (ConnectError, DNSLookupError)
#: Seconds between two status questions while waiting for a cluster to elect a leader.
LEADER_POLL_INTERVAL = 0.05
#: What a client is told when its member dropped the connection before answering: the words
#: gRPC's transport gives clientv3 (and kube-apiserver passes on) in that case.
CONNECTION_LOST = "rpc error: code = Unavailable desc = error reading from server: EOF"


def dial_error(endpoint: str, error: BaseException) -> str:
    """gRPC's words for a member that could not be reached (``transport: Error while
    dialing``), rather than Twisted's exception text."""
    hostport = endpoint.split("://", 1)[-1]
    if isinstance(error, TxConnectionRefusedError):
        reason = "connect: connection refused"
    elif isinstance(error, DNSLookupError):
        reason = "no such host"
    elif isinstance(error, TxTimeoutError):
        reason = "i/o timeout"
    else:
        reason = "connect: " + (str(error).split(":", 1)[0].strip().lower() or "failed")
    return f"dial tcp {hostport}: {reason}"


def unreachable(errors: list[str]) -> str:
    return (
        'rpc error: code = Unavailable desc = connection error: desc = "transport: Error while '
        "dialing: " + "; ".join(errors) + '"'
    )


_STREAM_ERRORS: tuple[type[Exception], ...] = (*_CONNECT_ERRORS, ResponseFailed, ConnectionClosed)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def as_int(value: Any) -> int:
    """An int64 field of a gateway message (a string, or missing for 0)."""
    return int(value) if value else 0


def prefix_end(prefix: bytes) -> bytes:
    """The etcd ``range_end`` that selects every key starting with ``prefix``.

    :func:`apiserver.storage.interface.prefix_end` in the gateway's spelling: a prefix of
    only 0xff bytes (or empty) gives ``\\0``, meaning "to the end".
    """
    return _prefix_end(prefix) or b"\x00"


class LeaseNotFoundError(StorageError):
    """etcd does not know the lease a put referred to (it expired or was revoked)."""


_COMPACTED = "required revision has been compacted"
_FUTURE = "required revision is a future revision"
_LEASE_NOT_FOUND = "requested lease not found"
#: etcd's quota alarm (``ErrGRPCNoSpace``): passed on as it is, as kube-apiserver does.
_NO_SPACE = "database space exceeded"
_TIMEOUT_MESSAGES = ("request timed out", "context deadline exceeded")
_UNAVAILABLE_MESSAGES = ("no leader", "leader changed", "not capable", "too many requests")


def _rejected_unproposed(message: str) -> bool:
    """Whether an Unavailable error means etcd did not propose the request at all."""
    return any(m in message for m in ("no leader", "too many requests", "not capable"))


def error_from_message(message: str, code: int = 0) -> StorageError:
    """Map an etcd error (message text and gRPC code) onto a typed storage error."""
    if _COMPACTED in message:
        return CompactedError(message)
    if _FUTURE in message:
        return FutureRevisionError(message)
    if _LEASE_NOT_FOUND in message:
        return LeaseNotFoundError(message)
    if _NO_SPACE in message:
        return NoSpaceError(message)
    if code == _GRPC_DEADLINE_EXCEEDED or any(m in message for m in _TIMEOUT_MESSAGES):
        return StorageTimeoutError(message)
    if code == _GRPC_UNAVAILABLE or any(m in message for m in _UNAVAILABLE_MESSAGES):
        return UnavailableError(message)
    return StorageError(message or f"etcd error code {code}")


@implementer(IBodyProducer)
class _BytesProducer:
    """Writes a byte string at once.

    treq's default adapter wraps bytes in a FileBodyProducer, which goes through a cooperator
    and costs a reactor turn per request; a request body here is always small and in memory.
    """

    def __init__(self, body: bytes) -> None:
        self._body = body
        self.length = len(body)

    def startProducing(self, consumer: Any) -> Deferred[None]:
        consumer.write(self._body)
        return succeed(None)

    def pauseProducing(self) -> None:
        pass

    def resumeProducing(self) -> None:
        pass

    def stopProducing(self) -> None:
        pass


def _load_pem_certificates(path: str) -> list[ssl.Certificate]:
    with open(path, "rb") as f:
        data = f.read()
    blocks = re.findall(
        rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", data, flags=re.DOTALL
    )
    if not blocks:
        raise ValueError(f"no PEM certificate in {path}")
    return [ssl.Certificate.loadPEM(block) for block in blocks]


@implementer(IPolicyForHTTPS)
class EtcdTLSPolicy:
    """TLS towards etcd: verify the server against ``ca_file`` (the system trust store when
    absent), and present ``cert_file``/``key_file`` as client certificate when given — the
    same three files kube-apiserver takes as ``--etcd-cafile``, ``--etcd-certfile`` and
    ``--etcd-keyfile``.
    """

    def __init__(
        self,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
    ) -> None:
        if (cert_file is None) != (key_file is None):
            raise ValueError("cert_file and key_file must be given together")
        self._trust_root: Any
        if ca_file is not None:
            self._trust_root = ssl.trustRootFromCertificates(_load_pem_certificates(ca_file))
        else:
            self._trust_root = ssl.platformTrust()
        # The client certificate goes in as cryptography objects (pyOpenSSL deprecates its
        # own X509/PKey types, which PrivateCertificate would pass).
        self._client_options: dict[str, Any] = {}
        if cert_file is not None and key_file is not None:
            with open(cert_file, "rb") as f:
                certificate = x509.load_pem_x509_certificate(f.read())
            with open(key_file, "rb") as f:
                private_key = serialization.load_pem_private_key(f.read(), password=None)
            self._client_options = {"certificate": certificate, "privateKey": private_key}
        self._cache: dict[bytes, Any] = {}

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        creator = self._cache.get(hostname)
        if creator is None:
            creator = ssl.optionsForClientTLS(
                hostname.decode("ascii"),
                trustRoot=self._trust_root,
                extraCertificateOptions={
                    "raiseMinimumTo": ssl.TLSVersion.TLSv1_2,
                    **self._client_options,
                },
            )
            self._cache[hostname] = creator
        return creator


@implementer(IAgentEndpointFactory)
class _CachedEndpoints:
    """One client endpoint per etcd URL, made once.

    Agent's default endpoint factory builds a new HostnameEndpoint (IDNA-encoding the host)
    for every request, which cost about a quarter of the CPU time of a create; the pool only
    needs an endpoint when it opens a new connection.
    """

    def __init__(self, reactor: Any, tls_policy: Any) -> None:
        self._reactor = reactor
        self._tls_policy = tls_policy
        self._endpoints: dict[tuple[bytes, bytes, int], Any] = {}

    def endpointForURI(self, uri: Any) -> Any:
        key = (uri.scheme, uri.host, uri.port)
        endpoint: Any = self._endpoints.get(key)
        if endpoint is None:
            host = uri.host.decode("ascii")
            endpoint = HostnameEndpoint(self._reactor, host, uri.port)
            if uri.scheme == b"https":
                if self._tls_policy is None:
                    raise ValueError("https endpoint without TLS configuration")
                creator = self._tls_policy.creatorForNetloc(uri.host, uri.port)
                endpoint = wrapClientTLS(creator, endpoint)
            self._endpoints[key] = endpoint
        return endpoint


def normalize_endpoint(endpoint: str, tls: bool) -> str:
    """``http(s)://host:port`` without a trailing slash; a bare ``host:port`` gets a scheme."""
    endpoint = endpoint.strip().rstrip("/")
    if "://" not in endpoint:
        endpoint = ("https://" if tls else "http://") + endpoint
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError(f"unsupported etcd endpoint scheme: {endpoint!r}")
    return endpoint


@attrs.define
class Gateway:
    """JSON requests to the first etcd endpoint that answers.

    A request that cannot connect moves on to the next endpoint (and the next request starts
    there). A read whose connection broke before an answer is retried on the next endpoint
    too; a write is not, as it may have been applied (the caller sees UnavailableError).
    After a member is lost, requests wait (sharing one poll) until the next member names a
    live leader; see the module docstring. Every request, failover included, is bounded by a
    timeout on the injected clock.
    """

    endpoints: list[str]
    reactor: Any
    request_timeout: float
    tls_policy: Any = None  # an IPolicyForHTTPS
    on_revision: Callable[[int], None] | None = None
    _current: int = 0
    _pool: HTTPConnectionPool = attrs.field(init=False)
    _agent: Any = attrs.field(init=False)
    _urls: list[bytes] = attrs.field(init=False)
    #: Member id of each endpoint, learnt from the header of its first answer (0: unknown).
    _member_ids: list[int] = attrs.field(init=False)
    #: Set when a member was lost; cleared once a live member names a live leader.
    _failing_over: bool = attrs.field(init=False, default=False)
    _lost: set[int] = attrs.field(init=False, factory=set)
    _leader_polls: dict[int, Deferred[None]] = attrs.field(init=False, factory=dict)
    _leader_waiters: dict[int, list[Deferred[None]]] = attrs.field(init=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("no etcd endpoint given")
        self._urls = [e.encode("ascii") for e in self.endpoints]
        self._member_ids = [0] * len(self.endpoints)
        self._pool = HTTPConnectionPool(self.reactor, persistent=True)
        self._pool.maxPersistentPerHost = MAX_PERSISTENT_PER_HOST
        self._pool.cachedConnectionTimeout = CACHED_CONNECTION_TIMEOUT
        self._pool.retryAutomatically = False
        # Twisted's Agent straight away rather than treq.request(): treq's URL handling
        # (hyperlink, IDNA), cookie, redirect and decoder wrappers cost as much CPU as the
        # rest of a create together; bodies are read with treq.content().
        self._agent = Agent.usingEndpointFactory(
            self.reactor, _CachedEndpoints(self.reactor, self.tls_policy), pool=self._pool
        )

    def _post(self, index: int, path: bytes, body: bytes) -> Deferred[Any]:
        return self._agent.request(
            b"POST", self._urls[index] + path, _JSON_HEADERS, _BytesProducer(body)
        )

    @property
    def clock(self) -> Any:
        return self.reactor

    def close(self) -> Deferred[None]:
        for poll in list(self._leader_polls.values()):
            poll.cancel()
        return self._pool.closeCachedConnections()

    # -- failover ---------------------------------------------------------------------------

    def _lost_member(self, index: int) -> None:
        """Endpoint ``index`` refused or dropped a connection: skip it from now on and make
        the next requests wait for a leader the survivors agree on."""
        self._failing_over = True
        member = self._member_ids[index]
        if member:
            self._lost.add(member)
        if self._current == index:
            self._current = (index + 1) % len(self.endpoints)

    def _leader_known(self, index: int) -> Deferred[None]:
        """Fires once endpoint ``index`` names a leader that is not a lost member; errbacks
        when it cannot be reached. Concurrent requests share one poll; each gets its own
        Deferred, so cancelling one request (its timeout) leaves the others waiting."""
        mine: Deferred[None] = Deferred()
        waiters = self._leader_waiters.get(index)
        if waiters is not None:
            waiters.append(mine)
            return mine
        waiters = self._leader_waiters[index] = [mine]

        def finish(result: Any) -> None:
            self._leader_polls.pop(index, None)
            for waiter in self._leader_waiters.pop(index, ()):
                if waiter.called:
                    continue
                if isinstance(result, Failure):
                    waiter.errback(result)
                else:
                    waiter.callback(None)

        poll = ensureDeferred(self._poll_leader(index))
        self._leader_polls[index] = poll
        poll.addBoth(finish)
        return mine

    async def _poll_leader(self, index: int) -> None:
        deadline = self.clock.seconds() + self.request_timeout
        while True:
            response = await self._post(index, b"/v3/maintenance/status", b"{}")
            data = self._decode(response, await treq.content(response))
            header = data.get("header") or {}
            member = self._member_ids[index] = as_int(header.get("member_id"))
            self._lost.discard(member)  # it answered: it is back (a restarted member)
            leader = as_int(data.get("leader"))
            if leader and leader not in self._lost:
                self._failing_over = False
                self._lost.clear()
                return
            if self.clock.seconds() >= deadline:
                raise UnavailableError("etcdserver: no leader")
            await deferLater(self.clock, LEADER_POLL_INTERVAL)

    # -- unary requests ---------------------------------------------------------------------

    def call(
        self,
        path: str,
        payload: dict[str, Any],
        *,
        idempotent: bool = False,
        timeout: float | None = None,
    ) -> Deferred[dict[str, Any]]:
        """POST ``payload`` to ``path`` (``/v3/kv/range`` ...); fires with the decoded answer.

        Errbacks with a StorageError subclass: StorageTimeoutError when no answer came within
        ``timeout`` (default: the request timeout), UnavailableError when no endpoint could be
        reached, the mapped etcd error otherwise.
        """
        body = orjson.dumps(payload)
        d: Deferred[dict[str, Any]] = ensureDeferred(
            self._call(path.encode("ascii"), body, idempotent)
        )
        return _with_timeout(d, self.request_timeout if timeout is None else timeout, self.clock)

    async def _call(self, path: bytes, body: bytes, idempotent: bool) -> dict[str, Any]:
        n = len(self.endpoints)
        errors: list[str] = []
        start = self._current
        for i in range(n):
            index = (start + i) % n
            endpoint = self.endpoints[index]
            try:
                if self._failing_over:
                    await self._leader_known(index)
                response = await self._post(index, path, body)
                content = await treq.content(response)
            except _CONNECT_ERRORS as e:
                self._lost_member(index)
                errors.append(dial_error(endpoint, e))
                continue
            except (ResponseFailed, ConnectionClosed) as e:
                if _cancelled(e):
                    raise
                self._lost_member(index)
                if not idempotent:
                    raise UnavailableError(CONNECTION_LOST) from None
                errors.append(f"dial tcp {endpoint.split('://', 1)[-1]}: connection lost")
                continue
            try:
                data = self._decode(response, content)
            except UnavailableError as e:
                # This member cannot serve (no leader, overloaded): another one may. A write
                # is only sent on when etcd rejected it before proposing it.
                if i + 1 < n and (idempotent or _rejected_unproposed(str(e))):
                    errors.append(f"{endpoint}: {e}")
                    continue
                raise
            self._current = index
            if not self._member_ids[index]:
                self._member_ids[index] = as_int((data.get("header") or {}).get("member_id"))
            return data
        raise UnavailableError(unreachable(errors))

    def _decode(self, response: Any, content: bytes) -> dict[str, Any]:
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict):
            text = content[:200].decode("utf-8", "replace")
            if response.code >= 500:
                raise UnavailableError(f"etcd gateway answered {response.code}: {text}")
            raise StorageError(f"etcd gateway answered {response.code}: {text}")
        if "error" in data or response.code != 200:
            message = data.get("message") or data.get("error") or ""
            raise error_from_message(str(message), as_int(data.get("code")))
        header = data.get("header")
        if header and self.on_revision is not None:
            self.on_revision(as_int(header.get("revision")))
        return data

    # -- streams ----------------------------------------------------------------------------

    def open_stream(self, path: str, payload: dict[str, Any]) -> Deferred[Any]:
        """POST ``payload`` and fire with the (unbuffered) response once its headers arrive,
        trying the endpoints in order; bounded by the request timeout."""
        body = orjson.dumps(payload)
        d: Deferred[Any] = ensureDeferred(self._open_stream(path.encode("ascii"), body))
        return _with_timeout(d, self.request_timeout, self.clock)

    async def _open_stream(self, path: bytes, body: bytes) -> Any:
        n = len(self.endpoints)
        errors: list[str] = []
        start = self._current
        for i in range(n):
            index = (start + i) % n
            endpoint = self.endpoints[index]
            try:
                response = await self._post(index, path, body)
            except _STREAM_ERRORS as e:
                if _cancelled(e):
                    raise
                self._lost_member(index)
                errors.append(dial_error(endpoint, e))
                continue
            if response.code != 200:
                content = await treq.content(response)
                self._decode(response, content)  # raises the mapped error
                raise StorageError(f"etcd gateway answered {response.code}")
            self._current = index
            return response
        raise UnavailableError(unreachable(errors))


def _cancelled(e: BaseException) -> bool:
    reasons = getattr(e, "reasons", None) or []
    return any(isinstance(r, Failure) and r.check(CancelledError) for r in reasons)


def _with_timeout(d: Deferred[Any], timeout: float, clock: Any) -> Deferred[Any]:
    """Cancel ``d`` after ``timeout`` seconds and errback StorageTimeoutError instead.

    Cancelling the request aborts its connection, so a frozen etcd does not keep a pooled
    connection busy for ever.
    """

    def on_timeout(result: Any, seconds: float) -> Any:
        # Only called when the timeout fired: whatever the cancelled request failed with
        # (CancelledError, ResponseNeverReceived([CancelledError]), ...), it timed out.
        if isinstance(result, Failure):
            raise StorageTimeoutError(f"etcd did not answer within {seconds:g}s")
        return result

    def map_errors(failure: Failure) -> Failure:
        if failure.check(StorageError, CancelledError):
            return failure
        if failure.check(TxTimeoutError):
            return Failure(StorageTimeoutError(str(failure.value)))
        if failure.check(*_CONNECT_ERRORS):
            return Failure(
                UnavailableError(unreachable([dial_error("", failure.value or ConnectError())]))
            )
        if failure.check(ResponseFailed, ConnectionClosed):
            return Failure(UnavailableError(CONNECTION_LOST))
        if failure.check(SSL.Error):
            # gRPC's words; OpenSSL's error stack stays in the log.
            log.info("etcd TLS handshake failed: {e}", e=failure.value)
            return Failure(
                UnavailableError(
                    "rpc error: code = Unavailable desc = connection error: desc = "
                    '"transport: authentication handshake failed"'
                )
            )
        return failure

    d.addErrback(map_errors)
    if timeout > 0:
        d.addTimeout(timeout, clock, onTimeoutCancel=on_timeout)
    return d
