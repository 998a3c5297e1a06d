"""Log verbosity (``-v``) and flushing (``--log-flush-frequency``), klog-style.

twistd owns the log observers (a file, or standard output with ``--nodaemon``) and writes one
text line per event, which is the only ``--logging-format`` kube-apiserver permits; what we add
is klog's verbosity gate: ``verbose(n)`` is true when ``-v`` is at least ``n``. Request access
logs appear at ``-v=3`` and above, as in kube-apiserver (httplog at V(3)).
"""

from __future__ import annotations

import sys
from typing import Any

_verbosity = 0


def configure_logging(config: Any) -> None:
    """Apply ``-v`` and start the periodic flush of standard streams."""
    global _verbosity
    _verbosity = int(config.v or 0)
    frequency = float(config.log_flush_frequency or 0)
    if frequency > 0:
        from twisted.internet import reactor
        from twisted.internet.task import LoopingCall

        loop = LoopingCall(flush)
        loop.clock = reactor
        reactor.callWhenRunning(loop.start, frequency, False)


def verbose(level: int) -> bool:
    """klog's ``V(level).Enabled()``."""
    return _verbosity >= level


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
