"""Request metrics: counters and histograms per label set, in-flight gauges, reset."""

from __future__ import annotations

from prometheus_client import generate_latest

from apiserver.http.app import RequestInfo
from apiserver.metrics import Metrics


def info(method: str, path: str, query: dict[bytes, list[bytes]] | None = None) -> RequestInfo:
    return RequestInfo(method, path, query or {}, False, True)


def text(metrics: Metrics) -> str:
    return generate_latest(metrics.registry).decode()


GET_ITEM = "/apis/events.k8s.io/v1/namespaces/default/events/a"
LABELS = (
    'code="200",component="apiserver",dry_run="",group="events.k8s.io",resource="events",'
    'scope="resource",subresource="",verb="GET",version="v1"'
)


def test_requests_are_counted_per_label_set_and_code() -> None:
    metrics = Metrics()
    for name in ("a", "b", "c"):
        request = info("GET", GET_ITEM[:-1] + name)
        metrics.request_started(request)
        metrics.request_finished(request, 200, 0.01)
    request = info("GET", GET_ITEM)
    metrics.request_started(request)
    metrics.request_finished(request, 404, 0.01)
    out = text(metrics)
    assert f"apiserver_request_total{{{LABELS}}} 3.0" in out
    assert f"apiserver_request_total{{{LABELS.replace('200', '404')}}} 1.0" in out
    assert 'apiserver_current_inflight_requests{request_kind="readOnly"} 1.0' in out
    assert 'apiserver_current_inflight_requests{request_kind="readOnly"} 0.0' in text(metrics)


def test_in_flight_gauges_report_the_most_since_the_last_scrape() -> None:
    metrics = Metrics()
    post = info("POST", "/apis/events.k8s.io/v1/namespaces/default/events")
    metrics.request_started(post)
    metrics.request_started(post)
    metrics.request_finished(post, 201, 0.02)
    # currentInflightRequests: the maximum of the last period, then the current count.
    assert 'apiserver_current_inflight_requests{request_kind="mutating"} 2.0' in text(metrics)
    assert 'apiserver_current_inflight_requests{request_kind="mutating"} 1.0' in text(metrics)


def test_counting_goes_on_after_a_reset() -> None:
    metrics = Metrics()
    request = info("GET", GET_ITEM)
    metrics.request_started(request)
    metrics.request_finished(request, 200, 0.01)
    metrics.reset()
    assert f"apiserver_request_total{{{LABELS}}}" not in text(metrics)
    metrics.request_started(request)
    metrics.request_finished(request, 200, 0.01)
    assert f"apiserver_request_total{{{LABELS}}} 1.0" in text(metrics)


def test_dry_run_is_a_label() -> None:
    metrics = Metrics()
    request = info(
        "POST", "/apis/events.k8s.io/v1/namespaces/default/events", {b"dryRun": [b"All"]}
    )
    metrics.request_started(request)
    metrics.request_finished(request, 201, 0.01)
    assert 'dry_run="All"' in text(metrics)


def test_list_and_deletecollection_verbs_split_off_get_and_delete() -> None:
    metrics = Metrics()
    collection = "/apis/events.k8s.io/v1/namespaces/default/events"
    for method in ("GET", "DELETE"):
        request = info(method, collection)
        metrics.request_started(request)
        metrics.request_finished(request, 200, 0.01)
    out = text(metrics)
    assert 'verb="LIST"' in out and 'verb="DELETECOLLECTION"' in out
    assert 'scope="namespace"' in out and 'resource="events"' in out


def test_the_sli_histogram_leaves_out_the_priority_and_fairness_wait() -> None:
    """``apiserver_request_sli_duration_seconds`` counts latency without the queue wait
    (request.TrackAPFQueueWaitLatency); ``apiserver_request_duration_seconds`` with it."""
    metrics = Metrics()
    quick = info("GET", GET_ITEM)
    metrics.request_started(quick)
    metrics.request_finished(quick, 200, 0.02)
    queued = info("GET", GET_ITEM)
    queued.unaccounted = 2.9  # waited 2.9 s of its 3 s in a queue
    metrics.request_started(queued)
    metrics.request_finished(queued, 200, 3.0)
    out = text(metrics)
    sli = [line for line in out.splitlines() if line.startswith("apiserver_request_sli_")]
    duration = [line for line in out.splitlines() if line.startswith("apiserver_request_dur")]

    def bucket(lines: list[str], le: str) -> float:
        return next(float(x.rsplit(" ", 1)[1]) for x in lines if f'le="{le}"' in x)

    assert bucket(duration, "0.2") == 1 and bucket(duration, "4") == 2
    assert bucket(sli, "0.2") == 2  # both under 0.2 s once the wait is left out
    sum_line = next(x for x in sli if x.startswith("apiserver_request_sli_duration_seconds_sum"))
    assert abs(float(sum_line.rsplit(" ", 1)[1]) - 0.12) < 1e-9
