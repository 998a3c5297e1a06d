#!/usr/bin/env python3
"""Where the reactor's time goes in the real daemon, stage by stage, under h2load.

Usage: ``python bench/stage_times.py [--kind create|get] [--seconds 8] [--clients 16]
[--tree DIR] [-- extra daemon flags]``

Why: py-spy samples say which Python frames are on the stack, but on this machine a
sampler running beside a server that shares two cores with its load generator moves the
figures it measures (a 1 kHz py-spy once put 18 % of the reactor's samples in one
``os.write``), and callgrind counts instructions, not the time they take under load
(bench/RESULTS.md: the daemon's instructions run slower per request than the same code in
process). This times the stages themselves: ``twistd apiserver`` (of ``--tree``, started
as ``api_bench.py`` starts it) runs with a shim that wraps a fixed list of methods in a
``perf_counter_ns`` accumulator (calls and total time each, on the reactor thread) before
twistd starts; h2load then makes the requests ``api_bench.py`` makes (``--kind create``:
POSTs of its Event with ``generateName``; ``get``: one event), and after a warm-up the
script resets the counters, waits ``--seconds``, and prints, per request: the reactor
thread's CPU time, then each stage's time, nested stages inside the ones that call them
(``Connection.doRead`` holds the read of a request up to the store's hand-over; the
writer's report, ``WriterProcess.outReceived``, holds the answers). Each wrapper adds
about half a microsecond a call, so the total is a little above the unwrapped daemon's.
Figures of 2026-11-26 are in bench/RESULTS.md ("Where a create's reactor time goes").
"""

from __future__ import annotations

import argparse
import ast
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_bench as ab

#: (module, class, method) of every stage timed, outermost first.
STAGES = (
    ("twisted.internet.tcp", "Connection", "doRead"),
    ("apiserver.http.h1", "H1Channel", "dataReceived"),
    ("apiserver.http.app", "App", "handle"),
    ("apiserver.auth.filter", "Authentication", "__call__"),
    ("apiserver.auth.filter", "Impersonation", "__call__"),
    ("apiserver.flowcontrol.apf", "PriorityAndFairness", "__call__"),
    ("apiserver.auth.filter", "Authorization", "__call__"),
    ("apiserver.audit.filter", "AuditStage", "__call__"),
    ("apiserver.http.app", "App", "_dispatch"),
    ("apiserver.api.events.rest", "EventsAPI", "handle"),
    ("apiserver.storage.sqlite.store", "SqliteStore", "_hand_over"),
    ("apiserver.storage.sqlite.writer_process", "WriterProcess", "send"),
    ("apiserver.storage.sqlite.writer_process", "WriterProcess", "outReceived"),
    ("apiserver.storage.sqlite.store", "SqliteStore", "_batch_done"),
    ("apiserver.storage.sqlite.store", "SqliteStore", "_answer"),
    ("apiserver.api.events.rest", "EventsAPI", "_created"),
    ("apiserver.http.app", "App", "_done"),
    ("apiserver.http.h1request", "H1Request", "write"),
    ("apiserver.service.eagertcp", "EagerServer", "write"),
    ("apiserver.http.h1request", "H1Request", "finish"),
)

#: Run in the daemon's interpreter (``python -c``) before twistd's own ``run()``: wraps the
#: stages, and answers two real-time signals: reset the counters, and write them (with the
#: reactor thread's CPU time) to the file named by the environment.
SHIM = """
import importlib, os, signal, time
_out = os.environ.pop("STAGE_TIMES_OUT")
_acc = {}
_clock = time.perf_counter_ns
def _wrap(name, fn):
    def timed(*args, **kwargs):
        start = _clock()
        try:
            return fn(*args, **kwargs)
        finally:
            spent = _clock() - start
            entry = _acc.get(name)
            if entry is None:
                _acc[name] = [1, spent]
            else:
                entry[0] += 1
                entry[1] += spent
    timed.__name__, timed.__qualname__ = fn.__name__, fn.__qualname__
    return timed
for _module, _cls, _method in STAGES:
    _owner = getattr(importlib.import_module(_module), _cls)
    setattr(_owner, _method, _wrap(_cls + "." + _method, getattr(_owner, _method)))
def _reset(*_):
    _acc.clear()
    _acc["cpu"] = [0, -time.thread_time_ns()]
def _dump(*_):
    cpu = dict(_acc)
    cpu["cpu"] = [0, _acc.get("cpu", [0, 0])[1] + time.thread_time_ns()]
    with open(_out, "w") as f:
        f.write(repr({k: tuple(v) for k, v in cpu.items()}))
signal.signal(signal.SIGRTMIN + 1, _reset)
signal.signal(signal.SIGRTMIN + 2, _dump)
from twisted.scripts.twistd import run
run()
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("create", "get"), default="create")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warm-up", type=float, default=3.0)
    parser.add_argument("--clients", type=int, default=ab.H1_CLIENTS)
    parser.add_argument("--tree", type=Path, default=ab.REPO)
    parser.add_argument("extra", nargs="*", help="daemon flags (after --)")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="stage-times-"))
    out = workdir / "stages.txt"
    procs = ab.Processes()
    try:
        port = ab.free_port()
        command = ab.daemon_command(port, workdir, extra=args.extra)
        shim = f"STAGES = {STAGES!r}\n" + SHIM
        command = [sys.executable, "-c", shim, *command[1:]]
        env = {**ab.source_env(args.tree.resolve()), "STAGE_TIMES_OUT": str(out)}
        log_path = workdir / "daemon.log"
        with open(log_path, "ab") as log:
            proc = procs.start(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=workdir)
        server = ab.Server("apiserver", port, proc, log_path)
        server.wait_ready("/readyz")
        ab.prepare_data(server)
        body = workdir / "body.json"
        body.write_bytes(ab.event_body(ab.GET_NS))
        load = ["h2load", "--h1", "-c", str(args.clients), "-m", "1", "-t", "1"]
        load += ["-D", str(int(args.warm_up + args.seconds + 2))]
        if args.kind == "create":
            load += ["-d", str(body), "-H", "content-type: application/json"]
            load.append(server.base + ab.events_path(ab.GET_NS))
        else:
            load.append(server.base + ab.events_path(ab.GET_NS, ab.GET_NAME))
        h2load = procs.start(load, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(args.warm_up)
        os.kill(proc.pid, signal.SIGRTMIN + 1)
        started = time.monotonic()
        time.sleep(args.seconds)
        os.kill(proc.pid, signal.SIGRTMIN + 2)
        wall = time.monotonic() - started
        output, _ = h2load.communicate()
        deadline = time.monotonic() + 5
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        stats = ast.literal_eval(out.read_text())
    finally:
        procs.stop_all()
    rate = next((line for line in output.splitlines() if "finished in" in line), "")
    requests = stats.get("App.handle", (0, 0))[0] or 1
    cpu_ns = stats.pop("cpu")[1]
    print(f"h2load: {rate.strip()}")
    print(
        f"{requests} requests in {wall:.1f} s ({requests / wall:,.0f}/s); reactor thread CPU "
        f"{cpu_ns / 1e9 / wall:.2f} cores, {cpu_ns / requests / 1e3:.1f} us a request"
    )
    print(f"{'stage':42s} {'calls':>8s} {'us/request':>11s} {'us/call':>8s}")
    for _module, cls, method in STAGES:
        name = f"{cls}.{method}"
        calls, spent = stats.get(name, (0, 0))
        if calls:
            print(
                f"{name:42s} {calls:8d} {spent / requests / 1e3:11.1f} {spent / calls / 1e3:8.1f}"
            )


if __name__ == "__main__":
    main()
