"""Memory one idle TLS server connection holds in OpenSSL, without any HTTP or Twisted.

Usage: ``python bench/tls_memory.py [--count N]`` (a few seconds).

Why: the target for an idle HTTP/1.1 watch is 30 KB of server memory, and an HTTP/1.1 watch
holds its own TLS connection. This measures the floor that TLS alone sets: ``N`` server-side
``SSL`` objects of pyOpenSSL (over the OpenSSL that ``cryptography`` bundles, configured as
``apiserver.tls.context`` does: ``SSL_MODE_RELEASE_BUFFERS``, TLS 1.2-1.3) are created and
each completes a handshake with a client in memory (memory BIOs, no sockets), exchanges one
small request and answer, and is kept while the client side is freed. The growth of the
process's resident memory divided by ``N`` is what one idle connection costs in OpenSSL.

Rows: right after ``SSL_new`` (no handshake); TLS 1.3 with the client offering OpenSSL's
default groups (X25519MLKEM768 first, what Go >= 1.24 clients such as kubectl offer too);
TLS 1.3 with a client offering X25519 only (clients on an OpenSSL without ML-KEM, such as
the Python client on Debian 12); TLS 1.2.
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from apiserver.tls.selfsigned import generate_self_signed_cert_key


def rss_kib() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def server_context(cert: x509.Certificate, key: Any, max_version: int) -> SSL.Context:
    context = SSL.Context(SSL.TLS_SERVER_METHOD)
    context.set_min_proto_version(SSL.TLS1_2_VERSION)
    context.set_max_proto_version(max_version)
    context.set_mode(SSL.MODE_RELEASE_BUFFERS)
    context.use_certificate(cert)
    context.use_privatekey(key)
    return context


def client_context(groups: bytes | None) -> SSL.Context:
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    if groups is not None:
        ffi_lib: Any = SSL._lib
        if ffi_lib.SSL_CTX_set1_curves_list(context._context, groups) != 1:
            raise SystemExit(f"this OpenSSL does not take the groups {groups!r}")
    return context


def pump(client: SSL.Connection, server: SSL.Connection) -> None:
    for _ in range(10):
        for ours, theirs in ((client, server), (server, client)):
            try:
                ours.do_handshake()
            except SSL.WantReadError:
                pass
            try:
                theirs.bio_write(ours.bio_read(65536))
            except SSL.WantReadError:
                pass


def per_connection(count: int, server: SSL.Context, client: SSL.Context | None) -> float:
    kept: list[SSL.Connection] = []
    gc.collect()
    before = rss_kib()
    for _ in range(count):
        conn = SSL.Connection(server, None)
        conn.set_accept_state()
        if client is not None:
            peer = SSL.Connection(client, None)
            peer.set_connect_state()
            pump(peer, conn)
            peer.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            conn.bio_write(peer.bio_read(65536))
            conn.recv(65536)
            conn.send(b"x" * 1000)
            peer.bio_write(conn.bio_read(65536))
            peer.recv(65536)
            del peer
        kept.append(conn)
    gc.collect()
    return (rss_kib() - before) / count


ROWS = (
    "after SSL_new, no handshake",
    "TLS 1.3, client offers default groups",
    "TLS 1.3, client offers X25519 only",
    "TLS 1.2",
)


def measure(row: int, count: int) -> float:
    chain, key_pem = generate_self_signed_cert_key(
        "127.0.0.1", ["localhost"], [ipaddress.ip_address("127.0.0.1")]
    )
    cert = x509.load_pem_x509_certificate(chain)
    key = serialization.load_pem_private_key(key_pem, None)
    server = server_context(cert, key, SSL.TLS1_2_VERSION if row == 3 else SSL.TLS1_3_VERSION)
    client = (None, client_context(None), client_context(b"X25519"), client_context(None))[row]
    return per_connection(count, server, client)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--row", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.row is not None:
        print(f"{measure(args.row, args.count):.1f}")
        return 0
    print(
        f"{SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode()} (pyOpenSSL); "
        f"ssl module: {ssl.OPENSSL_VERSION}; {args.count} connections, one process per row"
    )
    for row, label in enumerate(ROWS):
        # A process each: memory freed by one row would be reused by the next.
        done = subprocess.run(
            [sys.executable, __file__, "--row", str(row), "--count", str(args.count)],
            capture_output=True,
            text=True,
            check=True,
        )
        print(f"{label:42s} {float(done.stdout):6.1f} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
