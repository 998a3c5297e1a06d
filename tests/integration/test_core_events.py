"""core/v1 Events (``/api/v1``) against the real daemon, on both backends: kubectl (``get``,
``events``, ``create -f``, ``explain``), the official Python client's CoreV1Api, the Events
conformance steps that go through ``/api/v1``, and one stored object seen through both views
(same resourceVersion, same watch stream)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import queue
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import IO, Any

import pytest
import requests
import yaml

from apiserver.protobuf import codec
from tests.event_fixtures import event_dict
from tests.integration.api_fixtures import ApiServer, api_server  # noqa: F401 - fixture

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client, watch  # noqa: E402
from kubernetes.client.rest import ApiException  # noqa: E402

KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
JSON = {"Content-Type": "application/json", "Accept": "application/json"}


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


@pytest.fixture
def namespace() -> str:
    return "core-" + uuid.uuid4().hex[:8]


def core_manifest(name: str, namespace: str, **fields: Any) -> dict[str, Any]:
    """A core/v1 Event as a kubelet's legacy recorder writes it (client-go tools/record)."""
    event: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": "web-1"},
        "reason": "Started",
        "message": "Started container",
        "source": {"component": "kubelet", "host": "node1"},
        "firstTimestamp": "2026-11-25T10:00:00Z",
        "lastTimestamp": "2026-11-25T10:00:00Z",
        "count": 1,
        "type": "Normal",
        "reportingComponent": "kubelet",
        "reportingInstance": "node1",
    }
    event.update(fields)
    return event


def request(server: ApiServer, path: str, method: str = "GET", body: Any = None) -> tuple[int, Any]:
    data = json.dumps(body).encode() if body is not None else None
    status, _, raw = server.daemon.get(path, method=method, headers=JSON, body=data)
    return status, json.loads(raw) if raw else None


def post_core(server: ApiServer, namespace: str, event: dict[str, Any]) -> dict[str, Any]:
    status, body = request(server, f"/api/v1/namespaces/{namespace}/events", "POST", event)
    assert status == 201, body
    return body  # type: ignore[no-any-return]


# --- kubectl ------------------------------------------------------------------------------


