"""The HTTP/1.1 layer alone: microseconds of CPU per request, in-process, without TLS.

Why: the request rates of ``bench/api_bench.py`` move with the load of the machine, the TLS
layer and the API's own work; this isolates what the server protocol costs. The same small
App (one route answering a fixed ~300-byte JSON body through ``App.write``, with the
lifecycle gate, so ``notifyFinish`` is used as in the daemon) is served by:

- ``twisted``: twisted.web's ``HTTPChannel`` with our ``ApiRequest`` (the path before
  :mod:`apiserver.http.h1`);
- ``h1``: :class:`apiserver.http.h1.H1Channel` with ``ApiH1Request`` (what ``ApiSite``
  builds now);

each over a ``StringTransport`` on one keep-alive connection, the request bytes fed one
request per ``dataReceived`` (like h2load ``-m 1``). ``--parser`` times the parsers alone
(httptools against the line parsing twisted.web does) on the same request bytes.

Usage: ``python bench/h1_bench.py [--requests N] [--rounds R] [--parser]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))

from twisted.internet.task import Clock  # noqa: E402
from twisted.internet.testing import StringTransport  # noqa: E402
from twisted.web import http  # noqa: E402

from apiserver.http.app import App, RequestInfo, Router, ServingPolicy  # noqa: E402
from apiserver.http.response import Response  # noqa: E402
from apiserver.http.site import ApiRequest, ApiSite  # noqa: E402
from apiserver.service.lifecycle import Lifecycle  # noqa: E402

BODY = b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success"}' * 4
PATH = b"/apis/events.k8s.io/v1/namespaces/bench-get/events/bench-get-1"
REQUEST = (
    b"GET " + PATH + b" HTTP/1.1\r\n"
    b"Host: 127.0.0.1:6443\r\n"
    b"User-Agent: h2load nghttp2/1.52.0\r\n"
    b"Accept: application/json\r\n"
    b"Accept-Encoding: gzip, deflate\r\n\r\n"
)


def make_site(body_size: int = 0) -> tuple[ApiSite, Clock]:
    """The benchmark's App, answering BODY (or ``body_size`` bytes of it, repeated)."""
    clock = Clock()
    router = Router()
    body = (BODY * (body_size // len(BODY) + 1))[:body_size] if body_size else BODY
    answer = Response(200, (("Content-Type", "application/json"),), body)

    def handler(request: Any, info: RequestInfo) -> Response:
        return answer

    router.add(PATH.decode(), handler)
    app = App(router, clock, ServingPolicy(), Lifecycle(clock))
    return ApiSite(app, reactor=clock), clock


def twisted_channel(site: ApiSite, clock: Clock) -> Any:
    channel: Any = http.HTTPChannel()
    channel.requestFactory = ApiRequest
    channel.site = site
    channel.factory = site
    channel.timeOut = site.timeOut
    channel.callLater = clock.callLater
    return channel


def run(kind: str, requests: int, body_size: int = 0) -> float:
    site, clock = make_site(body_size)
    channel = twisted_channel(site, clock) if kind == "twisted" else site.buildProtocol(None)
    transport = StringTransport()
    channel.makeConnection(transport)
    receive = channel.dataReceived
    clear = transport.clear
    receive(REQUEST)
    assert transport.value().startswith(b"HTTP/1.1 200 OK"), transport.value()
    clear()
    started = time.perf_counter()
    for _ in range(requests):
        receive(REQUEST)
        clear()
    return (time.perf_counter() - started) / requests * 1e6


def parse_only(kind: str, requests: int) -> float:
    """Parsing alone: httptools with header callbacks, or twisted's LineReceiver split."""
    if kind == "httptools":
        import httptools

        class Sink:
            def on_url(self, url: bytes) -> None:
                pass

            def on_header(self, name: bytes, value: bytes) -> None:
                pass

            def on_message_complete(self) -> None:
                pass

        parser = httptools.HttpRequestParser(Sink())
        feed = parser.feed_data
        started = time.perf_counter()
        for _ in range(requests):
            feed(REQUEST)
        return (time.perf_counter() - started) / requests * 1e6

    if kind == "bytes":
        return parse_bytes(requests)

    from twisted.protocols.basic import LineReceiver

    class Lines(LineReceiver):
        delimiter = b"\r\n"
        MAX_LENGTH = 16384

        def lineReceived(self, line: bytes) -> None:
            if line:
                line.split(b":", 1)

    receive = Lines().dataReceived
    started = time.perf_counter()
    for _ in range(requests):
        receive(REQUEST)
    return (time.perf_counter() - started) / requests * 1e6


def parse_bytes(requests: int) -> float:
    """The alternative to llhttp: a careful pure-Python parse of a head that arrived whole
    (request line, token-checked names, values without CR/LF/NUL, stripped), the fast path
    a hand-written parser would have; bodies, chunking and partial reads would add more."""
    import re

    token = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
    line_re = re.compile(rb"([A-Z]+) (\S+) HTTP/(\d)\.(\d)")

    def parse(data: bytes) -> dict[bytes, list[bytes]]:
        end = data.find(b"\r\n\r\n")
        lines = data[:end].split(b"\r\n")
        match = line_re.fullmatch(lines[0])
        assert match is not None
        headers: dict[bytes, list[bytes]] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep or token.fullmatch(name) is None:
                raise ValueError(line)
            value = value.strip(b" \t")
            if b"\x00" in value or b"\r" in value or b"\n" in value:
                raise ValueError(line)
            headers.setdefault(name, []).append(value)
        return headers

    started = time.perf_counter()
    for _ in range(requests):
        parse(REQUEST)
    return (time.perf_counter() - started) / requests * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parser", action="store_true", help="also time the parsers alone")
    args = parser.parse_args(argv)
    kinds = ["twisted", "h1"]
    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for kind in kinds:
            us = run(kind, args.requests)
            best[kind] = min(best.get(kind, us), us)
    for kind in kinds:
        print(f"{kind:8} {best[kind]:7.1f} us/request (best of {args.rounds})")
    print(f"h1/twisted: {best['h1'] / best['twisted']:.2f} of the CPU time")
    if args.parser:
        for kind in ("twisted", "bytes", "httptools"):
            us = min(parse_only(kind, args.requests) for _ in range(args.rounds))
            print(f"parse {kind:10} {us:6.2f} us/request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
