"""Protobuf against JSON on one daemon, alternating round after round (issue 10's targets).

Why: "a protobuf create within 10 % of a JSON create" and "a protobuf list of 500 at least as
fast as the JSON list" are ratios of two calls of the same server, and throughput on a
two-core machine drifts by 10-15 % over a few minutes. So one daemon (bench/api_bench.py's,
default flags: protobuf storage) serves both encodings, and each round measures the JSON call
and the protobuf call back to back, JSON first in even rounds and protobuf first in odd ones.
The report gives each side's median and the ratio protobuf / JSON of the medians.

    python bench/protobuf_ab.py                    # 5 rounds of 5 s, writes RESULTS.md
    python bench/protobuf_ab.py --rounds 1 --seconds 0.5 --no-write   # check the script
"""

from __future__ import annotations

import argparse
import datetime as _dt
import platform
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_bench as ab

JSON = "application/json"

#: (key, protocol, what, target of protobuf / JSON or None).
CALLS: tuple[tuple[str, str, str, float | None], ...] = (
    ("create", "h1", "create (POST, generateName), HTTP/1.1", 0.9),
    ("create", "h2", "create (POST, generateName), HTTP/2", 0.9),
    ("get", "h1", "get one event, HTTP/1.1", None),
    ("list", "h1", "list of 500, HTTP/1.1", 1.0),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    procs = ab.Processes()
    tmp = Path(tempfile.mkdtemp(prefix="protobuf-ab-"))
    results: dict[tuple[str, str, str], list[float]] = {}
    with ab.running(procs):
        daemon = ab.start_daemon(procs, tmp / "daemon")
        ab.prepare_data(daemon)
        bodies = {JSON: tmp / "create.json", ab.PROTOBUF: tmp / "create.pb"}
        bodies[JSON].write_bytes(ab.event_body(ab.CREATE_NS))
        bodies[ab.PROTOBUF].write_bytes(ab.protobuf_event_body(ab.CREATE_NS))
        paths = {
            "create": ab.events_path(ab.CREATE_NS),
            "get": ab.events_path(ab.GET_NS, ab.GET_NAME),
            "list": ab.events_path(ab.LIST_NS),
        }
        for number in range(args.rounds):
            for key, proto, _, _ in CALLS:
                order = (JSON, ab.PROTOBUF) if number % 2 == 0 else (ab.PROTOBUF, JSON)
                for media in order:
                    body = bodies[media] if key == "create" else None
                    headers = [f"accept: {media}"] + ([f"content-type: {media}"] if body else [])
                    result = ab.run_h2load(
                        key, proto, daemon.base + paths[key], args.seconds, 0.5, body, headers
                    )
                    rps = result.rps if result.valid else 0.0
                    name = "protobuf" if media == ab.PROTOBUF else "json"
                    results.setdefault((key, proto, name), []).append(rps)
                    print(f"round {number} {key:6} {proto} {name:8}: {rps:10,.1f} req/s")
    lines = [
        "<!-- protobuf_ab:begin -->",
        "## Protobuf vs JSON on one daemon (bench/protobuf_ab.py)",
        "",
        f"Run {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC, nproc {ab.os.cpu_count()}, "
        f"Python {platform.python_version()}: `python bench/protobuf_ab.py --rounds "
        f"{args.rounds} --seconds {args.seconds:g}`. Default flags (protobuf storage); each "
        "round measures the JSON call and the protobuf call back to back, alternating which "
        "goes first; h2load as in api_bench.py.",
        "",
        "| req/s | JSON rounds | protobuf rounds | JSON median | protobuf median | pb / JSON "
        "| target |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for key, proto, what, target in CALLS:
        json_runs = results[(key, proto, "json")]
        pb_runs = results[(key, proto, "protobuf")]
        a, b = statistics.median(json_runs), statistics.median(pb_runs)
        ratio = b / a if a else 0.0
        verdict = ""
        if target is not None:
            verdict = f"≥ {target:g}: " + ("met" if ratio >= target else "**missed**")
        lines.append(
            f"| {what} | {' '.join(f'{x:,.0f}' for x in json_runs)} | "
            f"{' '.join(f'{x:,.0f}' for x in pb_runs)} | {a:,.0f} | {b:,.0f} | {ratio:.2f} "
            f"| {verdict} |"
        )
    lines.append("<!-- protobuf_ab:end -->")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        ab.write_section(text, name="protobuf_ab")
        print("written to bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
