"""``--goaway-chance``: HTTP/2 GOAWAY with that probability per request
(k8s.io/apiserver/pkg/server/filters/goaway.go ``WithProbabilisticGoaway``).

kube-apiserver picks, for every HTTP/2 request (``r.Proto == "HTTP/2.0"``, whatever its verb,
path or user, long-running ones included), a random number and, below the chance, sets
``Connection: close`` on the response; Go's HTTP/2 server turns that header into a graceful
shutdown of the connection (golang.org/x/net/http2 ``startGracefulShutdown``): a GOAWAY with
``NO_ERROR`` and the last stream it accepted, the streams already open are served to the end,
and the connection is closed once none is left. The client opens a new connection for its
next request, which a load balancer may send to another server. The filter is installed only
when HTTP/2 is served and the chance is above 0 (k8s.io/apiserver/pkg/server/config.go).

Here :class:`ProbabilisticGoaway` makes the same draw in :meth:`apiserver.http.app.App.handle`
(only when the flag is set: otherwise there is no call at all) and :func:`go_away` does the
graceful shutdown on either HTTP/2 connection class, our fast one
(:class:`apiserver.http.h2.FastH2Connection`) or Twisted's (``StockH2Connection``): both keep
a cleanup Deferred per stream that fires once the stream's last frame went to the transport.
One difference: the GOAWAY leaves once the response of the request that drew it has been
sent whole, not with its headers. Strict clients built on the ``h2`` library (httpx) move
their connection to CLOSED on a GOAWAY and can read no frame after it, so sending it before
the body would break the very response it rides on; Go's client reads on either way.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable
from typing import Any

from hyperframe.frame import GoAwayFrame

from apiserver.http.request import HTTPRequest

#: Set on a connection once its GOAWAY is decided, so one connection sends one.
_GOING_AWAY = "_apiserverGoingAway"


class ProbabilisticGoaway:
    """Decides per HTTP/2 request, with ``chance`` (``probabilisticGoawayDecider``)."""

    __slots__ = ("chance", "next")

    def __init__(self, chance: float, next: Callable[[], float] | None = None) -> None:
        self.chance = chance
        self.next = next if next is not None else random.random

    def __call__(self, request: HTTPRequest) -> None:
        if getattr(request, "clientproto", None) != b"HTTP/2" or self.next() >= self.chance:
            return
        stream = request.channel
        connection = getattr(stream, "_conn", None)
        stream_id = getattr(stream, "streamID", None)
        if connection is None or stream_id is None:
            return
        if getattr(connection, _GOING_AWAY, False):
            return
        setattr(connection, _GOING_AWAY, True)
        done = connection._streamCleanupCallbacks.get(stream_id)
        if done is None:
            go_away(connection)
        else:
            done.addBoth(_after_stream, connection)


def _after_stream(result: object, connection: Any) -> object:
    go_away(connection)
    return result


def go_away(connection: Any) -> None:
    """Send GOAWAY (``NO_ERROR``, the highest stream the client opened) and close the
    connection once no stream is open, as Go's graceful shutdown does."""
    transport = connection.transport
    if transport is None or not connection._stillProducing:
        return
    setattr(connection, _GOING_AWAY, True)
    frame = GoAwayFrame(0)
    frame.last_stream_id = connection.conn.highest_inbound_stream_id
    frame.error_code = 0
    transport.write(frame.serialize())
    _close_when_idle(connection)


def _close_when_idle(connection: Any) -> None:
    open_streams = list(connection._streamCleanupCallbacks.values())
    if not open_streams:
        transport = connection.transport
        if transport is not None:
            # The HTTP channel is registered as the TLS transport's producer for the whole
            # connection, and TLS waits for its producer to go before it closes
            # (twisted.protocols.tls ``loseConnection``): unregister it first.
            with contextlib.suppress(RuntimeError):  # a transport without a producer
                transport.unregisterProducer()
            transport.loseConnection()
        return
    remaining = [len(open_streams)]

    def one_done(result: object) -> object:
        remaining[0] -= 1
        if remaining[0] == 0:
            _close_when_idle(connection)
        return result

    for done in open_streams:
        done.addBoth(one_done)
