"""The log backend: ``--audit-log-path`` and its format, rotation and mode flags.

Follows k8s.io/apiserver ``plugin/pkg/audit/log/backend.go`` (one line per event, ``json`` or
``legacy``), ``pkg/audit/format.go`` (the legacy line) and ``pkg/server/options/audit.go``
(``getWriter``, ``ensureLogFile``, ``newBackend``) at Kubernetes 1.35, where the file is always
a ``gopkg.in/natefinch/lumberjack.v2`` logger: ``--audit-log-maxsize`` 0 means lumberjack's
100 MB, ``--audit-log-maxage`` and ``--audit-log-maxbackup`` 0 keep every backup.

Writes happen on the reactor thread, one ``write`` per call (upstream writes each event in the
request's goroutine in blocking mode); the file is not buffered, so a line written is in the
file. Removing and compressing old backups (lumberjack's ``millRunOnce``) runs in a thread of
the reactor's pool, because gzip of a 100 MB backup takes seconds; at most one runs at a time
and a request for another while one runs is coalesced into one more run, as lumberjack's
one-slot channel does. ``shutdown`` waits for it, so a rotated file is compressed before exit.
"""

from __future__ import annotations

import gzip
import os
import shutil
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal, cast

import attrs
from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IReactorThreads, IReactorTime
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from apiserver.audit.compose import wrap
from apiserver.audit.encoding import encode_event
from apiserver.audit.interface import (
    API_VERSION,
    AuditEvent,
    AuditMetrics,
    Sink,
    backend_options,
)
from apiserver.gocompat.quote import go_quote

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

__all__ = [
    "LogSink",
    "RotatingFile",
    "Rotation",
    "backup_name",
    "build_log_backend",
    "event_string",
]

log = Logger()

PLUGIN_NAME = "log"
FORMATS = ("legacy", "json")
Format = Literal["legacy", "json"]

MEGABYTE = 1024 * 1024
#: lumberjack's ``defaultMaxSize`` (MB), used when ``--audit-log-maxsize`` is 0.
DEFAULT_MAX_SIZE_MB = 100
#: lumberjack's ``backupTimeFormat`` (``2006-01-02T15-04-05.000``), as strftime; the three
#: fraction digits (milliseconds, truncated) are added after.
BACKUP_TIME_FORMAT = "%Y-%m-%dT%H-%M-%S"
BACKUP_TIME_LENGTH = len("2006-01-02T15-04-05.000")
#: lumberjack's ``compressSuffix``.
COMPRESS_SUFFIX = ".gz"

#: Runs a function away from the reactor thread; the Deferred fires when it returned.
RunInThread = Callable[[Callable[[], None]], Deferred[None]]


# -- the legacy line -------------------------------------------------------------------------


