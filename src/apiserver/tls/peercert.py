"""The client certificate of a request, over HTTP/1.1 and HTTP/2.

Reference: Go's ``req.TLS.PeerCertificates`` (leaf first, then the intermediates the client
sent), which kube's x509 authenticator (``AS/pkg/authentication/request/x509/x509.go``)
verifies against ``--client-ca-file``.

How the TLS transport is found (Twisted 24-26, ``twisted/web/http.py`` and
``twisted/web/_http2.py``):

- **HTTP/1.1**: ``Request.__init__`` copies ``channel.transport`` into ``request.transport``;
  the channel is an ``HTTPChannel`` whose ``transport`` is the ``TLSMemoryBIOProtocol`` (or a
  ``policies.ProtocolWrapper`` around it, which forwards attribute access).
- **HTTP/2**: ``_GenericHTTPChannelProtocol`` swaps its ``HTTPChannel`` for an
  ``H2Connection`` when ALPN says ``h2``; the ``H2Connection`` is connected to the same TLS
  transport (``H2Connection.transport``). Each request's channel is an ``H2Stream``, whose
  class attribute ``transport`` is ``None`` (so ``request.transport`` is ``None`` too); the
  stream keeps its connection in ``H2Stream._conn`` (set in ``H2Stream.__init__`` and used by
  its own ``getPeer``/``getHost``/``isSecure``). So the path is
  ``request.channel._conn.transport``. It is a private attribute; the tests in
  ``tests/unit/tls/test_tls_end_to_end.py`` run a real h2 request so a Twisted change that breaks
  it fails loudly instead of silently dropping client certificates.

From the transport, ``getHandle()`` gives the ``OpenSSL.SSL.Connection``; its peer
certificate never changes after the handshake (renegotiation is disabled), so the converted
``cryptography`` chain is cached per TLS connection in a ``WeakKeyDictionary``: every h2
stream on a connection shares it. ``request.channel`` is deleted once a request finishes, so
call these while the request is being processed (authentication runs first in the chain).
"""

from __future__ import annotations

import weakref
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL
from twisted.internet.interfaces import ISSLTransport
from twisted.web.iweb import IRequest

_MAX_WRAPPERS = 8
_cache: weakref.WeakKeyDictionary[SSL.Connection, tuple[x509.Certificate, ...]] = (
    weakref.WeakKeyDictionary()
)


def _walk(transport: Any) -> Any:
    """The first TLS transport found by following ``.transport`` links, or ``None``."""
    for _ in range(_MAX_WRAPPERS):
        if transport is None:
            return None
        if ISSLTransport.providedBy(transport):
            return transport
        transport = getattr(transport, "transport", None)
    return None


def _tls_transport(request: IRequest | Any) -> Any:
    """The TLS transport a request arrived on (see the module docstring), or ``None``."""
    found = _walk(getattr(request, "transport", None))
    if found is not None:
        return found
    channel = getattr(request, "channel", None)
    if channel is None:
        return None
    # HTTP/1.1: HTTPChannel.transport. HTTP/2: H2Stream._conn (an H2Connection).transport.
    found = _walk(getattr(channel, "transport", None))
    if found is not None:
        return found
    connection = getattr(channel, "_conn", None)
    if connection is not None:
        return _walk(getattr(connection, "transport", None))
    return None


def tls_connection(request: IRequest | Any) -> SSL.Connection | None:
    """The ``OpenSSL.SSL.Connection`` a request arrived on, or ``None`` (plain TCP, finished)."""
    transport = _tls_transport(request)
    get_handle = getattr(transport, "getHandle", None)
    if get_handle is None:
        return None
    handle = get_handle()
    return handle if isinstance(handle, SSL.Connection) else None


def _chain_of(connection: SSL.Connection) -> tuple[x509.Certificate, ...]:
    cached = _cache.get(connection)
    if cached is not None:
        return cached
    leaf = connection.get_peer_certificate(as_cryptography=True)
    if leaf is None:
        chain: tuple[x509.Certificate, ...] = ()
    else:
        # On a server, OpenSSL's peer chain excludes the leaf; some builds include it.
        rest = connection.get_peer_cert_chain(as_cryptography=True) or []
        leaf_der = leaf.public_bytes(serialization.Encoding.DER)
        if rest and rest[0].public_bytes(serialization.Encoding.DER) == leaf_der:
            rest = rest[1:]
        chain = (leaf, *rest)
    _cache[connection] = chain
    return chain


def _request_chain(request: IRequest | Any) -> tuple[x509.Certificate, ...]:
    transport = _tls_transport(request)
    if transport is None:
        return ()
    get_handle = getattr(transport, "getHandle", None)
    handle = get_handle() if get_handle is not None else None
    if isinstance(handle, SSL.Connection):
        return _chain_of(handle)
    # Another ISSLTransport (a test double, say): only its leaf is known.
    get_peer = getattr(transport, "getPeerCertificate", None)
    leaf = get_peer() if get_peer is not None else None
    if leaf is None:
        return ()
    if not isinstance(leaf, x509.Certificate):
        leaf = leaf.to_cryptography()
    return (leaf,)


def peer_chain(request: IRequest | Any) -> list[x509.Certificate]:
    """The client's certificates, leaf first (Go's ``PeerCertificates``); ``[]`` if none."""
    return list(_request_chain(request))


def peer_certificate(request: IRequest | Any) -> x509.Certificate | None:
    """The client's leaf certificate, or ``None`` when it sent none (or no TLS)."""
    chain = _request_chain(request)
    return chain[0] if chain else None
