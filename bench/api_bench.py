"""API benchmark: Event API throughput against a bare twisted.web ceiling, and watch fan-out.

Usage: ``python bench/api_bench.py [--quick] [--no-write] [--watch-proto h1|h2|h1,h2]
[--profile DIR] [--server-cmd CMD]`` (``--help`` for the rest).

Why it is built like this:

- **A ceiling in the same run.** Absolute requests per second say more about the machine than
  about the server. ``bench/ceiling_server.py`` (a bare twisted.web Site behind the project's
  own TLS setup, one fixed ~300-byte body) is measured with the same h2load settings in the
  same run, and every API rate is reported as a ratio to it. Targets (from the issue):
  create/ceiling >= 0.50, get/ceiling >= 0.70, (lists/s x 500)/ceiling >= 40 (items listed per
  second against requests per second), h2/h1 of the same call >= 0.8.
- **h2load** (Debian's nghttp2-client) generates the load: C, so it does not compete with the
  server for the interpreter. ``--h1`` for HTTP/1.1 (one request in flight per connection, no
  pipelining: ``-m 1``), plain h2 otherwise; the same concurrency (16) for both protocols.
  h2load cannot vary a request body, so creates use ``metadata.generateName`` and every
  request still makes a distinct event.
- **Watch fan-out** needs per-event timing, which h2load cannot give: a client
  process (this file with ``--watch-client``) holds 1,000 watches
  (``GET .../events?watch=1&resourceVersion=<rv>``), over HTTP/1.1 (one TLS connection
  each, as the Python client does) and then, against a fresh server, over HTTP/2 (100
  streams a connection, as client-go and kubectl do), while this process creates events at
  200/s with their scheduled and actual send times (wall clock, one machine) in ``note``.
  The client times each event's arrival on each watch with a regular expression over the raw
  stream (no JSON decoding, so the client stays cheaper than the server it measures). The
  server's RSS (``VmRSS``) is read before and after the watches open, while they are idle.
  Sends still pending 2 s after the 10 s window are dropped, so a saturated server shows as
  a lower achieved create rate instead of an unbounded run.
- **A fresh server for each part** (fresh ``--data-dir``): the fan-out must not inherit
  the memory and the store of the throughput runs, nor the reverse.
- **Bounded and local**: only 127.0.0.1, every run has a duration and a timeout, the whole
  run stays under 4 minutes, and every process started here is stopped in ``finally``.

The report is a Markdown table, printed and written as the ``## API (bench/api_bench.py)``
section of ``bench/RESULTS.md``, between ``<!-- api_bench:begin -->`` and
``<!-- api_bench:end -->`` (other sections of that file are left as they are). ``--profile``
records the daemon with py-spy during each API run and prints its top frames per thread.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import http.client
import json
import os
import platform
import queue
import re
import resource
import shlex
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "RESULTS.md"
SECTION = "## API (bench/api_bench.py)"
GROUP_PATH = "/apis/events.k8s.io/v1"
LIST_SIZE = 500
LIST_NS = "bench-list"
GET_NS = "bench-get"
CREATE_NS = "bench-create"
WARM_NS = "bench-warm"
WATCH_NS = "bench-watch"
GET_NAME = "bench-get-1"
#: In an event's ``note``: its scheduled and its actual send time (wall clock); the watch
#: client finds them in the raw stream.
STAMP = "bench-ts="
#: One group, both times (``<slot>Z/<sent>``): the client keeps the matched bytes during
#: the window and turns them into numbers afterwards.
STAMP_RE = rb"bench-ts=(\d+\.\d{6}Z/\d+\.\d{6})Z"
#: Concurrency for every h2load run: 16 requests in flight for both protocols.
H1_CLIENTS, H1_STREAMS = 16, 1
H2_CLIENTS, H2_STREAMS = 4, 4
TOTAL_BUDGET = 235.0  # seconds; the issue asks for < 4 minutes


# --------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def source_env(tree: Path = REPO) -> dict[str, str]:
    """The working tree first on PYTHONPATH (``src`` and the root, for ``twisted/plugins``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(tree)])
    env["PYTHONUNBUFFERED"] = "1"
    return env


def unverified_tls() -> ssl.SSLContext:
    """Loopback only, to a throwaway self-signed server: no verification needed."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


class Processes:
    """Every process this run starts; :meth:`stop_all` ends each one by its own handle."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def start(self, args: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        proc: subprocess.Popen[Any] = subprocess.Popen(list(args), **kwargs)
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[Any], timeout: float = 10.0) -> None:
        if proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)

    def stop_all(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                self.stop(proc)


@dataclass
class Server:
    """One HTTPS server process on 127.0.0.1 (the daemon or the ceiling)."""

    name: str
    port: int
    proc: subprocess.Popen[Any]
    log_path: Path

    @property
    def base(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def connection(self, timeout: float = 30.0) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=unverified_tls(), timeout=timeout
        )

    def rss_kib(self) -> int:
        return read_rss_kib(self.proc.pid)

    def cpu_seconds(self) -> float:
        return read_cpu_seconds(self.proc.pid)

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return ""

    def wait_ready(self, path: str, timeout: float = 40.0) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name} exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            try:
                status, _ = request(self, "GET", path, timeout=2)
                if status == 200:
                    return
                last = status
            except (OSError, http.client.HTTPException) as error:
                last = error
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not ready after {timeout}s ({last!r}):\n{self.log_tail()}")


def read_rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def read_cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


#: ``--audit``: every request at Metadata level (the issue's benchmark case).
AUDIT_POLICY = "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n"


def audit_args(workdir: Path) -> list[str]:
    """Flags for ``--audit``: a Metadata policy for every request, written to a log file in
    batch mode (``--audit-log-mode=batch``, the other batch flags at their defaults)."""
    policy = workdir / "audit-policy.yaml"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(AUDIT_POLICY)
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={workdir / 'audit' / 'audit.log'}",
        "--audit-log-mode=batch",
    ]


def daemon_command(
    port: int,
    workdir: Path,
    template: str = "",
    audit: bool = False,
    extra: Sequence[str] = (),
) -> list[str]:
    """``twistd apiserver`` as tests/integration/daemon.py starts it, on a fresh data dir.

    ``template`` (``--server-cmd``) replaces it: a shell-like command line in which
    ``{port}``, ``{cert_dir}`` and ``{data_dir}`` are substituted (to benchmark another
    build, other flags, or a stub when testing this script).
    """
    cert_dir, data_dir = workdir / "certs", workdir / "data"
    if template:
        values = {"port": port, "cert_dir": cert_dir, "data_dir": data_dir}
        return [part.format(**values) for part in shlex.split(template)]
    twistd = str(Path(sys.executable).parent / "twistd")
    if not Path(twistd).exists():
        twistd = shutil.which("twistd") or "twistd"
    # h2load cannot present a client certificate, and AlwaysAllow turns anonymous requests
    # off (as kube-apiserver does): an ABAC policy admitting anonymous users keeps the load
    # unauthenticated while authorization still runs for every request.
    policy = Path(data_dir).parent / "abac-allow-all.jsonl"
    policy.parent.mkdir(parents=True, exist_ok=True)
    policy.write_text(
        '{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":'
        '{"group":"system:unauthenticated","namespace":"*","resource":"*","apiGroup":"*",'
        '"nonResourcePath":"*"}}\n'
    )
    return [
        twistd,
        "--nodaemon",
        "--pidfile=",
        "apiserver",
        f"--secure-port={port}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={cert_dir}",
        f"--data-dir={data_dir}",
        "--authorization-mode=ABAC",
        f"--authorization-policy-file={policy}",
        *(audit_args(workdir) if audit else ()),
        *extra,
    ]


