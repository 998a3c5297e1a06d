"""A real listener: ``Site`` over TLS with our context factory, driven by curl and ``ssl``.

Covers what only a real stack shows: ALPN really switching Twisted to HTTP/2, the client
certificate reaching the request over HTTP/1.1 *and* HTTP/2 (where ``request.transport`` is
None), SNI over a socket, and the minimum TLS version against a real TLS 1.1 client.
"""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_twisted
from cryptography import x509
from tls_helpers import client_cert, common_name, issue, server_cert, write_cert, write_pair
from twisted.internet import reactor as _reactor
from twisted.internet.threads import deferToThread
from twisted.internet.utils import getProcessOutputAndValue
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.web import http
from twisted.web.resource import Resource
from twisted.web.server import Request, Site

from apiserver.http.app import App, RequestInfo, Router, ServingPolicy
from apiserver.http.h2 import configure_http2
from apiserver.http.response import Response, text
from apiserver.http.site import ApiSite
from apiserver.tls.context import ServerContextFactory, build_server_context
from apiserver.tls.peercert import peer_certificate, peer_chain
from apiserver.tls.sni import SniCertKey

the_reactor: Any = _reactor
CURL = shutil.which("curl")
needs_curl = pytest.mark.skipif(CURL is None, reason="curl is not installed")


class WhoAmI(Resource):
    """Answers ``cn=<client CN or none> chain=<n> transport=<set|none>``."""

    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        cert = peer_certificate(request)
        name = common_name(cert) if cert is not None else "none"
        transport = "none" if request.transport is None else "set"
        chain = len(peer_chain(request))
        return f"cn={name} chain={chain} transport={transport}".encode()


@pytest.fixture
def pki(tmp_path: Path) -> dict[str, Any]:
    """Serving pair, a client CA with an intermediate, a stranger CA and client pairs."""
    serving = write_pair(tmp_path, "serving", server_cert("default.example", ips=["127.0.0.1"]))
    client_root = issue("client-root", ca=True)
    intermediate = issue("client-intermediate", ca=True, issuer=client_root)
    stranger = issue("stranger-ca", ca=True)
    alice = write_pair(tmp_path, "alice", client_cert("alice", intermediate), chain=[intermediate])
    mallory = write_pair(tmp_path, "mallory", client_cert("mallory", stranger))
    return {
        "dir": tmp_path,
        "serving": serving,
        "client_ca_files": [write_cert(tmp_path, "client-ca.crt", client_root)],
        "alice": alice,
        "mallory": mallory,
    }


class Server:
    """One listening port on 127.0.0.1 with the given factory."""

    def __init__(self, factory: ServerContextFactory, site: Site | None = None) -> None:
        if site is None:
            site = Site(WhoAmI())
            site.displayTracebacks = False
        tls_factory: Any = TLSMemoryBIOFactory(factory, False, site)
        self.port: Any = the_reactor.listenTCP(0, tls_factory, interface="127.0.0.1")
        self.number: int = self.port.getHost().port
        self.url = f"https://127.0.0.1:{self.number}/"


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.port.stopListening()


def start(servers: list[Server], **kwargs: Any) -> Server:
    server = Server(build_server_context(**kwargs))
    servers.append(server)
    return server


SEPARATOR = "\n--write-out--\n"


async def curl(*args: str, write_out: str = "%{http_version}") -> tuple[str, str]:
    """Run curl; return (body, the ``-w`` output). Fails the test on a curl error."""
    assert CURL is not None
    out, err, code = await getProcessOutputAndValue(
        CURL,
        ["-sS", "-k", "--max-time", "20", "-w", SEPARATOR + write_out, *args],
        env=dict(os.environ),
    )
    assert code == 0, err.decode()
    body, _, written = out.decode().rpartition(SEPARATOR)
    return body, written


def fetch_certificate(port: int, server_name: str | None) -> x509.Certificate:
    """The server's leaf as seen by a stdlib TLS client (blocking; run it in a thread)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection(("127.0.0.1", port), timeout=20) as raw,
        context.wrap_socket(raw, server_hostname=server_name) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def tls11_handshake(port: int) -> str:
    """Handshake with a client limited to TLS 1.1; return the negotiated version."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # TLS 1.1 is the point here
        context.minimum_version = ssl.TLSVersion.TLSv1_1
        context.maximum_version = ssl.TLSVersion.TLSv1_1
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    with (
        socket.create_connection(("127.0.0.1", port), timeout=20) as raw,
        context.wrap_socket(raw) as tls,
    ):
        version = tls.version()
    assert version is not None
    return version


@needs_curl
@pytest_twisted.ensureDeferred
async def test_client_certificate_over_http11_and_h2(
    pki: dict[str, Any], servers: list[Server]
) -> None:
    server = start(
        servers,
        cert_file=pki["serving"][0],
        key_file=pki["serving"][1],
        client_ca_files=pki["client_ca_files"],
    )
    cert, key = pki["alice"]

    body, version = await curl("--http1.1", "--cert", cert, "--key", key, server.url)
    assert (body, version) == ("cn=alice chain=2 transport=set", "1.1")

    body, version = await curl("--http2", "--cert", cert, "--key", key, server.url)
    # Under h2 request.transport is None: the certificate came through the H2Connection.
    assert (body, version) == ("cn=alice chain=2 transport=none", "2")


