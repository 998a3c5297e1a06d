"""The request series carry kube-apiserver's names, labels and buckets
(k8s.io/apiserver pkg/endpoints/metrics/metrics.go), and the component-base options act."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.web.http_headers import Headers

from apiserver.auth.requestinfo import parse_request_info
from apiserver.http.app import RequestInfo
from apiserver.metrics import Metrics
from apiserver.metrics.labels import LabelPolicy, ManifestError

NS = "/apis/events.k8s.io/v1/namespaces/default/events"


class Sent:
    """What the recorder reads off a finished request."""

    def __init__(self, size: int, content_type: bytes | None = None) -> None:
        self.sentLength = size
        self.requestHeaders = Headers()
        self._content_type = content_type

    def getHeader(self, name: bytes) -> bytes | None:
        return self._content_type if name == b"content-type" else None


def request(
    metrics: Metrics,
    method: str,
    path: str,
    code: int = 200,
    seconds: float = 0.01,
    size: int = 0,
    query: dict[bytes, list[bytes]] | None = None,
    content_type: bytes | None = None,
    long_running: bool = False,
) -> None:
    q = query or {}
    info = RequestInfo(method, path, q, long_running, path.startswith("/api"))
    metrics.request_started(info)
    info.resolved = parse_request_info(method, path, q)
    metrics.request_finished(info, code, seconds, Sent(size, content_type))  # type: ignore[arg-type]


def text(metrics: Metrics) -> str:
    return metrics.exposition().decode()


def value(out: str, name: str, **labels: str) -> float | None:
    """The sample ``name`` whose labels include ``labels``, or None."""
    for family in text_string_to_metric_families(out):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    return None


def test_histogram_buckets_are_the_references() -> None:
    metrics = Metrics()
    request(metrics, "GET", NS + "/a", seconds=0.03, size=1500)
    out = text(metrics)
    labels = {"verb": "GET", "scope": "resource", "resource": "events", "subresource": ""}
    # 23 latency buckets, 21 SLI buckets (no 0.005 and 0.025), 7 size buckets.
    assert out.count("apiserver_request_duration_seconds_bucket{") == 24
    assert out.count("apiserver_request_sli_duration_seconds_bucket{") == 22
    assert out.count("apiserver_response_sizes_bucket{") == 8
    assert value(out, "apiserver_request_sli_duration_seconds_bucket", le="0.05", **labels) == 1
    assert value(out, "apiserver_request_duration_seconds_bucket", le="0.025", **labels) == 0
    assert value(out, "apiserver_request_duration_seconds_bucket", le="0.05", **labels) == 1
    assert value(out, "apiserver_response_sizes_bucket", le="1000", **labels) == 0
    assert value(out, "apiserver_response_sizes_bucket", le="10000", **labels) == 1
    assert value(out, "apiserver_response_sizes_sum", **labels) == 1500
    assert "apiserver_request_sli_duration_seconds_count{" in out
    assert "_created" not in out


def test_verbs_and_scopes_follow_clean_verb_and_clean_scope() -> None:
    metrics = Metrics()
    request(metrics, "GET", NS)
    request(metrics, "GET", "/apis/events.k8s.io/v1/events")
    request(metrics, "POST", NS, 201)
    request(metrics, "PATCH", NS + "/a", content_type=b"application/apply-patch+yaml")
    request(metrics, "PATCH", NS + "/b", content_type=b"application/merge-patch+json")
    request(metrics, "DELETE", NS)
    request(metrics, "GET", NS, query={b"watch": [b"1"]}, long_running=True)
    out = text(metrics)
    total = "apiserver_request_total"
    assert value(out, total, scope="namespace", verb="LIST") == 1
    assert value(out, total, scope="cluster", verb="LIST") == 1
    assert value(out, total, scope="resource", verb="POST", code="201") == 1
    assert value(out, total, verb="APPLY") == 1
    assert value(out, total, verb="PATCH") == 1
    assert value(out, total, verb="DELETECOLLECTION", scope="namespace") == 1
    assert value(out, "apiserver_longrunning_requests", scope="namespace", verb="WATCH") == 0
    # Only GET and LIST record response sizes.
    assert (
        'apiserver_response_sizes_count{component="apiserver",group="events.k8s.io",resource="events",scope="namespace",subresource="",verb="LIST"'
        in out
    )
    assert (
        'apiserver_response_sizes_count{component="apiserver",group="events.k8s.io",resource="events",scope="resource",subresource="",verb="POST"'
        not in out
    )


def test_long_running_requests_are_counted_while_they_run() -> None:
    metrics = Metrics()
    q = {b"watch": [b"true"]}
    info = RequestInfo("GET", NS, q, True, True)
    metrics.request_started(info)
    gauge = "apiserver_longrunning_requests"
    assert value(text(metrics), gauge, verb="WATCH", resource="events") == 1
    info.resolved = parse_request_info("GET", NS, q)
    metrics.request_finished(info, 200, 12.0)
    assert value(text(metrics), gauge, verb="WATCH", resource="events") == 0


def test_dry_run_requests_are_not_sli_requests() -> None:
    metrics = Metrics()
    request(metrics, "POST", NS, 201, query={b"dryRun": [b"All"]})
    out = text(metrics)
    assert 'dry_run="All"' in out
    assert "apiserver_request_sli_duration_seconds_count{" not in out


def test_non_resource_paths_are_bounded() -> None:
    metrics = Metrics()
    for i in range(300):
        request(metrics, "GET", f"/nothing/{i}", 404)
    out = text(metrics)
    assert 'subresource="/nothing/0"' in out
    assert 'subresource="other"' in out
    assert len(metrics.recorder.series) <= 258


def test_disabled_metrics_are_left_out() -> None:
    metrics = Metrics(policy=LabelPolicy.from_flags(["apiserver_response_sizes"]))
    request(metrics, "GET", NS)
    out = text(metrics)
    assert "apiserver_response_sizes" not in out
    assert "apiserver_request_total{" in out


def test_hidden_metrics_are_shown_for_the_previous_minor_only() -> None:
    assert "apiserver_storage_objects" not in text(Metrics())
    assert "apiserver_resource_objects" in text(Metrics())
    shown = Metrics(policy=LabelPolicy.from_flags(show_hidden="1.34"))
    assert "# TYPE apiserver_storage_objects gauge" in text(shown)
    disabled = LabelPolicy.from_flags(["apiserver_storage_objects"], show_hidden="1.34")
    assert "apiserver_storage_objects" not in text(Metrics(policy=disabled))


def test_allow_metric_labels_report_other_values_as_unexpected(tmp_path: Path) -> None:
    manifest = tmp_path / "allow.yaml"
    manifest.write_text(
        '"apiserver_request_total,resource": "pods"\n"apiserver_request_total,code": "200"\n'
    )
    policy = LabelPolicy.from_flags(
        allow={"apiserver_request_total,code": ("200", "201")}, manifest=str(manifest)
    )
    metrics = Metrics(policy=policy)
    request(metrics, "GET", NS + "/a", 200)
    request(metrics, "GET", NS + "/b", 404)
    request(metrics, "GET", NS + "/c", 500)
    out = text(metrics)
    total = "apiserver_request_total"
    # 404 and 500 are summed under "unexpected"; the flag's list for code overrides the
    # file's, the file's list for resource stays.
    assert value(out, total, code="unexpected", resource="unexpected") == 2
    assert value(out, total, code="200", resource="unexpected") == 1
    assert value(out, total, resource="events") is None


def test_a_bad_manifest_names_the_flag_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"--allow-metric-labels-manifest.*missing\.yaml"):
        LabelPolicy.from_flags(manifest=str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n")
    with pytest.raises(ManifestError, match=r"bad\.yaml"):
        LabelPolicy.from_flags(manifest=str(bad))


def test_build_info_and_process_series() -> None:
    out = text(Metrics(git_version="v1.35.2"))
    assert 'kubernetes_build_info{build_date="' in out and 'git_version="v1.35.2"' in out
    assert "process_resident_memory_bytes " in out
    assert "process_cpu_seconds_total " in out
    assert "go_goroutines " in out


def test_storage_calls_are_timed_per_operation_and_resource() -> None:
    from twisted.internet.defer import fail, succeed
    from twisted.internet.task import Clock

    from apiserver.metrics.storage import StorageCollector, StoreTimings, TimedStore

    class Backend:
        kind = "sqlite"
        capabilities = "declared"

        def get(self, key: bytes, revision: int = 0) -> object:
            clock.advance(0.03)
            return succeed(key)

        def create(self, key: bytes, value: bytes, ttl: int = 0) -> object:
            return fail(ValueError("exists"))

    clock = Clock()
    timings = StoreTimings(b"/registry")
    store = TimedStore(Backend(), timings, clock)
    assert store.capabilities == "declared" and store.kind == "sqlite"
    store.get(b"/registry/flowschemas/a")
    store.create(b"/registry/events/ns/b", b"").addErrback(lambda f: None)
    metrics = Metrics()
    metrics.registry.register(StorageCollector(timings, metrics.policy.enabled))
    out = text(metrics)
    duration = "etcd_request_duration_seconds_bucket"
    group = "flowcontrol.apiserver.k8s.io"
    flowschemas = {"operation": "get", "group": group, "resource": "flowschemas"}
    assert value(out, duration, le="0.025", **flowschemas) == 0
    assert value(out, duration, le="0.05", **flowschemas) == 1
    assert value(out, "etcd_requests_total", **flowschemas) == 1
    events = {"operation": "create", "group": "", "resource": "events"}
    assert value(out, "etcd_request_errors_total", **events) == 1
