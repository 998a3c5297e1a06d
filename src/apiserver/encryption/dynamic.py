"""The encryption configuration in force, its health checks and its automatic reload.

Follows k8s.io/apiserver ``pkg/server/options/encryptionconfig/config.go``
(``DynamicTransformers``: one swap replaces every resource's transformers at once; the KMS
connections of the replaced configuration are closed after ``KMSCloseGracePeriod``; the
``kms-providers`` / ``kms-provider-<i>`` health checks) and
``encryptionconfig/controller/controller.go`` (every minute the file's ``sha256:`` hash is
compared with the last loaded one; a changed file is loaded with the reload rules, its KMS
plugins must pass their health check within max(10 s, the grace period), polled every
100 ms, and only then does it take effect; a failure keeps the old configuration, is
logged and counted, and is retried with backoff).

Nothing here blocks: reads of the file are small and done on the reactor, as the file is
read once a minute; KMS checks are Deferreds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.encryption.config import (
    BuiltConfiguration,
    EncryptionConfigError,
    GroupResource,
    group_resource_string,
    read_file,
)
from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.transformers import Transformer, aggregate

log = Logger()

KMS_PROVIDERS_CHECK = "kms-providers"
RELOAD_HOOK = "start-encryption-provider-config-automatic-reload"
POLL_INTERVAL = 60.0
MIN_CLOSE_GRACE_PERIOD = 10.0
HEALTH_POLL_INTERVAL = 0.1


class Probe(Protocol):
    """A KMS plugin's health probe (``kmsPluginProbe`` / ``kmsv2PluginProbe``)."""

    name: str

    def check(self) -> Deferred[None]: ...

    def close(self) -> None: ...


def combined_check(probes: list[Any]) -> Callable[[], Deferred[None]]:
    """``kmsHealthChecker``: every probe, failures as ``kms-provider-<i>: <error>``,
    aggregated (no probe: passes)."""

    def check() -> Deferred[None]:
        if not probes:
            return succeed(None)
        results = DeferredList(
            [probe.check() for probe in probes], consumeErrors=True, fireOnOneErrback=False
        )

        def done(outcome: list[tuple[bool, Any]]) -> None:
            errors = [
                f"kms-provider-{index}: {value.getErrorMessage()}"
                for index, (ok, value) in enumerate(outcome)
                if not ok
            ]
            if errors:
                raise RuntimeError(aggregate(errors))

        return results.addCallback(done)

    return check


def single_check(probe: Any) -> Callable[[], Deferred[None]]:
    def check() -> Deferred[None]:
        return probe.check()

    return check


class DynamicTransformers:
    """The configuration in force; ``set`` swaps it (the reload controller is the only
    caller). Listeners hear of a swap (the registry forgets what it decoded, so that a
    rotation's rewrite sees every value read by an old key as stale)."""

    def __init__(
        self,
        built: BuiltConfiguration,
        clock: IReactorTime,
        *,
        reload: bool = False,
    ) -> None:
        self.built = built
        self.clock = clock
        self.reload = reload
        self.generation = 0
        self._listeners: list[Callable[[], None]] = []
        self._closing: list[Any] = []

    def for_resource(self, resource: GroupResource) -> ResourceTransformer:
        return ResourceTransformer(self, resource)

    def on_change(self, listener: Callable[[], None]) -> None:
        self._listeners.append(listener)

    def set(self, built: BuiltConfiguration) -> None:
        old = self.built
        self.built = built
        self.generation += 1
        for listener in self._listeners:
            listener()
        call = self.clock.callLater(max(old.close_grace_period, 0.0), old.close)
        self._closing.append(call)

    def health_checks(self) -> list[tuple[str, Callable[[], Deferred[None]]]]:
        """The checks registered on healthz and readyz (``LoadEncryptionConfig``): with
        reload, or with only KMS v2 plugins, one ``kms-providers`` check; otherwise one
        ``kms-provider-<i>`` per plugin, in file order."""
        built = self.built
        if self.reload:

            def current() -> Deferred[None]:
                return combined_check(self.built.probes)()

            return [(KMS_PROVIDERS_CHECK, current)]
        if built.kms_v2_used and not built.kms_v1_used:
            return [(KMS_PROVIDERS_CHECK, combined_check(built.probes))]
        return [
            (f"kms-provider-{index}", single_check(probe))
            for index, probe in enumerate(built.probes)
        ]

    def close(self) -> None:
        for call in self._closing:
            if call.active():
                call.cancel()
        self._closing.clear()
        self.built.close()


