"""KMS calls that the registry and the watch delivery wait for without blocking the reactor
(docs/encryption.md, "KMS calls"): a DEK missing from the cache is decrypted once however
many readers miss on it, every reader gets the answer or the plugin's error, events wait in
order behind the one that waits, and KMS v1 writes wait for their Encrypt."""

from __future__ import annotations

import os
from collections.abc import Coroutine
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from apiserver.apimachinery import errors
from apiserver.encryption.kmsv1 import KMSv1Provider
from apiserver.encryption.kmsv2 import KMSv2Provider
from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.pending import PluginCalls
from apiserver.encryption.transformers import GrpcTransformError, Transformer
from apiserver.registry.store import Registry
from apiserver.storage.interface import WatchEvent
from apiserver.storage.memory import MemoryStore
from apiserver.storage.value import TransformPending

GR = errors.GroupResource("", "events")
DOWN = GrpcTransformError("rpc error: code = Unavailable desc = down", "Unavailable")


class SlowPlugin:
    """A KMS v2 plugin whose Decrypt answers when the test says so."""

    def __init__(self) -> None:
        self.kek = AESGCM(os.urandom(32))
        self.decrypts: list[tuple[bytes, Deferred[bytes]]] = []

    def status(self) -> Deferred[tuple[str, str, str]]:
        return succeed(("v2", "ok", "k1"))

    def encrypt(self, uid: str, plaintext: bytes) -> Deferred[tuple[bytes, str, dict[str, bytes]]]:
        nonce = os.urandom(12)
        return succeed((nonce + self.kek.encrypt(nonce, plaintext, None), "k1", {}))

    def decrypt(
        self, uid: str, ciphertext: bytes, key_id: str, annotations: dict[str, bytes]
    ) -> Deferred[bytes]:
        d: Deferred[bytes] = Deferred()
        self.decrypts.append((ciphertext, d))
        return d

    def answer(self, index: int = 0) -> None:
        ciphertext, d = self.decrypts[index]
        d.callback(self.kek.decrypt(ciphertext[:12], ciphertext[12:], None))

    def close(self) -> None:
        pass


class Adapter:
    """The registry's ValueTransformer over one provider (no prefix list needed here)."""

    def __init__(self, provider: Transformer) -> None:
        self.provider = provider

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        return self.provider.from_storage(data, key, "events")

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        return self.provider.to_storage(data, key, "events")


def started(coro: Coroutine[Any, Any, Any]) -> list[Any]:
    results: list[Any] = []
    Deferred.fromCoroutine(coro).addBoth(results.append)
    return results


def setup() -> tuple[Registry, Registry, SlowPlugin, Clock]:
    """A writer whose provider knows its DEK, and a reader that starts with an empty cache
    (a server restarted, or a second server on the same store)."""
    clock = Clock()
    clock.advance(1_000_000)
    store = MemoryStore(clock)
    store.start()
    plugin = SlowPlugin()
    metrics = EncryptionMetrics(clock)
    writer_kms = KMSv2Provider("p", plugin, clock, metrics)
    writer_kms.check()
    reader_kms = KMSv2Provider("p", plugin, clock, metrics)
    reader_kms.state = writer_kms.state
    writer = Registry(
        store, group_resource=GR, storage_kind="Event", transformer=Adapter(writer_kms)
    )
    reader = Registry(
        store, group_resource=GR, storage_kind="Event", transformer=Adapter(reader_kms)
    )
    return writer, reader, plugin, clock


def event(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "message": f"about {name}"}


def test_plugin_calls_are_shared_and_their_errors_reach_the_woken_retries() -> None:
    clock = Clock()
    calls = PluginCalls(clock)
    answers: list[Deferred[str]] = []

    def start() -> Deferred[str]:
        d: Deferred[str] = Deferred()
        answers.append(d)
        return d

    waits = []
    for _ in range(3):
        with pytest.raises(TransformPending) as pending:
            calls.wait("k", start)
        waits.append(pending.value.ready)
    assert len(answers) == 1 and calls.in_flight() == 1
    retried: list[Any] = []

    def retry(_: object) -> None:
        try:
            retried.append(calls.wait("k", start))
        except GrpcTransformError as error:
            retried.append(error)

    for ready in waits:
        ready.addCallback(retry)
    answers[0].errback(DOWN)
    assert retried == [DOWN, DOWN, DOWN] and len(answers) == 1
    clock.advance(0)
    with pytest.raises(TransformPending):  # a later read asks the plugin again
        calls.wait("k", start)
    assert len(answers) == 2
    answers[1].callback("dek")
    assert calls.wait("k", start) == "dek"  # the retry it woke, this turn
    assert calls.in_flight() == 0


