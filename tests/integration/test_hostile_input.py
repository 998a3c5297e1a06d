"""Hostile input against the real daemon (issue 17; docs/hostile-input.md): YAML alias
expansion, request bodies over 3 MiB or trickled, deep nesting, HTTP/2 streams over the
advertised limit, bad watch and list parameters, HTTP/1.1 head budget and request lines.

Memory is read from ``/proc/<pid>/status``; the limits are generous (tens of MiB where the
defects cost hundreds), and nothing asserts on elapsed time: a socket timeout is the bound.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import h2.config
import h2.connection
import h2.errors
import h2.events
import pytest

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon

pytestmark = pytest.mark.integration

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
LIMIT = 3 * 1024 * 1024
MIB = 1024 * 1024
REQUEST_TIMEOUT = 4


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    workdir: Path = tmp_path_factory.mktemp("hostile")
    server = Daemon(
        workdir,
        [f"--request-timeout={REQUEST_TIMEOUT}s", "--http2-max-streams-per-connection=2"],
    )
    server.start()
    try:
        status, _, body = server.get(
            EVENTS, "POST", {"Content-Type": "application/json"}, event_body("target")
        )
        assert status == 201, body
        yield server
    finally:
        server.stop()


def rss(daemon: Daemon) -> int:
    """The daemon's resident memory in bytes (``VmRSS``)."""
    assert daemon.proc is not None
    for line in Path(f"/proc/{daemon.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def status_of(body: bytes) -> dict[str, object]:
    parsed: dict[str, object] = json.loads(body)
    assert parsed["kind"] == "Status"
    return parsed


# --- HTTP/1.1 on a raw TLS socket ---------------------------------------------------------


class Raw:
    def __init__(self, daemon: Daemon, timeout: float = 60) -> None:
        context = daemon.ssl_context()
        context.set_alpn_protocols(["http/1.1"])
        raw = socket.create_connection(("127.0.0.1", daemon.port), timeout=timeout)
        self.sock = context.wrap_socket(raw)
        self.received = b""

    def try_send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
        except OSError:
            return False
        return True

    def poll(self) -> None:
        """Take what the server sent so far, without waiting."""
        self.sock.setblocking(False)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.received += chunk
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except OSError:
            pass
        finally:
            self.sock.setblocking(True)

    def read_to_close(self) -> None:
        """Take everything until the server closes the connection (or the socket fails)."""
        try:
            while chunk := self.sock.recv(65536):
                self.received += chunk
        except OSError:
            pass

    def answered(self) -> bool:
        head, sep, body = self.received.partition(b"\r\n\r\n")
        if not sep:
            return False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                return len(body) >= int(value)
        return False

    def response(self) -> tuple[int, dict[bytes, bytes], bytes]:
        while not self.answered():
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                break
            if not chunk:
                break
            self.received += chunk
        head, _, body = self.received.partition(b"\r\n\r\n")
        status_line, *lines = head.split(b"\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        return int(status_line.split()[1]), headers, body

    def close(self) -> None:
        self.sock.close()


def post_head(extra: bytes) -> bytes:
    return (
        b"POST " + EVENTS.encode() + b" HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\n" + extra + b"\r\n"
    )


def test_h1_declared_body_over_the_limit_is_413_unread(daemon: Daemon) -> None:
    before = rss(daemon)
    raw = Raw(daemon)
    try:
        raw.try_send(post_head(b"Content-Length: %d\r\n" % (50 * MIB)) + b"{" * 65536)
        code, headers, body = raw.response()
    finally:
        raw.close()
    assert code == 413
    assert headers[b"connection"] == b"close"
    assert status_of(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"Request entity too large: limit is {LIMIT}",
        "reason": "RequestEntityTooLarge",
        "code": 413,
    }
    assert rss(daemon) - before < 30 * MIB


def test_h1_endless_chunked_body_is_cut_at_the_limit(daemon: Daemon) -> None:
    before = rss(daemon)
    raw = Raw(daemon)
    chunk = b"%x\r\n" % 65536 + b" " * 65536 + b"\r\n"
    sent = 0
    try:
        raw.try_send(post_head(b"Transfer-Encoding: chunked\r\n"))
        while sent < 64 * MIB and not raw.answered():
            if not raw.try_send(chunk):
                break
            sent += 65536
            raw.poll()
        code, _, body = raw.response()
    finally:
        raw.close()
    assert code == 413
    assert status_of(body)["reason"] == "RequestEntityTooLarge"
    # Answered long before the client stopped: the server did not wait for the end.
    assert sent < 16 * MIB
    assert rss(daemon) - before < 30 * MIB


def test_h1_trickled_body_ends_at_the_request_timeout(daemon: Daemon) -> None:
    raw = Raw(daemon)
    try:
        raw.try_send(post_head(b"Content-Length: 100000\r\n"))
        for _ in range(200):
            if not raw.try_send(b" "):
                break
            time.sleep(0.25)
            raw.poll()
            if raw.answered():
                break
        code, _, body = raw.response()
    finally:
        raw.close()
    assert code == 504
    assert status_of(body)["reason"] == "Timeout"


def test_h1_head_budget_counts_whitespace_on_the_wire(daemon: Daemon) -> None:
    fields = b"".join(b"X-%d:" % i + b" " * 60_000 + b"v\r\n" for i in range(20))
    raw = Raw(daemon)
    try:
        raw.try_send(b"GET /livez HTTP/1.1\r\nHost: x\r\n" + fields + b"\r\n")
        raw.poll()
        raw.read_to_close()
    finally:
        raw.close()
    assert raw.received.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")


def test_h1_request_line_without_version_is_400(daemon: Daemon) -> None:
    raw = Raw(daemon)
    try:
        raw.try_send(b"GET /livez\r\n\r\n")
        raw.read_to_close()
    finally:
        raw.close()
    assert raw.received.startswith(b"HTTP/1.1 400 Bad Request\r\n")


# --- YAML and nesting ---------------------------------------------------------------------


def laughs(levels: int = 10) -> bytes:
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * 9) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * 9) + "]")
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(
    ("method", "path", "content_type"),
    [
        ("POST", EVENTS, "application/yaml"),
        ("PATCH", EVENTS + "/target?fieldManager=m", "application/apply-patch+yaml"),
        ("PUT", EVENTS + "/target", "application/yaml"),
    ],
)
def test_yaml_alias_expansion_is_refused(
    daemon: Daemon, method: str, path: str, content_type: str
) -> None:
    before = rss(daemon)
    status, _, body = daemon.get(path, method, {"Content-Type": content_type}, laughs(), timeout=60)
    assert status == 400, body
    # sigs.k8s.io/yaml's conversion error around go-yaml's own text.
    message = str(status_of(body)["message"])
    assert message.endswith(
        "error converting YAML to JSON: yaml: document contains excessive aliasing"
    )
    assert rss(daemon) - before < 30 * MIB
    # Still serving.
    assert daemon.get("/livez")[0] == 200


