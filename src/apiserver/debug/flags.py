"""``/debug/flags/``: change ``-v`` while the server runs.

Follows k8s.io/apiserver ``pkg/server/routes/flags.go`` (``DebugFlags``,
``StringFlagPutHandler``) with component-base's ``logs.GlogSetter``: ``PUT /debug/flags/v``
with the new level as the body answers ``successfully set klog.logging.verbosity to <n>``;
a level ``strconv.ParseInt`` refuses is a 400 naming it; any other method is a 406
``unsupported http method``; ``/debug/flags`` and ``/debug/flags/`` list the flags. The
answers are ``text/plain`` with ``X-Content-Type-Options: nosniff`` and a newline, as
``writePlainText`` writes them.
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver.gocompat.errors import GoValueError
from apiserver.gocompat.intparse import parse_int
from apiserver.http.app import RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

INDEX = (
    "<html>\n<head>\n<title>/debug/flags/</title>\n</head>\n<body>\n/debug/flags/<br>\n<br>\n"
    "flags:<br>\n<table>\n<tr>v<br>\n</table>\n<br>\nfull flags configurable<br>\n"
    "</body>\n</html>\n"
)


def _plain(code: int, text: str) -> Response:
    return Response(
        code,
        (("Content-Type", "text/plain"), ("X-Content-Type-Options", "nosniff")),
        (text + "\n").encode(),
    )


class DebugFlags:
    """The handlers; ``set_verbosity`` applies a new ``-v``."""

    def __init__(self, set_verbosity: Callable[[int], None]) -> None:
        self.set_verbosity = set_verbosity

    def handle(self, request: HTTPRequest, info: RequestInfo) -> Response:
        """Everything under ``/debug/flags`` (a prefix, unlisted in ``/``)."""
        path = info.path
        if path == "/debug/flags/v":
            return self.verbosity(request, info)
        if path == "/debug/flags" or path.startswith("/debug/flags/"):
            return Response(200, (("Content-Type", "text/html; charset=utf-8"),), INDEX.encode())
        return _plain(404, "404 page not found")

    def verbosity(self, request: HTTPRequest, info: RequestInfo) -> Response:
        if info.method != "PUT":
            return _plain(406, "unsupported http method")
        body = request.content.read() if request.content is not None else b""
        value = body.decode("utf-8", "replace")
        try:
            level = parse_int(value, 10, 32)
        except GoValueError as error:
            return _plain(400, f"failed set klog.logging.verbosity {value}: {error}")
        self.set_verbosity(level)
        return _plain(200, f"successfully set klog.logging.verbosity to {value}")
