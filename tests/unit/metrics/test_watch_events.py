"""apiserver_watch_events_total / _sizes: what the watch streams sent, per resource
(k8s.io/apiserver pkg/endpoints/handlers/watch.go), exposed at scrape time."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from apiserver.http.watchevents import watch_event_counts
from apiserver.metrics.watches import WatchEventsCollector


def test_events_sent_are_counted_with_their_sizes() -> None:
    counts = watch_event_counts("example.com", "v9", "widgets")
    assert watch_event_counts("example.com", "v9", "widgets") is counts
    counts.sent(100)
    counts.sent(3000)
    counts.sent(500_000)
    registry = CollectorRegistry()
    registry.register(WatchEventsCollector(lambda name: True))
    text = generate_latest(registry).decode()
    labels = 'group="example.com",resource="widgets",version="v9"'

    def bucket(le: str) -> str:
        return f'group="example.com",le="{le}",resource="widgets",version="v9"'

    assert f"apiserver_watch_events_total{{{labels}}} 3.0" in text
    assert f"apiserver_watch_events_sizes_bucket{{{bucket('1024')}}} 1.0" in text
    assert f"apiserver_watch_events_sizes_bucket{{{bucket('4096')}}} 2.0" in text
    assert f"apiserver_watch_events_sizes_bucket{{{bucket('131072')}}} 2.0" in text
    assert f"apiserver_watch_events_sizes_bucket{{{bucket('+Inf')}}} 3.0" in text
    assert f"apiserver_watch_events_sizes_sum{{{labels}}} 503100.0" in text
    registry = CollectorRegistry()
    registry.register(WatchEventsCollector(lambda name: name != "apiserver_watch_events_sizes"))
    assert "apiserver_watch_events_sizes" not in generate_latest(registry).decode()
