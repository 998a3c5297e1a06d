"""The HTTP/2 layer alone, against HTTP/1.1: microseconds of CPU per request, in-process,
without TLS.

Why: ``bench/api_bench.py`` holds HTTP/2 to 0.8 of HTTP/1.1's request rate for the same
call, but its figures move with the machine's load by more than the differences between two
builds. This isolates what each server protocol costs. The small App of ``h1_bench.py`` (one
route answering a fixed body through ``App.write``, with the lifecycle gate, so
``notifyFinish`` is used as in the daemon) is served through ``ApiSite.buildProtocol`` on a
``StringTransport``:

- ``h1``: one keep-alive HTTP/1.1 connection, one request per ``dataReceived`` (like
  h2load ``--h1 -m 1``), as ``h1_bench.py`` runs it;
- ``h2``: one HTTP/2 connection (ALPN ``h2``, so :class:`apiserver.http.h2.FastH2Connection`
  as the daemon runs it), ``--streams`` requests per ``dataReceived`` (like h2load
  ``-m 4``: a client sends the next requests as the answers arrive), the request frames as
  nghttp2 sends them (HEADERS with END_STREAM, the same HPACK block every time once the
  fields are indexed, a connection WINDOW_UPDATE when half the window is used).

``--body`` sets the size of the answer: ``--body 656523`` is the LIST of 500 events of
``api_bench.py``. Usage: ``python bench/h2_bench.py [--requests N] [--rounds R] [--body B]``.
"""

from __future__ import annotations

import argparse
import struct
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for entry in (str(REPO), str(REPO / "src")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import hpack  # noqa: E402
from bench.h1_bench import BODY, PATH, make_site, run  # noqa: E402
from twisted.internet.testing import StringTransport  # noqa: E402

from apiserver.http.h2 import configure_http2  # noqa: E402

CLIENT_WINDOW = (1 << 30) - 1
_FRAME = struct.Struct(">HBBBL")


def frame(kind: int, flags: int, stream: int, payload: bytes) -> bytes:
    size = len(payload)
    return _FRAME.pack(size >> 8, size & 0xFF, kind, flags, stream) + payload


class H2Client:
    """Request frames as nghttp2 (h2load) sends them, on one connection."""

    def __init__(self) -> None:
        self.conn = h2.connection.H2Connection(
            h2.config.H2Configuration(client_side=True, header_encoding=None)
        )
        self.conn.initiate_connection()
        self.conn.update_settings({4: CLIENT_WINDOW, 2: 0})
        self.conn.increment_flow_control_window(CLIENT_WINDOW - 65535)
        self.headers = [
            (b":path", PATH),
            (b":scheme", b"https"),
            (b":authority", b"127.0.0.1:6443"),
            (b":method", b"GET"),
            (b"user-agent", b"h2load nghttp2/1.52.0"),
            (b"accept", b"application/json"),
        ]
        self.block = b""
        self.next_id = 1
        self.received = 0

    def preface(self) -> bytes:
        return self.conn.data_to_send()

    def first_request(self) -> bytes:
        """The first request, through h2 (it fills the HPACK table); then the block that
        every later request repeats."""
        self.conn.send_headers(self.next_id, self.headers, end_stream=True)
        self.next_id += 2
        data = self.conn.data_to_send()
        encoder = self.conn.encoder
        self.block = encoder.encode(self.headers)
        return data

    def requests(self, count: int) -> bytes:
        out = []
        for _ in range(count):
            out.append(frame(0x1, 0x5, self.next_id, self.block))
            self.next_id += 2
        return b"".join(out)

    def consumed(self, size: int) -> bytes:
        """A connection WINDOW_UPDATE once half the window is used, as nghttp2 sends it."""
        self.received += size
        if self.received < CLIENT_WINDOW // 2:
            return b""
        increment, self.received = self.received, 0
        return frame(0x8, 0, 0, struct.pack(">L", increment))


def parse(data: bytes) -> list[tuple[int, int, int, bytes]]:
    """(type, flags, stream, payload) of every frame in ``data``."""
    frames = []
    offset = 0
    while offset < len(data):
        high, low, kind, flags, stream = _FRAME.unpack_from(data, offset)
        size = (high << 8) | low
        frames.append((kind, flags, stream, data[offset + 9 : offset + 9 + size]))
        offset += 9 + size
    return frames


def check(data: bytes, decoder: Any, streams: int, body: int) -> None:
    """Every answer complete: ``streams`` responses of status 200 and ``body`` bytes."""
    headers = sizes = ended = 0
    for kind, flags, _, payload in parse(data):
        if kind == 0x1:
            assert dict(decoder.decode(payload, raw=True))[b":status"] == b"200"
            headers += 1
        elif kind == 0x0:
            sizes += len(payload)
            ended += flags & 1
    assert (headers, ended, sizes) == (streams, streams, streams * body), (headers, ended, sizes)


def run_h2(requests: int, body: int, streams: int) -> float:
    site, clock = make_site(body)
    channel = site.buildProtocol(None)
    transport = StringTransport()
    transport.negotiatedProtocol = b"h2"  # type: ignore[attr-defined]
    channel.makeConnection(transport)
    client = H2Client()
    channel.dataReceived(client.preface())
    channel._h2._reactor = clock  # built by the ALPN switch with the global reactor
    channel.dataReceived(client.first_request())
    clock.advance(0)
    # Every answer is checked (HPACK decoded, frames counted), outside the timed part.
    size = body or len(BODY)
    decoder = hpack.Decoder()
    check(transport.value(), decoder, 1, size)
    transport.clear()
    receive = channel.dataReceived
    value = transport.value
    clear = transport.clear
    advance = clock.advance
    clock_ = time.perf_counter
    rounds = max(1, requests // streams)
    elapsed = 0.0
    for _ in range(rounds):
        data = client.requests(streams)
        started = clock_()
        receive(data)
        advance(0)
        elapsed += clock_() - started
        out = value()
        clear()
        check(out, decoder, streams, size)
        update = client.consumed(len(out))
        if update:
            started = clock_()
            receive(update)
            elapsed += clock_() - started
    return elapsed / (rounds * streams) * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--body", type=int, default=0, help="answer size (0: ~300 bytes)")
    parser.add_argument("--streams", type=int, default=4, help="requests per read over h2")
    parser.add_argument("--only", choices=("h1", "h2"), help="one protocol (for a profiler)")
    args = parser.parse_args(argv)
    configure_http2(0)
    kinds = [args.only] if args.only else ["h1", "h2"]
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for kind in kinds:
            if kind == "h1":
                us = run("h1", args.requests, args.body)
            else:
                us = run_h2(args.requests, args.body, args.streams)
            best[kind] = min(best.get(kind, us), us)
    for kind in kinds:
        print(f"{kind:4} {best[kind]:8.1f} us/request (best of {args.rounds})")
    if len(kinds) == 2:
        print(f"h2/h1: {best['h2'] / best['h1']:.2f} of the CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