def start_daemon(
    procs: Processes,
    workdir: Path,
    template: str = "",
    audit: bool = False,
    extra: Sequence[str] = (),
    tree: Path = REPO,
) -> Server:
    """Start the API server on a free port and wait for ``/readyz``.

    ``extra`` flags are added to the command line; ``tree`` is the source tree whose
    ``src`` is imported (another checkout, to compare two builds)."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = workdir / "daemon.log"
    with open(log_path, "ab") as log:
        proc = procs.start(
            daemon_command(port, workdir, template, audit, extra),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=source_env(tree),
            cwd=workdir,
        )
    server = Server("apiserver", port, proc, log_path)
    server.wait_ready("/readyz")
    workers = [flag.partition("=")[2] for flag in extra if flag.startswith("--workers=")]
    if workers and workers[-1].isdigit() and int(workers[-1]) > 1:
        wait_for_workers(server, int(workers[-1]))
    return server


def wait_for_workers(server: Server, count: int, timeout: float = 40.0) -> None:
    """With ``--workers``, /readyz answers once one worker listens: wait until every worker
    answers (``apiserver_worker_info`` over fresh connections), so that the load generator's
    connections, opened at its start, are spread over all of them."""
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only workers {sorted(seen)} of {count} answered")
        status, body = request(server, "GET", "/metrics", timeout=5)
        match = re.search(rb'apiserver_worker_info\{worker="(\d+)"', body)
        if status == 200 and match is not None:
            seen.add(match.group(1))


def start_etcd(workdir: Path) -> Any:
    """An etcd for ``--backend etcd3``: the tests' launcher (tests/storage/etcdserver.py),
    imported by path, on free loopback ports."""
    import importlib.util

    path = REPO / "tests" / "storage" / "etcdserver.py"
    spec = importlib.util.spec_from_file_location("_api_bench_etcdserver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = module.EtcdServer(str(workdir / "data"))
    server.start()
    return server


def start_ceiling(procs: Processes, workdir: Path) -> Server:
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log_path = workdir / "ceiling.log"
    with open(log_path, "ab") as log:
        proc = procs.start(
            [
                sys.executable,
                str(REPO / "bench" / "ceiling_server.py"),
                f"--port={port}",
                f"--cert-dir={workdir / 'certs'}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=source_env(),
            cwd=workdir,
        )
    server = Server("ceiling", port, proc, log_path)
    server.wait_ready("/")
    return server


# --------------------------------------------------------------------------------------
# Plain requests (set-up and checks)
# --------------------------------------------------------------------------------------


def request(
    server: Server,
    method: str,
    path: str,
    body: bytes | None = None,
    timeout: float = 30.0,
    conn: http.client.HTTPSConnection | None = None,
) -> tuple[int, bytes]:
    own = conn is None
    connection = conn or server.connection(timeout)
    try:
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        if own:
            connection.close()


def event_body(namespace: str, name: str | None = None, note: str = "api bench") -> bytes:
    """An events.k8s.io/v1 Event that passes validation; ``generateName`` when no name."""
    metadata: dict[str, Any] = {"namespace": namespace}
    if name:
        metadata["name"] = name
    else:
        metadata["generateName"] = "b-"
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": metadata,
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "reportingController": "bench.example.com/api-bench",
        "reportingInstance": "api-bench-1",
        "action": "Benchmark",
        "reason": "Measured",
        "type": "Normal",
        "regarding": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": "p-1"},
        "note": note,
    }
    return json.dumps(event, separators=(",", ":")).encode()


PROTOBUF = "application/vnd.kubernetes.protobuf"
CORE_PATH = "/api/v1"


def protobuf_event_body(namespace: str) -> bytes:
    """:func:`event_body` as client-go sends it in protobuf (the ``k8s\\x00`` envelope)."""
    if str(REPO / "src") not in sys.path:
        sys.path.insert(0, str(REPO / "src"))
    from apiserver.protobuf import codec

    event = json.loads(event_body(namespace))
    fields = {k: v for k, v in event.items() if k not in ("kind", "apiVersion")}
    return codec.wrap("events.k8s.io/v1", "Event", codec.encode(codec.EventsEvent, fields))


def core_event_body(namespace: str) -> bytes:
    """A core/v1 Event as a kubelet's recorder writes it, with ``generateName``."""
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"namespace": namespace, "generateName": "c-"},
        "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": namespace, "name": "p"},
        "reason": "Measured",
        "message": "api bench",
        "source": {"component": "kubelet", "host": "node-1"},
        "firstTimestamp": "2025-01-01T00:00:00Z",
        "lastTimestamp": "2025-01-01T00:00:00Z",
        "count": 1,
        "type": "Normal",
        "reportingComponent": "kubelet",
        "reportingInstance": "node-1",
    }
    return json.dumps(event, separators=(",", ":")).encode()


def core_events_path(namespace: str) -> str:
    return f"{CORE_PATH}/namespaces/{namespace}/events"


def events_path(namespace: str, name: str = "", query: str = "") -> str:
    path = f"{GROUP_PATH}/namespaces/{namespace}/events"
    if name:
        path += f"/{name}"
    return path + (f"?{query}" if query else "")


def events_api_status(server: Server) -> tuple[int, str]:
    try:
        status, body = request(server, "GET", events_path("default"), timeout=5)
    except (OSError, http.client.HTTPException) as error:
        return 0, repr(error)
    return status, body[:200].decode(errors="replace")


def prepare_data(server: Server) -> None:
    """One event to GET, and exactly LIST_SIZE events in the list namespace (already there
    when the store outlives the daemon: an etcd shared by the rounds of ab_bench.py)."""
    conn = server.connection()
    try:
        status, body = request(
            server, "POST", events_path(GET_NS), event_body(GET_NS, GET_NAME), conn=conn
        )
        if status not in (201, 409):
            raise RuntimeError(f"create {GET_NAME}: {status} {body[:300]!r}")
        for index in range(LIST_SIZE):
            name = f"e-{index:04d}"
            status, body = request(
                server, "POST", events_path(LIST_NS), event_body(LIST_NS, name), conn=conn
            )
            if status not in (201, 409):
                raise RuntimeError(f"create {name}: {status} {body[:300]!r}")
        status, body = request(server, "GET", events_path(LIST_NS), conn=conn)
        items = json.loads(body).get("items", []) if status == 200 else []
        if status != 200 or len(items) != LIST_SIZE:
            raise RuntimeError(f"list {LIST_NS}: {status}, {len(items)} items")
    finally:
        conn.close()


# --------------------------------------------------------------------------------------
# h2load
# --------------------------------------------------------------------------------------


@dataclass
class LoadResult:
    """One h2load run; ``rps`` counts only 2xx answers."""

    label: str
    proto: str
    rps: float = 0.0
    done: int = 0
    ok: int = 0
    non_2xx: int = 0
    failed: int = 0
    mean_ms: float = 0.0
    error: str = ""

    @property
    def valid(self) -> bool:
        return not self.error and self.ok > 0


def _to_ms(value: str, unit: str) -> float:
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def parse_h2load(label: str, proto: str, output: str) -> LoadResult:
    result = LoadResult(label, proto)
    finished = re.search(r"finished in [\d.]+s, ([\d.]+) req/s", output)
    counts = re.search(
        r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, "
        r"(\d+) errored, (\d+) timeout",
        output,
    )
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", output)
    mean = re.search(r"time for request:\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\b", output)
    if not (finished and counts and codes):
        result.error = "unparsable h2load output: " + output[-400:]
        return result
    raw_rps = float(finished.group(1))
    result.done = int(counts.group(3))
    result.failed = int(counts.group(5)) + int(counts.group(6)) + int(counts.group(7))
    two = int(codes.group(1))
    other = sum(int(codes.group(i)) for i in (2, 3, 4))
    result.ok = two
    result.non_2xx = other
    share = min(1.0, two / (two + other)) if two + other else 0.0
    result.rps = raw_rps * share
    if mean:
        result.mean_ms = _to_ms(mean.group(1), mean.group(2))
    return result


