"""The debugging endpoints of kube-apiserver: ``/debug/pprof``, ``/debug/flags``, ``/logs``
and the unauthenticated ``--debug-socket-path``.

What each serves and which upstream file it follows is in its module: :mod:`.pprof`
(with the samplers of :mod:`.sampling` and the encoder of :mod:`.profile_proto`),
:mod:`.flags`, :mod:`.logs`, :mod:`.socket`. :func:`install_debug` registers them as
kube-apiserver's ``installAPI`` does (k8s.io/apiserver ``pkg/server/config.go``): pprof and
the flags with ``--profiling``, unlisted in ``/`` (prefix routes); ``/logs`` with
``--enable-logs-handler``, listed. They sit behind the whole chain, so authentication and
authorization apply as to any non-resource path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from apiserver.debug.flags import DebugFlags
from apiserver.debug.logs import LOG_DIR, LogsHandler
from apiserver.debug.pprof import Pprof
from apiserver.debug.socket import DebugSocketService, debug_router
from apiserver.http.app import Router

__all__ = ["DebugEndpoints", "DebugSocketService", "install_debug"]


@attrs.define
class DebugEndpoints:
    """What :func:`install_debug` built (the socket service reuses the handlers)."""

    pprof: Pprof | None
    flags: DebugFlags
    logs: LogsHandler | None

    def socket_service(self, path: str, reactor: Any) -> DebugSocketService:
        """``--debug-socket-path``: profiling is served there whatever ``--profiling`` says,
        as ``UnprotectedDebugSocket.InstallProfiling`` does."""
        pprof = self.pprof if self.pprof is not None else Pprof(reactor)
        return DebugSocketService(path, debug_router(pprof, self.flags), reactor)


def install_debug(
    router: Router,
    reactor: Any,
    *,
    profiling: bool,
    contention: bool,
    logs_handler: bool,
    set_verbosity: Callable[[int], None],
    log_dir: str = LOG_DIR,
) -> DebugEndpoints:
    pprof = Pprof(reactor, contention=contention) if profiling else None
    flags = DebugFlags(set_verbosity)
    if pprof is not None:
        router.add_prefix("/debug/pprof", pprof.handle)
        router.add_prefix("/debug/flags", flags.handle)
    logs = LogsHandler(reactor, log_dir) if logs_handler else None
    if logs is not None:
        router.add("/logs", logs.handle)
        router.add_prefix("/logs/", logs.handle)
    return DebugEndpoints(pprof, flags, logs)
