"""The review kinds on the wire: request bodies in, answers out.

Every review is a create-only virtual resource (``AS/pkg/endpoints/handlers/create.go``):
the body may be JSON, YAML or the protobuf envelope (kubectl's typed clients send
protobuf, ``client-go/gentype/type.go`` PrefersProtobuf); its kind is defaulted from the
endpoint when absent and must be the endpoint's otherwise. Every body goes through the one
protobuf codec (:mod:`apiserver.protobuf.codec`) into the canonical dict shape (Go's zero
values absent, fields in the message's order), so a JSON and a protobuf request are handled
alike and a value of the wrong type is the decoder's 400, never a server error.
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml
from google.protobuf.descriptor import FieldDescriptor

from apiserver.api.events.schema import OBJECT_META
from apiserver.apimachinery import errors
from apiserver.apimachinery.negotiation import PROTOBUF, go_parse_media_type, negotiate_body
from apiserver.apimachinery.schema import (
    BOOLEAN,
    INTEGER,
    STRING,
    Field,
    List,
    Map,
    Struct,
    Type,
)
from apiserver.apimachinery.strict import find_strict_errors
from apiserver.gocompat import yamlguard
from apiserver.protobuf import codec

Obj = dict[str, Any]

_SCHEME = "pkg/api/legacyscheme/scheme.go:30"

#: ``WipeObjectMetaSystemFields`` (k8s.io/apiserver ``pkg/registry/rest/meta.go``).
WIPED = ("creationTimestamp", "uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")


def body_format(content_type: str | None) -> str:
    """``json``, ``yaml`` or ``protobuf`` (built-in kinds have a protobuf serializer)."""
    if content_type and go_parse_media_type(content_type) == PROTOBUF:
        return "protobuf"
    return negotiate_body(content_type)


def _summary(raw: bytes) -> str:
    if not raw:
        return "<empty>"
    head = raw[:30]
    text = head.decode("utf-8", "replace") if raw[:1] == b"{" else head.hex()
    return text + " ..." if len(raw) > 30 else text


def _unrecognized(kind: str, error: str, raw: bytes) -> errors.StatusError:
    return errors.bad_request(
        f"the object provided is unrecognized (must be of type {kind}): {error} ({_summary(raw)})"
    )


def _cannot_handle(kind: str, version: str, expected: str, error: str) -> errors.StatusError:
    return errors.bad_request(
        f"{kind} in version {errors.go_quote(version)} cannot be handled as a {expected}: {error}"
    )


def _check_kind(api_version: str, kind: str, group: str, expected: str, raw: bytes) -> None:
    """``gvkWithDefaults`` and the scheme lookup: an empty kind or version is the endpoint's."""
    kind = kind or expected
    if api_version.count("/") > 1:
        raise _unrecognized(expected, f"unexpected GroupVersion string: {api_version}", raw)
    given_group, _, given_version = api_version.rpartition("/")
    if not given_version and not given_group:
        given_group, given_version = group, "v1"
    if (given_group, given_version, kind) != (group, "v1", expected):
        gv = f"{given_group}/{given_version}" if given_group else given_version
        raise _cannot_handle(
            kind,
            given_version,
            expected,
            f"no kind {errors.go_quote(kind)} is registered for version {errors.go_quote(gv)} "
            f"in scheme {errors.go_quote(_SCHEME)}",
        )


_SCHEMAS: dict[str, Struct] = {}


def _field_type(field: Any) -> Type:
    message = field.message_type
    if message is not None and message.GetOptions().map_entry:
        return Map(_field_type(message.fields_by_name["value"]))
    if message is not None:
        element: Type = OBJECT_META if message.name == "ObjectMeta" else schema_of(message)
    elif field.type == FieldDescriptor.TYPE_BOOL:
        element = BOOLEAN
    elif field.type == FieldDescriptor.TYPE_STRING:
        element = STRING
    else:
        element = INTEGER
    if message is not None and message.full_name.endswith(".ExtraValue"):
        return List(STRING)
    return List(element) if field.is_repeated else element


