"""An in-process Event API server for unit tests: no sockets, no threads, no sleeps.

The pieces are wired as ``apiserver.server.Server`` wires them (a ``Router`` with the
``EventsAPI`` under ``/apis/events.k8s.io/v1/`` and its core/v1 view under ``/api/v1/``, an
``App`` running the filters, a
``Registry`` over a store), on a ``twisted.internet.task.Clock`` the test drives, behind
``treq.testing.StubTreq`` (requests and responses go through twisted.web's HTTP/1.1 parser
and an in-memory transport). The store is the in-memory backend by default, whose Deferreds
have fired when its methods return; any :class:`~apiserver.storage.interface.Store` may be
given instead. ``cached=True`` puts the watch cache (``apiserver.storage.cacher``) in front of
it, as ``--watch-cache`` (the default) does; ``wrap`` puts a test double (for example one that
fails some calls) in front of what the registry reads.

Time is the injected clock only: ``creationTimestamp``, managedFields times, Table ages, the
TTL and watch timeouts all read it, and a test moves it with :meth:`RestHarness.advance`.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from tests.event_fixtures import event_dict
from tests.unit.unit_helpers import AppResource, fired
from treq.testing import StubTreq
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.web.http_headers import Headers

from apiserver.api.events import corev1
from apiserver.api.events.rest import BASE, CORE_V1, GR, EventsAPI
from apiserver.http.app import App, Router, ServingPolicy
from apiserver.registry.store import Registry
from apiserver.storage.interface import Store

#: 2026-11-22T10:00:00Z: the clock starts here, so timestamps are readable.
EPOCH = 1795341600.0
EPOCH_TEXT = "2026-11-22T10:00:00Z"
NS_PATH = BASE + "namespaces/{ns}/events"
CORE_NS_PATH = "/api/v1/namespaces/{ns}/events"
STORE_PREFIX = "/registry"
EVENTS_PREFIX = b"/registry/events/"


def event(name: str, namespace: str = "ns1", **extra: Any) -> dict[str, Any]:
    """A valid events.k8s.io/v1 Event body (the integration tests' ``body``)."""
    return event_dict(name, namespace, labels={"app": "x"}, **extra)


@attrs.frozen
class Reply:
    """One finished HTTP answer."""

    code: int
    headers: Headers
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        values = self.headers.getRawHeaders(name)
        return values[0] if values else None

    def all(self, name: str) -> list[str]:
        return list(self.headers.getRawHeaders(name) or [])

    @property
    def content_type(self) -> str | None:
        return self.header("content-type")


def status(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A failure Status body as kube-apiserver writes it (Go's omitempty: an empty reason and
    absent details are left out; ``details={}`` is written)."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = dict(details)
    body["code"] = code
    return body


class WatchReply:
    """A streaming answer: ``events()`` returns the lines written since the last call."""

    def __init__(self, harness: RestHarness, response: Any) -> None:
        self.harness = harness
        self.code: int = response.code
        self.headers: Headers = response.headers
        self._chunks: list[bytes] = []
        self._read = 0
        self._hang_up = False
        self.done: Deferred[None] = harness.treq.collect(response, self._collect)

    def _collect(self, data: bytes) -> None:
        if self._hang_up:
            # treq closes the connection when the collector raises.
            raise ConnectionAbortedError("the client hung up")
        self._chunks.append(data)

    def hang_up_on_next_write(self) -> None:
        """Close the connection when the server next writes (a client going away)."""
        self._hang_up = True
        self.done.addErrback(lambda failure: failure.trap(ConnectionAbortedError))

    def events(self) -> list[dict[str, Any]]:
        """Every complete line received since the previous call, decoded."""
        self.harness.settle()
        data = b"".join(self._chunks)
        lines = data[self._read :].split(b"\n")
        complete = lines[:-1]
        self._read += sum(len(line) + 1 for line in complete)
        return [json.loads(line) for line in complete]

    @property
    def raw(self) -> bytes:
        self.harness.settle()
        return b"".join(self._chunks)

    @property
    def ended(self) -> bool:
        self.harness.settle()
        return self.done.called


class RestHarness:
    """The Event API served in process; see the module docstring."""

    def __init__(
        self,
        store_factory: Callable[[Clock], Store] | None = None,
        *,
        cached: bool = False,
        ttl: int = 0,
        min_request_timeout: float = 1800.0,
        request_timeout: float = 60.0,
        delete_collection_workers: int = 1,
        media_type: str = "application/json",
        wrap: Callable[[Store], Store] | None = None,
    ) -> None:
        self.clock = Clock()
        self.clock.advance(EPOCH)
        factory = store_factory or memory_store
        self.backend: Store = factory(self.clock)
        fired(self.backend.start())
        store: Store = self.backend
        self.cacher: Any = None
        if cached:
            from apiserver.storage.cacher import Cacher

            self.cacher = Cacher(self.backend, [EVENTS_PREFIX], self.clock)
            fired(self.cacher.start())
            store = self.cacher
        if wrap is not None:
            store = wrap(store)
        self.store = store
        self.registry = Registry(
            store,
            prefix=STORE_PREFIX,
            resource="events",
            group_resource=GR,
            ttl=lambda: ttl,
            media_type=media_type,
            conversion=corev1.STORAGE,
        )
        self.api = EventsAPI(
            self.registry,
            self.clock,
            min_request_timeout=min_request_timeout,
            delete_collection_workers=delete_collection_workers,
            rng=random.Random(7),
        )
        #: core/v1 events over the same registry, as the server serves them.
        self.core_api = EventsAPI(
            self.registry,
            self.clock,
            min_request_timeout=min_request_timeout,
            delete_collection_workers=delete_collection_workers,
            rng=random.Random(7),
            view=CORE_V1,
        )
        self.router = Router()
        self.router.add_prefix(BASE, self.api.handle)
        self.router.add_prefix(CORE_V1.base, self.core_api.handle)
        self.app = App(self.router, self.clock, ServingPolicy(request_timeout=request_timeout))
        #: StubTreq sets its treq functions per instance, unseen by type checkers.
        self.treq: Any = StubTreq(AppResource(self.app))

    # --- time and delivery --------------------------------------------------------------

    def settle(self) -> None:
        """Run what is due now (the watch write coalescer) and move bytes both ways."""
        for _ in range(3):
            self.clock.advance(0)
            self.treq.flush()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        self.settle()

    # --- requests -----------------------------------------------------------------------

    def _send(
        self, method: str, path: str, body: Any, headers: Mapping[str, str | list[str]] | None
    ) -> Deferred[Any]:
        hdrs: dict[str, list[str]] = {}
        for name, value in (headers or {}).items():
            hdrs[name] = value if isinstance(value, list) else [value]
        data: bytes | None = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            if not any(name.lower() == "content-type" for name in hdrs):
                hdrs["Content-Type"] = ["application/json"]
        d: Deferred[Any] = self.treq.request(
            method, "https://apiserver.test" + path, data=data, headers=hdrs
        )
        self.settle()
        return d

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        headers: Mapping[str, str | list[str]] | None = None,
    ) -> Reply:
        """Send one request and return the whole answer (it must be finished)."""
        response = fired(self._send(method, path, body, headers))
        content: Deferred[bytes] = self.treq.content(response)
        self.settle()
        return Reply(response.code, response.headers, fired(content))

    def get(self, path: str, **headers: str) -> Reply:
        return self.request("GET", path, headers=_names(headers))

    def post(self, path: str, body: Any, **headers: str) -> Reply:
        return self.request("POST", path, body, _names(headers))

    def put(self, path: str, body: Any, **headers: str) -> Reply:
        return self.request("PUT", path, body, _names(headers))

    def patch(self, path: str, body: Any, content_type: str, **headers: str) -> Reply:
        hdrs = _names(headers)
        hdrs["Content-Type"] = content_type
        return self.request("PATCH", path, body, hdrs)

    def delete(self, path: str, body: Any = None, **headers: str) -> Reply:
        return self.request("DELETE", path, body, _names(headers))

    def watch(self, path: str, **headers: str) -> WatchReply:
        """Start a watch; its headers must have arrived."""
        return WatchReply(self, fired(self._send("GET", path, None, _names(headers))))

    # --- shortcuts ----------------------------------------------------------------------

    def create(self, name: str, namespace: str = "ns1", **extra: Any) -> dict[str, Any]:
        reply = self.post(NS_PATH.format(ns=namespace), event(name, namespace, **extra))
        assert reply.code == 201, reply.body
        created: dict[str, Any] = reply.json()
        return created

    def revision(self) -> int:
        value: int = fired(self.backend.current_revision())
        return value


def _names(headers: Mapping[str, str]) -> dict[str, str | list[str]]:
    """``content_type="x"`` keyword arguments as ``Content-Type: x`` headers."""
    return {name.replace("_", "-").title(): value for name, value in headers.items()}


def memory_store(clock: Clock) -> Store:
    from apiserver.storage.memory import MemoryStore

    return MemoryStore(clock)


def ns_path(namespace: str = "ns1", name: str | None = None) -> str:
    path = NS_PATH.format(ns=namespace)
    return f"{path}/{name}" if name is not None else path


def core_path(namespace: str = "ns1", name: str | None = None) -> str:
    path = CORE_NS_PATH.format(ns=namespace)
    return f"{path}/{name}" if name is not None else path


__all__ = [
    "EPOCH",
    "EPOCH_TEXT",
    "Reply",
    "RestHarness",
    "WatchReply",
    "core_path",
    "event",
    "fired",
    "memory_store",
    "ns_path",
    "status",
]
