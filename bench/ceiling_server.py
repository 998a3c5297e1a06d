"""The throughput ceiling: the fastest a twisted.web server can answer over our TLS setup.

``bench/api_bench.py`` runs this next to the real daemon and divides the API's request rates
by this server's: the ratio says how much of the budget the API's own work (routing, filters,
storage, encoding) takes, independently of how fast the machine is.

What it is, and why:

- A bare ``twisted.web.server.Site`` with one leaf resource that answers every path and
  method with the same ~300-byte ``Status`` JSON: no routing, no filter chain, no storage.
- The TLS layer is the project's own: ``apiserver.tls.context.build_server_context`` with a
  self-signed pair from ``apiserver.tls.selfsigned.ensure_self_signed``, ALPN ``h2`` then
  ``http/1.1``, a client certificate requested (as the daemon does), and the same
  ``TLSMemoryBIOFactory`` wrapping and HTTP/2 stream setting as ``ListenerService``.
- ``Site.log`` is a no-op (the access log alone costs a large share of throughput).
- HTTP/2 is Twisted's own ``H2Connection`` unless ``--fast-h2`` installs the project's
  (``apiserver.http.h2.configure_http2``, as the daemon does), to measure both.
- TLS is Twisted's own ``BufferingTLSTransport`` unless ``--lean-tls`` puts the daemon's
  direct OpenSSL calls under it (``apiserver.tls.lean``, as ``ListenerService`` does): the
  default keeps the ceiling bare Twisted, the option shows what the same TLS saves it.
- It runs as its own process (the same reactor as ``twistd``: Twisted's default), so the
  benchmark measures it exactly like the daemon, with the same h2load settings.

Usage: ``python bench/ceiling_server.py --port P --cert-dir DIR [--fast-h2] [--lean-tls]``;
it prints ``READY <port>`` on standard output once it listens and stops on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))

from twisted.internet import reactor as _reactor  # noqa: E402
from twisted.protocols.tls import TLSMemoryBIOFactory  # noqa: E402
from twisted.web import resource, server  # noqa: E402

from apiserver.http.h2 import configure_http2  # noqa: E402
from apiserver.tls.context import build_server_context  # noqa: E402
from apiserver.tls.lean import lean_tls_protocol  # noqa: E402
from apiserver.tls.selfsigned import ensure_self_signed  # noqa: E402

#: A plausible Status object, ~300 bytes like a small API answer.
BODY = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success",'
    b'"message":"the ceiling server answers every request with this fixed body, '
    b'which is about as long as a small API response","reason":"",'
    b'"details":{"name":"ceiling","group":"bench.example.com","kind":"ceiling"},'
    b'"code":200}'
)


class FixedResource(resource.Resource):
    """Answers every path and method with :data:`BODY`; a leaf, so no child lookup."""

    isLeaf = True

    def render(self, request: Any) -> bytes:
        request.setHeader(b"content-type", b"application/json")
        return BODY


class QuietSite(server.Site):
    """A Site without the per-request access log."""

    def log(self, request: Any) -> None:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--bind-address", default="127.0.0.1")
    parser.add_argument("--cert-dir", required=True, help="where apiserver.crt/.key live")
    parser.add_argument(
        "--fast-h2",
        action="store_true",
        help="serve HTTP/2 with the daemon's connection class instead of bare Twisted's",
    )
    parser.add_argument(
        "--lean-tls",
        action="store_true",
        help="serve TLS with the daemon's transport (apiserver.tls.lean) instead of Twisted's",
    )
    args = parser.parse_args(argv)

    cert, key = ensure_self_signed(args.cert_dir, args.bind_address, args.bind_address)
    creator = build_server_context(cert_file=cert, key_file=key, request_client_cert=True)
    if args.fast_h2:
        configure_http2(0)
    site = QuietSite(FixedResource())
    site.displayTracebacks = False
    reactor: Any = _reactor
    factory = TLSMemoryBIOFactory(creator, False, site)
    if args.lean_tls:
        factory.protocol = lean_tls_protocol(factory.protocol)
    port = reactor.listenTCP(args.port, factory, 1024, args.bind_address)
    print(f"READY {port.getHost().port} pid={os.getpid()}", flush=True)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
