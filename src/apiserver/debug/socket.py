"""``--debug-socket-path``: the profiling and ``/debug/flags/v`` handlers on a unix socket,
without authentication or authorization.

Follows k8s.io/apiserver ``pkg/server/routes/debugsocket.go``: a stale socket file is
removed, the socket is listened on with plain HTTP (no TLS), and it serves ``/debug/pprof``
(``/debug/pprof/`` and everything under it) and ``/debug/flags`` (``/debug/flags/v``) only:
anyone who can open the file is trusted, as there. It is a service of the tree
(:class:`DebugSocketService`), listening while the server runs.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, maybeDeferred

from apiserver.debug.flags import DebugFlags
from apiserver.debug.pprof import Pprof
from apiserver.http.app import App, Router, ServingPolicy
from apiserver.http.site import ApiSite


def debug_router(pprof: Pprof | None, flags: DebugFlags) -> Router:
    """The socket's mux: pprof (when given) and the flags, nothing else."""
    router = Router()
    if pprof is not None:
        router.add_prefix("/debug/pprof", pprof.handle)
    router.add_prefix("/debug/flags", flags.handle)
    return router


class DebugSocketService(Service):
    """Listens on ``path`` while running; the file is removed before and after."""

    name = "debug-socket"

    def __init__(self, path: str, router: Router, reactor: Any) -> None:
        self.path = path
        self.reactor = reactor
        # No stages: no authentication, no authorization; no request timeout (profiles).
        self.site = ApiSite(App(router, reactor, ServingPolicy(request_timeout=0)), reactor=reactor)
        self.port: Any = None

    def startService(self) -> None:
        super().startService()
        try:
            os.remove(self.path)
        except FileNotFoundError:
            pass
        self.port = self.reactor.listenUNIX(self.path, self.site)

    def stopService(self) -> Deferred[None] | None:
        super().stopService()
        port, self.port = self.port, None
        if port is None:
            return None
        d: Deferred[None] = maybeDeferred(port.stopListening)

        def remove(_: object) -> None:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass

        d.addBoth(remove)
        return d
