"""The registry with a value transformer: what reaches the store is sealed, reads open it,
a stale read makes an unchanged update write, unreadable values are the reference's 500s
(k8s.io/apiserver pkg/storage/etcd3/store.go Get, GuaranteedUpdate, processListItem)."""

from __future__ import annotations

import base64
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from apiserver.apimachinery import errors
from apiserver.encryption.config import build, decode
from apiserver.encryption.dynamic import DynamicTransformers
from apiserver.registry.store import Registry
from apiserver.storage.memory import MemoryStore

T = TypeVar("T")
GR = errors.GroupResource("", "events")
KEY_A = base64.b64encode(bytes(range(32))).decode()
KEY_B = base64.b64encode(bytes(range(1, 33))).decode()


def run(coro: Coroutine[Any, Any, T] | Deferred[T]) -> T:
    d = coro if isinstance(coro, Deferred) else Deferred.fromCoroutine(coro)
    results: list[Any] = []
    d.addBoth(results.append)
    assert results, "the memory store answers at once"
    if isinstance(results[0], Exception) or hasattr(results[0], "raiseException"):
        results[0].raiseException()
    return results[0]


def dynamic(providers: str, clock: Clock) -> DynamicTransformers:
    text = (
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
        "resources:\n- resources: [events]\n  providers:\n" + providers
    )
    return DynamicTransformers(build(decode(text.encode()), "h"), clock, reload=True)


def make(providers: str) -> tuple[Registry, MemoryStore, DynamicTransformers, Clock]:
    clock = Clock()
    store = MemoryStore(clock)
    store.start()
    dyn = dynamic(providers, clock)
    registry = Registry(
        store, group_resource=GR, storage_kind="Event", transformer=dyn.for_resource(("", "events"))
    )
    dyn.on_change(registry.forget_decoded)
    return registry, store, dyn, clock


def event(name: str, message: str = "hello") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "message": message}


def test_values_are_sealed_in_the_store_and_opened_on_read() -> None:
    registry, store, _, _ = make(f"  - aesgcm: {{keys: [{{name: k1, secret: {KEY_A}}}]}}\n")
    run(registry.create(event("a")))
    raw = run(store.get(b"/registry/events/ns/a"))
    assert raw.value.startswith(b"k8s:enc:aesgcm:v1:k1:")
    assert b"hello" not in raw.value
    fresh = Registry(
        store, group_resource=GR, storage_kind="Event", transformer=registry._transformer
    )
    assert run(fresh.get("ns", "a"))["message"] == "hello"


def test_rotation_rewrites_unchanged_objects_read_by_an_old_key() -> None:
    registry, store, dyn, _ = make(f"  - aescbc: {{keys: [{{name: old, secret: {KEY_A}}}]}}\n")
    run(registry.create(event("a")))
    before = run(store.get(b"/registry/events/ns/a"))
    assert run(registry.get("ns", "a"))["message"] == "hello"
    # Add a new first key, keep the old one for reading (the reference's rotation step 1-2).
    dyn.set(
        dynamic(
            f"  - aescbc: {{keys: [{{name: new, secret: {KEY_B}}}, "
            f"{{name: old, secret: {KEY_A}}}]}}\n",
            Clock(),
        ).built
    )

    async def same(current: Any) -> Any:
        return current

    _, created = run(registry.guaranteed_update("ns", "a", same))
    assert not created
    after = run(store.get(b"/registry/events/ns/a"))
    assert after.mod_revision > before.mod_revision
    assert after.value.startswith(b"k8s:enc:aescbc:v1:new:")
    # Now current: an unchanged update writes nothing.
    run(registry.guaranteed_update("ns", "a", same))
    assert run(store.get(b"/registry/events/ns/a")).mod_revision == after.mod_revision


def test_unreadable_values_are_500s_get_and_list_worded_as_the_reference() -> None:
    registry, store, _, _ = make(f"  - aesgcm: {{keys: [{{name: k1, secret: {KEY_A}}}]}}\n")
    run(store.create(b"/registry/events/ns/plain", b'{"kind":"Event","apiVersion":"v1"}\n'))
    with pytest.raises(errors.StatusError) as got:
        run(registry.get("ns", "plain"))
    assert got.value.code == 500
    assert got.value.message == "Internal error occurred: no matching prefix found"
    with pytest.raises(errors.StatusError) as listed:
        run(registry.list_page("ns"))
    assert listed.value.message == (
        'Internal error occurred: unable to transform key "/registry/events/ns/plain": '
        "no matching prefix found"
    )


def test_identity_first_reads_old_encrypted_values_and_writes_plain() -> None:
    registry, store, dyn, _ = make(f"  - aesgcm: {{keys: [{{name: k1, secret: {KEY_A}}}]}}\n")
    run(registry.create(event("a")))
    dyn.set(
        dynamic(
            f"  - identity: {{}}\n  - aesgcm: {{keys: [{{name: k1, secret: {KEY_A}}}]}}\n",
            Clock(),
        ).built
    )
    assert run(registry.get("ns", "a"))["message"] == "hello"
    run(registry.create(event("b")))
    assert run(store.get(b"/registry/events/ns/b")).value.startswith(b"{")
