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
    """The ``k8s\\x00`` envelope around the object's protobuf message.

    Not implemented in this module yet: encoding and decoding raise
    :class:`StorageCodecError`. The protobuf codec plugs in here (``encode``/``decode``
    of the stored shape); until then :func:`serializer_for` writes JSON for this media type.
    """

    media_type = PROTOBUF
    available = False

    def encode(self, obj: Obj) -> bytes:
        raise StorageCodecError(f"{PROTOBUF} storage encoding is not available")

    def decode(self, value: bytes) -> Obj:
        raise StorageCodecError(
            "stored object is protobuf (k8s\\x00 envelope), which this server cannot decode yet"
        )


PROTOBUF_SERIALIZER = ProtobufSerializer()


def decode_any(value: bytes) -> Obj:
    """The stored shape of ``value``, recognised by content (storage_codec.go)."""
    first = value[:1]
    if first == b"{":
        obj = orjson.loads(value)
    elif value[:4] == PROTOBUF_MAGIC:
        return PROTOBUF_SERIALIZER.decode(value)
    elif value[:8] == ENCRYPTED_PREFIX:
        raise StorageCodecError("stored object is encrypted (k8s:enc:), which is not supported")
    else:
        try:
            obj = yaml.load(value, Loader=_Loader)
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
    """The serializer ``--storage-media-type`` names. Protobuf falls back to JSON while
    :class:`ProtobufSerializer` is not available (the start-up warning says so)."""
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
