#!/usr/bin/env python3
"""Store-layer benchmark of both backends, with etcd's own gateway put rate as the reference.

Usage: ``python bench/store_bench.py [--quick] [--results PATH] [--no-write]``

Measures, for the embedded SQLite store (on a temporary directory) and the etcd3 backend
(against a Debian ``etcd`` this script starts on free loopback ports and stops again):

* creates/s at concurrency 16 and 1, gets/s (concurrency 16), ranges of 500 keys (ranges/s
  and ms each, concurrency 1), and the watch cache's ``list_cached`` of the same 500 keys;
* one change fanned out to 1,000 watchers (time from issuing the write until the last watcher
  has it, p50/p99 over several changes), once with 1,000 watches on the store itself and
  once through the Cacher (one store watch, fanned out in memory);
* etcd's own put rate through its JSON gateway (plain Agent POSTs of ``/v3/kv/put`` on a
  persistent connection pool, at the same concurrencies) as the reference for the etcd3
  backend, whose create is a compare-and-put transaction.

It prints a Markdown table and writes it, with the date, the machine and the ratios against
the targets, between the ``store_bench`` markers of ``bench/RESULTS.md`` (other sections of
that file are left alone). Only loopback traffic; the whole run takes well under 3 minutes
(about 15 s with ``--quick``). Targets: etcd3 creates >= 0.6 x the gateway put rate at the
same concurrency; embedded creates >= 3,000/s (concurrency 16); one change to 1,000 watchers
within 50 ms (p99, through the Cacher).
"""

from __future__ import annotations

import argparse
import atexit
import base64
import datetime
import importlib.util
import itertools
import os
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The repository's code, not an older installed copy of the package.
sys.path.insert(0, str(REPO / "src"))

import attrs  # noqa: E402
import orjson  # noqa: E402
import treq  # noqa: E402
from twisted.internet import defer, task  # noqa: E402
from twisted.internet.defer import Deferred  # noqa: E402
from twisted.python.failure import Failure  # noqa: E402
from twisted.web.client import Agent, HTTPConnectionPool  # noqa: E402
from twisted.web.http_headers import Headers  # noqa: E402
from twisted.web.iweb import IBodyProducer  # noqa: E402
from zope.interface import implementer  # noqa: E402

from apiserver.storage.cacher import Cacher  # noqa: E402
from apiserver.storage.interface import Store, Watch, WatchEvent  # noqa: E402

RESULTS = REPO / "bench" / "RESULTS.md"
BEGIN = "<!-- store_bench:begin -->"
END = "<!-- store_bench:end -->"

WATCHERS = 1000
RANGE_KEYS = 500
#: About the size of a stored core/v1 Event.
VALUE = b'{"kind":"Event","apiVersion":"v1",' + b'"message":"' + b"x" * 740 + b'"}'
#: Whole-run guard: the run is cancelled (and etcd stopped) past this many seconds.
RUN_LIMIT = 170.0
WAIT_LIMIT = 20.0

TARGET_GATEWAY_RATIO = 0.6
TARGET_EMBEDDED_CREATES = 3000.0
TARGET_FANOUT_MS = 50.0


@attrs.define
class Settings:
    duration: float  # seconds per throughput measurement
    trials: int  # changes per fan-out measurement


FULL = Settings(duration=3.0, trials=30)
QUICK = Settings(duration=1.0, trials=8)


@attrs.define
class Figures:
    """What one backend measured (rates per second, latencies in ms)."""

    creates_16: float = 0.0
    creates_1: float = 0.0
    gets_16: float = 0.0
    ranges_1: float = 0.0
    lists_cached_1: float = 0.0
    fanout_store: list[float] = attrs.Factory(list)
    fanout_cacher: list[float] = attrs.Factory(list)
    gateway_16: float = 0.0
    gateway_1: float = 0.0


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def sleep(seconds: float) -> Deferred[None]:
    from twisted.internet import reactor

    return task.deferLater(reactor, seconds, lambda: None)


async def within(d: Deferred[Any], seconds: float = WAIT_LIMIT) -> Any:
    from twisted.internet import reactor

    d.addTimeout(seconds, reactor)
    return await d