def nested_object(depth: int) -> str:
    return '{"a":' * depth + '"x"' + "}" * depth


def deep_event(name: str, depth: int) -> bytes:
    """An Event whose whole document nests ``depth`` levels, in the unknown field ``extra``."""
    return (event_body(name).decode()[:-1] + ',"extra":' + nested_object(depth - 1) + "}").encode()


# Go's decoders stop past 10,000 containers in all (encoding/json scanner.go, go-yaml
# scannerc.go); up to there a deep value gets the answer a shallow one gets.
TYPE_ERROR = (
    'Event in version "v1" cannot be handled as a Event: json: cannot unmarshal object into '
    "Go struct field Event.note of type string"
)


@pytest.mark.parametrize(
    ("content_type", "patch", "message"),
    [
        ("application/merge-patch+json", '{"note":' + nested_object(4999) + "}", TYPE_ERROR),
        (
            "application/strategic-merge-patch+json",
            '{"note":' + nested_object(4999) + "}",
            TYPE_ERROR,
        ),
        (
            "application/json-patch+json",
            '[{"op":"add","path":"/note","value":' + nested_object(4998) + "}]",
            TYPE_ERROR,
        ),
        (
            "application/merge-patch+json",
            '{"note":' + nested_object(10000) + "}",
            "error decoding patch: invalid character '{' exceeded max depth",
        ),
        (
            "application/merge-patch+json",
            '{"note":' + nested_object(20000) + "}",
            "error decoding patch: invalid character '{' exceeded max depth",
        ),
    ],
)
def test_deep_patches_answer_as_shallow_ones_up_to_gos_limit(
    daemon: Daemon, content_type: str, patch: str, message: str
) -> None:
    status, _, body = daemon.get(
        EVENTS + "/target", "PATCH", {"Content-Type": content_type}, patch.encode()
    )
    assert status == 400, body
    assert status_of(body)["message"] == message


