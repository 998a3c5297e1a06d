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
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
VALUE = b"x" * 600  # about a stored core/v1 Event


def child(args: argparse.Namespace) -> int:
    """One writer process: wait for the common start, create keys, print the count."""
    sys.path.insert(0, str(REPO / "src"))
    from twisted.internet import defer, task

    async def run(reactor: Any) -> None:
        if args.backend == "etcd3":
            from apiserver.storage.etcd3 import Etcd3Store

            store: Any = Etcd3Store([args.target], reactor, compaction_interval=0)
        else:
            from apiserver.storage.sqlite import SqliteStore

            store = SqliteStore(
                args.target,
                reactor,
                worker=(args.index, args.count) if args.count > 1 else None,
                compaction_interval=0,
                sweep_interval=0,
                writer=args.writer,
            )
        await store.start()
        try:
            delay = args.start_at - time.time()
            if delay > 0:
                await task.deferLater(reactor, delay, lambda: None)
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


def measure(args: argparse.Namespace, count: int, tmp: Path, etcd: Any) -> tuple[float, int]:
    """Total creates/s of ``count`` writer processes (and the creates made)."""
    target = etcd.client_url if etcd is not None else str(tmp / f"n{count}" / "store.db")
    if etcd is None:
        Path(target).parent.mkdir(parents=True, exist_ok=True)
    start_at = time.time() + 2.0 + 0.3 * count  # every process opened its store by then
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--child",
                f"--backend={args.backend}",
                f"--writer={args.writer}",
                f"--target={target}",
                f"--index={i}",
                f"--count={count}",
                f"--seconds={args.seconds}",
                f"--concurrency={args.concurrency}",
                f"--start-at={start_at}",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(count)
    ]
    total = 0
    longest = 0.0
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=args.seconds + 60)
            if proc.returncode != 0:
                raise RuntimeError(f"writer process exited with {proc.returncode}")
            figures = json.loads(out.strip().splitlines()[-1])
            total += figures["creates"]
            longest = max(longest, figures["seconds"])
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(5)
    return total / longest if longest else 0.0, total


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
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    parser.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
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
                rate, total = measure(args, count, tmp, etcd)
                base = base or rate
                rows.append((count, rate, total))
                print(f"{count} processes: {rate:,.0f} creates/s ({total} creates)", flush=True)
        finally:
            if etcd is not None:
                etcd.stop()
    print(
        f"\n| writer processes ({args.backend}, writer {args.writer}, {os.cpu_count()} cores, "
        f"concurrency "
        f"{args.concurrency} each) | creates/s | per process | vs 1 |"
    )
    print("|---|---|---|---|")
    for count, rate, _ in rows:
        ratio = rate / base if base else 0.0
        print(f"| {count} | {rate:,.0f} | {rate / count:,.0f} | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