def run_h2load(
    label: str,
    proto: str,
    url: str,
    seconds: float,
    warmup: float,
    body: Path | None = None,
    headers: Sequence[str] = (),
) -> LoadResult:
    h1 = proto == "h1"
    duration, warm = f"{int(seconds * 1000)}ms", f"{int(warmup * 1000)}ms"
    cmd = ["h2load", "-D", duration, "--warm-up-time", warm, "-t", "1"]
    if h1:
        cmd += ["--h1", "-c", str(H1_CLIENTS), "-m", str(H1_STREAMS)]
    else:
        cmd += ["-c", str(H2_CLIENTS), "-m", str(H2_STREAMS)]
    if body is not None:
        cmd += ["-d", str(body)]
    for header in headers:
        cmd += ["-H", header]
    cmd.append(url)
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=seconds + warmup + 30, check=False
        )
    except subprocess.TimeoutExpired:
        return LoadResult(label, proto, error="h2load timed out")
    result = parse_h2load(label, proto, done.stdout + done.stderr)
    if done.returncode != 0 and not result.error:
        result.error = f"h2load exit {done.returncode}"
    return result


# --------------------------------------------------------------------------------------
# Profiling (optional)
# --------------------------------------------------------------------------------------


def start_profile(
    procs: Processes, pid: int, seconds: float, out: Path
) -> subprocess.Popen[Any] | None:
    pyspy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(pyspy).exists():
        return None
    return procs.start(
        [
            pyspy,
            "record",
            "--pid",
            str(pid),
            "--duration",
            str(max(1, round(seconds))),
            "--rate",
            "500",
            "--function",
            "--threads",
            "--format",
            "raw",
            "--nonblocking",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def summarize_profile(path: Path, top: int = 10) -> str:
    """Top frames from py-spy's collapsed stacks (recorded with ``--threads``).

    Samples per thread first (the reactor is ``MainThread``; the others are the store's
    threads), then the reactor thread's top frames by own and by inclusive samples, and the
    top own frames of the other threads.
    """
    per_thread: dict[str, int] = {}
    own_main: dict[str, int] = {}
    incl_main: dict[str, int] = {}
    own_other: dict[str, int] = {}
    total = 0
    # Reactor, twistd and TLS/HTTP plumbing present in every stack: left out of "inclusive".
    skip = (
        "ReactorBase.",
        "<module>",
        "callWith",
        "ContextTracker.",
        "ThreadedContextTracker.",
        "EPollReactor.",
        "main (",
        "run (",
        "runApp (",
        "ApplicationRunner.",
        "UnixApplicationRunner.",
        "runReactorWithLogging",
        "_PollLikeMixin.",
        "Connection.doRead",
        "Connection._dataReceived",
        "TLSMemoryBIOProtocol.dataReceived",
        "TLSMemoryBIOProtocol._flushReceiveBIO",
        "ProtocolWrapper.",
        "_GenericHTTPChannelProtocol.",
        "Deferred.",
        "_inlineCallbacks",
        "_gotResultInlineCallbacks",
    )
    with contextlib.suppress(OSError):
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            total += count
            frames = stack.split(";")
            thread = frames[0].split(": ", 1)[-1] if frames[0].startswith("thread") else "?"
            per_thread[thread] = per_thread.get(thread, 0) + count
            leaf = frames[-1]
            if thread == "MainThread":
                own_main[leaf] = own_main.get(leaf, 0) + count
                for frame in set(frames[1:]):
                    if not frame.startswith(skip):
                        incl_main[frame] = incl_main.get(frame, 0) + count
            else:
                own_other[leaf] = own_other.get(leaf, 0) + count
    if not total:
        return "(no samples)"

    def block(title: str, counts: dict[str, int], limit: int) -> list[str]:
        lines = [title]
        for frame, count in sorted(counts.items(), key=lambda kv: -kv[1])[:limit]:
            lines.append(f"  {100 * count / total:5.1f}%  {frame}")
        return lines

    threads = ", ".join(
        f"{name} {100 * count / total:.0f}%"
        for name, count in sorted(per_thread.items(), key=lambda kv: -kv[1])
    )
    lines = [f"{total} samples (% of all samples); by thread: {threads}"]
    lines += block("reactor thread, own time:", own_main, top)
    lines += block("reactor thread, inclusive time:", incl_main, top * 2)
    if own_other:
        lines += block("other threads, own time:", own_other, top // 2)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------
# Watch fan-out: the client process (``--watch-client``)
# --------------------------------------------------------------------------------------


def watch_client_main(argv: Sequence[str]) -> int:
    """Open N TLS watches, time every stamped event on each, report JSON.

    HTTP/1.1: one connection per watch (what the Python client does). HTTP/2: up to 100
    streams per connection (the server's default MAX_CONCURRENT_STREAMS; what client-go
    and kubectl do), with flow-control windows opened wide and every byte acknowledged.

    Protocol on stdin/stdout (lines): prints ``OPENED <ok> <failed>`` once every watch has
    answered or the open timeout passed; then reads ``GO <expected> <timeout>``, waits until
    every open watch has seen ``expected`` stamped events (or the timeout), prints
    ``RESULT <json>`` and exits.
    """
    import array

    from twisted.internet import protocol, reactor, stdio, task
    from twisted.internet import ssl as tssl
    from twisted.protocols.basic import LineReceiver

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", required=True)
    parser.add_argument("--watchers", type=int, required=True)
    parser.add_argument("--proto", choices=("h1", "h2"), default="h1")
    parser.add_argument("--streams", type=int, default=100, help="h2 streams per connection")
    parser.add_argument("--open-timeout", type=float, default=60.0)
    parser.add_argument("--parallel", type=int, default=64)
    args = parser.parse_args(argv)

    rx: Any = reactor
    # h2 formats every received frame for a trace log it then drops, hexlifying the whole
    # payload: the same text from the first bytes only (measured: 13% of this client).
    from apiserver.http.h2 import quiet_frame_repr

    quiet_frame_repr()
    findall = re.compile(STAMP_RE).findall
    # (arrival time, stamps matched in one read): parsed in summary(), after the window, so
    # that the client spends as little as it can while the server is measured.
    arrivals: list[tuple[float, list[bytes]]] = []
    authority = f"127.0.0.1:{args.port}"
    state: dict[str, Any] = {
        "opened": 0,
        "failed": 0,
        "statuses": {},
        "lost_early": 0,
        "started": 0,
        "pending": 0,
        "expected": None,
        "deadline": 0.0,
        "last_arrival": 0.0,
        "finished": False,
    }

    class Stream:
        """One watch: its answer's status and the stamped events seen on it."""

        __slots__ = ("count", "opened", "settled", "tail")

        def __init__(self) -> None:
            self.tail = b""
            self.opened = False
            self.settled = False
            self.count = 0

        def settle(self, ok: bool, status: str) -> None:
            if self.settled:
                return
            self.settled = True
            self.opened = ok
            state["pending"] -= 1
            if ok:
                state["opened"] += 1
            else:
                state["failed"] += 1
                state["statuses"][status] = state["statuses"].get(status, 0) + 1
            state.get("pump", pump)()

        def feed(self, data: bytes, now: float) -> None:
            buf = self.tail + data if self.tail else data
            found = findall(buf)
            if found:
                arrivals.append((now, found))
                self.count += len(found)
                state["last_arrival"] = now
                # Keep what follows the last complete stamp: a stamp cut by the end of this
                # read is completed by the next one.
                last = buf.rfind(found[-1]) + len(found[-1]) + 1
                self.tail = buf[max(last, len(buf) - 64) :]
            else:
                self.tail = buf[-64:]

        def lost(self, why: str) -> None:
            if not self.settled:
                self.settle(False, f"lost before headers: {why}")
            elif self.opened and not state["finished"]:
                state["lost_early"] += 1
                self.opened = False

    streams: list[Stream] = []
    connections: list[protocol.Protocol] = []
    h1_request = (
        f"GET {args.path} HTTP/1.1\r\nHost: {authority}\r\n"
        "Accept: application/json\r\nUser-Agent: api-bench-watch\r\n\r\n"
    ).encode()

    class H2Watches(protocol.Protocol):
        """One HTTP/2 connection carrying ``count`` watches."""

        def __init__(self, count: int) -> None:
            import hpack
            from h2.config import H2Configuration
            from h2.connection import H2Connection

            self.conn = H2Connection(H2Configuration(client_side=True, header_encoding=None))
            self.count = count
            self.by_id: dict[int, Stream] = {}
            self.decoder = hpack.Decoder()
            self.buf = b""
            self.block = b""
            self.block_ends = False

        def connectionMade(self) -> None:
            from h2.settings import SettingCodes

            conn = self.conn
            conn.initiate_connection()
            conn.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 2**31 - 1})
            conn.increment_flow_control_window(2**31 - 1 - 65535)
            headers = [
                (b":method", b"GET"),
                (b":scheme", b"https"),
                (b":authority", authority.encode()),
                (b":path", args.path.encode()),
                (b"accept", b"application/json"),
                (b"user-agent", b"api-bench-watch"),
            ]
            for _ in range(self.count):
                stream_id = conn.get_next_available_stream_id()
                conn.send_headers(stream_id, headers, end_stream=True)
                stream = Stream()
                streams.append(stream)
                self.by_id[stream_id] = stream
            self.transport.write(conn.data_to_send())  # type: ignore[union-attr]

        def dataReceived(self, data: bytes) -> None:
            """Frames read by hand: h2's event machinery cost this client more CPU than the
            server spent sending, on the same two cores, so it measured the client. HEADERS
            blocks still go through an HPACK decoder (the server's table must stay in step);
            DATA needs no WINDOW_UPDATE in a run: both windows were opened to 2^31-1, more
            than a run sends on one connection."""
            now = time.time()
            buf = self.buf + data if self.buf else data
            pos, size = 0, len(buf)
            while size - pos >= 9:
                length = int.from_bytes(buf[pos : pos + 3], "big")
                end = pos + 9 + length
                if end > size:
                    break
                kind, flags = buf[pos + 3], buf[pos + 4]
                sid = int.from_bytes(buf[pos + 5 : pos + 9], "big") & 0x7FFFFFFF
                payload = buf[pos + 9 : end]
                pos = end
                if kind == 0:  # DATA
                    if flags & 0x8:  # PADDED
                        payload = payload[1 : len(payload) - payload[0]]
                    stream = self.by_id.get(sid)
                    if stream is not None and payload:
                        stream.feed(payload, now)
                    if flags & 0x1:
                        self.ended(sid, "StreamEnded")
                elif kind in (1, 9):  # HEADERS, CONTINUATION
                    if kind == 1:
                        if flags & 0x8:
                            payload = payload[1 : len(payload) - payload[0]]
                        if flags & 0x20:  # PRIORITY
                            payload = payload[5:]
                        self.block, self.block_ends = payload, bool(flags & 0x1)
                    else:
                        self.block += payload
                    if flags & 0x4:  # END_HEADERS
                        headers = dict(self.decoder.decode(self.block, raw=True))
                        status = headers.get(b":status", b"?").decode()
                        stream = self.by_id.get(sid)
                        if stream is not None and status[:1] != "1":
                            stream.settle(status == "200", f"HTTP/2 {status}")
                        if self.block_ends:
                            self.ended(sid, "StreamEnded")
                elif kind == 3:  # RST_STREAM
                    self.ended(sid, "StreamReset")
                elif kind == 4 and not flags & 0x1:  # SETTINGS: acknowledge
                    self.transport.write(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00")  # type: ignore[union-attr]
                elif kind == 6 and not flags & 0x1:  # PING: answer
                    self.transport.write(  # type: ignore[union-attr]
                        b"\x00\x00\x08\x06\x01\x00\x00\x00\x00" + payload
                    )
                elif kind == 7:  # GOAWAY
                    self.transport.loseConnection()  # type: ignore[union-attr]
            self.buf = buf[pos:]

        def ended(self, sid: int, why: str) -> None:
            stream = self.by_id.pop(sid, None)
            if stream is not None:
                stream.lost(why)

        def connectionLost(self, reason: Any = None) -> None:
            for stream in self.by_id.values():
                stream.lost(reason.getErrorMessage() if reason else "closed")
            self.by_id.clear()

    class Factory(protocol.ClientFactory):
        def __init__(self, count: int) -> None:
            self.count = count

        def buildProtocol(self, addr: Any) -> protocol.Protocol:
            proto: protocol.Protocol = H2Watches(self.count)
            connections.append(proto)
            return proto

        def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
            key = f"connect failed: {reason.getErrorMessage()}"
            for _ in range(self.count):
                state["pending"] -= 1
                state["failed"] += 1
                state["statuses"][key] = state["statuses"].get(key, 0) + 1
            pump()

    alpn = [b"h2"]  # HTTP/1.1 watches run on _h1_watch_loop
    tls = tssl.CertificateOptions(acceptableProtocols=alpn)
    per_connection = max(1, args.streams)
    announced = False

    def announce() -> None:
        nonlocal announced
        if not announced:
            announced = True
            print(f"OPENED {state['opened']} {state['failed']}", flush=True)

    def pump() -> None:
        while state["started"] < args.watchers and state["pending"] < args.parallel:
            count = min(per_connection, args.watchers - state["started"])
            state["started"] += count
            state["pending"] += count
            rx.connectSSL("127.0.0.1", args.port, Factory(count), tls, timeout=30)
        if state["started"] >= args.watchers and state["pending"] <= 0:
            announce()

    def summary() -> dict[str, Any]:
        usage = resource.getrusage(resource.RUSAGE_SELF)  # the window's, before the parsing
        latencies = array.array("d")  # from the POST's send time
        scheduled = array.array("d")  # from the slot the POST was scheduled for
        for now, found in arrivals:
            for stamp in found:
                slot, sent = stamp.split(b"Z/")
                scheduled.append(now - float(slot))
                latencies.append(now - float(sent))
        values = sorted(latencies)
        late = sorted(scheduled)
        counts = sorted(s.count for s in streams if s.opened)

        def pct(p: float, data: list[float] = values) -> float | None:
            if not data:
                return None
            return data[min(len(data) - 1, int(p * len(data)))] * 1000.0

        return {
            "opened": state["opened"],
            "failed": state["failed"],
            "statuses": state["statuses"],
            "lost_early": state["lost_early"],
            "delivered": len(values),
            "per_watcher_min": counts[0] if counts else 0,
            "per_watcher_max": counts[-1] if counts else 0,
            "p50_ms": pct(0.50),
            "p90_ms": pct(0.90),
            "p99_ms": pct(0.99),
            "max_ms": values[-1] * 1000.0 if values else None,
            "sched_p50_ms": pct(0.50, late),
            "sched_p99_ms": pct(0.99, late),
            "last_arrival": state["last_arrival"],
            "client_cpu_s": usage.ru_utime + usage.ru_stime,
        }

    def finish() -> None:
        if state["finished"]:
            return
        state["finished"] = True
        print("RESULT " + json.dumps(summary()), flush=True)
        for connection in connections:
            if connection.transport is not None:
                connection.transport.abortConnection()  # type: ignore[attr-defined]
        rx.callLater(0.2, rx.stop)

    def check_done() -> None:
        expected = state["expected"]
        live = [s for s in streams if s.opened]
        if expected is not None and all(s.count >= expected for s in live):
            finish()
        elif time.monotonic() > state["deadline"]:
            finish()

    class Control(LineReceiver):
        delimiter = b"\n"

        def lineReceived(self, line: bytes) -> None:
            parts = line.decode().split()
            if parts and parts[0] == "GO":
                state["expected"] = int(parts[1])
                state["deadline"] = time.monotonic() + float(parts[2])
                task.LoopingCall(check_done).start(0.05)
            elif parts and parts[0] == "STOP":
                finish()

        def connectionLost(self, reason: Any = None) -> None:
            finish()

    if args.proto == "h1":
        return _h1_watch_loop(args, state, streams, Stream, h1_request, summary)
    stdio.StandardIO(Control())
    rx.callLater(args.open_timeout, announce)
    rx.callWhenRunning(pump)
    rx.run()
    return 0


def _h1_watch_loop(
    args: argparse.Namespace,
    state: dict[str, Any],
    streams: list[Any],
    stream_type: Any,
    request_bytes: bytes,
    summary: Any,
) -> int:
    """The HTTP/1.1 watches on a bare epoll loop over pyOpenSSL sockets.

    Why not Twisted here: 1,000 connections each receiving ~50 TLS records a second went
    through ``TLSMemoryBIOProtocol`` (memory BIOs, a protocol wrapper, an exception per
    drained read), which cost this client more CPU than the server spent sending, on the
    same two cores; the tail latency then measured the client. Reading each socket with
    ``SSL_read`` directly does the same decryption with a few Python calls. pyOpenSSL (the
    OpenSSL that ``cryptography`` bundles) is kept, not the ``ssl`` module, so the server
    negotiates the same key exchange (X25519MLKEM768) as with Go clients and the per-watch
    memory stays comparable with earlier runs.
    """
    import selectors

    from OpenSSL import SSL

    sel = selectors.DefaultSelector()
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    context.set_alpn_protos([b"http/1.1"])
    read_event, write_event = selectors.EVENT_READ, selectors.EVENT_WRITE
    connecting, handshaking, heading, streaming = range(4)

    class Watch:
        __slots__ = ("head", "phase", "sock", "stream", "tls")

        def __init__(self) -> None:
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self.sock.setblocking(False)
            self.sock.connect_ex(("127.0.0.1", args.port))
            self.tls = SSL.Connection(context, self.sock)
            self.tls.set_connect_state()
            self.phase = connecting
            self.head = b""
            self.stream = stream_type()
            streams.append(self.stream)
            sel.register(self.sock, write_event, self)

        def close(self) -> None:
            with contextlib.suppress(KeyError, ValueError, OSError):
                sel.unregister(self.sock)
            self.sock.close()

        def fail(self, why: str) -> None:
            self.close()
            self.stream.lost(why)

        def step(self, now: float) -> None:
            if self.phase in (connecting, handshaking):
                self.phase = handshaking
                try:
                    self.tls.do_handshake()
                except SSL.WantReadError:
                    sel.modify(self.sock, read_event, self)
                    return
                except SSL.WantWriteError:
                    sel.modify(self.sock, write_event, self)
                    return
                except (SSL.Error, OSError) as error:
                    self.fail(f"handshake: {error}")
                    return
                self.tls.sendall(request_bytes)
                self.phase = heading
                sel.modify(self.sock, read_event, self)
            tls, stream = self.tls, self.stream
            try:
                while True:
                    data = tls.recv(262144)
                    if self.phase == heading:
                        self.head += data
                        end = self.head.find(b"\r\n\r\n")
                        if end < 0:
                            continue
                        status = self.head.split(b"\r\n", 1)[0].decode(errors="replace")
                        ok = status.split(" ")[1:2] == ["200"]
                        data, self.head = self.head[end + 4 :], b""
                        self.phase = streaming
                        stream.settle(ok, status)
                        if not ok:
                            self.close()
                            return
                    if data:
                        stream.feed(data, now)
            except SSL.WantReadError:
                return
            except SSL.ZeroReturnError:
                self.fail("closed")
            except (SSL.Error, OSError) as error:
                self.fail(str(error) or type(error).__name__)

    watches: list[Watch] = []

    def pump() -> None:
        while state["started"] < args.watchers and state["pending"] < args.parallel:
            state["started"] += 1
            state["pending"] += 1
            watches.append(Watch())
        if state["started"] >= args.watchers and state["pending"] <= 0:
            announce()

    def announce() -> None:
        if not state.get("announced"):
            state["announced"] = True
            print(f"OPENED {state['opened']} {state['failed']}", flush=True)

    state["pump"] = pump
    control = sys.stdin.fileno()
    os.set_blocking(control, False)
    sel.register(control, read_event, None)
    lines = b""
    open_deadline = time.monotonic() + args.open_timeout
    next_check = 0.0
    pump()
    while not state["finished"]:
        for key, _ in sel.select(timeout=0.05):
            watch = key.data
            if watch is not None:
                watch.step(time.time())
                continue
            chunk = os.read(control, 4096)
            if not chunk:
                state["finished"] = True
                break
            lines += chunk
            while b"\n" in lines:
                line, lines = lines.split(b"\n", 1)
                parts = line.decode().split()
                if parts and parts[0] == "GO":
                    state["expected"] = int(parts[1])
                    state["deadline"] = time.monotonic() + float(parts[2])
                elif parts and parts[0] == "STOP":
                    state["finished"] = True
        now = time.monotonic()
        if now < next_check:
            continue
        next_check = now + 0.05
        if now > open_deadline:
            announce()
        expected = state["expected"]
        if expected is not None:
            live = [s for s in streams if s.opened]
            if all(s.count >= expected for s in live) or now > state["deadline"]:
                state["finished"] = True
    print("RESULT " + json.dumps(summary()), flush=True)
    for watch in watches:
        watch.close()
    return 0


# --------------------------------------------------------------------------------------
# Watch fan-out: the driver
# --------------------------------------------------------------------------------------


@dataclass
class WatchResult:
    proto: str = "h1"
    watchers: int = 0
    opened: int = 0
    failed: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    rss_before_kib: int = 0
    rss_idle_kib: int = 0
    rss_after_kib: int = 0
    sent: int = 0
    send_failed: int = 0
    send_seconds: float = 0.0
    window_s: float = 0.0
    target_rate: float = 0.0
    client: dict[str, Any] = field(default_factory=dict)
    server_cpu_s: float = 0.0
    wall_s: float = 0.0
    error: str = ""

    @property
    def per_watcher_kib(self) -> float | None:
        if not self.opened:
            return None
        return (self.rss_idle_kib - self.rss_before_kib) / self.opened


def _read_lines(stream: Any, into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line.rstrip("\n"))
    into.put("")


def _expect(lines: queue.Queue[str], prefix: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {prefix} from the watch client")
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line == "":
            raise RuntimeError(f"watch client ended before {prefix}")
        if line.startswith(prefix):
            return line[len(prefix) :].strip()


def send_events(
    server: Server, rate: float, seconds: float, threads: int = 32
) -> tuple[int, int, float]:
    """POST ``rate`` events/s for ``seconds``; returns (created, failed, seconds taken).

    Each event's slot is fixed in advance and stamped next to the actual send time: when
    the server is too busy to take creates at the rate, the sends fall behind their slots,
    which shows as a lower achieved rate and as latency counted from the slot. Slots still
    unsent 2 s after the window are not sent at all.
    """
    total = int(rate * seconds)
    # Connect (TLS handshakes included) before the window: the window measures the fan-out
    # of steady creates, not 32 handshakes in its first milliseconds, whose delay made the
    # senders catch up afterwards at well above the rate.
    conns = [server.connection(timeout=30) for _ in range(threads)]
    for conn in conns:
        conn.connect()
    start = time.monotonic() + 0.2
    wall_start = time.time() + (start - time.monotonic())
    # Slots not sent by then are dropped: the run stays bounded when the server is slow.
    stop_at = start + seconds + 2.0
    sent = [0] * threads
    failed = [0] * threads

    def worker(k: int) -> None:
        conn = conns[k]
        try:
            for i in range(k, total, threads):
                if time.monotonic() > stop_at:
                    break
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                slot = wall_start + i / rate
                note = f"{STAMP}{slot:.6f}Z/{time.time():.6f}Z #{i}"
                body = event_body(WATCH_NS, note=note)
                try:
                    status, _ = request(server, "POST", events_path(WATCH_NS), body, conn=conn)
                except (OSError, http.client.HTTPException):
                    conn.close()
                    conn = server.connection(timeout=30)
                    status = 0
                if status == 201:
                    sent[k] += 1
                else:
                    failed[k] += 1
        finally:
            conn.close()

    pool = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(seconds + 60)
    return sum(sent), sum(failed), time.monotonic() - start


def run_watch(
    procs: Processes,
    server: Server,
    watchers: int,
    rate: float,
    seconds: float,
    drain: float,
    proto: str = "h1",
    profile: Path | None = None,
) -> WatchResult:
    """Open the watches, read the idle RSS growth, create stamped events, collect latency."""
    result = WatchResult(proto=proto, watchers=watchers, target_rate=rate, window_s=seconds)
    wall = time.monotonic()
    # Warm the watch path (first watch may build caches) and read the current revision.
    status, body = request(server, "GET", events_path(WATCH_NS))
    if status != 200:
        result.error = f"list {WATCH_NS}: {status} {body[:200]!r}"
        return result
    rv = json.loads(body)["metadata"]["resourceVersion"]
    with contextlib.suppress(OSError, http.client.HTTPException):
        request(
            server,
            "GET",
            events_path(WATCH_NS, query=f"watch=1&resourceVersion={rv}&timeoutSeconds=1"),
            timeout=5,
        )
    # Warm the create path too (its first call fills lazily built caches), in a namespace
    # nobody watches.
    for _ in range(20):
        request(server, "POST", events_path(WARM_NS), event_body(WARM_NS))
    time.sleep(0.5)
    result.rss_before_kib = server.rss_kib()

    path = events_path(WATCH_NS, query=f"watch=1&resourceVersion={rv}")
    client = procs.start(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--watch-client",
            f"--port={server.port}",
            f"--path={path}",
            f"--watchers={watchers}",
            f"--proto={proto}",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        text=True,
        env=source_env(),
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=_read_lines, args=(client.stdout, lines), daemon=True).start()
    try:
        opened = _expect(lines, "OPENED", 90).split()
        result.opened, result.failed = int(opened[0]), int(opened[1])
        time.sleep(1.0)  # let the server settle with every watch idle
        result.rss_idle_kib = server.rss_kib()
        cpu0 = server.cpu_seconds()
        if profile is not None:
            start_profile(procs, server.proc.pid, seconds, profile)
        if result.opened:
            result.sent, result.send_failed, result.send_seconds = send_events(
                server, rate, seconds
            )
        assert client.stdin is not None
        client.stdin.write(f"GO {result.sent} {drain}\n")
        client.stdin.flush()
        summary = json.loads(_expect(lines, "RESULT", drain + 60))
        result.server_cpu_s = server.cpu_seconds() - cpu0
        result.rss_after_kib = server.rss_kib()
        result.client = summary
        result.statuses = summary.get("statuses", {})
    except (TimeoutError, RuntimeError, ValueError) as error:
        result.error = str(error)
    finally:
        Processes.stop(client, 15)
    result.wall_s = time.monotonic() - wall
    return result


# --------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------


@dataclass
class Row:
    metric: str
    value: str
    ratio: str = ""
    target: str = ""
    verdict: str = ""  # "meets", "BELOW", or "" (reference/no target)


def _ratio_row(metric: str, value: str, ratio: float | None, target: float, what: str) -> Row:
    if ratio is None:
        return Row(metric, value, "n/a", f"{what} ≥ {target:g}", "n/a")
    verdict = "meets" if ratio >= target else "BELOW"
    return Row(metric, value, f"{what} = {ratio:.2f}", f"≥ {target:g}", verdict)


def build_rows(
    loads: dict[tuple[str, str], LoadResult], watches: Sequence[WatchResult]
) -> list[Row]:
    rows: list[Row] = []

    def fmt(res: LoadResult | None, unit: str = "req/s") -> str:
        if res is None:
            return "not run"
        if res.error and not res.ok:
            return f"error: {res.error[:80]}"
        extra = ""
        if res.non_2xx or res.failed:
            extra = f" ({res.non_2xx} non-2xx, {res.failed} failed)"
        return f"{res.rps:,.0f} {unit}{extra}"

    def rate(key: tuple[str, str]) -> float | None:
        res = loads.get(key)
        return res.rps if res is not None and res.valid else None

    def ceiling_rate(proto: str) -> float | None:
        found = [r for r in (rate(("ceiling", proto)), rate(("ceiling-after", proto))) if r]
        return sum(found) / len(found) if found else None

    for proto, name in (("h1", "HTTP/1.1"), ("h2", "HTTP/2")):
        mean = ceiling_rate(proto)
        first, second = loads.get(("ceiling", proto)), loads.get(("ceiling-after", proto))
        value = fmt(first) if mean is None else f"{mean:,.0f} req/s"
        if mean is not None:
            value += f" (first {fmt(first)}, last {fmt(second)})"
        rows.append(Row(f"ceiling GET, {name}", value, "", "reference: mean of 2 runs"))
    c1, c2 = ceiling_rate("h1"), ceiling_rate("h2")
    rows.append(
        Row(
            "ceiling h2/h1",
            "",
            f"{c2 / c1:.2f}" if c1 and c2 else "n/a",
            "reference",
        )
    )
    specs = (
        ("create", "create (POST, generateName)", 0.50, "create/ceiling", 1),
        ("get", "get one event", 0.70, "get/ceiling", 1),
        ("list", f"list {LIST_SIZE} events", 40.0, f"lists/s x {LIST_SIZE}/ceiling", LIST_SIZE),
    )
    for key, label, target, what, mult in specs:
        for proto, name in (("h1", "HTTP/1.1"), ("h2", "HTTP/2")):
            res = loads.get((key, proto))
            ceiling = c1 if proto == "h1" else c2
            mine = rate((key, proto))
            ratio = mine * mult / ceiling if mine is not None and ceiling else None
            unit = "lists/s" if key == "list" else "req/s"
            rows.append(_ratio_row(f"{label}, {name}", fmt(res, unit), ratio, target, what))
        m1, m2 = rate((key, "h1")), rate((key, "h2"))
        rows.append(
            _ratio_row(f"{label}, h2 vs h1", "", m2 / m1 if m1 and m2 else None, 0.8, "h2/h1")
        )
    # Protobuf and core/v1 against their JSON events.k8s.io/v1 counterparts, same protocol.
    compared = (
        ("create-pb", "create", "create protobuf (POST, generateName)", 0.9, "req/s"),
        ("get-pb", "get", "get one event, protobuf", None, "req/s"),
        ("list-pb", "list", f"list {LIST_SIZE} events, protobuf", 1.0, "lists/s"),
        ("create-core", "create", "create core/v1 (POST, generateName)", None, "req/s"),
    )
    for key, base, label, goal, unit in compared:
        for proto, name in (("h1", "HTTP/1.1"), ("h2", "HTTP/2")):
            res = loads.get((key, proto))
            if res is None:
                continue
            mine, theirs = rate((key, proto)), rate((base, proto))
            ratio = mine / theirs if mine is not None and theirs else None
            what = f"{key}/{base}"
            if goal is None:
                text = f"{what} = {ratio:.2f}" if ratio is not None else "n/a"
                rows.append(Row(f"{label}, {name}", fmt(res, unit), text, "reference"))
            else:
                rows.append(_ratio_row(f"{label}, {name}", fmt(res, unit), ratio, goal, what))
    for watch in watches:
        rows += watch_rows(watch)
    return rows


def watch_rows(watch: WatchResult) -> list[Row]:
    rows: list[Row] = []
    client = watch.client
    opened = f"{watch.opened}/{watch.watchers} watches open"
    if watch.failed:
        opened += f", {watch.failed} failed: {watch.statuses}"
    name = {"h1": "HTTP/1.1", "h2": "HTTP/2"}.get(watch.proto, watch.proto)
    rows.append(Row(f"watch {name}: watchers", opened, "", f"{watch.watchers}", ""))
    per = watch.per_watcher_kib
    if per is None:
        rows.append(Row(f"watch {name}: RSS per idle watcher", "n/a", "", "≤ 30 KiB", "n/a"))
    else:
        before, idle = watch.rss_before_kib / 1024, watch.rss_idle_kib / 1024
        value = f"{per:.1f} KiB ({before:.0f} → {idle:.0f} MiB)"
        rows.append(
            Row(
                f"watch {name}: RSS per idle watcher",
                value,
                "",
                "≤ 30 KiB",
                "meets" if per <= 30 else "BELOW",
            )
        )
    if watch.sent or client:
        achieved = watch.sent / watch.send_seconds if watch.send_seconds else 0.0
        rows.append(
            Row(
                f"watch {name}: create rate during fan-out",
                f"{watch.sent} of {int(watch.target_rate * watch.window_s)} scheduled created"
                f" in {watch.send_seconds:.1f} s"
                + (f" ({watch.send_failed} failed)" if watch.send_failed else ""),
                f"{achieved:.0f}/s",
                f"{watch.target_rate:g}/s",
                "meets" if achieved >= 0.95 * watch.target_rate else "BELOW",
            )
        )
        expected = watch.sent * watch.opened
        delivered = int(client.get("delivered", 0))
        share = delivered / expected if expected else 0.0
        rows.append(
            Row(
                f"watch {name}: deliveries",
                f"{delivered:,}/{expected:,}, lost watches {client.get('lost_early', 0)}",
                f"{100 * share:.1f}%",
                "100%",
                "meets" if expected and delivered >= expected else "BELOW",
            )
        )
        p50, p99, pmax = client.get("p50_ms"), client.get("p99_ms"), client.get("max_ms")
        rows.append(
            Row(f"watch {name}: delivery latency p50 (from POST sent)", _ms(p50), "", "", "")
        )
        rows.append(
            Row(
                f"watch {name}: delivery latency p99 (from POST sent)",
                _ms(p99) + f" (max {_ms(pmax)})",
                "",
                "≤ 250 ms",
                "n/a" if p99 is None else ("meets" if p99 <= 250 else "BELOW"),
            )
        )
        rows.append(
            Row(
                f"watch {name}: latency p50 / p99 from the scheduled slot",
                f"{_ms(client.get('sched_p50_ms'))} / {_ms(client.get('sched_p99_ms'))}",
                "",
                "(includes creates held back by a busy server)",
                "",
            )
        )
        rows.append(
            Row(
                f"watch {name}: CPU during fan-out",
                f"server {watch.server_cpu_s:.1f} s, client {client.get('client_cpu_s', 0):.1f} s,"
                f" RSS after {watch.rss_after_kib / 1024:.0f} MiB",
                "",
                "",
                "",
            )
        )
    if watch.error:
        rows.append(Row(f"watch {name}: error", watch.error[:200], "", "", "BELOW"))
    return rows


def _ms(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.0f} ms"


def render(rows: list[Row], meta: dict[str, str], notes: list[str]) -> str:
    out = [SECTION, ""]
    out.append(" · ".join(f"{key}: {value}" for key, value in meta.items()))
    out.append("")
    out.append("| measurement | value | ratio | target | verdict |")
    out.append("| --- | --- | --- | --- | --- |")
    for row in rows:
        verdict = {"BELOW": "**below target**", "meets": "meets"}.get(row.verdict, row.verdict)
        cells = [row.metric, row.value, row.ratio, row.target, verdict]
        out.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    out.append("")
    below = [row for row in rows if row.verdict == "BELOW"]
    missing = [row.metric for row in rows if row.verdict == "n/a"]
    if below:
        judged = len(below) + sum(row.verdict == "meets" for row in rows)
        out.append(f"**Below target ({len(below)} of {judged} figures with a target):**")
        out.append("")
        for row in below:
            got = _cell(row.ratio or row.value)
            out.append(f"- {_cell(row.metric)}: {got} (target {_cell(row.target)})")
    else:
        out.append("Every measured figure meets its target.")
    if missing:
        out.append("")
        out.append("Not measured: " + "; ".join(missing) + ".")
    out.append("")
    out += notes
    out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def merge_section(current: str, text: str, name: str = "api_bench") -> str:
    """``current`` with the section ``name`` (between ``<!-- name:begin -->`` and
    ``<!-- name:end -->``) replaced by ``text``, or appended.

    Everything outside those markers (other scripts' sections, their markers) is kept as is.
    Every script in bench/ writes its section through this.
    """
    begin, end_marker = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{text.rstrip()}\n{end_marker}\n"
    start = current.find(begin)
    end = current.find(end_marker, start) if start >= 0 else -1
    if start >= 0 and end >= 0:
        return current[:start] + block + _after(current, end + len(end_marker))
    return current.rstrip("\n") + "\n\n" + block


def _after(current: str, index: int) -> str:
    rest = current[index:].lstrip("\n")
    return "\n" + rest if rest else ""


def write_section(text: str, path: Path = RESULTS, name: str = "api_bench") -> None:
    """Replace (or append) only the section ``name``; the file is re-read right before
    writing."""
    current = path.read_text() if path.exists() else "# Benchmark results\n"
    merged = merge_section(current, text, name)
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    tmp.write_text(merged)
    os.replace(tmp, path)


# --------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def running(procs: Processes) -> Iterator[None]:
    old = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        procs.stop_all()
        signal.signal(signal.SIGTERM, old)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--watch-client":
        return watch_client_main(argv[1:])
    parser = argparse.ArgumentParser(description="Event API benchmark (see module docstring).")
    parser.add_argument("--quick", action="store_true", help="shorter runs (about 1 minute)")
    parser.add_argument("--no-write", action="store_true", help="do not touch bench/RESULTS.md")
    parser.add_argument("--watchers", type=int, default=1000)
    parser.add_argument("--watch-rate", type=float, default=200.0, help="events/s")
    parser.add_argument("--skip-watch", action="store_true")
    parser.add_argument(
        "--watch-proto",
        default="h1,h2",
        choices=("h1", "h2", "h1,h2"),
        help="watches over HTTP/1.1 (one connection each), HTTP/2 (100 streams a "
        "connection), or both, one after the other (the default)",
    )
    parser.add_argument(
        "--server-cmd",
        default="",
        help="command for the API server; {port}, {cert_dir}, {data_dir} are substituted "
        "(default: twistd apiserver from the working tree)",
    )
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument(
        "--skip-protobuf",
        action="store_true",
        help="leave out the protobuf get/list/create and the core/v1 create runs",
    )
    parser.add_argument(
        "--audit",
        action="store_true",
        help="run the daemon with every request audited at Metadata level to a log file in "
        "batch mode (compare with a run without it)",
    )
    parser.add_argument(
        "--workers",
        default="1",
        help="the daemon's --workers (worker processes on the one port; 1 by default)",
    )
    parser.add_argument(
        "--backend",
        choices=("sqlite", "etcd3"),
        default="sqlite",
        help="the daemon's store: the embedded one, or an etcd this script starts (Debian "
        "etcd-server, the tests' launcher) and stops",
    )
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="record the daemon with py-spy during each API run (implies --no-write)",
    )
    args = parser.parse_args(argv)
    if shutil.which("h2load") is None:
        print("h2load not found: apt-get install nghttp2-client", file=sys.stderr)
        return 2
    with contextlib.suppress(ValueError, OSError):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = min(hard, max(soft, 4 * args.watchers + 256))
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    seconds, warmup = (2.0, 0.5) if args.quick else (5.0, 1.0)
    watch_seconds, drain = (5.0, 10.0) if args.quick else (10.0, 20.0)
    started = time.monotonic()
    profile_dir = Path(args.profile) if args.profile else None
    if profile_dir:
        profile_dir.mkdir(parents=True, exist_ok=True)
    procs = Processes()
    loads: dict[tuple[str, str], LoadResult] = {}
    watches: list[WatchResult] = []
    notes: list[str] = []
    api_error = ""
    tmp = Path(tempfile.mkdtemp(prefix="api-bench-"))
    etcd: Any = None
    with running(procs):
        try:
            extra = [f"--workers={args.workers}"]
            if args.backend == "etcd3":
                etcd = start_etcd(tmp / "etcd")
                extra.append(f"--store-servers={etcd.client_url}")
                notes.append(f"Store: etcd ({etcd.client_url}), --workers={args.workers}.")
            else:
                notes.append(f"Store: embedded SQLite, --workers={args.workers}.")
            ceiling = start_ceiling(procs, tmp / "ceiling")
            if not args.skip_load:
                daemon = start_daemon(procs, tmp / "load", args.server_cmd, args.audit, extra)
                status, text = events_api_status(daemon)
                if status != 200:
                    api_error = f"Events API not answering: {status} {text}"
                    print(api_error, file=sys.stderr)
                else:
                    prepare_data(daemon)
                body = tmp / "create.json"
                body.write_bytes(event_body(CREATE_NS))
                json_type = "application/json"
                runs: list[tuple[str, Server, str, Path | None, str, str]] = [
                    ("ceiling", ceiling, "/", None, json_type, json_type),
                ]
                if not api_error:
                    runs += [
                        ("create", daemon, events_path(CREATE_NS), body, json_type, json_type),
                        ("get", daemon, events_path(GET_NS, GET_NAME), None, json_type, json_type),
                        ("list", daemon, events_path(LIST_NS), None, json_type, json_type),
                    ]
                if not api_error and not args.skip_protobuf:
                    pb_body = tmp / "create.pb"
                    pb_body.write_bytes(protobuf_event_body(CREATE_NS))
                    core_body = tmp / "create-core.json"
                    core_body.write_bytes(core_event_body(CREATE_NS))
                    runs += [
                        ("create-pb", daemon, events_path(CREATE_NS), pb_body, PROTOBUF, PROTOBUF),
                        ("get-pb", daemon, events_path(GET_NS, GET_NAME), None, PROTOBUF, PROTOBUF),
                        ("list-pb", daemon, events_path(LIST_NS), None, PROTOBUF, PROTOBUF),
                        (
                            "create-core",
                            daemon,
                            core_events_path(CREATE_NS),
                            core_body,
                            json_type,
                            json_type,
                        ),
                    ]
                # The ceiling again at the end: the mean of both runs is the reference, so
                # that a drift of the machine's speed during the run shows and averages out.
                runs.append(("ceiling-after", ceiling, "/", None, json_type, json_type))
                for key, server, path, data, accept, content_type in runs:
                    for proto in ("h1", "h2"):
                        headers = [f"accept: {accept}"]
                        if data is not None:
                            headers.append(f"content-type: {content_type}")
                        spy = None
                        if profile_dir and server is not ceiling:
                            spy = start_profile(
                                procs,
                                server.proc.pid,
                                seconds + warmup,
                                profile_dir / f"{key}-{proto}.txt",
                            )
                        res = run_h2load(
                            key, proto, server.base + path, seconds, warmup, data, headers
                        )
                        if spy is not None:
                            with contextlib.suppress(subprocess.TimeoutExpired):
                                spy.wait(30)
                        loads[(key, proto)] = res
                        print(
                            f"{key:13} {proto}: {res.rps:10,.1f} req/s  ok={res.ok} "
                            f"non2xx={res.non_2xx} failed={res.failed} mean={res.mean_ms:.2f} ms "
                            f"{res.error[:200]}",
                            flush=True,
                        )
                Processes.stop(daemon.proc)
                if profile_dir:
                    for stacks in sorted(profile_dir.glob("*.txt")):
                        print(f"\n### py-spy {stacks.stem}\n{summarize_profile(stacks)}")
            protos = [] if args.skip_watch or api_error else args.watch_proto.split(",")
            for proto in protos:
                left = TOTAL_BUDGET - (time.monotonic() - started)
                if left < watch_seconds + drain + 40:
                    notes.append(f"Watch fan-out over {proto} skipped: time budget used up.")
                    continue
                daemon2 = start_daemon(
                    procs, tmp / f"watch-{proto}", args.server_cmd, args.audit, extra
                )
                stacks_out = profile_dir / f"watch-{proto}.txt" if profile_dir else None
                watch = run_watch(
                    procs,
                    daemon2,
                    args.watchers,
                    args.watch_rate,
                    watch_seconds,
                    drain,
                    proto,
                    stacks_out,
                )
                watches.append(watch)
                print(f"watch: {watch}", flush=True)
                Processes.stop(daemon2.proc)
                if stacks_out is not None:
                    print(f"\n### py-spy watch-{proto}\n{summarize_profile(stacks_out)}")
        finally:
            procs.stop_all()
            if etcd is not None:
                etcd.stop()
            shutil.rmtree(tmp, ignore_errors=True)

    rows = build_rows(loads, watches)
    meta = {
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": str(os.cpu_count()),
        "python": platform.python_version(),
        "mode": "quick" if args.quick else "full",
        "h2load": f"{seconds:g} s + {warmup:g} s warm-up per run, "
        f"h1 -c {H1_CLIENTS} -m {H1_STREAMS}, h2 -c {H2_CLIENTS} -m {H2_STREAMS}",
    }
    if api_error:
        notes.append(api_error)
    notes.append(
        "Ratios compare with the ceiling of the same protocol (bench/ceiling_server.py: bare "
        "twisted.web Site, same TLS, fixed ~300-byte body). Watch latency runs from the "
        "creating POST's send time to arrival on each watch; client and server share the "
        "machine's cores."
    )
    report = render(rows, meta, notes)
    print()
    print(report)
    if api_error:
        print("RESULTS.md left as it is: the Event API did not answer.", file=sys.stderr)
    elif not args.no_write and not profile_dir:
        write_section(report)
        print(f"written to {RESULTS.relative_to(REPO)}")
    return 1 if api_error else 0


if __name__ == "__main__":
    sys.exit(main())
