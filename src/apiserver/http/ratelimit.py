"""``--max-connection-bytes-per-sec``: each connection's read rate, limited.

kube-apiserver applies the flag to the connections it proxies for long-running upgraded
requests (exec, attach, port-forward: ``MaxBytesPerSec`` of k8s.io/apimachinery
``pkg/util/proxy/upgradeaware.go``, a ``flowrate`` reader). This server proxies nothing, so the
flag limits what it reads from each client connection, the one place where a client can push
bytes at it faster than it wants them.

:class:`ReadRateLimitedFactory` wraps the listener's factory (under TLS, so raw bytes on the
wire are counted). Each connection has a budget of one second's worth of bytes that refills
continuously; bytes read beyond it are held back, and reading that connection's transport is
paused (``transport.pauseProducing``), until the budget has refilled for them (a timer on the
injected reactor hands them on, a tenth of a second's worth at least at a time), so what the
server takes in from a client keeps to the rate. Pauses asked by the protocol above (TLS
and HTTP pause reading while they cannot write) are kept apart: reading resumes only when
neither wants it paused. With the flag at 0 (the default) nothing is wrapped.
"""

from __future__ import annotations

from collections import deque
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
        #: Bytes handed on at least at once once held back (a tenth of a second's worth).
        self._step = max(1.0, self._rate / 10)
        self._clock = factory.clock
        self._budget = self._rate
        self._checked = factory.clock.seconds()
        #: Bytes read from the socket but not handed on yet (beyond the budget).
        self._held: deque[bytes] = deque()
        self._held_bytes = 0
        self._resume_call: IDelayedCall | None = None
        self._throttling = False
        self._paused_above = False
        #: How many times reading was paused for the rate (tests and debugging).
        self.throttled = 0

    def dataReceived(self, data: bytes) -> None:
        self._held.append(data)
        self._held_bytes += len(data)
        self._deliver()

    def _deliver(self) -> None:
        """Hand on what the budget allows; hold the rest, with reading paused, until it has
        refilled enough."""
        self._resume_call = None
        now = self._clock.seconds()
        # (The millionth of a byte absorbs float rounding of the clock's sums.)
        self._budget = min(self._rate, self._budget + (now - self._checked) * self._rate + 1e-6)
        self._checked = now
        held = self._held
        while held and self._budget >= 1:
            chunk = held.popleft()
            take = min(len(chunk), int(self._budget))
            if take < len(chunk):
                held.appendleft(chunk[take:])
                chunk = chunk[:take]
            self._held_bytes -= take
            self._budget -= take
            self.wrappedProtocol.dataReceived(chunk)
            if self.transport is None or self.disconnecting:
                return
        if held:
            if not self._throttling:
                self._throttling = True
                self.throttled += 1
                self._reading().pauseProducing()
            need = min(float(self._held_bytes), self._step)
            self._resume_call = self._clock.callLater(
                (need - self._budget) / self._rate, self._deliver
            )
        elif self._throttling:
            self._throttling = False
            if not self._paused_above:
                self._reading().resumeProducing()

    def _reading(self) -> IPushProducer:
        """The transport, as the producer of what we read."""
        return cast(IPushProducer, self.transport)

    # The protocol above pausing and resuming reads (it sees us as its transport).
    def pauseProducing(self) -> None:
        self._paused_above = True
        self._reading().pauseProducing()

    def resumeProducing(self) -> None:
        self._paused_above = False
        if not self._throttling:
            self._reading().resumeProducing()

    def stopProducing(self) -> None:
        self._reading().stopProducing()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        call = self._resume_call
        if call is not None:
            self._resume_call = None
            if call.active():
                call.cancel()
        self._held.clear()
        self._held_bytes = 0
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
