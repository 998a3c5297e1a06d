"""``authentication.k8s.io/v1`` TokenRequest on the wire: decoding, defaulting, validation and
encoding, worded as kube-apiserver words them.

References (Kubernetes 1.35):

- ``k8s.io/api/authentication/v1/types.go``: field names, ``json`` tags (``audiences`` and
  ``boundObjectRef`` have no ``omitempty``, so an unset ref is written ``null``), field order;
  ``pkg/apis/authentication/v1/defaults.go``: ``expirationSeconds`` defaults to 3600.
- ``pkg/apis/authentication/validation/validation.go`` ``ValidateTokenRequest``: 600 s up to
  2^32 s, reported as ``TokenRequest.authentication.k8s.io "" is invalid: ...`` (the
  reference passes an empty name).
- ``k8s.io/apiserver/pkg/endpoints/handlers/create.go`` and ``rest.go``
  (``transformDecodeError``, ``summarizeData``), ``runtime/serializer/json`` (``Interpret``:
  ``couldn't get version/kind; json parse error: ...``; defaults for a missing kind or
  apiVersion), and ``sigs.k8s.io/json`` (case-sensitive field names, the first type error,
  strict ``unknown field``/``duplicate field`` problems sent as warnings unless
  ``fieldValidation=Strict`` makes them a 400).

Type errors are checked by hand against the schema below because the request is never turned
into a Go struct here; only the fields a TokenRequest has are looked at, in document order.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import attrs
import yaml

from apiserver.api.events.schema import OBJECT_META
from apiserver.apimachinery import errors
from apiserver.apimachinery.negotiation import PROTOBUF, go_parse_media_type, negotiate_body
from apiserver.apimachinery.schema import (
    INTEGER,
    STRING,
    TIME,
    Field,
    List,
    Map,
    Scalar,
    Struct,
    Type,
    Untyped,
    go_normalize,
)
from apiserver.apimachinery.strict import find_strict_errors
from apiserver.gocompat import yamlguard
from apiserver.gocompat.jsonscan import go_json_syntax_error
from apiserver.gocompat.jsonvalues import go_json_kind
from apiserver.protobuf import codec

GROUP = "authentication.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "TokenRequest"

#: ``SetDefaults_TokenRequestSpec``.
DEFAULT_EXPIRATION_SECONDS = 60 * 60
#: ``validation.MinTokenAgeSec``.
MIN_TOKEN_AGE_SECONDS = 10 * 60
MAX_TOKEN_AGE_SECONDS = 1 << 32

_SCHEME = "pkg/api/legacyscheme/scheme.go:30"
_FIND_KIND_TYPE = (
    'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
    'Kind string "json:\\"kind,omitempty\\"" }'
)

BOUND_OBJECT_REFERENCE = Struct(
    "BoundObjectReference",
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field("name", STRING),
        Field("uid", STRING),
    ),
)
TOKEN_REQUEST_SPEC = Struct(
    "TokenRequestSpec",
    (
        Field("audiences", List(STRING, "atomic"), omitempty=False),
        Field("expirationSeconds", INTEGER, pointer=True),
        Field("boundObjectRef", BOUND_OBJECT_REFERENCE, omitempty=False, pointer=True),
    ),
)
TOKEN_REQUEST_STATUS = Struct(
    "TokenRequestStatus",
    (Field("token", STRING, omitempty=False), Field("expirationTimestamp", TIME, omitempty=False)),
)
TOKEN_REQUEST = Struct(
    "TokenRequest",
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field("metadata", OBJECT_META),
        Field("spec", TOKEN_REQUEST_SPEC, omitempty=False),
        Field("status", TOKEN_REQUEST_STATUS),
    ),
)
"""``authentication.k8s.io/v1`` TokenRequest, for strict decoding and type checks."""


@attrs.frozen
class Decoded:
    """A decoded request: the object (defaults applied) and the strict-decoding warnings."""

    obj: dict[str, Any]
    warnings: tuple[str, ...] = ()


def summarize(data: bytes, max_length: int = 30) -> str:
    """``summarizeData``: a JSON object's first bytes as text, anything else in hex."""
    if not data:
        return "<empty>"
    if data[:1] == b"{":
        head = data[:max_length].decode("utf-8", "replace")
        return head + " ..." if len(data) > max_length else head
    return data[:max_length].hex() + " ..." if len(data) > max_length else data.hex()


