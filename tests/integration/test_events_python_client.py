"""The official Python ``kubernetes`` client against the real daemon, on both backends."""

from __future__ import annotations

import datetime as dt
import threading
import uuid

import pytest

from tests.integration.api_fixtures import ApiServer, api_server  # noqa: F401 - fixture

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402


def make_event(name: str, namespace: str, **labels: str) -> client.EventsV1Event:
    return client.EventsV1Event(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels=labels or None),
        event_time=dt.datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=dt.UTC),
        reporting_controller="example.com/controller",
        reporting_instance="controller-1",
        action="Create",
        reason="Created",
        type="Normal",
        note=f"event {name}",
        regarding=client.V1ObjectReference(kind="Pod", namespace=namespace, name="p1"),
    )


def ns() -> str:
    return "ns-" + uuid.uuid4().hex[:8]


def test_create_get_and_fields(api_server: ApiServer) -> None:  # noqa: F811
    api = client.EventsV1Api(api_server.python_client())
    namespace = ns()
    created = api.create_namespaced_event(namespace, make_event("e1", namespace, app="web"))
    assert created.metadata.name == "e1"
    assert created.metadata.uid
    assert int(created.metadata.resource_version) > 0
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.managed_fields[0].operation == "Update"
    got = api.read_namespaced_event("e1", namespace)
    assert got.note == "event e1"
    assert got.regarding.kind == "Pod"
    assert got.event_time == dt.datetime(2026, 11, 22, 10, 0, 0, 123456, tzinfo=dt.UTC)
    with pytest.raises(ApiException) as error:
        api.create_namespaced_event(namespace, make_event("e1", namespace))
    assert error.value.status == 409


def test_list_with_selectors_and_paging(api_server: ApiServer) -> None:  # noqa: F811
    api = client.EventsV1Api(api_server.python_client())
    namespace = ns()
    for i in range(5):
        api.create_namespaced_event(
            namespace, make_event(f"e{i}", namespace, tier="a" if i % 2 else "b")
        )
    tier_a = api.list_namespaced_event(namespace, label_selector="tier=a")
    assert sorted(e.metadata.name for e in tier_a.items) == ["e1", "e3"]
    by_name = api.list_namespaced_event(namespace, field_selector="metadata.name=e4")
    assert [e.metadata.name for e in by_name.items] == ["e4"]
    names: list[str] = []
    page = api.list_namespaced_event(namespace, limit=2)
    assert page.metadata.remaining_item_count == 3
    while True:
        names.extend(e.metadata.name for e in page.items)
        if not page.metadata._continue:
            break
        page = api.list_namespaced_event(namespace, limit=2, _continue=page.metadata._continue)
    assert names == [f"e{i}" for i in range(5)]
    everything = api.list_event_for_all_namespaces(field_selector=f"metadata.namespace={namespace}")
    assert len(everything.items) == 5


def test_watch_sees_added_modified_deleted(api_server: ApiServer) -> None:  # noqa: F811
    api = client.EventsV1Api(api_server.python_client())
    namespace = ns()
    start = api.list_namespaced_event(namespace).metadata.resource_version
    seen: list[tuple[str, str]] = []

    def writer() -> None:
        writer_api = client.EventsV1Api(api_server.python_client())
        writer_api.create_namespaced_event(namespace, make_event("w1", namespace))
        writer_api.patch_namespaced_event(
            "w1",
            namespace,
            {"series": {"count": 2, "lastObservedTime": "2026-11-22T10:00:01.000000Z"}},
        )
        writer_api.delete_namespaced_event("w1", namespace)

    thread = threading.Thread(target=writer)
    w = watch.Watch()
    thread.start()
    for event in w.stream(
        api.list_namespaced_event, namespace, resource_version=start, timeout_seconds=10
    ):
        seen.append((event["type"], event["object"].metadata.name))
        if event["type"] == "DELETED":
            w.stop()
    thread.join(10)
    assert seen == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]


def test_replace_with_stale_resource_version_conflicts(api_server: ApiServer) -> None:  # noqa: F811
    api = client.EventsV1Api(api_server.python_client())
    namespace = ns()
    created = api.create_namespaced_event(namespace, make_event("r1", namespace))
    created.series = client.EventsV1EventSeries(
        count=2, last_observed_time=dt.datetime(2026, 11, 22, 10, 0, 1, 5, tzinfo=dt.UTC)
    )
    updated = api.replace_namespaced_event("r1", namespace, created)
    assert updated.series.count == 2
    assert updated.metadata.resource_version != created.metadata.resource_version
    with pytest.raises(ApiException) as error:
        api.replace_namespaced_event("r1", namespace, created)  # still the old resourceVersion
    assert error.value.status == 409
    assert "the object has been modified" in error.value.body


def test_delete_returns_status(api_server: ApiServer) -> None:  # noqa: F811
    api = client.EventsV1Api(api_server.python_client())
    namespace = ns()
    api.create_namespaced_event(namespace, make_event("d1", namespace))
    status = api.delete_namespaced_event("d1", namespace)
    # This client generation declares the delete response as a plain object (a dict).
    if not isinstance(status, dict):
        status = api.api_client.sanitize_for_serialization(status)
    assert status["kind"] == "Status"
    assert status["status"] == "Success"
    assert status["details"]["name"] == "d1"
    assert status["details"]["group"] == "events.k8s.io"
    with pytest.raises(ApiException) as error:
        api.read_namespaced_event("d1", namespace)
    assert error.value.status == 404


def test_invalid_event_is_422_with_causes(api_server: ApiServer) -> None:  # noqa: F811
    api = client.EventsV1Api(api_server.python_client())
    namespace = ns()
    body = make_event("bad", namespace)
    body.type = "Sometimes"
    with pytest.raises(ApiException) as error:
        api.create_namespaced_event(namespace, body)
    assert error.value.status == 422
    assert "has invalid value: Sometimes" in error.value.body
