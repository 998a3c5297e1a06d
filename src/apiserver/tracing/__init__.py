"""OpenTelemetry tracing of requests and storage calls, with ``--tracing-config-file``.

Follows k8s.io/apiserver ``pkg/endpoints/filters/traces.go`` (``WithTracing``) and
component-base ``tracing``:

- spans go to the configuration's ``endpoint`` (``localhost:4317`` by default) over OTLP/gRPC
  without TLS, from a batching processor, with the resource attributes ``service.name=
  apiserver`` and ``service.instance.id``; a new trace is sampled at
  ``samplingRatePerMillion`` / 10^6, and a request that carries a sampled W3C
  ``traceparent`` is traced whatever the rate (``ParentBased``);
- the request span starts right after authentication, as ``WithTracing`` sits there: a
  ``traceparent`` from a user in ``system:masters`` or ``system:monitoring`` is the span's
  parent, anyone else's is only linked (``WithPublicEndpointFn(notSystemPrivilegedGroup)``);
  its name is ``<METHOD> /apis/<group>/<version>[/namespaces/{:namespace}]/<resource>
  [/{:name}][/<subresource>]`` for resource requests and the method otherwise
  (``getSpanNameFromRequestInfo``), with ``http.target``, ``audit-id``, the method, user
  agent and status code as attributes;
- a webhook call made for a traced request (the authorization webhook; the authentication
  webhook runs before the request's span starts, as in the reference's chain) gets a client
  span ``HTTP POST`` and sends its ``traceparent`` (:mod:`apiserver.http.spans`);
- every storage call made while a traced request is being handled gets a child span
  (:class:`TracedStore`, like the etcd3 store's ``tracing.Start`` spans, named ``<Op> <kind>``,
  with the key).

Without the flag nothing here is built: the chain's tracing slot is empty and the registries
get the plain store, so an untraced server pays nothing. With it, the request span is known to
the storage wrapper through the context variable :data:`CURRENT_SPAN`, set by the stage and
reset by :class:`TracingApp` once the chain's synchronous part returns. The handlers are
coroutines, and Twisted runs each coroutine in a copy of the context it was started in
(``Deferred.fromCoroutine``), so their storage calls after an ``await`` still see their
request's span; only a call made from a bare Deferred callback, outside any coroutine, is
not traced.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.logger import Logger

from apiserver.http import spans
from apiserver.http.app import RequestInfo, when_finished
from apiserver.http.request import HTTPRequest
from apiserver.options.files import TracingConfig

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

log = Logger()

SERVICE_NAME = "apiserver"
PRIVILEGED_GROUPS = frozenset(("system:masters", "system:monitoring"))


#: The span of the traced request whose chain, or one of whose coroutines, is running.
CURRENT_SPAN: ContextVar[Span | None] = ContextVar("apiserver_request_span", default=None)


def span_name(info: RequestInfo) -> str:
    """``getSpanNameFromRequestInfo``."""
    resolved = info.resolved
    if resolved is None or not resolved.resource_request:
        return info.method
    name = "/" + resolved.api_prefix
    if resolved.api_group:
        name += "/" + resolved.api_group
    name += "/" + resolved.api_version
    if resolved.namespace:
        name += "/namespaces/{:namespace}"
    name += "/" + resolved.resource
    if resolved.name:
        name += "/{:name}"
    if resolved.subresource:
        name += "/" + resolved.subresource
    return f"{info.method} {name}"


class Tracing(Service):
    """The tracer provider (built when the service starts), the chain stage and the store
    wrapper."""

    name = "tracing"

    def __init__(self, config: TracingConfig, instance_id: str, reactor: Any) -> None:
        self.config = config
        self.instance_id = instance_id
        self.reactor = reactor
        self.provider: Any = None
        self.tracer: Tracer | None = None
        self.propagator: Any = None

    # --- lifecycle ------------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        rate = self.config.sampling_rate_per_million / 1_000_000
        provider = TracerProvider(
            resource=Resource.create(
                {"service.name": SERVICE_NAME, "service.instance.id": self.instance_id}
            ),
            sampler=ParentBased(TraceIdRatioBased(rate)),
        )
        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=self.config.endpoint, insecure=True))
        )
        self.provider = provider
        self.tracer = provider.get_tracer("k8s.io/apiserver/pkg/endpoints/filters")
        self.propagator = TraceContextTextMapPropagator()
        spans.start = self.webhook_span

    def stopService(self) -> Deferred[None] | None:
        super().stopService()
        if spans.start == self.webhook_span:
            spans.start = None
        provider, self.provider, self.tracer = self.provider, None, None
        if provider is None:
            return None
        from twisted.internet.threads import deferToThreadPool

        # Flushing may wait for the exporter: not on the reactor thread.
        d: Deferred[None] = deferToThreadPool(
            self.reactor, self.reactor.getThreadPool(), provider.shutdown
        )
        d.addErrback(lambda f: log.failure("tracing shutdown failed", f))
        return d

    # --- the chain stage ------------------------------------------------------------------

    def stage(self, request: HTTPRequest, info: RequestInfo) -> None:
        """``WithTracing``: start the request's span (see the module docstring)."""
        tracer = self.tracer
        if tracer is None:
            return None
        from opentelemetry import trace
        from opentelemetry.trace import Link, SpanKind

        carrier = {}
        values = request.requestHeaders.getRawHeaders(b"traceparent")
        if values:
            carrier["traceparent"] = values[0].decode("latin-1")
            state = request.requestHeaders.getRawHeaders(b"tracestate")
            if state:
                carrier["tracestate"] = state[0].decode("latin-1")
        incoming = self.propagator.extract(carrier) if carrier else None
        links = []
        context = None
        if incoming is not None:
            remote = trace.get_current_span(incoming).get_span_context()
            user = info.user
            privileged = user is not None and not PRIVILEGED_GROUPS.isdisjoint(user.groups)
            if privileged:
                context = incoming
            elif remote.is_valid:
                links.append(Link(remote))
        target = request.uri.decode("latin-1")
        audit_id = request.responseHeaders.getRawHeaders(b"audit-id")
        span = tracer.start_span(
            span_name(info),
            context=context,
            kind=SpanKind.SERVER,
            links=links,
            attributes={
                "http.method": info.method,
                "http.target": target,
                "http.user_agent": (request.getHeader(b"user-agent") or b"").decode("latin-1"),
                "audit-id": audit_id[0].decode("latin-1") if audit_id else "",
            },
        )
        CURRENT_SPAN.set(span)

        def finished(result: object) -> None:
            span.set_attribute("http.status_code", request.code)
            if request.code >= 500:
                from opentelemetry.trace import Status, StatusCode

                span.set_status(Status(StatusCode.ERROR))
            span.end()

        when_finished(request, info, finished)
        return None

    # --- webhooks and storage --------------------------------------------------------------

    def webhook_span(self, method: str, url: str) -> spans.WebhookSpan | None:
        """A client span for a webhook call of the running traced request (installed as
        :data:`apiserver.http.spans.start`), with the ``traceparent`` the webhook gets."""
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode

        span = self.child(
            f"HTTP {method}", {"http.method": method, "http.url": url}, kind=SpanKind.CLIENT
        )
        if span is None:
            return None
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier, context=trace.set_span_in_context(span))

        def end(code: int) -> None:
            if code:
                span.set_attribute("http.status_code", code)
            if code == 0 or code >= 500:
                span.set_status(Status(StatusCode.ERROR))
            span.end()

        return spans.WebhookSpan({k.encode(): [v.encode()] for k, v in carrier.items()}, end)

    def child(self, name: str, attributes: dict[str, Any], kind: Any = None) -> Span | None:
        """A span under the running request's (``kind``: internal unless given), or None
        outside a traced request."""
        parent = CURRENT_SPAN.get()
        tracer = self.tracer
        if parent is None or tracer is None:
            return None
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind

        return tracer.start_span(
            name,
            context=trace.set_span_in_context(parent),
            kind=kind or SpanKind.INTERNAL,
            attributes=attributes,
        )


