"""apiserver.http.h2request and the fast receive path of apiserver.http.h2, against the path
they replace.

The same App (an ``ApiSite``) is served twice over HTTP/2 from the same client bytes: by
:class:`FastH2Connection` with twisted.web's ``H2Stream`` and our ``ApiRequest``, frames
received through h2 (the path before the lean request), and with :class:`ApiH2Request` and
the fast receive path (what the daemon runs). Everything the server writes must be the same
bytes: frames, their order, HPACK blocks, bodies. A route that echoes what the application
sees of the request (method, target, headers, body, addresses) makes the request objects
part of that comparison.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, cast

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings
import hpack
import pytest
from http_helpers import parse_frames, request_headers, streaming
from hyperframe.frame import GoAwayFrame
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.web import _http2

from apiserver.http import site as site_module
from apiserver.http.app import App, RequestInfo, Router, ServingPolicy
from apiserver.http.h2 import (
    FastH2Connection,
    StockH2Connection,
    _LiteralEncoder,
    _responseHeaderBlock,
)
from apiserver.http.h2request import H2Request
from apiserver.http.response import Response, text
from apiserver.http.site import ApiH2Request, ApiRequest, ApiSite
from apiserver.service.lifecycle import Lifecycle

Handler = Callable[[Any, RequestInfo], Any]


def record(request: Any, info: RequestInfo) -> Response:
    """What the application sees of the request, as JSON."""
    seen = {
        "method": request.method.decode(),
        "uri": request.uri.decode(),
        "path": request.path.decode(),
        "args": {k.decode(): [v.decode() for v in vs] for k, vs in request.args.items()},
        "clientproto": request.clientproto.decode(),
        "headers": [
            [k.decode(), [v.decode() for v in vs]]
            for k, vs in request.requestHeaders.getAllRawHeaders()
        ],
        "all": {k.decode(): v.decode() for k, v in request.getAllHeaders().items()},
        "host_header": (request.getHeader(b"host") or b"").decode(),
        "hostname": request.getRequestHostname().decode(),
        "content": request.content.read().decode(),
        "content_type": type(request.content).__name__,
        "client": str(request.getClientAddress()),
        "host": str(request.getHost()),
        "secure": request.isSecure(),
        "transport": repr(request.transport),
        "conn_transport": type(request.channel._conn.transport).__name__,
    }
    return Response(200, (("Content-Type", "application/json"),), json.dumps(seen).encode())


class Pending:
    """Answers of ``/later``, given by the test; what the App's cancellation reached."""

    def __init__(self) -> None:
        self.waiting: list[Deferred[Response]] = []
        self.cancelled = 0

    def handler(self, request: Any, info: RequestInfo) -> Deferred[Response]:
        def cancel(_: object) -> None:
            self.cancelled += 1

        d: Deferred[Response] = Deferred(cancel)
        self.waiting.append(d)
        return d


def make_site(pending: Pending, lifecycle: Lifecycle | None = None) -> ApiSite:
    clock = MemoryReactorClock()
    router = Router()
    routes: dict[str, Handler] = {
        "/hello": lambda request, info: text(200, "hi"),
        "/empty": lambda request, info: Response(204),
        "/big": lambda request, info: text(200, "0123456789" * 10_000),
        "/stream": streaming,
        "/record": record,
        "/later": pending.handler,
    }
    for path, handler in routes.items():
        router.add(path, handler)
    return ApiSite(App(router, clock, ServingPolicy(), lifecycle), reactor=clock)


class Server:
    """One HTTP/2 connection of the daemon, on a memory transport: the old path or ours."""

    def __init__(self, lean: bool, lifecycle: Lifecycle | None = None) -> None:
        self.clock = MemoryReactorClock()
        self.pending = Pending()
        self.site = make_site(self.pending, lifecycle)
        conn: Any = FastH2Connection(reactor=self.clock)  # Twisted types site as None
        conn.requestFactory = ApiH2Request if lean else ApiRequest
        conn.fastReceive = lean
        conn.site = self.site
        conn.factory = self.site
        conn.timeOut = None
        conn.callLater = self.clock.callLater
        self.conn = conn
        self.transport = StringTransport(
            hostAddress=IPv4Address("TCP", "127.0.0.1", 6443),
            peerAddress=IPv4Address("TCP", "10.0.0.7", 40000),
        )
        conn.makeConnection(self.transport)
        self.out = bytearray()

    def feed(self, data: bytes) -> bytes:
        if data:
            self.conn.dataReceived(data)
        self.clock.advance(0)
        written = self.transport.value()
        self.transport.clear()
        self.out += written
        return written


