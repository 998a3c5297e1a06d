"""The twisted.web Site that hands every request straight to :class:`apiserver.http.app.App`.

Why a custom Request: twisted.web's ``Request.process`` adds a ``Server`` header that
kube-apiserver never sends, formats the ``Date`` anew on every request and walks a resource
tree; we need none of that. The access log is off unless ``-v`` is 3 or more (DESIGN.md: the
default per-request log costs about 40% of throughput).
"""

from __future__ import annotations

import time
from typing import Any

from twisted.logger import Logger
from twisted.web import server
from twisted.web.http import datetimeToString
from twisted.web.resource import Resource

from apiserver.http.app import App

log = Logger()


class _DateCache:
    """The HTTP ``Date`` value, formatted at most once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._value = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._value = datetimeToString(second)
        return self._value


_dates = _DateCache()


class ApiRequest(server.Request):
    """A Request that skips resource traversal and goes to the site's App."""

    defaultContentType = None

    # The API takes JSON and YAML bodies only: __init__ turns off twisted.web's form parsing,
    # which runs every POST's Content-Type through the email package.
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parsePOSTFormSubmission", False)
        super().__init__(*args, **kwargs)

    def process(self) -> None:
        self.site = self.channel.site  # type: ignore[attr-defined]
        self.responseHeaders.setRawHeaders(b"date", [_dates.now()])
        self.prepath = []
        self.postpath = []
        app: App = self.site.app  # type: ignore[union-attr]
        try:
            app.handle(self)
        except Exception:
            log.failure("unhandled error serving {path}", path=self.path)
            if not self.finished and not self.startedWriting:
                self.setResponseCode(500)
                self.finish()


class ApiSite(server.Site):
    """A Site bound to one App."""

    requestFactory = ApiRequest

    def __init__(self, app: App, log_requests: bool = False, **kwargs: Any) -> None:
        super().__init__(Resource(), **kwargs)
        self.app = app
        self.log_requests = log_requests
        self.displayTracebacks = False

    def log(self, request: Any) -> None:
        if self.log_requests:
            super().log(request)
