"""KMS v2: envelope encryption with a plugin over gRPC on a unix socket.

Follows k8s.io/apiserver ``pkg/storage/value/encrypt/envelope/kmsv2/envelope.go`` (the
stored ``EncryptedObject``, its checks and texts, the DEK/seed cache keyed by type, encrypted
source, key ID and annotations, kept 24 h; data under another key ID is stale),
``kmsv2/grpc_service.go`` (the client: authority ``localhost``, per-call timeout) and the
``kmsv2PluginProbe`` of ``pkg/server/options/encryptionconfig/config.go`` (Status every
minute, every 10 s while failing; a new key ID from Status makes a new seed, encrypted by
the plugin, whose key ID must match; writes refused 3 minutes after the last good Status;
results of the health check kept 20 s when good, 3 s when not).

A new seed is written with ``HKDF_SHA256_XNONCE_AES_GCM_SEED`` (kube-apiserver's default
since 1.29); data written with a plain DEK (``AES_GCM_KEY``) is read too.

Every plugin call is asynchronous (gRPC futures fired on the reactor). Reading a value whose
DEK is not cached starts one Decrypt for it and raises ``TransformPending``: the registry
and the watch delivery wait for the answer and read again, so a slow or hung plugin delays
only the requests that need that DEK (for at most the provider's ``timeout``), never the
reactor (:mod:`apiserver.encryption.pending`).
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.encryption.config import KMSConfiguration, KMSFactory
from apiserver.encryption.generated import kmsv2_pb2, kmsv2_stored_pb2
from apiserver.encryption.grpcclient import GrpcClient, grpc_target
from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.pending import PluginCalls
from apiserver.encryption.transformers import (
    KMS_V1_PREFIX,
    KMS_V2_PREFIX,
    AESGCMTransformer,
    ExtendedNonceGCM,
    GrpcTransformError,
    Transformer,
    aggregate,
)
from apiserver.storage.value import ValueTransformError

log = Logger()

AES_GCM_KEY = 0
HKDF_SEED = 1
KEY_ID_MAX = 1024
DEK_SOURCE_MAX = 1024
ANNOTATIONS_MAX = 32 * 1024
CACHE_TTL = 24 * 3600.0
POSITIVE_INTERVAL = 60.0
NEGATIVE_INTERVAL = 10.0
WRITE_MAX_TTL = 180.0
HEALTH_POSITIVE_TTL = 20.0
HEALTH_NEGATIVE_TTL = 3.0
SEED_SIZE = 32
_FQDN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$"
)


class KMSService(Protocol):
    """The plugin (``kmsservice.Service``), every call asynchronous. Failures errback
    :class:`GrpcTransformError`."""

    def status(self) -> Deferred[tuple[str, str, str]]:
        """(version, healthz, key_id)."""
        ...

    def encrypt(self, uid: str, plaintext: bytes) -> Deferred[tuple[bytes, str, dict[str, bytes]]]:
        """(ciphertext, key_id, annotations)."""
        ...

    def decrypt(
        self, uid: str, ciphertext: bytes, key_id: str, annotations: dict[str, bytes]
    ) -> Deferred[bytes]: ...

    def close(self) -> None: ...


def key_id_hash(key_id: str) -> str:
    """``GetHashIfNotEmpty``."""
    return f"sha256:{hashlib.sha256(key_id.encode()).hexdigest()}" if key_id else ""


def validate_key_id(key_id: str) -> tuple[str, str | None]:
    """``ValidateKeyID``: (metrics code, error or None)."""
    if not key_id:
        return "empty", "keyID is empty"
    if len(key_id.encode()) > KEY_ID_MAX:
        return "too_long", (
            f"keyID is {len(key_id.encode())} bytes, which exceeds the max size of {KEY_ID_MAX}"
        )
    return "ok", None


def validate_encrypted_object(obj: Any) -> None:
    """``ValidateEncryptedObject``; raises :class:`ValueTransformError`."""
    kind = obj.encryptedDEKSourceType
    if kind not in (AES_GCM_KEY, HKDF_SEED):
        raise ValueTransformError(f"unknown encryptedDEKSourceType: {kind}")
    if not obj.encryptedData:
        raise ValueTransformError("encrypted data is empty")
    source = obj.encryptedDEKSource
    if not source:
        raise ValueTransformError(
            "failed to validate encrypted DEK source: encrypted DEK source is empty"
        )
    if len(source) > DEK_SOURCE_MAX:
        raise ValueTransformError(
            f"failed to validate encrypted DEK source: encrypted DEK source is {len(source)} "
            f"bytes, which exceeds the max size of {DEK_SOURCE_MAX}"
        )
    _, error = validate_key_id(obj.keyID)
    if error is not None:
        raise ValueTransformError(f"failed to validate key id: {error}")
    problems = []
    total = 0
    for key, value in obj.annotations.items():
        if not _FQDN.match(key):
            problems.append(
                f"annotations: Invalid value: {key!r}: should be a domain with at least two "
                "segments separated by dots"
            )
        total += len(key.encode()) + len(value)
    if total > ANNOTATIONS_MAX:
        problems.append(
            f"total size of annotations is {total}, which exceeds the max size of {ANNOTATIONS_MAX}"
        )
    if problems:
        raise ValueTransformError(f"failed to validate annotations: {aggregate(problems)}")


def cache_key(kind: int, source: bytes, key_id: str, annotations: dict[str, bytes]) -> bytes:
    """``generateCacheKey``: type, length-prefixed source and key ID, sorted annotations."""
    key_bytes = key_id.encode()
    out = [struct.pack(">IH", kind, len(source)), source, struct.pack(">H", len(key_bytes))]
    out.append(key_bytes)
    if annotations:
        out.append(struct.pack(">I", len(annotations)))
        for name in sorted(annotations):
            encoded = name.encode()
            value = annotations[name]
            out += [struct.pack(">H", len(encoded)), encoded, struct.pack(">H", len(value)), value]
    return b"".join(out)


class State:
    """The write state: the seed's transformer, its encrypted form, key ID, expiry."""

    def __init__(
        self,
        transformer: Transformer,
        key_id: str,
        source: bytes,
        annotations: dict[str, bytes],
        kind: int,
        expires: float,
        key: bytes,
    ) -> None:
        self.transformer = transformer
        self.key_id = key_id
        self.source = source
        self.annotations = annotations
        self.kind = kind
        self.expires = expires
        self.cache_key = key


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KMSv2Provider:
    """One ``kms`` provider of apiVersion v2: its transformer (this object) and its probe
    (:meth:`check`, the loop of :meth:`start`)."""

    def __init__(
        self,
        name: str,
        service: KMSService,
        clock: IReactorTime,
        metrics: EncryptionMetrics,
        apiserver_id: str = "",
    ) -> None:
        self.name = name
        self.service = service
        self.clock = clock
        self.metrics = metrics
        self.apiserver_id = apiserver_id
        self.state: State | None = None
        self.version = ""
        self._cache: dict[bytes, tuple[Transformer, float]] = {}
        self._decrypts = PluginCalls(clock)
        self._last: tuple[float, str | None] | None = None
        self._ttl = HEALTH_NEGATIVE_TTL
        self._waiters: list[Deferred[None]] | None = None
        self._loop: LoopingCall | None = None
        self._fast: Any = None
        self._closed = False

    # --- the transformer -------------------------------------------------------------

    def _cached(self, key: bytes) -> Transformer | None:
        entry = self._cache.get(key)
        if entry is None:
            return None
        transformer, expires = entry
        if self.clock.seconds() > expires:
            del self._cache[key]
            return None
        self._cache[key] = (transformer, self.clock.seconds() + CACHE_TTL)
        return transformer

    def _remember(self, key: bytes, transformer: Transformer) -> None:
        now = self.clock.seconds()
        for old in [k for k, (_, exp) in self._cache.items() if exp < now]:
            del self._cache[old]
        self._cache[key] = (transformer, now + CACHE_TTL)
        self.metrics.dek_cache_size[self.name] = len(self._cache)

    def _decrypt_dek(
        self, key: bytes, obj: Any, annotations: dict[str, bytes]
    ) -> Deferred[Transformer]:
        """Decrypt of a DEK (or seed) missing from the cache, asynchronously; the transformer
        is cached when it answers (``envelope.go`` ``addTransformerForDecryption``)."""
        self.metrics.cache_miss()
        kind = obj.encryptedDEKSourceType

        def decrypted(plain: bytes) -> Transformer:
            try:
                transformer: Transformer = (
                    ExtendedNonceGCM(plain) if kind == HKDF_SEED else AESGCMTransformer(plain)
                )
            except (ValueError, ValueTransformError) as error:
                raise ValueTransformError(str(error)) from None
            self._remember(key, transformer)
            return transformer

        def failed(failure: Failure) -> Transformer:
            error = failure.value
            if isinstance(error, GrpcTransformError):
                raise GrpcTransformError(
                    f"failed to decrypt DEK, error: {error}", error.code
                ) from None
            raise ValueTransformError(f"failed to decrypt DEK, error: {error}") from None

        d = self.service.decrypt(str(uuid.uuid4()), obj.encryptedDEKSource, obj.keyID, annotations)
        return d.addCallbacks(decrypted, failed)

    def from_storage(self, data: bytes, ad: bytes, resource: str) -> tuple[bytes, bool]:
        obj = kmsv2_stored_pb2.EncryptedObject()
        try:
            obj.ParseFromString(data)
        except Exception as error:  # google.protobuf.message.DecodeError
            raise ValueTransformError(
                f"proto: cannot parse invalid wire-format data: {error}"
            ) from None
        validate_encrypted_object(obj)
        state = self.state
        if state is None:
            raise ValueTransformError("got unexpected nil transformer")
        annotations = dict(obj.annotations)
        key = cache_key(obj.encryptedDEKSourceType, obj.encryptedDEKSource, obj.keyID, annotations)
        transformer = self._cached(key)
        if transformer is None:
            transformer = self._decrypts.wait(key, lambda: self._decrypt_dek(key, obj, annotations))
        self.metrics.key_id("from_storage", self.name, obj.keyID, self.apiserver_id)
        out, stale = transformer.from_storage(obj.encryptedData, ad, resource)
        return out, (stale or obj.keyID != state.key_id or obj.encryptedDEKSourceType != state.kind)

    def to_storage(self, data: bytes, ad: bytes, resource: str) -> bytes:
        state = self.state
        if state is None:
            raise ValueTransformError("got unexpected nil transformer")
        now = self.clock.seconds()
        if now > state.expires:
            raise ValueTransformError(
                f'encryptedDEKSource with keyID hash "{key_id_hash(state.key_id)}" expired at '
                f"{_rfc3339(state.expires)} (current time is {_rfc3339(now)})"
            )
        if state.cache_key not in self._cache:
            self._remember(state.cache_key, state.transformer)
        encrypted = state.transformer.to_storage(data, ad, resource)
        self.metrics.key_id("to_storage", self.name, state.key_id, self.apiserver_id)
        obj = kmsv2_stored_pb2.EncryptedObject(
            encryptedData=encrypted,
            keyID=state.key_id,
            encryptedDEKSource=state.source,
            annotations=state.annotations,
            encryptedDEKSourceType=state.kind,  # type: ignore[arg-type]
        )
        return obj.SerializeToString()

    # --- the probe -------------------------------------------------------------------

    def check(self) -> Deferred[None]:
        """The health check: the last result while fresh, else a Status round (which may
        rotate the seed)."""
        now = self.clock.seconds()
        if self._last is not None and now - self._last[0] < self._ttl:
            error = self._last[1]
            return fail(RuntimeError(error)) if error is not None else _fired()
        if self._waiters is not None:
            waiting: Deferred[None] = Deferred()
            self._waiters.append(waiting)
            return waiting.addCallback(lambda _: self.check())
        self._waiters = []
        d = self._probe()

        def record(error: str | None) -> None:
            waiters, self._waiters = self._waiters or [], None
            self._last = (self.clock.seconds(), error)
            self._ttl = HEALTH_POSITIVE_TTL if error is None else HEALTH_NEGATIVE_TTL
            for waiter in waiters:
                waiter.callback(None)
            if error is not None:
                raise RuntimeError(error)

        result: Deferred[None] = d.addCallback(record)
        return result

    def _probe(self) -> Deferred[str | None]:
        """One Status (and maybe Encrypt): fires with None or the check's error text."""
        try:
            status = self.service.status()
        except Exception as error:
            status = fail(error)

        def got(answer: tuple[str, str, str]) -> Deferred[str | None] | str | None:
            version, healthz, key_id = answer
            errors: list[str] = []
            if healthz != "ok":
                errors.append(f"got unexpected healthz status: {healthz}")
            if version not in ("v2", "v2beta1"):
                errors.append(f"expected KMSv2 API version v2, got {version}")
            else:
                if not self.version:
                    self.version = version
                if self.version != version:
                    errors.append(
                        "KMSv2 API version should not change after the initial status response "
                        f"version {self.version}, got {version}"
                    )
            code, key_error = validate_key_id(key_id)
            if key_error is not None:
                self.metrics.invalid_key_id(self.name, code)
                errors.append(f'got invalid KMSv2 KeyID hash "{key_id_hash(key_id)}": {key_error}')
                return self._unhealthy(errors)
            self.metrics.key_id_from_status(self.name, key_id, self.apiserver_id)
            rotated = self._rotate(key_id)

            def after(rotate_error: str | None) -> str | None:
                if rotate_error is not None:
                    errors.append(rotate_error)
                return self._unhealthy(errors)

            return rotated.addCallback(after)

        def failed(failure: Failure) -> str:
            return (
                "failed to perform status section of the healthz check for KMS Provider "
                f"{self.name}, error: {failure.getErrorMessage()}"
            )

        return status.addCallbacks(got, failed)

    def _unhealthy(self, errors: list[str]) -> str | None:
        if not errors:
            return None
        return f"kmsv2 Provider {self.name} is not healthy, error: {aggregate(errors)}"

    def _rotate(self, status_key_id: str) -> Deferred[str | None]:
        """``rotateDEKOnKeyIDChange``: extend the state while the key ID is unchanged, else
        a new seed encrypted by the plugin."""
        expires = self.clock.seconds() + WRITE_MAX_TTL
        state = self.state
        if state is not None and state.key_id == status_key_id and state.kind == HKDF_SEED:
            state.expires = expires
            return _fired(None)
        uid = str(uuid.uuid4())
        started = time.perf_counter()
        seed = os.urandom(SEED_SIZE)
        self.metrics.data_key_generated(time.perf_counter() - started, False)
        try:
            encrypting = self.service.encrypt(uid, seed)
        except Exception as error:
            encrypting = fail(error)

        def encrypted(answer: tuple[bytes, str, dict[str, bytes]]) -> str | None:
            ciphertext, key_id, annotations = answer
            probe = kmsv2_stored_pb2.EncryptedObject(
                encryptedData=b"\x00",
                keyID=key_id,
                encryptedDEKSource=ciphertext,
                annotations=annotations,
                encryptedDEKSourceType=HKDF_SEED,  # type: ignore[arg-type]
            )
            try:
                validate_encrypted_object(probe)
            except ValueTransformError as error:
                return self._rotate_failed(uid, status_key_id, key_id, str(error))
            if key_id != status_key_id:
                return self._rotate_failed(uid, status_key_id, key_id, "<nil>")
            self.state = State(
                ExtendedNonceGCM(seed),
                key_id,
                ciphertext,
                dict(annotations),
                HKDF_SEED,
                expires,
                cache_key(HKDF_SEED, ciphertext, key_id, dict(annotations)),
            )
            return None

        def failed(failure: Failure) -> str | None:
            return self._rotate_failed(
                uid, status_key_id, "", f"failed to encrypt DEK, error: {failure.getErrorMessage()}"
            )

        return encrypting.addCallbacks(encrypted, failed)

    def _rotate_failed(self, uid: str, status_key_id: str, encrypt_key_id: str, err: str) -> str:
        state = self.state
        return (
            f'failed to rotate DEK uid="{uid}", useSeed=true, '
            f"errState={'<nil>' if state is not None else 'got unexpected nil transformer'}, "
            f'errGen={err}, statusKeyIDHash="{key_id_hash(status_key_id)}", '
            f'encryptKeyIDHash="{key_id_hash(encrypt_key_id)}", '
            f'stateKeyIDHash="{key_id_hash(state.key_id if state else "")}", '
            f"expirationTimestamp={_rfc3339(state.expires) if state else '0001-01-01T00:00:00Z'}"
        )

    # --- the loop ----------------------------------------------------------------------

    def start(self) -> None:
        """``primeAndProbeKMSv2``: a check now, then every minute; after a failure every 10 s
        until one passes."""
        if self._closed or self._loop is not None:
            return
        loop = self._loop = LoopingCall(self._tick)
        loop.clock = self.clock
        loop.start(POSITIVE_INTERVAL, now=True)

    def _tick(self) -> None:
        self._last = None  # the loop always asks the plugin
        self.check().addErrback(self._failed_tick)

    def _failed_tick(self, failure: Failure) -> None:
        log.error(
            "kms plugin failed health check probe name={name}: {error}",
            name=self.name,
            error=failure.getErrorMessage(),
        )
        if self._closed:
            return
        if self._fast is None or not self._fast.active():
            self._fast = self.clock.callLater(NEGATIVE_INTERVAL, self._fast_tick)

    def _fast_tick(self) -> None:
        self._fast = None
        self._last = None
        self.check().addErrback(self._failed_tick)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        if self._fast is not None and self._fast.active():
            self._fast.cancel()
        self._fast = None

    def close(self) -> None:
        self._closed = True
        self.stop()
        self.service.close()


