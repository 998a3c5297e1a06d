"""Between the server's dicts (the JSON shape) and Kubernetes protobuf messages, as Go writes them.

Messages come from the ``.proto`` files in ``apiserver/protobuf/generated`` (upstream package
names and field numbers, compiled with protoc; the ``protobuf`` package's upb C backend does
the wire work). What this module adds is the mapping Go's gogo-generated marshallers
(``generated.pb.go`` of k8s.io/api and k8s.io/apimachinery) and JSON tags imply:

- Field names are the JSON names (upstream's ``.proto`` files use them).
- Non-pointer Go fields are always written, even empty (a string as ``<tag> 00``, an int as
  ``<tag> 00``, an embedded struct as ``<tag> <len> ...``); pointer fields (see
  :data:`POINTERS`) only when set. proto2 presence gives exactly that: every field this
  module sets is written, every other one is not.
- ``metav1.Time`` / ``MicroTime`` are RFC 3339 strings in JSON and ``{1 seconds, 2 nanos}``
  messages on the wire: the zero time is an empty message, any other time writes both
  fields (Time's nanos always 0, MicroTime's truncated to microseconds), as
  k8s.io/apimachinery ``pkg/apis/meta/v1/time_proto.go`` and ``micro_time_proto.go`` do.
  Reading, an empty message is the zero time and Time ignores nanos.
- ``FieldsV1`` is the JSON text of the managed fields in its ``Raw`` bytes.
- Maps are written sorted by key (``SerializeToString(deterministic=True)``), as gogo does.

Reading gives the canonical dict shape of the server (``apiserver.api.events.convert``): zero
values absent, pointer fields present exactly when set, and the fields named in
:data:`KEPT_EMPTY` always present. Readers accept any field order and skip unknown fields
(the protobuf runtime does).

The ``k8s\\x00`` envelope (k8s.io/apimachinery ``pkg/runtime/serializer/protobuf/protobuf.go``)
is a ``runtime.Unknown`` whose four fields are always written; :func:`wrap` writes it from
precomputed type-meta bytes, since every object answer and stored value goes through it.
"""

from __future__ import annotations

import calendar
import functools
import keyword
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import orjson
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from apiserver.protobuf.generated import (
    authentication_pb2,
    authorization_pb2,
    core_pb2,
    events_pb2,
    meta_pb2,
    runtime_pb2,
)

PREFIX = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"

_META = "k8s.io.apimachinery.pkg.apis.meta.v1."
_CORE = "k8s.io.api.core.v1."
_EVENTS = "k8s.io.api.events.v1."
_AUTHN = "k8s.io.api.authentication.v1."
_AUTHZ = "k8s.io.api.authorization.v1."

#: Go pointer fields (``*T``, omitted when nil), by message; every other field is always written.
POINTERS: dict[str, frozenset[str]] = {
    _META + "ObjectMeta": frozenset({"deletionTimestamp", "deletionGracePeriodSeconds"}),
    _META + "OwnerReference": frozenset({"controller", "blockOwnerDeletion"}),
    _META + "ManagedFieldsEntry": frozenset({"time", "fieldsV1"}),
    _META + "ListMeta": frozenset({"remainingItemCount"}),
    _META + "Status": frozenset({"details"}),
    _META + "Preconditions": frozenset({"uid", "resourceVersion"}),
    _META + "DeleteOptions": frozenset(
        {
            "gracePeriodSeconds",
            "preconditions",
            "orphanDependents",
            "propagationPolicy",
            "ignoreStoreReadErrorWithClusterBreakingPotential",
        }
    ),
    _CORE + "Event": frozenset({"series", "related"}),
    _EVENTS + "Event": frozenset({"series", "related"}),
    _AUTHN + "TokenRequestSpec": frozenset({"expirationSeconds", "boundObjectRef"}),
    _AUTHZ + "ResourceAttributes": frozenset({"fieldSelector", "labelSelector"}),
    _AUTHZ + "SubjectAccessReviewSpec": frozenset({"resourceAttributes", "nonResourceAttributes"}),
    _AUTHZ + "SelfSubjectAccessReviewSpec": frozenset(
        {"resourceAttributes", "nonResourceAttributes"}
    ),
    _CORE + "ServiceAccount": frozenset({"automountServiceAccountToken"}),
}

