"""TokenRequest bodies in ``application/vnd.kubernetes.protobuf``, decoded to the JSON shape.

kubectl (``create token``) and every client-go typed client send built-in kinds as protobuf:
the 4-byte prefix ``k8s\\x00`` and a ``runtime.Unknown`` envelope (1: typeMeta {1: apiVersion,
2: kind}, 2: raw) around the message of ``k8s.io/api/authentication/v1/generated.proto``:
TokenRequest {1: metadata, 2: spec, 3: status}, TokenRequestSpec {1: audiences (repeated),
4: expirationSeconds, 3: boundObjectRef}, BoundObjectReference {1: kind, 2: apiVersion, 3: name,
4: uid}; ObjectMeta as in ``k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto``. Only what
the TokenRequest API reads is decoded (status is discarded by the server anyway); unknown
fields are skipped, as gogo-protobuf does. Errors are worded like the reference's protobuf
serializer (``runtime/serializer/protobuf``) and gogo's generated ``Unmarshal``.

Written by hand: these are a handful of fields of fixed numbers, and the project has no
protobuf runtime (see also :mod:`apiserver.openapi.protobuf`, which writes the wire format).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

PREFIX = b"k8s\x00"


class ProtoError(ValueError):
    """The body is not a TokenRequest in protobuf; the text is the reference's."""


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise ProtoError("unexpected EOF")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift >= 64:
            raise ProtoError("proto: integer overflow")


def fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` pairs: varints as ints, length-delimited as bytes."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire_type = key >> 3, key & 7
        if number <= 0:
            raise ProtoError(f"proto: illegal tag {number} (wire type {wire_type})")
        if wire_type == 0:
            value, at = _varint(data, at)
            yield number, value
        elif wire_type == 2:
            length, at = _varint(data, at)
            if at + length > len(data):
                raise ProtoError("unexpected EOF")
            yield number, data[at : at + length]
            at += length
        elif wire_type in (1, 5):
            at += 8 if wire_type == 1 else 4
            if at > len(data):
                raise ProtoError("unexpected EOF")
        else:
            raise ProtoError(f"proto: illegal wireType {wire_type}")


def _text(value: int | bytes) -> str:
    if not isinstance(value, bytes):
        raise ProtoError("proto: wrong wireType = 0 for a string field")
    return value.decode("utf-8", "replace")


def _int64(value: int | bytes) -> int:
    if isinstance(value, bytes):
        raise ProtoError("proto: wrong wireType = 2 for an int64 field")
    return value - (1 << 64) if value >= 1 << 63 else value


def _entry(value: int | bytes) -> tuple[str, str]:
    key = item = ""
    for number, part in fields(_bytes(value)):
        if number == 1:
            key = _text(part)
        elif number == 2:
            item = _text(part)
    return key, item


def _bytes(value: int | bytes) -> bytes:
    if not isinstance(value, bytes):
        raise ProtoError("proto: wrong wireType = 0 for an embedded message")
    return value


_META_STRINGS = {1: "name", 2: "generateName", 3: "namespace", 5: "uid", 6: "resourceVersion"}
_REF_STRINGS = {1: "kind", 2: "apiVersion", 3: "name", 4: "uid"}


def _metadata(data: bytes) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for number, value in fields(data):
        if number in _META_STRINGS:
            meta[_META_STRINGS[number]] = _text(value)
        elif number == 7:
            meta["generation"] = _int64(value)
        elif number in (11, 12):
            key, item = _entry(value)
            meta.setdefault("labels" if number == 11 else "annotations", {})[key] = item
    return meta


def _spec(data: bytes) -> dict[str, Any]:
    spec: dict[str, Any] = {"audiences": []}
    for number, value in fields(data):
        if number == 1:
            spec["audiences"].append(_text(value))
        elif number == 4:
            spec["expirationSeconds"] = _int64(value)
        elif number == 3:
            spec["boundObjectRef"] = {
                _REF_STRINGS[n]: _text(v) for n, v in fields(_bytes(value)) if n in _REF_STRINGS
            }
    return spec


def envelope(body: bytes) -> tuple[str, str, bytes]:
    """``(apiVersion, kind, raw message)`` of the ``runtime.Unknown`` envelope."""
    if not body:
        raise ProtoError("empty data")
    if len(body) < len(PREFIX):
        raise ProtoError("data too short")
    if body[: len(PREFIX)] != PREFIX:
        raise ProtoError(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    api_version = kind = ""
    raw = b""
    for number, value in fields(body[len(PREFIX) :]):
        if number == 1:
            for n, v in fields(_bytes(value)):
                if n == 1:
                    api_version = _text(v)
                elif n == 2:
                    kind = _text(v)
        elif number == 2:
            raw = _bytes(value)
    return api_version, kind, raw


def token_request(raw: bytes) -> dict[str, Any]:
    """A TokenRequest message in the JSON shape (metadata and spec; status is dropped)."""
    obj: dict[str, Any] = {}
    for number, value in fields(raw):
        if number == 1:
            obj["metadata"] = _metadata(_bytes(value))
        elif number == 2:
            obj["spec"] = _spec(_bytes(value))
    return obj
