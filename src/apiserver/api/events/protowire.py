"""Events in ``application/vnd.kubernetes.protobuf`` on the wire: bodies in, answers out.

What kube-apiserver's protobuf serializer does for a built-in kind
(k8s.io/apimachinery ``pkg/runtime/serializer/protobuf/protobuf.go``, k8s.io/apiserver
``pkg/endpoints/handlers/{create,update,response,watch}.go``):

- a request body is the ``k8s\\x00`` envelope around the object's message; its typeMeta may
  be empty (the kind and version are defaulted from the endpoint), a wrong one is the usual
  400; strict field validation has nothing to check in protobuf;
- an answer is the envelope around the object (``Event``), the list (``EventList``: ListMeta
  then the items, without type information) or a ``Status`` (typeMeta ``v1``/``Status``);
- a watch is a stream of frames, each a 4-byte big-endian length and a bare ``WatchEvent``
  whose ``object.raw`` holds the object's envelope.

Stored revisions never change, so the message bytes of each (resourceVersion, namespace,
name) are kept, like the JSON bytes in :mod:`apiserver.api.events.encoding`: a GET answer is
the kept bytes in an envelope, and a list is the ListMeta bytes followed by every item's kept
bytes as field 2, never a 500-item message built and serialized per request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from apiserver.api.events.encoding import CACHE_SIZE, ListBodies
from apiserver.apimachinery import errors
from apiserver.apimachinery.negotiation import PROTOBUF
from apiserver.http.response import Response
from apiserver.protobuf import codec

Obj = dict[str, Any]

CONTENT_TYPE = ("Content-Type", PROTOBUF)
_PLAIN_HEADERS = (CONTENT_TYPE,)


def decode_delete_options(raw: bytes) -> bytes:
    """A protobuf DeleteOptions body as the JSON the DeleteOptions parser reads."""
    try:
        api_version, kind, message = codec.unwrap(raw)
        fields = codec.decode(codec.DeleteOptions, message)
    except codec.ProtoError as error:
        raise errors.StatusError(500, "", str(error)) from None
    head: Obj = {}
    if kind:
        head["kind"] = kind
    if api_version:
        head["apiVersion"] = api_version
    return orjson.dumps({**head, **fields})


class EventsProtobuf:
    """Protobuf bodies and answers of one served events version (``api_version``,
    ``to_wire`` converts an internal object to its JSON shape, ``type_meta=False`` for an
    item)."""

    def __init__(
        self,
        api_version: str,
        to_wire: Callable[..., Obj],
        size: int = CACHE_SIZE,
        kind: str = "Event",
    ) -> None:
        self.api_version = api_version
        self.to_wire = to_wire
        self.kind = kind
        message = codec.message_for(api_version, kind)
        assert message is not None
        self.message = message
        self._size = size
        self._items: dict[tuple[str, str, str], bytes] = {}
        self._head = codec.envelope_head(api_version, kind)
        self._list_head = codec.envelope_head(api_version, kind + "List")
        #: Whole list bodies by (revision, request URI), as for JSON.
        self.list_bodies = ListBodies()

    # --- request bodies ---------------------------------------------------------------------

    def decode_body(self, raw: bytes) -> Obj:
        """The object of a protobuf request body in this version's JSON shape, with the
        envelope's kind and apiVersion when it names them (the caller checks them)."""
        try:
            api_version, kind, message = codec.unwrap(raw)
        except codec.ProtoError as error:
            raise errors.bad_request(
                f"the object provided is unrecognized (must be of type {self.kind}): {error} "
                f"({_summarize(raw)})"
            ) from None
        if api_version and api_version != self.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API "
                f"version ({self.api_version})"
            )
        try:
            fields = codec.decode(self.message, message)
        except codec.ProtoError as error:
            version = self.api_version.rsplit("/", 1)[-1]
            raise errors.bad_request(
                f'{self.kind} in version "{version}" cannot be handled as a {self.kind}: {error}'
            ) from None
        head: Obj = {}
        if kind:
            head["kind"] = kind
        if api_version:
            head["apiVersion"] = api_version
        return {**head, **fields}

    # --- answers ------------------------------------------------------------------------------

    def item(self, internal: Obj) -> bytes:
        """The message bytes of a stored object, kept per revision."""
        meta = internal.get("metadata") or {}
        rv = meta.get("resourceVersion")
        if not rv:
            return codec.encode(self.message, self.to_wire(internal, False))
        key = (rv, meta.get("namespace", ""), meta.get("name", ""))
        items = self._items
        data = items.get(key)
        if data is None:
            data = codec.encode(self.message, self.to_wire(internal, False))
            if len(items) >= self._size:
                del items[next(iter(items))]
            items[key] = data
        return data

    def object(self, internal: Obj) -> bytes:
        """A stored object's envelope."""
        raw = self.item(internal)
        return b"".join((self._head, b"\x12", codec.varint(len(raw)), raw, codec.ENVELOPE_TAIL))

    def list_body(self, items: Sequence[Obj], list_meta: Mapping[str, Any]) -> bytes:
        """An EventList envelope: ListMeta, then each item's kept bytes as field 2."""
        parts = [codec.length_delimited(0x0A, codec.encode(codec.ListMeta, list_meta))]
        item = self.item
        for obj in items:
            raw = item(obj)
            parts.append(b"\x12" + codec.varint(len(raw)))
            parts.append(raw)
        raw_list = b"".join(parts)
        return b"".join(
            (self._list_head, b"\x12", codec.varint(len(raw_list)), raw_list, codec.ENVELOPE_TAIL)
        )

    def response(self, code: int, obj: Mapping[str, Any], warnings: Sequence[str] = ()) -> Response:
        """Any answer object (an Event, EventList, Status or partial metadata) in protobuf."""
        headers: list[tuple[str, str]] = [CONTENT_TYPE]
        for warning in warnings:
            headers.append(("Warning", f"299 - {errors.go_quote(warning)}"))
        return Response(code, tuple(headers), codec.encode_object(obj))

    def plain(self, code: int, body: bytes) -> Response:
        return Response(code, _PLAIN_HEADERS, body)

    # --- watch --------------------------------------------------------------------------------

    def watch_frame(self, event_type: str, internal: Obj) -> bytes:
        """One watch frame holding a stored object."""
        return codec.watch_frame(event_type, self.object(internal))

    @staticmethod
    def watch_frame_of(event_type: str, obj: Mapping[str, Any]) -> bytes:
        """One watch frame holding any answer object (a bookmark, a Status, partial
        metadata)."""
        return codec.watch_frame(event_type, codec.encode_object(obj))


def _summarize(data: bytes, max_length: int = 30) -> str:
    """``summarizeData`` of k8s.io/apiserver ``pkg/endpoints/handlers/rest.go``."""
    if data[:1] == b"{":
        head = data[:max_length].decode("utf-8", "replace")
        return head + " ..." if len(data) > max_length else head
    return data[:max_length].hex() + " ..." if len(data) > max_length else data.hex()


__all__ = ["EventsProtobuf", "decode_delete_options"]
