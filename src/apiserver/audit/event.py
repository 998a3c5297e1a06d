"""One request's ``audit.k8s.io/v1`` Event, filled as kube-apiserver fills it.

Follows k8s.io/apiserver ``pkg/audit/request.go`` (``LogRequestMetadata``,
``LogRequestObject``, ``LogResponseObject``, ``maybeTruncateUserAgent``), ``pkg/audit/
context.go`` (``ProcessEventStage``: the stage timestamp of ``RequestReceived`` is the
received timestamp, the others the time of the stage; ``LogResponseObject`` copies the bounded
fields of a Status answer) and k8s.io/apimachinery ``pkg/util/net/http.go`` (``SourceIPs``).

:class:`AuditRecord` is the per-request state (Go's ``AuditContext``); :meth:`AuditRecord.event`
renders it for one stage as a fresh dict whose keys are in the order Go's encoder writes the
``Event`` struct (``pkg/apis/audit/v1/types.go``), optional fields left out as ``omitempty``
does, so a sink may keep it (a batch) while the request goes on.
"""

from __future__ import annotations

import functools
import ipaddress
from datetime import UTC, datetime
from typing import Any

import orjson

from apiserver.audit.interface import API_VERSION, AuditEvent, Level
from apiserver.auth.interface import UserInfo
from apiserver.auth.requestinfo import RequestInfo as ResolvedInfo
from apiserver.gocompat.timefmt import format_rfc3339
from apiserver.http.app import RequestInfo, header_value
from apiserver.http.request import HTTPRequest

MAX_USER_AGENT_LENGTH = 1024
USER_AGENT_TRUNCATE_SUFFIX = "...TRUNCATED"
DECISION_ANNOTATION = "authorization.k8s.io/decision"
REASON_ANNOTATION = "authorization.k8s.io/reason"
#: ``Status`` of a request that ended without an answer (``WithAudit``'s fakedSuccessStatus).
CLOSED_EARLY_STATUS: dict[str, Any] = {
    "metadata": {},
    "status": "Success",
    "message": "Connection closed early",
    "code": 200,
}
_LEVEL_ORDER = {"None": 0, "Metadata": 1, "Request": 2, "RequestResponse": 3}
#: Verbs whose body is the object (``LogRequestObject`` in handlers/create.go, update.go):
#: it completes the object reference at every level and is kept from Request on.
OBJECT_VERBS = frozenset({"create", "update"})


_second_cache: list[Any] = [None, ""]


