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

The usual request costs a few calls: the stage keeps, per request *shape* (the raw
values its policy answer and its events' fields are functions of: URI, method, user, peer,
first ``User-Agent`` value), the policy's answer and, once a request of the shape found a
line template (:mod:`apiserver.audit.templates`), the template's pieces. A request of such a
shape with nothing unusual (no forwarding headers, no client ``Audit-Id``, no
impersonation, no annotation but authorization's, an answer that ends normally) writes its
two lines from the pieces straight into the batch queue (:meth:`AuditStage._fused`,
:meth:`AuditStage._fused_finished`): no :class:`~apiserver.audit.event.AuditRecord`, the
metrics as plain integer adds (:meth:`FilterMetrics.counts`), its ``RequestReceived`` held
until its ``ResponseComplete`` writes both (``BufferedSink.hold_line``, ``end_line``).
Anything unusual goes the general way, from the same state, with the same bytes
(tests/unit/audit/test_templates.py compares every line with the encoder's).

How the answer is observed: the stage replaces ``request.write`` on the request object for
that request only (audited requests pay for it, others do not), because the chain writes every
answer, and watch streams their chunks, through it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

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
    micro_time_bytes,
    peer_host,
    response_status,
)
from apiserver.audit.interface import LEVELS, AuditMetrics, Level, Sink
from apiserver.audit.policy import AuditConfig, Policy
from apiserver.audit.templates import EventLines, Template
from apiserver.auth.filter import internal_error_response
from apiserver.auth.interface import UserInfo
from apiserver.http.app import RequestInfo, Verdict, when_finished
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

log = Logger()

STORE_FAILED = "failed to store audit event"
#: Verbs whose body is kept from Request on (a patch, DeleteOptions).
_BODY_VERBS = frozenset({"patch", "delete", "deletecollection"})
_BODY_LOGGING_VERBS = OBJECT_VERBS | _BODY_VERBS


class FilterMetrics(AuditMetrics, Protocol):
    """:class:`AuditMetrics` and the per-level counters of requests and events."""

    def counts(self, level: Level) -> list[int]:
        """``[requests, events]`` at ``level``, which the stage adds to for every request
        (``ObservePolicyLevel``: ``apiserver_audit_level_total{level}``, None included) and
        every event it sends (``ObserveEvent``: ``apiserver_audit_event_total``); the
        recorder adds them to the metrics when they are collected. Plain integer adds: a
        method call per count was a measurable part of an audited request."""
        ...


class _Shape:
    """What the stage keeps per request *shape*: the request's raw values that decide its
    policy answer and its events' fields (URI, method, user, peer, first ``User-Agent``
    value; see :meth:`AuditStage.__call__`).

    ``config`` memoises the policy's answer (the resolved request info is a function of the
    method and URI, and the rules see nothing else but the user). ``rc`` (and ``rr``) are
    the pieces of the shape's line template (apiserver.audit.templates) once a request of
    the shape found one, when the shape's events can be written from them without an
    :class:`AuditRecord` (``fused``: see :meth:`AuditStage._fused`)."""

    __slots__ = ("config", "counts", "fused", "rc", "received", "rr", "user")

    def __init__(self, user: object, config: AuditConfig, counts: list[int], fused: bool) -> None:
        #: Kept alive so that its id, part of the key, stays its own.
        self.user = user
        self.config = config
        self.counts = counts
        self.fused = fused
        #: RequestReceived is sent (not in ``omitStages``).
        self.received = "RequestReceived" not in config.omit_stages
        #: RequestReceived's pieces (no decision yet at the stage).
        self.rr: tuple[bytes, ...] | None = None
        #: ResponseComplete's pieces by decision (the template's own dict: it grows).
        self.rc: dict[Any, tuple[bytes, ...]] | None = None

    def adopt(self, template: Template) -> None:
        """Take the pieces of a template a request of this shape found."""
        rr = template.received.get(None)
        rc = template.stages.get("ResponseComplete")
        if self.fused and rc is not None and (rr is not None or not self.received):
            self.rr, self.rc = rr, rc


def new_record(
    request: HTTPRequest, info: RequestInfo, config: AuditConfig, received: float
) -> AuditRecord:
    """The record of a request received at ``received`` under the policy answer ``config``
    (the user the authenticator found, else the request's)."""
    return AuditRecord(
        request,
        info,
        config.level,
        received,
        omit_managed_fields=config.omit_managed_fields,
        user=info.authenticated_user or info.user,
    )


#: Shapes kept; cleared when full (a server sees a bounded set of request shapes; unique
#: URIs only cost a miss).
MAX_SHAPES = 4096


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
        #: ``[requests, events]`` per level (FilterMetrics.counts).
        self._counts: dict[str, list[int]] = {level: metrics.counts(level) for level in LEVELS}
        #: The log backend in batch mode with the JSON format as the only sink: the usual
        #: events go to it as lines made from templates (apiserver.audit.templates).
        self.line_sink: BufferedSink | None = None
        self.templates: EventLines | None = None
        only = self.sinks[0] if len(self.sinks) == 1 else None
        if isinstance(only, BufferedSink) and only.lines is not None:
            if only.lines.encode is encode_event:
                self.line_sink = only
                self.templates = EventLines(encode_event)
        self._shapes: dict[tuple[object, ...], _Shape] = {}
        #: ``responseStatus`` of an answer that is not a Status, as a line holds it, by code.
        self._code_status: dict[int, bytes] = {}

    # --- the stage ------------------------------------------------------------------------

    def __call__(self, request: HTTPRequest, info: RequestInfo, /) -> Verdict:
        resolved = info.resolved
        if resolved is None:
            return None
        # The request's shape, from its raw values (_Shape): the headers' own dict by
        # canonical name (event.user_agent says why).
        user = info.user
        headers = request.requestHeaders._rawHeaders
        agent = headers.get(b"User-Agent")
        key = (request.uri, info.method, id(user), peer_host(request), agent[0] if agent else None)
        shape = self._shapes.get(key)
        if shape is None or shape.user is not user:
            shape = self._new_shape(key, user, info, resolved)
        shape.counts[0] += 1
        config = shape.config
        if config.level == "None":
            return None
        # The usual request of a shape with a template: its events' fields are the
        # template's (no forwarding headers for the source IPs, no client audit ID, which
        # may need escaping, nothing that adds annotations or an impersonated user yet).
        usual = (
            shape.fused
            and b"Audit-Id" not in headers
            and b"X-Forwarded-For" not in headers
            and b"X-Real-Ip" not in headers
            and not info.impersonating
            and not info.audit_annotations
            and info.authorization is None
            and info.authenticated_user is user
        )
        if usual and shape.rc is not None and self.line_sink is not None:
            return self._fused(request, info, shape)
        record = new_record(request, info, config, self.clock.seconds())
        if record.verb in _BODY_LOGGING_VERBS:
            self._read_request_object(request, record, config.level)
        accepted = self._send(record, config, "RequestReceived")
        if accepted is True:
            self._observe(request, record, config, info.long_running, shape if usual else None)
            return None
        if accepted is False:
            return self._rejected(request)
        return accepted.addCallback(
            self._received, request, record, config, info.long_running, shape if usual else None
        )

    def _new_shape(
        self, key: tuple[object, ...], user: UserInfo | None, info: RequestInfo, resolved: Any
    ) -> _Shape:
        """The policy's answer for a shape seen for the first time (or whose user object
        went: its id was reused)."""
        config = self.policy.evaluate(user, resolved)
        level = config.level
        # Events a template can write whole: no request or response object (a create's or
        # update's body completes the object reference too), one ResponseComplete.
        fused = (
            (level == "Metadata" or level == "Request")
            and resolved.verb not in _BODY_LOGGING_VERBS
            and not info.long_running
            and "ResponseComplete" not in config.omit_stages
        )
        shapes = self._shapes
        if len(shapes) >= MAX_SHAPES:
            shapes.clear()
        shape = shapes[key] = _Shape(user, config, self._counts[level], fused)
        return shape

    def _received(
        self,
        accepted: bool,
        request: HTTPRequest,
        record: AuditRecord,
        config: AuditConfig,
        long_running: bool,
        shape: _Shape | None,
    ) -> Response | None:
        if not accepted:
            return self._rejected(request)
        self._observe(request, record, config, long_running, shape)
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
        shape: _Shape | None,
    ) -> None:
        """Note the answer when it starts (a long-running one) or ends; send
        ResponseComplete when the request ends (:meth:`_finished`).

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
        when_finished(
            request,
            record.info,
            partial(self._finished, request, record, config, long_running, shape),
        )

    def _finished(
        self,
        request: HTTPRequest,
        record: AuditRecord,
        config: AuditConfig,
        long_running: bool,
        shape: _Shape | None,
        result: object,
    ) -> None:
        """The request ended (``result``: None, or the Failure of a lost connection): send
        ResponseComplete, or Panic. ``shape`` is the request's when it was a usual one: a
        template its events found becomes the shape's."""
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
        else:
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
            found = record.template
            if shape is not None and type(found) is tuple:
                shape.adopt(found[0])
        line_sink = self.line_sink
        if line_sink is not None:
            # A held RequestReceived goes out even if nothing followed it (an omitted stage).
            line_sink.release()

    # --- the usual request of a known shape ---------------------------------------------------

    def _fused(self, request: HTTPRequest, info: RequestInfo, shape: _Shape) -> Response | None:
        """RequestReceived of the usual request of a shape with a template, straight from
        the template's pieces into the batch queue, and its ResponseComplete hooked (see
        :meth:`_fused_finished`): the bytes :meth:`_send` would queue, with no
        :class:`AuditRecord` and a few calls instead of about twenty. The line is held
        (``BufferedSink.hold_line``): the request's ResponseComplete sends both."""
        ids = request.responseHeaders._rawHeaders.get(b"Audit-Id")
        # The server's own audit ID (a UUID; the request had none): written as it is.
        audit_id = ids[0] if ids else b""
        now = self.clock.seconds()
        received = micro_time_bytes(now)
        sink = self.line_sink
        assert sink is not None
        pieces = shape.rr
        if pieces is not None:
            line = b"".join(
                (pieces[0], audit_id, pieces[1], received, pieces[2], received, pieces[3])
            )
            shape.counts[1] += 1
            queue = sink.queue
            # BufferedSink.process_line's usual case inline: a pump is due already.
            if sink.due_now and len(queue) < sink.buffer_size:
                queue.append((0.0, line))
            elif not sink.hold_line(line):
                return self._rejected(request)
        hook = partial(self._fused_finished, request, info, shape, audit_id, now, received)
        # when_finished, inline.
        hooks = info.finish_hooks
        if hooks is not None:
            hooks.append(hook)
        else:
            request.notifyFinish().addBoth(hook)
        return None

    def _fused_finished(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        shape: _Shape,
        audit_id: bytes,
        received: float,
        received_text: bytes,
        result: object,
    ) -> None:
        """ResponseComplete of a request :meth:`_fused` received: from the template when it
        ended as usual, else through :meth:`_finished` with the record it would have had."""
        sink = self.line_sink
        assert sink is not None
        rc = shape.rc
        if (
            result is None
            and rc is not None
            and info.panic is None
            and info.impersonated_user is None
            and not info.audit_annotations
        ):
            pieces = rc.get(info.authorization)
            if pieces is not None:
                code = request.code
                answer = info.answer
                body = answer.body if answer is not None else None
                # Not a Status (event.response_status): the code alone. (find, not ``in``:
                # bytes' ``in`` tries the operand as an integer first, and raises inside.)
                if (
                    not body
                    or body[:1] != b"{"
                    or body.find(b'"Status"', 0, 32) < 0
                    or request.method == b"HEAD"
                ):
                    status = self._code_status.get(code)
                    if status is None:
                        status = self._code_status_line(code)
                else:
                    lines = self.templates
                    assert lines is not None
                    status = lines.status_json(response_status(code, body))
                line = b"".join(
                    (
                        pieces[0],
                        audit_id,
                        pieces[1],
                        status,
                        pieces[2],
                        received_text,
                        pieces[3],
                        micro_time_bytes(self.clock.seconds()),
                        pieces[4],
                    )
                )
                queue = sink.queue
                if sink.due_now and len(queue) < sink.buffer_size:
                    queue.append((0.0, line))
                else:
                    sink.end_line(line)
                shape.counts[1] += 1
                return
        config = shape.config
        record = new_record(request, info, config, received)
        self._finished(request, record, config, False, shape, result)

    def _code_status_line(self, code: int) -> bytes:
        lines = self.templates
        assert lines is not None
        status = self._code_status[code] = lines.status_json(response_status(code, None))
        if len(self._code_status) > 1000:
            self._code_status.clear()
        return status

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
        self._counts[level][0] += 1
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
                self._counts[record.level][1] += 1
                # A request's first line waits for its last (BufferedSink.hold_line): the
                # end of the request sends both, or :meth:`_finished`'s release.
                if stage == "RequestReceived" and not record.info.long_running:
                    return line_sink.hold_line(line)
                if stage == "ResponseComplete" or stage == "Panic":
                    return line_sink.end_line(line)
                return line_sink.process_line(line)
        event = record.event(stage, now)
        self._counts[record.level][1] += 1
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