class Pair:
    """An h2 client whose bytes go to both servers; their answers must be the same."""

    def __init__(self, lifecycle: Callable[[], Lifecycle] | None = None) -> None:
        self.old = Server(lean=False, lifecycle=lifecycle() if lifecycle else None)
        self.new = Server(lean=True, lifecycle=lifecycle() if lifecycle else None)
        self.client = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.client.initiate_connection()
        self.events: list[Any] = []
        self.send()

    def send(self, data: bytes | None = None) -> bytes:
        """Feed ``data`` (default: what the client has queued) to both; the same answer.

        Bytes given by the test (frames the client library would not send) are compared
        only: the client's state would not match what the servers answer."""
        deliver = data is None
        if data is None:
            data = self.client.data_to_send()
        old = self.old.feed(data)
        new = self.new.feed(data)
        assert new == old
        if old and deliver:
            self.events += self.client.receive_data(old)
        return old

    def request(
        self,
        path: bytes,
        method: bytes = b"GET",
        extra: list[tuple[bytes, bytes]] | None = None,
        body: bytes | None = None,
        end: bool = True,
    ) -> int:
        sid: int = self.client.get_next_available_stream_id()
        headers = [
            *request_headers(method, path, b"example.test:6443"),
            (b"audit-id", b"fixed-%d" % sid),
            *(extra or []),
        ]
        self.client.send_headers(sid, headers, end_stream=end and body is None)
        if body is not None:
            self.client.send_data(sid, body, end_stream=end)
        return sid

    def answers(self) -> dict[int, tuple[dict[bytes, bytes], bytes]]:
        headers: dict[int, dict[bytes, bytes]] = {}
        bodies: dict[int, bytearray] = {}
        for event in self.events:
            if isinstance(event, h2.events.ResponseReceived):
                headers[event.stream_id] = dict(event.headers)
            elif isinstance(event, h2.events.DataReceived):
                bodies.setdefault(event.stream_id, bytearray()).extend(event.data)
        return {sid: (h, bytes(bodies.get(sid, b""))) for sid, h in headers.items()}