def _whole_and_micros(seconds: float) -> tuple[int, int]:
    """The whole seconds and the microseconds of a Unix time, rounded to the nearest
    microsecond (``int(x + 0.5)``: ``round`` costs twice as much)."""
    whole = int(seconds // 1)
    micros = int((seconds - whole) * 1_000_000 + 0.5)
    if micros >= 1_000_000:
        return whole + 1, micros - 1_000_000
    return whole, micros


def micro_time(seconds: float) -> str:
    """``metav1.MicroTime`` of a Unix time: RFC 3339, six fraction digits, UTC.

    Every request formats two or three of these, mostly within the same second: the
    whole-second part (Go's RFC 3339 layout) is kept for the last second seen.
    """
    whole, micros = _whole_and_micros(seconds)
    cache = _second_cache
    if cache[0] != whole:
        cache[1] = format_rfc3339(datetime.fromtimestamp(whole, UTC))[:-1] + "."
        cache[0] = whole
    # Two table look-ups: an f-string's ``06d`` costs about twice as much.
    return "".join((cache[1], _DIGITS3[micros // 1000], _DIGITS3[micros % 1000], "Z"))


#: "000" to "999".
_DIGITS3 = [f"{i:03d}" for i in range(1000)]
_DIGITS3_BYTES = [digits.encode() for digits in _DIGITS3]
_second_cache_bytes: list[Any] = [None, b""]


def micro_time_bytes(seconds: float) -> bytes:
    """:func:`micro_time` encoded, for the lines written from templates
    (apiserver.audit.templates), without the text in between. Two per audited request:
    :func:`_whole_and_micros` is inlined (a call is a good part of the work), with ``int``
    for the whole seconds (the same as ``// 1`` from 1970 on; earlier times go the long
    way)."""
    if seconds < 0.0:
        return micro_time(seconds).encode()
    whole = int(seconds)
    micros = int((seconds - whole) * 1_000_000 + 0.5)
    if micros >= 1_000_000:
        whole += 1
        micros -= 1_000_000
    cache = _second_cache_bytes
    if cache[0] != whole:
        cache[1] = micro_time(whole)[:-7].encode()  # up to the seconds' "."
        cache[0] = whole
    digits = _DIGITS3_BYTES
    return b"".join((cache[1], digits[micros // 1000], digits[micros % 1000], b"Z"))


def level_at_least(level: Level, other: Level) -> bool:
    """``!level.Less(other)``."""
    return _LEVEL_ORDER[level] >= _LEVEL_ORDER[other]


def user_agent(request: HTTPRequest) -> str:
    """``maybeTruncateUserAgent``: at most 1024 characters, then ``...TRUNCATED``."""
    # The headers' own dict, by canonical name: getRawHeaders would canonicalise the
    # constant name on every call (twisted.web.http_headers.Headers keeps values under
    # their Http-Header-Case names). The first value, as Go's Header.Get.
    values = request.requestHeaders._rawHeaders.get(b"User-Agent")
    if not values:
        return ""
    agent: str = values[0].decode("latin-1")
    if len(agent) > MAX_USER_AGENT_LENGTH:
        return agent[:MAX_USER_AGENT_LENGTH] + USER_AGENT_TRUNCATE_SUFFIX
    return agent


@functools.lru_cache(maxsize=1024)
def _parse_ip(text: str) -> str | None:
    """An address as Go's ``net.ParseIP(...).String()`` prints it, or None if invalid.

    Cached: a server sees the same few peers and proxies again and again.
    """
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)  # Go prints a v4-mapped address as IPv4
    return str(ip)


@functools.lru_cache(maxsize=1024)
def _peer_only(host: str) -> list[str]:
    """``source_ips`` of a request without forwarding headers: a list shared by the
    requests of that peer (events are never changed once built)."""
    ip = _parse_ip(host)
    return [] if ip is None else [ip]


def peer_host(request: HTTPRequest) -> str:
    """The connection's peer address (Go's ``RemoteAddr`` without the port), or ""."""
    client = getattr(request, "client", None)
    if client is None:
        get_client = getattr(request, "getClientAddress", None)
        client = get_client() if get_client is not None else None
    host = getattr(client, "host", None)
    return host if isinstance(host, str) else ""


def source_ips(request: HTTPRequest) -> list[str]:
    """``utilnet.SourceIPs``: the valid ``X-Forwarded-For`` entries, ``X-Real-Ip`` unless
    already among them, then the peer unless it is the last one already."""
    received = request.requestHeaders._rawHeaders  # by canonical name, see user_agent
    if b"X-Forwarded-For" not in received and b"X-Real-Ip" not in received:
        # The usual request: the peer alone.
        return _peer_only(peer_host(request))
    # Normalised texts compare as Go's IP.Equal does (v4-mapped addresses are IPv4 here).
    ips: list[str] = []
    forwarded = header_value(request, b"x-forwarded-for")
    if forwarded:
        for part in forwarded.split(","):
            ip = _parse_ip(part.strip())
            if ip is not None:
                ips.append(ip)
    real = header_value(request, b"x-real-ip")
    if real:
        ip = _parse_ip(real)
        if ip is not None and ip not in ips:
            ips.append(ip)
    remote = _parse_ip(peer_host(request))
    if remote is not None and (not ips or ips[-1] != remote):
        ips.append(remote)
    return ips


def user_info(user: UserInfo | None) -> dict[str, Any]:
    """``authenticationv1.UserInfo`` as JSON (``{}`` for none)."""
    return {} if user is None else user.to_json()


#: Rendered ``user_info`` per UserInfo object: authenticators hand out the same object for
#: the same credential (their caches), and events are never changed once built, so they
#: can share the rendered dict. Keyed by identity (the value holds the object, so its id
#: cannot be reused while cached); cleared when full.
_rendered_users: dict[int, tuple[UserInfo, dict[str, Any]]] = {}
_RENDERED_USERS_MAX = 1024


def user_info_shared(user: UserInfo | None) -> dict[str, Any]:
    """:func:`user_info`, shared between the events of every request of the same user."""
    if user is None:
        return {}
    hit = _rendered_users.get(id(user))
    if hit is not None and hit[0] is user:
        return hit[1]
    rendered = user_info(user)
    if len(_rendered_users) >= _RENDERED_USERS_MAX:
        _rendered_users.clear()
    _rendered_users[id(user)] = (user, rendered)
    return rendered


def object_ref(resolved: ResolvedInfo) -> dict[str, str] | None:
    """``ObjectReference`` of a resource request (``LogRequestMetadata``), else None."""
    if not resolved.resource_request:
        return None
    ref: dict[str, str] = {"resource": resolved.resource} if resolved.resource else {}
    if resolved.namespace:
        ref["namespace"] = resolved.namespace
    if resolved.name:
        ref["name"] = resolved.name
    if resolved.api_group:
        ref["apiGroup"] = resolved.api_group
    if resolved.api_version:
        ref["apiVersion"] = resolved.api_version
    if resolved.subresource:
        ref["subresource"] = resolved.subresource
    return ref


_REF_ORDER = (
    "resource",
    "namespace",
    "name",
    "uid",
    "apiGroup",
    "apiVersion",
    "resourceVersion",
    "subresource",
)


def enrich_object_ref(ref: dict[str, str], obj: Any) -> dict[str, str]:
    """``LogRequestObject``: what the request object's metadata adds to an empty field."""
    metadata = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(metadata, dict):
        return ref
    merged = dict(ref)
    for key in ("namespace", "name", "uid", "resourceVersion"):
        value = metadata.get(key)
        if not merged.get(key) and isinstance(value, str) and value:
            merged[key] = value
    return {key: merged[key] for key in _REF_ORDER if key in merged}


def without_managed_fields(obj: Any) -> Any:
    """``copyWithoutManagedFields``: a copy without ``metadata.managedFields`` (of the object,
    or of each list item)."""
    if not isinstance(obj, dict):
        return obj
    copy = dict(obj)
    metadata = copy.get("metadata")
    if isinstance(metadata, dict) and "managedFields" in metadata:
        copy["metadata"] = {k: v for k, v in metadata.items() if k != "managedFields"}
    items = copy.get("items")
    if isinstance(items, list):
        copy["items"] = [without_managed_fields(item) for item in items]
    return copy


def decode_json_object(body: bytes) -> Any:
    """A JSON body as values, or None when it is empty or not JSON (YAML, protobuf)."""
    if not body or body[:1] != b"{":
        return None
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


#: ``responseStatus`` of answers that are not a Status, per code: shared by their events
#: (never changed once built).
_code_only: dict[int, dict[str, Any]] = {}


def response_status(code: int, body: bytes | None) -> dict[str, Any]:
    """``responseStatus``: the bounded fields of a Status answer (``LogResponseObject``) with
    the written code, or only the code (``SetEventResponseStatusCode``)."""
    # A Status names its kind first (compact or ``?pretty``); other bodies are not parsed.
    # (find, not ``in``: bytes' ``in`` tries its operand as an integer first.)
    if body is None or body[:1] != b"{" or body.find(b'"Status"', 0, 32) < 0:
        shared = _code_only.get(code)
        if shared is None:
            shared = {"metadata": {}, "code": code} if code else {"metadata": {}}
            if len(_code_only) < 1000:
                _code_only[code] = shared
        return shared
    status: dict[str, Any] = {"metadata": {}}
    parsed = decode_json_object(body)
    if isinstance(parsed, dict) and parsed.get("kind") == "Status":
        for key in ("status", "message", "reason", "details"):
            value = parsed.get(key)
            if value:
                status[key] = value
    if code:
        status["code"] = code
    return status


class AuditRecord:
    """One request's audit state (``AuditContext``), rendered per stage by :meth:`event`."""

    __slots__ = (
        "annotations",
        "audit_id",
        "described",
        "info",
        "level",
        "object_ref",
        "omit_managed_fields",
        "received",
        "request",
        "request_object",
        "request_uri",
        "response_object",
        "response_status",
        "source_ips",
        "started",
        "template",
        "user",
        "user_agent",
        "user_info",
        "verb",
    )

    def __init__(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        level: Level,
        received: float,
        *,
        omit_managed_fields: bool = False,
        user: UserInfo | None = None,
    ) -> None:
        """``LogRequestMetadata``; ``user`` is the authenticated user (None after a failed
        authentication, which the event shows as ``{}``)."""
        self.level: Level = level
        self.info = info
        # The headers' own dict, by canonical name: getRawHeaders would canonicalise the
        # constant names on every call (twisted.web.http_headers.Headers keeps values under
        # their Http-Header-Case names).
        audit_id = request.responseHeaders._rawHeaders.get(b"Audit-Id")
        self.audit_id = audit_id[0].decode("latin-1") if audit_id else ""
        #: The request's line template, once looked up (apiserver.audit.templates): None
        #: not yet, False none; the server's own audit IDs (none in the request) are UUIDs.
        self.template: Any = None if b"Audit-Id" not in request.requestHeaders._rawHeaders else 0
        resolved = info.resolved
        # Non-resource requests: the lower-cased HTTP method (NewRequestInfo).
        self.verb = resolved.verb if resolved is not None else info.method.lower()
        #: The request and its user, read by :meth:`describe` (the fields an event shows)
        #: when an event is built field by field. A request whose events come from a
        #: template (apiserver.audit.templates) never needs them: its template is found from
        #: the request's raw values.
        self.request = request
        self.user_info = user
        self.described = False
        self.received = received
        self.omit_managed_fields = omit_managed_fields
        self.response_status: dict[str, Any] | None = None
        self.request_object: Any = None
        self.response_object: Any = None
        self.annotations: dict[str, str] | None = None
        #: True once the answer's code is known (``auditResponseWriter.processCode``).
        self.started = False

    def describe(self) -> None:
        """The rest of ``LogRequestMetadata``: the request URI, user, source IPs, user agent
        and object reference, read once from the request."""
        if self.described:
            return
        self.described = True
        request = self.request
        self.request_uri = request.uri.decode("utf-8", "replace")
        self.user = user_info_shared(self.user_info)
        self.source_ips = source_ips(request)
        self.user_agent = user_agent(request)
        resolved = self.info.resolved
        self.object_ref = object_ref(resolved) if resolved is not None else None

    def log_request_object(self, obj: Any) -> None:
        """``LogRequestObject``: fill the object reference, keep the object at Request+."""
        self.describe()
        if self.omit_managed_fields:
            obj = without_managed_fields(obj)
        self.object_ref = enrich_object_ref(self.object_ref or {}, obj)
        if level_at_least(self.level, "Request"):
            self.request_object = obj

    def log_response(self, code: int, body: bytes | None) -> None:
        """The answer's code and Status, and at RequestResponse its object."""
        self.started = True
        self.response_status = response_status(code, body)
        if body is not None and self.level == "RequestResponse":
            obj = decode_json_object(body)
            if obj is not None and self.omit_managed_fields:
                obj = without_managed_fields(obj)
            self.response_object = obj

    def event(self, stage: str, stage_timestamp: float) -> AuditEvent:
        """The Event of ``stage`` (a new dict each time)."""
        self.describe()
        info = self.info
        event: AuditEvent = {
            "kind": "Event",
            "apiVersion": API_VERSION,
            "level": self.level,
            "auditID": self.audit_id,
            "stage": stage,
            "requestURI": self.request_uri,
            "verb": self.verb,
            "user": self.user,
        }
        impersonated = info.impersonated_user
        if impersonated is not None:
            event["impersonatedUser"] = user_info(impersonated)
        if self.source_ips:
            event["sourceIPs"] = self.source_ips
        if self.user_agent:
            event["userAgent"] = self.user_agent
        if self.object_ref is not None:
            event["objectRef"] = self.object_ref
        if self.response_status is not None:
            event["responseStatus"] = self.response_status
        if self.request_object is not None:
            event["requestObject"] = self.request_object
        if self.response_object is not None:
            event["responseObject"] = self.response_object
        event["requestReceivedTimestamp"] = received = micro_time(self.received)
        event["stageTimestamp"] = (
            received if stage == "RequestReceived" else micro_time(stage_timestamp)
        )
        annotations = self.annotations
        added = info.audit_annotations
        decided = info.authorization
        if annotations is None and not added:
            # The usual event: authorization's two annotations or none, already in key order.
            if decided is not None:
                decision, reason = decided
                event["annotations"] = (
                    {DECISION_ANNOTATION: decision, REASON_ANNOTATION: reason}
                    if decision
                    else {REASON_ANNOTATION: reason}
                )
            return event
        if added:
            # The authenticator's (e.g. authentication.k8s.io/stale-token); added first,
            # so they keep their value (AddAuditAnnotation keeps the first).
            annotations = {**annotations, **added} if annotations else dict(added)
        if decided is not None:
            # WithAuthorization's annotations (a decision only when there is one).
            annotations = dict(annotations) if annotations else {}
            decision, reason = decided
            if decision:
                annotations.setdefault(DECISION_ANNOTATION, decision)
            annotations.setdefault(REASON_ANNOTATION, reason)
        if annotations:
            # Go marshals a map with its keys sorted.
            event["annotations"] = dict(sorted(annotations.items()))
        return event
