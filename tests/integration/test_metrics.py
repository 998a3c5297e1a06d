"""/metrics on the real daemon: request counters, the storage gauges, and every series the
Kubernetes monitoring mixin's apiserver alerts, rules and dashboard select."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import Daemon

MIXIN = Path(__file__).parent / "data" / "monitoring_mixin_apiserver.yaml"
#: Labels Prometheus attaches to every scraped series (target labels), not the server's.
TARGET_LABELS = {"job", "instance", "cluster", "namespace", "service", "endpoint", "pod"}
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
_BY = re.compile(r"\bby\s*\(([^)]*)\)")


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
        if "apiserver_storage_size_bytes{" in text:
            break
        time.sleep(0.3)
    assert "apiserver_request_total{" in text
    assert 'verb="LIST"' in text and 'resource="events"' in text and 'code="200"' in text
    assert 'apiserver_resource_objects{group="events.k8s.io",resource="events"} 0.0' in text
    # Deprecated in 1.34, so hidden in 1.35 (component-base metrics/version.go).
    assert "apiserver_storage_objects" not in text
    assert "apiserver_storage_size_bytes{" in text
    assert "apiserver_request_duration_seconds_bucket{" in text
    # The watch cache over the events (k8s.io/apiserver pkg/storage/cacher/metrics).
    assert 'apiserver_watch_cache_initializations_total{group="",resource="events"} 1.0' in text
    assert 'apiserver_watch_cache_capacity{group="",resource="events"}' in text


def test_disabled_metrics_are_not_registered(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--disabled-metrics=apiserver_request_total"])
    daemon.get("/version")
    text = daemon.get("/metrics")[2].decode()
    assert "apiserver_request_total" not in text
    assert "apiserver_request_duration_seconds" in text


def _exposed(text: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Sample name -> label names seen, and sample name -> values of ``le``; a family with
    no sample yet is listed under its name with no labels."""
    labels: dict[str, set[str]] = {}
    bounds: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        names = {family.name}
        if family.type == "counter":
            names.add(family.name + "_total")
        if family.type == "histogram":
            names |= {family.name + s for s in ("_bucket", "_count", "_sum")}
        for name in names:
            labels.setdefault(name, set())
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
            if "le" in sample.labels:
                bounds.setdefault(sample.name, set()).add(sample.labels["le"])
    return labels, bounds


def test_every_series_of_the_monitoring_mixin_is_exposed(
    start_daemon: Callable[..., Daemon],
) -> None:
    daemon = start_daemon(["--store-count-metric-poll-period=1s"])
    base = "/apis/events.k8s.io/v1/namespaces/default/events"
    json = {"Content-Type": "application/json"}
    assert daemon.get(base, "POST", json, event_body("e1"))[0] == 201
    assert daemon.get(base + "/e1")[0] == 200
    assert daemon.get(base)[0] == 200
    assert daemon.get("/apis/events.k8s.io/v1/events")[0] == 200
    merge = {"Content-Type": "application/merge-patch+json"}
    assert daemon.get(base + "/e1", "PATCH", merge, b'{"metadata":{"labels":{"a":"b"}}}')[0] == 200
    assert daemon.get(base + "?watch=1&timeoutSeconds=1")[0] == 200
    assert daemon.get(base + "/e1", "DELETE")[0] == 200
    deadline = time.monotonic() + 10
    while True:
        text = daemon.get("/metrics")[2].decode()
        if "apiserver_resource_objects{" in text or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    labels, bounds = _exposed(text)

    queries = yaml.safe_load(MIXIN.read_text())
    missing: list[str] = []
    for section, entries in queries.items():
        for name, expr in entries.items():
            selected: list[str] = []
            for metric, matchers in _SELECTOR.findall(expr):
                selected.append(metric)
                if metric not in labels:
                    missing.append(f"{section}/{name}: no series {metric}")
                    continue
                for label, op, value in _MATCHER.findall(matchers):
                    if label in TARGET_LABELS:
                        continue
                    if labels[metric] and label not in labels[metric]:
                        missing.append(f"{section}/{name}: {metric} has no label {label}")
                    if label == "le" and op == "=" and value not in bounds.get(metric, set()):
                        missing.append(f"{section}/{name}: {metric} has no bucket le={value}")
            for group in _BY.findall(expr):
                for label in (part.strip() for part in group.split(",")):
                    if label and label not in TARGET_LABELS:
                        if not any(label in labels.get(m, set()) for m in selected):
                            missing.append(f"{section}/{name}: no selected series has {label}")
    assert not missing, "\n".join(missing)
    # The client certificate the test presents is observed (seconds to its expiry).
    count = next(
        f.samples
        for f in text_string_to_metric_families(text)
        if f.name == "apiserver_client_certificate_expiration_seconds"
    )
    assert any(s.name.endswith("_count") and s.value > 0 for s in count)
    # /metrics/slis: the health checks the readiness probes above ran.
    slis = daemon.get("/metrics/slis")[2].decode()
    assert 'kubernetes_healthcheck{name="ping",type="readyz"} 1.0' in slis
    assert 'kubernetes_healthchecks_total{name="ping",status="success",type="readyz"}' in slis
    # The backend's calls, labelled as kube-apiserver's etcd3 store labels them.
    assert "operation" in labels["etcd_request_duration_seconds_bucket"]
    assert 'etcd_requests_total{group="",operation="create",resource="events"}' in text
    # The read SLO's buckets hold the requests made above.
    assert "apiserver_request_sli_duration_seconds_bucket" in labels
    assert {"1", "5", "30"} <= bounds["apiserver_request_sli_duration_seconds_bucket"]


def test_failed_tls_handshakes_are_counted(start_daemon: Callable[..., Daemon]) -> None:
    """A client that leaves before the handshake, and one that speaks plain HTTP to the TLS
    port: two ``apiserver_tls_handshake_errors_total`` (Go's server logs both as ``http: TLS
    handshake error``)."""
    import socket

    daemon = start_daemon([])

    def errors() -> float:
        _, _, body = daemon.get("/metrics")
        for family in text_string_to_metric_families(body.decode()):
            if family.name == "apiserver_tls_handshake_errors":
                return sum(sample.value for sample in family.samples)
        raise AssertionError("apiserver_tls_handshake_errors_total is not exposed")

    before = errors()
    with socket.create_connection(("127.0.0.1", daemon.port)):
        pass  # connect and leave
    with socket.create_connection(("127.0.0.1", daemon.port)) as plain:
        plain.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\n\r\n")
        plain.recv(1024)
    deadline = time.monotonic() + 10
    while errors() < before + 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert errors() == before + 2


def test_watch_events_are_counted(start_daemon: Callable[..., Daemon]) -> None:
    """Events written to watch clients: apiserver_watch_events_total and _sizes."""
    daemon = start_daemon([])
    path = "/apis/events.k8s.io/v1/namespaces/default/events"
    status, _, body = daemon.get(
        path, method="POST", headers={"Content-Type": "application/json"}, body=event_body("w1")
    )
    assert status == 201, body
    status, _, body = daemon.get(path + "?watch=1&timeoutSeconds=1", timeout=20)
    assert status == 200 and b'"ADDED"' in body
    text = daemon.get("/metrics")[2].decode()
    labels = 'group="events.k8s.io",resource="events",version="v1"'
    assert f"apiserver_watch_events_total{{{labels}}} 1.0" in text
    assert 'apiserver_watch_events_sizes_bucket{group="events.k8s.io",le="1024",' in text