@pytest.fixture(autouse=True)
def fixed_date(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(site_module._dates, "now", lambda: b"Sun, 22 Nov 2026 13:00:00 GMT")
    yield


def test_everyday_requests_give_the_same_bytes_and_requests() -> None:
    pair = Pair()
    ids = [pair.request(b"/hello")]
    pair.send()
    ids += [pair.request(b"/hello") for _ in range(3)]
    pair.send()
    ids.append(pair.request(b"/record?a=1&b=2&a=3&flag", extra=[(b"accept", b"application/json")]))
    ids.append(pair.request(b"/missing"))
    ids.append(pair.request(b"/apis/nothing/here"))
    ids.append(pair.request(b"/hello", method=b"HEAD"))
    ids.append(pair.request(b"/empty", method=b"OPTIONS"))
    ids.append(pair.request(b"/stream"))
    pair.send()
    answers = pair.answers()
    assert [answers[sid][0][b":status"] for sid in ids] == [b"200"] * 5 + [
        b"404",
        b"404",
        b"200",
        b"204",
        b"200",
    ]
    seen = json.loads(answers[ids[4]][1])
    assert seen["clientproto"] == "HTTP/2"
    assert seen["args"] == {"a": ["1", "3"], "b": ["2"]}
    assert seen["headers"][0] == ["Host", ["example.test:6443"]]
    assert seen["transport"] == "None" and seen["conn_transport"] == "StringTransport"
    assert answers[ids[7]][1] == b""  # HEAD
    assert answers[ids[9]][1] == b'{"type":"ADDED"}\n{"type":"DELETED"}\n'


def test_request_headers_as_twisted_web_gives_them() -> None:
    pair = Pair()
    sid = pair.request(
        b"/record",
        extra=[
            (b"cookie", b"a=1"),
            (b"x-multi", b"one"),
            (b"user-agent", b"kubectl/v1.32.0"),
            (b"cookie", b"b=2"),
            (b"x-multi", b"two"),
            (b"host", b"example.test:6443"),
            (b"accept-encoding", b"gzip"),
        ],
    )
    pair.send()
    seen = json.loads(pair.answers()[sid][1])
    headers = dict((name, values) for name, values in seen["headers"])
    # Split cookie fields are joined (by h2, RFC 9113 §8.2.3); names in twisted's case;
    # ``:authority`` and ``host`` both become Host values, in their order.
    assert headers["Cookie"] == ["a=1; b=2"]
    assert headers["X-Multi"] == ["one", "two"]
    assert headers["Host"] == ["example.test:6443", "example.test:6443"]
    assert seen["hostname"] == "example.test"


def test_request_bodies_give_the_same_bytes() -> None:
    pair = Pair()
    small = pair.request(
        b"/record", method=b"POST", extra=[(b"content-length", b"11")], body=b"hello world"
    )
    pair.send()
    # No content-length: the body goes to a temporary file, as twisted.web keeps it.
    unknown = pair.request(b"/record", method=b"PUT", body=b"x" * 3000)
    pair.send()
    # Sent in pieces over several reads; the request is served once it has ended.
    pieces = pair.request(
        b"/record", method=b"PATCH", extra=[(b"content-length", b"30000")], end=False
    )
    pair.send()
    for n in range(3):
        pair.client.send_data(pieces, bytes([65 + n]) * 10_000, end_stream=n == 2)
        pair.send()
    answers = pair.answers()
    assert json.loads(answers[small][1])["content"] == "hello world"
    assert json.loads(answers[small][1])["content_type"] == "BytesIO"
    assert json.loads(answers[unknown][1])["content"] == "x" * 3000
    assert json.loads(answers[pieces][1])["content"] == "A" * 10_000 + "B" * 10_000 + "C" * 10_000


def test_expect_continue_gives_the_same_bytes() -> None:
    pair = Pair()
    sid = pair.request(
        b"/record",
        method=b"POST",
        extra=[(b"expect", b"100-continue"), (b"content-length", b"2")],
        end=False,
    )
    out = pair.send()
    assert out  # the 100 Continue
    pair.client.send_data(sid, b"ok", end_stream=True)
    pair.send()
    informational = [
        e for e in pair.events if isinstance(e, h2.events.InformationalResponseReceived)
    ]
    assert dict(informational[0].headers)[b":status"] == b"100"
    assert json.loads(pair.answers()[sid][1])["content"] == "ok"


def test_unusual_header_block_is_served_by_twisted_web_as_before() -> None:
    pair = Pair()
    pair.request(b"/hello")
    pair.send()
    sid = pair.request(b"/record", extra=[(b"te", b"trailers")])
    pair.send()
    seen = json.loads(pair.answers()[sid][1])
    assert ["TE", ["trailers"]] in seen["headers"]


def test_lean_request_is_used_for_everyday_blocks_and_twisted_for_others() -> None:
    pair = Pair()
    everyday = pair.request(b"/later")
    unusual = pair.request(b"/later", extra=[(b"te", b"trailers")])
    pair.send()
    streams = pair.new.conn.streams
    assert type(streams[everyday]) is ApiH2Request
    assert type(streams[unusual]) is _http2.H2Stream
    assert isinstance(streams[unusual]._request, ApiRequest)
    for server in (pair.old, pair.new):
        for d in server.pending.waiting:
            d.callback(text(200, "late"))
    pair.send()
    answers = pair.answers()
    assert answers[everyday][1] == answers[unusual][1] == b"late"


def test_client_reset_cancels_the_handler_on_both_paths() -> None:
    pair = Pair()
    sid = pair.request(b"/later")
    pair.send()
    pair.client.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
    pair.send()
    assert pair.old.pending.cancelled == pair.new.pending.cancelled == 1
    assert not pair.new.conn.streams and not pair.new.conn.conn.streams
    again = pair.request(b"/hello")
    pair.send()
    assert pair.answers()[again][1] == b"hi"


def test_retry_after_answer_drops_the_connection_header() -> None:
    def closing() -> Lifecycle:
        lifecycle = Lifecycle(MemoryReactorClock(), send_retry_after=True)
        lifecycle.not_accepting = True
        return lifecycle

    pair = Pair(lifecycle=closing)
    sid = pair.request(b"/hello")
    pair.send()
    headers, _ = pair.answers()[sid]
    assert headers[b":status"] == b"429"
    assert b"connection" not in headers and headers[b"retry-after"] == b"5"


def test_large_answer_with_flow_control_gives_the_same_bytes() -> None:
    pair = Pair()
    sid = pair.request(b"/big")
    pair.send()
    got = sum(len(e.data) for e in pair.events if isinstance(e, h2.events.DataReceived))
    assert got == 65535
    while not any(isinstance(e, h2.events.StreamEnded) for e in pair.events):
        pair.client.increment_flow_control_window(30_000)
        pair.client.increment_flow_control_window(30_000, stream_id=sid)
        pair.send()
    assert pair.answers()[sid][1] == b"0123456789" * 10_000


def test_request_attributes_match_twisted_webs() -> None:
    """The lean request has what ``App`` and the auth filters read, with twisted.web's
    values, and the connection-facing methods of ``H2Stream``."""
    pair = Pair()
    sid = pair.request(b"/later?x=1", extra=[(b"user-agent", b"ua")])
    pair.send()
    old = pair.old.conn.streams[sid]._request
    new = pair.new.conn.streams[sid]
    assert isinstance(new, H2Request)
    for name in ("method", "uri", "path", "args", "clientproto", "code", "finished"):
        assert getattr(new, name) == getattr(old, name), name
    assert list(new.requestHeaders.getAllRawHeaders()) == list(
        old.requestHeaders.getAllRawHeaders()
    )
    assert new.getHeader(b"User-Agent") == old.getHeader(b"user-agent") == b"ua"
    assert new.transport is None and old.transport is None
    assert new.channel._conn is pair.new.conn and old.channel._conn is pair.old.conn
    assert new.getClientAddress() == old.getClientAddress()
    assert new.getHost() == old.getHost()
    assert new.isSecure() == old.isSecure()
    assert new.startedWriting == old.startedWriting == 0
    assert (
        repr(new).split(" at ")[1].split(" ", 1)[1] == repr(old).split(" at ")[1].split(" ", 1)[1]
    )
    for server in (pair.old, pair.new):
        server.pending.waiting[0].callback(text(200, "done"))
    pair.send()
    assert new.finished and old.finished
    assert new.channel is None and new.content is None


def test_finish_and_write_misuse_like_twisted_web() -> None:
    pair = Pair()
    sid = pair.request(b"/later")
    gone = pair.request(b"/later")
    pair.send()
    for server in (pair.old, pair.new):
        stream = server.conn.streams[sid]
        request = stream if isinstance(stream, H2Request) else stream._request
        request.setResponseCode(200)
        request.write(b"a")
        request.finish()
        with pytest.warns(UserWarning, match="finish called twice"):
            request.finish()
        with pytest.raises(RuntimeError, match=r"after Request\.finish"):
            request.write(b"b")
    pair.send()
    lost = [server.conn.streams[gone] for server in (pair.old, pair.new)]
    pair.client.reset_stream(gone)
    pair.send()
    for stream in lost:
        request = stream if isinstance(stream, H2Request) else stream._request
        with pytest.raises(RuntimeError, match="connection was lost"):
            request.finish()
        request.write(b"dropped")  # silently, as twisted.web does
    assert pair.send() == b""


# -- the HPACK encoding of responses ------------------------------------------------------

_RESPONSE_FIELDS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                b"Content-Type",
                b"Content-Length",
                b"Date",
                b"Audit-Id",
                b"Cache-Control",
                b" X-Pad ",
                b"Connection",
                b"Keep-Alive",
                b"Set-Cookie",
                b"Cookie",
                b"TE",
                b"Retry-After",
            ]
        ),
        st.sampled_from(
            [b"v", b" v ", b"", b"application/json", b"x" * 200, b"id-1", b"id-2", b"close"]
        ),
    ),
    max_size=8,
)


