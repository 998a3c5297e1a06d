"""Tracing of outgoing webhook calls, without the callers depending on the tracer.

kube-apiserver's webhook clients (authentication and authorization webhooks, the audit
webhook) go through an otelhttp transport when tracing is on: each call is a client span
under the request's span, and the webhook receives the W3C ``traceparent``
(k8s.io/apiserver ``pkg/util/webhook``, component-base ``tracing``). Here
:mod:`apiserver.tracing` installs :data:`start` when ``--tracing-config-file`` is given; it
stays None otherwise, and a call then costs one test.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any

__all__ = ["WebhookSpan", "start"]


class WebhookSpan:
    """What a caller does with its call's span: ``headers`` to send, ``end`` when answered."""

    __slots__ = ("end", "headers")

    def __init__(self, headers: dict[bytes, list[bytes]], end: Callable[[int], None]) -> None:
        #: ``traceparent`` (and ``tracestate``) to add to the request.
        self.headers = headers
        #: Called with the HTTP status code (0: no answer).
        self.end = end


#: ``start(method, url)``: a span for a webhook call made now, or None (no traced request).
start: Callable[[str, str], WebhookSpan | None] | None = None


def add_headers(target: MutableMapping[bytes, list[bytes]], span: WebhookSpan) -> None:
    for name, values in span.headers.items():
        target[name] = values


def status_of(result: Any) -> int:
    """The HTTP code of a call's result, when it is a response or a (code, body) pair."""
    code = getattr(result, "code", None)
    if isinstance(code, int):
        return code
    if isinstance(result, tuple) and result and isinstance(result[0], int):
        return result[0]
    return 0
