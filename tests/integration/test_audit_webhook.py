"""The audit webhook backend against the real daemon and a real HTTPS receiver.

The receiver is a twisted.web server in a subprocess (so the test can take it down and bring
it back on the same port) with a self-signed certificate from ``apiserver.tls.selfsigned``;
it appends every POST (path, headers, JSON body) to a file, one line each, and answers 200.
The daemon runs with a Metadata-for-everything policy and ``--audit-webhook-config-file``
pointing at it, as kube-apiserver's plugin/pkg/audit/webhook does with a kubeconfig.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from apiserver.tls.selfsigned import ensure_self_signed
from tests.integration.daemon import Daemon, free_port, source_env

pytestmark = [pytest.mark.integration]

POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
rules:
- level: Metadata
"""

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"

RECEIVER = r"""
import json, sys
from twisted.internet import reactor, ssl
from twisted.web import resource, server

port, cert, key, out = sys.argv[1:]


class Receiver(resource.Resource):
    isLeaf = True

    def render_POST(self, request):
        body = request.content.read()
        record = {
            "path": request.path.decode(),
            "headers": {
                name.decode().lower(): [v.decode() for v in values]
                for name, values in request.requestHeaders.getAllRawHeaders()
            },
            "body": json.loads(body),
        }
        with open(out, "a") as f:
            f.write(json.dumps(record) + "\n")
        request.setHeader(b"content-type", b"application/json")
        return b"{}"


with open(cert) as c, open(key) as k:
    options = ssl.PrivateCertificate.loadPEM(c.read() + k.read()).options()
reactor.listenSSL(int(port), server.Site(Receiver()), options, interface="127.0.0.1")
reactor.run()
"""


class Receiver:
    """The HTTPS receiver subprocess; ``stop``/``start`` take it down and back on one port."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.cert, self.key = ensure_self_signed(str(directory), "127.0.0.1", "127.0.0.1")
        self.port = free_port()
        self.out = directory / "received.jsonl"
        self.script = directory / "receiver.py"
        self.script.write_text(RECEIVER)
        self.log = directory / "receiver.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 20.0) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    str(self.script),
                    str(self.port),
                    self.cert,
                    self.key,
                    str(self.out),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=source_env(),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"receiver not listening after {timeout}s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc = None

    def posts(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line]

    def events(self) -> list[dict[str, Any]]:
        return [item for post in self.posts() for item in post["body"]["items"]]

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: audit
  cluster: {{server: "https://127.0.0.1:{self.port}/audit", certificate-authority: {self.cert}}}
users:
- name: apiserver
  user: {{token: audit-secret}}
contexts:
- name: audit
  context: {{cluster: audit, user: apiserver}}
current-context: audit
"""
        )
        return path


@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    hook = Receiver(tmp_path / "receiver")
    hook.start()
    yield hook
    hook.stop()


@pytest.fixture
def audited(tmp_path: Path, receiver: Receiver) -> Iterator[Callable[..., Daemon]]:
    """Starts a daemon auditing every request at Metadata to ``receiver``; stops it after."""
    started: list[Daemon] = []
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    kubeconfig = receiver.kubeconfig(tmp_path / "audit.kubeconfig")

    def start(*args: str) -> Daemon:
        daemon = Daemon(
            tmp_path / f"d{len(started)}",
            [f"--audit-policy-file={policy}", f"--audit-webhook-config-file={kubeconfig}", *args],
        )
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.stop()


def requests(daemon: Daemon, count: int) -> list[str]:
    """``count`` LISTs of events; their Audit-Id response headers."""
    ids = []
    for _ in range(count):
        status, headers, _ = daemon.get(EVENTS)
        assert status == 200
        ids.append(headers["audit-id"])
    return ids


def completed(receiver: Receiver) -> set[str]:
    return {e["auditID"] for e in receiver.events() if e["stage"] == "ResponseComplete"}


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def test_batches_reach_the_receiver_over_tls(
    audited: Callable[..., Daemon], receiver: Receiver
) -> None:
    daemon = audited("--audit-webhook-batch-max-wait=200ms")
    ids = requests(daemon, 3)
    wait_for(lambda: set(ids) <= completed(receiver), 30, "the ResponseComplete events")
    posts = receiver.posts()
    post = posts[0]
    assert post["path"] == "/audit"
    assert post["headers"]["content-type"] == ["application/json"]
    assert post["headers"]["authorization"] == ["Bearer audit-secret"]
    body = post["body"]
    assert list(body)[:3] == ["kind", "apiVersion", "metadata"]
    assert body["kind"] == "EventList" and body["apiVersion"] == "audit.k8s.io/v1"
    mine = [e for e in receiver.events() if e["auditID"] == ids[0]]
    assert [e["stage"] for e in mine] == ["RequestReceived", "ResponseComplete"]
    for event in mine:
        assert "kind" not in event and "apiVersion" not in event  # list items carry no type
        assert event["level"] == "Metadata"
        assert event["verb"] == "list"
        assert event["requestURI"] == EVENTS
        assert event["user"]["username"] == "admin"
        assert "requestObject" not in event and "responseObject" not in event
    assert mine[1]["responseStatus"]["code"] == 200
    # Batches: several events in at least one POST, never more than max-size (400).
    assert max(len(p["body"]["items"]) for p in posts) > 1


def test_a_receiver_down_for_seconds_loses_nothing(
    audited: Callable[..., Daemon], receiver: Receiver
) -> None:
    daemon = audited("--audit-webhook-initial-backoff=1s", "--audit-webhook-batch-max-wait=200ms")
    receiver.stop()
    ids = requests(daemon, 5)
    time.sleep(2.0)  # batches are sent, refused and retried meanwhile (1s, then 1.5s...)
    ids += requests(daemon, 5)
    time.sleep(1.0)
    assert not set(ids) & completed(receiver)
    receiver.start()
    # The retries of the oldest batch end after 1 + 1.5 + 2.25 + 3.375 s (+20% jitter).
    wait_for(lambda: set(ids) <= completed(receiver), 60, "every event after the outage")
    assert "affecting" not in daemon.log()  # no batch was given up


def test_sigterm_delivers_every_batch(audited: Callable[..., Daemon], receiver: Receiver) -> None:
    daemon = audited("--audit-webhook-batch-max-wait=1h")
    ids = requests(daemon, 5)
    time.sleep(1.0)
    assert not set(ids) & completed(receiver)  # still in the buffer: max wait is an hour
    daemon.signal()
    assert daemon.wait_exit(60) == 0, daemon.log()
    assert set(ids) <= completed(receiver)


def test_bad_kubeconfig_stops_start_up(tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    missing = tmp_path / "missing.kubeconfig"
    daemon = Daemon(
        tmp_path / "d",
        [f"--audit-policy-file={policy}", f"--audit-webhook-config-file={missing}"],
    )
    try:
        daemon.start(wait=False)
        assert daemon.wait_exit(30) != 0
    finally:
        daemon.stop()
    log = daemon.log()
    assert "--audit-webhook-config-file" in log and str(missing) in log, log
