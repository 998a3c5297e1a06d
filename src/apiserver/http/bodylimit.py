"""Request bodies bounded in size and in time, as kube-apiserver bounds them.

kube-apiserver reads a resource request's body through ``limitedReadBody``
(k8s.io/apiserver pkg/endpoints/handlers/rest.go): at most ``MaxRequestBodyBytes`` (3 MiB,
``pkg/server/config.go``; the same for every content type, for patches, and for
DeleteOptions bodies) plus one byte, and a body that passes the limit is answered 413
``RequestEntityTooLarge`` with ``Request entity too large: limit is 3145728``, without reading
the rest (Go's server then closes the connection). Reading a body happens inside the handler,
so it is bounded in time by ``WithTimeoutForNonLongRunningRequests``: a body that has not
arrived within ``--request-timeout`` gets the timeout filter's 504.

Our protocols (:mod:`apiserver.http.h1`, :mod:`apiserver.http.h2request`) buffer a body before
the request is handed to the application, so they apply both bounds while receiving: once a
body is longer than :data:`MAX_REQUEST_BODY_BYTES` (declared by its ``Content-Length``, or
counted as it arrives, chunked or not) or is still arriving when :attr:`body deadline
<apiserver.http.h1.H1Channel.bodyTimeout>` passes, the protocol stops keeping it, discards
what follows, and hands the request on at once with ``content`` set to one of the stand-ins
below. The request goes through the handler chain like any other (authentication,
authorization and audit decide first, as in kube-apiserver); a handler that reads the body
gets the :class:`StatusError` (413 or 504) and answers it negotiated like any other error, a
handler that does not read it answers as usual. The connection is closed after the answer
(HTTP/1.1) or the stream's remaining DATA is discarded (HTTP/2).

Nothing here is on the path of a request whose body fits: the protocols compare one counter
they already keep.
"""

from __future__ import annotations

from apiserver.apimachinery.errors import StatusError

#: ``MaxRequestBodyBytes`` of kube-apiserver (k8s.io/apiserver pkg/server/config.go).
MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024

#: The timeout filter's message (k8s.io/apiserver pkg/server/filters/timeout.go).
_TIMEOUT_MESSAGE = "Timeout: request did not complete within the allotted timeout"


class UnreadBody:
    """A request body that was not kept: reading it raises the answer it deserves.

    ``tell`` and ``seek`` raise ValueError, as a closed file does, so that code that only
    looks at a body when it can (the audit stage's request object) passes it by.
    """

    def __init__(self, error: StatusError) -> None:
        self.error = error

    def read(self, size: int = -1) -> bytes:
        raise self.error

    def tell(self) -> int:
        raise ValueError("request body not kept")

    def seek(self, offset: int, whence: int = 0) -> int:
        raise ValueError("request body not kept")

    def write(self, data: bytes) -> int:
        return len(data)

    def close(self) -> None:
        pass


def too_large() -> UnreadBody:
    """The stand-in for a body over :data:`MAX_REQUEST_BODY_BYTES` (``limitedReadBody``)."""
    return UnreadBody(
        StatusError(
            413,
            "RequestEntityTooLarge",
            f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}",
        )
    )


def timed_out() -> UnreadBody:
    """The stand-in for a body still arriving at the request deadline (the 504 of
    ``WithTimeoutForNonLongRunningRequests``)."""
    return UnreadBody(StatusError(504, "Timeout", _TIMEOUT_MESSAGE, {}))