@settings(max_examples=300, deadline=None)
@given(
    responses=st.lists(
        st.tuples(st.sampled_from([b"200", b"404", b"201"]), _RESPONSE_FIELDS), max_size=25
    ),
    resize=st.lists(st.sampled_from([None, None, None, 0, 64, 256, 4096]), max_size=25),
)
def test_response_encoding_is_the_generic_encoding(
    responses: list[tuple[bytes, list[tuple[bytes, bytes]]]], resize: list[int | None]
) -> None:
    """``encodeResponse`` gives the bytes of ``_responseHeaderBlock`` + ``encode`` on an
    encoder in the same state, over sequences that grow, evict and resize the table; a
    block it declines (special names) goes the generic way on both, so they stay in step."""
    generic, direct = _LiteralEncoder(), _LiteralEncoder()
    decoder = hpack.Decoder()
    for n, (code, fields) in enumerate(responses):
        size = resize[n] if n < len(resize) else None
        if size is not None:
            generic.header_table_size = direct.header_table_size = size
        raw: dict[bytes, list[bytes]] = {}
        for name, value in fields:
            raw.setdefault(name, []).append(value)
        pairs = [(name, value) for name, values in raw.items() for value in values]
        block = _responseHeaderBlock(code, pairs)
        if block is None:
            assert direct.encodeResponse(code, raw) is None
            block = [(b":status", code), *((k.lower().strip(), v) for k, v in pairs)]
            expected = generic.encode(block)
            assert direct.encode(block) == expected
        else:
            expected = generic.encode(block)
            got = direct.encodeResponse(code, raw)
            if got is None:  # a size change to announce first: the generic way
                got = direct.encode(block)
            assert got == expected
        decoded = decoder.decode(expected, raw=True)
        assert [tuple(h) for h in decoded] == [tuple(h) for h in block]


def test_an_audit_id_the_table_holds_is_encoded_as_hpack_does() -> None:
    """A never-indexed field whose name (or whole field) the table holds (sent indexed
    by h2's own pipeline before) is encoded by hpack, not from the remembered prefix."""
    generic, direct = _LiteralEncoder(), _LiteralEncoder()
    raw = {b"Audit-Id": [b"same"], b"Content-Type": [b"application/json"]}
    pairs = [(b"Audit-Id", b"same"), (b"Content-Type", b"application/json")]
    block = _responseHeaderBlock(b"200", pairs)
    assert block is not None
    assert direct.encodeResponse(b"200", raw) == generic.encode(block)
    plain = [(b":status", b"200"), (b"audit-id", b"same")]
    assert direct.encode(plain) == generic.encode(plain)  # now in both tables, indexed
    for _ in range(2):
        assert direct.encodeResponse(b"200", raw) == generic.encode(block)


