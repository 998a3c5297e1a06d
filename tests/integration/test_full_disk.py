"""A full disk under the embedded store (issue 17, defect 9), on a real size-limited file system.

The data directory is a small tmpfs (needs root to mount; skipped otherwise). The test fills
it through the API, then checks: the refused write answers the Status the reference gives for
a store out of space (500 InternalError naming the cause), the condition is logged once and
counted, reads go on, and once space is freed writes are accepted again without a restart and
without a checkpoint growing the database file into the freed space.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemon import Daemon

pytestmark = pytest.mark.integration

BASE = "/api/v1/namespaces/default/events"
DISK_MIB = 8


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a size-limited tmpfs needs root")
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_MIB}m", "tmpfs", str(mount)],
        capture_output=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {result.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def event(name: str, size: int = 100_000) -> bytes:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "annotations": {"pad": "x" * size}},
            "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default"},
            "reason": "Fill",
            "message": "m",
        }
    ).encode()


def create(d: Daemon, name: str, size: int = 100_000) -> tuple[int, dict[str, object]]:
    status, _, raw = d.get(
        BASE,
        method="POST",
        body=event(name, size),
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    return status, json.loads(raw)


def test_full_disk_refuses_writes_plainly_and_recovers(tmp_path: Path, small_disk: Path) -> None:
    d = Daemon(tmp_path / "server", ["--watch-cache=false"])
    d.data_dir = small_disk / "data"
    d.log_path = tmp_path / "daemon.log"  # not on the full disk
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (2 << 20))
    try:
        d.start()
        acked: list[str] = []
        refused: dict[str, object] | None = None
        for i in range(200):
            status, body = create(d, f"fill-{i}")
            if status == 201:
                acked.append(f"fill-{i}")
                continue
            assert status == 500, body
            refused = body
            break
        assert refused is not None, "the disk never filled"
        assert acked, "nothing could be written at all"
        assert refused["reason"] == "InternalError", refused
        assert refused["message"] == "Internal error occurred: sqlite: database or disk is full"

        # More refused writes: the same answer, logged once, counted once.
        for i in range(3):
            status, body = create(d, f"more-{i}")
            assert status == 500 and body["reason"] == "InternalError", body
        log = d.log()
        assert log.count("the disk is full") == 1, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
        status, _, metrics = d.get("/metrics")
        assert status == 200
        assert b"apiserver_storage_out_of_space_total{" in metrics
        line = next(
            x
            for x in metrics.decode().splitlines()
            if x.startswith("apiserver_storage_out_of_space_total{")
        )
        assert line.endswith(" 1.0"), line

        # Reads go on.
        status, _, raw = d.get(f"{BASE}/{acked[0]}", timeout=30)
        assert status == 200, raw
        status, _, raw = d.get(BASE, timeout=30)
        assert status == 200, raw
        assert {i["metadata"]["name"] for i in json.loads(raw)["items"]} == set(acked)

        # Space freed (less than the WAL holds): writes are accepted again at once, and no
        # checkpoint grows the database file into that space.
        db = d.data_dir / "store.db"
        db_size = db.stat().st_size
        filler.unlink()
        status, body = create(d, "after-0", size=1000)
        assert status == 201, body
        for i in range(1, 5):
            status, body = create(d, f"after-{i}", size=1000)
            assert status == 201, body
        assert db.stat().st_size == db_size
        assert "writes accepted again" in d.log()
    finally:
        d.stop()
        with contextlib.suppress(OSError):
            filler.unlink()
