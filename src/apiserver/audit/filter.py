"""The audit stage of the handler chain (the ``audit=`` slot of ``build_handler_chain``).

Follows k8s.io/apiserver ``pkg/endpoints/filters/audit.go`` (``WithAudit``) and
``authn_audit.go`` (``WithFailedAuthenticationAudit``):

1. The policy decides the level from the authenticated user and the resolved request info
   (``apiserver_audit_level_total{level}`` counts every request, None included). Level None:
   nothing else happens, the request goes on at the cost of one policy evaluation.
2. ``RequestReceived`` is sent with the received time as its stage time. A sink that refuses
   it (blocking-strict mode answers False) fails the request with a 500, text/plain
   ``Internal Server Error: "<uri>": failed to store audit event``, counted in
   ``apiserver_audit_requests_rejected_total``; nothing else is sent for that request.
3. The answer's code (and, for a Status answer, its status, message, reason and details) is
   noted when the response starts; a long-running request (watch) sends ``ResponseStarted``
   then.
4. ``ResponseComplete`` is sent when the request finishes (``when_finished``). A request that
   ends with nothing written records ``{"code":200,"status":"Success","message":"Connection
   closed early"}`` (and a long-running one sends the missing ``ResponseStarted`` first).
   A request whose stage or handler raised (Go: panicked; ``App._internal_error`` notes it in
   ``RequestInfo.panic`` before answering 500) sends ``Panic`` instead, with code 500,
   reason ``InternalError`` and ``APIServer panic'd: <error>``.
5. A request refused by authentication sends only ``ResponseStarted``, with user ``{}``, code
   401 and ``Authentication failed, attempted: <methods>`` or ``Authentication failed, no
   credentials provided`` (:meth:`AuditStage.authentication_failed`, the hook of
   :class:`apiserver.auth.filter.Authentication`).

Stages the policy omits (``omitStages``) are not sent. Each event is a new dict
(:meth:`apiserver.audit.event.AuditRecord.event`); every sink gets it, and the request's
answer at ``RequestReceived`` is True only if every sink accepted it (the union backend,
``pkg/audit/union.go``).

How the answer is observed: the stage replaces ``request.write`` on the request object for
that request only (audited requests pay for it, others do not), because the chain writes every
answer, and watch streams their chunks, through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.audit.buffered import BufferedSink
from apiserver.audit.encoding import encode_event
from apiserver.audit.event import (
    CLOSED_EARLY_STATUS,
    OBJECT_VERBS,
    AuditRecord,
    decode_json_object,
    level_at_least,
)
from apiserver.audit.interface import AuditMetrics, Level, Sink
from apiserver.audit.policy import AuditConfig, Policy
from apiserver.audit.templates import EventLines
from apiserver.auth.filter import internal_error_response
from apiserver.http.app import RequestInfo, Verdict, when_finished
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

log = Logger()

STORE_FAILED = "failed to store audit event"
#: Verbs whose body is kept from Request on (a patch, DeleteOptions).
_BODY_VERBS = frozenset({"patch", "delete", "deletecollection"})
_BODY_LOGGING_VERBS = OBJECT_VERBS | _BODY_VERBS


class FilterMetrics(AuditMetrics, Protocol):
    """:class:`AuditMetrics` and the per-request policy level (``ObservePolicyLevel``)."""

    def policy_level(self, level: Level) -> None: ...


class AuditStage:
    """``WithAudit`` as a :class:`~apiserver.http.app.Filter` (see the module docstring).

    ``clock.seconds()`` gives the received and stage times. Built only when a policy is
    loaded and at least one sink exists (kube-apiserver: ``if sink == nil || policy == nil
    { return handler }``), so a server without audit has no stage at all.
    """

    def __init__(
        self,
        policy: Policy,
        sinks: Sequence[Sink],
        clock: IReactorTime,
        metrics: FilterMetrics,
    ) -> None:
        self.policy = policy
        self.sinks = tuple(sinks)
        self.clock = clock
        self.metrics = metrics
        #: The log backend in batch mode with the JSON format as the only sink: the usual
        #: events go to it as lines made from templates (apiserver.audit.templates).
        self.line_sink: BufferedSink | None = None
        self.templates: EventLines | None = None
        only = self.sinks[0] if len(self.sinks) == 1 else None
        if isinstance(only, BufferedSink) and only.lines is not None:
            if only.lines.encode is encode_event:
                self.line_sink = only
                self.templates = EventLines(encode_event)

    # --- the stage ------------------------------------------------------------------------

    def __call__(self, request: HTTPRequest, info: RequestInfo, /) -> Verdict:
        resolved = info.resolved
        if resolved is None:
            return None
        config = self.policy.evaluate(info.user, resolved)
        level = config.level
        self.metrics.policy_level(level)
        if level == "None":
            return None
        record = AuditRecord(
            request,
            info,
            level,
            self.clock.seconds(),
            omit_managed_fields=config.omit_managed_fields,
            user=info.authenticated_user or info.user,
        )
        if record.verb in _BODY_LOGGING_VERBS:
            self._read_request_object(request, record, level)
        accepted = self._send(record, config, "RequestReceived")
        if accepted is True:
            self._observe(request, record, config, info.long_running)
            return None
        if accepted is False:
            return self._rejected(request)
        return accepted.addCallback(self._received, request, record, config, info.long_running)

    def _received(
        self,
        accepted: bool,
        request: HTTPRequest,
        record: AuditRecord,
        config: AuditConfig,
        long_running: bool,
    ) -> Response | None:
        if not accepted:
            return self._rejected(request)
        self._observe(request, record, config, long_running)
        return None

    def _rejected(self, request: HTTPRequest) -> Response:
        self.metrics.rejected()
        log.error("failed to store audit event for {uri}", uri=request.uri)
        return internal_error_response(request, STORE_FAILED)

    def _read_request_object(self, request: HTTPRequest, record: AuditRecord, level: Level) -> None:
        """The body as the handler will decode it: JSON only (the REST layer's default)."""
        verb = record.verb
        if verb not in OBJECT_VERBS and not (
            verb in _BODY_VERBS and level_at_least(level, "Request")
        ):
            return
        resolved = record.info.resolved
        content = request.content
        if resolved is None or not resolved.resource_request or content is None:
            return
        try:
            position = content.tell()
            content.seek(0)
            body = content.read()
            content.seek(position)
        except (OSError, ValueError):
            return
        obj = decode_json_object(body)
        if obj is not None:
            record.log_request_object(obj)

    def _observe(
        self,
        request: HTTPRequest,
        record: AuditRecord,
        config: AuditConfig,
        long_running: bool,
    ) -> None:
        """Note the answer when it starts (a long-running one) or ends; send
        ResponseComplete when the request ends.

        Only a long-running answer (a watch) is watched as it starts, by replacing
        ``request.write`` for this request: its ResponseStarted goes out when its first
        bytes do. Any other answer is whole when the request finishes, so its code and, when
        the chain wrote it (``RequestInfo.answer``), its body are read then."""
        if long_running:
            write = request.write

            def audited_write(data: bytes) -> None:
                # Only the first write matters: then the wrapper goes (it and the request
                # refer to each other), and the class's ``write`` shows again.
                del request.write
                if not record.started:
                    self._response_started(request, record, config)
                write(data)

            request.write = audited_write  # type: ignore[method-assign]

        def finished(result: object) -> None:
            if long_running and not record.started:
                # Nothing was written: drop the wrapper (it and the request refer to each
                # other).
                vars(request).pop("write", None)
            if not long_running and (
                not isinstance(result, Failure) or getattr(request, "startedWriting", False)
            ):
                # The answer is whole (or, for a lost connection, its code went out).
                answer = record.info.answer
                # A HEAD answer has no body; a 204's neither.
                body = (
                    answer.body
                    if answer is not None and answer.body and request.method != b"HEAD"
                    else None
                )
                record.log_response(request.code, body)
            panic = record.info.panic
            if panic is not None:
                # WithAudit's recover(): stage Panic replaces ResponseComplete, and no
                # missing ResponseStarted is faked.
                record.started = True
                record.response_status = panic_status(panic)
                self._send(record, config, "Panic")
                return
            if not record.started:
                if isinstance(result, Failure):
                    record.response_status = dict(CLOSED_EARLY_STATUS)
                    record.started = True
                    if long_running:
                        self._send(record, config, "ResponseStarted")
                else:
                    # A long-running answer that wrote nothing: its code still went out.
                    self._response_started(request, record, config)
            self._send(record, config, "ResponseComplete")

        when_finished(request, record.info, finished)

    def _response_started(
        self, request: HTTPRequest, record: AuditRecord, config: AuditConfig
    ) -> None:
        """A long-running answer started: it streams, so only its code is noted (kube logs
        no object), and ResponseStarted goes out."""
        record.log_response(request.code, None)
        self._send(record, config, "ResponseStarted")

    # --- failed authentication --------------------------------------------------------------

    def authentication_failed(self, request: HTTPRequest, info: RequestInfo) -> None:
        """``WithFailedAuthenticationAudit``: called by the authentication stage before it
        answers 401; the answer's start sends the one ``ResponseStarted`` event.

        Its ``responseStatus`` is the 401's Status, not the ``Authentication failed, ...``
        text authn_audit.go sets first: the ``Unauthorized`` handler answers through
        ``responsewriters.ErrorNegotiated``, whose ``audit.LogResponseObject`` replaces the
        event's status with the answer's (k8s.io/apiserver ``pkg/audit/context.go``) before
        the header is written and the event sent."""
        resolved = info.resolved
        if resolved is None:
            return
        config = self.policy.evaluate(None, resolved)
        level = config.level
        self.metrics.policy_level(level)
        if level == "None":
            return
        record = AuditRecord(request, info, level, self.clock.seconds())
        write = request.write

        def audited_write(data: bytes) -> None:
            vars(request).pop("write", None)
            if not record.started:
                record.started = True
                record.response_status = {
                    "metadata": {},
                    "status": "Failure",
                    "message": "Unauthorized",
                    "reason": "Unauthorized",
                    "code": request.code,
                }
                self._send(record, config, "ResponseStarted")
            write(data)

        request.write = audited_write  # type: ignore[method-assign]

    # --- sending --------------------------------------------------------------------------

    def _send(self, record: AuditRecord, config: AuditConfig, stage: str) -> bool | Deferred[bool]:
        """``ProcessEventStage``: True when every sink took the event (or the stage is
        omitted), False when one refused, or a Deferred of that for a sink that waits."""
        if stage in config.omit_stages:
            return True
        # RequestReceived's stage time is the received time (ProcessEventStage).
        now = record.received if stage == "RequestReceived" else self.clock.seconds()
        line_sink = self.line_sink
        if line_sink is not None:
            assert self.templates is not None
            line = self.templates.line(record, stage, now)
            if line is not None:
                self.metrics.event(record.level)
                return line_sink.process_line(line)
        event = record.event(stage, now)
        self.metrics.event(record.level)
        events = (event,)
        accepted = True
        waiting: list[Deferred[bool]] = []
        for sink in self.sinks:
            try:
                result = sink.process_events(events)
            except Exception:
                log.failure("audit backend {name} failed", name=sink.name)
                accepted = False
                continue
            if result is True:
                continue  # first: Deferred is an ABC, so isinstance against it is slow
            if isinstance(result, Deferred):
                waiting.append(result.addErrback(_sink_failed, sink.name))
            elif not result:
                accepted = False
        if not waiting:
            return accepted
        return gatherResults(waiting).addCallback(lambda results: accepted and all(results))


def panic_status(error: str) -> dict[str, object]:
    """The ``responseStatus`` of a request whose handler panicked (audit.go's recover)."""
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"APIServer panic'd: {error}",
        "reason": "InternalError",
        "code": 500,
    }


def _sink_failed(failure: Failure, name: str) -> bool:
    log.failure("audit backend {name} failed", failure, name=name)
    return False
