"""Helpers shared by the HTTP/1.1 and HTTP/2 tests."""

from __future__ import annotations

from typing import Any

import pytest
from hyperframe.frame import Frame

from apiserver.http.app import STREAMING, RequestInfo


def streaming(request: Any, info: RequestInfo) -> object:
    """A route that streams its answer in pieces, as a watch does."""
    request.setHeader(b"content-type", b"application/json")
    request.write(b"")
    request.write(b'{"type":"ADDED"}\n')
    request.write(b'{"type":"DELETED"}\n')
    request.finish()
    return STREAMING


def request_headers(method: bytes, path: bytes, authority: bytes) -> list[tuple[bytes, bytes]]:
    """The pseudo-header fields of an HTTP/2 request, as h2 clients order them."""
    return [
        (b":method", method),
        (b":scheme", b"https"),
        (b":authority", authority),
        (b":path", path),
    ]


def parse_frames(data: bytes) -> list[Frame]:
    """Split server bytes into HTTP/2 frames (the preface's SETTINGS included)."""
    frames: list[Frame] = []
    view = memoryview(data)
    while view:
        frame, length = Frame.parse_frame_header(view[:9])
        frame.parse_body(view[9 : 9 + length])
        frames.append(frame)
        view = view[9 + length :]
    return frames


def fake_buffering_tls(monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[tuple[str, Any]]]:
    """A ``BufferingTLSTransport`` that records, in order, what leaves Twisted's small-write
    buffer (``("buffered", bytes)``, on flush) and what is written to TLS directly
    (``("direct", data)``)."""
    from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOProtocol

    order: list[tuple[str, Any]] = []

    class Aggregator:
        def __init__(self) -> None:
            self.waiting: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.waiting.append(data)

        def flush(self) -> None:
            if self.waiting:
                order.append(("buffered", b"".join(self.waiting)))
                self.waiting.clear()

    tls: Any = BufferingTLSTransport.__new__(BufferingTLSTransport)
    tls._aggregator = Aggregator()
    tls.write = tls._aggregator.write
    monkeypatch.setattr(
        TLSMemoryBIOProtocol, "write", lambda self, data: order.append(("direct", data))
    )
    return tls, order
