"""The twistd entry point: ``Options`` and ``makeService``.

This is the only module that touches the global reactor (DESIGN.md); everything it builds
takes the reactor as a parameter so tests can pass a fake one.
"""

from __future__ import annotations

import sys

from twisted.application.service import IService

from apiserver.options import ApiserverOptions

Options = ApiserverOptions


def makeService(options: ApiserverOptions) -> IService:
    from twisted.internet import reactor

    from apiserver.gctune import tune_gc
    from apiserver.logs import configure_logging
    from apiserver.server import Server

    config = options.config
    configure_logging(config)
    try:
        server = Server(config, reactor)
    except ValueError as error:
        # A bad policy, token, key or config file: say which and stop, as kube-apiserver does.
        sys.stderr.write(f"Error: {error}\n")
        raise SystemExit(1) from None
    reactor.callWhenRunning(server.start)
    reactor.callWhenRunning(tune_gc)
    return server.root
