"""The handler chain, built in one function: :func:`build_handler_chain`.

kube-apiserver lists its whole chain in ``DefaultBuildHandlerChain``
(k8s.io/apiserver/pkg/server/config.go); this is the same list, outermost first, so each filter
has one obvious home. Every filter has a named slot: audit (:mod:`apiserver.audit`, filled
when ``--audit-policy-file`` and a backend are given) and priority and fairness or
max-in-flight (:mod:`apiserver.flowcontrol`) take a :class:`~apiserver.http.app.Filter`,
and nothing else moves. An empty slot is left out of the chain, so it costs nothing per request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from twisted.internet.interfaces import IReactorTime

from apiserver.http.app import App, Filter, RequestMetrics, Router, ServingPolicy, ShutdownGate
from apiserver.http.request import HTTPRequest

__all__ = ["AuthSlots", "Filter", "build_handler_chain"]


class AuthSlots(Protocol):
    """The stages :mod:`apiserver.auth` fills (``apiserver.auth.filter.AuthStages``)."""

    @property
    def request_info(self) -> Filter | None: ...

    @property
    def authentication(self) -> Filter | None: ...

    @property
    def impersonation(self) -> Filter | None: ...

    @property
    def authorization(self) -> Filter | None: ...


def build_handler_chain(
    router: Router,
    clock: IReactorTime,
    policy: ServingPolicy,
    *,
    gate: ShutdownGate | None = None,
    metrics: RequestMetrics | None = None,
    auth: AuthSlots | None = None,
    audit: Filter | None = None,
    tracing: Filter | None = None,
    flow_control: Filter | None = None,
    goaway: Callable[[HTTPRequest], None] | None = None,
    console: Callable[[HTTPRequest], None] | None = None,
) -> App:
    """The server's handler chain around ``router``, outermost first:

    ==========================================  ===============================================
    here                                        kube-apiserver (DefaultBuildHandlerChain)
    ==========================================  ===============================================
    request info, ``Audit-ID``                  WithRequestInfo, WithAuditInit
    ``gate``: 503 + Retry-After on shutdown     WithRetryAfter
    ``policy.hsts``, ``policy.cors_origins``    WithHSTS, WithCORS
    ``goaway`` (``--goaway-chance``)            WithProbabilisticGoaway
    ``gate`` wait group, ``metrics``            WithWaitGroup, WithLatencyTrackers
    ``policy.request_timeout``, ``?timeout=``   WithRequestDeadline, WithTimeoutFor...Requests
    ``auth.request_info``                       (WithRequestInfo's resolver, see below)
    ``auth.authentication``                     WithAuthentication
    ``tracing`` (``--tracing-config-file``)     WithTracing
    ``audit``                                   WithAudit
    ``auth.impersonation``                      WithImpersonation
    ``flow_control``                            WithPriorityAndFairness / WithMaxInFlightLimit
    ``auth.authorization``                      WithAuthorization
    ``router``                                  the API handler (PathRecorderMux)
    ==========================================  ===============================================

    The first six are written inline in :meth:`App.handle` (they run for every request);
    the rest are the App's stages. ``console`` (the operator console, :mod:`apiserver.console`)
    answers ``/ui`` and ``/ui/...`` right after CORS, before the wait group and the stages:
    its pages carry no data and need no credentials (docs/console.md). Differences from
    kube-apiserver, kept because clients see them: the path is resolved into authorization
    attributes after the wait group (kube does it outermost), and the deadline covers the
    handler only, not the stages.

    Admission is not here: it runs in the REST layer, between decoding and storage
    (:mod:`apiserver.admission`).
    """
    slots: tuple[Filter | None, ...] = (
        auth.request_info if auth is not None else None,
        auth.authentication if auth is not None else None,
        tracing,
        audit,
        auth.impersonation if auth is not None else None,
        flow_control,
        auth.authorization if auth is not None else None,
    )
    return App(
        router,
        clock,
        policy,
        gate,
        metrics=metrics,
        stages=[stage for stage in slots if stage is not None],
        goaway=goaway,
        console=console,
    )