# -- measurements -------------------------------------------------------------------------------


async def rate(op: Callable[[int], Awaitable[Any]], concurrency: int, duration: float) -> float:
    """Operations per second of ``op(i)`` run by ``concurrency`` workers for ``duration``."""
    counter = itertools.count()
    done = 0
    start = time.perf_counter()
    deadline = start + duration

    async def worker() -> None:
        nonlocal done
        while time.perf_counter() < deadline:
            await op(next(counter))
            done += 1

    await defer.gatherResults(
        [defer.ensureDeferred(worker()) for _ in range(concurrency)], consumeErrors=True
    )
    return done / (time.perf_counter() - start)


class FanOut:
    """Counts deliveries of changes (bookmarks aside) and fires once all watchers have one."""

    def __init__(self, watchers: int) -> None:
        self.watchers = watchers
        self.count = 0
        self.last = 0.0
        self.all_in: Deferred[None] | None = None

    def arm(self) -> Deferred[None]:
        self.count = 0
        self.all_in = Deferred()
        return self.all_in

    def __call__(self, event: WatchEvent) -> None:
        if event.type == "BOOKMARK":
            return
        self.count += 1
        if self.count == self.watchers and self.all_in is not None:
            self.last = time.perf_counter()
            d, self.all_in = self.all_in, None
            d.callback(None)


async def fan_out(
    store: Store, watch_on: Store | Cacher, prefix: bytes, trials: int, etcd: bool
) -> list[float]:
    """ms from issuing one write until all WATCHERS watches of ``watch_on`` have it."""
    counter = FanOut(WATCHERS)
    watches: list[Watch] = [watch_on.watch(prefix, 0, counter) for _ in range(WATCHERS)]
    try:
        if etcd and not isinstance(watch_on, Cacher):
            deadline = time.monotonic() + WAIT_LIMIT
            while not all(getattr(w, "created", True) for w in watches):
                if time.monotonic() > deadline:
                    raise RuntimeError("etcd watch streams not established in time")
                await sleep(0.02)
        # One warm-up change, then the measured ones.
        samples: list[float] = []
        for i in range(trials + 1):
            all_in = counter.arm()
            start = time.perf_counter()
            await store.create(prefix + b"k%06d" % i, VALUE)
            await within(all_in)
            if i:
                samples.append((counter.last - start) * 1000.0)
        return samples
    finally:
        for w in watches:
            w.cancel()


async def measure_store(
    name: str, store: Store, settings: Settings, gateway: Any | None, figures: Figures
) -> None:
    """Every store-layer measurement on ``store`` (and the gateway reference for etcd)."""
    base = b"/registry/events/bench-" + name.encode() + b"-%d/" % os.getpid()
    etcd = gateway is not None

    async def put_ref(i: int, conc: int) -> None:
        assert gateway is not None
        await gateway.put(base + b"gateway-c%d/%08d" % (conc, i), VALUE)

    say(f"[{name}] creates/s, concurrency 16")
    if gateway is not None:
        figures.gateway_16 = await rate(lambda i: put_ref(i, 16), 16, settings.duration)
    figures.creates_16 = await rate(
        lambda i: store.create(base + b"c16/%08d" % i, VALUE), 16, settings.duration
    )
    say(f"[{name}] creates/s, concurrency 1")
    if gateway is not None:
        figures.gateway_1 = await rate(lambda i: put_ref(i, 1), 1, settings.duration)
    figures.creates_1 = await rate(
        lambda i: store.create(base + b"c1/%08d" % i, VALUE), 1, settings.duration
    )

    say(f"[{name}] gets/s")
    keys = [kv.key for kv in (await store.range(base + b"c16/", limit=2000)).kvs]
    figures.gets_16 = await rate(lambda i: store.get(keys[i % len(keys)]), 16, settings.duration)

    say(f"[{name}] range of {RANGE_KEYS} keys")
    rprefix = base + b"range/"
    await rate_fixed(lambda i: store.create(rprefix + b"%08d" % i, VALUE), RANGE_KEYS, 16)
    assert (await store.count(rprefix)) == RANGE_KEYS
    figures.ranges_1 = await rate(lambda i: store.range(rprefix), 1, settings.duration)

    from twisted.internet import reactor

    cacher = Cacher(store, [rprefix, base + b"fan-cacher/"], reactor)
    await cacher.start()
    try:
        await within(cacher.ready)
        listed = await cacher.list_cached(rprefix)
        assert len(listed.kvs) == RANGE_KEYS
        figures.lists_cached_1 = await rate(
            lambda i: cacher.list_cached(rprefix), 1, settings.duration
        )
        say(f"[{name}] 1 change -> {WATCHERS} watchers on the store")
        figures.fanout_store = await fan_out(
            store, store, base + b"fan-store/", settings.trials, etcd
        )
        say(f"[{name}] 1 change -> {WATCHERS} watchers through the Cacher")
        figures.fanout_cacher = await fan_out(
            store, cacher, base + b"fan-cacher/", settings.trials, etcd
        )
    finally:
        await cacher.stop()


