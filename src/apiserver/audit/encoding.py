"""The JSON line of one audit event, as kube-apiserver's audit codec writes it.

``audit.Codecs.LegacyCodec(audit.k8s.io/v1)`` (k8s.io/apiserver ``pkg/audit/scheme.go``) is
apimachinery's JSON serializer: Go's ``encoding/json`` ``Encoder``, which makes strings
HTML-safe (:func:`apiserver.gocompat.marshal.html_safe`) and ends each document with a
newline. The log backend writes these bytes (``plugin/pkg/audit/log/backend.go``) and the
truncating backend measures them (``plugin/pkg/audit/truncate/truncate.go``, ``calcSize``).
"""

from __future__ import annotations

import orjson

from apiserver.audit.interface import AuditEvent
from apiserver.gocompat.marshal import html_safe

__all__ = ["encode_event"]


def encode_event(event: AuditEvent) -> bytes:
    """The event (already in Go's field order) as one JSON line, newline included.

    orjson writes the same bytes as Go's encoder for these values except for the HTML-safe
    escapes, added afterwards only when such a character occurs (a query string's ``&``).
    """
    return html_safe(orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE))
