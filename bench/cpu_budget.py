#!/usr/bin/env python3
"""How much of the machine a request costs, process by process, with 1 and N workers.

Usage: ``python bench/cpu_budget.py [--kinds create,get] [--workers 1,2] [--rounds 2]
[--seconds 8] [--no-write] [-- extra daemon flags]``

Why: issue 19 asks two workers for 1.5x one worker's requests on a two-core machine that
also runs the load generator. Whether that is reachable is a question of CPU, not only of
code: a second worker can only add what the cores left idle by the first can give. This
runs ``twistd apiserver`` (started as ``api_bench.py`` starts it) with each worker count
side by side, alternating the order round by round as ``ab_bench.py`` does, and during the
measured part of each h2load run (HTTP/1.1, 16 connections; ``create``: POSTs of
``api_bench.py``'s Event; ``get``: one event) it reads from ``/proc`` the CPU time of every
process of the server (the supervisor, each worker, each worker's store writer process),
of h2load, and of the machine (its idle time). It prints, per worker count and kind: the
rate, the CPU microseconds a request in each role, the cores used and left idle, and two
estimates of what N workers can reach against one worker on this machine, if they kept
every core busy:

- *at one worker's cost*: the machine's cores divided by what one worker's request costs
  the whole machine (the server and h2load): N workers that cost nothing more per request
  than one;
- *at N workers' cost*: the same with the CPU a request costs with N workers.

Estimates, not bounds: a process's CPU per request falls when it is busier (more requests
per wake-up: h2load's and the workers' did in the two-worker get runs of 2026-11-26), so
a run can pass the first one; compare the medians of several rounds. Figures go to
``RESULTS.md`` between ``<!-- cpu_budget:begin -->`` and ``<!-- cpu_budget:end -->`` unless
``--no-write``.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_bench as ab

#: Roles a process of the server plays, named from its command line and place in the tree.
ROLES = ("workers", "writers", "supervisor", "h2load")


def children_of(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from the ``ppid`` field of ``/proc/*/stat``)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent:
                found.append(child)
                frontier.append(child)
    return found


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def server_roles(pid: int, workers: int) -> dict[int, str]:
    """The server's processes by role: with one worker the daemon is the worker; with more,
    it is the supervisor and the workers are its children. Writers run
    ``apiserver.storage.sqlite.writer_child``."""
    roles = {pid: "workers" if workers == 1 else "supervisor"}
    for child in children_of(pid):
        roles[child] = "writers" if "writer_child" in command_line(child) else "workers"
    return roles


def idle_seconds() -> float:
    """The machine's idle and iowait time so far, all cores together."""
    with open("/proc/stat") as handle:
        fields = handle.readline().split()
    return (int(fields[4]) + int(fields[5])) / os.sysconf("SC_CLK_TCK")


@dataclass
class Sample:
    """One measured h2load run: requests a second and the CPU seconds of each role."""

    rate: float
    wall: float
    cpu: dict[str, float]
    idle: float

    def us_per_request(self, role: str) -> float:
        return self.cpu.get(role, 0.0) / (self.rate * self.wall) * 1e6

    @property
    def total_us(self) -> float:
        return sum(self.us_per_request(role) for role in ROLES)

    def cores(self, role: str) -> float:
        return self.cpu.get(role, 0.0) / self.wall


@dataclass
class Side:
    workers: int
    server: ab.Server
    samples: dict[str, list[Sample]] = field(default_factory=dict)