def _rfc3339_nano(timestamp: str) -> str:
    """``Format(time.RFC3339Nano)`` of the received timestamp: upstream formats the
    ``MicroTime`` it holds, which is in the server's local zone, with trailing zeros of the
    fraction cut and ``Z`` for a zero offset."""
    try:
        when = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).astimezone()
    except ValueError:
        return timestamp
    text = when.strftime("%Y-%m-%dT%H:%M:%S")
    if when.microsecond:
        text += "." + f"{when.microsecond:06d}".rstrip("0")
    offset = when.utcoffset()
    seconds = int(offset.total_seconds()) if offset is not None else 0
    if seconds == 0:
        return text + "Z"
    sign = "+" if seconds > 0 else "-"
    hours, minutes = divmod(abs(seconds) // 60, 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


def _string_slice(values: Sequence[str]) -> str:
    """``auditStringSlice``: each value ``%q``-quoted, joined with commas."""
    return ",".join(go_quote(value) for value in values)


def event_string(event: AuditEvent) -> str:
    """``audit.EventString`` (k8s.io/apiserver ``pkg/audit/format.go``): the legacy line,
    without its newline."""
    user = event.get("user") or {}
    username = user.get("username") or ""
    groups = "<none>"
    if username:
        if user.get("groups"):
            groups = _string_slice(user["groups"])
    else:
        username = "<none>"
    asuser = "<self>"
    asgroups = "<lookup>"
    impersonated = event.get("impersonatedUser")
    if impersonated is not None:
        asuser = impersonated.get("username") or ""
        if impersonated.get("groups") is not None:
            asgroups = _string_slice(impersonated["groups"])
    namespace = "<none>"
    object_ref = event.get("objectRef")
    if object_ref and object_ref.get("namespace"):
        namespace = object_ref["namespace"]
    response = "<deferred>"
    status = event.get("responseStatus")
    if status is not None:
        response = str(int(status.get("code") or 0))
    ips = event.get("sourceIPs")
    ip = ips[0] if ips else "<unknown>"
    return (
        f"{_rfc3339_nano(event.get('requestReceivedTimestamp') or '')} AUDIT: "
        f"id={go_quote(event.get('auditID') or '')} "
        f"stage={go_quote(event.get('stage') or '')} "
        f"ip={go_quote(ip)} "
        f"method={go_quote(event.get('verb') or '')} "
        f"user={go_quote(username)} "
        f"groups={go_quote(groups)} "
        f"as={go_quote(asuser)} "
        f"asgroups={go_quote(asgroups)} "
        f"user-agent={go_quote(event.get('userAgent') or '')} "
        f"namespace={go_quote(namespace)} "
        f"uri={go_quote(event.get('requestURI') or '')} "
        f'response="{response}"'
    )


def _legacy_line(event: AuditEvent) -> bytes:
    return (event_string(event) + "\n").encode("utf-8", "surrogateescape")


# -- rotation ----------------------------------------------------------------------------------


@attrs.frozen
class Rotation:
    """lumberjack's ``MaxSize`` (MB, 0 = 100), ``MaxBackups`` and ``MaxAge`` (days; 0 = no
    limit) and ``Compress``, from ``--audit-log-max*`` and ``--audit-log-compress``."""

    max_size_mb: int = 0
    max_backups: int = 0
    max_age_days: int = 0
    compress: bool = False

    @property
    def max_bytes(self) -> int:
        return (self.max_size_mb or DEFAULT_MAX_SIZE_MB) * MEGABYTE


def _go_error(op: str, path: str, error: OSError) -> str:
    """An ``*os.PathError`` text: ``open /x: permission denied``."""
    reason = error.strerror or str(error)
    return f"{op} {path}: {reason[:1].lower()}{reason[1:]}"


def _split_name(path: str) -> tuple[str, str, str]:
    """The directory, the name without extension and the extension (``filepath.Ext``)."""
    directory, filename = os.path.split(path)
    dot = filename.rfind(".")
    ext = filename[dot:] if dot >= 0 else ""
    return directory or ".", filename[: len(filename) - len(ext)], ext


def backup_name(path: str, now: float) -> str:
    """lumberjack's ``backupName`` with ``LocalTime`` false: ``<name>-<UTC time>.<ext>`` with
    the time as ``2006-01-02T15-04-05.000`` (milliseconds truncated)."""
    directory, prefix, ext = _split_name(path)
    when = datetime.fromtimestamp(now, UTC)
    stamp = when.strftime(BACKUP_TIME_FORMAT) + f".{when.microsecond // 1000:03d}"
    return os.path.join(directory, f"{prefix}-{stamp}{ext}")


def _time_from_name(filename: str, prefix: str, ext: str) -> float | None:
    """lumberjack's ``timeFromName``: the backup time of ``filename``, or None."""
    if not filename.startswith(prefix) or not filename.endswith(ext):
        return None
    stamp = filename[len(prefix) : len(filename) - len(ext)]
    try:
        when = datetime.strptime(stamp, BACKUP_TIME_FORMAT + ".%f")
    except ValueError:
        return None
    if len(stamp) != BACKUP_TIME_LENGTH:  # exactly three fraction digits, as Go's layout wants
        return None
    return when.replace(tzinfo=UTC).timestamp()


def old_log_files(path: str) -> list[tuple[float, str]]:
    """lumberjack's ``oldLogFiles``: (backup time, file name) of each backup of ``path``,
    compressed or not, newest first."""
    directory, name, ext = _split_name(path)
    prefix = name + "-"
    found: list[tuple[float, str]] = []
    for entry in os.scandir(directory):
        if entry.is_dir():
            continue
        when = _time_from_name(entry.name, prefix, ext)
        if when is None:
            when = _time_from_name(entry.name, prefix, ext + COMPRESS_SUFFIX)
        if when is not None:
            found.append((when, entry.name))
    found.sort(key=lambda item: item[0], reverse=True)
    return found


def mill(path: str, rotation: Rotation, now: float) -> None:
    """lumberjack's ``millRunOnce``: remove backups beyond ``MaxBackups`` (a file and its
    ``.gz`` count once) and older than ``MaxAge`` days, then gzip the others
    (``compressLogFile``: same mode, the original removed once the copy is complete)."""
    if rotation.max_backups == 0 and rotation.max_age_days == 0 and not rotation.compress:
        return
    directory = _split_name(path)[0]
    files = old_log_files(path)
    remove: list[str] = []
    if 0 < rotation.max_backups < len(files):
        preserved: set[str] = set()
        remaining: list[tuple[float, str]] = []
        for when, name in files:
            preserved.add(name.removesuffix(COMPRESS_SUFFIX))
            if len(preserved) > rotation.max_backups:
                remove.append(name)
            else:
                remaining.append((when, name))
        files = remaining
    if rotation.max_age_days > 0:
        cutoff = now - rotation.max_age_days * 86400
        remaining = []
        for when, name in files:
            if when < cutoff:
                remove.append(name)
            else:
                remaining.append((when, name))
        files = remaining
    compress = (
        [name for _, name in files if not name.endswith(COMPRESS_SUFFIX)]
        if rotation.compress
        else []
    )
    for name in remove:
        try:
            os.remove(os.path.join(directory, name))
        except OSError as error:
            log.warn("audit log: cannot remove {name}: {error}", name=name, error=error)
    for name in compress:
        source = os.path.join(directory, name)
        try:
            _compress(source, source + COMPRESS_SUFFIX)
        except OSError as error:
            log.warn(
                "audit log: failed to compress log file {name}: {error}", name=name, error=error
            )


def _compress(source: str, target: str) -> None:
    mode = os.stat(source).st_mode & 0o7777
    try:
        fd = os.open(target, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, mode)
        with open(source, "rb") as src, os.fdopen(fd, "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", filename="", mtime=0) as out:
                shutil.copyfileobj(src, out, 1024 * 1024)
    except OSError:
        try:
            os.remove(target)
        except OSError:
            pass
        raise
    os.remove(source)


class RotatingFile:
    """``lumberjack.Logger`` for one file: opened at the first write, rotated before a
    write that would take it past ``rotation.max_bytes``, old backups milled after each
    rotation (and at the first open)."""

    def __init__(
        self, path: str, rotation: Rotation, clock: IReactorTime, run_in_thread: RunInThread
    ) -> None:
        self.path = path
        self.rotation = rotation
        self.max_bytes = rotation.max_bytes
        self.clock = clock
        self.run_in_thread = run_in_thread
        self.fd: int | None = None
        self.size = 0
        self.milling: Deferred[None] | None = None
        self.mill_again = False

    def write_lines(self, lines: Sequence[bytes]) -> tuple[int, str | None]:
        """Write each line as lumberjack's ``Write`` of it would (rotation between lines);
        lines that fit are written together. Answers how many lines failed and why."""
        failed = 0
        error: str | None = None
        pending: list[bytes] = []
        for line in lines:
            length = len(line)
            if length > self.max_bytes:
                failed += 1
                error = f"write length {length} exceeds maximum file size {self.max_bytes}"
                continue
            try:
                if self.fd is None:
                    self._open_existing_or_new(length)
                elif self.size + length > self.max_bytes:
                    if pending:
                        self._write(b"".join(pending))
                        pending = []
                    self._rotate()
            except OSError as problem:
                failed += len(pending) + 1
                pending = []
                error = problem.strerror or str(problem)
                continue
            pending.append(line)
            self.size += length
        if pending:
            try:
                self._write(b"".join(pending))
            except OSError as problem:
                failed += len(pending)
                error = problem.strerror or str(problem)
        return failed, error

    def _write(self, data: bytes) -> None:
        assert self.fd is not None
        view = memoryview(data)
        while view:
            try:
                written = os.write(self.fd, view)
            except OSError as problem:
                self.size -= len(view)
                raise OSError(problem.errno, _go_error("write", self.path, problem)) from None
            view = view[written:]

    def _open_existing_or_new(self, length: int) -> None:
        self._mill()
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._open_new()
            return
        except OSError as problem:
            raise OSError(
                problem.errno,
                f"error getting log file info: {_go_error('stat', self.path, problem)}",
            ) from None
        if info.st_size + length >= self.max_bytes:
            self._rotate()
            return
        try:
            self.fd = os.open(self.path, os.O_APPEND | os.O_WRONLY | os.O_CLOEXEC, 0o644)
        except OSError:
            self._open_new()
            return
        self.size = info.st_size

    def _open_new(self) -> None:
        """lumberjack's ``openNew``: move the current file to its backup name, keep its mode
        for the new one (0600 for the first)."""
        directory = _split_name(self.path)[0]
        try:
            os.makedirs(directory, 0o755, exist_ok=True)
        except OSError as problem:
            reason = _go_error("mkdir", directory, problem)
            raise OSError(
                problem.errno, f"can't make directories for new logfile: {reason}"
            ) from None
        mode = 0o600
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            pass
        else:
            mode = info.st_mode & 0o7777
            backup = backup_name(self.path, self.clock.seconds())
            try:
                os.rename(self.path, backup)
            except OSError as problem:
                reason = _go_error("rename", f"{self.path} {backup}", problem)
                raise OSError(problem.errno, f"can't rename log file: {reason}") from None
        try:
            flags = os.O_CREAT | os.O_WRONLY | os.O_TRUNC | os.O_CLOEXEC
            self.fd = os.open(self.path, flags, mode)
        except OSError as problem:
            reason = _go_error("open", self.path, problem)
            raise OSError(problem.errno, f"can't open new logfile: {reason}") from None
        self.size = 0

    def _rotate(self) -> None:
        self.close()
        self._open_new()
        self._mill()

    def _mill(self) -> None:
        rotation = self.rotation
        if rotation.max_backups == 0 and rotation.max_age_days == 0 and not rotation.compress:
            return
        if self.milling is not None:
            self.mill_again = True
            return
        now = self.clock.seconds()
        self.milling = self.run_in_thread(lambda: mill(self.path, rotation, now))
        self.milling.addErrback(lambda f: log.failure("audit log: milling old files", f))
        self.milling.addBoth(self._milled)

    def _milled(self, _: object) -> None:
        self.milling = None
        if self.mill_again:
            self.mill_again = False
            self._mill()

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            try:
                os.close(fd)
            except OSError as problem:
                log.warn("audit log: closing {path}: {error}", path=self.path, error=problem)

    def wait_milled(self) -> Deferred[None]:
        """Fires when no milling is running or due."""
        if self.milling is None:
            return succeed(None)
        done: Deferred[None] = Deferred()

        def check(_: object) -> object:
            self.wait_milled().chainDeferred(done)
            return _

        self.milling.addBoth(check)
        return done


def _run_here(function: Callable[[], None]) -> Deferred[None]:
    function()
    return succeed(None)


def thread_runner(reactor: object) -> RunInThread:
    """Run in the reactor's thread pool when it has one; otherwise (a test clock) at once."""
    if IReactorThreads.providedBy(reactor):
        threads = IReactorThreads(reactor)

        def run(function: Callable[[], None]) -> Deferred[None]:
            return deferToThreadPool(reactor, threads.getThreadPool(), function)

        return run
    return _run_here


# -- the backend -------------------------------------------------------------------------------


class LogSink:
    """``log.NewBackend`` writing to ``path`` (``-``: standard output) in ``fmt``.

    ``process_events`` answers False when a line could not be written (or encoded), after
    counting the events under the plugin ``log`` and logging them as
    ``audit.HandlePluginError`` does.
    """

    name = PLUGIN_NAME

    def __init__(
        self,
        path: str,
        fmt: Format,
        rotation: Rotation,
        clock: IReactorTime,
        metrics: AuditMetrics,
        run_in_thread: RunInThread = _run_here,
    ) -> None:
        self.path = path
        self.fmt = fmt
        self.metrics = metrics
        self.encode: Callable[[AuditEvent], bytes] = (
            _legacy_line if fmt == "legacy" else encode_event
        )
        self.file = None if path == "-" else RotatingFile(path, rotation, clock, run_in_thread)

    def start(self) -> None:
        """``ensureLogFile``: create the directory (0700) and the file (0600) if missing.
        Raises ValueError naming the flag when that fails, which stops start-up."""
        if self.file is None:
            return
        directory = os.path.dirname(self.path) or "."
        try:
            os.makedirs(directory, 0o700, exist_ok=True)
        except OSError as problem:
            raise ValueError(
                f"--audit-log-path: ensureLogFile: {_go_error('mkdir', directory, problem)}"
            ) from None
        try:
            fd = os.open(self.path, os.O_CREAT | os.O_APPEND | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError as problem:
            raise ValueError(
                f"--audit-log-path: ensureLogFile: {_go_error('open', self.path, problem)}"
            ) from None
        os.close(fd)

    def process_events(self, events: Sequence[AuditEvent]) -> bool:
        lines: list[bytes] = []
        encoded = True
        encode = self.encode
        for event in events:
            try:
                lines.append(encode(event))
            except (TypeError, ValueError) as problem:
                self.encode_failed(problem)
                encoded = False
        written = self.write_lines(lines) if lines else True
        return encoded and written

    def encode_failed(self, problem: Exception) -> None:
        """An event that could not be encoded, counted and logged."""
        self._failed(1, str(problem))

    def write_lines(self, lines: Sequence[bytes]) -> bool:
        """Append encoded lines; False, counted and logged, when some were not written."""
        failed = 0
        error: str | None = None
        if self.file is None:
            try:
                _write_all(1, b"".join(lines))
            except OSError as problem:
                failed = len(lines)
                error = _go_error("write", "/dev/stdout", problem)
        else:
            failed, error = self.file.write_lines(lines)
        if failed:
            self._failed(failed, error)
            return False
        return True

    def _failed(self, count: int, error: str | None) -> None:
        """``audit.HandlePluginError`` for the plugin ``log``."""
        self.metrics.error(PLUGIN_NAME, count)
        log.error(
            "Error in audit plugin '{plugin}' affecting {count} audit events: {error}",
            plugin=PLUGIN_NAME,
            count=count,
            error=error,
        )

    def shutdown(self) -> Deferred[None]:
        """Close the file once old backups are milled (compressed)."""
        if self.file is None:
            return succeed(None)
        file = self.file
        done = file.wait_milled()
        done.addCallback(lambda _: file.close())
        return done

    def __repr__(self) -> str:
        return PLUGIN_NAME


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# -- building ----------------------------------------------------------------------------------


def _path_problem(path: str) -> str | None:
    """What would make ``ensureLogFile`` fail, found without creating anything."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return _go_error("open", path, IsADirectoryError(21, "is a directory"))
    ancestor = os.path.dirname(path)
    missing = False
    while not os.path.exists(ancestor):
        missing = True
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"mkdir {ancestor}: not a directory"
    if os.path.exists(path):
        if not os.access(path, os.W_OK):
            return f"open {path}: permission denied"
    elif not os.access(ancestor, os.W_OK | os.X_OK):
        op = "mkdir" if missing else "open"
        return f"{op} {path if not missing else ancestor}: permission denied"
    return None


def worker_log_path(path: str, worker: tuple[int, int] | None) -> str:
    """The file a worker process of ``--workers`` writes: with several workers each has its
    own (``audit.log`` becomes ``audit.worker-<index>.log``), rotated and milled on its own.

    Why: lumberjack's rotation (rename, then a new file) is per process; several processes
    sharing one file would write into each other's renamed backups and truncate each other's
    new files. Standard output (``-``) stays shared: every worker writes whole batches to it.
    One process (no ``--workers``, or one worker) keeps the path as given."""
    if worker is None or worker[1] <= 1 or path in ("", "-"):
        return path
    root, ext = os.path.splitext(path)
    return f"{root}.worker-{worker[0]}{ext}"


def build_log_backend(
    config: ServerConfig,
    clock: IReactorTime,
    metrics: AuditMetrics,
    *,
    path: str | None = None,
) -> Sink | None:
    """The log backend of ``--audit-log-*``, wrapped per its mode and truncation flags, or None
    without ``--audit-log-path``. Nothing is created here; ``start`` creates the file.
    ``path`` replaces ``--audit-log-path`` (a worker's own file, :func:`worker_log_path`).

    Raises ValueError (which stops start-up) for a format or version other than the known
    ones and for a path whose file could not be created."""
    if path is None:
        path = config.audit_log_path
    if not path:
        return None
    fmt = config.audit_log_format
    if fmt not in FORMATS:
        raise ValueError(
            f"--audit-log-format: invalid audit log format {fmt}, allowed formats are "
            f"{go_quote(','.join(FORMATS))}"
        )
    if config.audit_log_version != API_VERSION:
        raise ValueError(
            f"--audit-log-version: invalid group version, allowed versions are [{API_VERSION}]"
        )
    if path != "-":
        problem = _path_problem(path)
        if problem is not None:
            raise ValueError(f"--audit-log-path: ensureLogFile: {problem}")
    rotation = Rotation(
        max_size_mb=config.audit_log_maxsize,
        max_backups=config.audit_log_maxbackup,
        max_age_days=config.audit_log_maxage,
        compress=config.audit_log_compress,
    )
    sink = LogSink(path, cast(Format, fmt), rotation, clock, metrics, thread_runner(clock))
    return wrap(sink, backend_options(config, "log"), clock, metrics, lines=sink)
