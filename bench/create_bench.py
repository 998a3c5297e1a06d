#!/usr/bin/env python3
"""In-process CPU cost of an Event create: reactor-thread microseconds per POST.

Usage: ``python bench/create_bench.py [--n 3000] [--concurrency 16] [--rounds 3] [--body F]
[--core]``

``--core`` posts a core/v1 Event (as a kubelet's legacy recorder writes it) to
``/api/v1/namespaces/bench-create/events`` through the core view instead.

Builds what the server builds for the Event API (``SqliteStore`` on a temporary directory,
the watch cache ``Cacher`` over it, ``Registry``, ``EventsAPI``) on the global reactor and
drives ``--n`` creates through ``EventsAPI.handle`` with ``--concurrency`` in flight, the
body ``api_bench.py`` posts (``generateName: b-``). No TLS, no HTTP parsing, no network:
what it measures is the API handler, the registry, the store's reactor-side work and the
watch cache, i.e. the part of a create that is ours beyond the HTTP layer.

It reports the reactor thread's CPU time per create (``time.thread_time`` of the thread
running the reactor, which also runs every ``callFromThread`` from the SQLite writer) and
the process CPU time per create (adds the writer thread), best of ``--rounds``. CPU time,
not wall time, because the machine is shared: other processes slow the wall clock, not the
CPU a create costs. ``--profile`` wraps one extra round in cProfile and prints the top
functions by cumulative time.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from twisted.internet import defer, task  # noqa: E402
from twisted.web.http_headers import Headers  # noqa: E402

from apiserver.api.events import corev1  # noqa: E402
from apiserver.api.events.rest import CORE_V1, EVENTS_V1, GR, EventsAPI  # noqa: E402
from apiserver.http.app import RequestInfo  # noqa: E402
from apiserver.registry.store import Registry  # noqa: E402
from apiserver.storage.cacher import Cacher  # noqa: E402
from apiserver.storage.sqlite import SqliteStore  # noqa: E402

PATH = "/apis/events.k8s.io/v1/namespaces/bench-create/events"
BODY = (
    b'{"apiVersion":"events.k8s.io/v1","kind":"Event","metadata":{"namespace":"bench-create",'
    b'"generateName":"b-"},"eventTime":"2025-01-01T00:00:00.000000Z",'
    b'"reportingController":"bench.example.com/api-bench","reportingInstance":"api-bench-1",'
    b'"action":"Benchmark","reason":"Measured","type":"Normal","regarding":{"kind":"Pod",'
    b'"apiVersion":"v1","namespace":"bench-create","name":"p-1"},"note":"api bench"}'
)
CORE_PATH = "/api/v1/namespaces/bench-create/events"
CORE_BODY = (
    b'{"apiVersion":"v1","kind":"Event","metadata":{"namespace":"bench-create",'
    b'"generateName":"b-"},"involvedObject":{"kind":"Pod","namespace":"bench-create",'
    b'"name":"p-1","apiVersion":"v1"},"reason":"Started","message":"api bench",'
    b'"source":{"component":"kubelet","host":"node-1"},"firstTimestamp":"2025-01-01T00:00:00Z",'
    b'"lastTimestamp":"2025-01-01T00:00:00Z","count":1,"type":"Normal",'
    b'"reportingComponent":"kubelet","reportingInstance":"node-1"}'
)


class FakeRequest:
    """What ``EventsAPI`` reads from a twisted.web request: headers, body, URI."""

    def __init__(self, body: bytes, path: str = PATH) -> None:
        self.content = io.BytesIO(body)
        self.uri = path.encode()
        self.requestHeaders = Headers(
            {
                b"content-type": [b"application/json"],
                b"user-agent": [b"h2load nghttp2/1.64.0"],
                b"accept": [b"*/*"],
            }
        )

    def getHeader(self, name: bytes) -> bytes | None:
        values = self.requestHeaders.getRawHeaders(name)
        return values[-1] if values else None


async def _round(
    api: EventsAPI, body: bytes, n: int, concurrency: int, path: str = PATH
) -> tuple[float, float]:
    info = RequestInfo("POST", path, {}, False, True)
    left = n
    failures: list[Any] = []

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            handle: Any = api.handle
            response: Any = await defer.maybeDeferred(handle, FakeRequest(body, path), info)
            if response.code != 201:
                failures.append(response)

    thread0, process0 = time.thread_time(), time.process_time()
    await defer.gatherResults(
        [defer.Deferred.fromCoroutine(worker()) for _ in range(concurrency)],
        consumeErrors=True,
    )
    thread1, process1 = time.thread_time(), time.process_time()
    if failures:
        raise SystemExit(f"{len(failures)} creates failed, first: {failures[0]!r}")
    return (thread1 - thread0) / n * 1e6, (process1 - process0) / n * 1e6


async def _main(reactor: Any, args: argparse.Namespace) -> None:
    path = CORE_PATH if args.core else PATH
    body = Path(args.body).read_bytes() if args.body else (CORE_BODY if args.core else BODY)
    data = tempfile.mkdtemp(prefix="create-bench-")
    store = SqliteStore(os.path.join(data, "store.db"), reactor, compaction_interval=0)
    cacher = Cacher(store, [b"/registry/events/"], reactor)
    try:
        await store.start()
        await cacher.start()
        await cacher.ready
        # As the server builds it: events stored as core/v1 (api/events/corev1.py).
        registry = Registry(cacher, group_resource=GR, ttl=lambda: 3600, conversion=corev1.STORAGE)
        api = EventsAPI(registry, reactor, view=CORE_V1 if args.core else EVENTS_V1)
        await _round(api, body, min(args.n, 500), args.concurrency, path)  # warm-up
        results = [
            await _round(api, body, args.n, args.concurrency, path) for _ in range(args.rounds)
        ]
        if args.profile:
            import cProfile
            import pstats

            profiler = cProfile.Profile()
            profiler.enable()
            await _round(api, body, args.n, args.concurrency, path)
            profiler.disable()
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
        thread = min(r[0] for r in results)
        process = min(r[1] for r in results)
        print(
            f"creates ({'core/v1' if args.core else 'events.k8s.io/v1'}): {args.n} x "
            f"{args.rounds} rounds, concurrency {args.concurrency}\n"
            f"reactor thread CPU per create: {thread:7.1f} us (best; rounds: "
            + ", ".join(f"{r[0]:.1f}" for r in results)
            + f")\nprocess CPU per create:        {process:7.1f} us (best)"
        )
    finally:
        await cacher.stop()
        await store.stop()
        shutil.rmtree(data, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3000, help="creates per round")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--body", help="a file holding the JSON body to POST")
    parser.add_argument("--profile", action="store_true", help="cProfile one extra round")
    parser.add_argument("--core", action="store_true", help="core/v1 creates through /api/v1")
    args = parser.parse_args(argv)
    task.react(lambda reactor: defer.Deferred.fromCoroutine(_main(reactor, args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
