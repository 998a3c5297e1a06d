"""A plain value for a finished HTTP answer, so handlers stay testable without a request.

Handlers that do not stream return a :class:`Response` (or a Deferred of one); the router
writes it. Streaming handlers (watch) write to the request themselves.
"""

from __future__ import annotations

import attrs


@attrs.frozen
class Response:
    """Status code, headers (in order; a name may repeat) and the whole body."""

    code: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or None."""
        lname = name.lower()
        for key, value in self.headers:
            if key.lower() == lname:
                return value
        return None


TEXT_PLAIN = ("Content-Type", "text/plain; charset=utf-8")
NOSNIFF = ("X-Content-Type-Options", "nosniff")


def text(code: int, body: str | bytes, *, nosniff: bool = True) -> Response:
    """A ``text/plain; charset=utf-8`` answer, as Go's ``http.Error`` writes one."""
    data = body.encode() if isinstance(body, str) else body
    headers = (TEXT_PLAIN, NOSNIFF) if nosniff else (TEXT_PLAIN,)
    return Response(code, headers, data)