#: Fields read back as ``{}`` when empty: the internal Event's always-present structs.
KEPT_EMPTY: dict[str, frozenset[str]] = {
    _CORE + "Event": frozenset({"metadata", "involvedObject", "source"}),
    _EVENTS + "Event": frozenset({"metadata"}),
}

_TIME = _META + "Time"
_MICRO_TIME = _META + "MicroTime"
_FIELDS_V1 = _META + "FieldsV1"

M = TypeVar("M", bound=Message)


class ProtoError(ValueError):
    """Bytes that are not the expected protobuf; the text is the reference's."""


# --- times ---------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@functools.lru_cache(maxsize=4096)
def parse_wire_time(value: str) -> tuple[int, int]:
    """``(seconds, nanos)`` of a canonical wire time (``2023-11-14T22:13:20Z`` or with six
    fraction digits); events repeat the same few timestamps, so answers are kept."""
    seconds = calendar.timegm(
        (
            int(value[0:4]),
            int(value[5:7]),
            int(value[8:10]),
            int(value[11:13]),
            int(value[14:16]),
            int(value[17:19]),
        )
    )
    nanos = int(value[20:26]) * 1000 if len(value) > 21 and value[19] == "." else 0
    return seconds, nanos


@functools.lru_cache(maxsize=4096)
def format_wire_time(seconds: int, nanos: int, micro: bool) -> str:
    """The wire string of ``time.Unix(seconds, nanos)`` (UTC; whole seconds for a Time)."""
    when = _EPOCH + timedelta(seconds=seconds)
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if len(text) < 19:  # years below 1000: Go pads to four digits
        text = f"{when.year:04d}" + text[text.index("-") :]
    if micro:
        return f"{text}.{(nanos // 1000) % 1000000:06d}Z"
    return text + "Z"


# --- dict -> message -------------------------------------------------------------------------

Filler = Callable[[Any, Mapping[str, Any]], None]
Reader = Callable[[Any], dict[str, Any]]

_SCALAR, _TIME_KIND, _MESSAGE, _REPEATED_MESSAGE, _REPEATED_SCALAR, _MAP, _FIELDS = range(7)
_MAP_LIST = 7


#: A message descriptor (the upb backend's type differs from the pure-Python stub's).
Descriptor = Any


def _kind(field: FieldDescriptor) -> int:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        # map<string, ExtraValue>: user extras, each value a wrapped list of strings.
        value = field.message_type.fields_by_name["value"]
        return _MAP_LIST if value.message_type is not None else _MAP
    if field.is_repeated:
        return _REPEATED_MESSAGE if field.message_type is not None else _REPEATED_SCALAR
    if field.message_type is None:
        return _SCALAR
    name = field.message_type.full_name
    if name in (_TIME, _MICRO_TIME):
        return _TIME_KIND
    if name == _FIELDS_V1:
        return _FIELDS
    return _MESSAGE


def _zero(field: FieldDescriptor) -> Any:
    if field.type == FieldDescriptor.TYPE_STRING:
        return ""
    if field.type == FieldDescriptor.TYPE_BYTES:
        return b""
    if field.type == FieldDescriptor.TYPE_BOOL:
        return False
    return 0


_READERS: dict[str, Reader] = {}


def filler(descriptor: Any) -> Filler:
    """The function that sets a message of ``descriptor`` from a dict, Go's way."""
    return _filler_object(descriptor).fill


def _filler_object(descriptor: Any) -> _Filler:
    """The :class:`_Filler` of ``descriptor``, built once (it registers itself before it
    builds those of its fields' types, so a type that nests itself finds its own)."""
    known = _FILLER_OBJECTS.get(descriptor.full_name)
    return known if known is not None else _Filler(descriptor)


def _zero_fill(msg: Any, descriptor: Any) -> None:
    """Set every field Go always writes to its zero value (recursively for structs)."""
    pointers = POINTERS.get(descriptor.full_name, frozenset())
    for field in descriptor.fields:
        if field.name in pointers:
            continue
        kind = _kind(field)
        if kind == _SCALAR:
            setattr(msg, field.name, _zero(field))
        elif kind == _TIME_KIND:
            getattr(msg, field.name).SetInParent()
        elif kind == _MESSAGE:
            sub = getattr(msg, field.name)
            sub.SetInParent()
            _zero_fill(sub, field.message_type)