def test_head_of_a_streamed_answer_has_no_body() -> None:
    pair = Pair()
    sid = pair.request(b"/stream", method=b"HEAD")
    pair.send()
    headers, body = pair.answers()[sid]
    assert headers[b":status"] == b"200" and body == b""


@pytest.mark.parametrize(
    "frame",
    [
        # DATA on the finished stream 1: RST_STREAM STREAM_CLOSED (and the window back).
        b"\x00\x00\x02\x00\x01\x00\x00\x00\x01ab",
        # HEADERS on it: a connection error (closed by END_STREAM, RFC 9113 §5.1).
        b"\x00\x00\x01\x01\x05\x00\x00\x00\x01\x82",
        # RST_STREAM and WINDOW_UPDATE on it: ignored.
        b"\x00\x00\x04\x03\x00\x00\x00\x00\x01\x00\x00\x00\x08",
        b"\x00\x00\x04\x08\x00\x00\x00\x00\x01\x00\x00\x01\x00",
    ],
)
def test_frames_on_a_finished_stream_get_h2s_answer(frame: bytes) -> None:
    """h2 knows how a stream ended after it forgot it (``_closed_streams``); our path
    forgets finished streams sooner, and h2 answers the same."""
    pair = Pair()
    pair.request(b"/hello")
    pair.send()
    pair.request(b"/hello")
    pair.send()
    pair.send(frame)
    assert pair.old.transport.disconnecting == pair.new.transport.disconnecting
    if pair.new.transport.disconnecting:
        last = parse_frames(bytes(pair.new.out))[-1]
        assert isinstance(last, GoAwayFrame)
        assert last.error_code == h2.errors.ErrorCodes.STREAM_CLOSED
        return
    again = pair.request(b"/hello")
    pair.send()
    assert pair.answers()[again][1] == b"hi"


def _frame(kind: int, flags: int, sid: int, payload: bytes) -> bytes:
    size = len(payload)
    return bytes((size >> 16, (size >> 8) & 0xFF, size & 0xFF, kind, flags)) + (
        sid.to_bytes(4, "big") + payload
    )


def _window_update(sid: int, increment: int) -> bytes:
    return _frame(0x8, 0, sid, increment.to_bytes(4, "big"))


@pytest.mark.parametrize(
    "build",
    [
        # Windows past 2^31-1: a connection error for the connection's, a stream reset
        # (FLOW_CONTROL_ERROR) for a stream's; a zero increment: PROTOCOL_ERROR.
        lambda sid: _window_update(0, (1 << 31) - 1),
        lambda sid: _window_update(sid, (1 << 31) - 1),
        lambda sid: _window_update(0, 0),
        lambda sid: _window_update(sid, 0),
        # A window update for a stream not opened yet, and the largest valid ones.
        lambda sid: _window_update(sid + 2, 100),
        lambda sid: _window_update(0, (1 << 31) - 1 - 65535),
        lambda sid: _window_update(sid, (1 << 31) - 1 - 65535),
        # The reserved bit of the stream id is ignored.
        lambda sid: _window_update(sid | 0x80000000, 10),
    ],
)
def test_window_updates_as_h2_takes_them(build: Callable[[int], bytes]) -> None:
    pair = Pair()
    pair.request(b"/hello")
    pair.send()
    sid = pair.request(b"/big")
    pair.send()
    pair.send(build(sid))
    assert pair.old.transport.disconnecting == pair.new.transport.disconnecting


def _headers(pair: Pair, sid: int, flags: int, extra: list[tuple[bytes, bytes]]) -> bytes:
    block = pair.client.encoder.encode(
        [
            (b":method", b"POST"),
            (b":scheme", b"https"),
            (b":authority", b"h"),
            (b":path", b"/record"),
            (b"audit-id", b"fixed"),
            *extra,
        ]
    )
    return _frame(0x1, flags, sid, block)


@pytest.mark.parametrize(
    ("extra", "body"),
    [
        ([(b"content-length", b"5")], b"abc"),  # shorter than declared: PROTOCOL_ERROR
        ([(b"content-length", b"2")], b"abc"),  # longer
        ([(b"content-length", b"x5")], b""),  # not digits
        ([(b"content-length", b"3"), (b"content-length", b"4")], b"abc"),  # conflicting
        ([(b"content-length", b"3"), (b"content-length", b"3")], b"abc"),  # fine
        ([(b"content-length", b"0")], b""),
    ],
)
def test_declared_body_lengths_as_h2_checks_them(
    extra: list[tuple[bytes, bytes]], body: bytes
) -> None:
    pair = Pair()
    pair.request(b"/hello")
    pair.send()
    pair.send(_headers(pair, 3, 0x4, extra) + _frame(0x0, 0x1, 3, body))
    assert pair.old.transport.disconnecting == pair.new.transport.disconnecting


