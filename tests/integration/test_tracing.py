"""--tracing-config-file: spans of requests and their storage calls reach an OTLP/gRPC
receiver started by the test, parented by the incoming W3C ``traceparent`` for a privileged
user (apiserver.tracing)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon, free_port

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


class Receiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.lock = threading.Lock()

    def Export(self, request: Any, context: Any) -> Any:
        with self.lock:
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    self.spans.extend(scope.spans)
        return trace_service_pb2.ExportTraceServiceResponse()

    def wait_for(self, found: Callable[[list[Any]], bool], timeout: float = 20) -> list[Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                spans = list(self.spans)
            if found(spans):
                return spans
            time.sleep(0.2)
        return spans


@pytest.fixture
def receiver() -> Iterator[tuple[Receiver, int]]:
    port = free_port()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = Receiver()
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    yield servicer, port
    server.stop(None)


def test_spans_of_a_request_and_its_storage_calls_reach_the_receiver(
    start_daemon: Callable[..., Daemon], tmp_path: Path, receiver: tuple[Receiver, int]
) -> None:
    servicer, port = receiver
    config = tmp_path / "tracing.yaml"
    config.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
        f"endpoint: 127.0.0.1:{port}\nsamplingRatePerMillion: 0\n"
    )
    daemon = start_daemon(
        [f"--tracing-config-file={config}"], env={"OTEL_BSP_SCHEDULE_DELAY": "200"}
    )
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    status = daemon.get(
        EVENTS,
        "POST",
        {"Content-Type": "application/json", "traceparent": traceparent},
        event_body("traced"),
    )[0]
    assert status == 201
    # An untraced request at sampling rate 0 leaves no span.
    assert daemon.get(EVENTS + "/traced")[0] == 200

    def request_span(spans: list[Any]) -> Any:
        return next(
            (
                s
                for s in spans
                if s.trace_id.hex() == TRACE_ID and not s.name.startswith(("Create", "Get"))
            ),
            None,
        )

    spans = servicer.wait_for(
        lambda spans: (
            request_span(spans) is not None and any(s.name.startswith("Create ") for s in spans)
        )
    )
    span = request_span(spans)
    assert span is not None, [s.name for s in spans]
    assert span.name == "POST /apis/events.k8s.io/v1/namespaces/{:namespace}/events"
    assert span.parent_span_id.hex() == PARENT_ID
    attributes = {a.key: a.value for a in span.attributes}
    assert attributes["http.status_code"].int_value == 201
    assert attributes["http.target"].string_value == EVENTS
    storage = next(s for s in spans if s.name.startswith("Create "))
    assert storage.trace_id.hex() == TRACE_ID
    assert storage.parent_span_id == span.span_id
    assert (
        "/events/default/traced" in {a.key: a.value for a in storage.attributes}["key"].string_value
    )
    assert all(s.trace_id.hex() == TRACE_ID for s in spans)
