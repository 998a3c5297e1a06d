"""What the server builds from ``--encryption-provider-config`` and
``--encryption-provider-config-automatic-reload`` (k8s.io/apiserver
``pkg/server/options/etcd.go`` ``ApplyTo`` with ``encryptionconfig.LoadEncryptionConfig``
and, with reload, the ``start-encryption-provider-config-automatic-reload`` post-start hook
that runs the controller).

Building loads and validates the file (a bad one raises
:class:`~apiserver.encryption.config.EncryptionConfigError` and the server does not start)
but contacts no KMS plugin and schedules nothing: the plugins' status loops and the reload
controller are :attr:`Encryption.parts`, started by the server's service tree.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from apiserver.encryption.config import BuiltConfiguration, KMSFactory, load_encryption_config
from apiserver.encryption.dynamic import DynamicTransformers, ReloadController, ResourceTransformer
from apiserver.encryption.metrics import EncryptionMetrics

EVENTS = ("", "events")


@attrs.define
class Encryption:
    dynamic: DynamicTransformers
    metrics: EncryptionMetrics
    controller: ReloadController | None
    parts: list[Any]

    def transformer_for(self, resource: tuple[str, str] = EVENTS) -> ResourceTransformer:
        return self.dynamic.for_resource(resource)

    def health_checks(self) -> list[tuple[str, Callable[[], Deferred[None]]]]:
        return self.dynamic.health_checks()


def build_encryption(
    path: str,
    reload: bool,
    clock: IReactorTime,
    *,
    feature_gates: Mapping[str, bool] | None = None,
    kms_factory: Callable[[EncryptionMetrics, list[Any]], KMSFactory] | None = None,
    apiserver_id: str = "",
    metrics: EncryptionMetrics | None = None,
) -> Encryption | None:
    """None without a file (no transformer at all: the registry calls nothing)."""
    if not path:
        return None
    metrics = metrics if metrics is not None else EncryptionMetrics(clock)
    parts: list[Any] = []

    def load(into: list[Any]) -> BuiltConfiguration:
        return load_encryption_config(
            path,
            reload,
            metrics=metrics,
            kms_factory=kms_factory(metrics, into) if kms_factory is not None else None,
            feature_gates=feature_gates,
        )

    built = load(parts)
    metrics.loaded(apiserver_id, built.content_hash)
    dynamic = DynamicTransformers(built, clock, reload=reload)
    controller = None
    if reload:

        def reload_load() -> BuiltConfiguration:
            # The new plugins' loops start now: their health is checked before the swap.
            started: list[Any] = []
            new = load(started)
            for part in started:
                part.start()
            return new

        controller = ReloadController(
            path, dynamic, reload_load, clock, metrics, apiserver_id=apiserver_id
        )
    return Encryption(dynamic, metrics, controller, parts)


__all__ = ["EVENTS", "Encryption", "build_encryption"]
