"""kubectl against the real daemon, on both backends: create, get (table, json, yaml), patch
of every type, server-side apply, delete and a watch."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tests.integration.api_fixtures import ApiServer, api_server  # noqa: F401 - fixture

KUBECTL = shutil.which("kubectl")
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
    table = kubectl(api_server, "get", "ev", "-n", namespace)
    assert table.returncode == 0, table.stderr
    header = table.stdout.splitlines()[0].split()
    assert header[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert "pod/web-1" in table.stdout
    assert "Created" in table.stdout
    wide = kubectl(api_server, "get", "ev", "-n", namespace, "-o", "wide")
    assert "SUBOBJECT" in wide.stdout and "COUNT" in wide.stdout
    as_json = json.loads(
        kubectl(api_server, "get", "ev", "k1", "-n", namespace, "-o", "json").stdout
    )
    assert as_json["apiVersion"] == "events.k8s.io/v1"
    assert as_json["note"] == "hello"
    as_yaml = yaml.safe_load(
        kubectl(api_server, "get", "ev", "k1", "-n", namespace, "-o", "yaml").stdout
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
        out = kubectl(api_server, "patch", "ev", "p1", "-n", namespace, "--type", kind, "-p", patch)
        assert out.returncode == 0, (kind, out.stderr)
    labels = json.loads(
        kubectl(api_server, "get", "ev", "p1", "-n", namespace, "-o", "json").stdout
    )["metadata"]["labels"]
    assert labels == {"app": "demo", "merge": "yes", "strategic": "yes", "json": "yes"}
    bad = kubectl(
        api_server,
        "patch",
        "ev",
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
            api_server, "get", "ev", "a1", "-n", namespace, "-o", "json", "--show-managed-fields"
        ).stdout
    )
    managers = {(m["manager"], m["operation"]) for m in obj["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in managers
    again = kubectl(api_server, "apply", "--server-side", "-f", str(manifest))
    assert again.returncode == 0, again.stderr


def test_delete_and_watch(api_server: ApiServer, namespace: str, tmp_path: Path) -> None:  # noqa: F811
    assert KUBECTL is not None
    watcher = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(api_server.kubeconfig),
            "get",
            "ev",
            "-n",
            namespace,
            "-w",
            "--request-timeout=20s",
            "-o",
            "name",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)
        manifest = tmp_path / "ev.yaml"
        manifest.write_text(event_manifest("w1", namespace))
        assert kubectl(api_server, "create", "-f", str(manifest)).returncode == 0
        deleted = kubectl(api_server, "delete", "ev", "w1", "-n", namespace)
        assert deleted.returncode == 0, deleted.stderr
        assert "deleted" in deleted.stdout
        time.sleep(1.0)
    finally:
        watcher.terminate()
        stdout, _ = watcher.communicate(timeout=10)
    assert "event.events.k8s.io/w1" in stdout
    gone = kubectl(api_server, "get", "ev", "w1", "-n", namespace)
    assert gone.returncode != 0
    assert "NotFound" in gone.stderr or "not found" in gone.stderr
