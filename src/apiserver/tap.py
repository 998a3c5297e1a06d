"""The twistd entry point: ``Options`` and ``makeService``.

This is the only module that touches the global reactor (DESIGN.md); everything it builds
takes the reactor as a parameter so tests can pass a fake one.
"""

from __future__ import annotations

from twisted.application.service import IService

from apiserver.options import ApiserverOptions

Options = ApiserverOptions


def makeService(options: ApiserverOptions) -> IService:
    from twisted.internet import reactor

    from apiserver.logs import configure_logging
    from apiserver.server import Server

    config = options.config
    configure_logging(config)
    server = Server(config, reactor)
    reactor.callWhenRunning(server.start)
    return server.root
