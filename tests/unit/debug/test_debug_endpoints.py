"""/debug/pprof, /debug/flags/v and /logs (apiserver.debug), called directly: the profiles
decode as pprof, the texts are Go's, and nothing here sleeps (the "thread" runs inline)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from tests.unit.fake_request import FakeRequest
from twisted.internet.defer import Deferred, succeed
from twisted.internet.testing import MemoryReactorClock

from apiserver.debug import install_debug
from apiserver.debug.flags import DebugFlags
from apiserver.debug.logs import LogsHandler
from apiserver.debug.pprof import Pprof
from apiserver.debug.profile_proto import ProfileBuilder, decode
from apiserver.debug.sampling import heap_profile, sample_cpu, threads_profile
from apiserver.http.app import RequestInfo, Router
from apiserver.http.response import Response
from apiserver.logs import match_level, request_logging

T = TypeVar("T")


def inline(name: str, work: Callable[[], T]) -> Deferred[T]:
    return succeed(work())


def call(
    handler: Callable[[Any, RequestInfo], Any], method: str, path: str, body: bytes = b""
) -> Response:
    from apiserver.http.app import parse_query

    uri = path.encode()
    request = FakeRequest(method.encode(), uri, body=body)
    info = RequestInfo(method, path.partition("?")[0], parse_query(uri), False, False)
    result = handler(request, info)
    if isinstance(result, Deferred):
        answers: list[Response] = []
        result.addCallback(answers.append)
        assert answers, "the handler's Deferred did not fire"
        return answers[0]
    assert isinstance(result, Response)
    return result


def pprof(**kw: Any) -> Pprof:
    return Pprof(MemoryReactorClock(), runner=inline, argv=["twistd", "apiserver", "-v=2"], **kw)


def test_pprof_redirects_and_lists_its_profiles() -> None:
    p = pprof()
    redirect = call(p.handle, "GET", "/debug/pprof")
    assert redirect.code == 302 and redirect.header("Location") == "/debug/pprof/"
    index = call(p.handle, "GET", "/debug/pprof/")
    assert index.code == 200
    text = index.body.decode()
    for name in ("allocs", "block", "goroutine", "heap", "mutex", "threadcreate", "profile"):
        assert f">{name}</a>" in text
    assert call(p.handle, "GET", "/debug/pprof/nothing").code == 404


def test_cmdline_is_nul_separated() -> None:
    answer = call(pprof().handle, "GET", "/debug/pprof/cmdline")
    assert answer.body == b"twistd\x00apiserver\x00-v=2"


def test_goroutine_texts_and_symbols() -> None:
    p = pprof()
    one = call(p.handle, "GET", "/debug/pprof/goroutine?debug=1").body.decode()
    assert one.startswith("goroutine profile: total ")
    assert "test_goroutine_texts_and_symbols" in one
    address = next(line.split("\t")[1] for line in one.splitlines() if line.startswith("#"))
    symbol = call(p.handle, "POST", "/debug/pprof/symbol", address.encode()).body.decode()
    assert symbol.startswith(address + " ")
    assert call(p.handle, "GET", "/debug/pprof/symbol").body == b"num_symbols: 1\n"
    two = call(p.handle, "GET", "/debug/pprof/goroutine?debug=2").body.decode()
    assert "goroutine " in two and "[MainThread]:" in two
    assert "test_debug_endpoints.test_goroutine_texts_and_symbols(...)" in two


def test_goroutine_dump_lists_the_reactors_pending_calls() -> None:
    reactor = MemoryReactorClock()
    reactor.callLater(2.5, test_cmdline_is_nul_separated)
    p = Pprof(reactor, runner=inline)
    dump = call(p.handle, "GET", "/debug/pprof/goroutine?debug=2").body.decode()
    assert "[reactor call in 2.500s]:" in dump
    assert "test_cmdline_is_nul_separated(...)" in dump


def test_goroutine_profile_decodes_as_pprof() -> None:
    answer = call(pprof().handle, "GET", "/debug/pprof/goroutine")
    assert answer.header("Content-Type") == "application/octet-stream"
    profile = decode(answer.body)
    assert profile.string_table[profile.sample_type[0].type] == "goroutine"
    assert sum(s.value[0] for s in profile.sample) >= 1


def test_block_profile_is_empty_without_contention_profiling() -> None:
    profile = decode(call(pprof().handle, "GET", "/debug/pprof/block?seconds=1").body)
    assert [profile.string_table[t.type] for t in profile.sample_type] == [
        "contentions",
        "delay",
    ]
    assert len(profile.sample) == 0


def test_a_second_cpu_profile_is_refused_while_one_runs() -> None:
    pending: list[Deferred[bytes]] = []

    def hold(name: str, work: Callable[[], T]) -> Deferred[T]:
        d: Deferred[T] = Deferred()
        pending.append(d)  # type: ignore[arg-type]
        return d

    p = Pprof(MemoryReactorClock(), runner=hold)
    first = p.handle(FakeRequest(b"GET", b"/debug/pprof/profile?seconds=1"), _info("profile"))
    assert isinstance(first, Deferred)
    busy = call(p.handle, "GET", "/debug/pprof/profile?seconds=1")
    assert busy.code == 500
    assert busy.body == b"Could not enable CPU profiling: cpu profiling already in use\n"
    pending[0].callback(ProfileBuilder([("samples", "count")]).encode())
    assert not p._cpu_busy


def _info(name: str) -> RequestInfo:
    return RequestInfo("GET", f"/debug/pprof/{name}", {b"seconds": [b"1"]}, True, False)


def test_samplers_with_a_stop_already_set_return_valid_profiles() -> None:
    import threading

    stop = threading.Event()
    stop.set()
    cpu, block = sample_cpu(5, contention=True, stop=stop)
    assert decode(cpu).string_table[decode(cpu).sample_type[1].type] == "cpu"
    assert block is not None and len(decode(block).sample) == 0
    heap = decode(heap_profile(5, stop=stop))
    assert [heap.string_table[t.type] for t in heap.sample_type][-1] == "inuse_space"
    assert len(decode(threads_profile()).sample) >= 1


def test_profile_builder_interns_functions_and_locations() -> None:
    builder = ProfileBuilder([("samples", "count")])
    a = builder.location("pkg.f", "/x/pkg.py", 10, 12)
    assert builder.location("pkg.f", "/x/pkg.py", 10, 12) == a
    b = builder.location("pkg.f", "/x/pkg.py", 10, 13)
    builder.sample([b, a], [3], {"thread": "MainThread"})
    profile = decode(builder.encode())
    assert len(profile.function) == 1 and len(profile.location) == 2
    assert profile.sample[0].location_id == [b, a]
    assert profile.string_table[profile.function[0].name] == "pkg.f"


def test_debug_flags_v_sets_the_verbosity() -> None:
    levels: list[int] = []
    flags = DebugFlags(levels.append)
    ok = call(flags.handle, "PUT", "/debug/flags/v", b"5")
    assert (ok.code, ok.body) == (200, b"successfully set klog.logging.verbosity to 5\n")
    assert ok.header("Content-Type") == "text/plain"
    assert levels == [5]
    bad = call(flags.handle, "PUT", "/debug/flags/v", b"x")
    assert bad.code == 400
    assert bad.body == (
        b'failed set klog.logging.verbosity x: strconv.ParseInt: parsing "x": invalid syntax\n'
    )
    other = call(flags.handle, "GET", "/debug/flags/v")
    assert (other.code, other.body) == (406, b"unsupported http method\n")
    assert b"flags:<br>" in call(flags.handle, "GET", "/debug/flags/").body
    assert levels == [5]


def test_vmodule_gives_files_their_own_level() -> None:
    vmodule = (("httplog", 3), ("apiserver/http/*", 5))
    assert match_level("httplog", 0, vmodule) == 3
    assert match_level("/src/apiserver/http/app.py", 1, vmodule) == 5
    assert match_level("/src/apiserver/server.py", 1, vmodule) == 1
    assert request_logging(0, vmodule) and not request_logging(2, ())
    assert request_logging(3, ())


def test_logs_lists_and_serves_the_log_directory(tmp_path: Path) -> None:
    (tmp_path / "apiserver.log").write_text("hello\n")
    (tmp_path / "sub").mkdir()
    logs = LogsHandler(MemoryReactorClock(), str(tmp_path), runner=inline)
    listing = call(logs.handle, "GET", "/logs/")
    assert listing.code == 200
    assert b'<a href="apiserver.log">apiserver.log</a>' in listing.body
    assert b'<a href="sub/">sub/</a>' in listing.body
    served = call(logs.handle, "GET", "/logs/apiserver.log")
    assert (served.code, served.body) == (200, b"hello\n")
    assert call(logs.handle, "GET", "/logs").code == 301
    assert call(logs.handle, "GET", "/logs/sub").header("Location") == "sub/"
    assert call(logs.handle, "GET", "/logs/missing").code == 404
    assert call(logs.handle, "GET", "/logs/" + "x" * 300).body == b"file not found\n"
    assert call(logs.handle, "GET", "/logs/../etc/passwd").code == 400


def test_install_registers_unlisted_prefixes_and_a_listed_logs_path() -> None:
    router = Router()
    install_debug(
        router,
        MemoryReactorClock(),
        profiling=True,
        contention=False,
        logs_handler=True,
        set_verbosity=lambda level: None,
    )
    assert router.resolve("/debug/pprof/heap") is not None
    assert router.resolve("/debug/flags/v") is not None
    assert router.paths() == ["/logs"]
    off = Router()
    install_debug(
        off,
        MemoryReactorClock(),
        profiling=False,
        contention=False,
        logs_handler=False,
        set_verbosity=lambda level: None,
    )
    assert off.resolve("/debug/pprof/") is None and off.resolve("/logs/x") is None


@pytest.mark.skipif(sys.platform != "linux", reason="per-thread CPU clocks")
def test_thread_cpu_clock_is_readable() -> None:
    import threading
    import time

    assert time.clock_gettime_ns(time.pthread_getcpuclockid(threading.get_ident())) > 0
    assert os.getpid() > 0
