"""Decoding, encoding and conversion of Events: events.k8s.io/v1 <-> internal <-> core v1.

Reference behaviour:

* ``k8s.io/api`` ``events/v1/types.go`` and ``core/v1/types.go`` -- field order, JSON names
  and ``omitempty`` tags, which decide what is written out (Go never omits a struct, so an
  unset ``metav1.Time`` is written as ``null``);
* ``k8s/k8s`` ``pkg/apis/events/v1/conversion.go`` -- the field renames;
* ``apimachinery`` ``pkg/apis/meta/v1/time.go`` and ``micro_time.go`` -- RFC 3339 in whole
  seconds, and exactly six fraction digits for ``MicroTime``, both written in UTC (parsed
  and printed by :mod:`apiserver.apimachinery.meta_time`, the one port of Go's
  ``time.Parse`` for these layouts);
* Go's ``encoding/json`` (as forked in ``sigs.k8s.io/json``): case-sensitive field names,
  unknown fields dropped, ``null`` leaves a value at zero, a type mismatch is reported as
  ``json: cannot unmarshal <what> into Go struct field <Struct>.<path> of type <type>``
  (the first one wins, decoding goes on), while an error from a value's own decoder (a bad
  time) stops decoding at once and wins.

The *internal* form is what the server stores and validates: a dict with core v1 field
names (``involvedObject``, ``message``, ``source``, ``firstTimestamp``, ``lastTimestamp``,
``count``, ``reportingComponent`` ...) and no ``kind``/``apiVersion``. It is canonical:
zero values are absent (``metadata``, ``involvedObject`` and ``source`` are always present,
possibly empty), pointer fields (``series``, ``related``, ``deletionTimestamp``,
``deletionGracePeriodSeconds``, ...) are present exactly when set, times are wire strings
(``2024-01-01T00:00:00Z``; ``MicroTime`` with six digits). Two canonical dicts are equal
exactly when Go's semantic equality says so.

Hand-written rather than a schema library: what matters here is Go's exact error text,
field order and zero-value rules, which no Python library reproduces.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from apiserver.apimachinery.meta_time import (
    TimeParseError,
    format_micro_time,
    format_time,
    parse_micro_time,
    parse_time,
)
from apiserver.gocompat.jsonvalues import go_json_kind

V1_API_VERSION = "events.k8s.io/v1"
CORE_API_VERSION = "v1"
KIND = "Event"


class DecodeError(Exception):
    """A body that Go's JSON decoder would refuse; ``message`` is Go's error text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# --- Go time parsing ------------------------------------------------------------------------


def parse_go_time(value: str, micro: bool) -> _dt.datetime:
    """``time.Parse`` with ``time.RFC3339`` or metav1's ``RFC3339Micro`` layout.

    Returns an aware UTC datetime (fraction truncated to microseconds) or raises
    :class:`DecodeError` with Go's exact message. The parser is the one in
    :mod:`apiserver.apimachinery.meta_time` (``metav1.Time``/``MicroTime``'s own
    ``UnmarshalJSON``); here its error only changes type, since a bad time stops decoding.
    """
    try:
        return parse_micro_time(value) if micro else parse_time(value)
    except TimeParseError as error:
        raise DecodeError(str(error)) from None


_ZERO = _dt.datetime(1, 1, 1, tzinfo=_dt.UTC)


def now_micro_time(epoch: float) -> str:
    """A ``metav1.MicroTime`` wire string for a Unix time."""
    return format_micro_time(_dt.datetime.fromtimestamp(epoch, _dt.UTC))


def wire_time_to_epoch(value: str) -> float:
    """Seconds since the epoch of a canonical wire time string."""
    return _dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# --- a small model of the Go structs ------------------------------------------------------


@attrs.frozen
class _Str:
    go_type: str = "string"


@attrs.frozen
class _Int:
    go_type: str  # "int32" or "int64"
    bits: int


@attrs.frozen
class _Bool:
    go_type: str = "bool"


@attrs.frozen
class _Time:
    micro: bool


@attrs.frozen
class _Raw:
    """``FieldsV1``: its own decoder keeps any JSON value."""


@attrs.frozen
class _Ptr:
    elem: Any


@attrs.frozen
class _List:
    elem: Any
    go_type: str


@attrs.frozen
class _Map:
    go_type: str = "map[string]string"


