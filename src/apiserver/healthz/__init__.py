"""Health checks and the ``/healthz``, ``/livez`` and ``/readyz`` endpoints.

Follows k8s.io/apiserver ``pkg/server/healthz`` (the handler and the built-in checks),
``pkg/server/healthz.go`` (the three registries and the livez grace period),
``pkg/server/hooks.go`` (post-start hooks) and the etcd health probe of
``pkg/storage/storagebackend/factory/etcd3.go``. Written here rather than taken from a library:
the behaviour is small and has to match kube-apiserver byte for byte.

- :mod:`.checks`: the check value and the built-in checks (ping, log, store, shutdown,
  post-start hooks).
- :mod:`.registry`: which check belongs to which endpoint, in which order.
- :mod:`.handler`: turns a registry and a query into a :class:`~apiserver.http.response.Response`.

Nothing here touches the global reactor; every timer goes through an injected clock.
"""

from apiserver.healthz.checks import (
    HealthCheck,
    HealthCheckError,
    LogCheck,
    PostStartHooks,
    ShutdownCheck,
    StoreCheck,
    ping_check,
    run_check,
)
from apiserver.healthz.handler import all_paths, go_quote, render_endpoint, render_single
from apiserver.healthz.registry import ENDPOINTS, HealthRegistry

__all__ = [
    "ENDPOINTS",
    "HealthCheck",
    "HealthCheckError",
    "HealthRegistry",
    "LogCheck",
    "PostStartHooks",
    "ShutdownCheck",
    "StoreCheck",
    "all_paths",
    "go_quote",
    "ping_check",
    "render_endpoint",
    "render_single",
    "run_check",
]
