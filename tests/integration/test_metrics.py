"""/metrics on the real daemon: request counters and the storage gauges."""

from __future__ import annotations

import time
from collections.abc import Callable

from tests.integration.daemon import Daemon


def test_metrics_count_requests_and_storage(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(
        ["--store-count-metric-poll-period=1s", "--store-db-metric-poll-interval=1s"]
    )
    assert daemon.get("/apis/events.k8s.io/v1/namespaces/default/events")[0] == 200
    deadline = time.monotonic() + 10
    text = ""
    while time.monotonic() < deadline:
        status, headers, body = daemon.get("/metrics")
        assert status == 200
        assert headers["content-type"].startswith("text/plain")
        text = body.decode()
        if "apiserver_storage_db_total_size_in_bytes{" in text:
            break
        time.sleep(0.3)
    assert "apiserver_request_total{" in text
    assert 'verb="LIST"' in text and 'resource="events"' in text and 'code="200"' in text
    assert 'apiserver_storage_objects{resource="events.events.k8s.io"} 0.0' in text
    assert "apiserver_storage_db_total_size_in_bytes{" in text
    assert "apiserver_request_duration_seconds_bucket{" in text


def test_disabled_metrics_are_not_registered(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--disabled-metrics=apiserver_request_total"])
    daemon.get("/version")
    text = daemon.get("/metrics")[2].decode()
    assert "apiserver_request_total" not in text
    assert "apiserver_request_duration_seconds" in text
