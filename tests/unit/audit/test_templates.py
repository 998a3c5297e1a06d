"""Audit lines from templates (apiserver.audit.templates): byte for byte what the encoder
writes for the same event, for every kind of request the filter sees, and used only where
they are exact."""

from __future__ import annotations

from typing import Any

from tests.unit.audit.test_filter import BASE, Harness
from twisted.internet.address import IPv4Address

from apiserver.audit.buffered import BufferedSink
from apiserver.audit.encoding import encode_event
from apiserver.audit.event import AuditRecord
from apiserver.audit.filter import new_record
from apiserver.audit.interface import BatchOptions, NoMetrics
from apiserver.audit.log import LogSink, Rotation
from apiserver.audit.templates import EventLines
from apiserver.auth.interface import DENY, Decision

METADATA = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"
REQUEST = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Request\n"


class SlowHarness(Harness):
    """Each answer takes a quarter of a second, so the stage timestamps differ from the
    received one."""

    def events(self, request: Any, info: Any) -> Any:
        self.clock.advance(0.25)
        return super().events(request, info)


class CheckedLines(EventLines):
    """EventLines that compares each line it makes with the encoder's."""

    def __init__(self, harness: Harness) -> None:
        super().__init__(encode_event)
        self.harness = harness
        self.made = 0
        self.declined = 0
        #: Lines the stage's fused path made (check_fused).
        self.fused = 0
        #: (made, expected) of every line that differs from the encoder's: kept, not raised
        #: (an error in a finish hook is logged by the chain, not raised), and asserted
        #: empty by each test through :meth:`lines_checked`.
        self.mismatches: list[tuple[bytes, bytes]] = []

    def lines_checked(self) -> int:
        """How many lines were compared; all of them were equal."""
        assert self.mismatches == []
        return self.made + self.fused

    def line(self, record: AuditRecord, stage: str, now: float) -> bytes | None:
        made = super().line(record, stage, now)
        if made is None:
            self.declined += 1
            return None
        checked_line(self, made, encode_event(record.event(stage, now)))
        self.made += 1
        return made


def checked_line(checked: CheckedLines, made: bytes, expected: bytes) -> None:
    if made != expected:
        checked.mismatches.append((made, expected))


def check_fused(h: Harness, checked: CheckedLines) -> None:
    """Compare each line the stage's fused path queues (AuditStage._fused and
    _fused_finished, which skip EventLines.line) with the encoder's bytes for the event
    an AuditRecord of the request gives."""
    stage = h.stage
    fused, fused_finished = stage._fused, stage._fused_finished

    sink = stage.line_sink
    assert sink is not None
    queue = sink.queue
    # Lines handed to the backend: a request's last line may write the queue at once
    # (BufferedSink.end_line).
    written: list[bytes] = []
    send = sink._send

    def recording_send(batch: list[Any]) -> None:
        written.extend(batch)
        send(batch)

    sink._send = recording_send  # type: ignore[method-assign]

    def last_line(queued: int, sent: int) -> bytes | None:
        """The line the stage just gave the sink, if it gave one."""
        if len(queue) == queued + 1:
            line: bytes = queue[-1][1]
            return line
        if len(written) > sent and not queue:
            return written[-1]
        return None

    def record_of(request: Any, info: Any, shape: Any, received: float) -> AuditRecord:
        return new_record(request, info, shape.config, received)

    def checked_fused(request: Any, info: Any, shape: Any) -> Any:
        queued, sent = len(queue), len(written)
        verdict = fused(request, info, shape)
        if shape.received:
            record = record_of(request, info, shape, h.clock.seconds())
            expected = encode_event(record.event("RequestReceived", record.received))
            checked_line(checked, last_line(queued, sent) or b"", expected)
            checked.fused += 1
        return verdict

    def checked_finished(
        request: Any,
        info: Any,
        shape: Any,
        audit_id: bytes,
        received: float,
        text: bytes,
        result: Any,
    ) -> None:
        queued, sent = len(queue), len(written)
        fused_finished(request, info, shape, audit_id, received, text, result)
        if result is not None or info.panic is not None:
            return
        record = record_of(request, info, shape, received)
        answer = info.answer
        body = (
            answer.body
            if answer is not None and answer.body and request.method != b"HEAD"
            else None
        )
        record.log_response(request.code, body)
        expected = encode_event(record.event("ResponseComplete", h.clock.seconds()))
        checked_line(checked, last_line(queued, sent) or b"", expected)
        checked.fused += 1

    stage._fused = checked_fused  # type: ignore[method-assign]
    stage._fused_finished = checked_finished  # type: ignore[method-assign,assignment]