def _unrecognized(error: str, raw: bytes) -> errors.StatusError:
    """``transformDecodeError`` when the body's kind could not be read."""
    return errors.bad_request(
        f"the object provided is unrecognized (must be of type {KIND}): {error} ({summarize(raw)})"
    )


def _cannot_handle(kind: str, version: str, error: str) -> errors.StatusError:
    """``transformDecodeError`` once the body's kind is known."""
    return errors.bad_request(
        f"{kind} in version {errors.go_quote(version)} cannot be handled as a {KIND}: {error}"
    )


def _parse_group_version(text: str) -> tuple[str, str] | None:
    """``schema.ParseGroupVersion``; None for more than one ``/``."""
    if not text or text == "/":
        return "", ""
    if text.count("/") == 0:
        return "", text
    if text.count("/") == 1:
        group, version = text.split("/")
        return group, version
    return None


def _go_type(typ: Type, name: str = "") -> str:
    """The Go type name an ``UnmarshalTypeError`` shows for a field of schema ``typ``."""
    if isinstance(typ, Struct):
        return f"v1.{typ.name}"
    if isinstance(typ, List):
        return "[]" + _go_type(typ.items)
    if isinstance(typ, Map):
        return "map[string]" + _go_type(typ.values)
    if isinstance(typ, Scalar):
        if name == "uid":
            return "types.UID"
        return {"integer": "int64", "boolean": "bool", "number": "float64"}.get(typ.kind, "string")
    return "interface {}"


class _Abort(Exception):
    """A custom ``UnmarshalJSON`` failed: Go stops decoding and returns this error."""


def _type_errors(value: Any, typ: Type, struct: str, path: tuple[str, ...]) -> Iterator[str]:
    """``UnmarshalTypeError`` texts of ``value`` against ``typ``, in document order."""
    if value is None or isinstance(typ, Untyped):
        return
    where = f"Go struct field {struct}.{'.'.join(path)} of type"
    if isinstance(typ, Struct):
        if not isinstance(value, dict):
            yield f"json: cannot unmarshal {go_json_kind(value)} into {where} {_go_type(typ)}"
            return
        for key, item in value.items():
            field = typ.field(key)
            if field is not None:
                yield from _field_errors(item, field, typ.name, (*path, key))
        return
    if isinstance(typ, List):
        if not isinstance(value, list):
            yield f"json: cannot unmarshal {go_json_kind(value)} into {where} {_go_type(typ)}"
            return
        for item in value:
            yield from _type_errors(item, typ.items, struct, path)
        return
    if isinstance(typ, Map):
        if not isinstance(value, dict):
            yield f"json: cannot unmarshal {go_json_kind(value)} into {where} {_go_type(typ)}"
            return
        for item in value.values():
            yield from _type_errors(item, typ.values, struct, path)
        return
    if isinstance(typ, Scalar):
        yield from _scalar_errors(value, typ, where, path[-1] if path else "")


def _scalar_errors(value: Any, typ: Scalar, where: str, name: str) -> Iterator[str]:
    kind = go_json_kind(value)
    if typ.kind == "time":
        if not isinstance(value, str):
            raise _Abort(f"json: cannot unmarshal {kind} into Go value of type string")
        return
    if typ.kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int | float):
            yield f"json: cannot unmarshal {kind} into {where} int64"
        elif isinstance(value, float) or not -(1 << 63) <= value < (1 << 63):
            yield f"json: cannot unmarshal number {json.dumps(value)} into {where} int64"
        return
    if typ.kind == "boolean":
        if not isinstance(value, bool):
            yield f"json: cannot unmarshal {kind} into {where} bool"
        return
    if not isinstance(value, str):
        yield f"json: cannot unmarshal {kind} into {where} {_go_type(typ, name)}"