@attrs.frozen
class _F:
    name: str
    type: Any
    omitempty: bool = True


@attrs.frozen
class _Struct:
    name: str  # e.g. "ObjectMeta", as Go's errors name the enclosing struct
    go_type: str  # e.g. "v1.ObjectMeta"
    fields: tuple[_F, ...]
    index: dict[str, _F] = attrs.field(init=False, eq=False, repr=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "index", {f.name: f for f in self.fields})

    def field(self, name: str) -> _F | None:
        return self.index.get(name)


_STR = _Str()
_UID = _Str("types.UID")
_INT32 = _Int("int32", 32)
_INT64 = _Int("int64", 64)
_TIME = _Time(False)
_MICRO = _Time(True)

OWNER_REFERENCE = _Struct(
    "OwnerReference",
    "v1.OwnerReference",
    (
        _F("apiVersion", _STR, False),
        _F("kind", _STR, False),
        _F("name", _STR, False),
        _F("uid", _UID, False),
        _F("controller", _Ptr(_Bool())),
        _F("blockOwnerDeletion", _Ptr(_Bool())),
    ),
)

MANAGED_FIELDS_ENTRY = _Struct(
    "ManagedFieldsEntry",
    "v1.ManagedFieldsEntry",
    (
        _F("manager", _STR),
        _F("operation", _Str("v1.ManagedFieldsOperationType")),
        _F("apiVersion", _STR),
        _F("time", _Ptr(_TIME)),
        _F("fieldsType", _STR),
        _F("fieldsV1", _Ptr(_Raw())),
        _F("subresource", _STR),
    ),
)

OBJECT_META = _Struct(
    "ObjectMeta",
    "v1.ObjectMeta",
    (
        _F("name", _STR),
        _F("generateName", _STR),
        _F("namespace", _STR),
        _F("selfLink", _STR),
        _F("uid", _UID),
        _F("resourceVersion", _STR),
        _F("generation", _INT64),
        _F("creationTimestamp", _TIME),
        _F("deletionTimestamp", _Ptr(_TIME)),
        _F("deletionGracePeriodSeconds", _Ptr(_INT64)),
        _F("labels", _Map()),
        _F("annotations", _Map()),
        _F("ownerReferences", _List(OWNER_REFERENCE, "[]v1.OwnerReference")),
        _F("finalizers", _List(_STR, "[]string")),
        _F("managedFields", _List(MANAGED_FIELDS_ENTRY, "[]v1.ManagedFieldsEntry")),
    ),
)

OBJECT_REFERENCE = _Struct(
    "ObjectReference",
    "v1.ObjectReference",
    (
        _F("kind", _STR),
        _F("namespace", _STR),
        _F("name", _STR),
        _F("uid", _UID),
        _F("apiVersion", _STR),
        _F("resourceVersion", _STR),
        _F("fieldPath", _STR),
    ),
)

EVENT_SOURCE = _Struct("EventSource", "v1.EventSource", (_F("component", _STR), _F("host", _STR)))

V1_SERIES = _Struct(
    "EventSeries",
    "v1.EventSeries",
    (_F("count", _INT32, False), _F("lastObservedTime", _MICRO, False)),
)

CORE_SERIES = _Struct(
    "EventSeries",
    "v1.EventSeries",
    (_F("count", _INT32), _F("lastObservedTime", _MICRO)),
)

V1_EVENT = _Struct(
    "Event",
    "v1.Event",
    (
        _F("kind", _STR),
        _F("apiVersion", _STR),
        _F("metadata", OBJECT_META, False),
        _F("eventTime", _MICRO, False),
        _F("series", _Ptr(V1_SERIES)),
        _F("reportingController", _STR),
        _F("reportingInstance", _STR),
        _F("action", _STR),
        _F("reason", _STR),
        _F("regarding", OBJECT_REFERENCE),
        _F("related", _Ptr(OBJECT_REFERENCE)),
        _F("note", _STR),
        _F("type", _STR),
        _F("deprecatedSource", EVENT_SOURCE),
        _F("deprecatedFirstTimestamp", _TIME),
        _F("deprecatedLastTimestamp", _TIME),
        _F("deprecatedCount", _INT32),
    ),
)

