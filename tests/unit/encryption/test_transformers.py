"""Stored bytes of each provider, checked both ways against independent implementations
written here after k8s.io/apiserver pkg/storage/value/encrypt/{aes,secretbox,identity}:
CBC by hand over AES-ECB blocks, GCM with `cryptography`'s AESGCM, HKDF-Expand by hand with
HMAC-SHA256, secretbox with libsodium's crypto_secretbox (PyNaCl's bindings; `cryptography`
has no XSalsa20)."""

from __future__ import annotations

import base64
import os

import nacl.bindings
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hmac import HMAC

from apiserver.encryption.config import build, decode
from apiserver.encryption.transformers import (
    AESCBCTransformer,
    ExtendedNonceGCM,
    PrefixTransformers,
)
from apiserver.storage.value import ValueTransformError

KEY32 = bytes(range(32))
KEY16 = bytes(range(16))
AD = b"/registry/events/default/web.17f0"
PLAIN = b'k8s\x00\n\x0b\n\x02v1\x12\x05Event\x12\x00\x1a\x00"\x00'


def config_with(provider_yaml: str) -> bytes:
    return (
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
        "resources:\n- resources: [events]\n  providers:\n" + provider_yaml
    ).encode()


def events_transformer(provider_yaml: str) -> PrefixTransformers:
    built = build(decode(config_with(provider_yaml)), "sha256:x")
    found = built.transformers[("", "events")]
    return found


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


# --- independent implementations -------------------------------------------------------


def cbc_reference_encrypt(key: bytes, iv: bytes, plain: bytes) -> bytes:
    """AES-CBC by hand: PKCS#7, then each block XORed with the previous ciphertext block
    and run through AES-ECB."""
    pad = 16 - len(plain) % 16
    data = plain + bytes([pad]) * pad
    ecb = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    out, prev = b"", iv
    for i in range(0, len(data), 16):
        block = bytes(a ^ b for a, b in zip(data[i : i + 16], prev, strict=True))
        prev = ecb.update(block)
        out += prev
    return iv + out


def cbc_reference_decrypt(key: bytes, data: bytes) -> bytes:
    ecb = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    out, prev = b"", data[:16]
    for i in range(16, len(data), 16):
        block = data[i : i + 16]
        out += bytes(a ^ b for a, b in zip(ecb.update(block), prev, strict=True))
        prev = block
    return out[: -out[-1]]


def hkdf_expand_reference(prk: bytes, info: bytes) -> bytes:
    """RFC 5869 expand, first block only (32 bytes of SHA-256)."""
    mac = HMAC(prk, hashes.SHA256())
    mac.update(info + b"\x01")
    return mac.finalize()


# --- identity ------------------------------------------------------------------------------


def test_identity_first_writes_plain_bytes_and_reads_encrypted_ones() -> None:
    t = events_transformer(
        f"  - identity: {{}}\n  - aesgcm: {{keys: [{{name: k1, secret: {b64(KEY32)}}}]}}\n"
    )
    assert t.to_storage(PLAIN, AD, "events") == PLAIN
    assert t.from_storage(PLAIN, AD, "events") == (PLAIN, False)
    # Written by the aesgcm provider (a server whose config put it first): read, and stale.
    nonce = os.urandom(12)
    stored = b"k8s:enc:aesgcm:v1:k1:" + nonce + AESGCM(KEY32).encrypt(nonce, PLAIN, AD)
    assert t.from_storage(stored, AD, "events") == (PLAIN, True)


def test_a_resource_with_no_rule_refuses_encrypted_data() -> None:
    built = build(decode(config_with("  - identity: {}\n")), "h")
    other = built.transformer_for(("", "secrets"))
    with pytest.raises(ValueTransformError, match="identity transformer tried to read encrypted"):
        other.from_storage(b"k8s:enc:aescbc:v1:k:xxxx", AD, "secrets")


