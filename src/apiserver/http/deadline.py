"""The ``timeout`` query parameter (k8s.io/apiserver/pkg/endpoints/filters/request_deadline.go).

``WithRequestDeadline`` reads ``?timeout=`` of every request that is not long-running, before
authentication: a value Go's ``time.ParseDuration`` refuses is a 400 ``BadRequest`` Status
(``invalid timeout specified in the request URL - time: invalid duration "x"``); an empty
value, ``0`` or a negative one, or one at least ``--request-timeout``, leaves
``--request-timeout``; anything shorter becomes the request's deadline. The deadline is then
enforced by the timeout filter (``WithTimeoutForNonLongRunningRequests``,
k8s.io/apiserver/pkg/server/filters/timeout.go), which here is :meth:`apiserver.http.app.App.
_await`: a 504 ``Timeout`` Status, or an aborted stream once the headers are out.

Only requests that carry the parameter pay for this: ``App.handle`` looks the key up in the
already parsed query and calls :func:`request_timeout` only when it is there.
"""

from __future__ import annotations

from apiserver.apimachinery.errors import StatusError
from apiserver.gocompat.duration import parse_go_duration_ns
from apiserver.gocompat.errors import GoValueError

INVALID_TIMEOUT = "invalid timeout specified in the request URL"


def request_timeout(values: list[bytes], maximum: float) -> float | StatusError:
    """The deadline in seconds for a request whose query has ``timeout=values`` (Go's
    ``Query().Get`` takes the first), or the 400 error for a malformed one (the caller writes
    it negotiated, as ``failedErrorHandler`` does)."""
    text = values[0].decode("utf-8", "replace") if values else ""
    if not text:
        return maximum
    try:
        nanos = parse_go_duration_ns(text)
    except GoValueError as error:
        # apierrors.NewBadRequest, written by responsewriters.ErrorNegotiated.
        return StatusError(400, "BadRequest", f"{INVALID_TIMEOUT} - {error}")
    seconds = nanos / 1e9
    if seconds > 0 and (maximum <= 0 or seconds < maximum):
        return seconds
    return maximum
