"""The request path: kube-apiserver's generic filters around a small exact/prefix router.

Why not Klein or resource traversal: both cost a sizeable share of a trivial request, and the
benchmarks hold us to a fraction of bare twisted.web. The router mirrors kube-apiserver's
non-REST mux (k8s.io/apiserver/pkg/server/mux/pathrecorder.go): exact paths first, then the
longest registered prefix, then the not-found handler.

Filters applied here, outermost first, as in ``DefaultBuildHandlerChain``: request info,
shutdown gate (retry-after / 503), HSTS and CORS, cache-control, in-flight wait group,
deadline and timeout. Authentication, audit, impersonation, priority and fairness and
authorization slot in between the wait group and the handler as those features land.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol
from urllib.parse import unquote, unquote_to_bytes

import attrs
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web import http
from twisted.web.iweb import IRequest

from apiserver.apimachinery.uid import new_uuid
from apiserver.http.h1 import H1Channel
from apiserver.http.response import Response
from apiserver.http.status import not_found_status, not_found_text, status_body

log = Logger()

#: A handler that took over writing the response itself (watch streams) returns this.
STREAMING = object()

HandlerResult = Response | Deferred[Any] | object
Handler = Callable[[IRequest, "RequestInfo"], HandlerResult]


@attrs.define(slots=True)
class RequestInfo:
    """What the filters need to know about a request (a subset of apiserver's RequestInfo)."""

    method: str
    path: str
    query: dict[bytes, list[bytes]]
    long_running: bool
    api: bool


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
        if not pair or b";" in pair:
            continue
        key, _, value = pair.partition(b"=")
        if b"+" in key or b"%" in key:
            key = unquote_to_bytes(key.replace(b"+", b" "))
        if b"+" in value or b"%" in value:
            value = unquote_to_bytes(value.replace(b"+", b" "))
        result.setdefault(key, []).append(value)
    return result


def header_value(request: Any, name: bytes) -> str:
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


def _is_long_running(method: str, path: str, query: dict[bytes, list[bytes]]) -> bool:
    # kube-apiserver's LongRunningFunc: watch verbs and pprof; list with ?watch=1|true.
    if path.startswith("/debug/pprof/"):
        return True
    if not is_api_path(path) or method != "GET":
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
        self._prefixes.append((prefix, handler))
        self._prefixes.sort(key=lambda item: len(item[0]), reverse=True)

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


class AuthCheck(Protocol):
    """The authentication and authorization filters (apiserver.auth implements it).

    ``check`` returns None to let the request through, a Response (401/403) to refuse it,
    or a Deferred of either. It may attach the authenticated user to the request as
    ``request.apiserver_user``.
    """

    def check(
        self, request: Any, info: RequestInfo
    ) -> Response | Deferred[Response | None] | None: ...


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


#: RST_STREAM code for a stream whose handler gave up after answering (RFC 9113 section 7).
H2_INTERNAL_ERROR = 2
TIMEOUT_BODY = (
    b'{"metadata":{},"status":"Failure","message":"Timeout: request did not complete within the'
    b' allotted timeout","reason":"Timeout","details":{},"code":504}\n'
)


class App:
    """Runs the filters for one request and writes the handler's answer."""

    def __init__(
        self,
        router: Router,
        clock: IReactorTime,
        policy: ServingPolicy,
        gate: ShutdownGate | None = None,
    ) -> None:
        self.router = router
        self.clock = clock
        self.policy = policy
        self.gate = gate
        #: Authentication, impersonation and authorization (apiserver.auth); None: everyone
        #: is allowed, as with ``--authorization-mode=AlwaysAllow`` and anonymous requests.
        self.auth: AuthCheck | None = None
        #: Request metrics (apiserver.metrics.Metrics) or None.
        self.metrics: Any = None

    def handle(self, request: Any) -> None:
        """Serve ``request`` (a twisted.web Request); always completes it eventually."""
        method = request.method.decode("ascii", "replace")
        raw_path = request.path.decode("utf-8", "replace")
        path = unquote(raw_path) if "%" in raw_path else raw_path
        query = parse_query(request.uri)
        info = RequestInfo(method, path, query, _is_long_running(method, path, query), False)
        info.api = is_api_path(path)

        headers = request.responseHeaders
        audit_id = request.getHeader(b"audit-id")
        headers.setRawHeaders(b"audit-id", [audit_id or new_uuid().encode()])

        gate = self.gate
        if gate is not None:
            ua = (request.getHeader(b"user-agent") or b"").decode("latin-1")
            refused = gate.gate(info, ua)
            if refused is not None:
                if refused.header("Connection") == "close":
                    _close_after(request)
                self.write(request, refused)
                return

        if self.policy.hsts is not None:
            headers.setRawHeaders(b"strict-transport-security", [self.policy.hsts.encode()])
        if self.policy.cors_origins and self._cors(request, method):
            return

        metrics = self.metrics
        if gate is not None or metrics is not None:
            if gate is not None:
                gate.request_started(info)
            if metrics is not None:
                metrics.request_started(info)
            started = self.clock.seconds()

            def finished(_: object) -> None:
                if gate is not None:
                    gate.request_finished(info)
                if metrics is not None:
                    metrics.request_finished(info, request.code, self.clock.seconds() - started)

            request.notifyFinish().addBoth(finished)

        auth = self.auth
        if auth is not None:
            verdict = auth.check(request, info)
            if verdict is not None:
                if isinstance(verdict, Response):
                    self.write(request, verdict)
                    return
                verdict.addCallback(self._after_auth, request, info)
                verdict.addErrback(lambda f: self._internal_error(request, f))
                return
        self._dispatch(request, info)

    def _after_auth(self, verdict: Response | None, request: Any, info: RequestInfo) -> None:
        if request.finished or getattr(request, "_disconnected", False):
            return
        if verdict is not None:
            self.write(request, verdict)
            return
        self._dispatch(request, info)

    def _dispatch(self, request: Any, info: RequestInfo) -> None:
        """Route to the handler and write (or await) its answer."""
        handler = self.router.resolve(info.path)
        if handler is None:
            self.write(request, not_found_status() if info.api else not_found_text())
            return
        try:
            result = handler(request, info)
        except Exception:
            self._internal_error(request, Failure())
            return
        if result is STREAMING:
            return
        if isinstance(result, Response):
            self.write(request, result)
            return
        self._await(request, info, result)  # type: ignore[arg-type]

    def _await(self, request: Any, info: RequestInfo, result: Deferred[Any]) -> None:
        timer: IDelayedCall | None = None
        if not info.long_running and self.policy.request_timeout > 0:
            timer = self.clock.callLater(
                self.policy.request_timeout, self._timed_out, request, result
            )
        gone = request.notifyFinish()
        gone.addErrback(lambda _: result.cancel())

        def done(value: object) -> None:
            if timer is not None and timer.active():
                timer.cancel()
            if request.finished or getattr(request, "_disconnected", False):
                return
            if isinstance(value, Response):
                self.write(request, value)
            elif value is not STREAMING:
                self._internal_error(request, Failure(TypeError(f"bad result {value!r}")))

        def failed(failure: Failure) -> None:
            if timer is not None and timer.active():
                timer.cancel()
            if request.finished or getattr(request, "_disconnected", False):
                return
            self._internal_error(request, failure)

        maybeDeferred(lambda: result).addCallbacks(done, failed)

    def _timed_out(self, request: Any, result: Deferred[Any]) -> None:
        if request.finished or getattr(request, "_disconnected", False):
            return
        if request.startedWriting:
            # Headers are out: all that is left is to abort, as Go's timeout handler does
            # (it panics with ErrAbortHandler): HTTP/1.1 closes the connection, HTTP/2
            # resets only this stream, with INTERNAL_ERROR.
            channel = request.channel
            transport = getattr(channel, "transport", None)
            if transport is not None:
                transport.abortConnection()
            elif hasattr(request, "resetStream"):
                request.resetStream(H2_INTERNAL_ERROR)
            elif channel is not None:
                channel.abortConnection()
            return
        self.write(
            request,
            Response(504, (("Content-Type", "text/plain; charset=utf-8"),), TIMEOUT_BODY),
        )
        result.cancel()

    def _internal_error(self, request: Any, failure: Failure) -> None:
        log.failure(
            "request {method} {path} failed", failure, method=request.method, path=request.path
        )
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

    def _cors(self, request: Any, method: str) -> bool:
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

    @staticmethod
    def write(request: Any, response: Response) -> None:
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


def _close_after(request: Any) -> None:
    """Make an HTTP/1.1 connection close after this response (HTTP/2 streams ignore it)."""
    channel = request.channel
    if isinstance(channel, (http.HTTPChannel, H1Channel)):
        channel.persistent = False
