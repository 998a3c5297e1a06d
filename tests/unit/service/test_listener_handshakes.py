"""The listener's TLS protocol counts failed handshakes and stays Twisted's buffering
transport (the HTTP layers' write aggregation and direct large writes depend on it)."""

from __future__ import annotations

from twisted.internet.error import ConnectionDone
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory
from twisted.python.failure import Failure

from apiserver.service.listener import _handshake_counting


def test_the_counting_protocol_is_a_buffering_tls_transport() -> None:
    counted: list[int] = []
    cls = _handshake_counting(TLSMemoryBIOFactory.protocol, lambda: counted.append(1))
    assert issubclass(cls, BufferingTLSTransport)
    protocol = cls.__new__(cls)
    protocol._handshakeDone = False
    # connectionLost of the base needs a full set-up; only the counting is checked here.
    try:
        protocol.connectionLost(Failure(ConnectionDone()))
    except Exception:
        pass
    assert counted == [1]
