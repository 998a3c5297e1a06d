"""The JSON lines of the usual audit events, from templates of the request's shape.

Why: with Metadata-level audit every request sends two events (``RequestReceived`` and
``ResponseComplete``), and building each as a dict and encoding it
(:func:`apiserver.audit.encoding.encode_event`) is most of what audit costs per request.
Requests repeat themselves: a kubelet posts to the same collection, a controller lists and
watches the same URI, a client polls the same object. Two events of requests with the same
*shape* (level, URI, verb, user, source IPs, user agent, object reference, and the
authorization decision at the event's stage) differ only in their audit ID, stage,
timestamps and response status. So the line of the first such event is encoded with
markers in those places and split there, and each later line is the pieces joined around
the values, byte for byte what the encoder would have written
(tests/unit/audit/test_templates.py compares them).

A template is found from the request's raw values (level, URI, method, user, peer address
and first ``User-Agent`` value, of which the event's fields are functions), so a request
whose events come from templates never builds those fields
(:meth:`apiserver.audit.event.AuditRecord.describe`); requests whose source IPs come from
forwarding headers, or whose object reference from their body (create, update), are keyed
by the built fields instead.

Only the usual events take this path: no request or response object (Metadata level, or a
verb that logs none), no impersonation, no annotation but authorization's, an audit ID that
needs no escaping. Anything else, and the first event of each shape, is encoded as before.
Used by the filter when the one sink is the log backend in batch mode with the JSON format
(:meth:`apiserver.audit.buffered.BufferedSink.process_line`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from apiserver.audit.event import OBJECT_VERBS, AuditRecord, micro_time_bytes, peer_host
from apiserver.audit.interface import AuditEvent

__all__ = ["EventLines", "Template"]

#: Values put in place of the variable fields while a template is encoded: control
#: characters, which the encoder writes as ``\u000N`` and no other field can contain
#: unescaped.
_AUDIT_ID, _STAGE, _RECEIVED, _STAGE_TIME, _STATUS = "\x01", "\x02", "\x03", "\x04", "\x05"
_MARK = re.compile(rb'"\\u000([1-5])"')
#: Audit IDs written as they are (the server's UUIDs; a client's own ``Audit-Id`` header
#: with anything else goes the encoder's way).
_PLAIN_ID = re.compile(r"[0-9A-Za-z._:-]{1,128}")
#: Templates kept; cleared when full (a server sees a bounded set of request shapes;
#: unique URIs only cost a miss).
MAX_TEMPLATES = 2048
#: Encoded response statuses kept by identity (the code-only ones are shared objects).
MAX_STATUSES = 256


class Template:
    """One request shape's line pieces (see the module docstring)."""

    __slots__ = ("received", "refs", "stages")

    def __init__(self, refs: tuple[Any, ...]) -> None:
        #: Objects whose identity is part of the key, kept alive so their ids stay theirs.
        self.refs = refs
        #: The line's pieces around the variable fields of ``RequestReceived`` (no
        #: ``responseStatus``), by the authorization decision known at the event's stage
        #: (none yet when the request is received: authorization comes after audit in the
        #: chain); the stage's name is joined into them.
        self.received: dict[Any, tuple[bytes, ...]] = {}
        #: The same for the later stages (with ``responseStatus``), by stage.
        self.stages: dict[str, dict[Any, tuple[bytes, ...]]] = {}


