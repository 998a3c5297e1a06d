"""``--storage-media-type=application/vnd.kubernetes.protobuf``: the registry stores the bytes
kube-apiserver stores (the envelope around a core/v1 Event, no resourceVersion) and reads
them, and every other format, back."""

from __future__ import annotations

from typing import Any

from tests.unit.protobuf.worked_example import GOLDEN_BYTES as GOLDEN
from tests.unit.protobuf.worked_example import WEB_EVENT
from twisted.internet.task import Clock

from apiserver.api.events import corev1
from apiserver.apimachinery import errors
from apiserver.registry import storagecodec as sc
from apiserver.registry.store import Registry
from apiserver.storage.interface import KeyValue
from apiserver.storage.memory import MemoryStore

#: The worked example as the registry holds it: with its resourceVersion.
INTERNAL: dict[str, Any] = {
    **WEB_EVENT,
    "metadata": {**WEB_EVENT["metadata"], "resourceVersion": "7"},
}


def _registry(media_type: str) -> Registry:
    return Registry(
        MemoryStore(Clock()),
        group_resource=errors.GroupResource("events.k8s.io", "events"),
        storage_kind="Event",
        media_type=media_type,
        conversion=corev1.STORAGE,
    )


def test_protobuf_is_the_serializer_of_its_media_type() -> None:
    assert sc.serializer_for(sc.PROTOBUF).media_type == sc.PROTOBUF


def test_written_bytes_are_kube_apiservers() -> None:
    assert _registry(sc.PROTOBUF).encode(INTERNAL) == GOLDEN


def test_kube_bytes_are_read_whatever_the_flag() -> None:
    expected = {**INTERNAL, "metadata": {**INTERNAL["metadata"], "resourceVersion": "9"}}
    for media_type in (sc.PROTOBUF, sc.JSON, sc.YAML):
        registry = _registry(media_type)
        assert registry.decode(KeyValue(b"/registry/events/default/web.17f0", GOLDEN, 1, 9)) == (
            expected
        )


def test_json_and_yaml_data_read_by_a_protobuf_server() -> None:
    registry = _registry(sc.PROTOBUF)
    for media_type in (sc.JSON, sc.YAML):
        data = _registry(media_type).encode(INTERNAL)
        assert registry.decode(KeyValue(b"/k", data, 1, 7)) == INTERNAL


def test_unknown_protobuf_kinds_are_clean_errors() -> None:
    import pytest

    from apiserver.protobuf import codec

    with pytest.raises(sc.StorageCodecError, match="unknown type: v1 Pod"):
        sc.decode_any(codec.wrap("v1", "Pod", b""))
    with pytest.raises(sc.StorageCodecError, match="unexpected EOF"):
        sc.decode_any(b"k8s\x00\x0a\x09")
