"""A watch stream's output goes through the coalescer: in order, one write a turn, and
everything buffered leaves before the stream is finished."""

from __future__ import annotations

from typing import Any

from tests.unit.fake_request import FakeRequest as CompleteRequest
from twisted.internet.task import Clock

from apiserver.api.events.encoding import EncodedEvents
from apiserver.api.events.watchstream import WatchStream
from apiserver.http.coalesce import WriteCoalescer


class FakeRequest(CompleteRequest):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.fail_writes = False

    def write(self, data: bytes) -> None:
        if self.fail_writes:
            raise RuntimeError("connection gone")
        self.writes.append(data)

    def finish(self) -> None:
        self.finished = 1


class Out:
    kind = "json"
    media_type = "application/json"
    version = "v1"


def make_stream(coalescer: WriteCoalescer, clock: Clock) -> tuple[WatchStream, FakeRequest]:
    request = FakeRequest()
    stream = WatchStream(
        request,
        registry=Any,  # type: ignore[arg-type]
        namespace=None,
        keep=None,
        out=Out(),
        clock=clock,
        timeout=60.0,
        resource_version="",
        send_initial_events=False,
        allow_bookmarks=True,
        include_object="",
        pretty=False,
        to_v1=lambda obj, **_: obj,
        encoded=EncodedEvents(),
        coalescer=coalescer,
    )
    return stream, request


def test_lines_are_written_together_on_the_next_turn() -> None:
    clock = Clock()
    stream, request = make_stream(WriteCoalescer(clock), clock)
    stream._write_bytes(b"one\n")
    stream._write({"type": "BOOKMARK", "object": {}})
    assert request.writes == []
    clock.advance(0)
    assert request.writes == [b'one\n{"type":"BOOKMARK","object":{}}\n']


def test_end_flushes_before_finishing() -> None:
    clock = Clock()
    stream, request = make_stream(WriteCoalescer(clock), clock)
    stream._write_bytes(b"last\n")
    stream.end()
    assert request.writes == [b"last\n"]
    assert request.finished
    clock.advance(0)  # the coalescer's run finds nothing more to write
    assert request.writes == [b"last\n"]


def test_a_gone_client_drops_the_buffer() -> None:
    clock = Clock()
    stream, request = make_stream(WriteCoalescer(clock), clock)
    stream._write_bytes(b"lost\n")
    stream._client_gone(None)
    clock.advance(0)
    assert request.writes == []


def test_a_failing_write_ends_the_stream_once() -> None:
    clock = Clock()
    stream, request = make_stream(WriteCoalescer(clock), clock)
    request.fail_writes = True
    stream._write_bytes(b"x\n")
    clock.advance(0)
    assert stream.ended
    assert request.finished