def _fired(value: Any = None) -> Deferred[Any]:
    d: Deferred[Any] = Deferred()
    d.callback(value)
    return d


# --- the gRPC client ----------------------------------------------------------------------


class GrpcKMSService:
    """The v2 plugin over gRPC (``kmsv2/grpc_service.go``): authority ``localhost``."""

    def __init__(
        self,
        endpoint: str,
        name: str,
        timeout: float,
        reactor: Any,
        metrics: EncryptionMetrics,
    ) -> None:
        from apiserver.encryption.generated import kmsv2_pb2_grpc

        self.client = GrpcClient(
            endpoint,
            name,
            timeout,
            reactor,
            metrics,
            kmsv2_pb2_grpc.KeyManagementServiceStub,
            "v2.KeyManagementService",
            authority="localhost",
        )

    def status(self) -> Deferred[tuple[str, str, str]]:
        d = self.client.call("Status", kmsv2_pb2.StatusRequest())
        return d.addCallback(lambda r: (r.version, r.healthz, r.key_id))

    def encrypt(self, uid: str, plaintext: bytes) -> Deferred[tuple[bytes, str, dict[str, bytes]]]:
        d = self.client.call("Encrypt", kmsv2_pb2.EncryptRequest(plaintext=plaintext, uid=uid))
        return d.addCallback(lambda r: (r.ciphertext, r.key_id, dict(r.annotations)))

    def decrypt(
        self, uid: str, ciphertext: bytes, key_id: str, annotations: dict[str, bytes]
    ) -> Deferred[bytes]:
        request = kmsv2_pb2.DecryptRequest(
            ciphertext=ciphertext, uid=uid, key_id=key_id, annotations=annotations
        )
        return self.client.call("Decrypt", request).addCallback(lambda r: bytes(r.plaintext))

    def close(self) -> None:
        self.client.close()