@pytest.mark.parametrize(
    "frame",
    [
        # PRIORITY flag (weight, dependency): h2's path, served.
        lambda pair: _frame(0x1, 0x25, 3, b"\x00\x00\x00\x00\x0f" + _block(pair)),
        # PADDED: h2's path, served.
        lambda pair: _frame(0x1, 0x0D, 3, b"\x02" + _block(pair) + b"\x00\x00"),
        # A header block in HEADERS + CONTINUATION.
        lambda pair: _frame(0x1, 0x1, 3, _block(pair)[:3]) + _frame(0x9, 0x4, 3, _block(pair)[3:]),
        # A stream id not above the last: PROTOCOL_ERROR; an even one: PROTOCOL_ERROR.
        lambda pair: _frame(0x1, 0x5, 1, _block(pair)),
        lambda pair: _frame(0x1, 0x5, 4, _block(pair)),
        # A block HPACK cannot decode: COMPRESSION_ERROR; an empty one: PROTOCOL_ERROR.
        lambda pair: _frame(0x1, 0x5, 3, b"\xff\xff\xff\xff\xff"),
        lambda pair: _frame(0x1, 0x5, 3, b""),
        # Undefined flags are ignored; the reserved bit of the stream id too.
        lambda pair: _frame(0x1, 0x5 | 0x40 | 0x2, 3, _block(pair)),
        lambda pair: _frame(0x1, 0x5, 3 | 0x80000000, _block(pair)),
        # Unknown frame types are ignored.
        lambda pair: _frame(0xEE, 0, 0, b"x") + _frame(0x1, 0x5, 3, _block(pair)),
    ],
)
def test_header_frames_as_h2_takes_them(frame: Callable[[Pair], bytes]) -> None:
    pair = Pair()
    pair.request(b"/hello")
    pair.send()
    pair.send(frame(pair))
    assert pair.old.transport.disconnecting == pair.new.transport.disconnecting


def _block(pair: Pair) -> bytes:
    """A request's header block, HPACK-encoded without touching the client's table (so
    that the servers' tables and the client's stay in step whatever the servers do)."""
    encoder = hpack.Encoder()
    return encoder.encode(
        [
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":path", b"/hello"),
            (b"host", b"h"),
            (b"audit-id", b"fixed"),
        ]
    )


@settings(max_examples=60, deadline=None)
@given(
    kinds=st.lists(
        st.sampled_from(["get", "big", "post", "window", "record"]), min_size=1, max_size=12
    ),
    cuts=st.lists(st.integers(min_value=1, max_value=400), max_size=30),
)
def test_any_split_of_the_client_bytes_gives_the_same_answers(
    kinds: list[str], cuts: list[int]
) -> None:
    """Requests, bodies and window updates, the bytes cut anywhere (partial frames, several
    frames a read): our path answers as the old one does, read after read."""
    pair = Pair()
    pair.request(b"/hello")
    pair.send()
    client = pair.client
    for kind in kinds:
        if kind == "get":
            pair.request(b"/hello")
        elif kind == "record":
            pair.request(b"/record?q=1", extra=[(b"cookie", b"a"), (b"cookie", b"b")])
        elif kind == "big":
            pair.request(b"/big")
        elif kind == "post":
            pair.request(b"/record", method=b"POST", body=b"p" * 300)
        else:
            client.increment_flow_control_window(40_000)
            for sid, stream in list(client.streams.items()):
                if stream.open:
                    client.increment_flow_control_window(40_000, stream_id=sid)
    data = client.data_to_send()
    offset = 0
    for cut in cuts:
        if offset >= len(data):
            break
        pair.send(data[offset : offset + cut])
        offset += cut
    pair.send(data[offset:])


def test_connection_window_past_the_limit_is_h2s_connection_error() -> None:
    pair = Pair()
    pair.request(b"/hello")
    pair.send()
    window = pair.new.conn.conn.outbound_flow_control_window
    assert pair.old.conn.conn.outbound_flow_control_window == window
    pair.send(_window_update(0, (1 << 31) - 1 - window))  # exactly the largest window
    assert not pair.new.transport.disconnecting
    pair.send(_window_update(0, 1))
    assert pair.old.transport.disconnecting and pair.new.transport.disconnecting
    last = parse_frames(bytes(pair.new.out))[-1]
    assert isinstance(last, GoAwayFrame)
    assert last.error_code == h2.errors.ErrorCodes.FLOW_CONTROL_ERROR


