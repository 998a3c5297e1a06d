"""Soak run: mixed load for a long time, with a server restart every so often (issue 17).

```
. .venv/bin/activate
python bench/soak.py                  # 30 minutes, a restart every 10, 200 watches
python bench/soak.py --quick          # about 40 s: the same checks, small numbers
python bench/soak.py --duration 60 --restart-every 30 --watches 20 --no-write
```

Load, all against one daemon on the embedded store (the repository's ``src/``, started and
restarted with the integration tests' launcher): writer threads create events, patch and
delete some of them and list a namespace now and then; ``--watches`` watches (one thread,
non-blocking sockets) read everything and reconnect whenever they end; ``--event-ttl`` is
short, so TTL expiry deletes events all along. Every ``--restart-every`` seconds the server
is stopped (SIGTERM) and started again on the same data.

What it checks and reports (in ``RESULTS.md`` between ``<!-- soak:begin -->`` and
``<!-- soak:end -->`` unless ``--no-write``):

- memory: the server's RSS (from /proc) sampled every few seconds; for each server
  lifetime, the growth from the end of its warm-up (the first quarter) to its end, which
  must stay within 10%;
- no acknowledged write lost: at the end, every event whose create was acknowledged, whose
  delete was not, and which is younger than the TTL less a margin, is read back;
- TTL expiry: events older than the TTL plus a margin are gone;
- no 5xx (nor a connection error) outside the restart windows (stop to ready + 2 s).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import http.client
import json
import platform
import random
import selectors
import socket
import ssl
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

from tests.integration.daemon import Daemon  # noqa: E402

NAMESPACES = ("soak-a", "soak-b", "soak-c")
MARKER_BEGIN = "<!-- soak:begin -->"
MARKER_END = "<!-- soak:end -->"


@dataclass
class Tally:
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: name -> (namespace, time of its last acknowledged create or patch)
    created: dict[str, tuple[str, float]] = field(default_factory=dict)
    deleted: set[str] = field(default_factory=set)
    ops: dict[str, int] = field(default_factory=dict)
    #: (time, what) of every 5xx or connection error
    errors: list[tuple[float, str]] = field(default_factory=list)
    watch_lines: int = 0
    watch_reconnects: int = 0

    def count(self, op: str) -> None:
        with self.lock:
            self.ops[op] = self.ops.get(op, 0) + 1


@dataclass
class Restarts:
    #: (stop began, ready again + 2 s) of every restart
    windows: list[tuple[float, float]] = field(default_factory=list)
    #: (pid, start time, end time) of every server lifetime
    lifetimes: list[tuple[int, float, float]] = field(default_factory=list)

    def during(self, t: float) -> bool:
        return any(a <= t <= b for a, b in self.windows)


def event(namespace: str, name: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": namespace},
            "reason": "Soak",
            "message": "soak " + "x" * random.randint(50, 800),
            "type": "Normal",
        }
    ).encode()


def writer(d: Daemon, n: int, tally: Tally, stop: threading.Event) -> None:
    conn: http.client.HTTPSConnection | None = None
    i = 0
    rng = random.Random(n)
    mine: list[tuple[str, str]] = []
    while not stop.is_set():
        i += 1
        roll = rng.random()
        namespace = NAMESPACES[i % len(NAMESPACES)]
        if roll < 0.6 or not mine:
            op, name = "create", f"w{n}-{i}"
            method, path = "POST", f"/api/v1/namespaces/{namespace}/events"
            body, ctype = event(namespace, name), "application/json"
        elif roll < 0.75:
            namespace, name = rng.choice(mine)
            op, method = "patch", "PATCH"
            path = f"/api/v1/namespaces/{namespace}/events/{name}"
            body = json.dumps({"message": f"patched {i}"}).encode()
            ctype = "application/merge-patch+json"
        elif roll < 0.85:
            namespace, name = mine.pop(rng.randrange(len(mine)))
            op, method = "delete", "DELETE"
            path = f"/api/v1/namespaces/{namespace}/events/{name}"
            body, ctype = b"", "application/json"
        else:
            op, method, name = "list", "GET", ""
            path, body, ctype = f"/api/v1/namespaces/{namespace}/events?limit=500", b"", ""
        try:
            if conn is None:
                conn = http.client.HTTPSConnection(
                    "127.0.0.1", d.port, context=d.ssl_context(), timeout=30
                )
            headers = {"Content-Type": ctype} if ctype else {}
            conn.request(method, path, body=body or None, headers=headers)
            response = conn.getresponse()
            response.read()
        except (OSError, http.client.HTTPException) as error:
            conn = None
            with tally.lock:
                tally.errors.append((time.monotonic(), f"{op}: {error.__class__.__name__}"))
            time.sleep(0.05)
            continue
        tally.count(op)
        now = time.monotonic()
        if response.status >= 500:
            with tally.lock:
                tally.errors.append((now, f"{op}: {response.status}"))
        elif op == "create" and response.status == 201:
            with tally.lock:
                tally.created[name] = (namespace, now)
            mine.append((namespace, name))
        elif op == "patch" and response.status == 200:
            with tally.lock:
                tally.created[name] = (namespace, now)  # an update renews the TTL
        elif op == "delete" and response.status == 200:
            with tally.lock:
                tally.deleted.add(name)


class Watches:
    """``count`` watches read by one thread; each reconnects when it ends."""

    def __init__(self, d: Daemon, count: int, tally: Tally) -> None:
        self.d, self.count, self.tally = d, count, tally
        self.sel = selectors.DefaultSelector()
        self.stop = threading.Event()
        self.missing = count

    def _open(self, k: int) -> bool:
        namespace = NAMESPACES[k % len(NAMESPACES)]
        try:
            raw = socket.create_connection(("127.0.0.1", self.d.port), timeout=5)
            context = self.d.ssl_context()
            context.set_alpn_protocols(["http/1.1"])
            sock = context.wrap_socket(raw)
            path = f"/api/v1/namespaces/{namespace}/events?watch=1&allowWatchBookmarks=true"
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n".encode())
            sock.setblocking(False)
        except OSError:
            return False
        self.sel.register(sock, selectors.EVENT_READ, k)
        return True

    def run(self) -> None:
        pending = list(range(self.count))
        next_try = 0.0
        while not self.stop.is_set():
            if pending and time.monotonic() >= next_try:
                pending = [k for k in pending if not self._open(k)]
                next_try = time.monotonic() + 0.5
            for key, _ in self.sel.select(timeout=0.2):
                sock = key.fileobj
                try:
                    data = sock.recv(65536)  # type: ignore[union-attr]
                except ssl.SSLWantReadError:
                    continue
                except OSError:
                    data = b""
                if data:
                    with self.tally.lock:
                        self.tally.watch_lines += data.count(b"\n")
                    continue
                self.sel.unregister(sock)
                sock.close()  # type: ignore[union-attr]
                pending.append(key.data)
                with self.tally.lock:
                    self.tally.watch_reconnects += 1
        for key in list(self.sel.get_map().values()):
            key.fileobj.close()  # type: ignore[union-attr]


def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/soak.py")
    parser.add_argument("--duration", type=float, default=1800.0, help="seconds of load")
    parser.add_argument("--restart-every", type=float, default=600.0)
    parser.add_argument("--watches", type=int, default=200)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--event-ttl", type=float, default=120.0, help="seconds")
    parser.add_argument("--quick", action="store_true", help="about 40 s, small numbers")
    parser.add_argument("--no-write", action="store_true", help="leave RESULTS.md alone")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.restart_every, args.watches = 30.0, 15.0, 10
        args.writers, args.event_ttl = 2, 10.0

    work = Path(tempfile.mkdtemp(prefix="soak-"))
    d = Daemon(work / "server", [f"--event-ttl={args.event_ttl:g}s"])
    tally, restarts = Tally(), Restarts()
    samples: list[tuple[float, int, int]] = []  # (time, pid, rss KiB)
    stop = threading.Event()
    d.start(timeout=60)
    assert d.proc is not None
    t0 = life_start = time.monotonic()
    watches = Watches(d, args.watches, tally)
    threads = [threading.Thread(target=watches.run, daemon=True)]
    threads += [
        threading.Thread(target=writer, args=(d, n, tally, stop), daemon=True)
        for n in range(args.writers)
    ]
    for t in threads:
        t.start()
    next_restart = t0 + args.restart_every
    try:
        while time.monotonic() - t0 < args.duration:
            time.sleep(min(5.0, args.duration / 20))
            now = time.monotonic()
            samples.append((now - t0, d.proc.pid, rss_kib(d.proc.pid)))
            if now >= next_restart and now - t0 < args.duration - 5:
                restarts.lifetimes.append((d.proc.pid, life_start - t0, now - t0))
                began = time.monotonic()
                d.stop()
                d.start(timeout=60)
                life_start = time.monotonic()
                restarts.windows.append((began, life_start + 2.0))
                next_restart = life_start + args.restart_every
        restarts.lifetimes.append((d.proc.pid, life_start - t0, time.monotonic() - t0))
        stop.set()
        watches.stop.set()
        for t in threads:
            t.join(30)

        # Acknowledged writes: everything young enough to have escaped the TTL is there.
        time.sleep(1.0)
        end = time.monotonic()
        present: set[str] = set()
        for namespace in NAMESPACES:
            status, _, raw = d.get(f"/api/v1/namespaces/{namespace}/events", timeout=60)
            assert status == 200, raw
            present |= {i["metadata"]["name"] for i in json.loads(raw)["items"]}
        margin = max(3.0, args.event_ttl * 0.2)
        young = {
            n
            for n, (_, t) in tally.created.items()
            if end - t < args.event_ttl - margin and n not in tally.deleted
        }
        old = {n for n, (_, t) in tally.created.items() if end - t > args.event_ttl + margin}
        lost = young - present
        not_expired = old & present
    finally:
        stop.set()
        watches.stop.set()
        d.stop()

    bad = [(t, what) for t, what in tally.errors if not restarts.during(t)]
    rows = []
    memory_ok = True
    for pid, start, stop_at in restarts.lifetimes:
        own = [(t, r) for t, p, r in samples if p == pid and r]
        if len(own) < 4:
            rows.append((pid, start, stop_at, 0, 0, 0.0))
            continue
        warm = own[len(own) // 4][1]
        last = own[-1][1]
        growth = (last - warm) / warm * 100 if warm else 0.0
        memory_ok &= growth <= 10.0
        rows.append((pid, start, stop_at, warm, last, growth))

    ok = memory_ok and not lost and not bad and not not_expired
    lines = [
        MARKER_BEGIN,
        f"## Soak (`bench/soak.py`), {_dt.datetime.now(_dt.UTC):%Y-%m-%d %H:%M} UTC",
        "",
        f"Command: `python bench/soak.py {' '.join(argv if argv is not None else sys.argv[1:])}`"
        f" on {platform.node()} (Python {platform.python_version()}, {platform.release()}).",
        f"{args.duration:g} s, restart every {args.restart_every:g} s, {args.watches} watches, "
        f"{args.writers} writers, event TTL {args.event_ttl:g} s.",
        "",
        "| server lifetime (s) | RSS after warm-up (MiB) | RSS at end (MiB) | growth |",
        "|---|---|---|---|",
    ]
    for _, start, stop_at, warm, last, growth in rows:
        mib = f"{warm / 1024:.1f} | {last / 1024:.1f}"
        lines.append(f"| {start:.0f}-{stop_at:.0f} | {mib} | {growth:+.1f}% |")
    ops = ", ".join(f"{k} {v}" for k, v in sorted(tally.ops.items()))
    lines += [
        "",
        f"Operations: {ops}; watch lines read {tally.watch_lines}, watch reconnects "
        f"{tally.watch_reconnects}.",
        f"Acknowledged writes checked: {len(young)}, lost: {len(lost)}; expired by TTL as "
        f"expected: {len(old) - len(not_expired)} of {len(old)}.",
        f"5xx or connection errors: {len(tally.errors)}, outside restarts: {len(bad)}"
        + (f" (first: {bad[0][1]})" if bad else "")
        + ".",
        f"Verdict: {'PASS' if ok else 'FAIL'} (memory within 10% after warm-up: {memory_ok}).",
        MARKER_END,
    ]
    report = "\n".join(lines)
    print(report)
    if not args.no_write:
        results = REPO / "bench" / "RESULTS.md"
        text = results.read_text()
        if MARKER_BEGIN in text and MARKER_END in text:
            head, rest = text.split(MARKER_BEGIN, 1)
            text = head + report + rest.split(MARKER_END, 1)[1]
        else:
            text = text.rstrip("\n") + "\n\n" + report + "\n"
        results.write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
