"""The audit webhook backend (plugin/pkg/audit/webhook/webhook.go) and its factory.

The receiver is a twisted.web resource behind treq's StubTreq recording the EventList bodies;
time is a ``Clock`` and the backoff jitter a fixed random source, so every wait is exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from treq.testing import StubTreq
from twisted.internet.defer import Deferred, fail
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import capturedLogs
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from apiserver.audit.interface import AuditEvent, NoMetrics
from apiserver.audit.webhook import (
    WebhookSink,
    build_webhook_backend,
    event_list_body,
    new_webhook_sink,
    retry_waits,
)
from apiserver.options import parse_args

URL = "https://audit.example/events"


class Receiver(Resource):
    """Answers ``codes`` in turn (the last one forever); records bodies and headers."""

    isLeaf = True

    def __init__(self, *codes: int) -> None:
        super().__init__()
        self.codes = list(codes) or [200]
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[Any] = []
        self.paths: list[bytes] = []
        self.hold = False
        self.held: list[Any] = []

    def render_POST(self, request: Any) -> bytes | int:
        self.bodies.append(json.loads(request.content.read()))
        self.headers.append(request.requestHeaders)
        self.paths.append(request.path)
        if self.hold:
            self.held.append(request)
            return NOT_DONE_YET
        code = self.codes.pop(0) if len(self.codes) > 1 else self.codes[0]
        request.setResponseCode(code)
        return b"{}" if code < 300 else b"receiver is sad"


class Metrics(NoMetrics):
    """Records ``apiserver_audit_error_total`` increments."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, int]] = []

    def error(self, plugin: str, count: int) -> None:
        self.errors.append((plugin, count))


def event(n: int, **extra: Any) -> AuditEvent:
    return {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": f"id-{n}",
        "stage": "ResponseComplete",
        "requestURI": f"/api/v1/namespaces/default/events/e{n}?x=<&>",
        "verb": "get",
        "user": {"username": "alice", "groups": ["system:authenticated"]},
        "sourceIPs": ["127.0.0.1"],
        "responseStatus": {"metadata": {}, "code": 200},
        "requestReceivedTimestamp": "2026-01-01T00:00:00.000001Z",
        "stageTimestamp": "2026-01-01T00:00:00.000002Z",
        **extra,
    }


def item(n: int) -> dict[str, Any]:
    """What the receiver sees of ``event(n)``: list items carry no kind/apiVersion."""
    out = dict(event(n))
    del out["kind"], out["apiVersion"]
    return out


