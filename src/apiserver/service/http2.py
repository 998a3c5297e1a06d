"""Serve HTTP/2 with our fast connection class, chosen when the tree starts.

:func:`apiserver.http.h2.configure_http2` replaces ``twisted.web.http.H2Connection`` for the
whole process (the class Twisted's TLS negotiation instantiates for ALPN ``h2``). Doing that
while building the server made merely building it change every later Twisted server in the
process (tests included); here it happens when the service starts, before the listener
accepts its first connection (``--http2-max-streams-per-connection``, as
k8s.io/apiserver/pkg/server/secure_serving.go configures its ``http2.Server``). There is no
undo on stop: connections still open keep their class, and the process is ending.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.application.service import Service


class Http2Service(Service):
    """Calls ``configure(max_streams)`` once, at privileged start or start."""

    name = "http2"

    def __init__(self, max_streams: int, configure: Callable[[int], object]) -> None:
        self.max_streams = max_streams
        self.configure = configure
        self.configured = False

    def _configure(self) -> None:
        if not self.configured:
            self.configure(self.max_streams)
            self.configured = True

    def privilegedStartService(self) -> None:
        # The listener listens at privileged start: connections may come from then on.
        super().privilegedStartService()
        self._configure()

    def startService(self) -> None:
        super().startService()
        self._configure()
