"""``/debug/pprof/``: Go's net/http/pprof endpoints, for a Python process.

kube-apiserver installs them with ``--profiling`` (k8s.io/apiserver
``pkg/server/routes/profiling.go``): ``/debug/pprof`` redirects to ``/debug/pprof/``, the
index lists the profiles, ``profile`` is a CPU profile over ``?seconds=`` (30 by default),
``symbol`` maps addresses to names, and every other name is a named profile, pprof protobuf
(gzip) by default and text with ``?debug=1``/``2``. What each one holds here:

- ``profile``: the sampler of :mod:`apiserver.debug.sampling` (on-CPU stacks of every
  thread, CPU nanoseconds);
- ``heap`` and ``allocs``: tracemalloc's live allocations after ``?seconds=`` (5 by default
  unless the process already traces);
- ``goroutine``: every thread's stack, and with ``?debug=2`` also the reactor's pending
  calls (what a goroutine dump shows of a Go server's timers);
- ``threadcreate``: the threads; ``block`` and ``mutex``: with ``--contention-profiling``,
  the stacks of waiting threads sampled over ``?seconds=``, else empty as in Go without a
  profile rate;
- ``cmdline``: the command line, NUL-separated; ``symbol``: the names of the addresses the
  text dumps printed (a Python frame has no address: each (function, line) gets one).

Every profile is taken in a thread (:mod:`apiserver.debug.threads`) and answered through a
Deferred, so the reactor goes on serving while it runs.
"""

from __future__ import annotations

import html
import sys
import threading
from typing import Any

from twisted.internet.defer import Deferred

from apiserver.debug import sampling
from apiserver.debug.threads import Runner, thread_runner
from apiserver.http.app import RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

PREFIX = "/debug/pprof/"
PLAIN = "text/plain; charset=utf-8"
#: net/http/pprof's profile descriptions, for the index.
PROFILES = {
    "allocs": "A sampling of all past memory allocations",
    "block": "Stack traces that led to blocking on synchronization primitives",
    "cmdline": "The command line invocation of the current program",
    "goroutine": "Stack traces of all current goroutines. Use debug=2 as a query parameter "
    "to export in the same format as an unrecovered panic.",
    "heap": "A sampling of memory allocations of live objects. You can specify the gc GET "
    "parameter to run GC before taking the heap sample.",
    "mutex": "Stack traces of holders of contended mutexes",
    "profile": "CPU profile. You can specify the duration in the seconds GET parameter. "
    "After you get the profile file, use the go tool pprof command to investigate the "
    "profile.",
    "symbol": "Maps given program counters to function names. Counts are ignored.",
    "threadcreate": "Stack traces that led to the creation of new OS threads",
}
MAX_SYMBOLS = 100_000


def _text(code: int, body: str, content_type: str = PLAIN) -> Response:
    return Response(
        code,
        (("Content-Type", content_type), ("X-Content-Type-Options", "nosniff")),
        body.encode(),
    )


def _profile_response(name: str, data: bytes) -> Response:
    return Response(
        200,
        (
            ("Content-Type", "application/octet-stream"),
            ("Content-Disposition", f'attachment; filename="{name}"'),
            ("X-Content-Type-Options", "nosniff"),
        ),
        data,
    )


def _query_int(info: RequestInfo, key: bytes, default: int) -> int | None:
    values = info.query.get(key)
    if not values:
        return default
    try:
        return int(values[0])
    except ValueError:
        return None