def grpc_kms_factory(
    reactor: Any, apiserver_id: str = ""
) -> Callable[[EncryptionMetrics, list[Any]], KMSFactory]:
    """The factory :func:`apiserver.encryption.build.build_encryption` takes: each KMS v2
    provider becomes a :class:`KMSv2Provider` over :class:`GrpcKMSService`, appended to
    ``parts`` (its status loop starts with the server); KMS v1 (allowed only with the
    ``KMSv1`` feature gate, checked before this is called) a :class:`KMSv1Provider`."""

    def bind(metrics: EncryptionMetrics, parts: list[Any]) -> KMSFactory:
        def make(config: KMSConfiguration) -> tuple[bytes, Transformer, Any]:
            if config.api_version == "v1":
                from apiserver.encryption.kmsv1 import GrpcKMSv1Service, KMSv1Provider

                v1 = KMSv1Provider(
                    config.name,
                    GrpcKMSv1Service(
                        config.endpoint, config.name, config.timeout, reactor, metrics
                    ),
                    config.cachesize or 0,
                    reactor,
                    metrics,
                )
                return KMS_V1_PREFIX + config.name.encode() + b":", v1, v1
            service = GrpcKMSService(config.endpoint, config.name, config.timeout, reactor, metrics)
            provider = KMSv2Provider(config.name, service, reactor, metrics, apiserver_id)
            parts.append(provider)
            return KMS_V2_PREFIX + config.name.encode() + b":", provider, provider

        return make

    return bind


__all__ = [
    "GrpcKMSService",
    "KMSService",
    "KMSv2Provider",
    "cache_key",
    "grpc_kms_factory",
    "grpc_target",
    "validate_encrypted_object",
]