def test_frames_on_our_path_restart_the_idle_timeout() -> None:
    pair = Pair()
    for server in (pair.old, pair.new):
        server.conn.timeOut = 100
        server.conn.callLater = server.clock.callLater
        server.conn.setTimeout(100)
    pair.request(b"/hello")
    pair.send()
    for _ in range(3):
        # A WINDOW_UPDATE alone (nothing to send back) counts as activity too.
        for server in (pair.old, pair.new):
            server.clock.advance(60)
        pair.client.increment_flow_control_window(10)
        pair.send()
        assert not pair.old.transport.disconnecting
        assert not pair.new.transport.disconnecting
    for server in (pair.old, pair.new):
        server.clock.advance(101)
        assert server.transport.disconnecting
    assert pair.new.transport.value() == pair.old.transport.value()  # the same GOAWAY


def test_producers_are_registered_as_twisted_webs_stream_does() -> None:
    """A pull producer is wrapped (``_PullToPush``) and stopped on unregister; a second
    producer is refused; one still registered at ``finish`` is logged and dropped."""
    from twisted.internet._producer_helpers import _PullToPush

    class Pull:
        stopped = False

        def resumeProducing(self) -> None:
            pass

        def stopProducing(self) -> None:
            self.stopped = True

    pair = Pair()
    sid = pair.request(b"/later")
    pair.send()
    request = pair.new.conn.streams[sid]
    pull = Pull()
    request.registerProducer(pull, False)
    assert request.producer is pull and isinstance(request._streamProducer, _PullToPush)
    with pytest.raises(ValueError, match="before previous one"):
        request.registerProducer(Pull(), True)
    request.unregisterProducer()
    assert request.producer is None and request._streamProducer is None
    push = Pull()
    request.registerProducer(push, True)
    assert request._streamProducer is push
    request.setResponseCode(200)
    request.finish()  # logs "Producer was not unregistered" and unregisters it
    assert request.producer is None
    with pytest.raises(RuntimeError, match="finished or disconnected"):
        request.registerProducer(Pull(), True)


@pytest.mark.parametrize("lean", [True, False])
def test_a_timeout_after_the_answer_began_resets_only_that_stream(lean: bool) -> None:
    """Go's timeout handler panics with ErrAbortHandler once headers are out: over HTTP/2 the
    stream is reset (INTERNAL_ERROR, RST_STREAM), the connection and its other streams live."""
    server = Server(lean=lean)
    app = server.site.app
    app.policy.request_timeout = 5

    def began(request: Any, info: RequestInfo) -> Deferred[Response]:
        request.write(b"partial")
        return Deferred()

    app.router.add("/began", began)
    client = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=True, header_encoding=None)
    )
    client.initiate_connection()
    client.send_headers(1, request_headers(b"GET", b"/began", b"x"), end_stream=True)
    events = client.receive_data(server.feed(client.data_to_send()))
    assert any(isinstance(e, h2.events.DataReceived) and e.data == b"partial" for e in events)
    cast(MemoryReactorClock, app.clock).advance(5)
    events = client.receive_data(server.feed(b""))
    (reset,) = [e for e in events if isinstance(e, h2.events.StreamReset)]
    code = h2.errors.ErrorCodes.INTERNAL_ERROR if lean else h2.errors.ErrorCodes.NO_ERROR
    assert (reset.stream_id, reset.error_code) == (1, code)
    assert not server.transport.disconnecting
    client.send_headers(3, request_headers(b"GET", b"/hello", b"x"), end_stream=True)
    events = client.receive_data(server.feed(client.data_to_send()))
    assert [e.data for e in events if isinstance(e, h2.events.DataReceived)] == [b"hi"]


# --- the stock path: Twisted's own connection, what configure_http2 falls back to ----------