def _attr(name: str) -> str:
    """``msg.<name>`` in generated code (``getattr`` for a Python keyword such as
    ListMeta's ``continue``)."""
    return f"getattr(msg, {name!r})" if keyword.iskeyword(name) else f"msg.{name}"


def _compile(source: str, name: str, scope: dict[str, Any]) -> Any:
    """The function ``name`` defined by generated ``source``."""
    exec(compile(source, f"<protobuf {name}>", "exec"), scope)
    return scope[name]


class _Filler:
    """Sets a message from a dict: first a copy of the *template* (every always-written field
    at its zero, built once), then only the dict's non-empty values. Events carry many empty
    fields and the copy is one call into the C backend, so this is much cheaper than setting
    every field from Python.

    :meth:`fields` is generated per message type at first use: one straight-line statement
    per field (``value.get``, then a plain attribute store on the message), since a loop that
    dispatches on each key's kind and calls ``setattr`` cost about twice as much per field
    (callgrind instruction counts of an Event's encoding)."""

    def __init__(self, descriptor: Any) -> None:
        self.template = message_factory.GetMessageClass(descriptor)()
        _zero_fill(self.template, descriptor)
        pointers = POINTERS.get(descriptor.full_name, frozenset())
        _FILLER_OBJECTS[descriptor.full_name] = self
        scope: dict[str, Any] = {"parse_time": parse_wire_time, "dumps": orjson.dumps}
        lines = ["def fields(msg, value):", "    get = value.get"]
        for index, field in enumerate(descriptor.fields):
            name, kind, pointer = field.name, _kind(field), field.name in pointers
            attr = _attr(name)
            lines.append(f"    item = get({name!r})")
            if kind in (_MESSAGE, _REPEATED_MESSAGE):
                sub = _filler_object(field.message_type)
                scope[f"template_{index}"] = sub.template
                scope[f"fill_{index}"] = sub
            if kind == _SCALAR:
                test = "item is not None" if pointer else "item"
                store = (
                    f"setattr(msg, {name!r}, item)" if keyword.iskeyword(name) else f"{attr} = item"
                )
                lines += [f"    if {test}:", f"        {store}"]
            elif kind == _TIME_KIND:
                lines += [
                    "    if item:",
                    f"        sub = {attr}",
                    "        sub.seconds, sub.nanos = parse_time(item)",
                ]
                if pointer:
                    lines += ["    elif item is not None:", f"        {attr}.SetInParent()"]
            elif kind == _MESSAGE:
                if pointer:
                    lines += [
                        "    if item is not None:",
                        f"        sub = {attr}",
                        "        sub.SetInParent()",
                        f"        sub.CopyFrom(template_{index})",
                        "        if item:",
                        f"            fill_{index}.fields(sub, item)",
                    ]
                else:
                    lines += ["    if item:", f"        fill_{index}.fields({attr}, item)"]
            elif kind == _REPEATED_MESSAGE:
                lines += [
                    "    if item:",
                    f"        add = {attr}.add",
                    f"        fill = fill_{index}.fields",
                    "        for element in item:",
                    "            added = add()",
                    f"            added.CopyFrom(template_{index})",
                    "            fill(added, element)",
                ]
            elif kind == _REPEATED_SCALAR:
                lines += ["    if item:", f"        {attr}.extend(item)"]
            elif kind == _MAP:
                lines += ["    if item:", f"        {attr}.update(item)"]
            elif kind == _MAP_LIST:
                # map<string, ExtraValue>: each value a wrapped list of strings.
                lines += [
                    "    if item:",
                    f"        container = {attr}",
                    "        for key, values in item.items():",
                    "            container[key].items.extend(values or ())",
                ]
            else:  # FieldsV1 (a pointer): its JSON text
                lines += ["    if item is not None:", f"        {attr}.Raw = dumps(item)"]
        self.fields: Filler = _compile("\n".join(lines) + "\n", "fields", scope)

    def fill(self, msg: Any, value: Mapping[str, Any]) -> None:
        msg.CopyFrom(self.template)
        self.fields(msg, value)


_FILLER_OBJECTS: dict[str, _Filler] = {}


