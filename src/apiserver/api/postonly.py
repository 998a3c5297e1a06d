"""The shape of a create-only API (TokenRequest, the review APIs): one POST route per path.

go-restful answers a path no route serves with a 404 and another method with a 405, and the
handler's errors are written by ``responsewriters.ErrorNegotiated`` (protobuf when Accept
picks it): k8s.io/apiserver ``pkg/endpoints/handlers/create.go`` and ``pkg/server/handler.go``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from twisted.internet.defer import Deferred

from apiserver.apimachinery import errors, negotiation
from apiserver.http.app import RequestInfo, header_value
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

Create = Callable[..., Coroutine[Any, Any, Response]]


def serve_post(
    request: HTTPRequest, info: RequestInfo, target: Sequence[Any] | None, create: Create
) -> Response | Deferred[Any]:
    """``create(request, info, *target)`` for a POST to a served path, else go-restful's
    refusal; a StatusError it raises becomes the negotiated Status."""
    accept = header_value(request, b"accept")
    if target is None:
        return negotiation.error_response(errors.ROUTE_NOT_FOUND, accept)
    if info.method != "POST":
        return negotiation.error_response(errors.method_not_supported(), accept)

    def to_status(failure: Any) -> Any:
        if failure.check(errors.StatusError):
            return negotiation.error_response(failure.value, accept)
        return failure

    return Deferred.fromCoroutine(create(request, info, *target)).addErrback(to_status)