async def rate_fixed(op: Callable[[int], Awaitable[Any]], n: int, concurrency: int) -> None:
    """Run ``op(0..n-1)`` with ``concurrency`` workers."""
    counter = iter(range(n))

    async def worker() -> None:
        for i in counter:
            await op(i)

    await defer.gatherResults(
        [defer.ensureDeferred(worker()) for _ in range(concurrency)], consumeErrors=True
    )


# -- etcd ---------------------------------------------------------------------------------------


def load_etcdserver() -> Any:
    """tests/storage/etcdserver.py, imported by path (the tests' etcd launcher)."""
    path = REPO / "tests" / "storage" / "etcdserver.py"
    spec = importlib.util.spec_from_file_location("_bench_etcdserver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@implementer(IBodyProducer)
class _Body:
    """A request body written at once (as the etcd3 backend's gateway client does)."""

    def __init__(self, body: bytes) -> None:
        self._body = body
        self.length = len(body)

    def startProducing(self, consumer: Any) -> Deferred[None]:
        consumer.write(self._body)
        return defer.succeed(None)

    def pauseProducing(self) -> None:
        pass

    def resumeProducing(self) -> None:
        pass

    def stopProducing(self) -> None:
        pass


class GatewayPut:
    """Raw puts through etcd's JSON gateway: the reference rate for the etcd3 backend."""

    def __init__(self, url: str) -> None:
        from twisted.internet import reactor

        self._url = (url + "/v3/kv/put").encode()
        self._pool = HTTPConnectionPool(reactor, persistent=True)
        self._pool.maxPersistentPerHost = 64
        self._agent = Agent(reactor, pool=self._pool)
        self._headers = Headers({b"Content-Type": [b"application/json"]})

    async def put(self, key: bytes, value: bytes) -> None:
        body = orjson.dumps(
            {"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode()}
        )
        response = await self._agent.request(b"POST", self._url, self._headers, _Body(body))
        content = await treq.content(response)
        if response.code != 200:
            raise RuntimeError(f"etcd gateway answered {response.code}: {content[:200]!r}")

    def close(self) -> Deferred[None]:
        return self._pool.closeCachedConnections()


# -- runs ---------------------------------------------------------------------------------------


async def run_sqlite(settings: Settings, tmp: Path) -> Figures:
    from twisted.internet import reactor

    from apiserver.storage.sqlite import SqliteStore

    figures = Figures()
    store = SqliteStore(str(tmp / "store.db"), reactor=reactor, compaction_interval=0)
    await store.start()
    try:
        await measure_store("sqlite", store, settings, None, figures)
    finally:
        await store.stop()
    return figures


async def run_etcd(settings: Settings, tmp: Path) -> Figures:
    from twisted.internet import reactor

    from apiserver.storage.etcd3 import Etcd3Store

    figures = Figures()
    server = load_etcdserver().EtcdServer(str(tmp / "etcd" / "data"))
    atexit.register(server.stop)  # also on an interrupted run
    say(f"starting etcd on {server.client_url}")
    server.start()
    store = Etcd3Store([server.client_url], reactor, compaction_interval=0)
    gateway = GatewayPut(server.client_url)
    try:
        await store.start()
        await measure_store("etcd3", store, settings, gateway, figures)
    finally:
        await store.stop()
        await gateway.close()
        server.stop()
    return figures


# -- report -------------------------------------------------------------------------------------


def pct(samples: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``samples``."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def filesystem_of(path: Path) -> str:
    """The type of the filesystem ``path`` is on (from /proc/mounts), for the machine line:
    fsync costs differ by orders of magnitude between tmpfs, ext4 and network disks."""
    best, kind = "", "?"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return kind
    target = str(path.resolve())
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1]
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def machine(tmp: Path) -> str:
    etcd_version = "not installed"
    if shutil.which("etcd"):
        out = subprocess.run(
            ["etcd", "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout
        etcd_version = out.splitlines()[0].removeprefix("etcd Version: ") if out else "?"
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"nproc {os.cpu_count()}{f' ({cpu})' if cpu else ''}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"SQLite {sqlite3.sqlite_version}, etcd {etcd_version}; data on "
        f"{filesystem_of(tmp)} ({tmp.parent})"
    )


def rate_cell(value: float) -> str:
    return f"{value:,.0f}"


def latency_cell(samples: list[float]) -> str:
    return f"{pct(samples, 0.5):.1f} / {pct(samples, 0.99):.1f}"


def ok(met: bool) -> str:
    return "yes" if met else "**no**"


def report(
    sq: Figures | None, et: Figures | None, settings: Settings, quick: bool, tmp: Path
) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    na = "n/a"

    def cell(f: Figures | None, fn: Callable[[Figures], str]) -> str:
        return fn(f) if f is not None else na

    rows = [
        (
            "creates/s, concurrency 16",
            cell(sq, lambda f: rate_cell(f.creates_16)),
            cell(et, lambda f: rate_cell(f.creates_16)),
            cell(et, lambda f: rate_cell(f.gateway_16) + " puts/s"),
        ),
        (
            "creates/s, concurrency 1",
            cell(sq, lambda f: rate_cell(f.creates_1)),
            cell(et, lambda f: rate_cell(f.creates_1)),
            cell(et, lambda f: rate_cell(f.gateway_1) + " puts/s"),
        ),
        (
            "gets/s, concurrency 16",
            cell(sq, lambda f: rate_cell(f.gets_16)),
            cell(et, lambda f: rate_cell(f.gets_16)),
            "",
        ),
        (
            f"range of {RANGE_KEYS} keys: ranges/s (ms each)",
            cell(sq, lambda f: f"{rate_cell(f.ranges_1)} ({1000 / f.ranges_1:.2f})"),
            cell(et, lambda f: f"{rate_cell(f.ranges_1)} ({1000 / f.ranges_1:.2f})"),
            "",
        ),
        (
            f"Cacher list_cached of {RANGE_KEYS} keys: lists/s (ms each)",
            cell(sq, lambda f: f"{rate_cell(f.lists_cached_1)} ({1000 / f.lists_cached_1:.2f})"),
            cell(et, lambda f: f"{rate_cell(f.lists_cached_1)} ({1000 / f.lists_cached_1:.2f})"),
            "",
        ),
        (
            f"1 change -> {WATCHERS:,} store watches: p50 / p99 ms",
            cell(sq, lambda f: latency_cell(f.fanout_store)),
            cell(et, lambda f: latency_cell(f.fanout_store)),
            "",
        ),
        (
            f"1 change -> {WATCHERS:,} watches through the Cacher: p50 / p99 ms",
            cell(sq, lambda f: latency_cell(f.fanout_cacher)),
            cell(et, lambda f: latency_cell(f.fanout_cacher)),
            "",
        ),
    ]
    lines = [
        "## Store layer (`bench/store_bench.py`)",
        "",
        f"Run {now}, `python bench/store_bench.py{' --quick' if quick else ''}` "
        f"({settings.duration:g} s per rate, {settings.trials} changes per fan-out; "
        f"values of {len(VALUE)} bytes).",
        f"Machine: {machine(tmp)}.",
        "",
        "| Measurement | SQLite (embedded) | etcd3 backend | etcd gateway (reference) |",
        "|---|---:|---:|---:|",
        *[f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows],
        "",
        "Targets:",
        "",
        "| Target | Measured | Ratio to target | Met |",
        "|---|---:|---:|---|",
    ]
    if et is not None:
        for conc, mine, ref in (
            (16, et.creates_16, et.gateway_16),
            (1, et.creates_1, et.gateway_1),
        ):
            ratio = mine / ref if ref else 0.0
            lines.append(
                f"| etcd3 creates >= {TARGET_GATEWAY_RATIO} x gateway puts, concurrency {conc} "
                f"| {rate_cell(mine)} vs {rate_cell(ref)}/s = {ratio:.2f} x "
                f"| {ratio / TARGET_GATEWAY_RATIO:.2f} | {ok(ratio >= TARGET_GATEWAY_RATIO)} |"
            )
    if sq is not None:
        lines.append(
            f"| embedded creates >= {TARGET_EMBEDDED_CREATES:,.0f}/s (concurrency 16) "
            f"| {rate_cell(sq.creates_16)}/s "
            f"| {sq.creates_16 / TARGET_EMBEDDED_CREATES:.2f} "
            f"| {ok(sq.creates_16 >= TARGET_EMBEDDED_CREATES)} |"
        )
    for label, f in (("SQLite", sq), ("etcd3", et)):
        if f is None:
            continue
        p99 = pct(f.fanout_cacher, 0.99)
        lines.append(
            f"| 1 change -> {WATCHERS:,} watchers within {TARGET_FANOUT_MS:g} ms "
            f"(p99, Cacher, {label}) | {p99:.1f} ms "
            f"| {TARGET_FANOUT_MS / p99 if p99 else float('inf'):.1f} "
            f"| {ok(p99 <= TARGET_FANOUT_MS)} |"
        )
    lines += [
        "",
        "Ratio to target: measured / target for rates, target / measured for latencies "
        "(>= 1 means met). Fan-out time runs from issuing the write until the last of the "
        f"{WATCHERS:,} callbacks has the change; store watches on etcd are {WATCHERS:,} "
        "gateway streams, the Cacher uses one.",
    ]
    return "\n".join(lines)


def write_results(path: Path, section: str) -> None:
    """Put ``section`` between the markers of ``path``, keeping everything else."""
    block = f"{BEGIN}\n{section}\n{END}"
    if path.exists():
        text = path.read_text()
        if BEGIN in text and END in text:
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            text = head + block + tail
        else:
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    else:
        text = (
            "# Benchmark results\n\n"
            "Written by the scripts in `bench/` (see `bench/README.md`); each script owns the "
            "section between its markers.\n\n" + block + "\n"
        )
    path.write_text(text)


# -- main ---------------------------------------------------------------------------------------


async def run(args: argparse.Namespace) -> str:
    settings = QUICK if args.quick else FULL
    tmp = Path(tempfile.mkdtemp(prefix="store-bench-"))
    try:
        sq = et = None
        if args.backend in ("all", "sqlite"):
            sq = await run_sqlite(settings, tmp)
        if args.backend in ("all", "etcd3"):
            if shutil.which("etcd") is None:
                say("etcd is not installed (apt-get install etcd-server): skipping etcd3")
            else:
                et = await run_etcd(settings, tmp)
        return report(sq, et, settings, args.quick, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="short run (about 15 s)")
    parser.add_argument("--backend", choices=("all", "sqlite", "etcd3"), default="all")
    parser.add_argument("--results", type=Path, default=RESULTS, help="Markdown file to update")
    parser.add_argument("--no-write", action="store_true", help="only print the table")
    args = parser.parse_args(argv)
    from twisted.internet import reactor

    started = time.monotonic()
    outcome: dict[str, Any] = {}

    def finished(result: Any) -> None:
        outcome["result"] = result
        reactor.stop()

    def begin() -> None:
        d = defer.ensureDeferred(run(args))
        d.addTimeout(RUN_LIMIT, reactor)
        d.addBoth(finished)

    reactor.callWhenRunning(begin)
    reactor.run()
    result = outcome.get("result")
    if not isinstance(result, str):
        if isinstance(result, Failure):
            result.printTraceback(file=sys.stderr)
        say("benchmark failed")
        return 1
    print(result)
    if not args.no_write:
        write_results(args.results, result)
        say(f"wrote {args.results}")
    say(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