@needs_curl
@pytest_twisted.ensureDeferred
async def test_client_certificate_reaches_the_apps_requests_over_http11_and_h2(
    pki: dict[str, Any], servers: list[Server], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's own stack: ``ApiSite`` with our HTTP/1.1 channel and, over h2, our
    connection class and lean requests (``request.channel._conn.transport``)."""
    monkeypatch.setattr(http, "H2Connection", http.H2Connection)
    configure_http2(0)

    def whoami(request: Any, info: RequestInfo) -> Response:
        cert = peer_certificate(request)
        name = common_name(cert) if cert is not None else "none"
        transport = "none" if request.transport is None else "set"
        kind = type(request).__name__
        return text(200, f"cn={name} chain={len(peer_chain(request))} {transport} {kind}")

    router = Router()
    router.add("/", whoami)
    big = "".join(f"{n:07d}\n" for n in range(40_000))  # 320 kB: written to TLS as a view
    router.add("/big", lambda request, info: text(200, big))
    site = ApiSite(App(router, the_reactor, ServingPolicy()))
    context = build_server_context(
        cert_file=pki["serving"][0],
        key_file=pki["serving"][1],
        client_ca_files=pki["client_ca_files"],
    )
    server = Server(context, site)
    servers.append(server)
    cert, key = pki["alice"]
    body, version = await curl("--http1.1", "--cert", cert, "--key", key, server.url)
    assert (body, version) == ("cn=alice chain=2 set ApiH1Request", "1.1")
    body, version = await curl("--http2", "--cert", cert, "--key", key, server.url)
    assert (body, version) == ("cn=alice chain=2 none ApiH2Request", "2")
    body, version = await curl("--http2", server.url)
    assert (body, version) == ("cn=none chain=0 none ApiH2Request", "2")
    for protocol in ("--http1.1", "--http2"):
        body, _ = await curl(protocol, server.url + "big")
        assert body == big


@needs_curl
@pytest_twisted.ensureDeferred
async def test_unknown_and_missing_client_certificates_are_accepted(
    pki: dict[str, Any], servers: list[Server]
) -> None:
    server = start(
        servers,
        cert_file=pki["serving"][0],
        key_file=pki["serving"][1],
        client_ca_files=pki["client_ca_files"],
    )
    cert, key = pki["mallory"]
    for protocol in ("--http1.1", "--http2"):
        body, _ = await curl(protocol, "--cert", cert, "--key", key, server.url)
        assert body.startswith("cn=mallory chain=1 ")
        body, _ = await curl(protocol, server.url)
        assert body.startswith("cn=none chain=0 ")


@needs_curl
@pytest_twisted.ensureDeferred
async def test_alpn_selects_h2_unless_disabled(pki: dict[str, Any], servers: list[Server]) -> None:
    with_h2 = start(servers, cert_file=pki["serving"][0], key_file=pki["serving"][1])
    without_h2 = start(
        servers, cert_file=pki["serving"][0], key_file=pki["serving"][1], http2=False
    )
    _, version = await curl("--http2", with_h2.url)
    assert version == "2"
    _, version = await curl("--http2", without_h2.url)
    assert version == "1.1"


@needs_curl
@pytest_twisted.ensureDeferred
async def test_sni_selects_certificates(pki: dict[str, Any], servers: list[Server]) -> None:
    directory: Path = pki["dir"]
    foo = write_pair(directory, "foo", server_cert("foo.example"))
    wild = write_pair(directory, "wild", server_cert("wild"))
    server = start(
        servers,
        cert_file=pki["serving"][0],
        key_file=pki["serving"][1],
        sni=[SniCertKey(*foo), SniCertKey(wild[0], wild[1], names=("*.bar.example",))],
    )
    expectations = {
        "foo.example": "foo.example",
        "x.bar.example": "wild",
        "other.example": "default.example",
        None: "default.example",  # no SNI, and no name for 127.0.0.1
    }
    for name, expected in expectations.items():
        cert = await deferToThread(fetch_certificate, server.number, name)
        assert common_name(cert) == expected, name

    # curl sends SNI from the URL host; with --resolve it still connects to 127.0.0.1.
    for host, expected in (("foo.example", "foo.example"), ("a.bar.example", "wild")):
        _, certs = await curl(
            "--resolve",
            f"{host}:{server.number}:127.0.0.1",
            f"https://{host}:{server.number}/",
            write_out="%{certs}",
        )
        assert f"Subject:CN = {expected}\n" in certs or f"Subject:CN={expected}\n" in certs, certs


@pytest_twisted.ensureDeferred
async def test_no_sni_uses_the_local_ip(pki: dict[str, Any], servers: list[Server]) -> None:
    by_ip = write_pair(pki["dir"], "by-ip", server_cert("by-ip"))
    server = start(
        servers,
        cert_file=pki["serving"][0],
        key_file=pki["serving"][1],
        sni=[SniCertKey(by_ip[0], by_ip[1], names=("127.0.0.1",))],
    )
    cert = await deferToThread(fetch_certificate, server.number, None)
    assert common_name(cert) == "by-ip"


@pytest_twisted.ensureDeferred
async def test_min_version_refuses_a_tls11_client(
    pki: dict[str, Any], servers: list[Server]
) -> None:
    lenient = start(
        servers, cert_file=pki["serving"][0], key_file=pki["serving"][1], min_version="VersionTLS10"
    )
    try:
        version = await deferToThread(tls11_handshake, lenient.number)
    except (ssl.SSLError, OSError) as error:
        pytest.skip(f"the local ssl module cannot speak TLS 1.1: {error}")
    assert version == "TLSv1.1"

    strict = start(servers, cert_file=pki["serving"][0], key_file=pki["serving"][1])
    with pytest.raises(ssl.SSLError):
        await deferToThread(tls11_handshake, strict.number)
