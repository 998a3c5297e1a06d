"""Stored events as JSON bytes of one API version, encoded once per revision.

A stored revision never changes, so its wire form never does either: GET, LIST and every
watcher of a change reuse the same bytes instead of converting and serializing the object
again (bench/api_bench.py showed conversion and encoding dominating lists and watch fan-out).
Only objects read from storage go through here; write responses (which may be dry runs) are
encoded afresh.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from apiserver.api.events import convert

CACHE_SIZE = 20000


def _v1_item(internal: dict[str, Any]) -> dict[str, Any]:
    return convert.internal_to_v1(internal, include_type_meta=False)


class EncodedEvents:
    """JSON of stored objects keyed by (resourceVersion, namespace, name), in one API version
    (``api_version``; ``to_item`` converts an internal object to a list item of it). Each
    served version has its own: a revision is converted once per version."""

    def __init__(
        self,
        size: int = CACHE_SIZE,
        *,
        api_version: str = convert.V1_API_VERSION,
        to_item: Callable[[dict[str, Any]], dict[str, Any]] = _v1_item,
        kind: str = "Event",
    ) -> None:
        self._size = size
        self._items: dict[tuple[str, str, str], bytes] = {}
        self._to_item = to_item
        head = b'{"kind":"' + kind.encode()
        self._type_meta = head + b'","apiVersion":"' + api_version.encode() + b'",'
        self._list_head = head + b'List","apiVersion":"' + api_version.encode() + b'",'

    def item(self, internal: dict[str, Any]) -> bytes:
        """The object as a list item: no kind/apiVersion."""
        meta = internal.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if not rv:
            return orjson.dumps(self._to_item(internal))
        key = (rv, meta.get("namespace", ""), meta.get("name", ""))
        items = self._items
        data = items.get(key)
        if data is None:
            data = orjson.dumps(self._to_item(internal))
            if len(items) >= self._size:
                del items[next(iter(items))]
            items[key] = data
        return data

    def object(self, internal: dict[str, Any]) -> bytes:
        """The object on its own, kind and apiVersion first."""
        item = self.item(internal)
        return self._type_meta + item[1:]

    def list_body(self, items: list[dict[str, Any]], list_meta: dict[str, Any]) -> bytes:
        """An EventList, assembled from the items' cached bytes (with a trailing newline)."""
        return b"".join(
            (
                self._list_head,
                b'"metadata":',
                orjson.dumps(list_meta),
                b',"items":[',
                b",".join([self.item(i) for i in items]),
                b"]}\n",
            )
        )

    def watch_line(self, event_type: str, internal: dict[str, Any]) -> bytes:
        return b"".join(
            (b'{"type":"', event_type.encode(), b'","object":', self.object(internal), b"}\n")
        )


class ListBodies:
    """Whole EventList bodies keyed by (revision, request URI), the most recent first.

    Why: a list is a function of the revision it is read at and of its request (namespace,
    selectors, limit, continue token): the same request at the same revision gives the same
    bytes, so informers relisting, dashboards polling and kubectl repeating a ``get`` are
    answered without touching the 500 items again. Any write moves the revision, so an entry
    can never be served for a state it was not built from. Only plain JSON bodies are kept
    (tables carry ages, which depend on the clock); memory is bounded in bytes, oldest
    entries go first.
    """

    def __init__(self, max_bytes: int = 32 << 20, max_entries: int = 64) -> None:
        self.max_bytes = max_bytes
        self.max_entries = max_entries
        self._bodies: dict[tuple[int, bytes], bytes] = {}
        self._bytes = 0

    def get(self, key: tuple[int, bytes]) -> bytes | None:
        return self._bodies.get(key)

    def put(self, key: tuple[int, bytes], body: bytes) -> None:
        if len(body) > self.max_bytes // 4 or key in self._bodies:
            return
        bodies = self._bodies
        while bodies and (
            self._bytes + len(body) > self.max_bytes or len(bodies) >= self.max_entries
        ):
            oldest = next(iter(bodies))
            self._bytes -= len(bodies.pop(oldest))
        bodies[key] = body
        self._bytes += len(body)

    def __len__(self) -> int:
        return len(self._bodies)
