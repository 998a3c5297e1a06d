"""--max-connection-bytes-per-sec (apiserver.http.ratelimit) on a fake clock."""

from __future__ import annotations

import pytest
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from apiserver.http.ratelimit import ReadRateLimitedFactory, ReadRateLimitedProtocol


class Sink(Protocol):
    def __init__(self) -> None:
        self.received = b""

    def dataReceived(self, data: bytes) -> None:
        self.received += data


def connect(rate: int) -> tuple[ReadRateLimitedProtocol, StringTransport, Clock, Sink]:
    clock = Clock()
    sink = Sink()
    factory = ReadRateLimitedFactory(Factory.forProtocol(lambda: sink), rate, clock)
    protocol = factory.buildProtocol(None)
    assert isinstance(protocol, ReadRateLimitedProtocol)
    transport = StringTransport()
    protocol.makeConnection(transport)
    return protocol, transport, clock, sink


def run(clock: Clock, seconds: float, step: float = 0.01) -> None:
    """Let ``seconds`` pass a little at a time, as a running reactor would."""
    for _ in range(round(seconds / step)):
        clock.advance(step)


def test_reads_within_the_budget_are_not_paused() -> None:
    protocol, transport, clock, sink = connect(1000)
    protocol.dataReceived(b"x" * 600)
    protocol.dataReceived(b"x" * 400)
    assert transport.producerState == "producing"
    clock.advance(1)
    protocol.dataReceived(b"x" * 1000)
    assert transport.producerState == "producing"
    assert len(sink.received) == 2000
    assert protocol.throttled == 0


def test_bytes_beyond_the_budget_are_held_with_reading_paused() -> None:
    protocol, transport, clock, sink = connect(1000)
    protocol.dataReceived(b"a" * 3000)  # one second's worth goes on at once
    assert sink.received == b"a" * 1000
    assert transport.producerState == "paused"
    assert protocol.throttled == 1
    clock.advance(0.05)
    assert len(sink.received) == 1000  # less than a tenth of a second's worth refilled
    clock.advance(0.05)
    assert len(sink.received) == 1100
    run(clock, 1.8)  # 1.9 s in all
    assert len(sink.received) < 3000
    assert transport.producerState == "paused"
    run(clock, 0.11)
    assert sink.received == b"a" * 3000  # in order, whole, after two seconds
    assert transport.producerState == "producing"
    assert clock.getDelayedCalls() == []


def test_order_is_kept_across_reads() -> None:
    protocol, _, clock, sink = connect(10)
    protocol.dataReceived(b"0123456789ab")
    protocol.dataReceived(b"cdef")
    assert sink.received == b"0123456789"
    clock.advance(10)
    assert sink.received == b"0123456789abcdef"


def test_a_pause_from_above_is_kept_when_the_rate_allows_again() -> None:
    protocol, transport, clock, sink = connect(100)
    protocol.dataReceived(b"x" * 200)
    protocol.pauseProducing()  # TLS or HTTP: cannot take more for now
    clock.advance(1)
    assert len(sink.received) == 200
    assert transport.producerState == "paused"  # the layer above still wants it paused
    protocol.resumeProducing()
    assert transport.producerState == "producing"
    # And the layer above cannot resume reading while the rate holds it.
    protocol.dataReceived(b"x" * 300)  # the budget was back at 0: 3 s to wait
    protocol.pauseProducing()
    protocol.resumeProducing()
    assert transport.producerState == "paused"
    run(clock, 2.8)
    assert transport.producerState == "paused"
    run(clock, 0.21)
    assert transport.producerState == "producing"
    assert len(sink.received) == 500


def test_connection_lost_cancels_the_timer() -> None:
    protocol, _, clock, _ = connect(10)
    protocol.dataReceived(b"x" * 100)
    assert clock.getDelayedCalls()
    protocol.connectionLost(None)  # type: ignore[arg-type]
    assert clock.getDelayedCalls() == []


def test_rate_must_be_positive() -> None:
    with pytest.raises(ValueError):
        ReadRateLimitedFactory(Factory(), 0, Clock())
