"""Generated straight-line decoders for the usual Event body, with the unknown-field check.

Why: a create decoded its body twice over: the strict check walked the decoded dicts by
schema for unknown fields (:mod:`apiserver.apimachinery.strict_fast`), then the generic
decoder (:func:`.convert.v1_to_internal`) walked them again through one closure call per
value, reordered every struct and renamed the fields; together about a ninth of a create's
reactor-thread instructions (bench/README.md, "The create path"). The encoders are already
generated as straight-line code (:func:`.convert._generated_encoder`); this does the same for
decoding: one generated function per struct, one ``get`` and a type test per field, writing
the internal form directly in its final order.

It only *accepts* what it can decode exactly as the generic decoder does, and answers None
for anything else, so that every error, and every unusual value, still goes the generic
way and is worded there (Go's ``encoding/json`` texts, ``strict decoding error``). What it
accepts, per field type:

* a string: a ``str`` (an empty one is dropped, as the generic decoder drops zero values);
* an integer: an ``int`` in the type's range, not a ``bool`` (zero dropped);
* a time: a string already in canonical wire form with ASCII digits, clock fields in range
  and a date that exists (which :func:`.convert._canonical_time` returns unchanged; the zero
  time dropped); any other spelling is the generic decoder's;
* ``map[string]string``: an object of strings (copied; empty dropped);
* a struct: an object whose every key is a field this module decodes (written in field
  order, empty ones dropped), a pointer to a struct the same (kept, ``{}`` when empty);
* ``null`` anywhere: the field is left unset, as in the generic decoder.

Fields of other types (booleans, lists, ``FieldsV1``, pointers to scalars: ``finalizers``,
``ownerReferences``, ``managedFields``, ``deletionTimestamp``...) are not decoded here: an
object holding one goes the generic way whole.

The strict check. A struct's accepted keys are only fields that the strict schema of the
served version (:mod:`.schema`) also knows, and a key outside them sends the body the
generic way; so when this answers a decoded object, the body has no unknown field anywhere
the strict walk (:mod:`apiserver.apimachinery.strict`) looks: structs are checked key by
key, maps of strings and scalars hold no struct. Duplicate keys are another matter (the
decoded dicts cannot show them): :func:`apiserver.apimachinery.strict_fast.no_duplicates`
answers that from the raw bytes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from apiserver.api.events import convert
from apiserver.api.events.convert import (
    _F,
    _Int,
    _Map,
    _Ptr,
    _Str,
    _Struct,
    _Time,
)
from apiserver.api.events.schema import EVENT_CORE_V1, EVENT_V1
from apiserver.apimachinery import schema as strict_schema

Obj = dict[str, Any]
FastDecoder = Callable[[Mapping[str, Any]], Obj | None]


#: Times already in canonical wire form, ASCII digits and in-range clock fields; the date is
#: checked apart (:func:`.convert.date_exists`). Any other spelling is the generic decoder's
#: (:func:`.convert._canonical_time`, then Go's parse), which returns these unchanged.
_TIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z")
_MICRO = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]\.[0-9]{6}Z"
)
#: The zero time, which decodes as unset.
_TIME_ZERO = "0001-01-01T00:00:00Z"
_MICRO_ZERO = "0001-01-01T00:00:00.000000Z"


class _Unusual(Exception):
    """A value this module does not decode: the body goes the generic way."""


_UNUSUAL = _Unusual()


class _Generator:
    """Builds the source of one decoder: a function per struct, shared by name."""

    def __init__(self) -> None:
        self.scope: dict[str, Any] = {
            "UNUSUAL": _UNUSUAL,
            "TIME": _TIME.fullmatch,
            "MICRO": _MICRO.fullmatch,
            "DATES": convert._DATES,
            "date_exists": convert.date_exists,
        }
        self.lines: list[str] = []
        self._names: dict[int, str] = {}

    def _decodable(self, typ: Any, strict: Any) -> bool:
        """Whether a field of convert type ``typ`` (strict schema type ``strict``) is decoded
        here; anything else makes its presence send the body the generic way."""
        if isinstance(typ, _Ptr):
            return isinstance(typ.elem, _Struct) and self._decodable(typ.elem, strict)
        if isinstance(typ, _Struct):
            return isinstance(strict, strict_schema.Struct)
        if isinstance(typ, _Map):
            return (
                typ.go_type == "map[string]string"
                and isinstance(strict, strict_schema.Map)
                and strict.values == strict_schema.STRING
            )
        return isinstance(typ, _Str | _Int | _Time) and isinstance(strict, strict_schema.Scalar)

    def struct(self, typ: _Struct, strict: strict_schema.Struct) -> str:
        """The name of the generated function decoding a struct (``{}`` when empty)."""
        name = self._names.get(id(typ))
        if name is not None:
            return name
        name = self._names[id(typ)] = f"struct_{len(self._names)}_{typ.name}"
        fields = self.fields(typ, strict)
        body = [f"def {name}(value):"]
        body += [
            f"    if not isinstance(value, dict) or not value.keys() <= KNOWN_{name}:",
            "        raise UNUSUAL",
            "    get = value.get",
            "    out = {}",
        ]
        for field, strict_type in fields:
            body.extend(self.field(field.name, field.name, field.type, strict_type))
        body.append("    return out")
        self.scope["KNOWN_" + name] = frozenset(f.name for f, _ in fields)
        self.lines.extend(body)
        return name

    def fields(
        self, typ: _Struct, strict: strict_schema.Struct
    ) -> list[tuple[_F, strict_schema.Type]]:
        """The fields of ``typ`` decoded here, with their strict schema types."""
        out = []
        for field in typ.fields:
            known = strict.field(field.name)
            if known is not None and self._decodable(field.type, known.type):
                out.append((field, known.type))
        return out

    def field(
        self, key: str, target: str, typ: Any, strict: Any, always: bool = False
    ) -> list[str]:
        """Statements decoding ``value[key]`` into ``out[target]``; ``always``: a struct
        written as ``{}`` when unset or empty (the internal form's ``metadata``...)."""
        into = f"out[{target!r}]"
        lines = [f"    item = get({key!r})"]
        if isinstance(typ, _Ptr):
            decode = self.struct(typ.elem, strict)
            lines += ["    if item is not None:", f"        {into} = {decode}(item)"]
        elif isinstance(typ, _Struct):
            decode = self.struct(typ, strict)
            if always:
                lines.append(f"    {into} = {{}} if item is None else {decode}(item)")
            else:
                lines += [
                    "    if item is not None:",
                    f"        item = {decode}(item)",
                    "        if item:",
                    f"            {into} = item",
                ]
        elif isinstance(typ, _Str):
            lines += [
                "    if item is not None:",
                "        if not isinstance(item, str):",
                "            raise UNUSUAL",
                "        if item:",
                f"            {into} = item",
            ]
        elif isinstance(typ, _Int):
            limit = 1 << (typ.bits - 1)
            lines += [
                "    if item is not None:",
                f"        if item.__class__ is not int or not {-limit} <= item < {limit}:",
                "            raise UNUSUAL",
                "        if item:",
                f"            {into} = item",
            ]
        elif isinstance(typ, _Time):
            zero = _MICRO_ZERO if typ.micro else _TIME_ZERO
            pattern = "MICRO" if typ.micro else "TIME"
            lines += [
                "    if item is not None:",
                f"        if not isinstance(item, str) or {pattern}(item) is None:",
                "            raise UNUSUAL",
                "        if not DATES.get(item[:10]) and not date_exists(item[:10]):",
                "            raise UNUSUAL",
                f"        if item != {zero!r}:",
                f"            {into} = item",
            ]
        else:  # map[string]string
            lines += [
                "    if item:",
                "        if not isinstance(item, dict):",
                "            raise UNUSUAL",
                "        for text in item.values():",
                "            if not isinstance(text, str):",
                "                raise UNUSUAL",
                f"        {into} = dict(item)",
                "    elif item is not None and item != {}:",
                "        raise UNUSUAL",
            ]
        return lines


def event_decoder(
    typ: _Struct,
    strict: strict_schema.Struct,
    wire_names: Mapping[str, str],
    label: str,
) -> FastDecoder:
    """The fast decoder of a whole Event body of wire type ``typ`` (strict schema
    ``strict``): the internal form (:mod:`.convert`'s), keys in :data:`.convert.INTERNAL_ORDER`,
    each read from the wire field ``wire_names`` gives it, ``metadata``, ``involvedObject`` and
    ``source`` always present; None for a body to decode the generic way. ``kind`` and
    ``apiVersion`` must be strings (checked against the request elsewhere) and are not kept."""
    gen = _Generator()
    wire_fields = {field.name: (field, known) for field, known in gen.fields(typ, strict)}
    top = ["def decode(value):", "    get = value.get", "    out = {}"]
    for key in ("kind", "apiVersion"):
        top += [
            f"    item = get({key!r})",
            "    if item is not None and not isinstance(item, str):",
            "        raise UNUSUAL",
        ]
    for internal_key in convert.INTERNAL_ORDER:
        always = internal_key in _ALWAYS_STRUCTS
        wire = wire_names.get(internal_key)
        if wire is None or wire not in wire_fields:
            if always:
                raise ValueError(f"{label}: {internal_key} is not decodable")
            continue
        field, strict_type = wire_fields[wire]
        top.extend(gen.field(wire, internal_key, field.type, strict_type, always))
    top.append("    return out")
    gen.scope["KNOWN"] = frozenset(wire_fields)
    gen.scope["Unusual"] = _Unusual
    gen.lines += [
        *top,
        "def fast(value):",
        "    if not value.keys() <= KNOWN:",
        "        return None",
        "    try:",
        "        return decode(value)",
        "    except Unusual:",
        "        return None",
    ]
    exec(compile("\n".join(gen.lines) + "\n", f"<{label} fast decoder>", "exec"), gen.scope)
    decoder: FastDecoder = gen.scope["fast"]
    return decoder


#: Internal struct fields present (``{}``) even when unset (:func:`.convert._finish_internal`).
_ALWAYS_STRUCTS = ("metadata", "involvedObject", "source")

#: events.k8s.io/v1 bodies (:func:`.convert.v1_to_internal`).
V1 = event_decoder(convert.V1_EVENT, EVENT_V1, convert.INTERNAL_TO_V1, "events.k8s.io/v1")
#: core v1 bodies (:func:`.convert.core_v1_to_internal`).
CORE_V1 = event_decoder(
    convert.CORE_EVENT,
    EVENT_CORE_V1,
    {key: key for key in convert.INTERNAL_ORDER},
    "v1",
)
