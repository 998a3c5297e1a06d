"""Priority and fairness against max-in-flight, and /readyz under a create overload.

Two modes, each starting its own daemons on 127.0.0.1 (as ``api_bench.py`` does: anonymous
load admitted by an ABAC policy, so requests are classified into ``global-default`` like an
ordinary user's, not exempted as ``system:masters`` would be) and stopping them at the end:

``compare`` (default)
    The same daemon command with priority and fairness on (the default) and with
    ``--enable-priority-and-fairness=false`` (max-in-flight at its default limits), measured
    in the same run, ABBA order (off, on, on, off) to cancel drift: GET of one event and
    create, over HTTP/1.1 and HTTP/2 (h2load, 16 requests in flight). Target: on/off >= 0.9
    for each.
``overload``
    One daemon with priority and fairness on. First the closed-loop create rate R (16 in
    flight); then an open-loop create load of 2R (h2load ``--rps``, 64 clients x 4 streams,
    so up to 256 in flight against global-default's seats), while a probe GETs ``/readyz``
    every 20 ms on a keep-alive connection (an exempt request: FlowSchema ``probes``).
    Reports /readyz p50/p99 (target p99 < 50 ms), and the 5xx answered to either (target 0);
    429s to the creates are expected (that is the protection working).

``--quick`` shortens every run; ``--no-write`` leaves ``bench/RESULTS.md`` alone (otherwise
the part between ``<!-- apf_bench:begin -->`` and ``<!-- apf_bench:end -->`` is rewritten).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_bench as ab

GET_NS, CREATE_NS, GET_NAME = "apf-get", "apf-create", "apf-get-1"
APF_OFF = ("--enable-priority-and-fairness=false",)


def start(procs: ab.Processes, workdir: Path, extra: Sequence[str]) -> ab.Server:
    """``api_bench.daemon_command`` with ``extra`` flags, waiting for ``/readyz``."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = ab.free_port()
    log_path = workdir / "daemon.log"
    with open(log_path, "ab") as log:
        proc = procs.start(
            [*ab.daemon_command(port, workdir), *extra],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=ab.source_env(),
            cwd=workdir,
        )
    server = ab.Server("apiserver", port, proc, log_path)
    server.wait_ready("/readyz")
    return server


def prepare(server: ab.Server, body_dir: Path) -> Path:
    """The event GET reads, and the create body file (``generateName``)."""
    status, text = ab.request(
        server, "POST", ab.events_path(GET_NS), ab.event_body(GET_NS, GET_NAME)
    )
    if status not in (201, 409):
        raise RuntimeError(f"preparing the GET event: {status} {text[:200]!r}")
    body = body_dir / "create.json"
    body.write_bytes(ab.event_body(CREATE_NS))
    return body


def load(
    server: ab.Server, what: str, proto: str, body: Path, seconds: float, warmup: float
) -> ab.LoadResult:
    if what == "get":
        url = server.base + ab.events_path(GET_NS, GET_NAME)
        return ab.run_h2load("get", proto, url, seconds, warmup)
    url = server.base + ab.events_path(CREATE_NS)
    return ab.run_h2load(
        "create", proto, url, seconds, warmup, body=body,
        headers=["Content-Type: application/json"],
    )  # fmt: skip


def compare(procs: ab.Processes, tmp: Path, quick: bool) -> list[str]:
    seconds, warmup = (1.5, 0.5) if quick else (5.0, 1.0)
    servers = {"on": start(procs, tmp / "on", ()), "off": start(procs, tmp / "off", APF_OFF)}
    bodies = {name: prepare(server, tmp / name) for name, server in servers.items()}
    rows = [
        "| call | proto | APF off (req/s) | APF on (req/s) | on/off | target |",
        "|---|---|---|---|---|---|",
    ]
    for what in ("get", "create"):
        for proto in ("h1", "h2"):
            rates: dict[str, list[float]] = {"on": [], "off": []}
            for mode in ("off", "on", "on", "off"):
                result = load(servers[mode], what, proto, bodies[mode], seconds, warmup)
                if result.error:
                    raise RuntimeError(f"{what} {proto} APF {mode}: {result.error}")
                rates[mode].append(result.rps)
            off = sum(rates["off"]) / 2
            on = sum(rates["on"]) / 2
            ratio = on / off if off else 0.0
            mark = "" if ratio >= 0.9 else " **below target**"
            rows.append(
                f"| {what} | {proto} | {off:,.0f} | {on:,.0f} | {ratio:.2f}{mark} | >= 0.9 |"
            )
    return rows


