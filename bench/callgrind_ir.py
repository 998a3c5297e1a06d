"""Instructions per request in the real daemon, counted by valgrind's callgrind.

Usage: ``python bench/callgrind_ir.py [--kind create|get] [--n 200] [--tree DIR]
[--threads] [--clients N] [--cache-sim] [--ceiling] [-- extra daemon flags]``

Why: on a shared machine wall-clock rates move by tens of percent from one minute to the
next, while the instructions a request executes do not (within about 1 %: the reactor's
periodic timers still fire by wall time, and valgrind slows the daemon about fifty times).
This starts ``twistd apiserver`` of ``--tree`` (this checkout by default) under callgrind,
as ``api_bench.py`` starts it, warms it up with 50 requests on one keep-alive HTTPS
connection, zeroes the counters (``callgrind_control -z``), makes ``--n`` requests, dumps
the counters and prints instructions per request: a create is ``POST`` of the Event
``api_bench.py`` posts (``generateName``), a get reads one event. ``--threads`` counts each
thread apart (the reactor thread first, then the SQLite writer). ``--clients N`` makes the
counted requests from N concurrent connections (h2load, as the benchmark does: per-turn
costs are then shared, and costs that grow with concurrency show; the count then includes
the N TLS handshakes). ``--cache-sim`` adds valgrind's cache and branch-predictor
simulation and prints their misses per request (valgrind's model of the caches, not the
machine's counters, which a VM may not expose). ``--ceiling`` measures
``bench/ceiling_server.py`` of the same tree instead (a get only; the extra flags after
``--`` are the ceiling's, e.g. ``--lean-tls``), to tell the shared TLS and Twisted cost
from the daemon's own. Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import glob
import http.client
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_bench as ab


def _events(prefix: str) -> dict[str, int]:
    """Every counted event (``Ir`` and, with ``--cache-sim``, the cache and branch misses)
    summed over the first explicit dump of each thread."""
    sums: dict[str, int] = {}
    for name in sorted(glob.glob(prefix + ".1*")):
        names: list[str] = []
        with open(name, errors="replace") as f:
            for line in f:
                if line.startswith("events:"):
                    names = line.split()[1:]
                elif line.startswith(("summary:", "totals:")) and names:
                    for event, value in zip(names, line.split()[1:], strict=False):
                        sums[event] = sums.get(event, 0) + int(value)
                    break
    return sums


#: valgrind's names of the simulated misses (``--cache-sim``, ``--branch-sim``).
MISSES = {
    "I1mr": "L1 instruction misses",
    "D1mr": "L1 data read misses",
    "D1mw": "L1 data write misses",
    "ILmr": "last-level instruction misses",
    "DLmr": "last-level data read misses",
    "DLmw": "last-level data write misses",
    "Bcm": "mispredicted conditional branches",
    "Bim": "mispredicted indirect branches",
}


def _totals(prefix: str) -> list[tuple[str, int]]:
    out = []
    for name in sorted(glob.glob(prefix + ".1*")):  # the first explicit dump (per thread)
        with open(name, errors="replace") as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    out.append((name, int(line.split()[1])))
                    break
    return out


def _h2load(args: argparse.Namespace, port: int, work: Path) -> None:
    """The counted requests from ``--clients`` concurrent HTTP/1.1 connections (h2load)."""
    base = f"https://127.0.0.1:{port}"
    cmd = ["h2load", "--h1", "-c", str(args.clients), "-m", "1", "-t", "1", "-n", str(args.n)]
    if args.ceiling:
        cmd.append(base + "/")
    elif args.kind == "get":
        cmd.append(base + ab.events_path("bench", "e1"))
    else:
        body = work / "body.json"
        body.write_bytes(ab.event_body("bench"))
        cmd += ["-d", str(body), "-H", "Content-Type: application/json"]
        cmd.append(base + ab.events_path("bench"))
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900).stdout
    ok = f"{args.n} 2xx" in out
    if not ok:
        raise SystemExit(f"h2load: not every request answered 2xx:\n{out[-1500:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("create", "get"), default="create")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--tree", type=Path, default=ab.REPO)
    parser.add_argument("--threads", action="store_true")
    parser.add_argument(
        "--cache-sim",
        action="store_true",
        help="also simulate the caches and branch predictors (valgrind's model, not the "
        "machine's) and print their misses per request",
    )
    parser.add_argument(
        "--clients",
        type=int,
        default=0,
        help="make the counted requests with h2load --h1 -c CLIENTS (concurrent, as the "
        "benchmark does) instead of one connection",
    )
    parser.add_argument(
        "--ceiling", action="store_true", help="measure bench/ceiling_server.py (get only)"
    )
    parser.add_argument("extra", nargs="*", help="daemon (or ceiling) flags (after --)")
    args = parser.parse_args()
    if args.ceiling and args.kind != "get":
        parser.error("--ceiling answers gets only")
    work = Path(tempfile.mkdtemp(prefix="callgrind-ir-"))
    port = ab.free_port()
    prefix = str(work / "callgrind.out")
    valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={prefix}"]
    if args.threads:
        valgrind.append("--separate-threads=yes")
    if args.cache_sim:
        valgrind += ["--cache-sim=yes", "--branch-sim=yes"]
    env = ab.source_env(args.tree)
    env["PYTHONHASHSEED"] = "0"
    with open(work / "log", "wb") as log:
        if args.ceiling:
            server = [
                sys.executable,
                str(args.tree / "bench" / "ceiling_server.py"),
                f"--port={port}",
                f"--cert-dir={work / 'certs'}",
                *args.extra,
            ]
        else:
            server = ab.daemon_command(port, work, extra=args.extra)
        proc = subprocess.Popen(
            valgrind + server,
            env=env,
            cwd=work,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        context = ab.unverified_tls()
        deadline = time.monotonic() + 600
        while True:
            try:
                conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=120)
                conn.request("GET", "/readyz")
                reply = conn.getresponse()
                reply.read()
                if reply.status == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit((work / "log").read_text()[-3000:])
            time.sleep(1)
        if not args.ceiling:
            conn.request(
                "POST",
                ab.events_path("bench"),
                body=ab.event_body("bench", "e1"),
                headers={"Content-Type": "application/json"},
            )
            reply = conn.getresponse()
            reply.read()
            if reply.status != 201:
                raise SystemExit(f"setup create: {reply.status}")

        def one() -> None:
            if args.kind == "get":
                conn.request(
                    "GET", ab.events_path("bench", "e1"), headers={"Accept": "application/json"}
                )
            else:
                conn.request(
                    "POST",
                    ab.events_path("bench"),
                    body=ab.event_body("bench"),
                    headers={"Content-Type": "application/json"},
                )
            answer = conn.getresponse()
            answer.read()
            if answer.status not in (200, 201):
                raise SystemExit(f"{args.kind}: {answer.status}")

        for _ in range(50):
            one()
        subprocess.run(["callgrind_control", "-z", str(proc.pid)], capture_output=True)
        if args.clients:
            _h2load(args, port, work)
        else:
            for _ in range(args.n):
                one()
        subprocess.run(["callgrind_control", "-d", str(proc.pid)], capture_output=True)
    finally:
        proc.terminate()
        proc.wait(120)
    dumped = [(name, total) for name, total in _totals(prefix) if total]
    for name, total in dumped:
        if len(dumped) > 1:
            print(f"  {os.path.basename(name)}: {total / args.n:,.0f}")
    total = sum(t for _, t in dumped)
    what = "ceiling get" if args.ceiling else args.kind
    print(f"{what}: {total / args.n:,.0f} instructions/request over {args.n}")
    if args.cache_sim:
        sums = _events(prefix)
        for event, label in MISSES.items():
            if event in sums:
                print(f"  {label}: {sums[event] / args.n:,.0f}/request")


if __name__ == "__main__":
    main()