def _field_errors(value: Any, field: Field, struct: str, path: tuple[str, ...]) -> Iterator[str]:
    if isinstance(field.type, Struct):
        # Errors inside a nested struct name that struct (``TokenRequestSpec.spec.x``).
        if value is not None and not isinstance(value, dict):
            kind = go_json_kind(value)
            yield (
                f"json: cannot unmarshal {kind} into Go struct field {struct}."
                f"{'.'.join(path)} of type {_go_type(field.type)}"
            )
            return
        yield from _type_errors(value, field.type, field.type.name, path)
        return
    yield from _type_errors(value, field.type, struct, path)


def first_type_error(obj: dict[str, Any]) -> str | None:
    """What ``json.Unmarshal`` of ``obj`` into a v1 TokenRequest returns, or None.

    Type mismatches are remembered and decoding goes on, so the earliest one is reported;
    a custom unmarshaller's error (``metav1.Time``) stops everything and wins.
    """
    first: str | None = None
    try:
        for error in _type_errors(
            {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")},
            TOKEN_REQUEST,
            KIND,
            (),
        ):
            if first is None:
                first = error
    except _Abort as abort:
        return str(abort)
    return first


def _load(raw: bytes, fmt: str) -> Any:
    if fmt == "yaml":
        try:
            return yamlguard.load(raw) if raw.strip() else None
        except yaml.YAMLError as error:
            raise _unrecognized(f"error converting YAML to JSON: yaml: {error}", raw) from None
    problem = go_json_syntax_error(raw)
    if problem is not None:
        raise _unrecognized(f"couldn't get version/kind; json parse error: {problem}", raw)
    return json.loads(raw)


def _check_kind(api_version: str, kind: str, raw: bytes) -> None:
    """The body's kind, defaulted as the serializers do, must be authentication.k8s.io/v1
    TokenRequest (``gvkWithDefaults``, then the scheme lookup)."""
    parsed = _parse_group_version(api_version)
    if parsed is None:
        raise _unrecognized(f"unexpected GroupVersion string: {api_version}", raw)
    group, version = parsed
    kind = kind or KIND
    if not version and not group:
        group, version = GROUP, VERSION
    elif not version and group == GROUP:
        version = VERSION
    if (group, version, kind) != (GROUP, VERSION, KIND):
        gv = f"{group}/{version}" if group else version
        raise _cannot_handle(
            kind,
            version,
            f"no kind {errors.go_quote(kind)} is registered for version "
            f"{errors.go_quote(gv)} in scheme {errors.go_quote(_SCHEME)}",
        )


def _decode_protobuf(raw: bytes) -> dict[str, Any]:
    """The ``k8s\\x00`` envelope around a TokenRequest message (what kubectl and client-go
    send), through the server's one protobuf codec; status is dropped (the server sets it)."""
    try:
        api_version, kind, message = codec.unwrap(raw)
    except codec.ProtoError as error:
        raise _unrecognized(str(error), raw) from None
    _check_kind(api_version, kind, raw)
    try:
        obj = codec.decode(codec.TokenRequest, message)
    except codec.ProtoError as error:
        raise _cannot_handle(KIND, VERSION, str(error)) from None
    obj.pop("status", None)
    return obj


def _decode_text(raw: bytes, fmt: str, field_validation: str) -> Decoded:
    value = _load(raw, fmt)
    if value is not None and not isinstance(value, dict):
        raise _unrecognized(
            "couldn't get version/kind; json parse error: json: cannot unmarshal "
            f"{go_json_kind(value)} into Go value of type {_FIND_KIND_TYPE}",
            raw,
        )
    obj: dict[str, Any] = value or {}
    for name in ("apiVersion", "kind"):
        item = obj.get(name)
        if item is not None and not isinstance(item, str):
            raise _unrecognized(
                "couldn't get version/kind; json parse error: json: cannot unmarshal "
                f"{go_json_kind(item)} into Go struct field .{name} of type string",
                raw,
            )
    _check_kind(obj.get("apiVersion") or "", obj.get("kind") or "", raw)
    problem = first_type_error(obj)
    if problem is not None:
        raise _cannot_handle(KIND, VERSION, problem)
    if field_validation == "Ignore":
        return Decoded(obj)
    strict = find_strict_errors(
        raw, TOKEN_REQUEST, content_type="yaml" if fmt == "yaml" else "json"
    )
    if strict and field_validation == "Strict":
        raise _cannot_handle(KIND, VERSION, "strict decoding error: " + ", ".join(strict))
    return Decoded(obj, tuple(strict))


def decode_request(raw: bytes, fmt: str, field_validation: str) -> Decoded:
    """The TokenRequest of a request body, defaulted; a 400 StatusError otherwise.

    ``fmt`` is ``json``, ``yaml`` or ``protobuf`` (see :func:`body_format`);
    ``field_validation`` the effective ``fieldValidation`` (``Ignore``/``Warn``/``Strict``),
    which, as in the reference, has nothing to check in a protobuf body.
    """
    if fmt == "protobuf":
        decoded = Decoded(_decode_protobuf(raw))
    else:
        decoded = _decode_text(raw, fmt, field_validation)
    obj = decoded.obj
    spec = obj.get("spec")
    spec = dict(spec) if isinstance(spec, dict) else {}
    if spec.get("expirationSeconds") is None:
        spec["expirationSeconds"] = DEFAULT_EXPIRATION_SECONDS
    obj = {**obj, "spec": spec}
    if not isinstance(obj.get("metadata"), dict):
        obj["metadata"] = {}
    return Decoded(obj, decoded.warnings)


def body_format(content_type: str | None) -> str:
    """``NegotiateInputSerializer``: ``json``, ``yaml`` or ``protobuf`` (built-in kinds have
    a protobuf serializer); anything else is the handler's 415."""
    if content_type and go_parse_media_type(content_type) == PROTOBUF:
        return "protobuf"
    return negotiate_body(content_type)


def validate(obj: dict[str, Any]) -> None:
    """``ValidateTokenRequest`` (1.35: the expiration bounds), a 422 when it fails."""
    seconds = obj["spec"]["expirationSeconds"]
    errs: list[errors.FieldError] = []
    if seconds < MIN_TOKEN_AGE_SECONDS:
        errs.append(
            errors.invalid(
                "spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"
            )
        )
    if seconds > MAX_TOKEN_AGE_SECONDS:
        errs.append(
            errors.invalid(
                "spec.expirationSeconds",
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            )
        )
    if errs:
        raise errors.invalid_error(KIND, "", errs, group=GROUP)


def encode(
    metadata: dict[str, Any],
    audiences: list[str],
    expiration_seconds: int,
    bound_ref: dict[str, Any] | None,
    token: str,
    expiration_timestamp: str,
) -> dict[str, Any]:
    """The response object, fields in Go's order with Go's ``omitempty`` rules."""
    ref = None
    if bound_ref is not None:
        ref = {k: bound_ref[k] for k in ("kind", "apiVersion", "name", "uid") if bound_ref.get(k)}
    return {
        "kind": KIND,
        "apiVersion": API_VERSION,
        "metadata": go_normalize(metadata, OBJECT_META),
        "spec": {
            "audiences": list(audiences),
            "expirationSeconds": expiration_seconds,
            "boundObjectRef": ref,
        },
        "status": {"token": token, "expirationTimestamp": expiration_timestamp},
    }
