#!/usr/bin/env python3
"""Store commit rate under N concurrent writer processes (issue 19, ``--workers``).

Usage: ``python bench/writers_bench.py [--processes 1,2,4] [--seconds 5] [--concurrency 16]
[--backend sqlite|etcd3] [--writer process|thread]``

What is shared when a server runs several workers decides how far it scales with cores: on
the embedded store every worker commits to the one SQLite file, one transaction at a time
(the write lock beside it; readers run in parallel under WAL), so creates scale only until
the file's commit rate (group commit: one fsync for every request queued meanwhile) is
reached; on etcd every write goes through the leader's raft log, in the same way. This
measures that ceiling directly: N processes, each one worker's store
(``SqliteStore(worker=(i, N))`` or an ``Etcd3Store``) creating keys at ``--concurrency`` for
``--seconds``, all started together; the table gives the total creates/s per N, the
per-process rate and the speed-up over one process. No HTTP, so the figure is the store's,
not the server's.

``--follow`` (embedded store) adds one more worker that writes nothing: its store and a
watch cache (``Cacher``, as a worker of the server has) follow what the writers commit, and
it reports its CPU time over the run. Divided by the creates, that is what each write costs
every *other* worker of a server, whoever made it: the part of a create's cost that grows
with the number of workers (the estimate of bench/RESULTS.md for 8 and 16 cores).

Only loopback traffic and a temporary directory; every process (and the etcd this script
starts for ``--backend etcd3``) is stopped before it exits. It prints a Markdown table and
writes nothing: the lead copies figures into bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))  # the tree's own apiserver, in every process
VALUE = b"x" * 600  # about a stored core/v1 Event


def sqlite_store(args: argparse.Namespace, reactor: Any) -> Any:
    """One worker's embedded store (no maintenance: only the writes are measured)."""
    from apiserver.storage.sqlite import SqliteStore

    return SqliteStore(
        args.target,
        reactor,
        worker=(args.index, args.count) if args.count > 1 else None,
        compaction_interval=0,
        sweep_interval=0,
        writer=args.writer,
    )


async def common_start(args: argparse.Namespace, reactor: Any) -> None:
    """Wait for ``--start-at``, the moment every process of the measurement begins."""
    from twisted.internet import task

    delay = args.start_at - time.time()
    if delay > 0:
        await task.deferLater(reactor, delay, lambda: None)


def follower(args: argparse.Namespace) -> int:
    """A worker that writes nothing: its store and watch cache follow the writers' commits;
    prints the events it saw and its CPU seconds from the common start to the end."""
    from twisted.internet import defer, task

    from apiserver.storage.cacher import Cacher

    async def run(reactor: Any) -> None:
        store = sqlite_store(args, reactor)
        await store.start()
        cacher = Cacher(store, [b"/bench/"], reactor)
        seen = 0

        def count(_event: Any) -> None:
            nonlocal seen
            seen += 1

        try:
            await cacher.start()
            await cacher.ready
            cacher.watch(b"/bench/", 0, count)
            await common_start(args, reactor)
            began = time.process_time()
            # The writers' run, then time to take in their last commits.
            await task.deferLater(reactor, args.seconds + 1.5, lambda: None)
            print(json.dumps({"events": seen, "cpu": time.process_time() - began}))
        finally:
            await cacher.stop()
            await store.stop()

    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))
    return 0


def child(args: argparse.Namespace) -> int:
    """One writer process: wait for the common start, create keys, print the count."""
    from twisted.internet import defer, task

    async def run(reactor: Any) -> None:
        if args.backend == "etcd3":
            from apiserver.storage.etcd3 import Etcd3Store

            store: Any = Etcd3Store([args.target], reactor, compaction_interval=0)
        else:
            store = sqlite_store(args, reactor)
        await store.start()
        try:
            await common_start(args, reactor)
            counter = itertools.count()
            done = 0
            deadline = time.monotonic() + args.seconds

            async def writer() -> None:
                nonlocal done
                while time.monotonic() < deadline:
                    # By measurement too: one etcd serves every measurement of a run.
                    key = f"/bench/{args.count}/{args.index}/{next(counter):08d}".encode()
                    await store.create(key, VALUE)
                    done += 1

            began = time.monotonic()
            await defer.gatherResults(
                [defer.ensureDeferred(writer()) for _ in range(args.concurrency)],
                consumeErrors=True,
            )
            print(json.dumps({"creates": done, "seconds": time.monotonic() - began}))
        finally:
            await store.stop()

    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))
    return 0