class Pprof:
    """The handlers; ``reactor`` runs the threads' results back on the reactor thread."""

    def __init__(
        self,
        reactor: Any,
        *,
        contention: bool = False,
        argv: list[str] | None = None,
        interval: float = sampling.DEFAULT_INTERVAL,
        runner: Runner | None = None,
    ) -> None:
        self.reactor = reactor
        self._in_thread = runner if runner is not None else thread_runner(reactor)
        self.contention = contention
        self.argv = list(sys.argv if argv is None else argv)
        self.interval = interval
        self._cpu_busy = False
        #: address -> function name, for ``symbol`` (filled by the text dumps).
        self.symbols: dict[int, str] = {}

    # --- routing --------------------------------------------------------------------------

    def handle(self, request: HTTPRequest, info: RequestInfo) -> Response | Deferred[Response]:
        """Everything under ``/debug/pprof`` (registered as a prefix, unlisted in ``/``)."""
        path = info.path
        if path == "/debug/pprof":
            return Response(
                302,
                (("Location", PREFIX), ("Content-Type", "text/html; charset=utf-8")),
                b'<a href="/debug/pprof/">Found</a>.\n\n',
            )
        if not path.startswith(PREFIX):
            return _text(404, "404 page not found\n")
        name = path[len(PREFIX) :]
        if name == "":
            return self.index()
        if name == "profile":
            return self.profile(info)
        if name == "cmdline":
            return _text(200, "\x00".join(self.argv))
        if name == "symbol":
            return self.symbol(request, info)
        if name == "trace":
            return _text(
                404,
                "Could not enable tracing: execution traces are a Go runtime feature\n",
            )
        return self.named(name, info)

    # --- pages ----------------------------------------------------------------------------

    def index(self) -> Response:
        rows = []
        counts = {"goroutine": threading.active_count(), "threadcreate": threading.active_count()}
        for name in sorted(PROFILES):
            if name in ("cmdline", "profile", "symbol"):
                continue
            rows.append(
                f"<tr><td>{counts.get(name, 0)}</td><td><a href='{name}?debug=1'>{name}</a>"
                "</td></tr>"
            )
        items = "\n".join(
            f"<li><div class=profile-name>{name}: </div> {html.escape(text)}</li>"
            for name, text in sorted(PROFILES.items())
        )
        body = (
            "<html>\n<head>\n<title>/debug/pprof/</title>\n</head>\n<body>\n/debug/pprof/\n"
            "<br>\n<p>Set debug=1 as a query parameter to export in legacy text format</p>\n"
            "<br>\nTypes of profiles available:\n<table>\n"
            "<thead><td>Count</td><td>Profile</td></thead>\n"
            + "\n".join(rows)
            + "\n<tr><td></td><td><a href='profile'>profile</a></td></tr>\n"
            "</table>\n<a href='goroutine?debug=2'>full goroutine stack dump</a>\n<br>\n"
            "<p>\nProfile Descriptions:\n<ul>\n" + items + "\n</ul>\n</p>\n</body>\n</html>\n"
        )
        return _text(200, body, "text/html; charset=utf-8")

    def profile(self, info: RequestInfo) -> Response | Deferred[Response]:
        seconds = _query_int(info, b"seconds", 30)
        if seconds is None or seconds <= 0:
            seconds = 30
        if self._cpu_busy:
            return _text(500, "Could not enable CPU profiling: cpu profiling already in use\n")
        self._cpu_busy = True

        def run() -> bytes:
            return sampling.sample_cpu(seconds, self.interval)[0]

        def done(result: object) -> object:
            self._cpu_busy = False
            return result

        d = self._in_thread("pprof-cpu", run)
        d.addBoth(done)
        return d.addCallback(lambda data: _profile_response("profile", data))

    def named(self, name: str, info: RequestInfo) -> Response | Deferred[Response]:
        debug = _query_int(info, b"debug", 0) or 0
        seconds = _query_int(info, b"seconds", 0) or 0
        if name == "goroutine" or name == "threadcreate":
            if debug >= 2 and name == "goroutine":
                return _text(200, self.goroutine_dump())
            if debug >= 1:
                return _text(200, self.goroutine_text(name))
            return self._in_thread(name, sampling.threads_profile).addCallback(
                lambda data: _profile_response(name, data)
            )
        if name in ("heap", "allocs"):
            window = float(seconds or 5)
            return self._in_thread(name, lambda: sampling.heap_profile(window)).addCallback(
                lambda data: _profile_response(name, data)
            )
        if name in ("block", "mutex"):
            if not self.contention or seconds <= 0:
                return _profile_response(name, sampling.block_builder().encode())
            return self._in_thread(
                name, lambda: sampling.sample_cpu(seconds, self.interval, contention=True)[1] or b""
            ).addCallback(lambda data: _profile_response(name, data))
        return _text(404, "Unknown profile\n")

    # --- text dumps -----------------------------------------------------------------------

    def _address(self, code: Any, line: int) -> int:
        address = (id(code) + line) & 0xFFFFFFFFFFFF
        if len(self.symbols) >= MAX_SYMBOLS:
            self.symbols.clear()
        self.symbols[address] = sampling.function_name(code, code.co_filename)
        return address

    def goroutine_text(self, name: str) -> str:
        """``?debug=1``: each distinct stack once, with its count and addresses."""
        counts: dict[sampling.Stack, int] = {}
        for frame in sys._current_frames().values():
            stack = sampling.stack_of(frame)
            counts[stack] = counts.get(stack, 0) + 1
        lines = [f"{name} profile: total {sum(counts.values())}"]
        for stack, count in sorted(counts.items(), key=lambda item: -item[1]):
            addresses = [self._address(code, line) for code, line in stack]
            lines.append(f"{count} @ " + " ".join(f"{a:#x}" for a in addresses))
            for (code, line), address in zip(stack, addresses, strict=True):
                func = sampling.function_name(code, code.co_filename)
                lines.append(f"#\t{address:#x}\t{func}+0x0\t{code.co_filename}:{line}")
            lines.append("")
        return "\n".join(lines) + "\n"

    def goroutine_dump(self) -> str:
        """``?debug=2``: every thread like a Go panic's goroutine dump, then the reactor's
        pending calls."""
        names = {t.ident: t for t in threading.enumerate()}
        out = []
        for ident, frame in sys._current_frames().items():
            thread = names.get(ident)
            state = thread.name if thread is not None else "unknown"
            out.append(f"goroutine {ident} [{state}]:")
            for code, line in sampling.stack_of(frame):
                out.append(f"{sampling.function_name(code, code.co_filename)}(...)")
                out.append(f"\t{code.co_filename}:{line} +0x0")
            out.append("")
        get_delayed = getattr(self.reactor, "getDelayedCalls", None)
        if get_delayed is not None:
            now = self.reactor.seconds()
            for number, call in enumerate(sorted(get_delayed(), key=lambda c: c.getTime())):
                func = call.func
                func_code = getattr(func, "__code__", None)
                where = (
                    f"\t{func_code.co_filename}:{func_code.co_firstlineno} +0x0"
                    if func_code is not None
                    else "\t?"
                )
                out.append(
                    f"goroutine timer-{number} [reactor call in {call.getTime() - now:.3f}s]:"
                )
                out.append(f"{getattr(func, '__qualname__', repr(func))}(...)")
                out.append(where)
                out.append("")
        return "\n".join(out)

    def symbol(self, request: HTTPRequest, info: RequestInfo) -> Response:
        """``symbol``: GET says how many symbols there are (1: some); POST maps ``0x..+0x..``
        addresses to names."""
        if info.method != "POST":
            return _text(200, "num_symbols: 1\n")
        body = request.content.read() if request.content is not None else b""
        lines = []
        for word in body.decode("ascii", "replace").replace("+", " ").split():
            try:
                address = int(word, 16)
            except ValueError:
                continue
            name = self.symbols.get(address)
            if name is not None:
                lines.append(f"{address:#x} {name}")
        return _text(200, "".join(line + "\n" for line in lines))
