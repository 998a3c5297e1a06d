"""Stored events as events.k8s.io/v1 JSON bytes, encoded once per revision.

A stored revision never changes, so its wire form never does either: GET, LIST and every
watcher of a change reuse the same bytes instead of converting and serializing the object
again (bench/api_bench.py showed conversion and encoding dominating lists and watch fan-out).
Only objects read from storage go through here; write responses (which may be dry runs) are
encoded afresh.
"""

from __future__ import annotations

from typing import Any

import orjson

from apiserver.api.events import convert

TYPE_META = b'{"kind":"Event","apiVersion":"events.k8s.io/v1",'
CACHE_SIZE = 20000


class EncodedEvents:
    """v1 JSON of stored objects keyed by (resourceVersion, namespace, name)."""

    def __init__(self, size: int = CACHE_SIZE) -> None:
        self._size = size
        self._items: dict[tuple[str, str, str], bytes] = {}

    def item(self, internal: dict[str, Any]) -> bytes:
        """The object as a list item: no kind/apiVersion."""
        meta = internal.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if not rv:
            return orjson.dumps(convert.internal_to_v1(internal, include_type_meta=False))
        key = (rv, meta.get("namespace", ""), meta.get("name", ""))
        items = self._items
        data = items.get(key)
        if data is None:
            data = orjson.dumps(convert.internal_to_v1(internal, include_type_meta=False))
            if len(items) >= self._size:
                del items[next(iter(items))]
            items[key] = data
        return data

    def object(self, internal: dict[str, Any]) -> bytes:
        """The object on its own, kind and apiVersion first."""
        item = self.item(internal)
        return TYPE_META + item[1:]

    def list_body(self, items: list[dict[str, Any]], list_meta: dict[str, Any]) -> bytes:
        """An EventList, assembled from the items' cached bytes (with a trailing newline)."""
        return b"".join(
            (
                b'{"kind":"EventList","apiVersion":"events.k8s.io/v1","metadata":',
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
