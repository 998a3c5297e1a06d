"""KMS v1 (k8s.io/apiserver envelope/envelope.go) with a fake plugin: the stored layout read
back with an independent decoder, the CBC fallback (stale), the LRU of DEKs, the health
probe's texts."""

from __future__ import annotations

import os
import struct
from typing import Any

import pytest
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock

from apiserver.encryption.config import build, decode
from apiserver.encryption.kmsv1 import KMSv1Provider
from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.transformers import KMS_V1_PREFIX, GrpcTransformError

AD = b"/registry/events/ns/a"


class FakeV1:
    def __init__(self) -> None:
        self.kek = AESGCM(os.urandom(32))
        self.calls: list[str] = []
        self.down = False

    def encrypt(self, plain: bytes) -> bytes:
        self.calls.append("Encrypt")
        nonce = os.urandom(12)
        return nonce + self.kek.encrypt(nonce, plain, None)

    def decrypt(self, cipher: bytes) -> bytes:
        self.calls.append("Decrypt")
        return self.kek.decrypt(cipher[:12], cipher[12:], None)

    def encrypt_async(self, plain: bytes) -> Deferred[bytes]:
        if self.down:
            return fail(GrpcTransformError("rpc error: code = Unavailable desc = x", "Unavailable"))
        return succeed(self.encrypt(plain))

    def decrypt_async(self, cipher: bytes) -> Deferred[bytes]:
        return succeed(self.decrypt(cipher))

    def close(self) -> None:
        pass


def make(cachesize: int = 1000) -> tuple[KMSv1Provider, FakeV1, Clock]:
    clock = Clock()
    plugin = FakeV1()
    return KMSv1Provider("v1p", plugin, cachesize, clock, EncryptionMetrics(clock)), plugin, clock


def test_layout_is_length_prefixed_encrypted_dek_then_aesgcm() -> None:
    kms, plugin, _ = make()
    stored = kms.to_storage(b"data", AD, "events")
    (size,) = struct.unpack(">H", stored[:2])
    dek = plugin.decrypt(stored[2 : 2 + size])
    body = stored[2 + size :]
    assert AESGCM(dek).decrypt(body[:12], body[12:], AD) == b"data"
    assert kms.from_storage(stored, AD, "events") == (b"data", False)


def test_cbc_written_values_are_read_stale_and_deks_are_cached() -> None:
    kms, plugin, _ = make(cachesize=1)
    dek = os.urandom(32)
    encrypted = plugin.encrypt(dek)
    iv = os.urandom(16)
    padder = padding.PKCS7(128).padder()
    padded = padder.update(b"old") + padder.finalize()
    cbc = Cipher(algorithms.AES(dek), modes.CBC(iv)).encryptor()
    stored = (
        struct.pack(">H", len(encrypted)) + encrypted + iv + cbc.update(padded) + cbc.finalize()
    )
    assert kms.from_storage(stored, AD, "events") == (b"old", True)
    kms.from_storage(stored, AD, "events")
    assert plugin.calls.count("Decrypt") == 1  # one miss, then cached
    kms.to_storage(b"new", AD, "events")  # evicts (cache of one)
    kms.from_storage(stored, AD, "events")
    assert plugin.calls.count("Decrypt") == 2


def test_the_probe_texts() -> None:
    kms, plugin, clock = make()
    results: list[Any] = []
    kms.check().addBoth(results.append)
    assert results == [None]
    clock.advance(20)
    plugin.down = True
    kms.check().addBoth(results.append)
    assert (
        "failed to perform encrypt section of the healthz check for KMS Provider v1p, error: rpc "
        "error: code = Unavailable desc = x" in str(results[1].value)
    )


def test_the_v1_gate_lets_the_factory_build_it() -> None:
    text = (
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
        "resources:\n- resources: [events]\n  providers:\n"
        "  - kms: {name: v1p, endpoint: 'unix:///nonexistent.sock'}\n"
    )
    kms, _, _ = make()

    def factory(config: Any) -> Any:
        assert config.api_version == "v1" and config.cachesize == 1000
        return KMS_V1_PREFIX + b"v1p:", kms, kms

    built = build(decode(text.encode()), "h", kms_factory=factory, feature_gates={"KMSv1": True})
    assert built.kms_v1_used and [name for name in built.probes] == [kms]
    assert built.close_grace_period == 2 * 2 * 3.0
    stored = built.transformer_for(("", "events")).to_storage(b"x", AD, "events")
    assert stored.startswith(b"k8s:enc:kms:v1:v1p:")
    with pytest.raises(Exception, match="KMSv1 is deprecated"):
        build(decode(text.encode()), "h", kms_factory=factory)