@needs_kubectl
def test_kubectl_create_get_and_yaml(
    api_server: ApiServer,  # noqa: F811
    namespace: str,
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "ev.yaml"
    manifest.write_text(yaml.safe_dump(core_manifest("web-1.17f0", namespace)))
    out = kubectl(api_server, "create", "-f", str(manifest))
    assert out.returncode == 0, out.stderr
    assert "event/web-1.17f0 created" in out.stdout
    table = kubectl(api_server, "get", "events", "-n", namespace)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert "pod/web-1" in lines[1] and "Started container" in lines[1]
    wide = kubectl(api_server, "get", "events", "-n", namespace, "-o", "wide")
    assert "kubelet, node1" in wide.stdout
    as_yaml = kubectl(api_server, "get", "ev", "-n", namespace, "-o", "yaml")
    assert as_yaml.returncode == 0, as_yaml.stderr
    item = yaml.safe_load(as_yaml.stdout)["items"][0]
    # kubectl get ev resolves to core/v1, Go's emission rules for core
    assert item["apiVersion"] == "v1" and item["kind"] == "Event"
    assert item["involvedObject"]["name"] == "web-1"
    assert item["source"] == {"component": "kubelet", "host": "node1"}
    assert item["eventTime"] is None
    assert item["message"] == "Started container"
    other = kubectl(api_server, "get", "events.events.k8s.io", "-n", namespace, "-o", "yaml")
    v1_item = yaml.safe_load(other.stdout)["items"][0]
    assert v1_item["apiVersion"] == "events.k8s.io/v1"
    assert v1_item["note"] == "Started container"
    assert v1_item["metadata"]["resourceVersion"] == item["metadata"]["resourceVersion"]


@needs_kubectl
def test_kubectl_create_refuses_an_invalid_core_event(
    api_server: ApiServer,  # noqa: F811
    namespace: str,
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "bad.yaml"
    bad = core_manifest("bad", namespace)
    bad["involvedObject"]["namespace"] = "elsewhere"
    manifest.write_text(yaml.safe_dump(bad))
    out = kubectl(api_server, "create", "-f", str(manifest))
    assert out.returncode != 0
    assert (
        'Event "bad" is invalid: involvedObject.namespace: Invalid value: "elsewhere": '
        "does not match event.namespace"
    ) in out.stderr
    # kubectl's default (server-side strict) field validation reaches the server
    unknown = core_manifest("unknown", namespace, bogus=1)
    manifest.write_text(yaml.safe_dump(unknown))
    out = kubectl(api_server, "create", "-f", str(manifest))
    assert out.returncode != 0
    assert 'unknown field "bogus"' in out.stderr


@needs_kubectl
def test_kubectl_events_for_types_and_watch(
    api_server: ApiServer,  # noqa: F811
    namespace: str,
) -> None:
    target = "target.1"
    post_core(api_server, namespace, core_manifest("plain", namespace))
    about = core_manifest(
        "about",
        namespace,
        involvedObject={
            "kind": "Event",
            "apiVersion": "v1",
            "namespace": namespace,
            "name": target,
        },
        type="Warning",
        reason="Seen",
        message="about the target",
    )
    post_core(api_server, namespace, about)
    listed = kubectl(api_server, "events", "-n", namespace)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0].split() == [
        "LAST",
        "SEEN",
        "TYPE",
        "REASON",
        "OBJECT",
        "MESSAGE",
    ]
    assert "Pod/web-1" in listed.stdout and "Event/target.1" in listed.stdout
    # --for needs discovery to resolve the kind (events are what this server serves)
    for_target = kubectl(api_server, "events", "-n", namespace, "--for", f"event/{target}")
    assert for_target.returncode == 0, for_target.stderr
    assert "about the target" in for_target.stdout
    assert "Pod/web-1" not in for_target.stdout
    warnings = kubectl(api_server, "events", "-n", namespace, "--types", "warning")
    assert warnings.returncode == 0, warnings.stderr
    assert "Seen" in warnings.stdout and "Started" not in warnings.stdout
    empty = kubectl(api_server, "events", "-n", namespace + "-none")
    assert empty.returncode == 0
    assert f"No events found in {namespace}-none namespace." in empty.stderr

    assert KUBECTL is not None
    proc = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(api_server.kubeconfig), "events", "-n", namespace, "-w"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump(stream: IO[str]) -> None:
        for line in stream:
            lines.put(line)

    assert proc.stdout is not None
    threading.Thread(target=pump, args=(proc.stdout,), daemon=True).start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 30
        created = False
        while time.monotonic() < deadline:
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                pass
            if not created and any("about the target" in line for line in seen):
                post_core(api_server, namespace, core_manifest("later", namespace, message="new!"))
                created = True
            if any("new!" in line for line in seen):
                break
        assert any("new!" in line for line in seen), seen
    finally:
        proc.kill()
        proc.wait(timeout=10)


@needs_kubectl
def test_kubectl_explain_events(api_server: ApiServer) -> None:  # noqa: F811
    out = kubectl(api_server, "explain", "events")
    assert out.returncode == 0, out.stderr
    assert "KIND:       Event" in out.stdout and "VERSION:    v1" in out.stdout
    assert "involvedObject" in out.stdout and "reportingComponent" in out.stdout
    field = kubectl(api_server, "explain", "events.source")
    assert field.returncode == 0, field.stderr
    assert "EventSource" in field.stdout


# --- the official Python client ---------------------------------------------------------------


def legacy_event(name: str, namespace: str) -> client.CoreV1Event:
    when = dt.datetime(2026, 11, 25, 10, 0, 0, tzinfo=dt.UTC)
    return client.CoreV1Event(
        metadata=client.V1ObjectMeta(name=name, namespace=namespace, labels={"app": "web"}),
        involved_object=client.V1ObjectReference(kind="Pod", namespace=namespace, name="p1"),
        reason="Pulled",
        message=f"event {name}",
        type="Normal",
        count=1,
        source=client.V1EventSource(component="kubelet", host="n1"),
        first_timestamp=when,
        last_timestamp=when,
    )


def test_core_v1_api_create_list_watch_patch_delete(
    api_server: ApiServer,  # noqa: F811
    namespace: str,
) -> None:
    api = client.CoreV1Api(api_server.python_client())
    created = api.create_namespaced_event(namespace, legacy_event("c1", namespace))
    assert created.metadata.uid and int(created.metadata.resource_version) > 0
    assert created.reporting_component == "" and created.source.component == "kubelet"
    assert created.metadata.managed_fields[0].api_version == "v1"
    with pytest.raises(ApiException) as error:
        api.create_namespaced_event(namespace, legacy_event("c1", namespace))
    assert error.value.status == 409
    assert json.loads(error.value.body)["message"] == 'events "c1" already exists'
    api.create_namespaced_event(namespace, legacy_event("c2", namespace))

    names = [e.metadata.name for e in api.list_namespaced_event(namespace).items]
    assert names == ["c1", "c2"]
    everywhere = api.list_event_for_all_namespaces(
        field_selector=f"metadata.namespace={namespace},involvedObject.name=p1"
    )
    assert [e.metadata.name for e in everywhere.items] == ["c1", "c2"]
    page = api.list_namespaced_event(namespace, limit=1)
    assert len(page.items) == 1 and page.metadata._continue

    patched = api.patch_namespaced_event("c1", namespace, {"message": "patched", "count": 2})
    assert patched.message == "patched" and patched.count == 2

    rv = api.list_namespaced_event(namespace).metadata.resource_version
    events: list[tuple[str, str, str]] = []
    stream = watch.Watch()

    def consume() -> None:
        for item in stream.stream(
            api.list_namespaced_event, namespace, resource_version=rv, timeout_seconds=10
        ):
            events.append((item["type"], item["object"].metadata.name, item["object"].message))
            if len(events) == 2:
                stream.stop()

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(0.5)
    api.patch_namespaced_event("c2", namespace, {"message": "again"})
    status = api.delete_namespaced_event("c1", namespace)
    # the client hands the Status back as a dict (its v1 delete returns Event | Status)
    details = status["details"] if isinstance(status, dict) else status.details.to_dict()
    assert details["kind"] == "events" and "group" not in details
    thread.join(timeout=15)
    assert events == [("MODIFIED", "c2", "again"), ("DELETED", "c1", "patched")]

    with pytest.raises(ApiException) as error:
        api.read_namespaced_event("c1", namespace)
    assert error.value.status == 404
    body = json.loads(error.value.body)
    assert body["message"] == 'events "c1" not found'
    assert body["details"] == {"name": "c1", "kind": "events"}
    api.delete_collection_namespaced_event(namespace)
    assert api.list_namespaced_event(namespace).items == []


# --- Kubernetes Events conformance (test/e2e/instrumentation/events.go) ----------------------


def test_conformance_core_list_by_source_finds_an_events_k8s_io_event(
    api_server: ApiServer,  # noqa: F811
    namespace: str,
) -> None:
    """events.k8s.io/v1 writes, core/v1 ``fieldSelector=source=...`` (falls back to
    reportingController when the deprecated source is empty)."""
    v1 = client.EventsV1Api(api_server.python_client())
    core = client.CoreV1Api(api_server.python_client())
    body = event_dict("conformance", namespace, reportingController="test-controller")
    status, created = request(
        api_server, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", "POST", body
    )
    assert status == 201, created
    by_source = core.list_namespaced_event(namespace, field_selector="source=test-controller")
    assert [e.metadata.name for e in by_source.items] == ["conformance"]
    assert by_source.items[0].reporting_component == "test-controller"
    assert by_source.items[0].source.component is None
    everywhere = core.list_event_for_all_namespaces(field_selector="source=test-controller")
    assert "conformance" in [e.metadata.name for e in everywhere.items]
    by_controller = v1.list_namespaced_event(
        namespace, field_selector="reportingController=test-controller"
    )
    assert [e.metadata.name for e in by_controller.items] == ["conformance"]
    core_patched = core.patch_namespaced_event("conformance", namespace, {"message": "changed"})
    assert v1.read_namespaced_event("conformance", namespace).note == "changed"
    assert (
        v1.read_namespaced_event("conformance", namespace).metadata.resource_version
        == core_patched.metadata.resource_version
    )
    status, answer = request(
        api_server,
        f"/api/v1/namespaces/{namespace}/events?fieldSelector=regarding.name%3Dp",
    )
    assert status == 400 and answer["message"] == "field label not supported: regarding.name"


# --- one stored object, two views -----------------------------------------------------------


def test_cross_view_reads_and_watches(api_server: ApiServer, namespace: str) -> None:  # noqa: F811
    created = post_core(api_server, namespace, core_manifest("x1", namespace))
    rv = created["metadata"]["resourceVersion"]
    status, v1 = request(api_server, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/x1")
    assert status == 200
    assert v1["metadata"]["resourceVersion"] == rv
    assert v1["note"] == "Started container"
    assert v1["deprecatedSource"] == {"component": "kubelet", "host": "node1"}
    assert v1["regarding"]["name"] == "web-1"

    # a watch on each view, from the same revision, sees the writes of the other one
    daemon = api_server.daemon
    paths = {
        "core": f"/api/v1/namespaces/{namespace}/events?watch=true&resourceVersion={rv}"
        "&timeoutSeconds=5",
        "v1": f"/apis/events.k8s.io/v1/namespaces/{namespace}/events?watch=true"
        f"&resourceVersion={rv}&timeoutSeconds=5",
    }
    results: dict[str, list[dict[str, Any]]] = {}

    def run(view: str) -> None:
        _, _, raw = daemon.get(paths[view], headers=JSON, timeout=20)
        results[view] = [json.loads(line) for line in raw.splitlines() if line.strip()]

    threads = [threading.Thread(target=run, args=(view,)) for view in paths]
    for thread in threads:
        thread.start()
    time.sleep(1)
    status, _ = request(
        api_server,
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
        "POST",
        event_dict("x2", namespace, note="from v1"),
    )
    assert status == 201
    status, _ = request(api_server, f"/api/v1/namespaces/{namespace}/events/x1", "DELETE")
    assert status == 200
    for thread in threads:
        thread.join(timeout=20)
    core_events = [(e["type"], e["object"]["metadata"]["name"]) for e in results["core"]]
    v1_events = [(e["type"], e["object"]["metadata"]["name"]) for e in results["v1"]]
    assert core_events == v1_events == [("ADDED", "x2"), ("DELETED", "x1")]
    core_added, v1_added = results["core"][0]["object"], results["v1"][0]["object"]
    assert core_added["apiVersion"] == "v1" and core_added["message"] == "from v1"
    assert v1_added["apiVersion"] == "events.k8s.io/v1" and v1_added["note"] == "from v1"
    assert core_added["metadata"]["resourceVersion"] == v1_added["metadata"]["resourceVersion"]
    assert (
        results["core"][1]["object"]["metadata"]["resourceVersion"]
        == (results["v1"][1]["object"]["metadata"]["resourceVersion"])
    )
    status, answer = request(api_server, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/x1")
    assert status == 404
    assert answer["message"] == 'events.events.k8s.io "x1" not found'


def test_core_texts_paths_and_validation(api_server: ApiServer, namespace: str) -> None:  # noqa: F811
    status, answer = request(api_server, "/api/v1/events", "POST", core_manifest("p", namespace))
    assert status == 405
    status, answer = request(
        api_server,
        f"/api/v1/namespaces/{namespace}/events",
        "POST",
        core_manifest("a/b", namespace),
    )
    assert status == 422, answer
    assert answer["message"] == (
        'Event "a/b" is invalid: metadata.name: Invalid value: "a/b": may not contain \'/\''
    )
    assert "group" not in answer["details"]
    # an events.k8s.io-only rule (eventTime required) does not apply to core writes
    post_core(api_server, namespace, core_manifest("Upper_Case", namespace, type="Custom"))
    status, _, raw = api_server.daemon.get(
        f"/api/v1/watch/namespaces/{namespace}/events/Upper_Case?timeoutSeconds=1", headers=JSON
    )
    assert status == 200
    first = json.loads(raw.splitlines()[0])
    assert first["type"] == "ADDED" and first["object"]["type"] == "Custom"
    status, answer = request(api_server, f"/api/v1/namespaces/{namespace}/events/none")
    assert status == 404 and answer["details"] == {"name": "none", "kind": "events"}


# --- the stored format in a real etcd ------------------------------------------------------


def _etcd(server: ApiServer, call: str, body: dict[str, Any]) -> dict[str, Any]:
    """etcd's v3 JSON gateway (the etcd3 backend speaks it too)."""
    assert server.etcd_url is not None
    answer = requests.post(f"{server.etcd_url}/v3/kv/{call}", json=body, timeout=10)
    answer.raise_for_status()
    data: dict[str, Any] = answer.json()
    return data


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_etcd_holds_core_v1_and_foreign_core_json_is_served(
    api_server: ApiServer,  # noqa: F811
    namespace: str,
) -> None:
    if api_server.backend != "etcd3":
        pytest.skip("reads and writes etcd directly")
    status, _ = request(
        api_server,
        f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
        "POST",
        event_dict("ours", namespace, note="written by us"),
    )
    assert status == 201
    key = f"/registry/events/{namespace}/ours".encode()
    kvs = _etcd(api_server, "range", {"key": _b64(key)})["kvs"]
    value = base64.b64decode(kvs[0]["value"])
    # --storage-media-type's default: kube-apiserver's protobuf envelope around a core/v1 Event.
    api_version, kind, raw = codec.unwrap(value)
    assert (api_version, kind) == ("v1", "Event")
    stored = codec.decode(codec.CoreEvent, raw)
    assert stored["message"] == "written by us" and "note" not in stored
    assert stored["involvedObject"]["name"] == "p"
    assert "firstTimestamp" not in stored and "resourceVersion" not in stored["metadata"]

    # JSON as kube-apiserver writes it with --storage-media-type=application/json
    foreign = (
        b'{"kind":"Event","apiVersion":"v1","metadata":{"name":"kubelet.1","namespace":"'
        + namespace.encode()
        + b'","uid":"u1","creationTimestamp":"2023-11-14T22:13:20Z"},"involvedObject":'
        b'{"kind":"Pod","namespace":"'
        + namespace.encode()
        + b'","name":"web","uid":"u2","apiVersion":"v1"},"reason":"Started","message":'
        b'"Started container","source":{"component":"kubelet","host":"node1"},'
        b'"firstTimestamp":"2023-11-14T22:13:20Z","lastTimestamp":"2023-11-14T22:13:20Z",'
        b'"count":1,"type":"Normal","eventTime":null,"reportingComponent":"kubelet",'
        b'"reportingInstance":"node1"}\n'
    )
    put_key = f"/registry/events/{namespace}/kubelet.1".encode()
    _etcd(api_server, "put", {"key": _b64(put_key), "value": _b64(foreign)})
    status, core = request(api_server, f"/api/v1/namespaces/{namespace}/events/kubelet.1")
    assert status == 200, core
    assert core["message"] == "Started container" and core["metadata"]["uid"] == "u1"
    assert core["source"] == {"component": "kubelet", "host": "node1"}
    status, v1 = request(
        api_server, f"/apis/events.k8s.io/v1/namespaces/{namespace}/events/kubelet.1"
    )
    assert status == 200, v1
    assert v1["note"] == "Started container" and v1["deprecatedCount"] == 1
    assert v1["metadata"]["resourceVersion"] == core["metadata"]["resourceVersion"]