# --- aesgcm --------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [KEY16, bytes(24), KEY32])
def test_aesgcm_layout_is_prefix_nonce_ciphertext_tag_with_the_key_as_ad(key: bytes) -> None:
    t = events_transformer(f"  - aesgcm: {{keys: [{{name: key1, secret: {b64(key)}}}]}}\n")
    stored = t.to_storage(PLAIN, AD, "events")
    prefix = b"k8s:enc:aesgcm:v1:key1:"
    assert stored.startswith(prefix)
    body = stored[len(prefix) :]
    assert len(body) == 12 + len(PLAIN) + 16
    assert AESGCM(key).decrypt(body[:12], body[12:], AD) == PLAIN
    # The reverse: written by the reference layout, read here.
    nonce = os.urandom(12)
    theirs = prefix + nonce + AESGCM(key).encrypt(nonce, PLAIN, AD)
    assert t.from_storage(theirs, AD, "events") == (PLAIN, False)


def test_aesgcm_under_another_key_does_not_decrypt() -> None:
    t = events_transformer(f"  - aesgcm: {{keys: [{{name: key1, secret: {b64(KEY32)}}}]}}\n")
    stored = t.to_storage(PLAIN, AD, "events")
    with pytest.raises(ValueTransformError, match=r"^cipher: message authentication failed$"):
        t.from_storage(stored, b"/registry/events/default/other", "events")


# --- aescbc --------------------------------------------------------------------------------


