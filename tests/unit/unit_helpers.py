"""Helpers the unit tests of several packages share."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET

from apiserver.http.app import App
from apiserver.storage.interface import KeyNotFoundError, KeyValue

T = TypeVar("T")


class AppResource(Resource):
    """An :class:`App` behind a twisted.web resource, for ``treq.testing.StubTreq``."""

    isLeaf = True

    def __init__(self, app: App) -> None:
        super().__init__()
        self.app = app

    def render(self, request: Any) -> object:
        self.app.handle(request)
        return NOT_DONE_YET


class FakeStore:
    """A store with ``get`` only (what the authenticators and the TokenRequest API read)."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.fail: Exception | None = None
        self.gets: list[bytes] = []

    def put(self, key: str, obj: Any) -> None:
        self.data[key.encode()] = json.dumps(obj).encode()

    def get(self, key: bytes, revision: int = 0) -> Deferred[KeyValue]:
        self.gets.append(key)
        if self.fail is not None:
            return defer.fail(self.fail)
        if key not in self.data:
            return defer.fail(KeyNotFoundError("not found", key))
        return defer.succeed(KeyValue(key, self.data[key], 1, 1))


def fired(d: Deferred[T]) -> T:
    """The result of a Deferred that must already have fired; raises its failure."""
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "the Deferred has not fired"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    value: T = results[0]
    return value


def result_of(value: Any) -> Any:
    """The value of an already-fired Deferred (or the value itself); raises its failure."""
    if not isinstance(value, Deferred):
        return value
    return fired(value)
