"""The lean TLS transport (apiserver.tls.lean): the same bytes as Twisted's, both ways.

A server built as the listener builds it (our context, ``TLSMemoryBIOFactory``,
``lean_tls_protocol``) talks to a plain Twisted TLS client over an in-memory pump
(``twisted.test.iosim``), on a ``Clock``: handshake, echoes of every size around OpenSSL's
record and Twisted's read sizes, a TLS shutdown, and the fall-back to Twisted's class when
an internal is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tls_helpers import server_cert, write_pair
from twisted.internet.error import ConnectionDone
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.ssl import CertificateOptions
from twisted.internet.task import Clock
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory
from twisted.python.failure import Failure
from twisted.test.iosim import IOPump, connectedServerAndClient

from apiserver.tls import lean
from apiserver.tls.context import build_server_context

_DONE = Failure(ConnectionDone())


class Echo(Protocol):
    def dataReceived(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)


class EchoNow(Protocol):
    """Echoes each read twice: once through the small-write buffer, once around it."""

    def dataReceived(self, data: bytes) -> None:
        transport: Any = self.transport
        transport.write(b"[" + data)
        transport.writeNow(data + b"]")


class Collect(Protocol):
    def __init__(self) -> None:
        self.received = b""
        self.lost: Failure | None = None

    def dataReceived(self, data: bytes) -> None:
        self.received += data

    def connectionLost(self, reason: Failure = _DONE) -> None:
        self.lost = reason


def _connect(tmp_path: Path, protocol: type[Protocol] = Echo) -> tuple[Any, Any, Collect, IOPump]:
    cert, key = write_pair(tmp_path, "serving", server_cert("lean.example", ips=["127.0.0.1"]))
    clock = Clock()
    server_factory = TLSMemoryBIOFactory(
        build_server_context(cert_file=cert, key_file=key, request_client_cert=True),
        False,
        Factory.forProtocol(protocol),
        clock=clock,
    )
    server_factory.protocol = lean.lean_tls_protocol(server_factory.protocol)
    collect = Collect()
    client_factory = TLSMemoryBIOFactory(
        CertificateOptions(), True, Factory.forProtocol(lambda: collect), clock=clock
    )
    client, server, pump = connectedServerAndClient(
        lambda: server_factory.buildProtocol(None),
        lambda: client_factory.buildProtocol(None),
        clock=clock,
    )
    pump.flush()
    return client, server, collect, pump


def test_the_internals_it_needs_are_there() -> None:
    assert lean._missing(BufferingTLSTransport) == []
    assert lean.lean_tls_protocol(BufferingTLSTransport).__name__ == "LeanBufferingTLSTransport"


def test_a_missing_internal_leaves_twisted_s_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lean, "_missing", lambda base: ["Connection._ssl"])
    assert lean.lean_tls_protocol(BufferingTLSTransport) is BufferingTLSTransport


@pytest.mark.parametrize("size", [1, 300, 2**14 - 1, 2**14, 2**14 + 7, 2**15 + 1, 70_000])
def test_echo_of_every_size(tmp_path: Path, size: int) -> None:
    client, server, collect, pump = _connect(tmp_path)
    payload = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    for _ in range(3):
        client.write(payload)
        pump.flush()
    assert server._lean is not None  # established: the direct calls served these
    assert collect.received == payload * 3


def test_a_tls_shutdown_closes_both_sides(tmp_path: Path) -> None:
    client, server, collect, pump = _connect(tmp_path)
    client.write(b"hello")
    pump.flush()
    client.loseConnection()
    pump.flush()
    assert collect.received == b"hello"
    assert collect.lost is not None
    assert server._lostTLSConnection


def test_a_callback_problem_goes_through_pyopenssl(tmp_path: Path) -> None:
    """An exception a context callback left behind is raised by pyOpenSSL's own path,
    as before."""
    client, server, _, pump = _connect(tmp_path)
    problems = server._lean.problems[0]
    problems.append(RuntimeError("from a callback"))
    client.write(b"ping")
    with pytest.raises(RuntimeError, match="from a callback"):
        pump.flush()
    assert problems == []


def test_write_now_goes_after_what_the_buffer_holds(tmp_path: Path) -> None:
    client, server, collect, pump = _connect(tmp_path, EchoNow)
    for piece in (b"one", b"two"):
        client.write(piece)
        pump.flush()
    assert server._lean is not None
    assert collect.received == b"[oneone][twotwo]"
