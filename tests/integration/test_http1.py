"""HTTP/1.1 on the wire against the real daemon (apiserver.http.h1 behind TLS): pipelining,
``Connection: close``, ``Expect: 100-continue``, chunked request bodies, bad requests, and
chunked watch streams read by kubectl (Go's client) with HTTP/2 turned off."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon, write_kubeconfig

KUBECTL = shutil.which("kubectl")
BASE = "/apis/events.k8s.io/v1"


class Raw:
    """One TLS connection speaking raw HTTP/1.1 (ALPN ``http/1.1``)."""

    def __init__(self, daemon: Daemon) -> None:
        context = daemon.ssl_context()
        context.set_alpn_protocols(["http/1.1"])
        raw = socket.create_connection(("127.0.0.1", daemon.port), timeout=10)
        self.sock: ssl.SSLSocket = context.wrap_socket(raw)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def response(self) -> tuple[bytes, dict[bytes, bytes], bytes]:
        """One response: status line, headers (lower-case names), Content-Length body."""
        while b"\r\n\r\n" not in self.buffer:
            assert self._fill(), self.buffer
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        status, *lines = head.split(b"\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get(b"content-length", b"0"))
        while len(self.buffer) < length:
            assert self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return status, headers, body

    def closed(self) -> bool:
        try:
            return not self._fill() and not self.buffer
        except (ssl.SSLError, OSError):
            return True

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw(daemon: Daemon) -> Iterator[Raw]:
    conn = Raw(daemon)
    yield conn
    conn.close()


def test_pipelined_requests_answered_in_order(raw: Raw) -> None:
    raw.send(
        b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n" + b"GET /version HTTP/1.1\r\nHost: x\r\n\r\n"
    )
    status, headers, body = raw.response()
    assert status == b"HTTP/1.1 200 OK" and body == b"ok"
    assert b"server" not in headers and b"date" in headers and b"audit-id" in headers
    status, headers, body = raw.response()
    assert status == b"HTTP/1.1 200 OK" and b"gitVersion" in body
    raw.send(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
    assert raw.response()[2] == b"ok"


def test_connection_close(raw: Raw) -> None:
    raw.send(b"GET /livez HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    status, headers, _ = raw.response()
    assert status == b"HTTP/1.1 200 OK" and headers[b"connection"] == b"close"
    assert raw.closed()


def test_http10(raw: Raw) -> None:
    raw.send(b"GET /livez HTTP/1.0\r\n\r\n")
    status, _, body = raw.response()
    assert (status, body) == (b"HTTP/1.0 200 OK", b"ok")
    assert raw.closed()


def test_expect_continue_and_chunked_bodies(raw: Raw) -> None:
    ns = "h1-" + uuid.uuid4().hex[:8]
    path = f"{BASE}/namespaces/{ns}/events".encode()
    data = event_body("e1", ns)
    raw.send(
        b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % len(data)
    )
    status, _, _ = raw.response()
    assert status == b"HTTP/1.1 100 Continue"
    raw.send(data)
    status, _, body = raw.response()
    assert status == b"HTTP/1.1 201 Created", body
    data = event_body("e2", ns)
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (data[:10], data[10:]))
    raw.send(
        b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"
    )
    status, _, body = raw.response()
    assert status == b"HTTP/1.1 201 Created", body
    assert json.loads(body)["metadata"]["name"] == "e2"


def test_bad_request_is_answered_400_and_closed(raw: Raw) -> None:
    raw.send(b"GET /livez HTTP/1.1\r\nHost: x\r\nBad Header Name: x\r\n\r\n")
    assert raw.sock.recv(1024) == (
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\n\r\n400 Bad Request"
    )
    assert raw.closed()


def test_large_headers_pass_as_go_lets_them(raw: Raw) -> None:
    """kube-apiserver takes up to 1 MiB of headers (a long OIDC token, many groups)."""
    raw.send(b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Big: " + b"v" * 200_000 + b"\r\n\r\n")
    status, _, body = raw.response()
    assert status == b"HTTP/1.1 200 OK", body


def test_watch_stream_is_chunked_and_survives_a_client_leaving(daemon: Daemon) -> None:
    ns = "h1-" + uuid.uuid4().hex[:8]
    path = f"{BASE}/namespaces/{ns}/events"
    status, _, _ = daemon.get(path, method="POST", body=event_body("w1", ns))
    assert status == 201
    conn = Raw(daemon)
    conn.send(f"GET {path}?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    while b'"ADDED"' not in conn.buffer:
        assert conn._fill()
    head = conn.buffer.split(b"\r\n\r\n", 1)[0]
    assert b"Transfer-Encoding: chunked" in head
    conn.close()  # mid-stream
    assert daemon.get("/livez")[0] == 200


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_over_http1(start_daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    """Go's client on HTTP/1.1 (no h2 offered): a list and a chunked watch to its end."""
    daemon = start_daemon(["--disable-http2-serving"])
    ns = "h1-" + uuid.uuid4().hex[:8]
    assert daemon.get(f"{BASE}/namespaces/{ns}/events", "POST", body=event_body("k1", ns))[0] == 201
    config = write_kubeconfig(daemon, tmp_path / "kubeconfig")
    for path in (
        f"{BASE}/namespaces/{ns}/events",
        f"{BASE}/namespaces/{ns}/events?watch=1&resourceVersion=0&timeoutSeconds=1",
    ):
        out = subprocess.run(
            [str(KUBECTL), "--kubeconfig", str(config), "get", "--raw", path, "-v=6"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        assert '"k1"' in out.stdout
