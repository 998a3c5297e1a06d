"""Audit against the real daemon: ``--audit-policy-file`` with the log backend.

The request mix (a create, a get of a missing event, a health probe the policy excludes, a
403) is checked in the json lines of ``--audit-log-path``. That needs the log backend
(``apiserver.audit.log``); without it in the tree the test is skipped, saying so. A bad
policy file must stop start-up naming the file, with or without a backend.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from apiserver.tls.clientcert import ensure_client_ca
from tests.integration.daemon import Daemon
from tests.integration.test_authz import Client

pytestmark = pytest.mark.integration

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/livez*", "/readyz*"]
  - level: RequestResponse
    verbs: ["create"]
    resources:
      - group: "events.k8s.io"
        resources: ["events"]
  - level: Metadata
"""
EVENT = {
    "apiVersion": "events.k8s.io/v1",
    "kind": "Event",
    "metadata": {"name": "audited", "namespace": "default"},
    "eventTime": "2026-01-01T00:00:00.000000Z",
    "reportingController": "example.com/audit-test",
    "reportingInstance": "audit-test-1",
    "action": "Testing",
    "reason": "Audited",
    "type": "Normal",
    "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
}


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., tuple[Daemon, Client]]]:
    started: list[Daemon] = []

    def start(args: Sequence[str] = (), ready: bool = True) -> tuple[Daemon, Client]:
        workdir = tmp_path / f"d{len(started)}"
        workdir.mkdir()
        ca_cert, _ = ensure_client_ca(str(workdir))
        daemon = Daemon(workdir, [f"--client-ca-file={ca_cert}", *args])
        started.append(daemon)
        client = Client(daemon)
        daemon.start(wait=False)
        if ready:
            client.wait_ready(client.cert("admin", ["system:masters"]))
        return daemon, client

    yield start
    for daemon in started:
        daemon.stop()


def test_a_bad_policy_file_stops_start_up_naming_it(
    tmp_path: Path, launch: Callable[..., tuple[Daemon, Client]]
) -> None:
    empty = tmp_path / "empty-policy.yaml"
    empty.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\n")
    daemon, _ = launch([f"--audit-policy-file={empty}"], ready=False)
    assert daemon.proc is not None
    assert daemon.proc.wait(60) != 0
    assert f"loaded illegal policy with 0 rules: from file {empty}" in daemon.log()

    missing = tmp_path / "nope.yaml"
    daemon, _ = launch([f"--audit-policy-file={missing}"], ready=False)
    assert daemon.proc is not None
    assert daemon.proc.wait(60) != 0
    assert f'failed to read file path "{missing}"' in daemon.log()


