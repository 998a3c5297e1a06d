"""``metav1.Status`` failure bodies, the way kube-apiserver encodes them.

Field order follows apimachinery's Status struct (kind, apiVersion, metadata, status, message,
reason, details, code), since clients and tests compare bodies byte for byte.
"""

from __future__ import annotations

from typing import Any

import orjson

from apiserver.http.response import NOSNIFF, Response

JSON = ("Content-Type", "application/json")


def status_body(
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
    *,
    with_type_meta: bool = True,
    list_meta: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The Status object as a dict; ``details`` is omitted when None (Go's omitempty)."""
    body: dict[str, Any] = {}
    if with_type_meta:
        body["kind"] = "Status"
        body["apiVersion"] = "v1"
    body["metadata"] = list_meta or {}
    body["status"] = "Failure"
    if message:
        body["message"] = message
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


def status_response(
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: tuple[tuple[str, str], ...] = (),
    list_meta: dict[str, Any] | None = None,
) -> Response:
    """A JSON Status answer with a trailing newline, as Go's json.Encoder writes it."""
    data = orjson.dumps(status_body(code, reason, message, details, list_meta=list_meta)) + b"\n"
    return Response(code, (JSON, NOSNIFF, *headers), data)


def not_found_text() -> Response:
    """404 for any other unknown path (Go's ``http.NotFound``)."""
    return Response(
        404,
        (("Content-Type", "text/plain; charset=utf-8"), NOSNIFF),
        b"404 page not found\n",
    )