class ResourceTransformer:
    """One resource's view of :class:`DynamicTransformers` (``resourceTransformer``), the
    :class:`~apiserver.storage.value.ValueTransformer` the registry holds. The lookup of
    the resource's rule is redone only after a swap."""

    def __init__(self, dynamic: DynamicTransformers, resource: GroupResource) -> None:
        self.dynamic = dynamic
        self.resource = resource
        self.label = group_resource_string(resource) if resource[0] else resource[1]
        self._generation = -1
        self._current: Transformer | None = None

    def _transformer(self) -> Transformer:
        dynamic = self.dynamic
        if self._generation != dynamic.generation or self._current is None:
            self._current = dynamic.built.transformer_for(self.resource)
            self._generation = dynamic.generation
        return self._current

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        return self._transformer().from_storage(data, key, self.label)

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        return self._transformer().to_storage(data, key, self.label)


class ReloadController:
    """``DynamicEncryptionConfigContent``: polls the file's hash and applies a valid change."""

    def __init__(
        self,
        path: str,
        dynamic: DynamicTransformers,
        load: Callable[[], BuiltConfiguration],
        clock: IReactorTime,
        metrics: EncryptionMetrics,
        apiserver_id: str = "",
        interval: float = POLL_INTERVAL,
    ) -> None:
        self.path = path
        self.dynamic = dynamic
        self.load = load
        self.clock = clock
        self.metrics = metrics
        self.apiserver_id = apiserver_id
        self.interval = interval
        self.last_hash = dynamic.built.content_hash
        self._loop: LoopingCall | None = None
        self._busy = False
        self._failures = 0
        self._retry: Any = None

    def start(self) -> None:
        log.info("Starting controller name=encryption-provider-config-automatic-reload-controller")
        loop = self._loop = LoopingCall(self.process)
        loop.clock = self.clock
        loop.start(self.interval, now=True)

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        log.info(
            "Shutting down controller name=encryption-provider-config-automatic-reload-controller"
        )

    def process(self) -> Deferred[None] | None:
        """One look at the file; a Deferred while new KMS plugins are being checked."""
        if self._busy:
            return None
        try:
            _, digest = read_file(self.path)
        except EncryptionConfigError as error:
            self._failed(str(error))
            return None
        if digest == self.last_hash:
            return None
        try:
            built = self.load()
        except EncryptionConfigError as error:
            self._failed(str(error))
            return None
        if built.content_hash == self.last_hash:
            built.close()
            return None
        self._busy = True
        d = self._wait_healthy(built)

        def healthy(_: object) -> None:
            self._busy = False
            self._failures = 0
            self.dynamic.set(built)
            self.last_hash = built.content_hash
            self.metrics.reload(True, self.apiserver_id, built.content_hash)
            log.info(
                "Loaded new kms encryption config content "
                "name=encryption-provider-config-automatic-reload-controller"
            )

        def unhealthy(failure: Failure) -> None:
            self._busy = False
            built.close()
            self._failed(failure.getErrorMessage())

        d.addCallbacks(healthy, unhealthy)
        return d

    def _failed(self, message: str) -> None:
        self.metrics.reload(False, self.apiserver_id)
        log.error(
            "error processing encryption config file {path}: {message}",
            path=self.path,
            message=message,
        )
        # The workqueue's rate limiter: 5 ms doubling, at most the poll interval here.
        self._failures += 1
        delay = min(0.005 * 2 ** (self._failures - 1), self.interval)
        if self._retry is None or not self._retry.active():
            self._retry = self.clock.callLater(delay, self.process)

    def _wait_healthy(self, built: BuiltConfiguration) -> Deferred[None]:
        """``validateNewTransformersHealth``: poll every 100 ms, at most the grace period."""
        check = combined_check(built.probes)
        limit = max(built.close_grace_period, MIN_CLOSE_GRACE_PERIOD)
        deadline = self.clock.seconds() + limit
        result: Deferred[None] = Deferred()
        last_error: list[str] = [""]

        def attempt() -> None:
            check().addCallbacks(passed, failed)

        def passed(_: object) -> None:
            result.callback(None)

        def failed(failure: Failure) -> None:
            last_error[0] = failure.getErrorMessage()
            if self.clock.seconds() + HEALTH_POLL_INTERVAL > deadline:
                result.errback(
                    RuntimeError(
                        "health check for new transformers failed, polling error timed out "
                        f"waiting for the condition: {last_error[0]}"
                    )
                )
                return
            self.clock.callLater(HEALTH_POLL_INTERVAL, attempt)

        attempt()
        return result


__all__ = [
    "KMS_PROVIDERS_CHECK",
    "RELOAD_HOOK",
    "DynamicTransformers",
    "ReloadController",
    "ResourceTransformer",
    "combined_check",
]
