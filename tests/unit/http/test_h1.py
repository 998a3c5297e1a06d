"""apiserver.http.h1: our HTTP/1.x server protocol, on a memory transport and a fake clock.

Two kinds of tests: the protocol's own behaviour (parsing, pipelining, bodies, 100-continue,
bad requests, timeouts, connection loss, flow control, ALPN hand-over), and byte-for-byte
comparisons with twisted.web's ``HTTPChannel`` serving the same App, for what the
application and clients see of a response.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h2.config
import h2.connection
import h2.events
import pytest
from http_helpers import fake_buffering_tls, streaming
from twisted.internet._producer_helpers import _PullToPush
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.interfaces import IPushProducer
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.logger import capturedLogs
from twisted.python.failure import Failure
from twisted.web import _http2, http
from twisted.web.http_headers import Headers
from zope.interface import implementer

from apiserver.http import site as site_module
from apiserver.http.app import App, RequestInfo, Router, ServingPolicy
from apiserver.http.h1 import BAD_REQUEST, H1Channel
from apiserver.http.h1request import H1Request, RequestHeaders, ResponseHeaders
from apiserver.http.h2 import FastH2Connection, configure_http2
from apiserver.http.response import Response, text
from apiserver.http.site import ApiH1Request, ApiH2Request, ApiRequest, ApiSite
from apiserver.service.lifecycle import Lifecycle

Handler = Callable[[H1Request], None]


class RecordingRequest(H1Request):
    """Hands itself to ``channel.handler`` (set per test)."""

    def process(self) -> None:
        channel: Any = self.channel
        channel.seen.append(self)
        channel.handler(self)


def answer(body: bytes = b"ok", code: int = 200) -> Handler:
    def handle(request: H1Request) -> None:
        request.setResponseCode(code)
        request.setHeader(b"content-type", b"text/plain")
        request.setHeader(b"content-length", b"%d" % len(body))
        request.write(body)
        request.finish()

    return handle


def hold(pending: list[H1Request]) -> Handler:
    """Answer later: the test finishes the request."""
    return pending.append


class Conn:
    """One channel on a ``StringTransport`` with a ``MemoryReactorClock``."""

    def __init__(
        self,
        handler: Handler | None = None,
        timeout: float | None = 60,
        transport: StringTransport | None = None,
    ) -> None:
        self.clock = MemoryReactorClock()
        channel: Any = H1Channel()  # mypy would narrow an Any attribute to H1Channel
        self.channel = channel
        self.channel.requestFactory = RecordingRequest
        self.channel.handler = handler or answer()
        self.channel.seen = []
        self.channel.timeOut = timeout
        self.channel.callLater = self.clock.callLater
        self.channel.seconds = self.clock.seconds
        self.transport = transport or StringTransport(
            hostAddress=IPv4Address("TCP", "127.0.0.1", 6443),
            peerAddress=IPv4Address("TCP", "10.0.0.7", 40000),
        )
        self.channel.makeConnection(self.transport)

    @property
    def seen(self) -> list[H1Request]:
        return self.channel.seen

    def send(self, data: bytes) -> bytes:
        """Feed ``data``; return (and clear) what the server wrote."""
        self.channel.dataReceived(data)
        return self.take()

    def take(self) -> bytes:
        out = self.transport.value()
        self.transport.clear()
        return out

    @property
    def closing(self) -> bool:
        return bool(self.transport.disconnecting)

    def lose(self, reason: Exception | None = None) -> None:
        self.channel.connectionLost(Failure(reason or ConnectionDone()))


GET = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


# -- parsing and the request object -------------------------------------------------------


def test_keep_alive_get_and_exact_response() -> None:
    conn = Conn()
    assert conn.send(GET) == OK
    assert conn.send(GET) == OK
    assert not conn.closing


def test_request_attributes() -> None:
    seen: list[tuple[Any, bytes]] = []

    def record(request: H1Request) -> None:
        assert request.content is not None
        seen.append((request.channel, request.content.read()))
        answer()(request)

    conn = Conn(handler=record)
    conn.send(
        b"GET /p/a%20b?x=1&y=&x=2 HTTP/1.1\r\nHost: example:6443\r\n"
        b"X-Multi: one\r\nx-multi: two\r\nUser-Agent:  curl/8  \t\r\n\r\n"
    )
    request = conn.seen[0]
    assert request.method == b"GET"
    assert request.uri == b"/p/a%20b?x=1&y=&x=2"
    assert request.path == b"/p/a%20b"
    assert request.args == {b"x": [b"1", b"2"], b"y": [b""]}
    assert request.clientproto == b"HTTP/1.1"
    assert request.requestHeaders.getRawHeaders(b"x-multi") == [b"one", b"two"]
    assert request.getHeader(b"X-MULTI") == b"two"
    assert request.getHeader("user-agent") == "curl/8"  # twisted strips blanks
    assert isinstance(request.requestHeaders, Headers)
    assert next(iter(request.requestHeaders.getAllRawHeaders())) == (b"Host", [b"example:6443"])
    assert request.getClientAddress() == IPv4Address("TCP", "10.0.0.7", 40000)
    assert request.getHost() == IPv4Address("TCP", "127.0.0.1", 6443)
    assert request.getRequestHostname() == b"example"
    assert request.isSecure() is False
    assert request.transport is conn.transport
    assert seen == [(conn.channel, b"")]
    # Once finished, as with twisted.web, the request lets go of its channel and body.
    assert request.finished and request.channel is None and request.content is None
    assert "method=GET" in repr(request)


def test_request_headers_copy_is_independent() -> None:
    headers = RequestHeaders({b"A": [b"1"]})
    copy = headers.copy()
    copy.addRawHeader(b"a", b"2")
    assert headers.getRawHeaders(b"a") == [b"1"]


def test_response_headers_match_twisted_headers() -> None:
    ours, theirs = ResponseHeaders(), Headers()
    for headers in (ours, theirs):
        headers.setRawHeaders(b"content-type", [b"a/b"])
        headers.setRawHeaders("X-Str", ["\u00e9t\u00e9"])
        headers.addRawHeader(b"x-split", b"one\r\ntwo")
        headers.addRawHeader("x-split", "three\nfour")
        headers.setRawHeaders(b"etag", [b"1"])
    assert list(ours.getAllRawHeaders()) == list(theirs.getAllRawHeaders())


def test_content_length_body_in_pieces() -> None:
    conn = Conn(handler=lambda r: answer(r.content.read())(r))  # type: ignore[union-attr]
    assert conn.send(b"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello") == b""
    out = conn.send(b" world")
    assert out.endswith(b"\r\n\r\nhello world")


def test_chunked_body_with_extension_and_trailer() -> None:
    conn = Conn(handler=lambda r: answer(r.content.read())(r))  # type: ignore[union-attr]
    out = conn.send(
        b"PUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    )
    assert out.endswith(b"\r\n\r\nhello world")
    # Trailers are not request headers (twisted.web ignores them too).
    assert conn.seen[0].requestHeaders.getRawHeaders(b"x-trailer") is None


def test_large_bodies_go_to_a_file() -> None:
    bodies: list[bytes] = []

    def keep(request: H1Request) -> None:
        assert request.content is not None
        assert not hasattr(request.content, "getvalue")
        bodies.append(request.content.read())
        answer()(request)

    conn = Conn(handler=keep)
    big = b"x" * 150_000
    conn.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(big) + big)
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in [big[:90_000], big[90_000:]])
    conn.send(
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n"
    )
    assert bodies == [big, big]


def test_leading_empty_line_is_ignored() -> None:
    conn = Conn()
    assert conn.send(b"\r\n" + GET) == OK


# -- pipelining -----------------------------------------------------------------------------


def test_pipelined_requests_are_answered_in_order_one_at_a_time() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    out = conn.send(
        b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx"
        b"GET /3 HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    assert out == b""
    assert [r.path for r in pending] == [b"/1"]  # head-of-line: /2 waits
    answer(b"r1")(pending[0])
    assert conn.take().endswith(b"r1")
    assert [r.path for r in pending] == [b"/1", b"/2"]
    assert pending[1].content is not None and pending[1].content.read() == b"x"
    answer(b"r2")(pending[1])
    answer(b"r3")(pending[2])
    out = conn.take()
    assert out.index(b"r2") < out.index(b"r3")
    assert not conn.closing


def test_pipelined_requests_answered_synchronously() -> None:
    conn = Conn()
    assert conn.send(GET * 3) == OK * 3


def test_pipelined_data_beyond_the_eager_limit_pauses_reading() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)
    conn.send(GET * 700)  # > 16 KiB queued behind the first
    assert conn.transport.producerState == "paused"
    while pending:
        answer()(pending.pop(0))
    assert conn.transport.producerState == "producing"
    assert len(conn.seen) == 701


def test_bad_request_after_a_good_one_waits_for_its_answer() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    assert conn.send(GET + b"NOT HTTP\r\n\r\n") == b""
    assert not conn.closing
    answer()(pending[0])
    assert conn.take() == OK + BAD_REQUEST
    assert conn.closing


# -- connection persistence -------------------------------------------------------------------


def test_connection_close_is_echoed_and_closes() -> None:
    conn = Conn()
    out = conn.send(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n" + GET)
    # twisted.web puts Connection first (set when the headers arrive), then the app's.
    assert out == (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\n"
        b"Content-Length: 2\r\n\r\nok"
    )
    assert conn.closing
    assert len(conn.seen) == 1  # what follows a closing request is ignored


def test_http10_answers_with_its_version_and_closes() -> None:
    conn = Conn()
    out = conn.send(b"GET / HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.0 200 OK\r\n")
    assert b"Connection" not in out
    assert conn.closing


def test_http10_streaming_is_not_chunked() -> None:
    def stream(request: H1Request) -> None:
        request.write(b"one")
        request.write(b"two")
        request.finish()

    conn = Conn(handler=stream)
    assert conn.send(b"GET / HTTP/1.0\r\n\r\n") == b"HTTP/1.0 200 OK\r\n\r\nonetwo"
    assert conn.closing


def test_closing_response_is_not_followed_by_a_400_for_later_garbage() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET + b"GARBAGE\r\n\r\n")
    assert pending[0].channel is not None
    pending[0].channel.persistent = False
    answer()(pending[0])
    assert conn.take() == OK  # closed after it, as twisted.web: the rest is never read
    assert conn.closing


def test_persistent_false_closes_after_the_response() -> None:
    def refuse(request: H1Request) -> None:
        assert request.channel is not None
        request.channel.persistent = False
        answer()(request)

    conn = Conn(handler=refuse)
    assert conn.send(GET + GET) == OK
    assert conn.closing


# -- responses ----------------------------------------------------------------------------


def test_streaming_response_is_chunked() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)
    request = pending[0]
    request.setHeader(b"content-type", b"application/json")
    request.write(b"")
    assert conn.take() == (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    request.write(b'{"type":"ADDED"}\n')
    assert conn.take() == b'11\r\n{"type":"ADDED"}\n\r\n'
    request.write(b"")
    assert conn.take() == b""
    request.finish()
    assert conn.take() == b"0\r\n\r\n"
    assert request.sentLength == 17


def test_head_and_no_body_codes() -> None:
    conn = Conn(handler=answer(b"body", 200))
    out = conn.send(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert out == b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\n"

    def no_content(request: H1Request) -> None:
        request.setResponseCode(204)
        request.write(b"dropped")
        request.finish()

    conn = Conn(handler=no_content)
    assert conn.send(GET) == b"HTTP/1.1 204 No Content\r\n\r\n"
    conn = Conn(handler=lambda r: r.finish())
    assert conn.send(b"HEAD / HTTP/1.1\r\nHost: x\r\n\r\n") == b"HTTP/1.1 200 OK\r\n\r\n"


def test_finish_twice_warns_and_write_after_finish_raises() -> None:
    conn = Conn()
    conn.send(GET)
    request = conn.seen[0]
    with pytest.warns(UserWarning):
        request.finish()
    with pytest.raises(RuntimeError):
        request.write(b"x")


def test_status_message_and_unknown_code() -> None:
    def custom(request: H1Request) -> None:
        request.setResponseCode(299)
        request.finish()

    conn = Conn(handler=custom)
    # Go's line for a code it has no text for (net/http writeStatusLine).
    assert conn.send(GET).startswith(b"HTTP/1.1 299 status code 299\r\n")


# -- 100-continue ---------------------------------------------------------------------------


def test_expect_100_continue() -> None:
    conn = Conn(handler=lambda r: answer(r.content.read())(r))  # type: ignore[union-attr]
    head = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-Continue\r\n\r\n"
    assert conn.send(head) == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert conn.send(b"hi").endswith(b"\r\n\r\nhi")
    # Not for HTTP/1.0, nor without a body.
    assert conn.send(head.replace(b"1.1", b"1.0")) == b""
    conn = Conn()
    assert conn.send(b"GET / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n") == OK


def test_expect_100_continue_behind_a_pending_request() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(
        GET + b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
    )
    assert conn.take() == b""  # not in the middle of the first response
    answer()(pending[0])
    assert conn.take() == OK + b"HTTP/1.1 100 Continue\r\n\r\n"
    conn.send(b"hi")
    assert pending[1].content is not None and pending[1].content.read() == b"hi"


# -- bad requests -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nNo colon\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Name: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
    ],
)
def test_bad_requests_get_400_and_close(data: bytes) -> None:
    conn = Conn()
    assert conn.send(data) == BAD_REQUEST
    assert BAD_REQUEST == (
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\n\r\n400 Bad Request"
    )
    assert conn.closing
    assert conn.seen == []
    assert conn.send(GET) == b""


LIMIT = (1 << 20) + 4096  # kube-apiserver's MaxHeaderBytes, plus Go's 4 KiB of slack


def go_error(status: bytes, body: bytes | None = None) -> bytes:
    head = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
    return head + b"Connection: close\r\n\r\n" + (status if body is None else body)


@pytest.mark.parametrize(
    ("data", "answer"),
    [
        (
            b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * LIMIT + b"\r\n\r\n",
            go_error(b"431 Request Header Fields Too Large"),
        ),
        (
            b"GET /" + b"u" * LIMIT + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            go_error(b"431 Request Header Fields Too Large"),
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
            go_error(b"501 Not Implemented", b"Unsupported transfer encoding"),
        ),
        (
            b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            go_error(b"501 Not Implemented", b"Unsupported transfer encoding"),
        ),
        (
            b"GET / HTTP/1.1\r\n\r\n",
            go_error(b"400 Bad Request: missing required Host header"),
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            go_error(b"400 Bad Request: too many Host headers"),
        ),
        (
            b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
            go_error(b"400 Bad Request: malformed Host header"),
        ),
    ],
)
def test_unreadable_requests_get_go_s_answer_and_close(data: bytes, answer: bytes) -> None:
    conn = Conn()
    assert conn.send(data) == answer
    assert conn.closing and conn.seen == []


def test_host_rules_follow_go() -> None:
    """HTTP/1.0 needs no Host; the bytes Go accepts in one (IPv6, ports, %) pass."""
    for data in (
        b"GET / HTTP/1.0\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: [::1]:6443\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: kube-api_server.example~1\r\n\r\n",
    ):
        assert Conn().send(data).endswith(b"ok"), data


def test_header_block_growing_over_many_reads_is_refused() -> None:
    conn = Conn()
    conn.send(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    out = b""
    for _ in range(40):
        out += conn.send(b"v" * 65536)
        if out:
            break
    assert out == go_error(b"431 Request Header Fields Too Large") and conn.closing


def test_header_block_just_under_the_limit_is_fine() -> None:
    """Go counts no headers, only bytes: a thousand small ones and one of almost 1 MiB pass
    (twisted.web stopped at 500 headers and 16 KiB)."""
    conn = Conn()
    data = b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-H: " + b"v" * (1 << 20) + b"\r\n\r\n"
    third = len(data) // 3
    for piece in (data[:third], data[third : 2 * third], data[2 * third :]):
        conn.channel.dataReceived(piece)
    assert conn.take() == OK
    assert Conn().send(b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-H: v\r\n" * 1000 + b"\r\n") == OK


def test_upgrade_request_is_served_with_its_body_and_nothing_is_smuggled() -> None:
    conn = Conn(handler=lambda r: answer(r.content.read())(r))  # type: ignore[union-attr]
    smuggled = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
    out = conn.send(
        b"POST /up HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        b"Content-Length: %d\r\n\r\n" % len(smuggled) + smuggled + GET
    )
    assert [r.path for r in conn.seen] == [b"/up", b"/a"]
    assert out.count(b"HTTP/1.1 200 OK") == 2 and smuggled in out
    conn.send(
        b"POST /up2 HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: x\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
    )
    assert conn.seen[-1].path == b"/up2"
    conn.send(
        b"GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n" + GET
    )
    assert [r.path for r in conn.seen[-2:]] == [b"/ws", b"/a"]
    assert not conn.closing


# -- timeouts -------------------------------------------------------------------------------


def test_idle_timeout_closes_then_aborts() -> None:
    conn = Conn(timeout=60)
    conn.clock.advance(59)
    assert not conn.closing
    conn.clock.advance(1)
    assert conn.closing and not conn.transport.disconnected
    conn.clock.advance(15)
    assert conn.transport.disconnected  # forceAbortClient


def test_reads_and_answers_restart_the_idle_timeout() -> None:
    conn = Conn(timeout=60)
    conn.clock.advance(50)
    conn.send(b"GET / HTTP/1.1\r\nHost: x\r\n")  # a partial request counts as activity
    conn.clock.advance(50)
    assert not conn.closing
    conn.clock.advance(10)
    assert conn.closing


def test_idle_timeout_is_suspended_while_answering() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending), timeout=60)
    conn.send(GET)
    conn.clock.advance(600)
    assert not conn.closing
    answer()(pending[0])
    conn.clock.advance(59)
    assert not conn.closing
    conn.clock.advance(1)
    assert conn.closing


def test_no_timeout_configured() -> None:
    conn = Conn(timeout=None)
    conn.clock.advance(10**6)
    assert not conn.closing and not conn.clock.getDelayedCalls()


def test_connection_loss_cancels_timers() -> None:
    conn = Conn(timeout=60)
    conn.clock.advance(60)
    conn.lose()
    assert not conn.clock.getDelayedCalls()


# -- connection loss ------------------------------------------------------------------------


def test_connection_lost_mid_request() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET + GET)
    request = pending[0]
    failures: list[Failure] = []
    request.notifyFinish().addErrback(failures.append)
    conn.lose(ConnectionLost("gone"))
    assert failures and failures[0].check(ConnectionLost)
    assert request._disconnected and request.channel is None
    request.write(b"ignored")
    with pytest.raises(RuntimeError):
        request.finish()
    assert len(pending) == 1  # the queued request never reaches the application


def test_finish_hooks_run_before_the_notify_finish_deferreds() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)
    request = pending[0]
    order: list[tuple[str, object]] = []
    request.notifyFinish().addCallback(lambda result: order.append(("deferred", result)))
    request.whenFinished(lambda result: order.append(("hook", result)))

    def broken(result: object) -> None:
        raise RuntimeError("a broken hook is logged, the others run")

    request.whenFinished(broken)
    request.whenFinished(lambda result: order.append(("after", result)))
    with capturedLogs() as logs:
        answer()(request)
    assert order == [("hook", None), ("after", None), ("deferred", None)]
    assert [event["log_failure"].check(RuntimeError) for event in logs] == [RuntimeError]


def test_finish_hooks_get_the_failure_of_a_lost_connection() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)
    request = pending[0]
    seen: list[object] = []
    request.whenFinished(seen.append)
    conn.lose(ConnectionLost("gone"))
    assert len(seen) == 1
    assert isinstance(seen[0], Failure) and seen[0].check(ConnectionLost)


def test_connection_lost_while_receiving_a_body() -> None:
    conn = Conn()
    conn.send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
    conn.lose()
    assert conn.seen == []


@implementer(IPushProducer)
class Streamer:
    def __init__(self) -> None:
        self.events: list[str] = []

    def pauseProducing(self) -> None:
        self.events.append("pause")

    def resumeProducing(self) -> None:
        self.events.append("resume")

    def stopProducing(self) -> None:
        self.events.append("stop")


def test_streaming_with_a_producer_and_loss_mid_stream() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)
    request = pending[0]
    producer = Streamer()
    request.registerProducer(producer, True)
    with pytest.raises(ValueError):
        request.registerProducer(Streamer(), True)
    lost: list[Failure] = []
    request.notifyFinish().addErrback(lost.append)
    request.write(b"event\n")
    conn.channel.pauseProducing()  # the transport's buffer is full
    assert producer.events == ["pause"]
    # While a request is being answered, reading goes on (to notice a disconnect).
    assert conn.transport.producerState == "producing"
    conn.channel.resumeProducing()
    assert producer.events == ["pause", "resume"]
    conn.channel.stopProducing()
    assert producer.events[-1] == "stop"
    conn.lose(ConnectionLost())
    assert lost and request._disconnected
    request.unregisterProducer()  # a watch does this on loss: must not raise
    assert request.producer is None


def test_producer_registered_while_transport_is_full_starts_paused() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)
    conn.channel.pauseProducing()
    producer = Streamer()
    pending[0].registerProducer(producer, True)
    assert producer.events == ["pause"]
    pending[0].unregisterProducer()
    answer()(pending[0])


def test_idle_connection_stops_reading_while_transport_is_full() -> None:
    conn = Conn()
    conn.channel.pauseProducing()
    assert conn.transport.producerState == "paused"
    conn.channel.resumeProducing()
    assert conn.transport.producerState == "producing"


def test_pull_producer_is_wrapped() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)

    class Pull:
        def __init__(self) -> None:
            self.calls = 0

        def resumeProducing(self) -> None:
            self.calls += 1

        def stopProducing(self) -> None:
            pass

    pending[0].registerProducer(Pull(), False)
    wrapped = conn.channel._requestProducer
    assert isinstance(wrapped, _PullToPush)  # twisted.web wraps it the same way
    pending[0].unregisterProducer()
    assert conn.channel._requestProducer is None
    answer()(pending[0])


def test_unregistered_producer_at_finish_is_logged_and_dropped() -> None:
    pending: list[H1Request] = []
    conn = Conn(handler=hold(pending))
    conn.send(GET)
    pending[0].registerProducer(Streamer(), True)
    answer()(pending[0])
    assert conn.channel._requestProducer is None


# -- the site: HTTP/1.1 through ApiSite, and HTTP/2 hand-over ---------------------------------


def make_site(
    routes: dict[str, Callable[[Any, RequestInfo], Any]], lifecycle: Lifecycle | None = None
) -> tuple[ApiSite, MemoryReactorClock]:
    clock = MemoryReactorClock()
    router = Router()
    for path, handler in routes.items():
        router.add(path, handler)
    app = App(router, clock, ServingPolicy(), lifecycle)
    return ApiSite(app, reactor=clock), clock


def test_site_builds_h1_channels_with_its_settings() -> None:
    site, clock = make_site({})
    channel = site.buildProtocol(None)
    assert isinstance(channel, H1Channel)
    assert channel.requestFactory is ApiH1Request
    assert channel.h2RequestFactory is ApiH2Request
    assert ApiH2Request.twistedRequestFactory is ApiRequest
    assert channel.timeOut == site.timeOut
    assert channel.callLater == clock.callLater
    assert channel.factory is site and channel.site is site


def twisted_answer(site: ApiSite, data: bytes) -> tuple[bytes, bool]:
    """What twisted.web's HTTPChannel with our ApiRequest writes for ``data``."""
    channel: Any = http.HTTPChannel()
    channel.requestFactory = ApiRequest
    channel.site = site
    channel.factory = site
    channel.timeOut = None
    transport = StringTransport()
    channel.makeConnection(transport)
    channel.dataReceived(data)
    return transport.value(), bool(transport.disconnecting)


