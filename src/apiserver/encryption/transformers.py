"""The value transformers of encryption at rest, byte for byte as kube-apiserver stores them.

Follows k8s.io/apiserver ``pkg/storage/value/transformer.go`` (prefix transformers: the first
writes, every one whose prefix matches is tried on read, a read by any but the first is
stale), ``pkg/storage/value/encrypt/identity`` (refuses data starting ``k8s:enc:``),
``encrypt/aes/aes.go`` (CBC: IV(16) ‖ AES-CBC(PKCS#7); GCM: nonce(12) ‖ ciphertext ‖ tag, the
store key as authenticated data), ``encrypt/aes/aes_extended_nonce.go`` (KMS v2 seeds:
info(32) ‖ nonce(12) ‖ ciphertext ‖ tag, key = HKDF-Expand(SHA-256, seed, info)) and
``encrypt/secretbox`` (nonce(24) ‖ NaCl secretbox). The ciphers are ``cryptography``'s and
PyNaCl's; the error texts are Go's, since operators grep for them.

Every transformer here takes ``(data, authenticated data, resource)``; ``resource`` is the
label of the transformation metrics (``transformer.go`` reads it from the request context).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Protocol

import nacl.exceptions
import nacl.secret
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, padding
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDFExpand

from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.storage.value import ValueTransformError

ENCRYPTED_PREFIX = b"k8s:enc:"
AESCBC_PREFIX = b"k8s:enc:aescbc:v1:"
AESGCM_PREFIX = b"k8s:enc:aesgcm:v1:"
SECRETBOX_PREFIX = b"k8s:enc:secretbox:v1:"
KMS_V1_PREFIX = b"k8s:enc:kms:v1:"
KMS_V2_PREFIX = b"k8s:enc:kms:v2:"

GCM_NONCE_SIZE = 12
CBC_BLOCK_SIZE = 16
SECRETBOX_NONCE_SIZE = 24
SECRETBOX_OVERHEAD = 16
EXTENDED_INFO_SIZE = 32

NO_MATCHING_PREFIX = "no matching prefix found"


def aggregate(messages: Sequence[str]) -> str:
    """Go's ``errors.Reduce(errors.NewAggregate(errs))`` text: one error as is, several as
    ``[a, b]`` (k8s.io/apimachinery ``pkg/util/errors``: duplicates are shown once)."""
    seen: list[str] = []
    for message in messages:
        if message not in seen:
            seen.append(message)
    if len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


class Transformer(Protocol):
    """A provider or key transformer (``value.Transformer``)."""

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]: ...

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes: ...


class Identity:
    """``identity``: stores the bytes as they are; refuses to read encrypted data."""

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        if data.startswith(ENCRYPTED_PREFIX):
            raise ValueTransformError("identity transformer tried to read encrypted data")
        return data, False

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        return data


IDENTITY = Identity()


class AESGCMTransformer:
    """nonce(12, random) ‖ AES-GCM ciphertext ‖ tag(16), AD = the store key."""

    def __init__(self, key: bytes) -> None:
        self._aead = AESGCM(key)

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        if len(data) < GCM_NONCE_SIZE:
            raise ValueTransformError("the stored data was shorter than the required size")
        try:
            return self._aead.decrypt(data[:GCM_NONCE_SIZE], data[GCM_NONCE_SIZE:], ad), False
        except InvalidTag:
            raise ValueTransformError("cipher: message authentication failed") from None

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        nonce = os.urandom(GCM_NONCE_SIZE)
        return nonce + self._aead.encrypt(nonce, data, ad)


class AESCBCTransformer:
    """IV(16, random) ‖ AES-CBC(PKCS#7-padded data); no authenticated data, no MAC."""

    def __init__(self, key: bytes) -> None:
        self._algorithm = algorithms.AES(key)

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        if len(data) < CBC_BLOCK_SIZE:
            raise ValueTransformError("the stored data was shorter than the required size")
        body = data[CBC_BLOCK_SIZE:]
        if len(body) % CBC_BLOCK_SIZE:
            raise ValueTransformError("the stored data is not a multiple of the block size")
        decryptor = Cipher(self._algorithm, modes.CBC(data[:CBC_BLOCK_SIZE])).decryptor()
        result = decryptor.update(body) + decryptor.finalize()
        pad = result[-1] if result else 0
        if pad == 0 or pad > len(result):
            raise ValueTransformError("invalid PKCS7 data (empty or not padded)")
        if result[-pad:] != bytes([pad]) * pad:
            raise ValueTransformError("invalid padding on input")
        return result[:-pad], False

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        iv = os.urandom(CBC_BLOCK_SIZE)
        padder = padding.PKCS7(128).padder()
        padded = padder.update(data) + padder.finalize()
        encryptor = Cipher(self._algorithm, modes.CBC(iv)).encryptor()
        return iv + encryptor.update(padded) + encryptor.finalize()


class SecretboxTransformer:
    """nonce(24, random) ‖ NaCl secretbox (Poly1305 tag ‖ XSalsa20 ciphertext)."""

    def __init__(self, key: bytes) -> None:
        self._box = nacl.secret.SecretBox(key)

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        if len(data) < SECRETBOX_OVERHEAD + SECRETBOX_NONCE_SIZE:
            raise ValueTransformError("the stored data was shorter than the required size")
        try:
            plain = self._box.decrypt(data[SECRETBOX_NONCE_SIZE:], data[:SECRETBOX_NONCE_SIZE])
        except nacl.exceptions.CryptoError:
            # secretbox.go's text when Open fails (sic).
            raise ValueTransformError("output array was not large enough for encryption") from None
        return bytes(plain), False

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        nonce = os.urandom(SECRETBOX_NONCE_SIZE)
        return bytes(self._box.encrypt(data, nonce))


def hkdf_expand(seed: bytes, info: bytes) -> bytes:
    """HKDF-Expand only (no extract), SHA-256, 32 bytes (``aes_extended_nonce.go``)."""
    return HKDFExpand(algorithm=hashes.SHA256(), length=32, info=info).derive(seed)


class ExtendedNonceGCM:
    """KMS v2 seeds: info(32, random) ‖ AES-256-GCM(key = HKDF-Expand(seed, info))."""

    def __init__(self, seed: bytes) -> None:
        if len(seed) < EXTENDED_INFO_SIZE:
            raise ValueTransformError(f"invalid seed length {len(seed)} used for key generation")
        self._seed = seed
        self._derived: dict[bytes, AESGCMTransformer] = {}

    def _for_info(self, info: bytes) -> AESGCMTransformer:
        transformer = self._derived.get(info)
        if transformer is None:
            if len(self._derived) >= 4096:
                self._derived.clear()
            transformer = AESGCMTransformer(hkdf_expand(self._seed, info))
            self._derived[info] = transformer
        return transformer

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        if len(data) < EXTENDED_INFO_SIZE:
            raise ValueTransformError("the stored data was shorter than the required size")
        info = bytes(data[:EXTENDED_INFO_SIZE])
        return self._for_info(info).from_storage(data[EXTENDED_INFO_SIZE:], ad, resource)

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        info = os.urandom(EXTENDED_INFO_SIZE)
        transformer = AESGCMTransformer(hkdf_expand(self._seed, info))
        return info + transformer.to_storage(data, ad, resource)


class PrefixTransformers:
    """``prefixTransformers``: the first writes (its prefix ahead of its output); a read
    tries, in order, every transformer whose prefix the data starts with (the empty prefix,
    identity's, always matches and its error is skipped); the first success wins, and is
    stale unless it came from the first. Used twice, as in Go: over the providers of a
    resource rule (``no matching prefix found``) and over the keys of one provider."""

    def __init__(
        self,
        transformers: Sequence[tuple[bytes, Transformer]],
        no_match: str,
        metrics: EncryptionMetrics | None = None,
    ) -> None:
        self.transformers = list(transformers)
        self.no_match = no_match
        self.metrics = metrics
        self._labels = [
            (prefix, transformer, prefix.decode(errors="replace") or "identity")
            for prefix, transformer in self.transformers
        ]
        self.write_prefix, self._writer = self.transformers[0]
        self._write_label = self.write_prefix.decode(errors="replace")

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        start = time.perf_counter()
        errors: list[str] = []
        metrics = self.metrics
        for index, (prefix, transformer, label) in enumerate(self._labels):
            if not data.startswith(prefix):
                continue
            try:
                result, stale = transformer.from_storage(data[len(prefix) :], ad, resource)
            except ValueTransformError as error:
                if not prefix:
                    continue
                if metrics is not None:
                    metrics.transformation(
                        resource,
                        "from_storage",
                        label,
                        time.perf_counter() - start,
                        status_of(error),
                    )
                errors.append(str(error))
                continue
            if metrics is not None:
                metrics.transformation(
                    resource, "from_storage", label, time.perf_counter() - start, "OK"
                )
            return result, stale or index != 0
        if errors:
            raise ValueTransformError(aggregate(errors))
        if metrics is not None:
            metrics.transformation(
                resource, "from_storage", "unknown", time.perf_counter() - start, "unknown-non-grpc"
            )
        raise ValueTransformError(self.no_match)

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        start = time.perf_counter()
        try:
            result = self._writer.to_storage(data, ad, resource)
        except ValueTransformError as error:
            if self.metrics is not None:
                self.metrics.transformation(
                    resource,
                    "to_storage",
                    self._write_label,
                    time.perf_counter() - start,
                    status_of(error),
                )
            raise
        if self.metrics is not None:
            self.metrics.transformation(
                resource, "to_storage", self._write_label, time.perf_counter() - start, "OK"
            )
        return self.write_prefix + result


class GrpcTransformError(ValueTransformError):
    """A transformation that failed on a KMS plugin call: ``code`` is the gRPC status name
    the metrics report (``UNAVAILABLE`` is ``Unavailable``, as Go's ``codes.Code.String``)."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


def status_of(error: Exception) -> str:
    """The ``status`` label: the gRPC code of a plugin failure, else ``unknown-non-grpc``
    (``value/metrics.go`` ``getErrorCode``)."""
    return error.code if isinstance(error, GrpcTransformError) else "unknown-non-grpc"


class UnionTransformers:
    """KMS v1's DEK reader: AES-GCM, then AES-CBC (stale) for data of older releases
    (``encryptionconfig/config.go`` ``unionTransformers``)."""

    def __init__(self, transformers: Sequence[Transformer]) -> None:
        self.transformers = list(transformers)

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        errors: list[str] = []
        for index, transformer in enumerate(self.transformers):
            try:
                result, stale = transformer.from_storage(data, ad, resource)
            except ValueTransformError as error:
                errors.append(str(error))
                continue
            return result, stale or index != 0
        raise ValueTransformError(
            aggregate(errors) if errors else "unionTransformers: unable to transform from storage"
        )

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        return self.transformers[0].to_storage(data, ad, resource)


__all__ = [
    "AESCBC_PREFIX",
    "AESGCM_PREFIX",
    "ENCRYPTED_PREFIX",
    "IDENTITY",
    "KMS_V1_PREFIX",
    "KMS_V2_PREFIX",
    "NO_MATCHING_PREFIX",
    "SECRETBOX_PREFIX",
    "AESCBCTransformer",
    "AESGCMTransformer",
    "ExtendedNonceGCM",
    "GrpcTransformError",
    "Identity",
    "PrefixTransformers",
    "SecretboxTransformer",
    "Transformer",
    "UnionTransformers",
    "aggregate",
    "hkdf_expand",
    "status_of",
]
