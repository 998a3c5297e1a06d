"""KMS v1 (deprecated): a new DEK per write, encrypted by the plugin and stored ahead of the
data. Only with ``--feature-gates=KMSv1=true``, as kube-apiserver since 1.29.

Follows k8s.io/apiserver ``pkg/storage/value/encrypt/envelope/envelope.go`` (stored value:
uint16-BE length ‖ encrypted DEK ‖ AES-GCM(nonce ‖ ciphertext ‖ tag, AD = the store key);
decrypted DEKs kept in an LRU of ``cachesize`` entries keyed by the encrypted DEK, none when
it is negative), ``encryptionconfig/config.go`` (reads fall back to AES-CBC with the same
DEK, stale; the health probe encrypts and decrypts ``ping``, kept 20 s when good and 3 s when
not) and ``envelope/grpc_service.go`` (``Version`` must answer ``v1beta1`` before any other
call).

Every write calls the plugin's Encrypt (v1's design, one reason it is deprecated), and a read
whose DEK is not cached its Decrypt; both asynchronously: the transformer raises
``TransformPending`` and is called again with the answer (:mod:`apiserver.encryption.pending`),
so a slow plugin delays the requests that wait for it, never the reactor.
"""

from __future__ import annotations

import base64
import itertools
import os
import struct
import time
from collections import OrderedDict
from typing import Any, Protocol

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure

from apiserver.encryption.generated import kmsv1_pb2
from apiserver.encryption.grpcclient import GrpcClient
from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.pending import PluginCalls
from apiserver.encryption.transformers import (
    AESCBCTransformer,
    AESGCMTransformer,
    GrpcTransformError,
    Transformer,
    UnionTransformers,
)
from apiserver.storage.value import ValueTransformError

API_VERSION = "v1beta1"
HEALTH_POSITIVE_TTL = 20.0
HEALTH_NEGATIVE_TTL = 3.0


class KMSv1Service(Protocol):
    """The v1 plugin, every call asynchronous; failures errback."""

    def encrypt_async(self, plain: bytes) -> Deferred[bytes]: ...

    def decrypt_async(self, cipher: bytes) -> Deferred[bytes]: ...

    def close(self) -> None: ...


class KMSv1Provider:
    """The v1 envelope transformer and its health probe."""

    def __init__(
        self,
        name: str,
        service: KMSv1Service,
        cachesize: int,
        clock: IReactorTime,
        metrics: EncryptionMetrics,
    ) -> None:
        self.name = name
        self.service = service
        self.cachesize = cachesize
        self.clock = clock
        self.metrics = metrics
        self._cache: OrderedDict[str, Transformer] = OrderedDict()
        self._decrypts = PluginCalls(clock)
        self._encrypts = PluginCalls(clock)
        self._write_ids = itertools.count()
        #: DEKs the plugin encrypted for writes that are waiting for one: (DEK, encrypted).
        self._prepared: list[tuple[bytes, bytes]] = []
        #: The error of the write DEK whose Encrypt just failed, for the write it woke.
        self._write_error: Exception | None = None
        self._last: tuple[float, str | None] | None = None
        self._ttl = HEALTH_NEGATIVE_TTL

    def _add(self, encrypted_key: bytes, key: bytes) -> Transformer:
        transformer = UnionTransformers([AESGCMTransformer(key), AESCBCTransformer(key)])
        if self.cachesize > 0:
            cache = self._cache
            cache[base64.b64encode(encrypted_key).decode()] = transformer
            while len(cache) > self.cachesize:
                cache.popitem(last=False)
            self.metrics.dek_cache_fill_percent = len(cache) / self.cachesize
        return transformer

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        self.metrics.arrival("from_storage")
        if len(data) < 2 or len(data) < 2 + struct.unpack(">H", data[:2])[0]:
            raise ValueTransformError(
                "invalid data encountered by envelope transformer: failed to read uint16 length "
                "prefixed data"
            )
        size = struct.unpack(">H", data[:2])[0]
        encrypted_key, rest = data[2 : 2 + size], data[2 + size :]
        transformer = None
        index = ""
        if self.cachesize > 0:
            index = base64.b64encode(encrypted_key).decode()
            transformer = self._cache.get(index)
            if transformer is not None:
                self._cache.move_to_end(index)
        if transformer is None:
            transformer = self._decrypts.wait(
                bytes(encrypted_key), lambda: self._decrypt_dek(bytes(encrypted_key))
            )
        return transformer.from_storage(rest, ad, resource)

    def _decrypt_dek(self, encrypted_key: bytes) -> Deferred[Transformer]:
        if self.cachesize > 0:
            self.metrics.cache_miss()
        d = self.service.decrypt_async(encrypted_key)
        return d.addCallback(lambda key: self._add(encrypted_key, key))

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        self.metrics.arrival("to_storage")
        if not self._prepared:
            error = self._write_error
            if error is not None:
                raise error
            self._encrypts.wait(next(self._write_ids), self._new_dek)
        key, encrypted_key = self._prepared.pop()
        transformer = self._add(encrypted_key, key)
        return (
            struct.pack(">H", len(encrypted_key))
            + encrypted_key
            + transformer.to_storage(data, ad, resource)
        )

    def _new_dek(self) -> Deferred[None]:
        """A new DEK encrypted by the plugin, put aside for the next write
        (``envelope.go`` ``TransformToStorage``: ``generateKey`` then ``Encrypt``)."""
        started = time.perf_counter()
        key = os.urandom(32)
        self.metrics.data_key_generated(time.perf_counter() - started, False)

        def encrypted(encrypted_key: bytes) -> None:
            if len(encrypted_key) > 0xFFFF:
                raise ValueTransformError(
                    "cryptobyte: pending child length exceeds 2-byte length prefix"
                )
            self._prepared.append((key, encrypted_key))

        def failed(failure: Failure) -> None:
            error = failure.value
            assert isinstance(error, Exception)
            self._write_error = error
            self.clock.callLater(0, self._forget_write_error, error)
            failure.raiseException()

        return self.service.encrypt_async(key).addCallbacks(encrypted, failed)

    def _forget_write_error(self, error: Exception) -> None:
        if self._write_error is error:
            self._write_error = None

    # --- the probe ---------------------------------------------------------------------

    def check(self) -> Deferred[None]:
        now = self.clock.seconds()
        if self._last is not None and now - self._last[0] < self._ttl:
            error = self._last[1]
            return fail(RuntimeError(error)) if error is not None else succeed(None)

        def record(error: str | None) -> None:
            self._last = (self.clock.seconds(), error)
            self._ttl = HEALTH_POSITIVE_TTL if error is None else HEALTH_NEGATIVE_TTL
            if error is not None:
                raise RuntimeError(error)

        def encrypted(cipher: bytes) -> Deferred[str | None]:
            def decrypt_failed(failure: Failure) -> str | None:
                return (
                    "failed to perform decrypt section of the healthz check for KMS Provider "
                    f"{self.name}, error: {failure.getErrorMessage()}"
                )

            return self.service.decrypt_async(cipher).addCallbacks(lambda _: None, decrypt_failed)

        def encrypt_failed(failure: Failure) -> str | None:
            return (
                "failed to perform encrypt section of the healthz check for KMS Provider "
                f"{self.name}, error: {failure.getErrorMessage()}"
            )

        d: Deferred[Any] = self.service.encrypt_async(b"ping")
        d.addCallbacks(encrypted, encrypt_failed)
        return d.addCallback(record)

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None

    def close(self) -> None:
        self.service.close()


