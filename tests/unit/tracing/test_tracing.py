"""apiserver.tracing without an exporter: span names, the public-endpoint rule, and the
store wrapper's spans (an in-memory span exporter stands in for OTLP)."""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from tests.unit.fake_request import FakeRequest
from twisted.internet.defer import succeed
from twisted.internet.testing import MemoryReactorClock

from apiserver.auth.interface import UserInfo
from apiserver.auth.requestinfo import parse_request_info
from apiserver.http.app import RequestInfo
from apiserver.options.files import TracingConfig
from apiserver.tracing import CURRENT_SPAN, TracedStore, Tracing, TracingApp, span_name

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
NS = "/apis/events.k8s.io/v1/namespaces/default/events"


def tracing() -> tuple[Tracing, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    t = Tracing(TracingConfig(), "apiserver-test", MemoryReactorClock())
    t.tracer = provider.get_tracer("test")
    t.propagator = TraceContextTextMapPropagator()
    return t, exporter


def info(method: str, path: str, groups: tuple[str, ...] = ()) -> RequestInfo:
    i = RequestInfo(method, path, {}, False, True)
    i.resolved = parse_request_info(method, path, {})
    i.user = UserInfo(name="u", groups=groups)
    return i


def test_span_names_follow_get_span_name_from_request_info() -> None:
    assert span_name(info("GET", NS + "/a")) == (
        "GET /apis/events.k8s.io/v1/namespaces/{:namespace}/events/{:name}"
    )
    assert span_name(info("GET", "/api/v1/events")) == "GET /api/v1/events"
    assert span_name(info("GET", "/healthz")) == "GET"


def run(t: Tracing, groups: tuple[str, ...]) -> Any:
    request = FakeRequest(
        b"POST", NS.encode(), headers={b"traceparent": [f"00-{TRACE}-{PARENT}-01".encode()]}
    )
    i = info("POST", NS, groups)
    token = CURRENT_SPAN.set(None)
    t.stage(request, i)
    CURRENT_SPAN.reset(token)  # what TracingApp does once the chain returns
    request.setResponseCode(201)
    request.finish()
    return request


def test_a_privileged_users_traceparent_is_the_parent() -> None:
    t, exporter = tracing()
    run(t, ("system:masters",))
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") == TRACE
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT
    assert span.attributes is not None and span.attributes["http.status_code"] == 201


def test_anyone_elses_traceparent_is_only_linked() -> None:
    t, exporter = tracing()
    run(t, ("system:authenticated",))
    (span,) = exporter.get_finished_spans()
    assert format(span.context.trace_id, "032x") != TRACE
    assert [format(link.context.span_id, "016x") for link in span.links] == [PARENT]


class Store:
    kind = "memory"

    def get(self, key: bytes, revision: int = 0) -> Any:
        return succeed(key)

    def count(self, prefix: bytes) -> Any:
        return succeed(0)


def test_store_calls_get_spans_only_inside_a_traced_request() -> None:
    t, exporter = tracing()
    store = TracedStore(Store(), t)
    store.get(b"/registry/events/default/a")
    assert exporter.get_finished_spans() == ()
    assert store.kind == "memory"

    class Chain:
        def handle(self, request: Any) -> None:
            t.stage(request, info("GET", NS + "/a", ("system:masters",)))
            store.get(b"/registry/events/default/a")

    request = FakeRequest(b"GET", (NS + "/a").encode())
    TracingApp(Chain()).handle(request)
    assert CURRENT_SPAN.get() is None
    request.finish()
    names = [s.name for s in exporter.get_finished_spans()]
    assert names == [
        "Get memory",
        "GET /apis/events.k8s.io/v1/namespaces/{:namespace}/events/{:name}",
    ]


def test_store_calls_after_an_await_belong_to_their_request() -> None:
    """A handler coroutine that awaits, then reads: its read is a child of its own request's
    span, not of whichever request runs when it resumes (the coroutine keeps the context it
    started in)."""
    from twisted.internet.defer import Deferred

    t, exporter = tracing()
    store = TracedStore(Store(), t)
    gates: list[Deferred[None]] = []

    async def handler(key: bytes) -> None:
        gate: Deferred[None] = Deferred()
        gates.append(gate)
        await gate
        await store.get(key)

    class Chain:
        def handle(self, request: Any) -> None:
            t.stage(request, info("GET", NS + "/" + request.uri.decode()[-1], ("system:masters",)))
            Deferred.fromCoroutine(handler(request.uri))

    first, second = FakeRequest(b"GET", b"/x/a"), FakeRequest(b"GET", b"/x/b")
    TracingApp(Chain()).handle(first)
    TracingApp(Chain()).handle(second)
    assert CURRENT_SPAN.get() is None
    gates[1].callback(None)  # the second request's read first
    gates[0].callback(None)
    first.finish()
    second.finish()
    reads = [s for s in exporter.get_finished_spans() if s.name == "Get memory"]
    assert len(reads) == 2
    requests = [s for s in exporter.get_finished_spans() if s.name != "Get memory"]
    by_id = {r.context.span_id: dict(r.attributes or {})["http.target"] for r in requests}
    pairs = [(by_id[r.parent.span_id], dict(r.attributes or {})["key"]) for r in reads if r.parent]
    assert sorted(pairs) == [
        ("/x/a", "/x/a"),
        ("/x/b", "/x/b"),
    ]


def test_a_webhook_call_of_a_traced_request_is_a_client_span_it_propagates() -> None:
    """The authorization webhook's POST: a child span ``HTTP POST`` of the request's span,
    whose ``traceparent`` the webhook receives (otelhttp's transport in the reference)."""
    from twisted.internet.defer import Deferred

    from apiserver.auth.authz.webhook import TreqTransport
    from apiserver.http import spans

    t, exporter = tracing()
    spans.start = t.webhook_span
    sent: list[dict[bytes, list[bytes]]] = []
    answers: list[Deferred[Any]] = []

    class Client:
        def post(self, url: str, data: bytes, headers: dict[bytes, list[bytes]]) -> Any:
            sent.append(headers)
            d: Deferred[Any] = Deferred()
            answers.append(d)
            return d

    transport = TreqTransport(Client(), "https://authz.example/", MemoryReactorClock())
    try:
        transport.post(b"{}", 0)  # outside a request: no span, no header
        assert b"traceparent" not in sent[0]

        class Chain:
            def handle(self, request: Any) -> None:
                t.stage(request, info("GET", NS + "/a", ("system:masters",)))
                transport.post(b"{}", 0)

        request = FakeRequest(b"GET", (NS + "/a").encode())
        TracingApp(Chain()).handle(request)

        class Response:
            code = 200

            def content(self) -> Any:
                return succeed(b"{}")

        answers[1].callback(Response())
        request.finish()
    finally:
        spans.start = None
    finished = {s.name: s for s in exporter.get_finished_spans()}
    call = finished["HTTP POST"]
    server = finished["GET /apis/events.k8s.io/v1/namespaces/{:namespace}/events/{:name}"]
    assert call.parent is not None and call.parent.span_id == server.context.span_id
    assert dict(call.attributes or {})["http.status_code"] == 200
    (traceparent,) = sent[1][b"traceparent"]
    trace_id, span_id = traceparent.decode().split("-")[1:3]
    assert trace_id == format(call.context.trace_id, "032x")
    assert span_id == format(call.context.span_id, "016x")