class EventLines:
    """Lines of the usual events by template (see the module docstring); ``encode`` is the
    encoder whose bytes they reproduce."""

    def __init__(self, encode: Callable[[AuditEvent], bytes]) -> None:
        self.encode = encode
        self._templates: dict[tuple[Any, ...], Template] = {}
        #: Shapes seen once: a template is made at the second sighting, so requests of a
        #: shape of their own (an object's URI read once) cost a look-up, not a template.
        self._seen: dict[tuple[Any, ...], None] = {}
        self._statuses: dict[int, tuple[Any, bytes]] = {}

    def line(self, record: AuditRecord, stage: str, now: float) -> bytes | None:
        """The event's line, or None when it is not a usual one (the caller encodes the
        event dict then). ``now`` is the stage's time (unread at ``RequestReceived``, whose
        stage time is the received time)."""
        info = record.info
        if (
            record.response_object is not None
            or record.annotations is not None
            or info.audit_annotations
            # Known after RequestReceived (impersonation comes after audit in the chain).
            or info.impersonated_user is not None
        ):
            return None
        found = record.template
        if not found:
            if found is False:
                return None
            found = record.template = self._find(record)
            if found is False:
                return None
        template, audit_id, received = found
        decided = info.authorization
        if stage == "RequestReceived":
            pieces = template.received.get(decided)
            if pieces is None:
                pieces = self._new(template.received, decided, record, stage, None)
                if pieces is None:
                    return None
            # Its stage time is the received time.
            return b"".join(
                (pieces[0], audit_id, pieces[1], received, pieces[2], received, pieces[3])
            )
        status = record.response_status
        if status is None:
            return None
        variants = template.stages.get(stage)
        if variants is None:
            variants = template.stages[stage] = {}
        pieces = variants.get(decided)
        if pieces is None:
            pieces = self._new(variants, decided, record, stage, status)
            if pieces is None:
                return None
        return b"".join(
            (
                pieces[0],
                audit_id,
                pieces[1],
                self.status_json(status),
                pieces[2],
                received,
                pieces[3],
                micro_time_bytes(now),
                pieces[4],
            )
        )

    def _find(self, record: AuditRecord) -> tuple[Template, bytes, bytes] | bool:
        """The record's template with its audit ID and received time encoded, or False
        (not a usual request, or a shape seen for the first time)."""
        audit_id = record.audit_id
        if record.request_object is not None or (
            record.template == 0 and _PLAIN_ID.fullmatch(audit_id) is None
        ):
            return False
        request = record.request
        received = request.requestHeaders._rawHeaders  # by canonical name (event.user_agent)
        user = record.user_info
        if (
            record.verb in OBJECT_VERBS
            or b"X-Forwarded-For" in received
            or b"X-Real-Ip" in received
        ):
            # The object reference comes from the body, or the source IPs from headers:
            # the key is the described fields.
            record.describe()
            ref = record.object_ref
            key: tuple[Any, ...] = (
                record.level,
                record.request_uri,
                record.verb,
                id(user),
                tuple(record.source_ips),
                record.user_agent,
                tuple(ref.items()) if ref is not None else None,
            )
        else:
            # The usual request: what the described fields are made of (the URI, method
            # and peer give the verb, object reference and source IPs; the first
            # User-Agent value the user agent).
            agent = received.get(b"User-Agent")
            key = (
                record.level,
                request.uri,
                record.info.method,
                id(user),
                peer_host(request),
                agent[0] if agent else None,
            )
        template = self._templates.get(key)
        if template is None:
            seen = self._seen
            if key not in seen:
                if len(seen) >= MAX_TEMPLATES:
                    seen.clear()
                seen[key] = None
                return False
            del seen[key]
            if len(self._templates) >= MAX_TEMPLATES:
                self._templates.clear()
            template = self._templates[key] = Template((user,))
        return template, audit_id.encode(), micro_time_bytes(record.received)

    def _new(
        self,
        variants: dict[Any, tuple[bytes, ...]],
        decided: Any,
        record: AuditRecord,
        stage: str,
        status: dict[str, Any] | None,
    ) -> tuple[bytes, ...] | None:
        """A template's pieces for a decision it has none for yet (the record goes the
        encoder's way from now on if its event cannot be cut)."""
        split = self._split(record, stage, status)
        if split is None:
            record.template = False
            return None
        # The stage is constant within its variants: joined with the pieces around it.
        before, after_id, after_stage, after_status, after_received, end = split
        joined = after_id + stage.encode() + after_stage
        pieces = (
            (before, joined + after_status, after_received, end)
            if status is None
            else (before, joined, after_status, after_received, end)
        )
        variants[decided] = pieces
        return pieces

    def _split(
        self, record: AuditRecord, stage: str, status: dict[str, Any] | None
    ) -> tuple[bytes, ...] | None:
        """Encode the record's event with markers and cut it at them."""
        event = record.event(stage, record.received)
        event["auditID"] = _AUDIT_ID
        event["stage"] = _STAGE
        event["requestReceivedTimestamp"] = _RECEIVED
        event["stageTimestamp"] = _STAGE_TIME
        if status is not None:
            if "responseStatus" not in event:
                return None
            event["responseStatus"] = _STATUS
        elif "responseStatus" in event:
            return None
        encoded = self.encode(event)
        pieces = _MARK.split(encoded)
        parts = tuple(pieces[0::2])
        order = tuple(int(marker) - 1 for marker in pieces[1::2])
        # The encoder writes the Event's fields in this order (AuditRecord.event).
        if order != ((0, 1, 4, 2, 3) if status is not None else (0, 1, 2, 3)):
            return None
        # The quotes around a marker belong to the value's JSON string, except the
        # status, an object: put them back on the pieces around every other marker.
        quoted: list[bytes] = [parts[0]]
        for index, marker in enumerate(order):
            if marker != 4:
                quoted[-1] += b'"'
                quoted.append(b'"' + parts[index + 1])
            else:
                quoted.append(parts[index + 1])
        if status is None:
            # An empty piece where the status would be: both shapes join the same way.
            quoted.insert(3, b"")
        return tuple(quoted)

    def status_json(self, status: dict[str, Any]) -> bytes:
        """``responseStatus`` as the encoder writes it inside an event."""
        hit = self._statuses.get(id(status))
        if hit is not None and hit[0] is status:
            return hit[1]
        line = self.encode({"responseStatus": status})
        encoded = line[len(b'{"responseStatus":') : line.rindex(b"}")]
        if len(self._statuses) >= MAX_STATUSES:
            self._statuses.clear()
        self._statuses[id(status)] = (status, encoded)
        return encoded
