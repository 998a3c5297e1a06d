"""Log verbosity (``-v``) and flushing (``--log-flush-frequency``), klog-style.

twistd owns the log observers (a file, or standard output with ``--nodaemon``) and writes one
text line per event, which is the only ``--logging-format`` kube-apiserver permits; what we add
is klog's verbosity gate: ``verbose(n)`` is true when ``-v`` is at least ``n``. Request access
logs appear at ``-v=3`` and above, as in kube-apiserver (httplog at V(3)).

``--vmodule`` (klog's ``-vmodule``) gives some files their own level: a pattern is matched
against the calling module's file name without ``.py`` (or, when it holds a ``/``, against the
path without it), with ``*`` and ``?``; the first match wins over ``-v``. The access log counts
as klog's ``httplog`` (k8s.io/apiserver ``pkg/server/httplog``), so ``--vmodule=httplog=3``
logs requests at any ``-v``. ``/debug/flags/v`` changes ``-v`` while running
(:func:`set_verbosity`; the server then recomputes whether its site logs requests).

The periodic flush (klog's ``StartFlushDaemon``, k8s.io/component-base/logs/logs.go) is a
service of the tree, :class:`LogFlushService`: started with the server, stopped with it.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Sequence

from twisted.application.service import Service
from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

log = Logger()

_verbosity = 0
_vmodule: tuple[tuple[str, int], ...] = ()
_file_levels: dict[str, int] = {}

#: The name the access log goes by for ``--vmodule`` (klog's file of request logs).
HTTPLOG = "httplog"
#: The level request logs are written at (httplog's ``V(3)``).
REQUEST_LOG_LEVEL = 3


def set_verbosity(level: int) -> None:
    """Apply ``-v`` (at start, and from ``/debug/flags/v``)."""
    global _verbosity
    _verbosity = int(level or 0)
    _changed()


def set_vmodule(patterns: Sequence[tuple[str, int]]) -> None:
    """Apply ``--vmodule`` (``(pattern, level)`` pairs, as the flag type parses them)."""
    global _vmodule
    _vmodule = tuple(patterns)
    _changed()


def _changed() -> None:
    _file_levels.clear()


def verbosity() -> int:
    return _verbosity


def match_level(filename: str, v: int, vmodule: Sequence[tuple[str, int]]) -> int:
    """The level for ``filename`` under ``-v`` and ``--vmodule`` (klog's vmodule filter)."""
    stem = filename.removesuffix(".py")
    base = os.path.basename(stem)
    for pattern, value in vmodule:
        if fnmatch.fnmatchcase(stem if "/" in pattern else base, pattern) or (
            "/" in pattern and fnmatch.fnmatchcase(stem, "*/" + pattern)
        ):
            return value
    return v


def level_for(filename: str) -> int:
    """The level that applies to ``filename`` now: its ``--vmodule`` match, else ``-v``."""
    level = _file_levels.get(filename)
    if level is None:
        level = _file_levels[filename] = match_level(filename, _verbosity, _vmodule)
    return level


def verbose(level: int) -> bool:
    """klog's ``V(level).Enabled()`` for the calling module."""
    if not _vmodule:
        return _verbosity >= level
    return level_for(sys._getframe(1).f_code.co_filename) >= level


def request_logging(v: int | None = None, vmodule: Sequence[tuple[str, int]] | None = None) -> bool:
    """Whether requests are logged: ``-v=3`` or more, or ``--vmodule=httplog=3``; for the
    given values, or those in force."""
    if v is None and vmodule is None:
        return level_for(HTTPLOG) >= REQUEST_LOG_LEVEL
    level = match_level(HTTPLOG, _verbosity if v is None else v, vmodule or ())
    return level >= REQUEST_LOG_LEVEL


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


class LogFlushService(Service):
    """Applies ``-v`` and ``--vmodule``, and flushes the standard streams every
    ``frequency`` seconds (0: never) while running."""

    name = "log-flush"

    def __init__(
        self,
        clock: IReactorTime,
        verbosity: int,
        frequency: float,
        vmodule: Sequence[tuple[str, int]] = (),
    ) -> None:
        self.clock = clock
        self.verbosity = verbosity
        self.vmodule = tuple(vmodule)
        self.frequency = frequency
        self.loop: LoopingCall | None = None

    def startService(self) -> None:
        super().startService()
        set_vmodule(self.vmodule)
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
