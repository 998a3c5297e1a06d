"""The request path: kube-apiserver's generic filters around a small exact/prefix router.

Why not Klein or resource traversal: both cost a sizeable share of a trivial request, and the
benchmarks hold us to a fraction of bare twisted.web. The router mirrors kube-apiserver's
non-REST mux (k8s.io/apiserver/pkg/server/mux/pathrecorder.go): exact paths first, then the
longest registered prefix, then the not-found handler.

:class:`App` runs kube-apiserver's filter chain (``DefaultBuildHandlerChain`` in
k8s.io/apiserver/pkg/server/config.go) for one request. :func:`apiserver.http.chain.
build_handler_chain` is the one place that decides which filters a server has and in which
order; read it first. ``App`` runs them as follows, outermost first:

1. request info (:class:`RequestInfo`) and the ``Audit-ID`` header (``WithRequestInfo``,
   ``WithAuditInit``);
2. the shutdown gate, 503 with ``Retry-After`` (``WithRetryAfter``);
3. HSTS and CORS (``WithHSTS``, ``WithCORS``); cache-control is set when writing; the
   ``--goaway-chance`` draw for HTTP/2 (``WithProbabilisticGoaway``, :mod:`apiserver.http.goaway`);
4. the in-flight wait group and request metrics (``WithWaitGroup``, ``WithLatencyTrackers``);
5. the ``stages``, each a :class:`Filter`: the resolved request info, authentication, audit,
   impersonation, priority and fairness or max-in-flight, authorization;
6. the router, under the deadline (``WithRequestDeadline``,
   ``WithTimeoutForNonLongRunningRequests``): a non-long-running handler that has not answered
   within ``--request-timeout``, or the shorter ``?timeout=`` (read before the stages, a bad
   one answered 400 there: :mod:`apiserver.http.deadline`), gets a 504.

Steps 1-4 and 6 are written inline here, not as stages: they run for every request and a
function call each would cost on the fast paths. An empty stage slot is left out when the
chain is built, so it costs nothing per request.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import unquote, unquote_to_bytes

import attrs
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import http

from apiserver.apimachinery.errors import ROUTE_NOT_FOUND, StatusError
from apiserver.apimachinery.negotiation import error_response
from apiserver.apimachinery.uid import new_uuid
from apiserver.http.deadline import request_timeout
from apiserver.http.h1 import H1Channel
from apiserver.http.h1request import H1Request
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.http.status import not_found_text, status_body

if TYPE_CHECKING:
    from apiserver.auth.interface import UserInfo
    from apiserver.auth.requestinfo import RequestInfo as ResolvedInfo

log = Logger()

#: A handler that took over writing the response itself (watch streams) returns this.
STREAMING = object()

HandlerResult = Response | Deferred[Any] | object
Handler = Callable[[HTTPRequest, "RequestInfo"], HandlerResult]
#: What a :class:`Filter` answers: None to go on, a Response to answer the request with, or a
#: Deferred of either (only when it must wait, e.g. for a webhook).
Verdict = Response | Deferred[Response | None] | None


@attrs.define(slots=True)
class RequestInfo:
    """One request's context, as the filters fill it in (Go's ``context.Context`` values).

    The first five fields are set before any filter runs; the others by the stages (see
    k8s.io/apiserver/pkg/endpoints/request/context.go: ``WithRequestInfo``, ``WithUser``).
    """

    method: str
    path: str
    query: dict[bytes, list[bytes]]
    long_running: bool
    api: bool
    #: What the path asks for in authorization terms (``RequestInfoResolver``).
    resolved: ResolvedInfo | None = None
    #: The user the request acts as: the authenticated one, then the impersonated one.
    user: UserInfo | None = None
    #: The user that authenticated (what audit logs as ``user``).
    authenticated_user: UserInfo | None = None
    #: The impersonated user (audit's ``impersonatedUser``), or None.
    impersonated_user: UserInfo | None = None
    #: True when the authentication stage saw ``Impersonate-*`` headers (its header pass
    #: serves impersonation too, so that stage needs no second pass).
    impersonating: bool = False
    #: ``("allow" | "forbid", reason)``: audit's ``authorization.k8s.io/decision`` and
    #: ``.../reason`` annotations; ``("", "internal error")`` after an authorizer error.
    authorization: tuple[str, str] | None = None
    #: Audit annotations the authenticator added (``AuthResult.annotations``, e.g.
    #: ``authentication.k8s.io/stale-token``), or None.
    audit_annotations: Mapping[str, str] | None = None
    #: The error a stage or the handler raised, as text, once it is answered with a 500 (a
    #: Go panic): audit records stage ``Panic`` instead of ``ResponseComplete`` for it.
    panic: str | None = None
    #: This request's deadline in seconds when ``?timeout=`` set one (request_deadline.go);
    #: None: ``--request-timeout``.
    timeout: float | None = None
    #: What runs when the request finishes (with ``notifyFinish``'s result: None, or the
    #: Failure of a lost connection), once the chain registered for it: see
    #: :func:`when_finished`.
    finish_hooks: list[Callable[[object], None]] | None = None
    #: The whole answer the chain wrote after the stages ran (a stage's refusal, the
    #: handler's Response), for audit's ``responseStatus``; None for a streamed answer.
    answer: Response | None = None
    #: Seconds of this request's latency that its SLI does not count: waiting in a priority
    #: and fairness queue (``request.TrackAPFQueueWaitLatency``).
    unaccounted: float = 0.0


def when_finished(request: HTTPRequest, info: RequestInfo, hook: Callable[[object], None]) -> None:
    """Run ``hook`` when ``request`` finishes, as ``request.notifyFinish().addBoth(hook)``
    would, but without a Deferred of its own when the chain waits for the end already (its
    in-flight and latency bookkeeping): one Deferred per request instead of one per stage,
    none for HTTP/1.x (``H1Request.whenFinished``)."""
    hooks = info.finish_hooks
    if hooks is not None:
        hooks.append(hook)
    else:
        request.notifyFinish().addBoth(hook)


class Filter(Protocol):
    """One stage of the handler chain between the wait group and the router.

    Called with the request and its :class:`RequestInfo`; returns a :data:`Verdict`. A stage
    that answers synchronously must not create a Deferred: the usual request runs the whole
    chain without one. A stage that needs to see the end of the request (audit, a seat of
    priority and fairness) uses :func:`when_finished` (or ``request.notifyFinish()``).
    """

    def __call__(self, request: HTTPRequest, info: RequestInfo, /) -> Verdict: ...


#: ";", "+" and "%" as the integers a ``bytes`` holds: ``43 in pair`` is one ``memchr``,
#: where ``b"+" in pair`` makes CPython (3.11) build and drop a TypeError first.
_SEMICOLON, _PLUS, _PERCENT = b";+%"


def parse_query(uri: bytes) -> dict[bytes, list[bytes]]:
    """Query parameters as Go's ``url.ParseQuery`` reads them.

    Unlike twisted.web's ``request.args``, a key without ``=`` counts (``?verbose`` has the
    value ``""``), and a pair containing ``;`` is dropped, as Go 1.17+ does.
    """
    _, sep, qs = uri.partition(b"?")
    result: dict[bytes, list[bytes]] = {}
    if not sep or not qs:
        return result
    for pair in qs.split(b"&"):
        if not pair or _SEMICOLON in pair:
            continue
        key, _, value = pair.partition(b"=")
        if _PLUS in key or _PERCENT in key:
            key = unquote_to_bytes(key.replace(b"+", b" "))
        if _PLUS in value or _PERCENT in value:
            value = unquote_to_bytes(value.replace(b"+", b" "))
        result.setdefault(key, []).append(value)
    return result


def not_found_api(request: HTTPRequest) -> Response:
    """The 404 Status for an unknown ``/api``/``/apis`` path, protobuf when Accept asks."""
    return error_response(ROUTE_NOT_FOUND, header_value(request, b"accept"))


def header_value(request: HTTPRequest, name: bytes) -> str:
    """The first value of a request header as text, or "".

    kube-apiserver reads headers with Go's ``Header.Get``, which returns the first of
    repeated values; twisted.web's ``getHeader`` returns the last, so it is not used here.
    """
    values = request.requestHeaders.getRawHeaders(name)
    if not values:
        return ""
    value: bytes = values[0]
    return value.decode("latin-1")


def is_api_path(path: str) -> bool:
    """Paths under ``/api`` and ``/apis`` get Status JSON errors, everything else plain text."""
    return path in ("/api", "/apis") or path.startswith(("/api/", "/apis/"))


def _is_long_running(
    method: str, path: str, query: dict[bytes, list[bytes]], api: bool | None = None
) -> bool:
    # kube-apiserver's LongRunningFunc: watch verbs and pprof; list with ?watch=1|true.
    # ``api``: is_api_path(path), when the caller knows it already.
    if path.startswith("/debug/pprof/"):
        return True
    if not (is_api_path(path) if api is None else api) or method != "GET":
        return False
    if "/watch/" in path:
        return True
    values = query.get(b"watch")
    return values is not None and values[-1].lower() in (b"1", b"true")


class Router:
    """Exact paths first, then the longest matching prefix."""

    def __init__(self) -> None:
        self._exact: dict[str, Handler] = {}
        self._prefixes: list[tuple[str, Handler]] = []

    def add(self, path: str, handler: Handler) -> None:
        self._exact[path] = handler

    def add_prefix(self, prefix: str, handler: Handler) -> None:
        """Serve paths under ``prefix``; a prefix added again gets the new handler."""
        self._prefixes = [item for item in self._prefixes if item[0] != prefix]
        self._prefixes.append((prefix, handler))
        self._prefixes.sort(key=lambda item: len(item[0]), reverse=True)

    def prefix_handler(self, prefix: str) -> Handler | None:
        """The handler added for exactly ``prefix``, if any (to share a prefix)."""
        for known, handler in self._prefixes:
            if known == prefix:
                return handler
        return None

    def remove(self, path: str) -> None:
        self._exact.pop(path, None)

    def resolve(self, path: str) -> Handler | None:
        handler = self._exact.get(path)
        if handler is not None:
            return handler
        for prefix, candidate in self._prefixes:
            if path.startswith(prefix):
                return candidate
        return None

    def paths(self) -> list[str]:
        """Every exact path, for the ``/`` index."""
        return sorted(self._exact)


class ShutdownGate(Protocol):
    """What the app asks the lifecycle (apiserver.service.lifecycle implements it)."""

    def gate(self, info: RequestInfo, user_agent: str) -> Response | None: ...

    def request_started(self, info: RequestInfo) -> None: ...

    def request_finished(self, info: RequestInfo) -> None: ...


class RequestMetrics(Protocol):
    """What the app records per request (apiserver.metrics.Metrics implements it)."""

    def request_started(self, info: RequestInfo) -> None: ...

    def request_finished(
        self, info: RequestInfo, code: int, seconds: float, request: HTTPRequest | None = None
    ) -> None: ...


CORS_ALLOW_METHODS = "POST, GET, OPTIONS, PUT, DELETE, PATCH"
CORS_ALLOW_HEADERS = (
    "Content-Type, Content-Length, Accept-Encoding, X-CSRF-Token, Authorization, "
    "X-Requested-With, If-Modified-Since"
)


@attrs.define
class ServingPolicy:
    """Response-wide settings from the command line."""

    request_timeout: float = 60.0
    hsts: str | None = None
    cors_origins: Sequence[re.Pattern[str]] = ()
    log_requests: bool = False


#: ``/ui`` and everything under ``/ui/``: the console (``path[:4]`` of ``/uix`` is neither).
_CONSOLE_PATHS = ("/ui", "/ui/")

#: RST_STREAM code for a stream whose handler gave up after answering (RFC 9113 section 7).
H2_INTERNAL_ERROR = 2
TIMEOUT_BODY = (
    b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete within the'
    b' allotted timeout","reason":"Timeout","details":{},"code":504}\n'
)


class App:
    """Runs the filter chain for one request and writes the handler's answer.

    Build it with :func:`apiserver.http.chain.build_handler_chain`; ``App(router, clock,
    policy)`` alone is a chain without stages (every request allowed), which unit tests use.
    """

    def __init__(
        self,
        router: Router,
        clock: IReactorTime,
        policy: ServingPolicy,
        gate: ShutdownGate | None = None,
        *,
        metrics: RequestMetrics | None = None,
        stages: Sequence[Filter] = (),
        goaway: Callable[[HTTPRequest], None] | None = None,
        console: Callable[[HTTPRequest], None] | None = None,
    ) -> None:
        self.router = router
        #: The operator console under ``/ui/`` (apiserver.console), or None: it answers
        #: before the wait group and the stages (docs/console.md says why).
        self.console = console
        #: ``--goaway-chance`` (apiserver.http.goaway), or None when it is 0.
        self.goaway = goaway
        self.clock = clock
        self.policy = policy
        self.gate = gate
        self.metrics = metrics
        #: The stages between the wait group and the router, in order (empty slots left out).
        self.stages: tuple[Filter, ...] = tuple(stages)

    def handle(self, request: HTTPRequest) -> None:
        """Serve ``request``; always completes it eventually."""
        # Request info (WithRequestInfo) and the Audit-ID header (WithAuditInit).
        method = request.method.decode("ascii", "replace")
        raw_path = request.path.decode("utf-8", "replace")
        path = unquote(raw_path) if "%" in raw_path else raw_path
        query = parse_query(request.uri)
        api = is_api_path(path)
        info = RequestInfo(method, path, query, _is_long_running(method, path, query, api), api)

        headers = request.responseHeaders
        audit_id = request.getHeader(b"audit-id")
        headers.setRawHeaders(b"audit-id", [audit_id or new_uuid().encode()])

        # Shutdown gate (WithRetryAfter).
        gate = self.gate
        if gate is not None:
            ua = (request.getHeader(b"user-agent") or b"").decode("latin-1")
            refused = gate.gate(info, ua)
            if refused is not None:
                if refused.header("Connection") == "close":
                    _close_after(request)
                self.write(request, refused)
                return

        # HSTS and CORS (WithHSTS, WithCORS).
        if self.policy.hsts is not None:
            headers.setRawHeaders(b"strict-transport-security", [self.policy.hsts.encode()])
        if self.policy.cors_origins and self._cors(request, method):
            return

        # The operator console's pages and static assets (no data, no credentials: the data
        # comes from the API with the user's token). API paths never reach the test below.
        if not api and path[:4] in _CONSOLE_PATHS and self.console is not None:
            self.console(request)
            return

        # GOAWAY by chance for HTTP/2 (WithProbabilisticGoaway), when --goaway-chance is set.
        if self.goaway is not None:
            self.goaway(request)

        # In-flight wait group and request metrics (WithWaitGroup, WithLatencyTrackers).
        metrics = self.metrics
        if gate is not None or metrics is not None:
            if gate is not None:
                gate.request_started(info)
            if metrics is not None:
                metrics.request_started(info)
            started = self.clock.seconds()
            hooks: list[Callable[[object], None]] = []
            info.finish_hooks = hooks

            def finished(result: object) -> None:
                # The hooks refer back to the request info (a cycle): let both go now, so
                # reference counting frees the request instead of the cyclic collector.
                info.finish_hooks = None
                for hook in hooks:
                    try:
                        hook(result)
                    except Exception:
                        log.failure("request finish hook {hook!r} failed", hook=hook)
                hooks.clear()
                if gate is not None:
                    gate.request_finished(info)
                if metrics is not None:
                    metrics.request_finished(
                        info, request.code, self.clock.seconds() - started, request
                    )

            if isinstance(request, H1Request):
                request.whenFinished(finished)  # the same, without a Deferred
            else:
                request.notifyFinish().addBoth(finished)

        # The request deadline (WithRequestDeadline): only a request that has ?timeout= pays.
        if b"timeout" in query and not info.long_running:
            timeout = request_timeout(query[b"timeout"], self.policy.request_timeout)
            if isinstance(timeout, StatusError):
                # failedErrorHandler: ErrorNegotiated, protobuf when Accept picks it.
                self.write(request, error_response(timeout, header_value(request, b"accept")))
                return
            info.timeout = timeout

        # The stages: authentication, audit, impersonation, flow control, authorization.
        index = 0
        for stage in self.stages:
            index += 1
            verdict = stage(request, info)
            if verdict is not None:
                self._verdict(request, info, verdict, index)
                return
        # The router, under the deadline (_dispatch, _await).
        self._dispatch(request, info)

    def _verdict(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        verdict: Response | Deferred[Response | None],
        resume_at: int,
    ) -> None:
        """A stage answered (write it) or must wait (go on at ``resume_at`` once it fires)."""
        if isinstance(verdict, Response):
            self._answer(request, info, verdict)
            return
        verdict.addCallback(self._resume, request, info, resume_at)
        verdict.addErrback(self._failed, request, info)

    def _resume(
        self, verdict: Response | None, request: HTTPRequest, info: RequestInfo, start: int
    ) -> None:
        """Go on after a stage's Deferred fired: its answer, or the next stages and the router."""
        if request.finished or request._disconnected:
            return
        if verdict is not None:
            self._answer(request, info, verdict)
            return
        stages = self.stages
        for index in range(start, len(stages)):
            next_verdict = stages[index](request, info)
            if next_verdict is not None:
                self._verdict(request, info, next_verdict, index + 1)
                return
        self._dispatch(request, info)

    def _failed(self, failure: Failure, request: HTTPRequest, info: RequestInfo) -> None:
        self._internal_error(request, failure, info)

    def _dispatch(self, request: HTTPRequest, info: RequestInfo) -> None:
        """Route to the handler and write (or await) its answer."""
        handler = self.router.resolve(info.path)
        if handler is None:
            self._answer(request, info, not_found_api(request) if info.api else not_found_text())
            return
        try:
            result = handler(request, info)
        except Exception:
            self._internal_error(request, Failure(), info)
            return
        if result is STREAMING:
            return
        if isinstance(result, Response):
            self._answer(request, info, result)
            return
        self._await(request, info, result)  # type: ignore[arg-type]

    def _await(self, request: HTTPRequest, info: RequestInfo, result: Deferred[Any]) -> None:
        """The deadline: ``--request-timeout`` for a handler that is not long-running."""
        timer: IDelayedCall | None = None
        timeout = self.policy.request_timeout if info.timeout is None else info.timeout
        if not info.long_running and timeout > 0:
            timer = self.clock.callLater(timeout, self._timed_out, request, result)
        request.notifyFinish().addErrback(_cancel, result)
        # Bound methods with arguments rather than closures made per request, and the
        # handler's own Deferred rather than a maybeDeferred wrapper when it is one.
        answer = result if type(result) is Deferred else maybeDeferred(lambda: result)
        answer.addCallbacks(
            self._done,
            self._failed_late,
            callbackArgs=(request, info, timer),
            errbackArgs=(request, info, timer),
        )

    def _done(
        self, value: object, request: HTTPRequest, info: RequestInfo, timer: IDelayedCall | None
    ) -> None:
        if timer is not None and timer.active():
            timer.cancel()
        if request.finished or request._disconnected:
            return
        if isinstance(value, Response):
            self._answer(request, info, value)
        elif value is not STREAMING:
            self._internal_error(request, Failure(TypeError(f"bad result {value!r}")), info)

    def _failed_late(
        self,
        failure: Failure,
        request: HTTPRequest,
        info: RequestInfo,
        timer: IDelayedCall | None,
    ) -> None:
        if timer is not None and timer.active():
            timer.cancel()
        if request.finished or request._disconnected:
            return
        self._internal_error(request, failure, info)

    def _timed_out(self, request: HTTPRequest, result: Deferred[Any]) -> None:
        if request.finished or request._disconnected:
            return
        if request.startedWriting:
            # Headers are out: all that is left is to abort, as Go's timeout handler does
            # (it panics with ErrAbortHandler): HTTP/1.1 closes the connection, HTTP/2
            # resets only this stream, with INTERNAL_ERROR.
            channel = request.channel
            transport = getattr(channel, "transport", None)
            if transport is not None:
                transport.abortConnection()
                return
            reset = getattr(request, "resetStream", None)  # HTTP/2 (h2request.H2Request)
            if reset is not None:
                reset(H2_INTERNAL_ERROR)
                return
            abort = getattr(channel, "abortConnection", None)  # twisted.web's H2Stream
            if abort is not None:
                abort()
            return
        self.write(
            request,
            Response(504, (("Content-Type", "text/plain; charset=utf-8"),), TIMEOUT_BODY),
        )
        result.cancel()

    def _internal_error(
        self, request: HTTPRequest, failure: Failure, info: RequestInfo | None = None
    ) -> None:
        """A stage or the handler raised: kube-apiserver's handlers panic, and the panic
        recovery answers 500 (k8s.io/apiserver/pkg/server/filters/wrap.go). The error is
        noted in ``info.panic`` first, for audit's ``Panic`` stage
        (k8s.io/apiserver/pkg/endpoints/filters/audit.go).

        A RecursionError is not a server fault but an input nested more deeply than the
        code that walks it can go (a patch, an object, a token, below the 10,000 levels Go's
        JSON decoder allows): it is answered 400 with the text Go's decoder gives past its
        own limit, ``exceeded max depth`` (encoding/json scanner.go), and logged without a
        traceback. No input may produce a 500 (issue 17; docs/hostile-input.md)."""
        if isinstance(failure.value, RecursionError) and not request.startedWriting:
            log.info(
                "request {method} {path}: input nested too deeply",
                method=request.method,
                path=request.path,
            )
            error = StatusError(400, "BadRequest", "exceeded max depth")
            self.write(request, error_response(error, header_value(request, b"accept")))
            return
        log.failure(
            "request {method} {path} failed", failure, method=request.method, path=request.path
        )
        if info is not None:
            info.panic = str(failure.value) or type(failure.value).__name__
        if request.startedWriting:
            request.finish()
            return
        import orjson

        body = (
            orjson.dumps(
                status_body(
                    500,
                    "InternalError",
                    "an error on the server has prevented the request from succeeding",
                    {},
                )
            )
            + b"\n"
        )
        self.write(request, Response(500, (("Content-Type", "application/json"),), body))

    def _cors(self, request: HTTPRequest, method: str) -> bool:
        """Add the CORS headers for an allowed Origin; True when the request is answered."""
        origin = request.getHeader(b"origin")
        if not origin:
            return False
        origin_text = origin.decode("latin-1")
        if not any(p.search(origin_text) for p in self.policy.cors_origins):
            return False
        headers = request.responseHeaders
        headers.setRawHeaders(b"access-control-allow-origin", [origin])
        headers.setRawHeaders(b"access-control-allow-methods", [CORS_ALLOW_METHODS.encode()])
        headers.setRawHeaders(b"access-control-allow-headers", [CORS_ALLOW_HEADERS.encode()])
        headers.setRawHeaders(b"access-control-expose-headers", [b"Date"])
        headers.setRawHeaders(b"access-control-allow-credentials", [b"true"])
        if method == "OPTIONS":
            self.write(request, Response(204))
            return True
        return False

    def _answer(self, request: HTTPRequest, info: RequestInfo, response: Response) -> None:
        """Write the request's answer after the stages ran, noted in ``info.answer`` (for
        audit's ``responseStatus``)."""
        info.answer = response
        self.write(request, response)

    @staticmethod
    def write(request: HTTPRequest, response: Response) -> None:
        """Write a whole answer with an explicit Content-Length."""
        request.setResponseCode(response.code)
        headers = request.responseHeaders
        for name, value in response.headers:
            headers.addRawHeader(name.encode("latin-1"), value.encode("latin-1"))
        if not headers.hasHeader(b"cache-control"):
            headers.setRawHeaders(b"cache-control", [b"no-cache, private"])
        body = response.body
        if response.code not in (204, 304):
            headers.setRawHeaders(b"content-length", [str(len(body)).encode()])
        if body and request.method != b"HEAD":
            request.write(body)
        request.finish()


def _cancel(_: object, result: Deferred[Any]) -> None:
    """The client went away: cancel the handler's Deferred (its canceller stops the work)."""
    result.cancel()


def _close_after(request: HTTPRequest) -> None:
    """Make an HTTP/1.1 connection close after this response (HTTP/2 streams ignore it)."""
    channel = request.channel
    if isinstance(channel, (http.HTTPChannel, H1Channel)):
        channel.persistent = False