@dataclass
class Measured:
    """One measurement: total creates/s, the creates, and (``--follow``) the follower's
    events and CPU seconds."""

    rate: float
    total: int
    followed: int = 0
    follower_cpu: float = 0.0


def measure(args: argparse.Namespace, count: int, tmp: Path, etcd: Any) -> Measured:
    """Total creates/s of ``count`` writer processes (and the creates made)."""
    target = etcd.client_url if etcd is not None else str(tmp / f"n{count}" / "store.db")
    if etcd is None:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
        # As the server's supervisor does before it starts its workers: the schema made
        # once, not by processes racing to make it.
        from apiserver.storage.sqlite import schema

        conn, _, _ = schema.open_writer(target)
        conn.close()
    start_at = time.time() + 2.0 + 0.3 * count  # every process opened its store by then
    workers = count + 1 if args.follow else count

    def start(index: int, role: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [
                sys.executable,
                __file__,
                role,
                f"--backend={args.backend}",
                f"--writer={args.writer}",
                f"--target={target}",
                f"--index={index}",
                f"--count={workers}",
                f"--seconds={args.seconds}",
                f"--concurrency={args.concurrency}",
                f"--start-at={start_at}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )

    procs = [start(i, "--child") for i in range(count)]
    if args.follow:
        procs.append(start(count, "--follower"))
    measured = Measured(0.0, 0)
    longest = 0.0
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=args.seconds + 60)
            if proc.returncode != 0:
                raise RuntimeError(f"a benchmark process exited with {proc.returncode}")
            figures = json.loads(out.strip().splitlines()[-1])
            if "events" in figures:
                measured.followed, measured.follower_cpu = figures["events"], figures["cpu"]
                continue
            measured.total += figures["creates"]
            longest = max(longest, figures["seconds"])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    measured.rate = measured.total / longest if longest else 0.0
    return measured


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Store commit rate under N writer processes.")
    parser.add_argument("--processes", default="1,2,4", help="comma-separated process counts")
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=16, help="creates in flight a process")
    parser.add_argument("--backend", choices=("sqlite", "etcd3"), default="sqlite")
    parser.add_argument(
        "--writer",
        choices=("process", "thread"),
        default="process",
        help="where each store's SQLite writer runs (the server's: process)",
    )
    parser.add_argument(
        "--follow",
        action="store_true",
        help="one more worker follows the commits: its CPU per followed write (sqlite only)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--follower", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if args.follower:
        return follower(args)
    if args.follow and args.backend != "sqlite":
        parser.error("--follow measures the embedded store's change feed: --backend sqlite")
    counts = [int(n) for n in args.processes.split(",") if n]
    etcd = None
    with tempfile.TemporaryDirectory(prefix="writers-bench-") as name:
        tmp = Path(name)
        try:
            if args.backend == "etcd3":
                import api_bench  # this directory: its launcher of the tests' etcd

                etcd = api_bench.start_etcd(tmp / "etcd")
            rows = []
            base = 0.0
            for count in counts:
                m = measure(args, count, tmp, etcd)
                base = base or m.rate
                rows.append((count, m))
                print(f"{count} processes: {m.rate:,.0f} creates/s ({m.total} creates)", flush=True)
        finally:
            if etcd is not None:
                etcd.stop()
    follow = " | follower: events seen | follower: CPU us a write" if args.follow else ""
    print(
        f"\n| writer processes ({args.backend}, writer {args.writer}, {os.cpu_count()} cores, "
        f"concurrency "
        f"{args.concurrency} each) | creates/s | per process | vs 1 |{follow}"
    )
    print("|---|---|---|---|" + ("---|---|" if args.follow else ""))
    for count, m in rows:
        ratio = m.rate / base if base else 0.0
        line = f"| {count} | {m.rate:,.0f} | {m.rate / count:,.0f} | {ratio:.2f}x |"
        if args.follow:
            per = m.follower_cpu / m.total * 1e6 if m.total else 0.0
            line += f" {m.followed:,} of {m.total:,} | {per:.1f} |"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