def test_deep_merge_patch_of_an_unknown_field_applies_with_the_warning(daemon: Daemon) -> None:
    patch = '{"extra":' + nested_object(4999) + "}"
    status, headers, body = daemon.get(
        EVENTS + "/target",
        "PATCH",
        {"Content-Type": "application/merge-patch+json"},
        patch.encode(),
    )
    assert status == 200, body
    assert headers.get("warning") == '299 - "unknown field \\"extra\\""'
    assert "extra" not in json.loads(body)


@pytest.mark.parametrize("content_type", ["application/json", "application/yaml"])
def test_deep_create_is_accepted_with_the_unknown_field_warning(
    daemon: Daemon, content_type: str
) -> None:
    name = "deep5000" + content_type.rsplit("/", 1)[1]
    status, headers, body = daemon.get(
        EVENTS, "POST", {"Content-Type": content_type}, deep_event(name, 5000), timeout=60
    )
    assert status == 201, body
    assert headers.get("warning") == '299 - "unknown field \\"extra\\""'
    created = json.loads(body) if content_type == "application/json" else None
    if created is not None:
        assert "extra" not in created
    assert daemon.get(EVENTS + "/" + name)[0] == 200


@pytest.mark.parametrize(
    ("content_type", "error"),
    [
        (
            "application/json",
            "couldn't get version/kind; json parse error: invalid character '{' exceeded max depth",
        ),
        ("application/yaml", "error converting YAML to JSON: yaml: exceeded max depth of 10000"),
    ],
)
@pytest.mark.parametrize("depth", [10001, 20000])
def test_deep_create_past_gos_limit_is_its_decoder_error(
    daemon: Daemon, content_type: str, error: str, depth: int
) -> None:
    sent = deep_event("toodeep", depth)
    status, _, body = daemon.get(EVENTS, "POST", {"Content-Type": content_type}, sent, timeout=60)
    assert status == 400, body
    # transformDecodeError's summary: the body's first 30 bytes.
    assert status_of(body)["message"] == (
        f"the object provided is unrecognized (must be of type Event): {error} "
        f"({sent[:30].decode()} ...)"
    )


@pytest.mark.parametrize(
    ("depth", "message"),
    [
        (
            5000,
            "json: cannot unmarshal object into Go struct field continueToken.start of type string",
        ),
        (10001, "invalid character '{' exceeded max depth"),
        (20000, "invalid character '{' exceeded max depth"),
    ],
)
def test_deep_continue_tokens_answer_as_go(daemon: Daemon, depth: int, message: str) -> None:
    token = '{"v":"meta.k8s.io/v1","rv":1,"start":' + nested_object(depth - 1) + "}"
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    status, _, body = daemon.get(EVENTS + "?limit=1&continue=" + encoded)
    assert status == 400, body
    assert status_of(body)["message"] == (
        "invalid continue token: continue key is not valid: " + message
    )


# --- list and watch parameters -------------------------------------------------------------


def test_watch_with_a_bad_resource_version_is_400(daemon: Daemon) -> None:
    status, _, body = daemon.get(EVENTS + "?watch=1&resourceVersion=abc")
    assert status == 400
    assert status_of(body)["message"] == "invalid resource version: abc"


def test_negative_limit_is_no_limit(daemon: Daemon) -> None:
    for name in ("lim1", "lim2"):
        daemon.get(EVENTS, "POST", {"Content-Type": "application/json"}, event_body(name))
    status, _, body = daemon.get(EVENTS + "?limit=-1")
    listed = json.loads(body)
    assert status == 200
    assert len(listed["items"]) >= 3
    assert "continue" not in listed["metadata"]


# --- HTTP/2 ---------------------------------------------------------------------------------