class TracingApp:
    """The site's app when tracing is on: runs the chain, then forgets the request's span."""

    def __init__(self, app: Any) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:
        # Everything else (the serving policy, the router) is the wrapped app's.
        return getattr(self.app, name)

    def handle(self, request: HTTPRequest) -> None:
        token = CURRENT_SPAN.set(None)
        try:
            self.app.handle(request)
        finally:
            CURRENT_SPAN.reset(token)


#: Store methods traced, and the operation names of their spans.
_TRACED = {
    "get": "Get",
    "create": "Create",
    "update": "GuaranteedUpdate",
    "delete": "Delete",
    "range": "List",
    "count": "Count",
    "list_cached": "List",
}


class TracedStore:
    """A store whose calls made during a traced request get a child span each; everything
    else (capabilities, watches, health) is the wrapped store's."""

    def __init__(self, store: Any, tracing: Tracing) -> None:
        self._store = store
        self._tracing = tracing
        for method, op in _TRACED.items():
            inner = getattr(store, method, None)
            if inner is not None:
                setattr(self, method, self._wrap(inner, f"{op} {store.kind}"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _wrap(self, inner: Callable[..., Any], name: str) -> Callable[..., Any]:
        tracing = self._tracing

        def traced(*args: Any, **kwargs: Any) -> Any:
            if CURRENT_SPAN.get() is None:
                return inner(*args, **kwargs)
            key = args[0] if args else b""
            span = tracing.child(
                name,
                {"key": key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)},
            )
            result = inner(*args, **kwargs)
            if span is None:
                return result
            if isinstance(result, Deferred):

                def end(value: object) -> object:
                    span.end()
                    return value

                result.addBoth(end)
            else:
                span.end()
            return result

        return traced
