"""The twistd entry point: ``Options`` and ``makeService``.

This is the only module that touches the global reactor (``tests/unit/test_global_reactor.py``
enforces it): everything it builds takes the reactor
as a parameter so tests can pass a fake one. ``makeService`` only builds: twistd starts the
returned tree (privileged start, then start) and stops it, in reverse, when the reactor
stops. What needs a running reactor is scheduled here: the signal handlers (which must
replace the ones Twisted installs when it starts running) and the GC tuning; the open-files
limit is raised to the hard limit, as Go's runtime does for kube-apiserver.

Under systemd, when standard output is the journal, :class:`Options` has twistd log in the
journal's format (:mod:`apiserver.journald`): it must be chosen while the options are parsed,
before twistd creates its logger.
"""

from __future__ import annotations

import sys

from twisted.application.service import IService

from apiserver.options import ApiserverOptions


class Options(ApiserverOptions):
    def postOptions(self) -> None:
        super().postOptions()
        from apiserver.journald import use_journald_logger

        # ``parent`` is twistd's own ServerOptions (absent when parsed on their own).
        use_journald_logger(getattr(self, "parent", None))


def makeService(options: ApiserverOptions) -> IService:
    from twisted.internet import reactor

    from apiserver.gctune import tune_gc
    from apiserver.server import Server
    from apiserver.service.limits import raise_open_files_limit
    from apiserver.service.signals import install_signal_handlers

    config = options.config
    try:
        server = Server(config, reactor)
    except ValueError as error:
        # A bad policy, token, key or config file: say which and stop, as kube-apiserver does.
        sys.stderr.write(f"Error: {error}\n")
        raise SystemExit(1) from None
    # Process state, like the signal handlers: set here, never while the server is built.
    raise_open_files_limit()
    reactor.callWhenRunning(install_signal_handlers, reactor, server.lifecycle)
    reactor.callWhenRunning(tune_gc)
    return server.root