class H2:
    def __init__(self, daemon: Daemon) -> None:
        context = daemon.ssl_context()
        context.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", daemon.port), timeout=60)
        self.sock = context.wrap_socket(raw, server_hostname="127.0.0.1")
        assert self.sock.selected_alpn_protocol() == "h2"
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
        self.conn.initiate_connection()
        self.events: list[h2.events.Event] = []
        self.status: dict[int, int] = {}
        self.bodies: dict[int, bytes] = {}
        self.ended: set[int] = set()
        self.resets: dict[int, int] = {}

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def read(self) -> None:
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("closed")
        for event in self.conn.receive_data(data):
            self.events.append(event)
            if isinstance(event, h2.events.ResponseReceived):
                self.status[event.stream_id] = int(dict(event.headers)[b":status"])
            elif isinstance(event, h2.events.DataReceived):
                self.bodies[event.stream_id] = self.bodies.get(event.stream_id, b"") + event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                self.ended.add(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                self.resets[event.stream_id] = event.error_code
            elif isinstance(event, h2.events.ConnectionTerminated):
                raise AssertionError(f"GOAWAY {event.error_code}")
        self.flush()

    def headers(self, method: str, path: str, extra: list[tuple[str, str]], end: bool) -> int:
        sid: int = self.conn.get_next_available_stream_id()
        self.conn.send_headers(
            sid,
            [
                (":method", method),
                (":scheme", "https"),
                (":authority", "127.0.0.1"),
                (":path", path),
                *extra,
            ],
            end_stream=end,
        )
        self.flush()
        return sid

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("declared", [True, False])
def test_h2_body_over_the_limit_is_413(daemon: Daemon, declared: bool) -> None:
    before = rss(daemon)
    client = H2(daemon)
    try:
        extra = [("content-type", "application/json")]
        if declared:
            extra.append(("content-length", str(50 * MIB)))
        sid = client.headers("POST", EVENTS, extra, end=False)
        sent = 0
        while sid not in client.ended and sid not in client.resets and sent < 64 * MIB:
            window = min(
                client.conn.local_flow_control_window(sid), client.conn.max_outbound_frame_size
            )
            if window > 0 and sid not in client.status:
                client.conn.send_data(sid, b" " * window)
                client.flush()
                sent += window
            else:
                client.read()
        assert client.status[sid] == 413
        assert status_of(client.bodies[sid])["reason"] == "RequestEntityTooLarge"
        assert sent < 16 * MIB
        # The connection lives on.
        other = client.headers("GET", "/livez", [], end=True)
        while other not in client.ended:
            client.read()
        assert client.status[other] == 200
    finally:
        client.close()
    assert rss(daemon) - before < 30 * MIB


def test_h2_stream_over_the_limit_is_refused_alone(daemon: Daemon) -> None:
    """``--http2-max-streams-per-connection=2``: two watches, a third stream is reset with
    REFUSED_STREAM (sent before our SETTINGS could be acknowledged), the watches live on."""
    client = H2(daemon)
    try:
        watches = [
            client.headers("GET", EVENTS + "?watch=1&timeoutSeconds=30", [], end=True)
            for _ in range(2)
        ]
        extra = client.headers("GET", "/livez", [], end=True)
        while extra not in client.resets:
            client.read()
        assert client.resets[extra] == h2.errors.ErrorCodes.REFUSED_STREAM
        while not all(sid in client.status for sid in watches):
            client.read()
        assert [client.status[sid] for sid in watches] == [200, 200]
        # The watches still get events.
        status, _, _ = daemon.get(
            EVENTS, "POST", {"Content-Type": "application/json"}, event_body("seen-by-watch")
        )
        assert status == 201
        while not all(b"seen-by-watch" in client.bodies.get(sid, b"") for sid in watches):
            client.read()
        assert not client.ended & set(watches)
    finally:
        client.close()


def test_h2_trickled_body_ends_at_the_request_timeout(daemon: Daemon) -> None:
    client = H2(daemon)
    try:
        extra = [("content-type", "application/json"), ("content-length", "100000")]
        sid = client.headers("POST", EVENTS, extra, end=False)
        client.sock.settimeout(0.25)
        for _ in range(200):
            if sid in client.status:
                break
            client.conn.send_data(sid, b" ")
            client.flush()
            try:
                client.read()
            except TimeoutError:
                pass
        client.sock.settimeout(60)
        while sid not in client.ended and sid not in client.resets:
            client.read()
        assert client.status[sid] == 504
        assert status_of(client.bodies[sid])["reason"] == "Timeout"
    finally:
        client.close()
