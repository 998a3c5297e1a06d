"""The JSON line of one audit event, as kube-apiserver's audit codec writes it.

``audit.Codecs.LegacyCodec(audit.k8s.io/v1)`` (k8s.io/apiserver ``pkg/audit/scheme.go``) is
apimachinery's JSON serializer: Go's ``encoding/json`` ``Encoder``, which makes strings
HTML-safe (``<`` ``>`` ``&`` U+2028 U+2029 as ``\\u003c``...) and ends each document with a
newline. The log backend writes these bytes (``plugin/pkg/audit/log/backend.go``) and the
truncating backend measures them (``plugin/pkg/audit/truncate/truncate.go``, ``calcSize``).
"""

from __future__ import annotations

import re

import orjson

from apiserver.audit.interface import AuditEvent

__all__ = ["encode_event"]

_HTML_UNSAFE = re.compile(rb"[<>&]|\xe2\x80[\xa8\xa9]")
_HTML_SAFE = {
    b"<": b"\\u003c",
    b">": b"\\u003e",
    b"&": b"\\u0026",
    "\u2028".encode(): b"\\u2028",
    "\u2029".encode(): b"\\u2029",
}


def _escape(match: re.Match[bytes]) -> bytes:
    return _HTML_SAFE[match.group(0)]


def encode_event(event: AuditEvent) -> bytes:
    """The event (already in Go's field order) as one JSON line, newline included.

    orjson writes the same bytes as Go's encoder for these values except for the HTML-safe
    escapes, added afterwards only when such a character occurs (a query string's ``&``).
    """
    data = orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE)
    if _HTML_UNSAFE.search(data) is not None:
        data = _HTML_UNSAFE.sub(_escape, data)
    return data