def measure(side: Side, kind: str, body: Path, seconds: float, warm_up: float) -> Sample:
    """h2load against the side's server; CPU read at the end of its warm-up and of its run."""
    server = side.server
    load = ["h2load", "--h1", "-c", str(ab.H1_CLIENTS), "-m", str(ab.H1_STREAMS), "-t", "1"]
    load += ["-D", f"{int(seconds * 1000)}ms", "--warm-up-time", f"{int(warm_up * 1000)}ms"]
    if kind == "create":
        load += ["-d", str(body), "-H", "content-type: application/json"]
        load.append(server.base + ab.events_path(ab.GET_NS))
    else:
        load.append(server.base + ab.events_path(ab.GET_NS, ab.GET_NAME))
    h2load = subprocess.Popen(load, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(warm_up)
        roles = server_roles(server.proc.pid, side.workers)
        roles[h2load.pid] = "h2load"
        before = {pid: _cpu(pid) for pid in roles}
        idle_before, started = idle_seconds(), time.monotonic()
        time.sleep(seconds)
        after = {pid: _cpu(pid) for pid in roles}
        idle_after, wall = idle_seconds(), time.monotonic() - started
        output, _ = h2load.communicate(timeout=seconds + warm_up + 30)
    finally:
        if h2load.poll() is None:
            h2load.kill()
            h2load.wait()
    result = ab.parse_h2load(kind, "h1", output)
    if not result.valid:
        raise RuntimeError(f"h2load {kind} on {side.workers} workers: {result.error}\n{output}")
    cpu = dict.fromkeys(ROLES, 0.0)
    for pid, role in roles.items():
        if pid in before and pid in after:
            cpu[role] += after[pid] - before[pid]
    return Sample(result.rps, wall, cpu, idle_after - idle_before)


def _cpu(pid: int) -> float:
    try:
        return ab.read_cpu_seconds(pid)
    except OSError:
        return 0.0


@contextlib.contextmanager
def _removed(path: Path) -> Iterator[None]:
    try:
        yield
    finally:
        shutil.rmtree(path, ignore_errors=True)


def median_sample(samples: list[Sample]) -> Sample:
    """The run with the median rate (its CPU figures belong to it, not to a mix of runs)."""
    ordered = sorted(samples, key=lambda s: s.rate)
    return ordered[(len(ordered) - 1) // 2]


def render(sides: list[Side], kinds: list[str], meta: str) -> str:
    cores = os.cpu_count() or 1
    lines = [
        "## CPU budget per request, 1 and N workers (bench/cpu_budget.py)",
        "",
        meta,
        "",
        "| kind | workers | req/s (rounds) | workers us | writers us | supervisor us "
        "| h2load us | total us | cores used | cores idle |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in kinds:
        for side in sides:
            samples = side.samples[kind]
            m = median_sample(samples)
            rounds = " ".join(f"{s.rate:,.0f}" for s in samples)
            used = sum(m.cores(role) for role in ROLES)
            lines.append(
                f"| {kind} | {side.workers} | {m.rate:,.0f} ({rounds}) "
                + " ".join(f"| {m.us_per_request(role):.0f}" for role in ROLES)
                + f" | {m.total_us:.0f} | {used:.2f} | {m.idle / m.wall:.2f} |"
            )
    lines += [
        "",
        f"What N workers could reach against one worker on these {cores} cores, every core "
        "busy (medians):",
        "",
        "| kind | workers | measured | at one worker's cost | at N workers' cost |",
        "|---|---:|---:|---:|---:|",
    ]
    one = sides[0]
    for kind in kinds:
        base = median_sample(one.samples[kind])
        for side in sides[1:]:
            m = median_sample(side.samples[kind])
            free = cores / (base.total_us * 1e-6) / base.rate
            at_cost = cores / (m.total_us * 1e-6) / base.rate
            lines.append(
                f"| {kind} | {side.workers} | {m.rate / base.rate:.2f} | {free:.2f} "
                f"| {at_cost:.2f} |"
            )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", default="create,get")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--warm-up", type=float, default=2.0)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("extra", nargs="*", help="daemon flags for every side (after --)")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    counts = [int(n) for n in args.workers.split(",") if n]
    if counts[0] != 1 or any(k not in ("create", "get") for k in kinds):
        parser.error("--workers must start with 1; --kinds takes create and get")

    workdir = Path(tempfile.mkdtemp(prefix="cpu-budget-"))
    body = workdir / "body.json"
    body.write_bytes(ab.event_body(ab.GET_NS))
    procs = ab.Processes()
    sides: list[Side] = []
    with ab.running(procs), _removed(workdir):
        for n in counts:
            extra = [f"--workers={n}", *args.extra]
            server = ab.start_daemon(procs, workdir / f"w{n}", extra=extra)
            ab.prepare_data(server)
            sides.append(Side(n, server, {k: [] for k in kinds}))
        for index in range(args.rounds):
            order = sides if index % 2 == 0 else list(reversed(sides))
            for kind in kinds:
                for side in order:
                    sample = measure(side, kind, body, args.seconds, args.warm_up)
                    side.samples[kind].append(sample)
                    print(
                        f"round {index + 1} {kind} {side.workers}w: {sample.rate:,.0f}/s, "
                        f"{sample.total_us:.0f} us a request, "
                        f"idle {sample.idle / sample.wall:.2f} cores",
                        flush=True,
                    )
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    argv = " ".join(sys.argv[1:])
    meta = (
        f"Run {when}, nproc {os.cpu_count()}, Python {platform.python_version()}: "
        f"`python bench/cpu_budget.py {argv}`. {args.rounds} rounds of {args.seconds:g} s "
        f"per kind and worker count, alternating; h2load --h1 -c {ab.H1_CLIENTS}; us = CPU "
        f"microseconds a request; the row of each kind's median run."
    )
    text = render(sides, kinds, meta)
    print(text)
    if not args.no_write:
        ab.write_section(text, name="cpu_budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
