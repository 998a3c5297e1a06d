"""``--max-connection-bytes-per-sec``: each connection's read rate, limited.

kube-apiserver applies the flag to the connections it proxies for long-running upgraded
requests (exec, attach, port-forward: ``MaxBytesPerSec`` of k8s.io/apimachinery
``pkg/util/proxy/upgradeaware.go``, a ``flowrate`` reader). This server proxies nothing, so the
flag limits what it reads from each client connection, the one place where a client can push
bytes at it faster than it wants them.

:class:`ReadRateLimitedFactory` wraps the listener's factory (under TLS, so raw bytes on the
wire are counted). Each connection has a budget of one second's worth of bytes that refills
continuously; when a read overdraws it, reading that connection's transport is paused until
the budget is back at zero (``transport.pauseProducing``, resumed by a timer on the injected
reactor), so a client is held to the rate on average. Pauses asked by the protocol above (TLS
and HTTP pause reading while they cannot write) are kept apart: reading resumes only when
neither wants it paused. With the flag at 0 (the default) nothing is wrapped.
"""

from __future__ import annotations

from typing import Any, cast

from twisted.internet.interfaces import IDelayedCall, IPushProducer, IReactorTime
from twisted.internet.protocol import connectionDone
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory
from twisted.python.failure import Failure


class ReadRateLimitedProtocol(ProtocolWrapper):
    """One connection, read at most ``factory.bytes_per_second`` on average."""

    factory: ReadRateLimitedFactory

    def __init__(self, factory: Any, wrappedProtocol: Any) -> None:
        super().__init__(factory, wrappedProtocol)
        self._rate = float(factory.bytes_per_second)
        self._clock = factory.clock
        self._budget = self._rate
        self._checked = factory.clock.seconds()
        self._resume_call: IDelayedCall | None = None
        self._paused_above = False
        #: How many times reading was paused for the rate (tests and debugging).
        self.throttled = 0

    def dataReceived(self, data: bytes) -> None:
        now = self._clock.seconds()
        rate = self._rate
        self._budget = min(rate, self._budget + (now - self._checked) * rate) - len(data)
        self._checked = now
        if self._budget < 0 and self._resume_call is None:
            self.throttled += 1
            self._reading().pauseProducing()
            self._resume_call = self._clock.callLater(-self._budget / rate, self._resume)
        super().dataReceived(data)

    def _reading(self) -> IPushProducer:
        """The transport, as the producer of what we read."""
        return cast(IPushProducer, self.transport)

    def _resume(self) -> None:
        self._resume_call = None
        if self._paused_above or self.transport is None:
            return
        self._reading().resumeProducing()

    # The protocol above pausing and resuming reads (it sees us as its transport).
    def pauseProducing(self) -> None:
        self._paused_above = True
        self._reading().pauseProducing()

    def resumeProducing(self) -> None:
        self._paused_above = False
        if self._resume_call is None:
            self._reading().resumeProducing()

    def stopProducing(self) -> None:
        self._reading().stopProducing()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        call = self._resume_call
        if call is not None:
            self._resume_call = None
            if call.active():
                call.cancel()
        super().connectionLost(reason)


class ReadRateLimitedFactory(WrappingFactory):
    """Wraps ``wrapped_factory``'s connections in :class:`ReadRateLimitedProtocol`."""

    protocol = ReadRateLimitedProtocol

    def __init__(self, wrapped_factory: Any, bytes_per_second: int, clock: IReactorTime) -> None:
        if bytes_per_second <= 0:
            raise ValueError("bytes_per_second must be positive")
        super().__init__(wrapped_factory)
        self.bytes_per_second = bytes_per_second
        self.clock = clock
