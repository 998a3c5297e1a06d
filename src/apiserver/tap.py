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

import os
import sys
from typing import Any

from twisted.application.service import IService

from apiserver.options import ApiserverOptions
from apiserver.storage.interface import StorageError


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
    from apiserver.service.signals import install_graceful_signal, install_signal_handlers
    from apiserver.service.workers import GRACEFUL_SIGNAL, die_with_parent, worker_from_environ

    config = options.config
    try:
        worker = worker_from_environ(os.environ)
        server = Server(config, reactor, worker=worker[:2] if worker is not None else None)
        if worker is None and config.worker_count > 1:
            # The supervisor of --workers: the server above was built only to check every
            # file and flag now (building has no side effects), the workers serve.
            return _supervisor(options, reactor)
    except (ValueError, StorageError, OSError) as error:
        # A bad policy, token, key or config file: say which and stop, as kube-apiserver does.
        sys.stderr.write(f"Error: {error}\n")
        raise SystemExit(1) from None
    # Process state, like the signal handlers: set here, never while the server is built.
    raise_open_files_limit()
    reactor.callWhenRunning(install_signal_handlers, reactor, server.lifecycle)
    if worker is not None:
        from twisted.logger import globalLogPublisher

        from apiserver.service.workers import worker_log_labeller

        # Before twistd adds its own observers (it starts logging after makeService).
        globalLogPublisher.addObserver(worker_log_labeller(worker[0]))
        reactor.callWhenRunning(die_with_parent, worker[2])
        reactor.callWhenRunning(install_graceful_signal, reactor, server.lifecycle, GRACEFUL_SIGNAL)
    reactor.callWhenRunning(tune_gc)
    return server.root


def _supervisor(options: ApiserverOptions, reactor: Any) -> IService:
    """The parent of ``--workers``: what only one process may do is done here, once, before
    any worker starts (``apiserver.service.workers``)."""
    from apiserver.service.signals import install_supervisor_signal_handlers
    from apiserver.service.workers import Supervisor, process_spawner, worker_process_argv
    from apiserver.service.workers_notify import notify_relay
    from apiserver.workers import prepare_shared_state

    config = options.config
    prepare_shared_state(config)
    count = config.worker_count
    argv = worker_process_argv(options.argv, getattr(options, "parent", None) or {})
    relay = notify_relay(os.environ, count, reactor)
    supervisor = Supervisor(
        count,
        process_spawner(
            reactor, argv, os.environ, count, relay.environment if relay is not None else None
        ),
        reactor,
        on_stopped=lambda: _supervisor_stopped(reactor, supervisor),
        relay=relay,
    )
    reactor.callWhenRunning(install_supervisor_signal_handlers, reactor, supervisor)
    return supervisor


def _supervisor_stopped(reactor: Any, supervisor: Any) -> None:
    """Every worker has exited: stop, with status 1 when they could not start at all."""
    if supervisor.failed:
        # twistd exits 0 once its reactor stops: status 1 needs an exit of our own.
        reactor.addSystemEventTrigger("after", "shutdown", os._exit, 1)
    reactor.stop()