def to_message(cls: type[M], value: Mapping[str, Any]) -> M:
    """A new ``cls`` message holding ``value`` (a dict in the JSON shape)."""
    msg = cls()
    filler(cls.DESCRIPTOR)(msg, value)
    return msg


def encode(cls: type[Message], value: Mapping[str, Any]) -> bytes:
    """``value`` as the bytes Go's marshaller writes for ``cls``."""
    return to_message(cls, value).SerializeToString(deterministic=True)


# --- message -> dict -------------------------------------------------------------------------


def reader(descriptor: Any) -> Reader:
    """The function that reads a message of ``descriptor`` into the canonical dict shape."""
    known = _READERS.get(descriptor.full_name)
    if known is None:
        known = _READERS[descriptor.full_name] = _build_reader(descriptor)
    return known


def _build_reader(descriptor: Any) -> Reader:
    """A reader generated for ``descriptor``: one straight-line statement per field, as for
    :class:`_Filler` (a message that is absent is not read at all unless its field is kept
    empty: reading it would give ``{}``)."""
    pointers = POINTERS.get(descriptor.full_name, frozenset())
    kept = KEPT_EMPTY.get(descriptor.full_name, frozenset())
    scope: dict[str, Any] = {"format_time": format_wire_time, "loads": orjson.loads}
    lines = ["def read(msg):", "    out = {}", "    has = msg.HasField"]
    for index, field in enumerate(descriptor.fields):
        name, kind, pointer = field.name, _kind(field), field.name in pointers
        attr = _attr(name)
        if kind in (_MESSAGE, _REPEATED_MESSAGE):
            scope[f"read_{index}"] = _LazyReader(field.message_type)
        if kind == _SCALAR:
            if pointer:
                lines += [f"    if has({name!r}):", f"        out[{name!r}] = {attr}"]
            else:
                lines += [f"    item = {attr}", "    if item:", f"        out[{name!r}] = item"]
        elif kind == _TIME_KIND:
            # An absent or empty Time is the zero time (omitted); an unset pointer too.
            micro = field.message_type.full_name == _MICRO_TIME
            indent = "    "
            if pointer:
                lines.append(f"    if has({name!r}):")
                indent = "        "
            lines += [
                f"{indent}sub = {attr}",
                f"{indent}seconds, nanos = sub.seconds, sub.nanos",
                f"{indent}if seconds or nanos or sub.HasField('seconds') or sub.HasField('nanos'):",
                f"{indent}    out[{name!r}] = format_time(seconds, {'nanos' if micro else '0'}, "
                f"{micro})",
            ]
        elif kind == _MESSAGE:
            if pointer:
                lines += [
                    f"    if has({name!r}):",
                    f"        out[{name!r}] = read_{index}.read({attr})",
                ]
            elif name in kept:
                lines.append(f"    out[{name!r}] = read_{index}.read({attr})")
            else:
                lines += [
                    f"    if has({name!r}):",
                    f"        item = read_{index}.read({attr})",
                    "        if item:",
                    f"            out[{name!r}] = item",
                ]
        elif kind == _REPEATED_MESSAGE:
            lines += [
                f"    container = {attr}",
                "    if container:",
                f"        read_sub = read_{index}.read",
                f"        out[{name!r}] = [read_sub(element) for element in container]",
            ]
        elif kind == _REPEATED_SCALAR:
            lines += [
                f"    container = {attr}",
                "    if container:",
                f"        out[{name!r}] = list(container)",
            ]
        elif kind == _MAP:
            lines += [
                f"    container = {attr}",
                "    if container:",
                f"        out[{name!r}] = {{key: container[key] for key in sorted(container)}}",
            ]
        elif kind == _MAP_LIST:
            lines += [
                f"    container = {attr}",
                "    if container:",
                f"        out[{name!r}] = {{key: list(container[key].items) "
                "for key in sorted(container)}",
            ]
        else:  # FieldsV1
            lines += [
                f"    if has({name!r}):",
                f"        raw = {attr}.Raw",
                f"        out[{name!r}] = loads(raw) if raw else {{}}",
            ]
    lines.append("    return out")
    read: Reader = _compile("\n".join(lines) + "\n", "read", scope)
    return read


