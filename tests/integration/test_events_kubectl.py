"""kubectl against the real daemon, on both backends: create, get (table, json, yaml), patch
of every type, server-side apply, delete and a watch."""

from __future__ import annotations

import json
import queue
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import IO

import pytest
import yaml

from tests.integration.api_fixtures import ApiServer, api_server  # noqa: F401 - fixture

KUBECTL = shutil.which("kubectl")
#: ``ev``/``events`` resolve to core/v1 (kubectl ranks the core group first); these tests are
#: about events.k8s.io/v1, so they name it in full.
EV = "events.v1.events.k8s.io"
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")


def kubectl(
    server: ApiServer, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(server.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=server.daemon.workdir,
    )


def event_manifest(name: str, namespace: str, note: str = "hello") -> str:
    return f"""apiVersion: events.k8s.io/v1
kind: Event
metadata:
  name: {name}
  namespace: {namespace}
  labels:
    app: demo
eventTime: "2026-11-22T10:00:00.000001Z"
reportingController: example.com/controller
reportingInstance: controller-1
action: Create
reason: Created
type: Normal
note: {note}
regarding:
  kind: Pod
  namespace: {namespace}
  name: web-1
"""


@pytest.fixture
def namespace() -> str:
    return "k-" + uuid.uuid4().hex[:8]


def test_create_and_get_forms(api_server: ApiServer, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "ev.yaml"
    manifest.write_text(event_manifest("k1", namespace))
    out = kubectl(api_server, "create", "-f", str(manifest))
    assert out.returncode == 0, out.stderr
    assert "k1 created" in out.stdout
    table = kubectl(api_server, "get", EV, "-n", namespace)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert "pod/web-1" in table.stdout
    assert "Created" in table.stdout
    wide = kubectl(api_server, "get", EV, "-n", namespace, "-o", "wide")
    assert "SUBOBJECT" in wide.stdout and "COUNT" in wide.stdout
    as_json = json.loads(kubectl(api_server, "get", EV, "k1", "-n", namespace, "-o", "json").stdout)
    assert as_json["apiVersion"] == "events.k8s.io/v1"
    assert as_json["note"] == "hello"
    as_yaml = yaml.safe_load(
        kubectl(api_server, "get", EV, "k1", "-n", namespace, "-o", "yaml").stdout
    )
    assert as_yaml["metadata"]["name"] == "k1"
    listed = json.loads(
        kubectl(api_server, "get", "events.events.k8s.io", "-A", "-o", "json").stdout
    )
    assert listed["kind"] == "List" or listed["kind"] == "EventList"
    assert any(i["metadata"]["name"] == "k1" for i in listed["items"])


def test_patch_all_types(api_server: ApiServer, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "ev.yaml"
    manifest.write_text(event_manifest("p1", namespace))
    assert kubectl(api_server, "create", "-f", str(manifest)).returncode == 0
    for kind, patch in (
        ("merge", '{"metadata":{"labels":{"merge":"yes"}}}'),
        ("strategic", '{"metadata":{"labels":{"strategic":"yes"}}}'),
        ("json", '[{"op":"add","path":"/metadata/labels/json","value":"yes"}]'),
    ):
        out = kubectl(api_server, "patch", EV, "p1", "-n", namespace, "--type", kind, "-p", patch)
        assert out.returncode == 0, (kind, out.stderr)
    labels = json.loads(kubectl(api_server, "get", EV, "p1", "-n", namespace, "-o", "json").stdout)[
        "metadata"
    ]["labels"]
    assert labels == {"app": "demo", "merge": "yes", "strategic": "yes", "json": "yes"}
    bad = kubectl(
        api_server,
        "patch",
        EV,
        "p1",
        "-n",
        namespace,
        "--type",
        "merge",
        "-p",
        '{"note":"changed"}',
    )
    assert bad.returncode != 0
    assert "field is immutable" in bad.stderr


def test_server_side_apply(api_server: ApiServer, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    manifest = tmp_path / "ev.yaml"
    manifest.write_text(event_manifest("a1", namespace))
    out = kubectl(api_server, "apply", "--server-side", "-f", str(manifest))
    assert out.returncode == 0, out.stderr
    assert "serverside-applied" in out.stdout
    obj = json.loads(
        kubectl(
            api_server, "get", EV, "a1", "-n", namespace, "-o", "json", "--show-managed-fields"
        ).stdout
    )
    managers = {(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    again = kubectl(api_server, "apply", "--server-side", "-f", str(manifest))
    assert again.returncode == 0, again.stderr


class LineReader:
    """Lines of a child's stdout as they come (a thread reads; the test waits on a queue)."""

    def __init__(self, stream: IO[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, line: str, count: int = 1, timeout: float = 30.0) -> None:
        """Until ``line`` has been printed ``count`` times; fails at EOF or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while self.lines.count(line) < count:
            try:
                got = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no {line!r} x{count} in {self.lines}") from None
            if got is None:
                raise AssertionError(f"EOF before {line!r} x{count} in {self.lines}")
            self.lines.append(got)


def test_delete_and_watch(api_server: ApiServer, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    assert KUBECTL is not None
    # An event that exists before the watch: kubectl prints it from its initial list, and then
    # watches from that list's resourceVersion, so every change made after the line appears
    # reaches the watch, however long the watch request takes to start.
    before = tmp_path / "before.yaml"
    before.write_text(event_manifest("w0", namespace))
    assert kubectl(api_server, "create", "-f", str(before)).returncode == 0
    watcher = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(api_server.kubeconfig),
            "get",
            EV,
            "-n",
            namespace,
            "-w",
            "--request-timeout=60s",
            "-o",
            "name",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert watcher.stdout is not None
        output = LineReader(watcher.stdout)
        output.wait_for("event.events.k8s.io/w0")
        manifest = tmp_path / "ev.yaml"
        manifest.write_text(event_manifest("w1", namespace))
        assert kubectl(api_server, "create", "-f", str(manifest)).returncode == 0
        deleted = kubectl(api_server, "delete", EV, "w1", "-n", namespace)
        assert deleted.returncode == 0, deleted.stderr
        assert "deleted" in deleted.stdout
        output.wait_for("event.events.k8s.io/w1", count=2)  # ADDED, then DELETED
    finally:
        watcher.terminate()
        watcher.wait(timeout=10)
    gone = kubectl(api_server, "get", EV, "w1", "-n", namespace)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr or "not found" in gone.stderr
