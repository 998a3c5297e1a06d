"""``/logs``: the files of the log directory, with ``--enable-logs-handler``.

Follows k8s.io/kubernetes ``pkg/routes/logs.go``: ``/logs/`` lists ``/var/log`` and
``/logs/<path>`` serves a file under it, through Go's ``http.ServeFile``: a directory is an
HTML ``<pre>`` list of links (sub-directories with a trailing ``/``), a directory asked for
without its trailing slash is a 301 to it, a path with a ``..`` element is a 400
``invalid URL path``, a missing file a 404 ``404 page not found``, and a name longer than the
file system allows a 404 ``file not found``. Files are read in a thread, so a large log does
not hold up the reactor. Authentication and authorization are the chain's, as for any
non-resource path (``get`` on ``/logs/*``).
"""

from __future__ import annotations

import errno
import html
import mimetypes
import os
from typing import Any
from urllib.parse import quote

from twisted.internet.defer import Deferred

from apiserver.debug.threads import Runner, thread_runner
from apiserver.http.app import RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

LOG_DIR = "/var/log"


def _plain(code: int, text: str) -> Response:
    return Response(
        code,
        (("Content-Type", "text/plain; charset=utf-8"), ("X-Content-Type-Options", "nosniff")),
        (text + "\n").encode(),
    )


def _listing(directory: str) -> Response:
    names = []
    for entry in sorted(os.scandir(directory), key=lambda e: e.name):
        name = entry.name + ("/" if entry.is_dir() else "")
        names.append(f'<a href="{quote(name)}">{html.escape(name)}</a>\n')
    body = '<!doctype html>\n<meta name="viewport" content="width=device-width">\n<pre>\n'
    body += "".join(names) + "</pre>\n"
    return Response(200, (("Content-Type", "text/html; charset=utf-8"),), body.encode())


def _file(path: str) -> Response:
    with open(path, "rb") as handle:
        data = handle.read()
    content_type, _ = mimetypes.guess_type(path)
    if content_type is None:
        content_type = (
            "text/plain; charset=utf-8"
            if b"\x00" not in data[:512]
            else ("application/octet-stream")
        )
    elif content_type.startswith("text/"):
        content_type += "; charset=utf-8"
    return Response(200, (("Content-Type", content_type),), data)


class LogsHandler:
    """``/logs`` and ``/logs/...`` over ``directory``."""

    def __init__(
        self, reactor: Any, directory: str = LOG_DIR, runner: Runner | None = None
    ) -> None:
        self.reactor = reactor
        self.directory = directory
        self._in_thread = runner if runner is not None else thread_runner(reactor)

    def handle(self, request: HTTPRequest, info: RequestInfo) -> Response | Deferred[Response]:
        if info.method not in ("GET", "HEAD"):
            return _plain(405, "Method Not Allowed")
        path = info.path
        if path == "/logs":
            return Response(301, (("Location", "/logs/"),), b"")
        relative = path[len("/logs/") :]
        if ".." in relative.split("/"):
            return _plain(400, "invalid URL path")
        target = os.path.join(self.directory, relative)
        return self._in_thread("logs-handler", lambda: self._serve(path, target))

    def _serve(self, path: str, target: str) -> Response:
        try:
            if os.path.isdir(target):
                if not path.endswith("/"):
                    return Response(301, (("Location", path.rsplit("/", 1)[-1] + "/"),), b"")
                return _listing(target)
            return _file(target)
        except OSError as error:
            if error.errno == errno.ENAMETOOLONG:
                return _plain(404, "file not found")
            if error.errno in (errno.ENOENT, errno.ENOTDIR):
                return _plain(404, "404 page not found")
            if error.errno in (errno.EACCES, errno.EPERM):
                return _plain(403, "403 Forbidden")
            return _plain(500, "500 Internal Server Error")