def our_answer(site: ApiSite, data: bytes) -> tuple[bytes, bool]:
    channel: Any = site.buildProtocol(None)
    transport = StringTransport()
    channel.makeConnection(transport)
    channel.dataReceived(data)
    return transport.value(), bool(transport.disconnecting)


@pytest.mark.parametrize(
    "data",
    [
        b"GET /hello HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\n\r\n",
        b"HEAD /hello HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\n\r\n",
        b"GET /hello HTTP/1.0\r\nAudit-ID: fixed\r\n\r\n",
        b"GET /hello HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\nConnection: close\r\n\r\n",
        b"GET /missing HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\n\r\n",
        b"GET /apis/x HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\n\r\n",
        b"OPTIONS /empty HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\n\r\n",
        b"GET /stream HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\n\r\n",
        b"GET /stream HTTP/1.0\r\nAudit-ID: fixed\r\n\r\n",
        b"POST /hello HTTP/1.1\r\nHost: x\r\nAudit-ID: fixed\r\nContent-Length: 3\r\n\r\nabc",
        b"GET /hello HTTP/1.1\r\nHost: x\r\nAudit-ID: a\r\n\r\n"
        b"GET /hello HTTP/1.1\r\nHost: x\r\nAudit-ID: b\r\n\r\n",
    ],
)
def test_same_bytes_as_twisted_web(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(site_module._dates, "now", lambda: b"Sun, 22 Nov 2026 13:00:00 GMT")
    routes = {
        "/hello": lambda request, info: text(200, "hi"),
        "/empty": lambda request, info: Response(204),
        "/stream": streaming,
    }
    site, _ = make_site(routes)
    assert our_answer(site, data) == twisted_answer(site, data)


def test_retry_after_answer_closes_the_connection() -> None:
    lifecycle = Lifecycle(MemoryReactorClock(), send_retry_after=True)
    lifecycle.not_accepting = True
    site, _ = make_site({"/version": lambda request, info: text(200, "v")}, lifecycle)
    out, closing = our_answer(
        site, b"GET /version HTTP/1.1\r\nHost: x\r\n\r\nGET /version HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    # Go's reason phrase, as kube-apiserver sends it (twisted.web has none for 429).
    assert out.startswith(b"HTTP/1.1 429 Too Many Requests\r\n")
    assert b"\r\nConnection: close\r\n" in out and b"\r\nRetry-After: 5\r\n" in out
    assert out.count(b"HTTP/1.1") == 1 and closing


def test_deferred_answer_and_loss_cancel_the_handler() -> None:
    pending: list[Deferred[Response]] = []
    cancelled: list[object] = []

    def slow(request: Any, info: RequestInfo) -> Deferred[Response]:
        d: Deferred[Response] = Deferred(cancelled.append)
        pending.append(d)
        return d

    site, _clock = make_site({"/slow": slow})
    channel: Any = site.buildProtocol(None)
    transport = StringTransport()
    channel.makeConnection(transport)
    channel.dataReceived(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    assert transport.value() == b""
    pending[0].callback(text(200, "late"))
    assert transport.value().endswith(b"late")
    channel.dataReceived(b"GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
    assert cancelled == []
    channel.connectionLost(Failure(ConnectionLost()))
    assert cancelled  # App cancels the handler when the client goes away


def h2_get_hello(channel: Any) -> h2.connection.H2Connection:
    """An h2 client's preface and ``GET /hello``, fed to ``channel``."""
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    client.send_headers(
        1,
        [(":method", "GET"), (":path", "/hello"), (":scheme", "https"), (":authority", "x")],
        end_stream=True,
    )
    channel.dataReceived(client.data_to_send())
    return client


class TLSLikeTransport(StringTransport):
    """A memory transport that says ALPN picked ``h2``."""

    negotiatedProtocol = b"h2"


def test_alpn_h2_hands_the_connection_to_http2(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "H2Connection", http.H2Connection)
    configure_http2(0)  # as the daemon does (our connection sends within dataReceived)
    site, clock = make_site({"/hello": lambda request, info: text(200, "hi")})
    channel: Any = site.buildProtocol(None)
    transport = TLSLikeTransport()
    channel.makeConnection(transport)
    client = h2_get_hello(channel)
    assert isinstance(channel._h2, FastH2Connection)
    assert transport.producer is channel._h2  # the transport's producer is HTTP/2 now
    events = client.receive_data(transport.value())
    responses = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    data = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
    assert dict(responses[0].headers)[b":status"] == b"200" and data == b"hi"
    # Later bytes and the end of the connection go straight to the HTTP/2 connection.
    # (mypy narrowed _h2 to the type of transport.producer above)
    assert channel.dataReceived == channel._h2.dataReceived  # type: ignore[union-attr]
    channel.connectionLost(Failure(ConnectionDone()))
    assert not clock.getDelayedCalls() or all(not c.active() for c in clock.getDelayedCalls())


def test_alpn_h2_without_our_connection_class_gets_twisted_requests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Twisted's own H2Connection (configure_http2 not called) serves twisted.web requests.
    monkeypatch.setattr(http, "H2Connection", _http2.H2Connection)
    site, _ = make_site({"/hello": lambda request, info: text(200, "hi")})
    channel: Any = site.buildProtocol(None)
    channel.makeConnection(TLSLikeTransport())
    client = h2_get_hello(channel)
    assert type(channel._h2) is _http2.H2Connection
    assert channel._h2.requestFactory is ApiRequest  # type: ignore[attr-defined]
    channel._h2._sendPrioritisedData()  # Twisted sends DATA from its own loop
    channel._h2._sendPrioritisedData()
    events = client.receive_data(channel.transport.value())
    data = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
    assert data == b"hi"


def test_no_alpn_stays_http1() -> None:
    site, _ = make_site({"/hello": lambda request, info: text(200, "hi")})
    channel: Any = site.buildProtocol(None)
    transport = StringTransport()
    channel.makeConnection(transport)
    channel.dataReceived(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    assert channel._h2 is None and transport.value().endswith(b"hi")


def test_large_writes_go_to_tls_at_once_after_the_small_ones_waiting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A streamed piece of DIRECT_TLS_WRITE bytes or more flushes Twisted's small-write
    buffer, then is encrypted at once; whole writes and small pieces are left to that
    buffer. Order is kept."""
    from apiserver.http.h1 import DIRECT_TLS_WRITE

    tls, order = fake_buffering_tls(monkeypatch)
    channel = H1Channel()
    channel.transport = tls
    channel._write(b"head-and-first-chunk" * 100)  # whole writes: always the buffer
    channel.writeStreamData(b"small")
    assert order == []
    big = b"x" * DIRECT_TLS_WRITE
    channel.writeStreamData(big)
    assert order == [("buffered", b"head-and-first-chunk" * 100 + b"small"), ("direct", big)]