def schema_of(descriptor: Any) -> Struct:
    """The JSON schema of a review message for strict decoding, read off the protobuf
    descriptor (the field names are the JSON names, as in k8s.io/api's generated.proto)."""
    known = _SCHEMAS.get(descriptor.full_name)
    if known is None:
        fields = [Field("kind", STRING), Field("apiVersion", STRING)] if _is_top(descriptor) else []
        fields.extend(Field(f.name, _field_type(f)) for f in descriptor.fields)
        known = _SCHEMAS[descriptor.full_name] = Struct(descriptor.name, tuple(fields))
    return known


def _is_top(descriptor: Any) -> bool:
    return "metadata" in descriptor.fields_by_name


def strict_problems(raw: bytes, fmt: str, group: str, kind: str) -> list[str]:
    """Unknown and duplicate fields of a JSON or YAML body (``fieldValidation``)."""
    message = codec.message_for(f"{group}/v1", kind)
    assert message is not None
    return find_strict_errors(
        raw, schema_of(message.DESCRIPTOR), content_type="yaml" if fmt == "yaml" else "json"
    )


def check_strict(raw: bytes, fmt: str, group: str, kind: str, validation: str) -> list[str]:
    """``fieldValidation``: the warnings to send (``Warn``), or the 400 (``Strict``); nothing
    to check in protobuf or with ``Ignore``."""
    if fmt == "protobuf" or validation == "Ignore":
        return []
    problems = strict_problems(raw, fmt, group, kind)
    if problems and validation == "Strict":
        raise _cannot_handle(kind, "v1", kind, "strict decoding error: " + ", ".join(problems))
    return problems


def decode(raw: bytes, fmt: str, group: str, kind: str) -> Obj:
    """The request object of ``group``/v1 ``kind`` in the canonical shape (no type meta)."""
    message = codec.message_for(f"{group}/v1", kind)
    assert message is not None
    if fmt == "protobuf":
        try:
            api_version, given_kind, data = codec.unwrap(raw)
        except codec.ProtoError as error:
            raise _unrecognized(kind, str(error), raw) from None
        _check_kind(api_version, given_kind, group, kind, raw)
        try:
            return codec.decode(message, data)
        except codec.ProtoError as error:
            raise _cannot_handle(kind, "v1", kind, str(error)) from None
    try:
        value = (
            (yamlguard.load(raw) if raw.strip() else None) if fmt == "yaml" else orjson.loads(raw)
        )
    except (yaml.YAMLError, orjson.JSONDecodeError) as error:
        raise _unrecognized(
            kind, f"couldn't get version/kind; json parse error: {error}", raw
        ) from None
    if not isinstance(value, dict):
        raise _unrecognized(
            kind, "couldn't get version/kind; json parse error: not a JSON object", raw
        )
    api_version, given_kind = value.get("apiVersion") or "", value.get("kind") or ""
    if not isinstance(api_version, str) or not isinstance(given_kind, str):
        raise _unrecognized(
            kind,
            "couldn't get version/kind; json parse error: apiVersion and kind are strings",
            raw,
        )
    _check_kind(api_version, given_kind, group, kind, raw)
    try:
        return codec.from_message(codec.to_message(message, value))
    except Exception as error:  # a value of the wrong type anywhere in the body
        raise _cannot_handle(kind, "v1", kind, f"json: cannot unmarshal: {error}") from None


def with_type_meta(group: str, kind: str, obj: Obj) -> Obj:
    """``obj`` with ``kind`` and ``apiVersion`` first, as Go writes them."""
    out: Obj = {"kind": kind, "apiVersion": f"{group}/v1"}
    out.update(obj)
    return out


__all__ = ["WIPED", "body_format", "check_strict", "decode", "schema_of", "with_type_meta"]
