"""Watch replay memory (issue 17, defect 3), measured from /proc on the real daemon.

A watch from ``resourceVersion=0`` replays every stored event first. A client that opens one
and never reads must not make the server buffer the whole replay (it used to: the replay was
written into the connection at once), dropping it must give everything back, and a client
reading the replay must not cost memory proportional to it either.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

from tests.integration.daemon import Daemon

pytestmark = pytest.mark.integration

BASE = "/api/v1/namespaces/default/events"
EVENTS = 300
PAD = 40_000
REPLAY_BYTES = EVENTS * PAD  # about 12 MB of JSON


def rss(pid: int) -> int:
    """Resident set size in bytes, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def settle(pid: int, seconds: float = 1.5) -> int:
    time.sleep(seconds)
    return rss(pid)


def fill(d: Daemon) -> None:
    conn = http.client.HTTPSConnection("127.0.0.1", d.port, context=d.ssl_context(), timeout=60)
    try:
        for i in range(EVENTS):
            body = json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Event",
                    "metadata": {"name": f"big-{i}", "annotations": {"pad": "x" * PAD}},
                    "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
                    "reason": "Replay",
                    "message": "m",
                }
            ).encode()
            conn.request("POST", BASE, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            assert response.status == 201, response.read()
            response.read()
    finally:
        conn.close()


def open_watch(d: Daemon) -> ssl.SSLSocket:
    """A watch from resourceVersion=0 whose client never reads (a small receive buffer)."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", d.port))
    context = d.ssl_context()
    context.set_alpn_protocols(["http/1.1"])
    sock = context.wrap_socket(raw)
    sock.sendall(
        f"GET {BASE}?watch=1&resourceVersion=0 HTTP/1.1\r\nHost: x\r\n\r\n".encode("ascii")
    )
    return sock


def read_replay(d: Daemon, pause: float = 0.0) -> None:
    """Read a whole replay (``pause`` between reads: a slow reader)."""
    sock = open_watch(d)
    try:
        seen = 0
        data = b""
        sock.settimeout(60)
        while seen < EVENTS:
            chunk = sock.recv(65536)
            assert chunk, "the watch ended early"
            data = data[-200:] + chunk
            seen += chunk.count(b'"type":"ADDED"')
            if pause:
                time.sleep(pause)
    finally:
        sock.close()


def test_replay_respects_back_pressure_and_is_released(tmp_path: Path) -> None:
    d = Daemon(tmp_path / "server")
    d.start()
    try:
        assert d.proc is not None
        pid = d.proc.pid
        fill(d)
        # Warm the caches a replay legitimately fills (decoded objects, encoded bytes).
        read_replay(d)
        read_replay(d)
        base = settle(pid)

        # Watches that never read: the server keeps a chunk each, not the replay.
        socks = [open_watch(d) for _ in range(3)]
        try:
            stalled = settle(pid, 3.0)
        finally:
            for s in socks:
                s.close()
        growth = stalled - base
        assert growth < REPLAY_BYTES, (
            f"3 stalled replays grew the server by {growth >> 20} MiB "
            f"(replay {REPLAY_BYTES >> 20} MiB)"
        )

        # Open and drop, again and again: nothing accumulates.
        after_first = settle(pid)
        for _ in range(5):
            socks = [open_watch(d) for _ in range(2)]
            time.sleep(0.5)
            for s in socks:
                s.close()
        dropped = settle(pid, 2.0)
        assert dropped - after_first < REPLAY_BYTES // 2, (
            f"open-and-drop grew the server by {(dropped - after_first) >> 20} MiB"
        )

        # A slow reading replay: memory sampled while it runs stays well below the replay.
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], rss(pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            read_replay(d, pause=0.002)
        finally:
            done.set()
            sampler.join()
        assert peak[0] - dropped < REPLAY_BYTES // 2, (
            f"a reading replay grew the server by {(peak[0] - dropped) >> 20} MiB"
        )
    finally:
        d.stop()