class Served:
    """One h2 client and one server of the same App, fast (lean request, fast receive) or
    stock (:class:`StockH2Connection` with twisted.web's request): the answers as decoded."""

    def __init__(self, stock: bool) -> None:
        self.server = Server(lean=not stock)
        if stock:
            # The same server, on Twisted's own connection instead.
            conn: Any = StockH2Connection(reactor=self.server.clock)
            conn.requestFactory = ApiRequest
            conn.site = conn.factory = self.server.site
            conn.timeOut = None
            conn.callLater = self.server.clock.callLater
            self.server.conn = conn
            self.server.transport.clear()
            conn.makeConnection(self.server.transport)
        self.client = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.client.initiate_connection()
        self.events: list[Any] = []
        self.exchange()

    def exchange(self) -> None:
        """Bytes both ways until nothing moves; the reactor's calls due at each step run
        once (Twisted's connection re-arms a ``callLater(0)`` while it waits, so running
        the clock until nothing is due would not end)."""
        clock = self.server.clock
        for _ in range(500):
            data = self.client.data_to_send()
            if data:
                self.server.conn.dataReceived(data)
            due: list[Any] = [c for c in clock.getDelayedCalls() if c.getTime() <= clock.seconds()]
            for call in due:
                clock.calls.remove(call)
                call.called = True
                call.func(*call.args, **call.kw)
            written = self.server.transport.value()
            self.server.transport.clear()
            if written:
                self.events += self.client.receive_data(written)
            if not data and not written:
                return
        raise AssertionError("the exchange did not settle")

    def answers(self) -> dict[int, tuple[bytes, dict[bytes, bytes], bytes, bool]]:
        found: dict[int, Any] = {}
        for event in self.events:
            sid = getattr(event, "stream_id", 0)
            if isinstance(event, h2.events.InformationalResponseReceived):
                found.setdefault(sid, [b"", {}, bytearray(), False, []])[4].append(
                    dict(event.headers)[b":status"]
                )
            elif isinstance(event, h2.events.ResponseReceived):
                headers = dict(event.headers)
                entry = found.setdefault(sid, [b"", {}, bytearray(), False, []])
                entry[0] = headers.pop(b":status")
                # A fresh random UUID on every answer (the client sent none).
                entry[1] = headers
                headers[b"audit-id"] = b"<%d bytes>" % len(headers.pop(b"audit-id", b""))
            elif isinstance(event, h2.events.DataReceived):
                found[sid][2] += event.data
            elif isinstance(event, h2.events.StreamEnded):
                found[sid][3] = True
        return {sid: (e[0], e[1], bytes(e[2]), e[3]) for sid, e in found.items()}


def _everyday(served: Served) -> None:
    for path in (b"/hello", b"/hello", b"/missing", b"/record?a=1&b=2&a=3", b"/stream"):
        sid = served.client.get_next_available_stream_id()
        served.client.send_headers(sid, request_headers(b"GET", path, b"example.test:6443"), True)
    for method, path in ((b"HEAD", b"/hello"), (b"OPTIONS", b"/empty")):
        sid = served.client.get_next_available_stream_id()
        served.client.send_headers(sid, request_headers(method, path, b"example.test:6443"), True)
    served.exchange()


def _bodies(served: Served) -> None:
    client = served.client
    sid = client.get_next_available_stream_id()
    headers = [*request_headers(b"POST", b"/record", b"x"), (b"content-length", b"11")]
    client.send_headers(sid, headers)
    client.send_data(sid, b"hello world", end_stream=True)
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, [*request_headers(b"PUT", b"/record", b"x")])
    client.send_data(sid, b"y" * 3000, end_stream=True)
    served.exchange()


def _unusual_block(served: Served) -> None:
    sid = served.client.get_next_available_stream_id()
    headers = [*request_headers(b"GET", b"/record", b"x"), (b"te", b"trailers")]
    served.client.send_headers(sid, headers, end_stream=True)
    served.exchange()


def _flow_control(served: Served) -> None:
    client = served.client
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, request_headers(b"GET", b"/big", b"x"), end_stream=True)
    served.exchange()
    while not any(isinstance(e, h2.events.StreamEnded) for e in served.events):
        client.increment_flow_control_window(30_000)
        client.increment_flow_control_window(30_000, stream_id=sid)
        served.exchange()


def _expect_continue(served: Served) -> None:
    client = served.client
    sid = client.get_next_available_stream_id()
    headers = [
        *request_headers(b"POST", b"/record", b"x"),
        (b"expect", b"100-continue"),
        (b"content-length", b"2"),
    ]
    client.send_headers(sid, headers)
    served.exchange()
    client.send_data(sid, b"ok", end_stream=True)
    served.exchange()


def _reset(served: Served) -> None:
    client = served.client
    sid = client.get_next_available_stream_id()
    client.send_headers(sid, request_headers(b"GET", b"/later", b"x"), end_stream=True)
    served.exchange()
    client.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
    served.exchange()
    assert served.server.pending.cancelled == 1
    again = client.get_next_available_stream_id()
    client.send_headers(again, request_headers(b"GET", b"/hello", b"x"), end_stream=True)
    served.exchange()


@pytest.mark.parametrize(
    "scenario",
    [_everyday, _bodies, _unusual_block, _flow_control, _expect_continue, _reset],
    ids=lambda f: f.__name__.strip("_"),
)
def test_the_stock_path_gives_the_same_answers(scenario: Callable[[Served], None]) -> None:
    """What a client reads (statuses, headers, bodies, ends of streams, 100 Continue) is the
    same on Twisted's own connection as on the fast path, for the same App: the fallback
    changes the speed, not the answers."""
    answers = {}
    for stock in (False, True):
        served = Served(stock)
        scenario(served)
        answers[stock] = served.answers()
        assert isinstance(served.server.conn, FastH2Connection) is not stock
    assert answers[True] == answers[False]
    assert answers[True]