def harness(tmp_path: Any, policy: str = METADATA) -> tuple[Harness, CheckedLines, LogSink]:
    h = SlowHarness(policy=policy)
    log = LogSink(str(tmp_path / "audit.log"), "json", Rotation(), h.clock, NoMetrics())
    sink = BufferedSink(
        log, BatchOptions(10000, 1, 1.0, False, 0.0, 0), h.clock, NoMetrics(), lines=log
    )
    sink.start()
    h.sinks[:] = [sink]  # type: ignore[list-item]
    stage = h.stage
    stage.sinks = (sink,)
    stage.line_sink = sink
    checked = stage.templates = CheckedLines(h)
    check_fused(h, checked)
    return h, checked, log


def serve_all(h: Harness, requests: list[Any], times: int = 3) -> None:
    for _ in range(times):
        for make in requests:
            request = make()
            h.serve(request)
            h.clock.advance(0.0123)
    h.clock.advance(1)


def test_template_lines_are_the_encoders_bytes(tmp_path: Any) -> None:
    h, checked, _ = harness(tmp_path)

    def forwarded() -> Any:
        return h.request(b"GET", BASE + "/e1", headers={b"X-Forwarded-For": [b"10.0.0.1, ::1"]})

    def odd_agent() -> Any:
        request = h.request(b"GET", BASE + "?labelSelector=a%3Db&x=<y>")
        request.requestHeaders.setRawHeaders(b"User-Agent", ['caf\u00e9 <&> \u2028 "q"'])
        return request

    def own_audit_id() -> Any:
        return h.request(b"GET", BASE + "/e1", headers={b"Audit-Id": [b"client-id-1"]})

    def quoted_audit_id() -> Any:
        return h.request(b"GET", BASE + "/e1", headers={b"Audit-Id": [b'a"b<c']})

    def other_peer() -> Any:
        request = h.request(b"GET", BASE + "/e1")
        request.client = IPv4Address("TCP", "198.51.100.9", 1)  # type: ignore[attr-defined]
        return request

    serve_all(
        h,
        [
            lambda: h.request(b"GET", BASE + "/e1"),
            lambda: h.request(b"GET", BASE + "/missing"),  # a Status answer (404)
            lambda: h.request(b"GET", BASE),
            lambda: h.request(b"POST", BASE, body=b'{"metadata":{"name":"e1"}}'),
            lambda: h.request(b"DELETE", BASE + "/e1"),
            lambda: h.request(b"GET", BASE + "?watch=true"),  # ResponseStarted too
            lambda: h.request(b"GET", "/healthz"),
            lambda: h.request(b"GET", BASE + "/e1", token=None),  # anonymous
            lambda: h.request(b"GET", BASE + "/e1", token="nobody"),  # 401
            lambda: h.request(b"GET", BASE + "/e1", headers={b"Impersonate-User": [b"carol"]}),
            # Same URI, other user agent or method: other lines (the template key).
            lambda: h.request(b"GET", BASE + "/e1", headers={b"User-Agent": [b"kubectl/v1"]}),
            lambda: h.request(b"GET", BASE + "/e1", headers={b"User-Agent": [b"x" * 1100]}),
            lambda: h.request(b"HEAD", BASE + "/e1"),
            lambda: h.request(b"POST", BASE, body=b'{"metadata":{"name":"e2"}}'),
            forwarded,
            odd_agent,
            own_audit_id,
            quoted_audit_id,
            other_peer,
        ],
    )
    # Templates made most lines (after each shape's first sighting), every one checked.
    assert checked.lines_checked() > 40
    assert checked.fused > 10
    assert checked.declined > 0