class _LazyReader:
    """The reader of a nested message type, built at its first use (types may nest
    themselves: ``read`` looks the reader up once, then keeps it)."""

    __slots__ = ("descriptor", "read")

    def __init__(self, descriptor: Any) -> None:
        self.descriptor = descriptor

    def __getattr__(self, name: str) -> Reader:
        if name != "read":
            raise AttributeError(name)
        built = reader(self.descriptor)
        self.read = built
        return built


def from_message(msg: Message) -> dict[str, Any]:
    """``msg`` in the canonical dict shape."""
    return reader(msg.DESCRIPTOR)(msg)


def parse(cls: type[M], data: bytes) -> M:
    """``data`` as a ``cls`` message; malformed bytes are gogo's ``unexpected EOF``."""
    msg = cls()
    try:
        msg.ParseFromString(data)
    except DecodeError:
        raise ProtoError("unexpected EOF") from None
    return msg


def decode(cls: type[Message], data: bytes) -> dict[str, Any]:
    """The bytes of a ``cls`` message in the canonical dict shape."""
    return from_message(parse(cls, data))


# --- the envelope -----------------------------------------------------------------------------


def varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def length_delimited(tag: int, data: bytes) -> bytes:
    """A length-delimited field (``tag`` is the key byte, e.g. ``0x12`` for field 2)."""
    return bytes((tag,)) + varint(len(data)) + data


@functools.lru_cache(maxsize=64)
def envelope_head(api_version: str, kind: str) -> bytes:
    """The magic and the ``typeMeta`` field of an envelope: the same for every object of a
    kind, so built once."""
    type_meta = runtime_pb2.TypeMeta(apiVersion=api_version, kind=kind).SerializeToString()
    return PREFIX + length_delimited(0x0A, type_meta)


#: contentEncoding "" and contentType "": every envelope ends with them.
ENVELOPE_TAIL = b"\x1a\x00\x22\x00"


def wrap(api_version: str, kind: str, raw: bytes) -> bytes:
    """``raw`` (an object's message) in the ``k8s\\x00`` envelope, as Go writes it."""
    return b"".join(
        (envelope_head(api_version, kind), b"\x12", varint(len(raw)), raw, ENVELOPE_TAIL)
    )


def unwrap(data: bytes) -> tuple[str, str, bytes]:
    """``(apiVersion, kind, raw)`` of an envelope; errors worded as the reference's protobuf
    serializer words them."""
    if not data:
        raise ProtoError("empty data")
    if len(data) < len(PREFIX):
        raise ProtoError("data too short")
    if data[: len(PREFIX)] != PREFIX:
        raise ProtoError(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    if len(data) == len(PREFIX):
        raise ProtoError("empty body")
    unknown = parse(runtime_pb2.Unknown, data[len(PREFIX) :])
    return unknown.typeMeta.apiVersion, unknown.typeMeta.kind, unknown.raw


def is_protobuf(data: bytes) -> bool:
    """Whether stored or sent bytes are a protobuf envelope (recognised by content, as the
    universal deserializer does)."""
    return data[:4] == PREFIX


# --- the messages, by API -------------------------------------------------------------------

#: The message of each stored or served kind, by (apiVersion, kind).
MESSAGES: dict[tuple[str, str], type[Message]] = {
    ("v1", "Event"): core_pb2.Event,
    ("v1", "EventList"): core_pb2.EventList,
    ("events.k8s.io/v1", "Event"): events_pb2.Event,
    ("events.k8s.io/v1", "EventList"): events_pb2.EventList,
    ("v1", "Status"): meta_pb2.Status,
    ("meta.k8s.io/v1", "PartialObjectMetadata"): meta_pb2.PartialObjectMetadata,
    ("meta.k8s.io/v1", "PartialObjectMetadataList"): meta_pb2.PartialObjectMetadataList,
    ("meta.k8s.io/v1beta1", "PartialObjectMetadata"): meta_pb2.PartialObjectMetadata,
    ("meta.k8s.io/v1beta1", "PartialObjectMetadataList"): meta_pb2.PartialObjectMetadataList,
    ("authentication.k8s.io/v1", "TokenRequest"): authentication_pb2.TokenRequest,
    ("authentication.k8s.io/v1", "TokenReview"): authentication_pb2.TokenReview,
    ("authentication.k8s.io/v1", "SelfSubjectReview"): authentication_pb2.SelfSubjectReview,
    ("authorization.k8s.io/v1", "SubjectAccessReview"): authorization_pb2.SubjectAccessReview,
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview"): (
        authorization_pb2.LocalSubjectAccessReview
    ),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): (
        authorization_pb2.SelfSubjectAccessReview
    ),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview"): (
        authorization_pb2.SelfSubjectRulesReview
    ),
    ("v1", "ServiceAccount"): core_pb2.ServiceAccount,
    ("v1", "ServiceAccountList"): core_pb2.ServiceAccountList,
}


