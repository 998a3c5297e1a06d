"""Instructions per request in the real daemon, counted by valgrind's callgrind.

Usage: ``python bench/callgrind_ir.py [--kind create|get] [--n 200] [--tree DIR]
[--threads] [-- extra daemon flags]``

Why: on a shared machine wall-clock rates move by tens of percent from one minute to the
next, while the instructions a request executes do not (within about 1 %: the reactor's
periodic timers still fire by wall time, and valgrind slows the daemon about fifty times).
This starts ``twistd apiserver`` of ``--tree`` (this checkout by default) under callgrind,
as ``api_bench.py`` starts it, warms it up with 50 requests on one keep-alive HTTPS
connection, zeroes the counters (``callgrind_control -z``), makes ``--n`` requests, dumps
the counters and prints instructions per request: a create is ``POST`` of the Event
``api_bench.py`` posts (``generateName``), a get reads one event. ``--threads`` counts each
thread apart (the reactor thread first, then the SQLite writer). ``--ceiling`` measures
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


def _totals(prefix: str) -> list[tuple[str, int]]:
    out = []
    for name in sorted(glob.glob(prefix + ".1*")):  # the first explicit dump (per thread)
        with open(name, errors="replace") as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    out.append((name, int(line.split()[1])))
                    break
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("create", "get"), default="create")
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--tree", type=Path, default=ab.REPO)
    parser.add_argument("--threads", action="store_true")
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


if __name__ == "__main__":
    main()