def test_the_log_file_holds_the_same_lines_either_way(tmp_path: Any) -> None:
    def run(directory: Any, templates: bool) -> list[bytes]:
        directory.mkdir()
        h, _, _ = harness(directory)
        if not templates:
            h.stage.line_sink = None
            h.stage.templates = None
        for index in range(4):
            for path in (BASE + "/e1", BASE, BASE + "/missing"):
                headers = {b"Audit-Id": [f"id-{index}-{len(path)}".encode()]}
                h.serve(h.request(b"GET", path, headers=headers))
                h.clock.advance(0.5)
        h.clock.advance(2)
        return (directory / "audit.log").read_bytes().splitlines()

    with_templates = run(tmp_path / "a", True)
    without = run(tmp_path / "b", False)
    assert len(with_templates) == 24
    assert with_templates == without


def test_request_level_events_carry_their_objects_and_never_use_templates(tmp_path: Any) -> None:
    h, checked, _ = harness(tmp_path, REQUEST)
    serve_all(h, [lambda: h.request(b"POST", BASE, body=b'{"metadata":{"name":"e1"}}')])
    assert checked.lines_checked() == 0 and checked.declined == 6


def test_a_shape_decided_otherwise_gets_its_own_annotations(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The same request allowed, then denied (the policy changed in between): each
    ResponseComplete carries its own decision."""
    from tests.unit.audit.test_filter import NotBob

    h, checked, _ = harness(tmp_path)
    for _ in range(3):
        h.serve(h.request(b"GET", BASE + "/e1"))
    monkeypatch.setattr(NotBob, "authorize", lambda self, attributes: Decision(DENY, "no more"))
    for _ in range(3):
        request = h.serve(h.request(b"GET", BASE + "/e1"))
        assert request.code == 403
    assert checked.lines_checked() >= 8
    h.clock.advance(1)
    logged = (tmp_path / "audit.log").read_bytes().splitlines()
    lines = [line for line in logged if b"Complete" in line]
    assert [b'decision":"forbid"' in line for line in lines] == [False] * 3 + [True] * 3, lines[-1]


def test_the_fused_path_writes_the_log_file_the_encoder_would(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """The same requests with the server's own audit IDs, through the stage's fused path and
    through the encoder alone: the same file, byte for byte, and the same metrics."""
    import itertools

    from apiserver.http import app

    def run(directory: Any, templates: bool) -> tuple[list[bytes], Any]:
        directory.mkdir()
        ids = itertools.count()
        monkeypatch.setattr(app, "new_uuid", lambda: f"00000000-0000-0000-0000-{next(ids):012d}")
        h, checked, _ = harness(directory)
        if not templates:
            h.stage.line_sink = None
            h.stage.templates = None
        requests = [
            lambda: h.request(b"GET", BASE + "/e1"),
            lambda: h.request(b"GET", BASE + "/missing"),
            lambda: h.request(b"GET", BASE),
            lambda: h.request(b"HEAD", BASE + "/e1"),
            lambda: h.request(b"GET", BASE + "/e1", token=None),
            lambda: h.request(b"GET", BASE + "/e1", headers={b"Impersonate-User": [b"carol"]}),
            lambda: h.request(b"GET", BASE + "/e1", headers={b"X-Real-Ip": [b"10.1.1.1"]}),
            lambda: h.request(b"DELETE", BASE + "/e1"),
            lambda: h.request(b"POST", BASE, body=b'{"metadata":{"name":"e1"}}'),
            lambda: h.request(b"GET", "/healthz"),
        ]
        serve_all(h, requests, times=4)
        if templates:
            assert checked.fused >= 20
        checked.lines_checked()
        return (directory / "audit.log").read_bytes().splitlines(), h.metrics.pending

    fused, fused_counts = run(tmp_path / "a", True)
    encoded, encoded_counts = run(tmp_path / "b", False)
    assert len(fused) > 60
    assert fused == encoded
    assert fused_counts == encoded_counts
