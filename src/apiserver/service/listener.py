"""The TLS listener on ``--bind-address``:``--secure-port``.

Why our own Port subclass: ``--permit-port-sharing`` needs ``SO_REUSEPORT`` set before
``bind()``, which ``reactor.listenSSL`` offers no hook for. ``--permit-address-sharing`` is
``SO_REUSEADDR``; Twisted sets that on every POSIX listening socket already, so it is always
on here (a superset of the reference, which only sets it on request).

A blank, ``0.0.0.0`` or ``::`` bind address means every interface and both address families,
as in kube-apiserver: we listen on ``::`` (dual stack) and fall back to ``0.0.0.0`` where the
host has no IPv6.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from twisted.application.service import Service
from twisted.internet import tcp
from twisted.internet.defer import CancelledError, Deferred, maybeDeferred, succeed
from twisted.internet.error import CannotListenError, ConnectionDone
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory, TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from twisted.web.server import Site

from apiserver.http.ratelimit import ReadRateLimitedFactory
from apiserver.service.eagertcp import EagerServer
from apiserver.tls.lean import lean_tls_protocol

log = Logger()


class SharedPort(tcp.Port):
    """A TCP port that may set ``SO_REUSEPORT``, whose connections send eagerly
    (:mod:`apiserver.service.eagertcp`)."""

    transport = EagerServer

    def __init__(self, *args: Any, reuse_port: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reuse_port = reuse_port

    def createInternetSocket(self) -> socket.socket:
        sock = super().createInternetSocket()
        if self._reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        return sock


connection_done = Failure(ConnectionDone())


def _handshake_counting(
    base: type[TLSMemoryBIOProtocol], count: Callable[[], None]
) -> type[TLSMemoryBIOProtocol]:
    """The TLS protocol class that calls ``count`` for a connection lost before its
    handshake completed: a failed handshake, or a client that left first (Go's server logs
    ``http: TLS handshake error from ...: EOF`` then, and kube-apiserver counts that line in
    ``apiserver_tls_handshake_errors_total``, k8s.io/apiserver pkg/server/secure_serving.go)."""

    class HandshakeCounting(base):  # type: ignore[valid-type,misc]
        def connectionLost(self, reason: Failure = connection_done) -> None:
            if not self._handshakeDone:
                count()
            super().connectionLost(reason)

    return HandshakeCounting


def listen_interfaces(bind_address: str) -> list[str]:
    """Interfaces to try, in order, for a ``--bind-address`` value."""
    if bind_address in ("", "0.0.0.0", "::"):
        return ["::", "0.0.0.0"] if socket.has_ipv6 else ["0.0.0.0"]
    return [bind_address]


class ListenerService(Service):
    """Listens when started; ``stop_listening`` closes the port but keeps connections.

    ``listen_after`` (a worker of ``--workers``): listen only once the Deferred it returns
    fires, and not in ``privilegedStartService``. Why: with ``SO_REUSEPORT`` the kernel
    hands new connections to every listening socket of the port, so a worker that listened
    while its store was still opening (a first start, or a restart after a crash) took
    connections it could only answer with errors, while its siblings could serve them. The
    server passes its storage readiness, bounded by ``--storage-initialization-timeout``,
    after which it listens anyway (docs/architecture.md, "Worker processes"). If listening
    then fails, ``on_listen_failed`` hears why (the process cannot serve: it exits).
    """

    name = "listener"

    def __init__(
        self,
        site: Site,
        context: Callable[[], Any],
        port: int,
        bind_address: str,
        *,
        reactor: Any,
        reuse_port: bool = False,
        backlog: int = 1024,
        max_bytes_per_second: int = 0,
        on_handshake_error: Callable[[], None] | None = None,
        listen_after: Callable[[], Deferred[Any]] | None = None,
        on_listen_failed: Callable[[Failure], None] | None = None,
    ) -> None:
        self.site = site
        self.listen_after = listen_after
        self.on_listen_failed = on_listen_failed
        #: The wait of ``listen_after`` while it has not fired.
        self._waiting: Deferred[Any] | None = None
        #: Called for each connection that ends before its TLS handshake completed.
        self.on_handshake_error = on_handshake_error
        #: ``--max-connection-bytes-per-sec``: each connection's read rate (0: unlimited).
        self.max_bytes_per_second = max_bytes_per_second
        #: Returns the TLS context factory; called when listening, after the serving
        #: certificates were made (:class:`apiserver.service.serving.ServingCertService`).
        self.context = context
        self.port_number = port
        self.bind_address = bind_address
        self.reuse_port = reuse_port
        self.backlog = backlog
        self.reactor = reactor
        self.port: tcp.Port | None = None

    def privilegedStartService(self) -> None:
        super().privilegedStartService()
        if self.listen_after is None:
            self._listen()

    def startService(self) -> None:
        super().startService()
        if self.port is not None:
            return
        if self.listen_after is None:
            self._listen()
            return
        waiting = self._waiting = self.listen_after()
        waiting.addCallback(self._listen_when_ready)
        waiting.addErrback(self._listen_failed)

    def _listen_when_ready(self, _: object) -> None:
        self._waiting = None
        if self.running and self.port is None:
            self._listen()

    def _listen_failed(self, failure: Failure) -> None:
        self._waiting = None
        if failure.check(CancelledError):
            return
        if self.on_listen_failed is not None:
            self.on_listen_failed(failure)
        else:
            log.failure("cannot listen", failure)

    def _listen(self) -> None:
        factory: Any = TLSMemoryBIOFactory(self.context(), False, self.site)
        # Twisted's TLS protocol with direct OpenSSL calls once established (apiserver.tls.lean).
        factory.protocol = lean_tls_protocol(factory.protocol)
        if self.on_handshake_error is not None:
            # A subclass of the factory's own class (BufferingTLSTransport, whose write
            # aggregation the HTTP layers rely on).
            factory.protocol = _handshake_counting(factory.protocol, self.on_handshake_error)
        if self.max_bytes_per_second > 0:
            factory = ReadRateLimitedFactory(factory, self.max_bytes_per_second, self.reactor)
        last_error: Exception | None = None
        for interface in listen_interfaces(self.bind_address):
            port = SharedPort(
                self.port_number,
                factory,
                self.backlog,
                interface,
                self.reactor,
                reuse_port=self.reuse_port,
            )
            try:
                port.startListening()
            except CannotListenError as error:
                last_error = error
                continue
            self.port = port
            log.info(
                "serving securely on {addr}:{port}",
                addr=interface or "0.0.0.0",
                port=port.getHost().port,
            )
            return
        assert last_error is not None
        raise last_error

    def bound_port(self) -> int:
        """The port actually bound (useful with ``--secure-port`` of a free port)."""
        assert self.port is not None
        return int(self.port.getHost().port)

    def stop_listening(self) -> Deferred[Any]:
        """Close the listening socket; existing connections go on (a listener still
        waiting for ``listen_after`` stops waiting)."""
        waiting, self._waiting = self._waiting, None
        if waiting is not None:
            waiting.cancel()
        port, self.port = self.port, None
        if port is None:
            return succeed(None)
        return maybeDeferred(port.stopListening)

    def stopService(self) -> Deferred[Any]:
        super().stopService()
        return self.stop_listening()
