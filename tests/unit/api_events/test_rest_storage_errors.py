"""What the Event API answers when the store fails: ``EventsAPI._run`` maps storage errors to
kube-apiserver's Status bodies (k8s.io/apiserver pkg/storage/errors.go, pkg/endpoints/
handlers/responsewriters/status.go ErrorToAPIStatus), and anything else becomes the generic
500 of the handler chain. Also the request-level corners no store is needed for."""

from __future__ import annotations

from typing import Any

import pytest
from tests.unit.api_events.rest_harness import RestHarness, event, ns_path, status
from twisted.internet import defer
from twisted.internet.defer import Deferred

from apiserver.api.events.rest import BASE, parse_target
from apiserver.storage.interface import (
    CompactedError,
    KeyNotFoundError,
    StorageTimeoutError,
    Store,
    UnavailableError,
)

EVENTS = ns_path("ns1")
E1 = ns_path("ns1", "e1")
INTERNAL = status(
    500,
    "InternalError",
    "an error on the server has prevented the request from succeeding",
    {},
)


class FaultyStore:
    """Forwards everything to ``inner``; a method named in ``failures`` fails instead."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.failures: dict[str, Exception] = {}

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        failure = self.failures.get(name)
        if failure is None:
            return attr

        def failing(*args: Any, **kwargs: Any) -> Deferred[Any]:
            return defer.fail(failure)

        return failing


def faulty(**kwargs: Any) -> tuple[RestHarness, FaultyStore]:
    doubles: list[FaultyStore] = []

    def wrap(store: Store) -> Store:
        double = FaultyStore(store)
        doubles.append(double)
        return double

    api = RestHarness(wrap=wrap, **kwargs)
    return api, doubles[0]


def test_storage_timeout_is_504(api_and_store: tuple[RestHarness, FaultyStore]) -> None:
    api, store = api_and_store
    api.create("e1")
    store.failures["get"] = StorageTimeoutError("deadline")
    store.failures["range"] = StorageTimeoutError("deadline")
    expected = status(
        504,
        "Timeout",
        "Timeout: request did not complete within requested timeout - context deadline exceeded",
        {},
    )
    for path in (E1, EVENTS):
        reply = api.get(path)
        assert reply.code == 504, path
        assert reply.json() == expected


def test_unavailable_store_is_an_internal_error(
    api_and_store: tuple[RestHarness, FaultyStore],
) -> None:
    api, store = api_and_store
    store.failures["create"] = UnavailableError("connection refused")
    reply = api.post(EVENTS, event("e1"))
    assert reply.code == 500
    assert reply.json() == status(
        500,
        "InternalError",
        "Internal error occurred: connection refused",
        {"causes": [{"message": "connection refused"}]},
    )


def test_compacted_read_is_410(api_and_store: tuple[RestHarness, FaultyStore]) -> None:
    api, store = api_and_store
    api.create("e1")
    store.failures["get"] = CompactedError("compacted", revision=5)
    reply = api.get(E1)
    assert reply.code == 410
    assert reply.json() == status(
        410, "Expired", "The resourceVersion for the provided list is too old."
    )


def test_unexpected_errors_are_the_generic_500(
    api_and_store: tuple[RestHarness, FaultyStore],
) -> None:
    api, store = api_and_store
    api.create("e1")
    store.failures["update"] = RuntimeError("boom")
    changed = event("e1")
    changed["metadata"]["labels"] = {"app": "changed"}
    reply = api.put(E1, changed)
    assert reply.code == 500
    assert reply.json() == INTERNAL
    # The handler chain still serves the next request.
    del store.failures["update"]
    assert api.get(E1).code == 200


def test_delete_collection_skips_events_deleted_meanwhile(
    api_and_store: tuple[RestHarness, FaultyStore],
) -> None:
    api, store = api_and_store
    api.create("a")
    api.create("b")
    store.failures["delete"] = KeyNotFoundError("gone")
    reply = api.delete(EVENTS)
    assert reply.code == 200
    assert reply.json()["items"] == []


def test_a_cache_that_cannot_catch_up_is_too_large_resource_version() -> None:
    api, store = faulty(cached=True)
    api.create("e1")
    current = api.revision()
    store.failures["list_cached"] = StorageTimeoutError("cache behind")
    reply = api.get(EVENTS + f"?resourceVersion={current}")
    assert reply.code == 504
    assert reply.json()["message"] == (
        f"Timeout: Too large resource version: {current}, current: {current}"
    )
    # Not from the cache: the store's own timeout.
    store.failures["range"] = StorageTimeoutError("deadline")
    reply = api.get(EVENTS + f"?resourceVersion={current}&resourceVersionMatch=Exact")
    assert reply.code == 504
    assert reply.json()["message"].startswith("Timeout: request did not complete")


def test_kept_list_bodies_are_only_for_plain_json() -> None:
    api = RestHarness(cached=True)
    api.create("a")
    first = api.get(EVENTS)
    assert api.get(EVENTS).body == first.body
    assert api.get(EVENTS, accept="application/yaml").content_type == "application/yaml"
    assert api.get(EVENTS + "?pretty=1").body.startswith(b'{\n  "kind": "EventList"')
    api.create("b")
    assert len(api.get(EVENTS).json()["items"]) == 2


def test_pretty_from_the_accept_header() -> None:
    api = RestHarness()
    api.create("e1")
    reply = api.get(E1, accept="application/json;pretty=1")
    assert reply.body.startswith(b'{\n  "kind": "Event"')
    assert reply.content_type == "application/json"


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/apis/events.k8s.io/v2/events", None),
        ("/api/v1/events", None),
        (BASE + "events", (None, None, False)),
        (BASE + "watch/events", (None, None, True)),
        (BASE + "namespaces/ns/events", ("ns", None, False)),
        (BASE + "watch/namespaces/ns/events/x", ("ns", "x", True)),
        (BASE + "namespaces/ns/events/", None),
        (BASE + "watch/namespaces/ns", None),
    ],
)
def test_parse_target(path: str, target: tuple[str | None, str | None, bool] | None) -> None:
    parsed = parse_target(path)
    if target is None:
        assert parsed is None
    else:
        assert parsed is not None
        assert (parsed.namespace, parsed.name, parsed.watch_path) == target
        assert parsed.is_item == (target[1] is not None)


@pytest.fixture
def api_and_store() -> tuple[RestHarness, FaultyStore]:
    return faulty()
