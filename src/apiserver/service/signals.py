"""SIGTERM/SIGINT start the graceful shutdown; a second one exits at once.

Signal handlers are process state, so they are installed by :mod:`apiserver.tap` once the
reactor runs (after Twisted installed its own, which these replace), never while the server
is built. As in kube-apiserver (k8s.io/apiserver/pkg/server/signal.go ``SetupSignalHandler``)
the first signal starts the shutdown sequence and the second exits with status 1.
"""

from __future__ import annotations

import os
import signal
from typing import Any

from apiserver.service.lifecycle import Lifecycle
from apiserver.service.workers import Supervisor


def install_signal_handlers(reactor: Any, lifecycle: Lifecycle) -> None:
    """Route SIGTERM and SIGINT to ``lifecycle.on_signal`` on the reactor thread."""
    received = 0

    def handler(signum: int, _frame: object) -> None:
        # Counted here, not in the reactor thread, so a second signal exits even when
        # the reactor is stuck.
        nonlocal received
        received += 1
        if received > 1:
            os._exit(1)
        reactor.callFromThread(lifecycle.on_signal, signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def install_graceful_signal(reactor: Any, lifecycle: Lifecycle, signum: int) -> None:
    """A worker of ``--workers``: ``signum`` from the supervisor starts the graceful shutdown
    once; unlike SIGTERM it never counts as the second signal (the worker may get the
    operator's SIGTERM too; see ``apiserver.service.workers``)."""

    def start(signum: int) -> None:
        if not lifecycle.initiated:
            lifecycle.on_signal(signum)

    def handler(signum: int, _frame: object) -> None:
        reactor.callFromThread(start, signum)

    signal.signal(signum, handler)


def install_supervisor_signal_handlers(reactor: Any, supervisor: Supervisor) -> None:
    """The supervisor of ``--workers``: the first SIGTERM/SIGINT shuts every worker down
    gracefully; a second one kills them and exits with status 1 at once."""
    received = 0

    def handler(signum: int, _frame: object) -> None:
        nonlocal received
        received += 1
        if received > 1:
            supervisor.kill()
            os._exit(1)
        reactor.callFromThread(supervisor.shutdown, signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