class WebhookSinkTests(SynchronousTestCase):
    def make(
        self, receiver: Receiver, jitter: float = 0.5, **kw: Any
    ) -> tuple[WebhookSink, Clock, Metrics, Any]:
        clock = Clock()
        metrics = Metrics()
        stub = StubTreq(receiver)
        sink = WebhookSink(
            stub,
            10.0,
            clock,
            metrics,
            url=URL,
            headers={b"Authorization": [b"Bearer secret"]},
            random=lambda: jitter,
            **kw,
        )
        return sink, clock, metrics, stub

    def test_posts_one_event_list_per_call(self) -> None:
        receiver = Receiver(200)
        sink, _, metrics, _ = self.make(receiver)
        assert sink.name == "webhook"
        assert self.successResultOf(sink.process_events([event(1), event(2)])) is True
        assert receiver.bodies == [
            {
                "kind": "EventList",
                "apiVersion": "audit.k8s.io/v1",
                "metadata": {},
                "items": [item(1), item(2)],
            }
        ]
        headers = receiver.headers[0]
        assert headers.getRawHeaders("content-type") == ["application/json"]
        assert headers.getRawHeaders("authorization") == ["Bearer secret"]
        assert receiver.paths == [b"/events"]
        assert metrics.errors == []

    def test_body_keeps_event_key_order_and_is_html_safe_as_go_writes_it(self) -> None:
        body = event_list_body([event(1)])
        assert body.startswith(
            b'{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":'
            b'[{"level":"Metadata","auditID":"id-1","stage":"ResponseComplete",'
        )
        assert b"x=\\u003c\\u0026\\u003e" in body
        assert b"<" not in body and b"&" not in body
        # Events that already come without kind/apiVersion are sent as they are.
        assert json.loads(event_list_body([item(3)]))["items"] == [item(3)]

    def test_any_2xx_is_delivered(self) -> None:
        for code in (200, 201, 202, 204):
            receiver = Receiver(code)
            sink, _, _, _ = self.make(receiver)
            assert self.successResultOf(sink.process_events([event(1)])) is True, code
            assert len(receiver.bodies) == 1

    def test_nothing_to_send_sends_nothing(self) -> None:
        receiver = Receiver(200)
        sink, _, _, _ = self.make(receiver)
        assert self.successResultOf(sink.process_events([])) is True
        assert receiver.bodies == []

    def test_retry_waits_follow_wait_backoff(self) -> None:
        # Duration 10s, Factor 1.5, Jitter 0.2, Steps 5: five tries, four waits, and the
        # jitter (random() * 0.2 * d) does not feed into the next base duration.
        assert retry_waits(10.0, lambda: 0.0) == [10.0, 15.0, 22.5, 33.75]
        assert retry_waits(10.0, lambda: 0.5) == pytest.approx([11.0, 16.5, 24.75, 37.125])
        assert retry_waits(2.0, lambda: 1.0) == pytest.approx([2.4, 3.6, 5.4, 8.1])

    def test_fails_three_times_then_delivers_after_the_backoff_waits(self) -> None:
        receiver = Receiver(500, 503, 400, 200)  # every error is retried, even a 400
        sink, clock, metrics, _ = self.make(receiver, jitter=0.5)
        d = sink.process_events([event(1)])
        self.assertNoResult(d)
        assert len(receiver.bodies) == 1
        for tries, wait in ((2, 11.0), (3, 16.5), (4, 24.75)):
            clock.advance(wait - 0.25)  # binary-exact steps: no float drift
            assert len(receiver.bodies) == tries - 1
            clock.advance(0.25)
            assert len(receiver.bodies) == tries
        assert self.successResultOf(d) is True
        assert receiver.bodies[-1]["items"] == [item(1)]
        assert all(body == receiver.bodies[0] for body in receiver.bodies)
        assert metrics.errors == []
        assert not clock.getDelayedCalls()

    def test_all_tries_failing_answers_false_counts_and_logs(self) -> None:
        receiver = Receiver(500)
        sink, clock, metrics, _ = self.make(receiver, jitter=0.0)
        with capturedLogs() as logs:
            d = sink.process_events([event(1), event(2), event(3)])
            clock.pump([10.0, 15.0, 22.5])
            self.assertNoResult(d)
            assert len(receiver.bodies) == 4
            clock.advance(33.75)
            assert self.successResultOf(d) is False
        assert len(receiver.bodies) == 5
        assert metrics.errors == [("webhook", 3)]
        assert not clock.getDelayedCalls()
        clock.advance(1000)
        assert len(receiver.bodies) == 5
        errors = [e for e in logs if e["log_level"].name == "error"]
        assert len(errors) == 1
        text = errors[0]["log_format"].format(**errors[0])
        assert "Error in audit plugin 'webhook' affecting 3 audit events" in text
        assert "status code 500" in text
        assert 'id="id-2"' in text

    def test_an_unreachable_receiver_is_retried(self) -> None:
        calls: list[str] = []

        class Refusing:
            def request(self, method: str, url: str, **kw: Any) -> Deferred[Any]:
                calls.append(url)
                return fail(ConnectionRefusedError("127.0.0.1:1"))

        clock = Clock()
        metrics = Metrics()
        sink = WebhookSink(Refusing(), 1.0, clock, metrics, url=URL, random=lambda: 0.0)
        with capturedLogs() as logs:
            d = sink.process_events([event(1)])
            clock.pump([1.0, 1.5, 2.25, 3.375])
        assert self.successResultOf(d) is False
        assert calls == [URL] * 5
        assert metrics.errors == [("webhook", 1)]
        assert any("Connection was refused" in e["log_format"].format(**e) for e in logs)

    def test_timeout_cancels_the_try_and_retries(self) -> None:
        receiver = Receiver(200)
        receiver.hold = True
        sink, clock, metrics, stub = self.make(receiver, jitter=0.0)
        d = sink.process_events([event(1)])
        stub.flush()
        clock.advance(29.75)
        self.assertNoResult(d)
        assert len(receiver.bodies) == 1
        clock.advance(0.25)  # the 30 s request timeout
        self.assertNoResult(d)
        receiver.hold = False
        clock.advance(10.0)  # the first backoff wait
        assert len(receiver.bodies) == 2
        assert self.successResultOf(d) is True
        assert metrics.errors == []

    def test_timeouts_until_the_end_say_so(self) -> None:
        receiver = Receiver(200)
        receiver.hold = True
        sink, clock, metrics, stub = self.make(receiver, jitter=0.0, timeout=5.0)
        with capturedLogs() as logs:
            d = sink.process_events([event(1)])
            for wait in (10.0, 15.0, 22.5, 33.75, 0.0):
                stub.flush()
                clock.advance(5.0)
                clock.advance(wait)
        assert self.successResultOf(d) is False
        assert len(receiver.bodies) == 5
        assert metrics.errors == [("webhook", 1)]
        assert any("context deadline exceeded" in e["log_format"].format(**e) for e in logs)

    def test_shutdown_waits_for_a_call_in_flight_then_closes(self) -> None:
        closed: list[bool] = []
        receiver = Receiver(500, 200)
        sink, clock, _, _ = self.make(receiver, jitter=0.0, close=lambda: closed.append(True))
        sink.start()
        d = sink.process_events([event(1)])
        stopped = sink.shutdown()
        self.assertNoResult(stopped)  # waiting for the retry
        assert closed == []
        clock.advance(10.0)
        assert self.successResultOf(d) is True
        self.successResultOf(stopped)
        assert closed == [True]

    def test_shutdown_when_idle_is_immediate(self) -> None:
        sink, _, _, _ = self.make(Receiver(200))
        self.successResultOf(sink.shutdown())