def read_events(path: Path, want: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The log's events once ``want`` holds of them (a blocking backend writes before the
    answer; the wait only covers a slow file system)."""
    deadline = time.monotonic() + 10
    events: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        if path.exists():
            events = [json.loads(line) for line in path.read_text().splitlines() if line]
            if want(events):
                return events
        time.sleep(0.1)
    raise AssertionError(f"audit log never complete: {events}")


def test_a_request_mix_in_the_json_log(
    tmp_path: Path, launch: Callable[..., tuple[Daemon, Client]]
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    audit_log = tmp_path / "audit" / "audit.log"
    tokens = tmp_path / "tokens.csv"
    tokens.write_text("the-token,tina,uid-1\n")
    _, client = launch(
        [
            "--authorization-mode=RBAC",
            f"--token-auth-file={tokens}",
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit_log}",
        ]
    )
    admin = client.cert("admin", ["system:masters"])
    nobody = client.cert("nobody")

    body = json.dumps(EVENT).encode()
    created = client.request(
        EVENTS, admin, "POST", {"Content-Type": "application/json", "User-Agent": "audit-it"}, body
    )
    assert created[0] == 201, created
    missing = client.request(EVENTS + "/missing", admin, headers={"User-Agent": "audit-it"})
    assert missing[0] == 404
    assert client.request("/healthz", admin)[0] == 200
    forbidden = client.request(EVENTS, nobody, headers={"User-Agent": "audit-it"})
    assert forbidden[0] == 403
    unauthorized = client.request(EVENTS, None, headers={"Authorization": "Bearer wrong"})
    assert unauthorized[0] == 401
    watch = client.request(EVENTS + "?watch=1&timeoutSeconds=1", admin)
    assert watch[0] == 200
    ids = {
        "create": created[1]["audit-id"],
        "missing": missing[1]["audit-id"],
        "forbidden": forbidden[1]["audit-id"],
        "watch": watch[1]["audit-id"],
    }

    def complete(events: list[dict[str, Any]]) -> bool:
        done = {e["auditID"] for e in events if e.get("stage") == "ResponseComplete"}
        failed = {e["auditID"] for e in events if e.get("stage") == "ResponseStarted"}
        return set(ids.values()) <= done and unauthorized[1]["audit-id"] in failed

    events = read_events(audit_log, complete)
    by_id: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        assert event["kind"] == "Event" and event["apiVersion"] == "audit.k8s.io/v1"
        by_id.setdefault(event["auditID"], []).append(event)
    # The health probe (and the readiness polls) are excluded by the policy.
    assert all(e["requestURI"].split("?")[0] not in ("/healthz", "/readyz") for e in events)

    create = by_id[ids["create"]]
    assert [e["stage"] for e in create] == ["RequestReceived", "ResponseComplete"]
    done = create[-1]
    assert done["level"] == "RequestResponse"
    assert done["verb"] == "create"
    assert done["requestURI"] == EVENTS
    assert done["user"]["username"] == "admin"
    assert "system:masters" in done["user"]["groups"]
    assert done["sourceIPs"] == ["127.0.0.1"]
    assert done["userAgent"] == "audit-it"
    assert done["objectRef"] == {
        "resource": "events",
        "namespace": "default",
        "name": "audited",
        "apiGroup": "events.k8s.io",
        "apiVersion": "v1",
    }
    assert done["responseStatus"] == {"metadata": {}, "code": 201}
    assert done["requestObject"]["metadata"]["name"] == "audited"
    assert done["responseObject"]["metadata"]["name"] == "audited"
    assert done["annotations"]["authorization.k8s.io/decision"] == "allow"
    for stamp in (done["requestReceivedTimestamp"], done["stageTimestamp"]):
        assert len(stamp) == 27 and stamp.endswith("Z") and stamp[19] == "."
    assert create[0]["stageTimestamp"] == create[0]["requestReceivedTimestamp"]

    lost = by_id[ids["missing"]][-1]
    assert lost["level"] == "Metadata" and lost["verb"] == "get"
    assert lost["responseStatus"]["code"] == 404
    assert lost["responseStatus"]["reason"] == "NotFound"
    assert "responseObject" not in lost and "requestObject" not in lost

    refused = by_id[ids["forbidden"]][-1]
    assert refused["verb"] == "list"
    assert refused["user"]["username"] == "nobody"
    assert refused["responseStatus"]["code"] == 403
    assert refused["responseStatus"]["reason"] == "Forbidden"
    assert refused["annotations"]["authorization.k8s.io/decision"] == "forbid"

    # Refused by authentication: one ResponseStarted, no user, kube's message.
    assert by_id[unauthorized[1]["audit-id"]] == [
        {
            **by_id[unauthorized[1]["audit-id"]][0],
            "stage": "ResponseStarted",
            "user": {},
            "verb": "list",
            "responseStatus": {
                "metadata": {},
                "status": "Failure",
                "message": "Unauthorized",
                "reason": "Unauthorized",
                "code": 401,
            },
        }
    ]

    # A watch: ResponseStarted when the stream starts, ResponseComplete when it ends.
    watched = by_id[ids["watch"]]
    assert [e["stage"] for e in watched] == [
        "RequestReceived",
        "ResponseStarted",
        "ResponseComplete",
    ]
    assert watched[1]["verb"] == "watch"
    assert watched[1]["responseStatus"] == {"metadata": {}, "code": 200}
    assert watched[2]["stageTimestamp"] >= watched[1]["stageTimestamp"]
