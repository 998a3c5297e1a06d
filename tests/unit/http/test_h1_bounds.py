"""Issue 17 on HTTP/1.1 (apiserver.http.h1): the header budget counted on wire bytes, a
request line without a version refused, request bodies bounded in size and time
(apiserver.http.bodylimit), on a memory transport and a fake clock."""

from __future__ import annotations

from typing import Any

import pytest
from test_h1 import Conn, H1Request, go_error

from apiserver.apimachinery.errors import StatusError
from apiserver.http.bodylimit import MAX_REQUEST_BODY_BYTES, UnreadBody

TOO_LARGE = go_error(b"431 Request Header Fields Too Large")
LIMIT = (1 << 20) + 4096


def reads(data: bytes, size: int = 32768) -> list[bytes]:
    """``data`` cut as a TLS transport delivers it (at most 32 KiB a read)."""
    return [data[i : i + size] for i in range(0, len(data), size)]


def send_all(conn: Conn, data: bytes) -> bytes:
    out = b""
    for piece in reads(data):
        out += conn.send(piece)
        if conn.closing:
            break
    return out


def test_whitespace_llhttp_drops_still_counts() -> None:
    """Each field's leading whitespace is bytes on the wire: Go counts it, so do we (the
    old count, name + value + 2, let 1.19 MB of such fields through)."""
    fields = b"".join(b"X-%d:" % i + b" " * 60_000 + b"v\r\n" for i in range(20))
    head = b"GET / HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n"
    assert len(head) > LIMIT
    conn = Conn()
    assert send_all(conn, head) == TOO_LARGE
    assert conn.closing and conn.seen == []


def test_head_just_under_the_budget_in_many_reads_passes() -> None:
    start = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: "
    head = start + b"v" * (LIMIT - len(start) - 4) + b"\r\n\r\n"
    assert len(head) == LIMIT
    conn = Conn()
    out = send_all(conn, head)
    assert out.startswith(b"HTTP/1.1 200 OK")
    assert len(conn.seen) == 1


def test_head_one_byte_over_the_budget_is_431() -> None:
    start = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: "
    head = start + b"v" * (LIMIT - len(start) - 3) + b"\r\n\r\n"
    conn = Conn()
    assert send_all(conn, head) == TOO_LARGE


@pytest.mark.parametrize("line", [b"GET /x\r\n\r\n", b"GET /x\r\nHost: x\r\n\r\n"])
def test_request_line_without_version_is_400(line: bytes) -> None:
    """Go's parseRequestLine refuses it; llhttp would read HTTP/0.9."""
    conn = Conn()
    assert conn.send(line) == go_error(b"400 Bad Request")
    assert conn.closing and conn.seen == []


class Reader:
    """A handler that reads the body as the REST handlers do and answers 200, keeping the
    error the body raised (if any) and the body."""

    def __init__(self) -> None:
        self.errors: list[StatusError] = []
        self.bodies: list[bytes] = []

    def __call__(self, request: H1Request) -> None:
        content: Any = request.content
        try:
            self.bodies.append(content.read())
        except StatusError as error:
            assert isinstance(content, UnreadBody)
            self.errors.append(error)
        request.setResponseCode(200)
        request.setHeader(b"content-length", b"2")
        request.write(b"ok")
        request.finish()


def reading_conn() -> tuple[Conn, Reader]:
    reader = Reader()
    return Conn(handler=reader), reader


def body_error(reader: Reader) -> StatusError:
    assert len(reader.errors) == 1
    return reader.errors[0]


def test_declared_body_over_the_limit_is_handed_on_unread() -> None:
    conn, reader = reading_conn()
    head = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % (50 << 20)
    out = conn.send(head + b"x" * 1000)
    assert len(conn.seen) == 1
    error = body_error(reader)
    assert (error.code, error.reason) == (413, "RequestEntityTooLarge")
    assert error.message == f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"
    # Answered, Connection: close, and the connection closes: the rest is never read.
    assert out.startswith(b"HTTP/1.1 200 OK") and b"Connection: close" in out
    assert conn.closing
    assert conn.send(b"x" * 65536) == b""


def test_endless_chunked_body_stops_at_the_limit() -> None:
    conn, reader = reading_conn()
    conn.send(b"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n" % 65536 + b"y" * 65536 + b"\r\n"
    sent = 0
    while not conn.seen:
        conn.send(chunk)
        sent += 65536
        assert sent < 2 * MAX_REQUEST_BODY_BYTES
    assert sent > MAX_REQUEST_BODY_BYTES
    assert body_error(reader).code == 413
    assert conn.closing


def test_body_at_the_limit_is_kept() -> None:
    conn, reader = reading_conn()
    body = b"z" * MAX_REQUEST_BODY_BYTES
    head = b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    send_all(conn, head + body)
    assert len(conn.seen) == 1
    assert reader.bodies == [body] and reader.errors == []


def test_trickled_body_is_cut_at_the_request_timeout() -> None:
    conn, reader = reading_conn()
    conn.channel.bodyTimeout = 60.0
    conn.send(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
    for _ in range(59):
        conn.clock.advance(1)
        conn.send(b"a")
    assert conn.seen == []
    conn.clock.advance(2)
    conn.send(b"a")
    assert len(conn.seen) == 1
    error = body_error(reader)
    assert (error.code, error.reason) == (504, "Timeout")
    assert conn.closing


def test_no_body_deadline_without_a_request_timeout() -> None:
    conn = Conn()
    conn.send(b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n")
    conn.clock.advance(30)
    conn.send(b"a")
    conn.clock.advance(30)
    assert conn.send(b"bc").startswith(b"HTTP/1.1 200 OK")


def test_twisted_request_path_keeps_at_most_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP/2 streams of an unusual header shape (and the fallback connection) are served by
    twisted.web's Request (``ApiRequest``): the body is bounded there too."""
    from twisted.web.test.requesthelper import DummyChannel

    from apiserver.http import site as site_module

    channel: Any = DummyChannel()
    channel.site = type("S", (), {"app": object()})()
    request = site_module.ApiRequest(channel)
    request.gotLength(None)
    piece = b"q" * 65536
    for _ in range(100):  # 6.25 MiB
        request.handleContentChunk(piece)
    content: Any = request.content
    assert content.tell() <= MAX_REQUEST_BODY_BYTES
    served: list[Any] = []
    monkeypatch.setattr(site_module, "serve", lambda req, app: served.append(req.content))
    request.process()
    (body,) = served
    assert isinstance(body, UnreadBody)
    with pytest.raises(StatusError) as caught:
        body.read()
    assert caught.value.code == 413
