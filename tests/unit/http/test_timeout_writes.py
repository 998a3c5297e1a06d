"""A request that times out (504) leaves nothing half written (the overload issue, item 6)."""

from __future__ import annotations

import json
from typing import Any

from tests.event_fixtures import event_dict
from tests.unit.unit_helpers import AppResource, result_of
from treq.testing import StubTreq
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from apiserver.api.events.rest import BASE, GR, EventsAPI
from apiserver.http.app import App, Router, ServingPolicy
from apiserver.registry.store import Registry
from apiserver.storage.interface import KeyValue
from apiserver.storage.memory import MemoryStore

PATH = "/apis/events.k8s.io/v1/namespaces/ns/events"


class SlowStore(MemoryStore):
    """Holds every create until the test lets it go (a store that is slow to commit)."""

    def __init__(self, clock: Clock) -> None:
        super().__init__(clock)
        self.held: list[tuple[Deferred[KeyValue], bytes, bytes]] = []

    def create(self, key: bytes, value: bytes, ttl: int = 0) -> Deferred[KeyValue]:
        waiting: Deferred[KeyValue] = Deferred()
        self.held.append((waiting, key, value))
        return waiting


class TimeoutWriteTests(SynchronousTestCase):
    def test_a_create_that_times_out_stores_nothing(self) -> None:
        clock = Clock()
        store = SlowStore(clock)
        result_of(store.start())
        api = EventsAPI(Registry(store, group_resource=GR), clock)
        router = Router()
        router.add_prefix(BASE, api.handle)
        treq = StubTreq(AppResource(App(router, clock, ServingPolicy(request_timeout=60))))
        body = json.dumps(event_dict("e1", "ns")).encode()
        answer = treq.post(
            "https://x" + PATH + "?timeout=5s",
            data=body,
            headers={"Content-Type": "application/json"},
        )
        treq.flush()
        assert len(store.held) == 1  # the handler is waiting for the store
        clock.advance(5)
        treq.flush()
        response: Any = self.successResultOf(answer)
        assert response.code == 504
        status = json.loads(self.successResultOf(response.content()))
        assert (status["reason"], status["code"]) == ("Timeout", 504)
        # The handler's work was cancelled with the store's write still pending: nothing
        # was written, and nothing is.
        waiting, _, _ = store.held[0]
        assert waiting.called
        assert not result_of(store.range(b"/")).kvs
        self.flushLoggedErrors()