def test_aescbc_layout_is_prefix_iv_and_pkcs7_cbc() -> None:
    t = events_transformer(f"  - aescbc: {{keys: [{{name: key1, secret: {b64(KEY32)}}}]}}\n")
    stored = t.to_storage(PLAIN, AD, "events")
    prefix = b"k8s:enc:aescbc:v1:key1:"
    assert stored.startswith(prefix)
    body = stored[len(prefix) :]
    assert len(body) == 16 + (len(PLAIN) // 16 + 1) * 16
    assert cbc_reference_decrypt(KEY32, body) == PLAIN
    assert cbc_reference_encrypt(KEY32, body[:16], PLAIN) == body
    iv = os.urandom(16)
    theirs = prefix + cbc_reference_encrypt(KEY32, iv, PLAIN)
    assert t.from_storage(theirs, AD, "events") == (PLAIN, False)
    # No authenticated data: the same bytes read under any key.
    assert t.from_storage(theirs, b"/elsewhere", "events") == (PLAIN, False)


def test_aescbc_errors_are_go_texts() -> None:
    cbc = AESCBCTransformer(KEY32)
    with pytest.raises(ValueTransformError, match="shorter than the required size"):
        cbc.from_storage(b"short", AD, "events")
    with pytest.raises(ValueTransformError, match="not a multiple of the block size"):
        cbc.from_storage(bytes(16) + b"abc", AD, "events")
    garbage = bytes(16) + Cipher(algorithms.AES(KEY32), modes.ECB()).encryptor().update(
        bytes(15) + b"\x00"
    )
    with pytest.raises(ValueTransformError, match=r"invalid PKCS7 data \(empty or not padded\)"):
        cbc.from_storage(garbage, AD, "events")


# --- secretbox -----------------------------------------------------------------------------


def test_secretbox_layout_is_prefix_nonce_and_naclbox() -> None:
    t = events_transformer(f"  - secretbox: {{keys: [{{name: key1, secret: {b64(KEY32)}}}]}}\n")
    stored = t.to_storage(PLAIN, AD, "events")
    prefix = b"k8s:enc:secretbox:v1:key1:"
    body = stored[len(prefix) :]
    assert stored.startswith(prefix) and len(body) == 24 + 16 + len(PLAIN)
    nonce, box = body[:24], body[24:]
    assert nacl.bindings.crypto_secretbox_open(box, nonce, KEY32) == PLAIN
    theirs_nonce = os.urandom(24)
    theirs = prefix + theirs_nonce + nacl.bindings.crypto_secretbox(PLAIN, theirs_nonce, KEY32)
    assert t.from_storage(theirs, AD, "events") == (PLAIN, False)
    with pytest.raises(ValueTransformError, match="output array was not large enough"):
        t.from_storage(theirs[:-1] + bytes([theirs[-1] ^ 1]), AD, "events")


# --- KMS v2 seeds --------------------------------------------------------------------------


def test_extended_nonce_gcm_derives_the_key_with_hkdf_expand_only() -> None:
    seed = os.urandom(32)
    stored = ExtendedNonceGCM(seed).to_storage(PLAIN, AD, "events")
    info, nonce, rest = stored[:32], stored[32:44], stored[44:]
    key = hkdf_expand_reference(seed, info)
    assert AESGCM(key).decrypt(nonce, rest, AD) == PLAIN
    theirs_info, theirs_nonce = os.urandom(32), os.urandom(12)
    theirs = (
        theirs_info
        + theirs_nonce
        + AESGCM(hkdf_expand_reference(seed, theirs_info)).encrypt(theirs_nonce, PLAIN, AD)
    )
    assert ExtendedNonceGCM(seed).from_storage(theirs, AD, "events") == (PLAIN, False)


# --- rotation: several providers and keys --------------------------------------------------


def test_the_first_provider_and_key_write_and_any_other_reads_stale() -> None:
    old = f"  - aescbc: {{keys: [{{name: old, secret: {b64(KEY32)}}}]}}\n"
    rotated = events_transformer(
        f"  - aescbc: {{keys: [{{name: new, secret: {b64(KEY16)}}}, "
        f"{{name: old, secret: {b64(KEY32)}}}]}}\n"
    )
    written_old = events_transformer(old).to_storage(PLAIN, AD, "events")
    assert rotated.from_storage(written_old, AD, "events") == (PLAIN, True)
    written_new = rotated.to_storage(PLAIN, AD, "events")
    assert written_new.startswith(b"k8s:enc:aescbc:v1:new:")
    assert rotated.from_storage(written_new, AD, "events") == (PLAIN, False)


def test_unreadable_values_give_the_reference_errors() -> None:
    t = events_transformer(f"  - aesgcm: {{keys: [{{name: key1, secret: {b64(KEY32)}}}]}}\n")
    with pytest.raises(ValueTransformError, match=r"^no matching prefix found$"):
        t.from_storage(PLAIN, AD, "events")
    with pytest.raises(
        ValueTransformError, match=r"^no matching key was found for the provided AES transformer$"
    ):
        t.from_storage(b"k8s:enc:aesgcm:v1:other:" + bytes(40), AD, "events")
    two = events_transformer(
        f"  - aesgcm: {{keys: [{{name: key1, secret: {b64(KEY32)}}}]}}\n"
        f"  - aesgcm: {{keys: [{{name: key2, secret: {b64(KEY16)}}}]}}\n"
    )
    with pytest.raises(
        ValueTransformError,
        match=r"^\[cipher: message authentication failed, no matching key was found",
    ):
        two.from_storage(b"k8s:enc:aesgcm:v1:key1:" + bytes(40), AD, "events")


def test_transformations_are_counted_with_the_reference_labels() -> None:
    from apiserver.encryption.metrics import EncryptionMetrics

    metrics = EncryptionMetrics()
    built = build(
        decode(config_with(f"  - aesgcm: {{keys: [{{name: k, secret: {b64(KEY32)}}}]}}\n")),
        "h",
        metrics=metrics,
    )
    t = built.transformers[("", "events")]
    stored = t.to_storage(PLAIN, AD, "events")
    t.from_storage(stored, AD, "events")
    with pytest.raises(ValueTransformError):
        t.from_storage(b"{}", AD, "events")
    ops = metrics.operations
    assert ops[("events", "to_storage", "k8s:enc:aesgcm:v1:", "OK")] == 1
    assert ops[("events", "from_storage", "k8s:enc:aesgcm:v1:", "OK")] == 1
    assert ops[("events", "from_storage", "unknown", "unknown-non-grpc")] == 1
    names = {family.name for family in metrics.collect()}
    assert "apiserver_storage_transformation_operations" in names
    assert "apiserver_storage_transformation_duration_seconds" in names