CORE_EVENT = _Struct(
    "Event",
    "v1.Event",
    (
        _F("kind", _STR),
        _F("apiVersion", _STR),
        _F("metadata", OBJECT_META, False),
        _F("involvedObject", OBJECT_REFERENCE, False),
        _F("reason", _STR),
        _F("message", _STR),
        _F("source", EVENT_SOURCE),
        _F("firstTimestamp", _TIME),
        _F("lastTimestamp", _TIME),
        _F("count", _INT32),
        _F("type", _STR),
        _F("eventTime", _MICRO),
        _F("series", _Ptr(CORE_SERIES)),
        _F("action", _STR),
        _F("related", _Ptr(OBJECT_REFERENCE)),
        _F("reportingComponent", _STR, False),
        _F("reportingInstance", _STR, False),
    ),
)

#: events.k8s.io/v1 name -> internal (core v1) name.
V1_TO_INTERNAL: dict[str, str] = {
    "metadata": "metadata",
    "eventTime": "eventTime",
    "series": "series",
    "reportingController": "reportingComponent",
    "reportingInstance": "reportingInstance",
    "action": "action",
    "reason": "reason",
    "regarding": "involvedObject",
    "related": "related",
    "note": "message",
    "type": "type",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
INTERNAL_TO_V1: dict[str, str] = {v: k for k, v in V1_TO_INTERNAL.items()}

#: Internal keys in core v1 struct order.
INTERNAL_ORDER: tuple[str, ...] = tuple(
    f.name for f in CORE_EVENT.fields if f.name not in ("kind", "apiVersion")
)


# --- decoding ----------------------------------------------------------------------------


def _number_literal(value: int | float) -> str:
    # The literal as the client most likely wrote it (the parsed value is all we have).
    return repr(value) if isinstance(value, float) else str(value)


class _Decoder:
    """One decoding: remembers the first type error (Go keeps decoding after one)."""

    def __init__(self) -> None:
        self.saved: DecodeError | None = None

    def type_error(self, what: str, go_type: str, struct: str, path: str) -> None:
        if self.saved is not None:
            return
        if struct or path:
            where = f"Go struct field {struct}.{path}"
        else:
            where = "Go value"
        self.saved = DecodeError(f"json: cannot unmarshal {what} into {where} of type {go_type}")


# Each type's decoder is built once, as a closure, rather than dispatching on the type model
# for every value (every create, update and patch decodes its object). A decoder takes the
# value, the decoding, the enclosing struct's name and the value's path as (parent, key) --
# joined only for an error message or a nested struct -- and returns the canonical value, or
# None for a zero/nil value. JSON null decodes to nil whatever the type, so a decoder is never
# handed None: the struct, list and pointer decoders deal with it.

Decoder = Callable[[Any, _Decoder, str, str, str], Any]

_DECODERS: dict[int, tuple[Any, Decoder]] = {}


def _path(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _wrong_kind(d: _Decoder, value: Any, go_type: str, struct: str, parent: str, key: str) -> None:
    """A value of the wrong JSON kind: Go's type error (if it is the first), decoded as nil."""
    d.type_error(go_json_kind(value), go_type, struct, _path(parent, key))


def _decoder(typ: Any) -> Decoder:
    known = _DECODERS.get(id(typ))
    if known is None or known[0] is not typ:
        known = _DECODERS[id(typ)] = (typ, _build_decoder(typ))
    return known[1]


def _build_decoder(typ: Any) -> Decoder:
    builder = _DECODER_BUILDERS.get(type(typ))
    if builder is None:
        raise TypeError(f"unknown schema type {typ!r}")
    return builder(typ)


def _ptr_decoder(typ: _Ptr) -> Decoder:
    elem, inner = typ.elem, _decoder(typ.elem)

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        decoded = inner(value, d, struct, parent, key)
        return _zero_of(elem) if decoded is None else decoded

    return decode


def _str_decoder(typ: _Str) -> Decoder:
    go_type = typ.go_type

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        if isinstance(value, str):
            return value or None
        return _wrong_kind(d, value, go_type, struct, parent, key)

    return decode


def _int_decoder(typ: _Int) -> Decoder:
    go_type, limit = typ.go_type, 1 << (typ.bits - 1)

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return _wrong_kind(d, value, go_type, struct, parent, key)
        if isinstance(value, float) or not -limit <= value < limit:
            d.type_error(f"number {_number_literal(value)}", go_type, struct, _path(parent, key))
            return None
        return value or None

    return decode


def _bool_decoder(typ: _Bool) -> Decoder:
    go_type = typ.go_type

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        if isinstance(value, bool):
            return value
        return _wrong_kind(d, value, go_type, struct, parent, key)

    return decode


def _time_decoder(typ: _Time) -> Decoder:
    micro = typ.micro

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        if not isinstance(value, str):
            # metav1.Time decodes a string itself; its error stops decoding at once.
            raise DecodeError(
                f"json: cannot unmarshal {go_json_kind(value)} into Go struct field "
                f"{struct}.{_path(parent, key)} of type string"
            )
        canonical = _canonical_time(value, micro)
        if canonical is not None:
            return canonical or None
        t = parse_go_time(value, micro)
        if t == _ZERO:
            return None
        return format_micro_time(t) if micro else format_time(t)

    return decode


def _raw_decoder(typ: _Raw) -> Decoder:
    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        return value

    return decode


def _map_decoder(typ: _Map) -> Decoder:
    go_type = typ.go_type

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        if not isinstance(value, dict):
            return _wrong_kind(d, value, go_type, struct, parent, key)
        out: dict[str, str] = {}
        for k, v in value.items():
            if v is None:
                out[k] = ""
            elif isinstance(v, str):
                out[k] = v
            else:
                d.type_error(go_json_kind(v), "string", struct, _path(parent, key))
        return out or None

    return decode


def _list_decoder(typ: _List) -> Decoder:
    elem, go_type, inner = typ.elem, typ.go_type, _decoder(typ.elem)

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        if not isinstance(value, list):
            return _wrong_kind(d, value, go_type, struct, parent, key)
        items = []
        for item in value:
            decoded = None if item is None else inner(item, d, struct, parent, key)
            items.append(_zero_of(elem) if decoded is None else decoded)
        return items or None

    return decode


def _struct_decoder(typ: _Struct) -> Decoder:
    name, go_type, order = typ.name, typ.go_type, tuple(f.name for f in typ.fields)
    fields = {f.name: _decoder(f.type) for f in typ.fields}

    def decode(value: Any, d: _Decoder, struct: str, parent: str, key: str) -> Any:
        if not isinstance(value, dict):
            return _wrong_kind(d, value, go_type, struct, parent, key)
        path = _path(parent, key)
        found: dict[str, Any] = {}
        for k, item in value.items():
            field = fields.get(k)
            if field is None:
                continue  # unknown fields are dropped (strictness is checked elsewhere)
            decoded = None if item is None else field(item, d, name, path, k)
            if decoded is None:
                found.pop(k, None)
            else:
                found[k] = decoded
        ordered = {f: found[f] for f in order if f in found}
        return ordered or None

    return decode


_DECODER_BUILDERS: dict[type, Callable[[Any], Decoder]] = {
    _Ptr: _ptr_decoder,
    _Str: _str_decoder,
    _Int: _int_decoder,
    _Bool: _bool_decoder,
    _Time: _time_decoder,
    _Raw: _raw_decoder,
    _Map: _map_decoder,
    _List: _list_decoder,
    _Struct: _struct_decoder,
}


_CANONICAL_TIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z")
_CANONICAL_MICRO = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)\.(\d{6})Z")


#: Calendar dates (``YYYY-MM-DD``) already checked, and whether they exist: the times of a
#: stream of events fall on a handful of days. Bounded; emptied when full.
_DATES: dict[str, bool] = {}
_DATES_SIZE = 4096


def date_exists(date: str) -> bool:
    """Whether ``date`` (``YYYY-MM-DD``, ASCII digits) is a day of the calendar,
    remembered in ``_DATES`` (callers on hot paths read that first)."""
    exists = _DATES.get(date)
    if exists is None:
        try:
            _dt.date(int(date[:4]), int(date[5:7]), int(date[8:10]))
            exists = True
        except ValueError:
            exists = False
        if len(_DATES) >= _DATES_SIZE:
            _DATES.clear()
        _DATES[date] = exists
    return exists


def _canonical_time(value: str, micro: bool) -> str | None:
    """Fast path: a value already in canonical wire form is returned as is ("" for the zero
    time); anything else (or an impossible date) goes through :func:`parse_go_time`."""
    match = (_CANONICAL_MICRO if micro else _CANONICAL_TIME).fullmatch(value)
    if match is None:
        return None
    if not value.isascii():  # other Unicode digits: the general arithmetic below
        return _canonical_digits(match, value)
    date = value[:10]
    exists = _DATES.get(date)
    if exists is None:
        exists = date_exists(date)
    if not exists or value[11:13] > "23" or value[14:16] > "59" or value[17:19] > "59":
        return None
    if (
        date == "0001-01-01"
        and value[11:19] == "00:00:00"
        and (not micro or value[20:26] == "000000")
    ):
        return ""
    return value


def _canonical_digits(match: re.Match[str], value: str) -> str | None:
    parts = [int(p) for p in match.groups()]
    year, month, day, hour, minute, second = parts[:6]
    try:
        _dt.datetime(year, month, day, hour, minute, second)
    except ValueError:
        return None
    if parts[:3] == [1, 1, 1] and not any(parts[3:]):
        return ""
    return value


def _zero_of(typ: Any) -> Any:
    if isinstance(typ, _Struct):
        return {}
    if isinstance(typ, _Str):
        return ""
    if isinstance(typ, _Int):
        return 0
    if isinstance(typ, _Bool):
        return False
    return None


def _decode(obj: Any, schema: _Struct) -> dict[str, Any]:
    decoder = _Decoder()
    if not isinstance(obj, dict):
        raise DecodeError(
            f"json: cannot unmarshal {go_json_kind(obj)} into Go value of type {schema.go_type}"
        )
    result = _decoder(schema)(obj, decoder, "", "", "") or {}
    if decoder.saved is not None:
        raise decoder.saved
    return result


def _finish_internal(fields: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in INTERNAL_ORDER:
        if key in fields:
            out[key] = fields[key]
        elif key in ("metadata", "involvedObject", "source"):
            out[key] = {}
    return out


def v1_to_internal(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Decode an events.k8s.io/v1 Event (a parsed JSON body) into the internal form.

    Raises :class:`DecodeError` where Go's decoder would fail; unknown fields are dropped.
    """
    wire = _decode(obj, V1_EVENT)
    return _finish_internal({V1_TO_INTERNAL[k]: v for k, v in wire.items() if k in V1_TO_INTERNAL})


def core_v1_to_internal(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Decode a core v1 Event into the internal form (same names, same rules)."""
    wire = _decode(obj, CORE_EVENT)
    wire.pop("kind", None)
    wire.pop("apiVersion", None)
    return _finish_internal(wire)


def decode_object_meta(meta: Any) -> dict[str, Any]:
    """Decode a lone ObjectMeta into its canonical form (errors as for a whole Event)."""
    return _decode(meta, OBJECT_META)


#: ObjectMeta's keys in Go struct field order (k8s.io/apimachinery pkg/apis/meta/v1/types.go).
OBJECT_META_ORDER: tuple[str, ...] = tuple(f.name for f in OBJECT_META.fields)
_SORTED_MAPS = ("labels", "annotations")


def canonical_object_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """``meta`` as kube-apiserver's encoders write it: keys in ObjectMeta's field order, and
    the ``labels``/``annotations`` maps by key (Go's ``encoding/json`` and the protobuf
    marshaller both sort map keys).

    The server adds ``uid``, ``creationTimestamp`` and ``managedFields`` to a decoded
    (already ordered) ObjectMeta, and an update copies kept fields from the stored object;
    putting the result in this one order means the same object always encodes to the same
    stored bytes, which k8s.io/apiserver pkg/storage/etcd3/store.go ``GuaranteedUpdate``
    relies on to skip a write that changes nothing (``bytes.Equal(data, origState.data)``).
    Keys this model does not know (none from the decoder) are kept, last.
    """
    out = {key: meta[key] for key in OBJECT_META_ORDER if key in meta}
    if len(out) != len(meta):
        out.update(meta)
    for key in _SORTED_MAPS:
        value = out.get(key)
        if value and len(value) > 1:
            keys = list(value)
            if keys != sorted(keys):
                out[key] = {k: value[k] for k in sorted(keys)}
    return out


# --- encoding ----------------------------------------------------------------------------
#
# Each type's encoder is built once, as a closure over a plan of its fields, rather than
# walking the type model value by value: every GET, list item, watch event and write answer
# goes through here (the walk was the largest part of a create's answer).

Encoder = Callable[[Any], Any]

#: How a struct field is written: always (zero value when unset), only when not nil (pointers),
#: only when not empty (``omitempty``), or a constant (type meta).
_ALWAYS, _UNLESS_NIL, _UNLESS_EMPTY, _CONSTANT = 0, 1, 2, 3

_ENCODERS: dict[int, tuple[Any, Encoder | None]] = {}


def _encoder(typ: Any) -> Encoder | None:
    """The encoder of ``typ``; None where a value is written as it is (strings, numbers...)."""
    known = _ENCODERS.get(id(typ))
    if known is None or known[0] is not typ:
        known = _ENCODERS[id(typ)] = (typ, _build_encoder(typ))
    return known[1]


def _build_encoder(typ: Any) -> Encoder | None:
    if isinstance(typ, _Struct):
        return _struct_encoder(typ, {f.name: f.name for f in typ.fields}, {})
    if isinstance(typ, _Ptr):
        elem = _encoder(typ.elem)
        if elem is None:
            return None
        return lambda value: None if value is None else elem(value)
    if isinstance(typ, _List):
        item = _encoder(typ.elem)
        if item is None:
            return lambda value: None if value is None else list(value)
        return lambda value: None if value is None else [item(v) for v in value]
    if isinstance(typ, _Map):
        return lambda value: None if value is None else dict(value)
    if isinstance(typ, _Time):
        return lambda value: value or None
    return None


def _zero_factory(typ: Any) -> Callable[[], Any]:
    """What Go writes for an unset field that is never omitted (a fresh value each call)."""
    if isinstance(typ, _Struct):
        encode = _encoder(typ)
        assert encode is not None
        return lambda: encode({})
    zero = _zero_of(typ)
    return lambda: zero


def _struct_encoder(
    typ: _Struct, source: Mapping[str, str | None], constants: Mapping[str, Any]
) -> Encoder:
    """Go's ``encoding/json`` of a struct, in field order; each field read from the source
    dict under ``source[name]`` (None: never set) or set to ``constants[name]``.

    ``omitempty`` never omits a struct (a Time is a struct); pointers are omitted when nil,
    other ``omitempty`` fields when empty; fields never omitted but unset get their zero."""
    plan: list[tuple[str, str | None, int, Any, Any]] = []
    for f in typ.fields:
        if f.name in constants:
            plan.append((f.name, None, _CONSTANT, None, constants[f.name]))
            continue
        if isinstance(f.type, _Struct | _Time) or not f.omitempty:
            how = _ALWAYS
        elif isinstance(f.type, _Ptr):
            how = _UNLESS_NIL
        else:
            how = _UNLESS_EMPTY
        zero = _zero_factory(f.type) if how == _ALWAYS else None
        plan.append((f.name, source.get(f.name), how, _encoder(f.type), zero))
    return _generated_encoder(plan)


_IMMUTABLE_ZEROS = (str, int, bool, type(None))


def _generated_encoder(plan: list[tuple[str, str | None, int, Any, Any]]) -> Encoder:
    """The encoder of ``plan`` as generated straight-line code: one statement per field
    (``get``, then a store), in field order. A loop over the plan that tests each field's
    rule cost about twice as much per object, and every GET, list item, watch event and
    write answer is encoded here. The rules, for each field: a constant is written as is; an
    unset field (None) is written as its zero when never omitted (``_ALWAYS``), else left
    out; a set field is left out only when ``omitempty`` and empty (``_UNLESS_EMPTY``)."""
    scope: dict[str, Any] = {"EMPTY": {}}
    lines = ["def encode(value):", "    get = (value or EMPTY).get", "    out = {}"]
    for index, (name, key, how, encode_item, extra) in enumerate(plan):
        target = f"out[{name!r}]"
        if how == _CONSTANT:
            scope[f"constant_{index}"] = extra
            lines.append(f"    {target} = constant_{index}")
            continue
        if how == _ALWAYS:
            zero = extra()
            if isinstance(zero, _IMMUTABLE_ZEROS):
                scope[f"zero_{index}"] = zero
                zero_expr = f"zero_{index}"
            else:  # a fresh value each time (an empty struct's encoding is a new dict)
                scope[f"zero_{index}"] = extra
                zero_expr = f"zero_{index}()"
        if key is None:
            if how == _ALWAYS:
                lines.append(f"    {target} = {zero_expr}")
            continue
        if encode_item is None:
            value_expr = "item"
        else:
            scope[f"encode_{index}"] = encode_item
            value_expr = f"encode_{index}(item)"
        lines.append(f"    item = get({key!r})")
        lines.append("    if item is None:")
        lines.append(f"        {target} = {zero_expr}" if how == _ALWAYS else "        pass")
        lines.append("    elif item:" if how == _UNLESS_EMPTY else "    else:")
        lines.append(f"        {target} = {value_expr}")
    lines.append("    return out")
    exec(compile("\n".join(lines) + "\n", "<event encoder>", "exec"), scope)
    encode: Encoder = scope["encode"]
    return encode


def _type_meta(api_version: str) -> dict[str, Any]:
    return {"kind": KIND, "apiVersion": api_version}


def _event_encoder(typ: _Struct, renames: Mapping[str, str], api_version: str | None) -> Encoder:
    """An internal Event written as ``typ``: fields read under their internal names, type meta
    (when ``api_version`` is given) written as constants, never read from the object."""
    source: dict[str, str | None] = {f.name: renames.get(f.name) for f in typ.fields}
    return _struct_encoder(typ, source, _type_meta(api_version) if api_version else {})


_CORE_NAMES = {f.name: f.name for f in CORE_EVENT.fields if f.name not in ("kind", "apiVersion")}
_TO_V1 = _event_encoder(V1_EVENT, V1_TO_INTERNAL, V1_API_VERSION)
_TO_V1_ITEM = _event_encoder(V1_EVENT, V1_TO_INTERNAL, None)
_TO_CORE = _event_encoder(CORE_EVENT, _CORE_NAMES, CORE_API_VERSION)
_TO_CORE_ITEM = _event_encoder(CORE_EVENT, _CORE_NAMES, None)


def internal_to_v1(obj: Mapping[str, Any], *, include_type_meta: bool = True) -> dict[str, Any]:
    """Encode an internal Event as events.k8s.io/v1 JSON, in Go's field order and with Go's
    ``omitempty`` rules. ``include_type_meta=False`` for list items (they carry no
    kind/apiVersion)."""
    encoded: dict[str, Any] = (_TO_V1 if include_type_meta else _TO_V1_ITEM)(obj)
    return encoded


def internal_to_core_v1(
    obj: Mapping[str, Any], *, include_type_meta: bool = True
) -> dict[str, Any]:
    """Encode an internal Event as core v1 JSON (``apiVersion: v1``)."""
    encoded: dict[str, Any] = (_TO_CORE if include_type_meta else _TO_CORE_ITEM)(obj)
    return encoded


def encode_object_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    """ObjectMeta JSON in Go's field order (``creationTimestamp: null`` when unset)."""
    encode = _encoder(OBJECT_META)
    assert encode is not None
    encoded: dict[str, Any] = encode(meta)
    return encoded


def empty_internal(metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An internal Event with nothing set but (optionally) its metadata."""
    return _finish_internal({"metadata": dict(metadata or {})})


def empty_v1_event(metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The empty events.k8s.io/v1 Event of an initial-events-end BOOKMARK (k8s.io/apiserver
    ``pkg/storage/cacher/cacher.go``), e.g.
    ``metadata={"resourceVersion": "42", "annotations": {"k8s.io/initial-events-end": "true"}}``.
    """
    return internal_to_v1(empty_internal(metadata))


def empty_core_event(metadata: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The same for core v1."""
    return internal_to_core_v1(empty_internal(metadata))


# --- building blocks for the other core/v1 resources (api/serviceaccounts) ----------------------
#: Go types for :func:`decode_struct` and :func:`struct_encoder`: a string, a bool, a pointer,
#: a slice, a struct field, a struct, and ObjectMeta / ObjectReference.
StringType, BoolType, PointerType, ListType = _Str, _Bool, _Ptr, _List
FieldType, StructType = _F, _Struct
STRING_TYPE = _STR
OBJECT_META_TYPE = OBJECT_META
OBJECT_REFERENCE_TYPE = OBJECT_REFERENCE
#: A parsed JSON object decoded as the struct (Go's errors, unknown fields dropped).
decode_struct = _decode
#: Go's ``encoding/json`` of a struct from a dict (see :func:`_struct_encoder`).
struct_encoder = _struct_encoder
