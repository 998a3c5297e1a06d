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
