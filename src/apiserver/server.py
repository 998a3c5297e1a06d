"""Assembles the server from a validated :class:`~apiserver.options.ServerConfig`.

Building has no side effects: no file is written, no global replaced, no call scheduled, no
thread started. Everything that does one of those is a child of :attr:`Server.root`, an
:class:`~apiserver.service.ordered.OrderedService` whose children start in this order and
stop in reverse, one after another (kube-apiserver's ``preparedGenericAPIServer.Run``,
k8s.io/apiserver/pkg/server/genericapiserver.go, starts storage, then serving, then the
post-start hooks, and tears down in the opposite order):

``log-flush``
    ``-v`` and the ``--log-flush-frequency`` loop (:mod:`apiserver.logs`).
``healthz``
    the ``log`` check's flush loop.
``store``
    the backend (with its TTL expiry call, for the in-memory store); its periodic
    maintenance runs in the next children, which it declares (``Store.maintenance``).
``ttl-sweeper``
    the SQLite TTL sweeper (every second, first as soon as the store is up).
``compaction``
    the periodic compactor (the etcd one is kube-apiserver's,
    k8s.io/apiserver/pkg/storage/etcd3/compact.go), unless ``--store-compaction-interval=0``.
``watch-cache``
    the :class:`~apiserver.storage.cacher.Cacher` (unless ``--watch-cache=false``).
``encryption-kms``, ``encryption-reload``
    with ``--encryption-provider-config``: the KMS v2 plugins' status loops, and the
    automatic reload controller (:mod:`apiserver.encryption`).
``auth-reload``
    ``--authorization-config`` and ``--authentication-config`` reloaders, OIDC key loaders.
``storage-metrics``
    the object-count and database-size pollers, once storage is ready.
``http2``
    the process-wide HTTP/2 connection class (unless ``--disable-http2-serving``).
``audit-log``, ``audit-webhook``
    the audit backends (:mod:`apiserver.audit.build`), when a policy and a backend are
    configured: started before the listener, drained after it.
``serving-certs``
    the self-signed pair in ``--cert-dir`` when no certificate is given, and the TLS context.
``listener``
    the TLS port.
``post-start-hooks``
    the hooks, and their timers.
``lifecycle``
    the graceful-shutdown sequence and its ``--shutdown-delay-duration`` timer.
``sd-notify``
    only when ``$NOTIFY_SOCKET`` is set: ``READY=1`` once readyz first passes, ``STATUS=``
    lines, ``STOPPING=1`` and the ``WATCHDOG=1`` loop for systemd
    (:mod:`apiserver.service.sdnotify`).

Signal handlers are process state too: :mod:`apiserver.tap` installs them
(:func:`apiserver.service.signals.install_signal_handlers`) once the reactor runs.

Health checks registered, in kube-apiserver's order: ``ping``, ``log``, the store check
(``etcd`` for the etcd backend, ``sqlite`` for the embedded one) on all three endpoints, its
readiness twin (``etcd-readiness`` / ``sqlite-readiness``) on readyz only,
``poststarthook/<name>`` for each real start-up hook, and ``shutdown`` last on readyz.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
from typing import Any, cast

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.admission.config import build_admission
from apiserver.api.events import corev1
from apiserver.api.events.rest import BASE, CORE_V1, GR, EventsAPI
from apiserver.api.flowcontrol import FlowControlAPI, discovery_group
from apiserver.api.flowcontrol.controller import ConfigController
from apiserver.api.flowcontrol.ensurer import Ensurer
from apiserver.api.flowcontrol.rest import BASE as FLOWCONTROL_BASE
from apiserver.api.flowcontrol.rest import KINDS as FLOWCONTROL_KINDS
from apiserver.api.reviews import AUTHENTICATION_BASE, AUTHORIZATION_BASE, ReviewsAPI
from apiserver.api.reviews import discovery_groups as review_groups
from apiserver.api.serviceaccounts import GR as SERVICE_ACCOUNTS_GR
from apiserver.api.serviceaccounts import SERVICE_ACCOUNTS
from apiserver.api.serviceaccounts import STORAGE as SERVICE_ACCOUNTS_STORAGE
from apiserver.api.tokenrequest import install_token_request
from apiserver.apimachinery.uid import new_uuid
from apiserver.audit.build import build_audit
from apiserver.auth import build_auth
from apiserver.auth.authn import api_audiences, install_authn_routes
from apiserver.auth.authn.x509 import X509Authenticator
from apiserver.console import console_handler
from apiserver.debug import install_debug
from apiserver.discovery import install_discovery, runtime_config_enables_events
from apiserver.discovery.documents import ExtraGroup
from apiserver.encryption.build import EVENTS as ENCRYPTED_EVENTS
from apiserver.encryption.build import Encryption, build_encryption
from apiserver.encryption.dynamic import RELOAD_HOOK, ResourceTransformer
from apiserver.flowcontrol.bootstrap import API_VERSION as FLOWCONTROL_API_VERSION
from apiserver.flowcontrol.build import build_flow_control
from apiserver.healthz import (
    HealthCheck,
    HealthRegistry,
    LogCheck,
    PostStartHooks,
    ShutdownCheck,
    StoreCheck,
    all_paths,
    ping_check,
    render_endpoint,
    render_single,
)
from apiserver.http.app import App, Handler, RequestInfo, Router, ServingPolicy
from apiserver.http.chain import build_handler_chain
from apiserver.http.goaway import ProbabilisticGoaway
from apiserver.http.h2 import configure_http2
from apiserver.http.info_routes import index_handler, version_handler
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.http.site import ApiSite
from apiserver.logs import LogFlushService, request_logging, set_verbosity
from apiserver.metrics import AuditRecorder, Metrics, StorageMetricsPoller
from apiserver.metrics.labels import LabelPolicy
from apiserver.metrics.runtime import WorkerInfoCollector
from apiserver.metrics.slis import HealthSLIs
from apiserver.metrics.storage import (
    STORAGE_SERIES,
    StorageCollector,
    StoreTimings,
    TimedStore,
)
from apiserver.metrics.watchcache import WatchCacheCollector
from apiserver.openapi import install_openapi
from apiserver.options import ServerConfig, ineffective_flags
from apiserver.options.files import load_config_files
from apiserver.registry.store import Registry
from apiserver.service.health import HealthService
from apiserver.service.http2 import Http2Service
from apiserver.service.lifecycle import Lifecycle, LifecycleService
from apiserver.service.listener import ListenerService
from apiserver.service.maintenance import PeriodicTaskService
from apiserver.service.ordered import OrderedService
from apiserver.service.parts import PartsService
from apiserver.service.poststart import PostStartService
from apiserver.service.sdnotify import notify_service
from apiserver.service.serving import ServingCertService, default_host
from apiserver.service.store import CacherService, StoreService
from apiserver.storage.cacher import Cacher
from apiserver.storage.interface import Store
from apiserver.tracing import TracedStore, Tracing, TracingApp
from apiserver.version import kube_component_version, version_info

log = Logger()


def hsts_value(directives: list[str]) -> str | None:
    """``max-age=1,includeSubDomains`` becomes ``max-age=1; includeSubDomains``."""
    return "; ".join(directives) if directives else None


#: Seconds one etcd call may take before the request fails (kube-apiserver waits for the
#: request's own deadline; we fail sooner so that a frozen etcd does not pile requests up).
ETCD_REQUEST_TIMEOUT = 5.0


EVENTS_RESOURCES = ("/events", "events.k8s.io/events", "events")


def events_servers(config: ServerConfig) -> list[str]:
    """``--store-servers``, unless ``--store-servers-overrides`` moves events elsewhere.

    An override ``group/resource#url;url`` for core ``/events`` or ``events.k8s.io/events``
    (they share one storage location in kube-apiserver) wins for the only resource we store.
    """
    for override in config.store_servers_overrides or ():
        resource, _, servers = str(override).partition("#")
        if resource in EVENTS_RESOURCES:
            return [s for s in servers.split(";") if s]
    return list(config.store_servers or ())


def make_store(config: ServerConfig, reactor: Any, worker: tuple[int, int] | None = None) -> Store:
    """The configured backend (its ``kind`` names its health check).

    ``worker`` is ``(index, count)`` in a worker process of ``--workers``: etcd needs nothing
    (each worker is one more etcd client, like several kube-apiservers); the embedded store
    is opened shared, and only worker 0 runs its TTL sweeper and compactor (one sweeper, not a
    race of N over the same expired keys)."""
    servers = events_servers(config)
    if servers:
        from apiserver.storage.etcd3 import Etcd3Store

        # Several workers are several etcd clients; one compactor (worker 0's) is enough,
        # though kube-apiserver's election through compact_rev_key would make more safe.
        compacts = worker is None or worker[0] == 0
        store: Store = Etcd3Store(
            servers,
            reactor,
            ca_file=config.store_cafile or None,
            cert_file=config.store_certfile or None,
            key_file=config.store_keyfile or None,
            lease_reuse_seconds=config.lease_reuse_duration_seconds,
            compaction_interval=config.store_compaction_interval if compacts else 0,
            health_key=(config.store_prefix.rstrip("/") + "/health").encode(),
            # A frozen etcd must not hold requests for the whole --request-timeout: each store
            # call gives up after this, and the request fails with a 5xx Status.
            request_timeout=ETCD_REQUEST_TIMEOUT,
            # The compactor is a child service of the server's tree (Server.__init__).
            run_maintenance=False,
        )
        return store
    from apiserver.storage.sqlite import SqliteStore

    # --data-dir is created when the store service starts (StoreService ``prepare``).
    path = os.path.join(config.data_dir, "store.db")
    # The TTL sweeper and the compactor are child services of the server's tree.
    if worker is not None and worker[1] > 1:
        maintains = worker[0] == 0
        return SqliteStore(
            path,
            reactor,
            compaction_interval=config.store_compaction_interval if maintains else 0,
            sweep_interval=1.0 if maintains else 0,
            run_maintenance=False,
            worker=worker,
            writer="process",
        )
    # The writer in a process of its own, off the reactor's interpreter lock
    # (apiserver.storage.sqlite.writer_process).
    return SqliteStore(
        path,
        reactor,
        compaction_interval=config.store_compaction_interval,
        run_maintenance=False,
        writer="process",
    )


def watch_cache_enabled(config: ServerConfig, resource: str = "events") -> bool:
    """``--watch-cache`` (default on) unless ``--watch-cache-sizes`` gives the resource size 0.

    kube-apiserver turns the cache off for events (``DefaultWatchCacheSizes`` in
    k8s.io/kubernetes/pkg/kubeapiserver/default_storage_factory_builder.go); we keep it on
    (one store watch fanned out to every client watch) with bounded memory.
    """
    if not config.watch_cache:
        return False
    for entry in config.watch_cache_sizes or ():
        name, _, size = str(entry).partition("#")
        if name.split(".")[0] == resource and size.strip() == "0":
            return False
    return True


def make_cacher(config: ServerConfig, store: Store, clock: IReactorTime) -> Cacher | None:
    if not watch_cache_enabled(config):
        return None
    prefix = (config.store_prefix.rstrip("/") + "/events/").encode()
    return Cacher(store, [prefix], clock)


class Server:
    """Every part of a running server, built but not started (see the module docstring)."""

    def __init__(
        self,
        config: ServerConfig,
        reactor: Any,
        store: Store | None = None,
        environ: Mapping[str, str] | None = None,
        worker: tuple[int, int] | None = None,
    ) -> None:
        self.config = config
        #: ``(index, count)`` when this process is a worker of ``--workers`` (apiserver.workers).
        self.worker = worker
        #: The storage-readiness wait, once started (:meth:`_storage_readiness`).
        self._readiness: Deferred[None] | None = None
        self.reactor = reactor
        clock: IReactorTime = reactor
        self.root = OrderedService()
        self.root.add(
            LogFlushService(
                clock, int(config.v or 0), config.log_flush_frequency, config.vmodule or ()
            )
        )

        prepare = None
        if store is None:
            store = make_store(config, reactor, worker)
            if store.kind == "sqlite":
                data_dir = config.data_dir

                def prepare() -> None:
                    os.makedirs(data_dir, exist_ok=True)

        backend = store.kind
        #: The backend itself, before any wrapper (the full-disk counter hooks into it).
        self.backend_store = store
        # etcd_request_duration_seconds and friends (apiserver.metrics.storage): the backend's
        # calls are timed below the watch cache, unless --disabled-metrics names all three.
        self.store_timings: StoreTimings | None = None
        if not set(STORAGE_SERIES) <= set(config.disabled_metrics or ()):
            self.store_timings = StoreTimings(config.store_prefix.encode())
            store = cast(Store, TimedStore(store, self.store_timings, clock))
        self.cacher = make_cacher(config, store, clock)
        self.store_service = StoreService(store, clock, prepare=prepare)
        self.cacher_service = (
            CacherService(self.cacher, self.store_service) if self.cacher is not None else None
        )

        # Health checks.
        self.health = HealthRegistry(clock, config.livez_grace_period)
        self.health.add(ping_check())
        self.log_check = LogCheck(clock)
        self.health.add(self.log_check)
        self.root.add(HealthService(self.log_check))
        self.root.add(self.store_service)
        # Its periodic maintenance starts once it is up and stops before it (a store given
        # to the server that runs its own declares none).
        for task in store.maintenance():
            self.root.add(PeriodicTaskService(task, clock, after=self.store_service.wait_ready))
        if self.cacher_service is not None:
            self.root.add(self.cacher_service)
        self.store_check = StoreCheck(
            backend,
            self.store_service.check(ready=False, serving=self._storage_serving),
            config.store_healthcheck_timeout,
            clock,
            backend=backend,
        )
        self.health.add(self.store_check)
        self.store_ready_check = StoreCheck(
            f"{backend}-readiness",
            self.store_service.check(ready=True, serving=self._storage_serving),
            config.store_readycheck_timeout,
            clock,
            backend=backend,
        )
        self.health.add(self.store_ready_check, healthz=False, livez=False)
        self.hooks = PostStartHooks(clock, on_fatal=self._hook_failed)
        self.post_start = PostStartService(self.hooks, clock, announce=self._announce)
        self._add_hook("storage-readiness", self._storage_readiness)
        # The files of flags read nowhere else (--tracing-config-file, the kubelet client and
        # front-proxy PEM files, ...): a missing or invalid one stops start-up here, naming
        # the flag and the file (apiserver.options.files).
        self.config_files = load_config_files(config.values)
        # --tracing-config-file (apiserver.tracing): nothing is built without it.
        self.tracing = (
            Tracing(self.config_files.tracing, f"apiserver-{uuid.uuid4()}", reactor)
            if self.config_files.tracing is not None
            else None
        )
        # Encryption at rest (--encryption-provider-config): a bad file stops start-up here
        # (an EncryptionConfigError, a ValueError naming the file); None without the flag.
        self.encryption = self._build_encryption(config, reactor)
        self.shutdown_check = ShutdownCheck()
        self.health.add_last_readyz(self.shutdown_check)

        # HTTP.
        self.router = Router()
        self._install_routes()
        self.store = self.cacher if self.cacher is not None else store
        if self.tracing is not None:
            self.store = TracedStore(self.store, self.tracing)
        self.events_enabled = runtime_config_enables_events(config.runtime_config or {})
        policy = ServingPolicy(
            request_timeout=config.request_timeout,
            hsts=hsts_value(list(config.strict_transport_security_directives)),
            cors_origins=[re.compile(p) for p in config.cors_allowed_origins],
            log_requests=request_logging(config.v, config.vmodule or ()),
        )
        self.lifecycle = Lifecycle(
            clock,
            shutdown_delay=config.shutdown_delay_duration,
            send_retry_after=config.shutdown_send_retry_after,
            watch_grace=config.shutdown_watch_termination_grace_period,
            request_timeout=config.request_timeout,
            stop_listening=self._stop_listening,
            stop_process=self._stop_process,
            on_initiated=self._shutdown_initiated,
        )
        # Metrics (apiserver.metrics.labels): a bad --allow-metric-labels-manifest stops
        # start-up here (a ManifestError, a ValueError naming the flag and the file).
        self.metrics = Metrics(
            policy=LabelPolicy.from_flags(
                config.disabled_metrics or (),
                config.show_hidden_metrics_for_version or "",
                config.allow_metric_labels or {},
                config.allow_metric_labels_manifest or "",
            ),
            git_version=config.version,
        )
        self.metrics.bind_fast_path()
        if worker is not None:
            self.metrics.registry.register(WorkerInfoCollector(worker[0], worker[1]))
        if self.store_timings is not None:
            self.metrics.registry.register(
                StorageCollector(self.store_timings, self.metrics.policy.enabled)
            )
        if self.encryption is not None:
            self.metrics.registry.register(self.encryption.metrics)
        if self.cacher is not None:
            # Events are stored as core Events: the reference's cacher labels them "", events.
            self.metrics.registry.register(
                WatchCacheCollector(
                    self.cacher.stats, lambda prefix: ("", "events"), self.metrics.policy.enabled
                )
            )
        # Admission plugins (apiserver.admission.config): a bad --admission-control-config-file
        # stops start-up here (an AdmissionConfigError, a ValueError naming the file).
        self.admission = build_admission(
            clock,
            enable=config.enable_admission_plugins,
            disable=config.disable_admission_plugins,
            legacy=config.admission_control,
            config_file=config.admission_control_config_file,
        )
        auth_stages = self.auth_stages = build_auth(config, reactor, self.store)
        self._observe_client_certificates(auth_stages.authentication.authenticator)
        # Audit (--audit-policy-file): a bad policy stops start-up here (a ValueError).
        self.audit = build_audit(config, reactor, AuditRecorder(self.metrics), worker)
        audit_stage = self.audit.stage if self.audit is not None else None
        if audit_stage is not None:
            auth_stages.authentication.on_failure = audit_stage.authentication_failed
        self.flow_control = build_flow_control(
            config, clock, self.metrics, self.router, lambda r: self._object_count(r)
        )
        self._install_flowcontrol()
        self.app = build_handler_chain(
            self.router,
            clock,
            policy,
            gate=self.lifecycle,
            metrics=self.metrics if self.metrics.records_requests else None,
            auth=auth_stages,
            audit=audit_stage,
            # --goaway-chance (WithProbabilisticGoaway): only when HTTP/2 is served.
            goaway=(
                ProbabilisticGoaway(config.goaway_chance)
                if config.goaway_chance > 0 and not config.disable_http2_serving
                else None
            ),
            flow_control=self.flow_control.stage,
            tracing=self.tracing.stage if self.tracing is not None else None,
            # The operator console at /ui/ (docs/console.md): one prefix test on non-API paths.
            console=console_handler(),
        )
        self.root.add(PartsService("auth-reload", auth_stages.background))
        self.router.add("/metrics", self.metrics.handler(profiling=bool(config.profiling)))
        self.slis = HealthSLIs()
        self.health.observe = self.slis.observe
        self.router.add("/metrics/slis", self.slis.handler(profiling=bool(config.profiling)))
        # /debug/pprof and /debug/flags (--profiling), /logs (--enable-logs-handler).
        self.debug = install_debug(
            self.router,
            reactor,
            profiling=bool(config.profiling),
            contention=bool(config.contention_profiling),
            logs_handler=bool(config.enable_logs_handler),
            set_verbosity=self._set_verbosity,
        )
        self.storage_metrics = StorageMetricsPoller(
            self.metrics,
            clock,
            count=lambda: self.store.count(self.store_prefix_events()),
            db_size=store.db_size,
            endpoint=",".join(events_servers(config)) or config.data_dir,
            count_period=config.store_count_metric_poll_period,
            db_period=config.store_db_metric_poll_interval,
        )
        self.root.add(
            PartsService("storage-metrics", [self.storage_metrics], after=self.wait_storage_ready)
        )
        from apiserver.storage.sqlite import SqliteStore

        backend_store = self.backend_store
        if isinstance(backend_store, SqliteStore):  # a full disk is counted (issue 17)
            backend_store.on_out_of_space = self.metrics.storage_out_of_space.labels(
                self.storage_metrics.endpoint
            ).inc
        if not config.disable_http2_serving:
            self.root.add(Http2Service(config.http2_max_streams_per_connection, configure_http2))
        # Audit backends start before the listener and are drained after it stops.
        if self.audit is not None:
            for service in self.audit.services():
                self.root.add(service)
        if self.tracing is not None:
            self.root.add(self.tracing)
        if config.debug_socket_path:
            # One socket per worker: worker i answers on the path with ".i" appended.
            socket_path = config.debug_socket_path
            if worker is not None:
                socket_path = f"{socket_path}.{worker[0]}"
            self.root.add(self.debug.socket_service(socket_path, reactor))
        self.serving = ServingCertService(config)
        self.root.add(self.serving)
        site_app = self.app if self.tracing is None else cast(App, TracingApp(self.app))
        self.site = ApiSite(site_app, log_requests=policy.log_requests, reactor=reactor)
        self.listener = ListenerService(
            self.site,
            self.serving.context,
            config.secure_port,
            config.bind_address,
            reuse_port=config.permit_port_sharing or worker is not None,
            reactor=reactor,
            max_bytes_per_second=int(config.max_connection_bytes_per_sec or 0),
            on_handshake_error=self.metrics.tls_handshake_errors.inc,
            # A worker joins the shared port once it can serve (listener.py says why).
            listen_after=self._storage_readiness if worker is not None else None,
            on_listen_failed=self._listen_failed,
        )
        self.root.add(self.listener)
        self.root.add(self.post_start)
        self.root.add(LifecycleService(self.lifecycle))
        # systemd's notification socket, read from the environment now but opened at start.
        self.sd_notify = notify_service(
            os.environ if environ is None else environ,
            clock,
            self.health,
            storage_ready=self.wait_storage_ready,
            serving_address=self._listening_address,
        )
        if self.sd_notify is not None:
            self.root.add(self.sd_notify)
        self._install_api()

    # --- construction helpers ----------------------------------------------------------

    def _build_encryption(self, config: ServerConfig, reactor: Any) -> Encryption | None:
        """The transformers, KMS health checks (healthz and readyz, as
        k8s.io/apiserver pkg/server/options/etcd.go adds them) and, with automatic reload,
        the post-start hook that starts the controller."""
        from apiserver.encryption.kmsv2 import grpc_kms_factory

        # The server's identity in the KMS metrics' apiserver_id_hash (hashed there), as
        # k8s.io/apiserver pkg/server/config.go names a server "apiserver-<uuid>".
        apiserver_id = f"apiserver-{uuid.uuid4()}"
        encryption = build_encryption(
            config.encryption_provider_config,
            bool(config.encryption_provider_config_automatic_reload),
            reactor,
            feature_gates=config.feature_gates,
            kms_factory=grpc_kms_factory(reactor, apiserver_id),
            apiserver_id=apiserver_id,
        )
        if encryption is None:
            return None
        for name, check in encryption.health_checks():
            self.health.add(HealthCheck(name, check), livez=False)
        self.root.add(PartsService("encryption-kms", encryption.parts))
        controller = encryption.controller
        if controller is not None:
            self.root.add(PartsService("encryption-reload", [_Stopper(controller)]))

            def start_reload() -> None:
                controller.start()

            self._add_hook(RELOAD_HOOK, start_reload)
        return encryption

    def _add_hook(self, name: str, hook: Any) -> None:
        check = self.hooks.add(name, hook)
        self.health.add(check, boot_sequence=True)

    def wait_storage_ready(self) -> Deferred[None]:
        """Fires once the store has started and the watch cache (if any) has its first list."""
        if self.cacher_service is not None:
            return self.cacher_service.wait_ready()
        return self.store_service.wait_ready()

    def _storage_serving(self) -> bool:
        # The store checks say "not yet established" until the watch cache serves too.
        return self.cacher_service is None or self.cacher_service.started

    def _storage_readiness(self) -> Deferred[None]:
        """Wait for the store, at most ``--storage-initialization-timeout``, then go on.

        One wait (one timer, one warning when it expires) for its two callers, the
        ``storage-readiness`` hook and a worker's listener; each gets its own Deferred, so the
        listener stopping (cancelling its own) leaves the hook's alone."""
        if self._readiness is None:
            self._readiness = self._wait_storage_readiness()
        mine: Deferred[None] = Deferred()

        def fire(result: object) -> object:
            if not mine.called:
                mine.callback(None)
            return result

        self._readiness.addBoth(fire)
        return mine

    def _wait_storage_readiness(self) -> Deferred[None]:
        waited = self.wait_storage_ready()
        timeout = self.config.storage_initialization_timeout
        result: Deferred[None] = Deferred()
        calls = self.post_start.calls

        def expired() -> None:
            if not result.called:
                log.warn("Deadline exceeded while waiting for storage readiness... ignoring")
                result.callback(None)

        timer = calls.later(timeout, expired)

        def ready(_: object) -> None:
            calls.cancel(timer)
            if not result.called:
                result.callback(None)

        waited.addCallback(ready)
        return result

    def _hook_failed(self, name: str, failure: Failure) -> None:
        # kube-apiserver treats a failing post-start hook as fatal (klog.Fatalf).
        log.failure("post-start hook {name} failed; exiting", failure, name=name)
        self.reactor.callLater(0, os._exit, 1)

    def _install_routes(self) -> None:
        router = self.router
        for endpoint in ("healthz", "livez", "readyz"):
            router.add(f"/{endpoint}", self._health_handler(endpoint))
            router.add_prefix(f"/{endpoint}/", self._single_check_handler(endpoint))
        # --emulated-version and --min-compatibility-version are reflected in /version's
        # emulation fields (k8s.io/component-base compatibility).
        version = version_handler(
            version_info(
                self.config.version or _default_version(),
                emulated=kube_component_version(self.config.emulated_version or ()),
                min_compatibility=kube_component_version(
                    self.config.min_compatibility_version or ()
                ),
            )
        )
        router.add("/version", version)
        router.add("/version/", version)
        router.add("/", index_handler(self._paths))

    def _install_api(self) -> None:
        """Discovery, OpenAPI, the TokenRequest API (with a signing key and an issuer), the
        review APIs, core/v1 ServiceAccounts, core/v1 events and (unless ``--runtime-config``
        turns it off) events.k8s.io/v1 events, both views over one registry (kube-apiserver's
        cohabiting event storage)."""
        config = self.config
        self.token_request = install_token_request(
            self.router, config, self.store, self.reactor, self.admission.admission
        )
        extra_groups = []
        if self.flow_control.apf is not None:
            extra_groups.append(ExtraGroup(*discovery_group()))
        # authentication.k8s.io/v1 and authorization.k8s.io/v1: the review APIs.
        stages = self.auth_stages
        reviews = ReviewsAPI(
            self.reactor,
            lambda: stages.authorization.authorizer,
            getattr(stages.authentication.authenticator, "tokens", None),
            api_audiences(config),
            self.admission.admission,
        )
        self.router.add_prefix(AUTHENTICATION_BASE, reviews.handle)
        self.router.add_prefix(AUTHORIZATION_BASE, reviews.handle)
        # Discovery lists groups by priority (k8s.io/kubernetes pkg/controlplane/apiserver/
        # aggregator.go): authentication.k8s.io 17700, authorization.k8s.io 17600, then
        # flowcontrol.apiserver.k8s.io 16100.
        extra_groups[:0] = [ExtraGroup(*group) for group in review_groups()]
        install_discovery(
            self.router,
            groups_enabled={"events.k8s.io/v1": self.events_enabled},
            server_address=self._server_address,
            token_request=self.token_request,
            core_events=True,
            extra_groups=extra_groups,
            service_accounts=True,
        )
        install_authn_routes(self.router, config)
        install_openapi(
            self.router,
            events_enabled=self.events_enabled,
            logs_enabled=bool(config.enable_logs_handler),
            git_version=config.version or _default_version(),
            core_events=True,
            service_accounts=True,
            token_request=self.token_request,
            reviews=True,
        )
        ttl = max(int(config.event_ttl), 0)
        self.registry = Registry(
            self.store,
            prefix=config.store_prefix,
            resource="events",
            group_resource=GR,
            ttl=lambda: ttl,
            media_type=config.storage_media_type,
            conversion=corev1.STORAGE,
            transformer=self._transformer(ENCRYPTED_EVENTS),
        )
        self._forget_on_reload(self.registry)
        self.core_events_api = EventsAPI(
            self.registry,
            self.reactor,
            min_request_timeout=float(config.min_request_timeout),
            delete_collection_workers=int(config.delete_collection_workers),
            lifecycle=self.lifecycle,
            view=CORE_V1,
            admission=self.admission.admission,
        )
        # core/v1 serviceaccounts: the same REST implementation and registry machinery, keyed
        # as kube-apiserver keys them (TokenRequest and the token authenticator read them).
        self.service_accounts_registry = Registry(
            self.store,
            prefix=config.store_prefix,
            resource="serviceaccounts",
            group_resource=SERVICE_ACCOUNTS_GR,
            storage_kind="ServiceAccount",
            media_type=config.storage_media_type,
            conversion=SERVICE_ACCOUNTS_STORAGE,
            transformer=self._transformer(("", "serviceaccounts")),
        )
        self._forget_on_reload(self.service_accounts_registry)
        self.service_accounts_api = EventsAPI(
            self.service_accounts_registry,
            self.reactor,
            min_request_timeout=float(config.min_request_timeout),
            delete_collection_workers=int(config.delete_collection_workers),
            lifecycle=self.lifecycle,
            view=SERVICE_ACCOUNTS,
            admission=self.admission.admission,
        )
        self._install_core_v1(self.core_events_api.handle, self.service_accounts_api.handle)
        if not self.events_enabled:
            return
        self.events_api = EventsAPI(
            self.registry,
            self.reactor,
            min_request_timeout=float(config.min_request_timeout),
            delete_collection_workers=int(config.delete_collection_workers),
            lifecycle=self.lifecycle,
            admission=self.admission.admission,
        )
        self.router.add_prefix(BASE, self.events_api.handle)

    def _transformer(self, resource: tuple[str, str]) -> ResourceTransformer | None:
        """Encryption at rest of one resource's values, or None without
        ``--encryption-provider-config`` (then the registry makes no extra call)."""
        return self.encryption.transformer_for(resource) if self.encryption is not None else None

    def _forget_on_reload(self, registry: Registry) -> None:
        """A reloaded encryption config drops the registry's decoded objects."""
        if self.encryption is not None:
            self.encryption.dynamic.on_change(registry.forget_decoded)

    def _install_flowcontrol(self) -> None:
        """flowcontrol.apiserver.k8s.io/v1 when priority and fairness is on: the stored
        FlowSchemas and PriorityLevelConfigurations (cluster-scoped keys
        ``<--store-prefix>/<resource>/<name>``, JSON), their API, the ensurer and the
        config consumer that reconfigures priority and fairness (``apf-config``, once the
        store is up), and their post-start hooks (``priority-and-fairness-config-consumer``,
        ``priority-and-fairness-config-producer``, as kube-apiserver names them)."""
        apf = self.flow_control.apf
        if apf is None:
            return
        registries = {
            resource: Registry(
                self.store,
                prefix=self.config.store_prefix,
                resource=resource,
                group_resource=kind.group_resource,
                storage_kind=kind.kind,
                storage_api_version=FLOWCONTROL_API_VERSION,
                media_type="application/json",
                namespaced=False,
                transformer=self._transformer((kind.group_resource.group, resource)),
            )
            for resource, kind in FLOWCONTROL_KINDS.items()
        }
        for registry in registries.values():
            self._forget_on_reload(registry)
        self.flowcontrol_api = FlowControlAPI(
            self.reactor,
            registries,
            min_request_timeout=float(self.config.min_request_timeout),
            missing_level=lambda name: name not in apf.levels,
            admission=self.admission.admission,
        )
        self.router.add_prefix(FLOWCONTROL_BASE, self.flowcontrol_api.handle)
        self.flowcontrol_config = ConfigController(
            apf, registries, self.reactor, Ensurer(registries, self.reactor, new_uuid)
        )
        self.root.add(
            PartsService(
                "apf-config", [apf, self.flowcontrol_config], after=self.wait_storage_ready
            )
        )
        self._add_hook(
            "priority-and-fairness-config-consumer", self.flowcontrol_config.wait_digested
        )
        self._add_hook(
            "priority-and-fairness-config-producer", self.flowcontrol_config.wait_ensured
        )

    def _install_core_v1(self, events: Handler, service_accounts: Handler) -> None:
        """core/v1 under ``/api/v1/``: events, serviceaccounts and, when served, TokenRequest
        (``/api/v1/namespaces/<ns>/serviceaccounts/<name>/token``), which registered itself
        on ``/api/v1/namespaces/`` first (the prefix is shared)."""
        router = self.router
        namespaces = CORE_V1.base + "namespaces/"
        token = router.prefix_handler(namespaces)

        def core(request: HTTPRequest, info: RequestInfo) -> Any:
            path = info.path
            if "serviceaccounts" not in path:  # one substring test for every event request
                return events(request, info)
            # ['', 'api', 'v1', ('watch',) ('namespaces', <ns>,) <resource>, <name>, <sub>]
            parts = path.split("/")
            at = 4 if len(parts) > 3 and parts[3] == "watch" else 3
            if len(parts) > at + 2 and parts[at] == "namespaces":
                at += 2
            if len(parts) <= at or parts[at] != "serviceaccounts":
                return events(request, info)
            if token is not None and at == 5 and len(parts) > 7:
                return token(request, info)
            return service_accounts(request, info)

        router.add_prefix(CORE_V1.base, core)
        router.add_prefix(namespaces, core)

    def _object_count(self, resource: str) -> int | None:
        """The stored object count of ``resource`` for priority and fairness's list estimate."""
        return self.storage_metrics.last_count if resource == "events" else None

    def _server_address(self) -> str:
        host = self.config.advertise_address or default_host(self.config.bind_address)
        port = self.listener.bound_port() if self.listener.port else self.config.secure_port
        return f"{host}:{port}"

    def store_prefix_events(self) -> bytes:
        return (self.config.store_prefix.rstrip("/") + "/events/").encode()

    def _paths(self) -> list[str]:
        return [*self.router.paths(), *all_paths(self.health)]

    def _health_handler(self, endpoint: str) -> Any:
        health = self.health

        def handle(request: HTTPRequest, info: RequestInfo) -> Deferred[Response]:
            return render_endpoint(health, endpoint, info.query)

        return handle

    def _single_check_handler(self, endpoint: str) -> Any:
        health = self.health
        prefix_len = len(endpoint) + 2
        from apiserver.http.status import not_found_text

        def handle(request: HTTPRequest, info: RequestInfo) -> Deferred[Response] | Response:
            name = info.path[prefix_len:]
            answer = render_single(health, endpoint, name) if name else None
            return not_found_text() if answer is None else answer

        return handle

    # --- lifecycle ---------------------------------------------------------------------

    def _listening_address(self) -> str:
        port = self.listener.port
        if port is None:
            # A worker listens once its storage is ready: the address it will listen on.
            return f"{self.config.bind_address or '0.0.0.0'}:{self.config.secure_port}"
        host = port.getHost()
        return f"{host.host}:{host.port}"

    def _listen_failed(self, failure: Failure) -> None:
        # As a lone server whose port cannot be bound (CannotListenError at start-up): the
        # process exits with status 1, and a worker's supervisor restarts or gives up.
        log.failure("cannot listen on the secure port; exiting", failure)
        self.reactor.callLater(0, os._exit, 1)

    def _shutdown_initiated(self) -> None:
        # readyz fails from now on; systemd hears STOPPING=1 at the same moment.
        self.shutdown_check.initiate()
        if self.sd_notify is not None:
            self.sd_notify.stopping()

    def _stop_listening(self) -> Deferred[Any]:
        return self.listener.stop_listening()

    def _stop_process(self) -> None:
        # In-flight requests have drained: the store checks fail from now on (kube-apiserver
        # closes its etcd client here); stopping the reactor stops the tree, in reverse.
        self.store_check.close()
        self.store_ready_check.close()
        if self.reactor.running:
            self.reactor.stop()

    def _observe_client_certificates(self, authenticator: Any) -> None:
        """``apiserver_client_certificate_expiration_seconds``: the x509 authenticator tells
        each verified leaf's expiry (k8s.io/apiserver pkg/authentication/request/x509)."""
        histogram = self.metrics.client_cert_expiration
        seconds = self.reactor.seconds
        union = getattr(authenticator, "union", None)
        for candidate in getattr(union, "authenticators", ()):
            if isinstance(candidate, X509Authenticator):
                candidate.observe_expiry = lambda not_after: histogram.observe(
                    not_after - seconds()
                )

    def _set_verbosity(self, level: int) -> None:
        """``PUT /debug/flags/v``: the new ``-v``, and whether the site logs requests."""
        set_verbosity(level)
        self.site.log_requests = request_logging()

    def _announce(self) -> None:
        """Start-up notes: config warnings and flags that have no effect yet."""
        for warning in self.config.warnings:
            log.warn("{warning}", warning=warning)
        for note in self.admission.notes:
            log.info("{note}", note=note)
        for name in ineffective_flags(self.config):
            log.warn(
                "flag --{name} has no effect yet: it is accepted and validated only", name=name
            )


def _default_version() -> str:
    from apiserver.version import DEFAULT_GIT_VERSION

    return DEFAULT_GIT_VERSION


class _Stopper:
    """A part whose start is a post-start hook's: stopping it stops what the hook started."""

    def __init__(self, part: Any) -> None:
        self.part = part

    def start(self) -> None:
        return None

    def stop(self) -> None:
        self.part.stop()
