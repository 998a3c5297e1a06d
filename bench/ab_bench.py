"""Two builds or configurations of the API server, measured in the same run, alternating.

Why: the figures the issues ask for are ratios of one server to another ("with audit >= 0.85
of without", "priority and fairness on >= 0.9 of off", "no regression beyond 5 %"), and on a
two-core machine throughput drifts by 10-15 % over a few minutes. Both daemons run side by
side (the idle one costs nothing), and each measurement alternates between them round after
round, A first in even rounds and B first in odd ones, so a drift hits both alike. The
report gives each side's median over the rounds and the ratio B / A of the medians.

    python bench/ab_bench.py --preset audit             # without vs with audit (issue 12)
    python bench/ab_bench.py --b-flags "--foo=bar" --name foo
    python bench/ab_bench.py --a-tree /path/to/old/checkout --name before-after
    python bench/ab_bench.py --preset encryption        # identity vs aescbc vs aesgcm (issue 15)
    python bench/ab_bench.py --preset metrics --only get-h1,get-h2  # metrics off vs on (issue 14)

The ``metrics`` preset turns every request series off on side A with ``--disabled-metrics``
(the server then records nothing per request: the app gets no recorder) and leaves them on
on side B, so B / A is the request metrics' cost (issue 14: at least 0.95 on GET).

The ``encryption`` preset runs three daemons in the same run, each with an
``--encryption-provider-config`` for events written into its work directory: identity (A),
aescbc (B) and aesgcm (C, a 32-byte key each); the report has B / A and C / A.

Each side is the daemon of ``bench/api_bench.py`` (``twistd apiserver`` on a fresh data
dir, TLS, ABAC allowing anonymous load) with its own extra flags and source tree. Results
go to ``RESULTS.md`` between ``<!-- ab_<name>:begin -->`` and ``<!-- ab_<name>:end -->``
unless ``--no-write``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import shlex
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import api_bench as ab

#: (key, protocol, what): the measurements, in the order each round runs them.
MEASUREMENTS: tuple[tuple[str, str, str], ...] = (
    ("get", "h1", "get one event, HTTP/1.1"),
    ("create", "h1", "create, HTTP/1.1"),
    ("get", "h2", "get one event, HTTP/2"),
    ("create", "h2", "create, HTTP/2"),
    ("list", "h1", "list of 500, HTTP/1.1"),
)

#: Every request series (apiserver.metrics.requests): with all of them disabled the server
#: records nothing per request.
REQUEST_SERIES = (
    "apiserver_request_total,apiserver_request_duration_seconds,"
    "apiserver_request_sli_duration_seconds,apiserver_response_sizes,"
    "apiserver_current_inflight_requests,apiserver_longrunning_requests"
)

PRESETS: dict[str, dict[str, str]] = {
    # Issue 14: the request metrics' cost per request.
    "metrics": {
        "a_label": "without request metrics",
        "a_flags": f"--disabled-metrics={REQUEST_SERIES}",
        "b_label": "with request metrics",
    },
    # Issue 12: every request at Metadata level to a log file in batch mode.
    "audit": {"a_label": "without audit", "b_label": "with audit", "b_audit": "1"},
    # Issue 15: encryption at rest, identity against aescbc and aesgcm (a third side, C).
    "encryption": {
        "a_label": "identity",
        "a_encryption": "identity",
        "b_label": "aescbc",
        "b_encryption": "aescbc",
        "c_label": "aesgcm",
        "c_encryption": "aesgcm",
    },
}

#: The key of every encrypting side (32 bytes, base64): the bench measures cost, not secrecy.
BENCH_KEY = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="


def encryption_config(workdir: Path, provider: str) -> Path:
    """An EncryptionConfiguration for events with one provider (identity, aescbc, aesgcm)."""
    workdir.mkdir(parents=True, exist_ok=True)
    body = (
        "  - identity: {}\n"
        if provider == "identity"
        else f"  - {provider}: {{keys: [{{name: bench, secret: {BENCH_KEY}}}]}}\n"
    )
    path = workdir / "encryption.yaml"
    path.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
        "resources:\n- resources: [events]\n  providers:\n" + body
    )
    return path


@dataclass
class Side:
    label: str
    flags: list[str]
    tree: Path
    audit: bool = False
    encryption: str = ""
    rps: dict[tuple[str, str], list[float]] = field(default_factory=dict)


def parse_targets(texts: Sequence[str]) -> dict[tuple[str, str], float]:
    """``get-h1=0.85`` -> {("get", "h1"): 0.85}."""
    targets: dict[tuple[str, str], float] = {}
    for text in texts:
        name, _, value = text.partition("=")
        key, _, proto = name.partition("-")
        targets[(key, proto)] = float(value)
    return targets


def render(
    name: str, a: Side, b: Side, rounds: int, seconds: float, targets: dict[tuple[str, str], float]
) -> str:
    when = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## A/B: {a.label} vs {b.label} (bench/ab_bench.py)",
        "",
        f"Run {when}, nproc {os.cpu_count()}, Python {platform.python_version()}: "
        f"`{' '.join(['python', 'bench/ab_bench.py', *sys.argv[1:]])}`. "
        f"{rounds} rounds of {seconds:g} s per measurement and side, alternating "
        "(A first in even rounds, B first in odd ones); h2load as in api_bench.py "
        f"(h1 -c {ab.H1_CLIENTS}, h2 -c {ab.H2_CLIENTS} -m {ab.H2_STREAMS}).",
        "",
        f"A = {a.label}: `{' '.join(a.flags) or '(no extra flags)'}`"
        + (" + Metadata audit to a log file, batch mode" if a.audit else "")
        + (f", tree {a.tree}" if a.tree != ab.REPO else ""),
        f"B = {b.label}: `{' '.join(b.flags) or '(no extra flags)'}`"
        + (" + Metadata audit to a log file, batch mode" if b.audit else "")
        + (f", tree {b.tree}" if b.tree != ab.REPO else ""),
        "",
        "| req/s | A rounds | B rounds | A median | B median | B / A | target |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for key, proto, what in MEASUREMENTS:
        av, bv = a.rps.get((key, proto), []), b.rps.get((key, proto), [])
        if not av or not bv:
            continue
        am, bm = statistics.median(av), statistics.median(bv)
        ratio = bm / am if am else 0.0
        target = targets.get((key, proto))
        verdict = ""
        if target is not None:
            verdict = f"≥ {target:g}: " + ("met" if ratio >= target else "**missed**")
        lines.append(
            f"| {what} | {' '.join(f'{v:,.0f}' for v in av)} | {' '.join(f'{v:,.0f}' for v in bv)}"
            f" | {am:,.0f} | {bm:,.0f} | {ratio:.2f} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS))
    parser.add_argument("--name", help="section name in RESULTS.md (default: the preset)")
    parser.add_argument("--a-label", default="A")
    parser.add_argument("--b-label", default="B")
    parser.add_argument("--a-flags", default="", help="extra daemon flags of side A")
    parser.add_argument("--b-flags", default="", help="extra daemon flags of side B")
    parser.add_argument("--a-tree", type=Path, default=ab.REPO, help="source tree of side A")
    parser.add_argument("--b-tree", type=Path, default=ab.REPO, help="source tree of side B")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument(
        "--only", default="", help="comma-separated measurements, e.g. get-h1,create-h1"
    )
    parser.add_argument(
        "--target", action="append", default=[], help="B/A target, e.g. get-h1=0.85"
    )
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    preset = PRESETS.get(args.preset or "", {})
    name = args.name or args.preset or "custom"
    if shutil.which("h2load") is None:
        print("h2load not found: apt-get install nghttp2-client", file=sys.stderr)
        return 2
    a = Side(
        preset.get("a_label", args.a_label),
        shlex.split(preset.get("a_flags", args.a_flags)),
        args.a_tree.resolve(),
        bool(preset.get("a_audit")),
    )
    b = Side(
        preset.get("b_label", args.b_label),
        shlex.split(preset.get("b_flags", args.b_flags)),
        args.b_tree.resolve(),
        bool(preset.get("b_audit")),
    )
    a.encryption = preset.get("a_encryption", "")
    b.encryption = preset.get("b_encryption", "")
    sides = [("a", a), ("b", b)]
    if "c_label" in preset:
        c = Side(preset["c_label"], [], args.b_tree.resolve(), False, preset["c_encryption"])
        sides.append(("c", c))
    only = {tuple(item.split("-", 1)) for item in args.only.split(",") if item}
    measurements = [m for m in MEASUREMENTS if not only or (m[0], m[1]) in only]
    targets = parse_targets(args.target)
    warmup = 1.0
    procs = ab.Processes()
    tmp = Path(tempfile.mkdtemp(prefix="ab-bench-"))
    try:
        with ab.running(procs):
            servers = {}
            for tag, side in sides:
                if side.encryption:
                    path = encryption_config(tmp / f"{tag}-config", side.encryption)
                    side.flags.append(f"--encryption-provider-config={path}")
                server = ab.start_daemon(
                    procs, tmp / tag, audit=side.audit, extra=side.flags, tree=side.tree
                )
                status, text = ab.events_api_status(server)
                if status != 200:
                    print(f"{side.label}: Events API not answering: {status} {text}")
                    return 1
                ab.prepare_data(server)
                servers[tag] = server
            body = tmp / "create.json"
            body.write_bytes(ab.event_body(ab.CREATE_NS))
            paths = {
                "get": (ab.events_path(ab.GET_NS, ab.GET_NAME), None),
                "create": (ab.events_path(ab.CREATE_NS), body),
                "list": (ab.events_path(ab.LIST_NS), None),
            }
            for round_ in range(args.rounds):
                shift = round_ % len(sides)
                order = sides[shift:] + sides[:shift]
                for key, proto, _ in measurements:
                    path, data = paths[key]
                    headers = ["accept: application/json"]
                    if data is not None:
                        headers.append("content-type: application/json")
                    for tag, side in order:
                        result = ab.run_h2load(
                            key,
                            proto,
                            servers[tag].base + path,
                            args.seconds,
                            warmup,
                            data,
                            headers,
                        )
                        if not result.valid:
                            print(f"{side.label} {key} {proto}: {result.error}", file=sys.stderr)
                            return 1
                        side.rps.setdefault((key, proto), []).append(result.rps)
                        print(
                            f"round {round_} {key:6} {proto} {side.label:>16}: "
                            f"{result.rps:10,.1f} req/s",
                            flush=True,
                        )
    finally:
        procs.stop_all()
        shutil.rmtree(tmp, ignore_errors=True)
    text = "\n".join(
        render(name, a, other, args.rounds, args.seconds, targets) for _, other in sides[1:]
    )
    print()
    print(text)
    if not args.no_write:
        ab.write_section(text, name=f"ab_{name}")
        print(f"written to {ab.RESULTS.relative_to(ab.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
