"""Finding the client certificate from a request, with stand-ins for Twisted's objects.

The real HTTP/1.1 and HTTP/2 objects are covered by ``test_tls_end_to_end.py``; here the
shapes are reproduced to test the search order, wrappers and the per-connection cache.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from OpenSSL import SSL, crypto
from tls_helpers import (
    client_cert,
    client_context,
    common_name,
    handshake,
    issue,
    server_cert,
    write_cert,
    write_pair,
)
from twisted.internet.interfaces import ISSLTransport
from twisted.web.test.requesthelper import DummyRequest
from zope.interface import implementer

from apiserver.tls.context import build_server_context
from apiserver.tls.peercert import peer_certificate, peer_chain, tls_connection


@implementer(ISSLTransport)
class FakeTLSTransport:  # type: ignore[misc]  # a partial double: only getHandle
    def __init__(self, connection: SSL.Connection) -> None:
        self.connection = connection

    def getHandle(self) -> SSL.Connection:
        return self.connection


class Wrapper:
    """Like ``policies.ProtocolWrapper``: does not provide ISSLTransport itself."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport


class Obj:
    def __init__(self, **kwargs: Any) -> None:
        self.__dict__.update(kwargs)


@pytest.fixture
def server_connection(tmp_path: Path) -> SSL.Connection:
    """A server-side connection after a handshake with client ``alice`` (chain of two)."""
    root = issue("root", ca=True)
    intermediate = issue("intermediate", ca=True, issuer=root)
    alice = client_cert("alice", intermediate)
    cert, key = write_pair(tmp_path, "serving", server_cert("server"))
    factory = build_server_context(
        cert_file=cert, key_file=key, client_ca_files=[write_cert(tmp_path, "ca.crt", root)]
    )
    context = client_context(cert=alice)
    context.add_extra_chain_cert(intermediate.cert)
    return handshake(factory.serverConnectionForTLS(None), context).server


def test_http11_request_transport(server_connection: SSL.Connection) -> None:
    request = Obj(transport=FakeTLSTransport(server_connection), channel=None)
    cert = peer_certificate(request)
    assert cert is not None and common_name(cert) == "alice"
    assert [common_name(c) for c in peer_chain(request)] == ["alice", "intermediate"]
    assert tls_connection(request) is server_connection


def test_http11_channel_transport_through_a_wrapper(server_connection: SSL.Connection) -> None:
    channel = Obj(transport=Wrapper(Wrapper(FakeTLSTransport(server_connection))))
    request = Obj(transport=None, channel=channel)
    cert = peer_certificate(request)
    assert cert is not None and common_name(cert) == "alice"


def test_h2_stream_connection_transport(server_connection: SSL.Connection) -> None:
    h2_connection = Obj(transport=FakeTLSTransport(server_connection))
    stream = Obj(transport=None, _conn=h2_connection)  # H2Stream.transport is None
    request = Obj(transport=None, channel=stream)
    cert = peer_certificate(request)
    assert cert is not None and common_name(cert) == "alice"
    # Cached per TLS connection: every stream gets the very same objects.
    again = peer_certificate(Obj(transport=None, channel=Obj(_conn=h2_connection)))
    assert again is cert


def test_no_client_certificate(tmp_path: Path) -> None:
    cert, key = write_pair(tmp_path, "serving", server_cert("server"))
    factory = build_server_context(cert_file=cert, key_file=key, request_client_cert=True)
    connection = handshake(factory.serverConnectionForTLS(None), client_context()).server
    request = Obj(transport=FakeTLSTransport(connection))
    assert peer_certificate(request) is None
    assert peer_chain(request) == []


def test_plain_requests_have_no_certificate() -> None:
    assert peer_certificate(DummyRequest([b""])) is None
    assert peer_chain(DummyRequest([b""])) == []
    assert peer_certificate(Obj(transport=None, channel=None)) is None
    finished = Obj(transport=None)  # request.channel is deleted when a request finishes
    assert peer_certificate(finished) is None


def test_other_ssl_transports_give_their_leaf() -> None:
    alice = client_cert("alice", issue("ca", ca=True))

    @implementer(ISSLTransport)
    class Double:  # type: ignore[misc]  # a partial double: only getPeerCertificate
        def getPeerCertificate(self) -> crypto.X509:
            return crypto.X509.from_cryptography(alice.cert)

    request = Obj(transport=Double())
    assert peer_chain(request) == [alice.cert]
