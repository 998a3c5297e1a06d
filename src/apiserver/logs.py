"""Log verbosity (``-v``) and flushing (``--log-flush-frequency``), klog-style.

twistd owns the log observers (a file, or standard output with ``--nodaemon``) and writes one
text line per event, which is the only ``--logging-format`` kube-apiserver permits; what we add
is klog's verbosity gate: ``verbose(n)`` is true when ``-v`` is at least ``n``. Request access
logs appear at ``-v=3`` and above, as in kube-apiserver (httplog at V(3)).

The periodic flush (klog's ``StartFlushDaemon``, k8s.io/component-base/logs/logs.go) is a
service of the tree, :class:`LogFlushService`: started with the server, stopped with it.
"""

from __future__ import annotations

import sys

from twisted.application.service import Service
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

log = Logger()

_verbosity = 0


def set_verbosity(level: int) -> None:
    """Apply ``-v``."""
    global _verbosity
    _verbosity = int(level or 0)


def verbose(level: int) -> bool:
    """klog's ``V(level).Enabled()``."""
    return _verbosity >= level


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


class LogFlushService(Service):
    """Applies ``-v`` and flushes the standard streams every ``frequency`` seconds (0: never)
    while running."""

    name = "log-flush"

    def __init__(self, clock: IReactorTime, verbosity: int, frequency: float) -> None:
        self.clock = clock
        self.verbosity = verbosity
        self.frequency = frequency
        self.loop: LoopingCall | None = None

    def startService(self) -> None:
        super().startService()
        set_verbosity(self.verbosity)
        if self.frequency > 0 and self.loop is None:
            loop = LoopingCall(flush)
            loop.clock = self.clock
            loop.start(self.frequency, now=False).addErrback(
                lambda f: log.failure("log flush loop stopped", f)
            )
            self.loop = loop

    def stopService(self) -> None:
        super().stopService()
        loop, self.loop = self.loop, None
        if loop is not None and loop.running:
            loop.stop()
