"""Log lines for journald: no timestamp, a ``<N>`` syslog priority on every line.

Under systemd, standard output goes to the journal, which stamps each line itself and reads a
leading ``<N>`` as the line's priority (sd-daemon(3), ``SD_ERR`` ``<3>``, ``SD_WARNING``
``<4>``, ``SD_INFO`` ``<6>``, ``SD_DEBUG`` ``<7>``), so ``journalctl -p warning`` filters.
twistd's own observer writes ``<timestamp> [system] message`` lines with no priority; this
one writes ``<N>[system] message`` (kube-apiserver's klog writes its severity letter in the
same place, k8s.io/klog/v2 ``formatHeader``).

When: only if ``$JOURNAL_STREAM`` names the device and inode of the standard output twistd
logs to, as systemd.exec(5) says a program should check (the variable is inherited by children
whose output may well be redirected to a file, where the plain format is wanted), and only if
twistd would log to standard output (``--nodaemon`` without ``--logfile``, or
``--logfile=-``) with no ``--logger`` or ``--syslog`` given.

Multi-line messages and tracebacks: every line becomes its own journal record with the same
priority, so a traceback logged as an error is seen whole by ``journalctl -p err``; escaping
the newlines instead would keep one record but make tracebacks unreadable, and the journal's
stream protocol has no other way to carry a newline.

How: twistd builds its log observer from its options (``twisted.application.app.AppLogger``
reads ``--logger`` when the runner is created, after the options are parsed and before
``makeService``), so :func:`use_journald_logger` sets that option from the plugin's
``postOptions`` (:mod:`apiserver.tap`) to :func:`stdout_observer`, as ``--logger`` would:
twistd then installs this observer instead of its default one, and removes it at exit, as it
would its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any, TextIO

from twisted.logger import FileLogObserver, ILogObserver, LogEvent, LogLevel, eventAsText

#: twisted.logger levels as syslog priorities (sd-daemon.h).
PRIORITY = {
    LogLevel.debug: 7,
    LogLevel.info: 6,
    LogLevel.warn: 4,
    LogLevel.error: 3,
    LogLevel.critical: 2,
}


def format_event(event: LogEvent) -> str | None:
    """``<N>[system] message`` lines for one event (traceback included), or None if empty."""
    text = eventAsText(event, includeTimestamp=False, includeSystem=True, includeTraceback=True)
    if not text:
        return None
    prefix = f"<{PRIORITY.get(event.get('log_level', LogLevel.info), 6)}>"
    return "".join(f"{prefix}{line}\n" for line in text.splitlines())


def journald_observer(out: TextIO) -> ILogObserver:
    """An observer writing :func:`format_event` lines to ``out``."""
    return FileLogObserver(out, format_event)


def stdout_observer() -> ILogObserver:
    """The ``--logger`` factory: called by twistd before it redirects ``sys.stdout`` to the
    log, so this is the process's real standard output, as for twistd's own observer."""
    return journald_observer(sys.stdout)


def connected_to_journal(environ: Mapping[str, str], out: TextIO) -> bool:
    """Whether ``$JOURNAL_STREAM`` (``<device>:<inode>``) is ``out``'s file."""
    value = environ.get("JOURNAL_STREAM", "")
    if not value:
        return False
    try:
        device, inode = (int(part) for part in value.split(":"))
        stat = os.fstat(out.fileno())
    except (ValueError, OSError):
        return False
    return (stat.st_dev, stat.st_ino) == (device, inode)


def use_journald_logger(
    twistd_options: MutableMapping[str, Any] | None,
    environ: Mapping[str, str] = os.environ,
    out: TextIO | None = None,
) -> bool:
    """Make twistd log in the journal's format when its output is the journal (see the module
    docstring); returns whether it did."""
    if twistd_options is None or twistd_options.get("logger") or twistd_options.get("syslog"):
        return False
    logfile = twistd_options.get("logfile") or ""
    if not (logfile == "-" or (not logfile and twistd_options.get("nodaemon"))):
        return False
    stream = sys.stdout if out is None else out
    if not connected_to_journal(environ, stream):
        return False
    # twistd's own postOptions imports the ``--logger`` value by its qualified name.
    twistd_options["logger"] = f"{__name__}.{stdout_observer.__name__}"
    return True
