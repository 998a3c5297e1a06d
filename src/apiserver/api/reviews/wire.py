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

from apiserver.apimachinery import errors
from apiserver.apimachinery.negotiation import PROTOBUF, go_parse_media_type, negotiate_body
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
            (yaml.safe_load(raw) if raw.strip() else None) if fmt == "yaml" else orjson.loads(raw)
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


__all__ = ["WIPED", "body_format", "decode", "with_type_meta"]
