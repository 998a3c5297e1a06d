"""The pprof ``profile.proto`` message (package ``perftools.profiles``), and a builder.

``go tool pprof``, speedscope and every other pprof reader take this message, gzip-compressed
(github.com/google/pprof ``proto/profile.proto``). Its descriptor is declared here in Python
(``descriptor_pb2``) and turned into message classes by the ``protobuf`` package at import,
so no generated module and no ``protoc`` are needed; the field numbers are the upstream ones.
Why not a pprof package from PyPI: the ones there wrap their own samplers (and native code),
while the encoding is these eight small messages.
"""

from __future__ import annotations

import gzip
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_T = descriptor_pb2.FieldDescriptorProto
_REPEATED = _T.LABEL_REPEATED
_OPTIONAL = _T.LABEL_OPTIONAL

#: message -> (field, number, type, label, message type name or "").
_MESSAGES: dict[str, list[tuple[str, int, int, int, str]]] = {
    "Profile": [
        ("sample_type", 1, _T.TYPE_MESSAGE, _REPEATED, "ValueType"),
        ("sample", 2, _T.TYPE_MESSAGE, _REPEATED, "Sample"),
        ("mapping", 3, _T.TYPE_MESSAGE, _REPEATED, "Mapping"),
        ("location", 4, _T.TYPE_MESSAGE, _REPEATED, "Location"),
        ("function", 5, _T.TYPE_MESSAGE, _REPEATED, "Function"),
        ("string_table", 6, _T.TYPE_STRING, _REPEATED, ""),
        ("drop_frames", 7, _T.TYPE_INT64, _OPTIONAL, ""),
        ("keep_frames", 8, _T.TYPE_INT64, _OPTIONAL, ""),
        ("time_nanos", 9, _T.TYPE_INT64, _OPTIONAL, ""),
        ("duration_nanos", 10, _T.TYPE_INT64, _OPTIONAL, ""),
        ("period_type", 11, _T.TYPE_MESSAGE, _OPTIONAL, "ValueType"),
        ("period", 12, _T.TYPE_INT64, _OPTIONAL, ""),
        ("comment", 13, _T.TYPE_INT64, _REPEATED, ""),
        ("default_sample_type", 14, _T.TYPE_INT64, _OPTIONAL, ""),
    ],
    "ValueType": [
        ("type", 1, _T.TYPE_INT64, _OPTIONAL, ""),
        ("unit", 2, _T.TYPE_INT64, _OPTIONAL, ""),
    ],
    "Sample": [
        ("location_id", 1, _T.TYPE_UINT64, _REPEATED, ""),
        ("value", 2, _T.TYPE_INT64, _REPEATED, ""),
        ("label", 3, _T.TYPE_MESSAGE, _REPEATED, "Label"),
    ],
    "Label": [
        ("key", 1, _T.TYPE_INT64, _OPTIONAL, ""),
        ("str", 2, _T.TYPE_INT64, _OPTIONAL, ""),
        ("num", 3, _T.TYPE_INT64, _OPTIONAL, ""),
        ("num_unit", 4, _T.TYPE_INT64, _OPTIONAL, ""),
    ],
    "Mapping": [
        ("id", 1, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("memory_start", 2, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("memory_limit", 3, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("file_offset", 4, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("filename", 5, _T.TYPE_INT64, _OPTIONAL, ""),
        ("build_id", 6, _T.TYPE_INT64, _OPTIONAL, ""),
        ("has_functions", 7, _T.TYPE_BOOL, _OPTIONAL, ""),
        ("has_filenames", 8, _T.TYPE_BOOL, _OPTIONAL, ""),
        ("has_line_numbers", 9, _T.TYPE_BOOL, _OPTIONAL, ""),
        ("has_inline_frames", 10, _T.TYPE_BOOL, _OPTIONAL, ""),
    ],
    "Location": [
        ("id", 1, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("mapping_id", 2, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("address", 3, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("line", 4, _T.TYPE_MESSAGE, _REPEATED, "Line"),
        ("is_folded", 5, _T.TYPE_BOOL, _OPTIONAL, ""),
    ],
    "Line": [
        ("function_id", 1, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("line", 2, _T.TYPE_INT64, _OPTIONAL, ""),
        ("column", 3, _T.TYPE_INT64, _OPTIONAL, ""),
    ],
    "Function": [
        ("id", 1, _T.TYPE_UINT64, _OPTIONAL, ""),
        ("name", 2, _T.TYPE_INT64, _OPTIONAL, ""),
        ("system_name", 3, _T.TYPE_INT64, _OPTIONAL, ""),
        ("filename", 4, _T.TYPE_INT64, _OPTIONAL, ""),
        ("start_line", 5, _T.TYPE_INT64, _OPTIONAL, ""),
    ],
}


def _build() -> dict[str, Any]:
    file = descriptor_pb2.FileDescriptorProto(
        name="perftools/profiles/profile.proto", package="perftools.profiles", syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = file.message_type.add(name=name)
        for field, number, type_, label, type_name in fields:
            entry = message.field.add(name=field, number=number, type=type_, label=label)
            if type_name:
                entry.type_name = f".perftools.profiles.{type_name}"
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {
        name: message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"perftools.profiles.{name}")
        )
        for name in _MESSAGES
    }


CLASSES = _build()
Profile: Any = CLASSES["Profile"]


class ProfileBuilder:
    """Interns strings, functions and locations (one location per (function, line), as a
    Python frame has no address) and adds samples; :meth:`encode` gives the gzip bytes."""

    def __init__(
        self,
        sample_types: list[tuple[str, str]],
        period_type: tuple[str, str] | None = None,
        period: int = 0,
    ) -> None:
        self.profile = Profile()
        self._strings: dict[str, int] = {}
        self._functions: dict[tuple[str, str, int], int] = {}
        self._locations: dict[tuple[int, int], int] = {}
        self._string("")
        for type_, unit in sample_types:
            self.profile.sample_type.add(type=self._string(type_), unit=self._string(unit))
        if period_type is not None:
            self.profile.period_type.type = self._string(period_type[0])
            self.profile.period_type.unit = self._string(period_type[1])
            self.profile.period = period
        mapping = self.profile.mapping.add(id=1, filename=self._string("python"))
        mapping.has_functions = mapping.has_filenames = mapping.has_line_numbers = True

    def _string(self, text: str) -> int:
        index = self._strings.get(text)
        if index is None:
            index = self._strings[text] = len(self.profile.string_table)
            self.profile.string_table.append(text)
        return index

    def location(self, name: str, filename: str, first_line: int, line: int) -> int:
        """The id of the location of ``line`` in the function ``name`` of ``filename``."""
        key = (name, filename, first_line)
        function_id = self._functions.get(key)
        if function_id is None:
            function_id = self._functions[key] = len(self._functions) + 1
            self.profile.function.add(
                id=function_id,
                name=self._string(name),
                system_name=self._string(name),
                filename=self._string(filename),
                start_line=first_line,
            )
        location_key = (function_id, line)
        location_id = self._locations.get(location_key)
        if location_id is None:
            location_id = self._locations[location_key] = len(self._locations) + 1
            location = self.profile.location.add(id=location_id, mapping_id=1, address=location_id)
            location.line.add(function_id=function_id, line=line)
        return location_id

    def sample(
        self, locations: list[int], values: list[int], labels: dict[str, str] | None = None
    ) -> None:
        """One sample: its stack, leaf first, and one value per sample type."""
        sample = self.profile.sample.add(location_id=locations, value=values)
        for key, value in (labels or {}).items():
            sample.label.add(key=self._string(key), str=self._string(value))

    def encode(self, time_nanos: int = 0, duration_nanos: int = 0) -> bytes:
        self.profile.time_nanos = time_nanos
        self.profile.duration_nanos = duration_nanos
        return gzip.compress(self.profile.SerializeToString())


def decode(data: bytes) -> Any:
    """A profile from its gzip (or plain) bytes."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    profile = Profile()
    profile.ParseFromString(data)
    return profile