def message_for(api_version: str, kind: str) -> type[Message] | None:
    """The message class of ``kind`` in ``api_version``, or None."""
    return MESSAGES.get((api_version, kind))


def object_encoder(api_version: str, kind: str) -> Callable[[Mapping[str, Any]], bytes]:
    """:func:`encode_object` for objects of one kind, with what depends only on the kind
    (the message class, its filler, the envelope's head) looked up once: an object's fields
    (no ``kind``/``apiVersion`` needed) in the envelope. For the registry's writes."""
    cls = MESSAGES[(api_version, kind)]
    fill = filler(cls.DESCRIPTOR)
    head = envelope_head(api_version, kind) + b"\x12"

    def encode_one(value: Mapping[str, Any]) -> bytes:
        msg = cls()
        fill(msg, value)
        raw = msg.SerializeToString(deterministic=True)
        return b"".join((head, varint(len(raw)), raw, ENVELOPE_TAIL))

    return encode_one


def encode_object(obj: Mapping[str, Any]) -> bytes:
    """A whole object (its ``kind`` and ``apiVersion`` pick the message) in the envelope:
    a response body as kube-apiserver's protobuf serializer writes it."""
    api_version, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
    message = MESSAGES.get((api_version, kind))
    if message is None:
        raise ProtoError(f"no protobuf message for {api_version} {kind}")
    return wrap(api_version, kind, encode(message, obj))


def watch_frame(event_type: str, envelope: bytes) -> bytes:
    """One frame of a protobuf watch (k8s.io/apimachinery ``pkg/util/framer/framer.go``,
    ``pkg/apiserver/endpoints/handlers/watch.go``): a 4-byte big-endian length, then a bare
    ``WatchEvent`` (no envelope of its own) whose ``object.raw`` is the object's envelope."""
    payload = length_delimited(0x0A, event_type.encode()) + length_delimited(
        0x12, length_delimited(0x0A, envelope)
    )
    return len(payload).to_bytes(4, "big") + payload


def read_watch_frames(data: bytes) -> list[tuple[str, bytes]]:
    """``(type, object envelope)`` of every whole frame in ``data`` (tests, tools)."""
    out: list[tuple[str, bytes]] = []
    at = 0
    while at + 4 <= len(data):
        size = int.from_bytes(data[at : at + 4], "big")
        if at + 4 + size > len(data):
            break
        event = parse(meta_pb2.WatchEvent, data[at + 4 : at + 4 + size])
        out.append((event.type, event.object.raw))
        at += 4 + size
    return out


CoreEvent = core_pb2.Event
CoreEventList = core_pb2.EventList
EventsEvent = events_pb2.Event
EventsEventList = events_pb2.EventList
ListMeta = meta_pb2.ListMeta
Status = meta_pb2.Status
WatchEvent = meta_pb2.WatchEvent
DeleteOptions = meta_pb2.DeleteOptions
TokenRequest = authentication_pb2.TokenRequest

__all__ = [
    "ENVELOPE_TAIL",
    "MEDIA_TYPE",
    "PREFIX",
    "CoreEvent",
    "CoreEventList",
    "DeleteOptions",
    "EventsEvent",
    "EventsEventList",
    "ListMeta",
    "ProtoError",
    "Status",
    "TokenRequest",
    "WatchEvent",
    "decode",
    "encode",
    "encode_object",
    "envelope_head",
    "from_message",
    "is_protobuf",
    "length_delimited",
    "message_for",
    "parse",
    "read_watch_frames",
    "to_message",
    "unwrap",
    "varint",
    "watch_frame",
    "wrap",
]