# --- the factory ---------------------------------------------------------------------------

KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: audit
  cluster: {{server: "{server}", insecure-skip-tls-verify: true}}
users:
- name: apiserver
  user: {{token: audit-token}}
contexts:
- name: audit
  context: {{cluster: audit, user: apiserver}}
current-context: audit
"""


def kubeconfig(tmp_path: Path, server: str = "https://127.0.0.1:18443/audit") -> Path:
    path = tmp_path / "audit.kubeconfig"
    path.write_text(KUBECONFIG.format(server=server))
    return path


def test_no_config_file_no_backend() -> None:
    config = parse_args([])
    assert new_webhook_sink(config, MemoryReactorClock(), Metrics()) is None
    assert build_webhook_backend(config, MemoryReactorClock(), Metrics()) is None


def test_factory_reads_the_kubeconfig_and_connects_to_nothing(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path)
    reactor = MemoryReactorClock()
    config = parse_args(
        [f"--audit-webhook-config-file={path}", "--audit-webhook-initial-backoff=250ms"]
    )
    sink = new_webhook_sink(config, reactor, Metrics())
    assert isinstance(sink, WebhookSink)
    assert sink.url == "https://127.0.0.1:18443/audit"
    assert sink.headers == {b"Authorization": [b"Bearer audit-token"]}
    assert sink.initial_backoff == 0.25
    assert sink.clock is reactor
    assert reactor.tcpClients == [] and reactor.getDelayedCalls() == []
    # Defaults: 10 s (DefaultInitialBackoffDelay).
    sink = new_webhook_sink(parse_args([f"--audit-webhook-config-file={path}"]), reactor, Metrics())
    assert sink is not None and sink.initial_backoff == 10.0


def test_the_sink_from_the_factory_posts_to_the_server(tmp_path: Path) -> None:
    reactor = MemoryReactorClock()
    config = parse_args([f"--audit-webhook-config-file={kubeconfig(tmp_path)}"])
    sink = new_webhook_sink(config, reactor, Metrics())
    assert sink is not None
    d = sink.process_events([event(1)])
    assert [(host, port) for host, port, *_ in reactor.tcpClients] == [("127.0.0.1", 18443)]
    assert not d.called


def test_missing_or_invalid_kubeconfig_stops_start_up(tmp_path: Path) -> None:
    missing = tmp_path / "nope.kubeconfig"
    with pytest.raises(ValueError) as info:
        new_webhook_sink(parse_args([f"--audit-webhook-config-file={missing}"]), Clock(), Metrics())
    assert str(info.value).startswith("--audit-webhook-config-file: initializing audit webhook")
    assert str(missing) in str(info.value)
    bad = tmp_path / "bad.kubeconfig"
    bad.write_text("clusters: [")
    with pytest.raises(ValueError, match=r"--audit-webhook-config-file: .*bad\.kubeconfig"):
        new_webhook_sink(parse_args([f"--audit-webhook-config-file={bad}"]), Clock(), Metrics())
    no_server = tmp_path / "noserver.kubeconfig"
    no_server.write_text(KUBECONFIG.format(server=""))
    with pytest.raises(ValueError, match="has no server"):
        new_webhook_sink(
            parse_args([f"--audit-webhook-config-file={no_server}"]), Clock(), Metrics()
        )


def test_only_audit_k8s_io_v1(tmp_path: Path) -> None:
    # The flag validation refuses other versions already (options/validate.py); the factory
    # checks again for configurations built without it.
    config = parse_args([f"--audit-webhook-config-file={kubeconfig(tmp_path)}"])
    for version in ("audit.k8s.io/v1beta1", "v1", "nonsense"):
        with pytest.raises(ValueError) as info:
            new_webhook_sink(config.evolve(audit_webhook_version=version), Clock(), Metrics())
        assert str(info.value) == (
            f'--audit-webhook-version: invalid group version "{version}", '
            'allowed versions are ["audit.k8s.io/v1"]'
        )


def test_build_wraps_the_sink_in_the_batching_wrappers(tmp_path: Path) -> None:
    reactor = MemoryReactorClock()
    config = parse_args(
        [f"--audit-webhook-config-file={kubeconfig(tmp_path)}", "--audit-webhook-batch-max-wait=1h"]
    )
    backend = build_webhook_backend(config, reactor, Metrics())
    assert backend is not None
    assert reactor.tcpClients == []  # nothing happens at build
    backend.start()
    backend.process_events([event(1)])
    assert reactor.tcpClients == []  # batch mode: queued, not sent
    backend.shutdown()  # draining sends the batch
    assert [(host, port) for host, port, *_ in reactor.tcpClients] == [("127.0.0.1", 18443)]
