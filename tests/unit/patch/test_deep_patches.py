"""Bodies and patches nested deep (issue 17; docs/hostile-input.md): a value nested up to
Go's 10,000 levels gets the answer a shallow one gets (dropped with ``unknown field``, or a
type error), and one level more gets Go's decoder error; never a RecursionError."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.api.events.rest import decode_document
from apiserver.api.events.schema import EVENT_V1
from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.patch import Patcher, strict_errors
from apiserver.apimachinery.request_options import parse_delete_options

# Depth of the whole document: Go refuses more than 10,000 containers in all.
DEPTHS = [999, 1025, 5000, 10000]

CURRENT: dict[str, Any] = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "target", "namespace": "default"},
    "note": "n",
    "reason": "r",
}
BODY = '{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"name":"d"},"reason":"r"'


def nested(depth: int) -> str:
    return '{"a":' * depth + '"x"' + "}" * depth


def patch_body(patch_type: str, field: str, depth: int) -> bytes:
    """A patch whose whole document nests ``depth`` levels, the deep value at ``field``."""
    if patch_type == "json":
        # [ { "value": ... } ]: two levels above the value.
        return f'[{{"op":"add","path":"/{field}","value":{nested(depth - 2)}}}]'.encode()
    return f'{{"{field}":{nested(depth - 1)}}}'.encode()


def patch(patch_type: str, raw: bytes, validation: str = "Warn") -> Patcher:
    media = {
        "json": "application/json-patch+json",
        "merge": "application/merge-patch+json",
        "strategic": "application/strategic-merge-patch+json",
        "apply": "application/apply-patch+yaml",
    }[patch_type]
    return Patcher(
        media,
        raw,
        manager="m",
        api_version="events.k8s.io/v1",
        validation=validation,
        schema=EVENT_V1,
    )


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("patch_type", ["json", "merge", "strategic"])
def test_deep_unknown_field_is_dropped_with_a_warning(patch_type: str, depth: int) -> None:
    patcher = patch(patch_type, patch_body(patch_type, "extra", depth))
    result = patcher.apply(CURRENT, "2026-01-01T00:00:00Z")
    assert patcher.warnings == ['unknown field "extra"']
    assert result["note"] == "n"


@pytest.mark.parametrize("depth", [1025, 5000])
@pytest.mark.parametrize("patch_type", ["json", "merge", "strategic"])
def test_deep_unknown_field_under_strict_is_the_422(patch_type: str, depth: int) -> None:
    patcher = patch(patch_type, patch_body(patch_type, "extra", depth), "Strict")
    with pytest.raises(StatusError) as caught:
        patcher.apply(CURRENT, "2026-01-01T00:00:00Z")
    assert caught.value.code == 422
    assert caught.value.message.endswith('strict decoding error: unknown field "extra"')


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("patch_type", ["json", "merge", "strategic"])
def test_deep_value_of_a_typed_field_is_patched_in(patch_type: str, depth: int) -> None:
    # The typed decode of the result refuses it afterwards (the resource's type error).
    result = patch(patch_type, patch_body(patch_type, "note", depth)).apply(
        CURRENT, "2026-01-01T00:00:00Z"
    )
    assert isinstance(result["note"], dict)


@pytest.mark.parametrize("depth", [10001, 20000])
@pytest.mark.parametrize("patch_type", ["json", "merge", "strategic"])
def test_patch_past_gos_limit_is_its_decoder_error(patch_type: str, depth: int) -> None:
    with pytest.raises(StatusError) as caught:
        patch(patch_type, patch_body(patch_type, "note", depth)).apply(CURRENT, "now")
    assert caught.value.code == 400
    assert caught.value.message.endswith("invalid character '{' exceeded max depth")


@pytest.mark.parametrize("depth", [999, 5000, 10000])
def test_deep_apply_patch_is_refused_by_the_type_as_a_shallow_one(depth: int) -> None:
    head = "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: target\n"
    # One block level for the top mapping, depth - 1 flow levels.
    raw = (head + "extra: " + nested(depth - 1) + "\n").encode()
    with pytest.raises(StatusError) as caught:
        patch("apply", raw).apply(CURRENT, "2026-01-01T00:00:00Z")
    assert caught.value.message.endswith(".extra: field not declared in schema")


def test_apply_patch_past_the_json_limit_is_sigs_yamls_error() -> None:
    head = "apiVersion: events.k8s.io/v1\nkind: Event\nmetadata:\n  name: target\n"
    raw = (head + "extra: " + nested(10000) + "\n").encode()
    with pytest.raises(StatusError) as caught:
        patch("apply", raw).apply(CURRENT, "now")
    assert caught.value.message == (
        "error decoding YAML: error unmarshaling JSON: while decoding JSON: invalid character "
        "'{' exceeded max depth"
    )
    raw = (head + "extra: " + nested(10001) + "\n").encode()
    with pytest.raises(StatusError) as caught:
        patch("apply", raw).apply(CURRENT, "now")
    assert caught.value.message == (
        "error decoding YAML: error converting YAML to JSON: yaml: line 5: exceeded max depth "
        "of 10000"
    )


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_deep_create_body_decodes_with_the_unknown_field_warning(fmt: str, depth: int) -> None:
    raw = (BODY + ',"extra":' + nested(depth - 1) + "}").encode()
    obj = decode_document(raw, fmt)
    assert obj["reason"] == "r"
    assert strict_errors(raw, fmt, EVENT_V1, decoded=obj) == ['unknown field "extra"']


def test_create_body_past_gos_limit_is_transform_decode_errors_answer() -> None:
    raw = (BODY + ',"extra":' + nested(10000) + "}").encode()
    with pytest.raises(StatusError) as caught:
        decode_document(raw, "json")
    assert caught.value.code == 400
    assert caught.value.message == (
        "the object provided is unrecognized (must be of type Event): couldn't get "
        "version/kind; json parse error: invalid character '{' exceeded max depth "
        '({"apiVersion":"events.k8s.io/v ...)'
    )
    with pytest.raises(StatusError) as caught:
        decode_document(raw, "yaml")
    assert caught.value.message == (
        "the object provided is unrecognized (must be of type Event): error converting YAML "
        'to JSON: yaml: exceeded max depth of 10000 ({"apiVersion":"events.k8s.io/v ...)'
    )


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("content_type", ["json", "yaml"])
def test_deep_delete_options_body_is_read_as_go_reads_it(content_type: str, depth: int) -> None:
    body = (
        '{"kind":"DeleteOptions","apiVersion":"v1","x":' + nested(depth - 1) + ',"dryRun":["All"]}'
    ).encode()
    assert parse_delete_options({}, body, content_type).dry_run == ("All",)


def test_delete_options_past_gos_limit_is_the_decoders_500() -> None:
    # kube-apiserver answers a DeleteOptions decoding failure 500 with an empty reason.
    body = ('{"kind":"DeleteOptions","x":' + nested(10000) + "}").encode()
    with pytest.raises(StatusError) as caught:
        parse_delete_options({}, body, "json")
    assert (caught.value.code, caught.value.message) == (
        500,
        "couldn't get version/kind; json parse error: invalid character '{' exceeded max depth",
    )