class Prober(threading.Thread):
    """GET /readyz every ``period`` seconds on one keep-alive connection."""

    def __init__(self, server: ab.Server, period: float = 0.02) -> None:
        super().__init__(daemon=True)
        self.server, self.period = server, period
        self.latencies: list[float] = []
        self.codes: dict[int, int] = {}
        self.errors = 0
        self.stop = threading.Event()

    def run(self) -> None:
        conn = self.server.connection(timeout=10)
        while not self.stop.is_set():
            started = time.perf_counter()
            try:
                conn.request("GET", "/readyz")
                response = conn.getresponse()
                response.read()
                self.latencies.append(time.perf_counter() - started)
                self.codes[response.status] = self.codes.get(response.status, 0) + 1
            except (OSError, http.client.HTTPException):
                self.errors += 1
                conn.close()
                conn = self.server.connection(timeout=10)
            self.stop.wait(max(0.0, self.period - (time.perf_counter() - started)))
        conn.close()


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else 0.0


def overload(procs: ab.Processes, tmp: Path, quick: bool) -> list[str]:
    seconds, warmup = (2.0, 0.5) if quick else (10.0, 1.0)
    server = start(procs, tmp / "overload", ())
    body = prepare(server, tmp / "overload")
    capacity = load(server, "create", "h2", body, seconds / 2, warmup)
    if capacity.error:
        raise RuntimeError(f"capacity run: {capacity.error}")
    clients, streams = 64, 4
    per_client = max(1, round(2 * capacity.rps / clients))
    cmd = [
        "h2load", "-D", f"{int(seconds * 1000)}ms", "-t", "1", "-c", str(clients),
        "-m", str(streams), f"--rps={per_client}", "-d", str(body),
        "-H", "Content-Type: application/json", server.base + ab.events_path(CREATE_NS),
    ]  # fmt: skip
    prober = Prober(server)
    prober.start()
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=seconds + 60, check=False
        )
    finally:
        prober.stop.set()
        prober.join(15)
    output = done.stdout + done.stderr
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output)
    if codes is None:
        raise RuntimeError("unparsable h2load output: " + output[-400:])
    ok, _, refused, errors = (int(codes.group(i)) for i in range(1, 5))
    probe_5xx = sum(n for code, n in prober.codes.items() if code >= 500)
    p50, p99 = _pct(prober.latencies, 50) * 1000, _pct(prober.latencies, 99) * 1000
    mark99 = "" if p99 < 50 else " **below target**"
    mark5 = "" if errors + probe_5xx == 0 else " **below target**"
    return [
        "| figure | value | target |",
        "|---|---|---|",
        f"| closed-loop create capacity R (h2, 16 in flight) | {capacity.rps:,.0f} req/s | |",
        f"| offered create load (open loop) | {per_client * clients:,} req/s (~2R) | |",
        f"| creates answered 2xx / 429 (4xx) | {ok:,} / {refused:,} | |",
        f"| /readyz probes (every 20 ms) | {len(prober.latencies)} ({prober.errors} errors) | |",
        f"| /readyz p50 | {p50:.1f} ms | |",
        f"| /readyz p99 | {p99:.1f} ms{mark99} | < 50 ms |",
        f"| 5xx answered (creates + probes) | {errors} + {probe_5xx}{mark5} | 0 |",
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", choices=("compare", "overload", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="short runs, to check the script")
    parser.add_argument("--no-write", action="store_true", help="leave bench/RESULTS.md alone")
    args = parser.parse_args(argv)
    procs = ab.Processes()
    sections: list[str] = []
    with ab.running(procs), tempfile.TemporaryDirectory(prefix="apf-bench-") as tmp_name:
        tmp = Path(tmp_name)
        if args.mode in ("compare", "both"):
            sections += ["### Priority and fairness on vs off (same run)", ""]
            sections += [*compare(procs, tmp, args.quick), ""]
            procs.stop_all()
            procs.procs.clear()
        if args.mode in ("overload", "both"):
            sections += ["### /readyz under a 2x create overload (APF on)", ""]
            sections += [*overload(procs, tmp, args.quick), ""]
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    command = "python bench/apf_bench.py " + " ".join(argv if argv is not None else sys.argv[1:])
    text = "\n".join(
        [
            "## Priority and fairness (bench/apf_bench.py)",
            "",
            f"{stamp}, {os.cpu_count()} CPUs, `{command.strip()}`",
            "",
            *sections,
        ]
    )
    print(text)
    if not args.no_write and not args.quick:
        ab.write_section(text, name="apf_bench")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
