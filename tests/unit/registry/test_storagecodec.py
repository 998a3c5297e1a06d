"""Stored bytes: every format is read whatever --storage-media-type writes."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from apiserver.apimachinery import errors
from apiserver.registry import storagecodec as sc
from apiserver.registry.store import Registry
from apiserver.storage.interface import KeyValue
from apiserver.storage.memory import MemoryStore


def test_serializer_for_media_types() -> None:
    assert sc.serializer_for(sc.JSON).media_type == sc.JSON
    assert sc.serializer_for(sc.YAML).media_type == sc.YAML
    expected = sc.PROTOBUF if sc.PROTOBUF_SERIALIZER.available else sc.JSON
    assert sc.serializer_for(sc.PROTOBUF).media_type == expected


def test_decode_recognises_json_and_yaml() -> None:
    assert sc.decode_any(b'{"kind":"Event"}\n') == {"kind": "Event"}
    assert sc.decode_any(b"kind: Event\nt: 2024-01-01T00:00:00Z\n") == {
        "kind": "Event",
        "t": "2024-01-01T00:00:00Z",
    }


def test_encrypted_and_garbage_are_clean_errors() -> None:
    with pytest.raises(sc.StorageCodecError, match="encrypted"):
        sc.decode_any(b"k8s:enc:aescbc:v1:key:xxxx")
    with pytest.raises(sc.StorageCodecError):
        sc.decode_any(b"- a list\n")
    with pytest.raises(sc.StorageCodecError):
        sc.decode_any(b"a: [\n")


def test_protobuf_hook() -> None:
    if sc.PROTOBUF_SERIALIZER.available:
        pytest.skip("the protobuf serializer is plugged in")
    with pytest.raises(sc.StorageCodecError, match="protobuf"):
        sc.decode_any(b"k8s\x00\x0a\x00")


def test_registry_writes_the_chosen_format_and_reads_any() -> None:
    gr = errors.GroupResource("", "things")
    store = MemoryStore(Clock())
    json_registry = Registry(store, group_resource=gr, storage_kind="Thing")
    yaml_registry = Registry(
        store,
        group_resource=gr,
        storage_kind="Thing",
        media_type=sc.YAML,
    )
    obj = {"metadata": {"name": "a", "resourceVersion": "3"}, "spec": {"x": 1}}
    as_json = json_registry.encode(obj)
    as_yaml = yaml_registry.encode(obj)
    assert as_json == b'{"kind":"Thing","apiVersion":"v1","metadata":{"name":"a"},"spec":{"x":1}}\n'
    assert as_yaml.startswith(b"kind: Thing\n")
    for registry in (json_registry, yaml_registry):
        for data in (as_json, as_yaml):
            got = registry.decode(KeyValue(b"/k", data, 1, 5))
            assert got == {"metadata": {"name": "a", "resourceVersion": "5"}, "spec": {"x": 1}}


def test_undecodable_value_is_a_500_naming_the_key() -> None:
    registry = Registry(MemoryStore(Clock()), group_resource=errors.GroupResource("", "things"))
    with pytest.raises(errors.StatusError) as info:
        registry.decode(KeyValue(b"/registry/things/ns/a", b"k8s:enc:aescbc:v1:k:xx", 1, 2))
    assert info.value.code == 500
    assert "/registry/things/ns/a" in info.value.message
