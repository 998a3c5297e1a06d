"""The bytes of stored objects: ``--storage-media-type`` on write, every known format on read.

Follows k8s.io/apiserver ``pkg/server/storage/storage_codec.go`` (``NewStorageCodec``): the
configured serializer encodes; decoding recognises the format by content, whatever the flag
says, so data written with another media type (by an older release of this server, or by
kube-apiserver itself) is read without migration:

* ``{`` -- JSON (k8s.io/apimachinery ``pkg/runtime/serializer/json``: compact, with the
  ``json.Encoder``'s trailing newline);
* ``k8s\\x00`` -- the protobuf envelope (``pkg/runtime/serializer/protobuf/protobuf.go``),
  decoded by :class:`ProtobufSerializer`;
* ``k8s:enc:`` -- encrypted at rest (``pkg/storage/value``): not readable here, a clean error;
* anything else -- YAML (``pkg/runtime/serializer/yaml``).

A serializer works on the *stored shape*: a plain dict with ``kind`` and ``apiVersion`` and
the fields as the stored version's JSON names them (for events: a core/v1 Event, Go's JSON
emission rules). Converting between that shape and what the registry hands to the API
(``apiserver.registry.store.StorageConversion``) is the caller's concern, so a serializer
knows no resource.
"""

from __future__ import annotations

from typing import Any, Protocol

import orjson
import yaml

from apiserver.gocompat import yamlguard
from apiserver.protobuf import codec as pbcodec

Obj = dict[str, Any]

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"
MEDIA_TYPES = (JSON, YAML, PROTOBUF)

PROTOBUF_MAGIC = b"k8s\x00"
ENCRYPTED_PREFIX = b"k8s:enc:"


class StorageCodecError(Exception):
    """Stored bytes that cannot be decoded (or an object that cannot be encoded)."""


class StorageSerializer(Protocol):
    """Encodes the stored shape to bytes in ``media_type``; decodes any stored format."""

    @property
    def media_type(self) -> str: ...

    def encode(self, obj: Obj) -> bytes:
        """Bytes of ``obj`` (the stored shape, ``kind``/``apiVersion`` included)."""
        ...

    def decode(self, value: bytes) -> Obj:
        """The stored shape in ``value``, whichever format wrote it (a fresh dict)."""
        ...


class _Loader(yaml.SafeLoader):
    """YAML 1.1 without timestamps: a time stays the string kube-apiserver wrote
    (sigs.k8s.io/yaml converts YAML to JSON, where a time is a string)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


class ProtobufSerializer:
    """The ``k8s\\x00`` envelope around the object's protobuf message, the bytes
    kube-apiserver stores (``pkg/runtime/serializer/protobuf/protobuf.go``; the message and
    Go's emission rules are :mod:`apiserver.protobuf.codec`'s). The envelope's typeMeta is
    the stored shape's ``apiVersion``/``kind``; they pick the message, and a kind without one
    is a clean error.
    """

    media_type = PROTOBUF
    available = True

    def encode(self, obj: Obj) -> bytes:
        api_version, kind = obj.get("apiVersion") or "", obj.get("kind") or ""
        message = pbcodec.message_for(api_version, kind)
        if message is None:
            raise StorageCodecError(f"no protobuf message for {api_version} {kind}")
        return pbcodec.wrap(api_version, kind, pbcodec.encode(message, obj))

    def decode(self, value: bytes) -> Obj:
        return decode_any(value)

    @staticmethod
    def decode_envelope(value: bytes) -> Obj:
        """The stored shape in an envelope (``value`` starts ``k8s\\x00``)."""
        try:
            api_version, kind, raw = pbcodec.unwrap(value)
            message = pbcodec.message_for(api_version, kind)
            if message is None:
                raise StorageCodecError(
                    f"stored object is protobuf of an unknown type: {api_version} {kind}"
                )
            fields = pbcodec.decode(message, raw)
        except pbcodec.ProtoError as error:
            raise StorageCodecError(str(error)) from None
        return {"kind": kind, "apiVersion": api_version, **fields}


PROTOBUF_SERIALIZER = ProtobufSerializer()


def decode_any(value: bytes) -> Obj:
    """The stored shape of ``value``, recognised by content (storage_codec.go)."""
    first = value[:1]
    if first == b"{":
        obj = orjson.loads(value)
    elif value[:4] == PROTOBUF_MAGIC:
        return ProtobufSerializer.decode_envelope(value)
    elif value[:8] == ENCRYPTED_PREFIX:
        raise StorageCodecError("stored object is encrypted (k8s:enc:), which is not supported")
    else:
        try:
            obj = yamlguard.load(value, _Loader)
        except yaml.YAMLError as error:
            raise StorageCodecError(
                f"stored object is not JSON, YAML or protobuf: {error}"
            ) from None
    if not isinstance(obj, dict):
        raise StorageCodecError("stored object is not a JSON/YAML object")
    return obj


class JsonSerializer:
    """Compact JSON and a newline, as Go's ``json.Encoder`` writes it into etcd."""

    media_type = JSON

    def encode(self, obj: Obj) -> bytes:
        return orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE)

    def decode(self, value: bytes) -> Obj:
        return decode_any(value)


class YamlSerializer:
    """YAML in the object's key order (sigs.k8s.io/yaml from the JSON).

    Non-ASCII text is written escaped: PyYAML writes some characters raw that a reader
    takes as line breaks (U+0085, U+2028), which would change the stored string."""

    media_type = YAML

    def encode(self, obj: Obj) -> bytes:
        return yaml.safe_dump(obj, sort_keys=False, allow_unicode=False).encode()

    def decode(self, value: bytes) -> Obj:
        return decode_any(value)


JSON_SERIALIZER = JsonSerializer()
YAML_SERIALIZER = YamlSerializer()


def serializer_for(media_type: str) -> StorageSerializer:
    """The serializer ``--storage-media-type`` names."""
    if media_type == YAML:
        return YAML_SERIALIZER
    if media_type == PROTOBUF and PROTOBUF_SERIALIZER.available:
        return PROTOBUF_SERIALIZER
    return JSON_SERIALIZER


__all__ = [
    "JSON",
    "MEDIA_TYPES",
    "PROTOBUF",
    "YAML",
    "JsonSerializer",
    "ProtobufSerializer",
    "StorageCodecError",
    "StorageSerializer",
    "YamlSerializer",
    "decode_any",
    "serializer_for",
]