def test_reads_wait_for_one_decrypt_and_the_reactor_is_not_blocked() -> None:
    writer, reader, plugin, _ = setup()
    Deferred.fromCoroutine(writer.create(event("a")))
    Deferred.fromCoroutine(writer.create(event("b")))
    got = started(reader.get("ns", "a"))
    listed = started(reader.list_page("ns"))
    maybe = started(reader.get_or_none("ns", "b"))
    # Nothing answered yet, nothing blocked: the calls returned, one Decrypt is in flight.
    assert got == [] and listed == [] and maybe == []
    assert len(plugin.decrypts) == 1
    plugin.answer()
    assert got[0]["message"] == "about a"
    assert [item["metadata"]["name"] for item in listed[0].items] == ["a", "b"]
    assert maybe[0][0]["message"] == "about b"
    assert len(plugin.decrypts) == 1  # cached from now on
    assert started(reader.get("ns", "b"))[0]["message"] == "about b"


def test_a_failed_decrypt_is_each_waiting_readers_500() -> None:
    writer, reader, plugin, _ = setup()
    Deferred.fromCoroutine(writer.create(event("a")))
    got = started(reader.get("ns", "a"))
    listed = started(reader.list_page("ns"))
    plugin.decrypts[0][1].errback(DOWN)
    assert got[0].check(errors.StatusError) and listed[0].check(errors.StatusError)
    assert got[0].value.code == 500
    assert got[0].value.message == (
        "Internal error occurred: failed to decrypt DEK, error: rpc error: code = Unavailable "
        "desc = down"
    )
    assert listed[0].value.message.startswith(
        'Internal error occurred: unable to transform key "/registry/events/ns/a": '
        "failed to decrypt DEK"
    )
    assert len(plugin.decrypts) == 1


def test_watch_events_wait_in_order_behind_the_one_that_waits() -> None:
    writer, reader, plugin, clock = setup()
    seen: list[str] = []

    def deliver(change: WatchEvent) -> None:
        seen.append(reader.decode(change.kv)["metadata"]["name"])

    reader.watch(None, 1, deliver)
    Deferred.fromCoroutine(writer.create(event("a")))
    Deferred.fromCoroutine(writer.create(event("b")))
    clock.advance(0)
    assert seen == [] and len(plugin.decrypts) == 1
    plugin.answer()
    assert seen == ["a", "b"]
    Deferred.fromCoroutine(writer.create(event("c")))
    clock.advance(0)
    assert seen == ["a", "b", "c"]


class SlowV1:
    def __init__(self) -> None:
        self.kek = AESGCM(os.urandom(32))
        self.encrypts: list[tuple[bytes, Deferred[bytes]]] = []

    def encrypt_async(self, plain: bytes) -> Deferred[bytes]:
        d: Deferred[bytes] = Deferred()
        self.encrypts.append((plain, d))
        return d

    def decrypt_async(self, cipher: bytes) -> Deferred[bytes]:
        return succeed(self.kek.decrypt(cipher[:12], cipher[12:], None))

    def answer(self, index: int) -> None:
        plain, d = self.encrypts[index]
        nonce = os.urandom(12)
        d.callback(nonce + self.kek.encrypt(nonce, plain, None))

    def close(self) -> None:
        pass


def test_kms_v1_writes_wait_for_their_encrypt() -> None:
    clock = Clock()
    store = MemoryStore(clock)
    store.start()
    plugin = SlowV1()
    kms = KMSv1Provider("v1p", plugin, 1000, clock, EncryptionMetrics(clock))
    registry = Registry(store, group_resource=GR, storage_kind="Event", transformer=Adapter(kms))
    first = started(registry.create(event("a")))
    second = started(registry.create(event("b")))
    assert first == [] and second == [] and len(plugin.encrypts) == 2  # one DEK per write
    plugin.answer(1)
    plugin.answer(0)
    assert first[0]["metadata"]["resourceVersion"] and second[0]["metadata"]["resourceVersion"]
    assert started(registry.get("ns", "b"))[0]["message"] == "about b"
    failed = started(registry.create(event("c")))
    plugin.encrypts[2][1].errback(DOWN)
    assert failed[0].check(errors.StatusError)
    assert failed[0].value.message == (
        "Internal error occurred: rpc error: code = Unavailable desc = down"
    )
