"""The Swagger 2.0 document in gnostic's protobuf form (``openapi_v2.Document``).

kube-openapi answers ``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``
(what client-go's ``OpenAPISchema()`` and therefore kubectl's v2-based validation and
``kubectl explain --output=plaintext-openapiv2`` ask for) with ``proto.Marshal`` of the
document gnostic parses out of the JSON (pkg/handler/handler.go ``ToProtoBinary``). There is no
Python gnostic, and the message set we need is small and fixed, so this module writes the
protobuf wire format by hand, field numbers as in gnostic's openapiv2/OpenAPIv2.proto.

How gnostic maps JSON to messages, as reproduced here: maps become repeated ``Named*``
entries in document order; ``x-`` keys become ``vendor_extension`` entries whose value is an
``Any`` holding the YAML text of the value; ``default``/``example``/``enum`` values are ``Any``
too; ``type`` is a ``TypeItem`` list; ``items`` an ``ItemsItem`` list; a parameter is a body
parameter or, by ``in``, a query/path/header/formData sub-schema. proto3 omits empty scalars.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from typing import Any

import yaml

Encoder = Callable[[Any], bytes]


# --- wire format -------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _tag(number: int, wire_type: int) -> bytes:
    return _varint(number << 3 | wire_type)


def _bytes(number: int, payload: bytes) -> bytes:
    return _tag(number, 2) + _varint(len(payload)) + payload


def _string(number: int, value: Any) -> bytes:
    if not isinstance(value, str) or value == "":
        return b""
    return _bytes(number, value.encode())


def _strings(number: int, values: Any) -> bytes:
    if isinstance(values, str):
        values = [values]
    return b"".join(_bytes(number, v.encode()) for v in values or () if isinstance(v, str))


def _bool(number: int, value: Any) -> bytes:
    return _tag(number, 0) + b"\x01" if value is True else b""


def _int64(number: int, value: Any) -> bytes:
    if not isinstance(value, int) or isinstance(value, bool) or value == 0:
        return b""
    return _tag(number, 0) + _varint(value)


def _double(number: int, value: Any) -> bytes:
    if not isinstance(value, int | float) or isinstance(value, bool) or value == 0:
        return b""
    return _tag(number, 1) + struct.pack("<d", float(value))


def _message(number: int, payload: bytes) -> bytes:
    return _bytes(number, payload)


# --- gnostic building blocks -------------------------------------------------------------------


def _yaml_text(value: Any) -> str:
    text: str = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, allow_unicode=True)
    return text.removesuffix("...\n")


def _any(value: Any) -> bytes:
    """``Any``: only the ``yaml`` field (2) is used for JSON values."""
    return _string(2, _yaml_text(value))


def _named(name: str, value: bytes) -> bytes:
    return _string(1, name) + _message(2, value)


def _vendor(number: int, mapping: dict[str, Any]) -> bytes:
    return b"".join(
        _message(number, _named(key, _any(value)))
        for key, value in mapping.items()
        if key.startswith("x-")
    )


def _named_map(number: int, mapping: dict[str, Any], encode: Encoder) -> bytes:
    return b"".join(_message(number, _named(key, encode(value))) for key, value in mapping.items())


def _repeated(number: int, values: Iterable[Any], encode: Encoder) -> bytes:
    return b"".join(_message(number, encode(value)) for value in values)


# --- messages ----------------------------------------------------------------------------------


def _schema(schema: dict[str, Any]) -> bytes:
    out = [
        _string(1, schema.get("$ref")),
        _string(2, schema.get("format")),
        _string(3, schema.get("title")),
        _string(4, schema.get("description")),
    ]
    if "default" in schema:
        out.append(_message(5, _any(schema["default"])))
    out += [
        _double(6, schema.get("multipleOf")),
        _double(7, schema.get("maximum")),
        _bool(8, schema.get("exclusiveMaximum")),
        _double(9, schema.get("minimum")),
        _bool(10, schema.get("exclusiveMinimum")),
        _int64(11, schema.get("maxLength")),
        _int64(12, schema.get("minLength")),
        _string(13, schema.get("pattern")),
        _int64(14, schema.get("maxItems")),
        _int64(15, schema.get("minItems")),
        _bool(16, schema.get("uniqueItems")),
        _int64(17, schema.get("maxProperties")),
        _int64(18, schema.get("minProperties")),
        _strings(19, schema.get("required")),
        _repeated(20, schema.get("enum", ()), _any),
    ]
    additional = schema.get("additionalProperties")
    if isinstance(additional, bool):
        out.append(_message(21, _bool(2, additional) if additional else _tag(2, 0) + b"\x00"))
    elif isinstance(additional, dict):
        out.append(_message(21, _message(1, _schema(additional))))
    if "type" in schema:
        out.append(_message(22, _strings(1, schema["type"])))
    items = schema.get("items")
    if isinstance(items, dict):
        items = [items]
    if isinstance(items, list):
        out.append(_message(23, _repeated(1, items, _schema)))
    out.append(_repeated(24, schema.get("allOf", ()), _schema))
    if "properties" in schema:
        out.append(_message(25, _named_map(1, schema["properties"], _schema)))
    out += [
        _string(26, schema.get("discriminator")),
        _bool(27, schema.get("readOnly")),
    ]
    if "example" in schema:
        out.append(_message(30, _any(schema["example"])))
    out.append(_vendor(31, schema))
    return b"".join(out)


_SUB_SCHEMA = {"header": 1, "formData": 2, "query": 3, "path": 4}


def _non_body_parameter(parameter: dict[str, Any]) -> bytes:
    where = parameter.get("in", "")
    # Query and formData carry allowEmptyValue (5), shifting every later field by one.
    shift = 1 if where in ("query", "formData") else 0
    out = [
        _bool(1, parameter.get("required")),
        _string(2, where),
        _string(3, parameter.get("description")),
        _string(4, parameter.get("name")),
    ]
    if shift:
        out.append(_bool(5, parameter.get("allowEmptyValue")))
    out += [
        _string(5 + shift, parameter.get("type")),
        _string(6 + shift, parameter.get("format")),
        _string(8 + shift, parameter.get("collectionFormat")),
    ]
    if "default" in parameter:
        out.append(_message(9 + shift, _any(parameter["default"])))
    out += [
        _double(10 + shift, parameter.get("maximum")),
        _bool(11 + shift, parameter.get("exclusiveMaximum")),
        _double(12 + shift, parameter.get("minimum")),
        _bool(13 + shift, parameter.get("exclusiveMinimum")),
        _int64(14 + shift, parameter.get("maxLength")),
        _int64(15 + shift, parameter.get("minLength")),
        _string(16 + shift, parameter.get("pattern")),
        _int64(17 + shift, parameter.get("maxItems")),
        _int64(18 + shift, parameter.get("minItems")),
        _bool(19 + shift, parameter.get("uniqueItems")),
        _repeated(20 + shift, parameter.get("enum", ()), _any),
        _double(21 + shift, parameter.get("multipleOf")),
        _vendor(22 + shift, parameter),
    ]
    return _message(_SUB_SCHEMA.get(where, 3), b"".join(out))


def _parameters_item(parameter: dict[str, Any]) -> bytes:
    if "$ref" in parameter:
        reference = _string(1, parameter["$ref"]) + _string(2, parameter.get("description"))
        return _message(2, reference)
    if parameter.get("in") == "body":
        body = b"".join(
            [
                _string(1, parameter.get("description")),
                _string(2, parameter.get("name")),
                _string(3, "body"),
                _bool(4, parameter.get("required")),
                _message(5, _schema(parameter.get("schema", {}))),
                _vendor(6, parameter),
            ]
        )
        return _message(1, _message(1, body))
    return _message(1, _message(2, _non_body_parameter(parameter)))


def _response(response: dict[str, Any]) -> bytes:
    out = [_string(1, response.get("description"))]
    if "schema" in response:
        out.append(_message(2, _message(1, _schema(response["schema"]))))
    out.append(_vendor(5, response))
    return b"".join(out)


def _responses(responses: dict[str, Any]) -> bytes:
    codes = {k: v for k, v in responses.items() if not k.startswith("x-")}
    return _named_map(1, codes, lambda r: _message(1, _response(r))) + _vendor(2, responses)


def _operation(operation: dict[str, Any]) -> bytes:
    return b"".join(
        [
            _strings(1, operation.get("tags")),
            _string(2, operation.get("summary")),
            _string(3, operation.get("description")),
            _string(5, operation.get("operationId")),
            _strings(6, operation.get("produces")),
            _strings(7, operation.get("consumes")),
            _repeated(8, operation.get("parameters", ()), _parameters_item),
            _message(9, _responses(operation.get("responses", {}))),
            _strings(10, operation.get("schemes")),
            _bool(11, operation.get("deprecated")),
            _vendor(13, operation),
        ]
    )


_METHOD_FIELDS = {"get": 2, "put": 3, "post": 4, "delete": 5, "options": 6, "head": 7, "patch": 8}


def _path_item(item: dict[str, Any]) -> bytes:
    out = [_string(1, item.get("$ref"))]
    for key, number in _METHOD_FIELDS.items():
        if key in item:
            out.append(_message(number, _operation(item[key])))
    out.append(_repeated(9, item.get("parameters", ()), _parameters_item))
    out.append(_vendor(10, item))
    return b"".join(out)


def _security_definition(definition: dict[str, Any]) -> bytes:
    kind = definition.get("type")
    if kind == "apiKey":
        fields = [
            _string(1, kind),
            _string(2, definition.get("name")),
            _string(3, definition.get("in")),
            _string(4, definition.get("description")),
            _vendor(5, definition),
        ]
        return _message(2, b"".join(fields))
    basic = _string(1, kind) + _string(2, definition.get("description"))
    return _message(1, basic + _vendor(3, definition))


def encode_document(document: dict[str, Any]) -> bytes:
    """``proto.Marshal`` of the gnostic ``Document`` for a Swagger 2.0 JSON document."""
    info = document.get("info", {})
    info_bytes = _string(1, info.get("title")) + _string(2, info.get("version"))
    info_bytes += _string(3, info.get("description")) + _vendor(7, info)
    paths = document.get("paths", {})
    paths_bytes = _vendor(1, paths) + _named_map(
        2, {k: v for k, v in paths.items() if not k.startswith("x-")}, _path_item
    )
    out = [
        _string(1, document.get("swagger")),
        _message(2, info_bytes),
        _string(3, document.get("host")),
        _string(4, document.get("basePath")),
        _strings(5, document.get("schemes")),
        _strings(6, document.get("consumes")),
        _strings(7, document.get("produces")),
        _message(8, paths_bytes),
    ]
    if "definitions" in document:
        out.append(_message(9, _named_map(1, document["definitions"], _schema)))
    for requirement in document.get("security", ()):
        entries = _named_map(1, requirement, lambda scopes: _strings(1, scopes))
        out.append(_message(12, entries))
    if "securityDefinitions" in document:
        out.append(
            _message(13, _named_map(1, document["securityDefinitions"], _security_definition))
        )
    out.append(_vendor(16, document))
    return b"".join(out)
