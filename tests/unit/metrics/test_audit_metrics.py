"""The audit metrics (k8s.io/apiserver pkg/audit/metrics.go) as /metrics exposes them."""

from __future__ import annotations

from apiserver.metrics import AuditRecorder, Metrics


def value(metrics: Metrics, line_start: str) -> float:
    for line in metrics.exposition().decode().splitlines():
        if line.startswith(line_start + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {line_start}")


def test_counts_made_per_request_show_at_the_next_exposition() -> None:
    metrics = Metrics()
    recorder = AuditRecorder(metrics)
    metadata = recorder.counts("Metadata")
    for _ in range(3):
        metadata[0] += 1  # a request
        metadata[1] += 2  # its two events
    recorder.counts("None")[0] += 1
    assert value(metrics, "apiserver_audit_event_total") == 6
    assert value(metrics, 'apiserver_audit_level_total{level="Metadata"}') == 3
    assert value(metrics, 'apiserver_audit_level_total{level="None"}') == 1
    # Counted once: the next exposition adds only what came since.
    recorder.counts("Metadata")[1] += 1
    assert value(metrics, "apiserver_audit_event_total") == 7
    assert value(metrics, 'apiserver_audit_level_total{level="Metadata"}') == 3


def test_errors_and_rejections_count_at_once() -> None:
    metrics = Metrics()
    recorder = AuditRecorder(metrics)
    recorder.error("log", 2)
    recorder.error("buffered", 5)
    recorder.rejected()
    assert value(metrics, 'apiserver_audit_error_total{plugin="log"}') == 2
    assert value(metrics, 'apiserver_audit_error_total{plugin="buffered"}') == 5
    assert value(metrics, "apiserver_audit_requests_rejected_total") == 1