class GrpcKMSv1Service:
    """The v1 plugin over gRPC; ``Version`` is asked once, before the first other call."""

    def __init__(
        self, endpoint: str, name: str, timeout: float, reactor: Any, metrics: EncryptionMetrics
    ) -> None:
        from apiserver.encryption.generated import kmsv1_pb2_grpc

        self.client = GrpcClient(
            endpoint,
            name,
            timeout,
            reactor,
            metrics,
            kmsv1_pb2_grpc.KeyManagementServiceStub,
            "v1beta1.KeyManagementService",
        )
        self._version_checked = False

    def _check_version(self) -> Deferred[None]:
        """``checkAPIVersion``: asked once, asynchronously; asked again after a failure."""
        if self._version_checked:
            return succeed(None)

        def answered(answer: Any) -> None:
            if answer.version != API_VERSION:
                raise ValueTransformError(
                    f"KMS provider api version {answer.version} is not supported, only "
                    f"{API_VERSION} is supported now"
                )
            self._version_checked = True

        def failed(failure: Failure) -> None:
            error = failure.value
            if isinstance(error, GrpcTransformError):
                raise GrpcTransformError(
                    f"failed get version from remote KMS provider: {error}", error.code
                ) from None
            failure.raiseException()

        d = self.client.call("Version", kmsv1_pb2.VersionRequest(version=API_VERSION))
        return d.addCallbacks(answered, failed)

    def encrypt_async(self, plain: bytes) -> Deferred[bytes]:
        request = kmsv1_pb2.EncryptRequest(version=API_VERSION, plain=plain)
        d = self._check_version().addCallback(lambda _: self.client.call("Encrypt", request))
        return d.addCallback(lambda r: bytes(r.cipher))

    def decrypt_async(self, cipher: bytes) -> Deferred[bytes]:
        request = kmsv1_pb2.DecryptRequest(version=API_VERSION, cipher=cipher)
        d = self._check_version().addCallback(lambda _: self.client.call("Decrypt", request))
        return d.addCallback(lambda r: bytes(r.plain))

    def close(self) -> None:
        self.client.close()


__all__ = ["GrpcKMSv1Service", "KMSv1Provider", "KMSv1Service"]
