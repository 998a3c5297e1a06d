"""The audit log backend's flags against the real daemon.

Each test starts ``twistd apiserver`` with ``--audit-policy-file`` and ``--audit-log-path`` and
one group of ``--audit-log-*`` flags, sends requests as the admin client certificate
(``system:masters``) and reads the file, as kube-apiserver's ``plugin/pkg/audit/log`` and
``pkg/server/options/audit.go`` would write it: the legacy line format, lumberjack's rotation
and gzip backups, blocking-strict failing requests, truncation, and the batch buffer drained
on SIGTERM.
"""

from __future__ import annotations

import gzip
import json
import re
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from tests.integration.daemon import Daemon

pytestmark = pytest.mark.integration

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
#: Health and metrics paths are not audited (the readiness polls would fill the log).
NOT_HEALTH = """apiVersion: audit.k8s.io/v1
kind: Policy
rules:
  - level: None
    nonResourceURLs: ["/healthz*", "/livez*", "/readyz*", "/metrics"]
  - level: {level}
"""
JSON = {"Content-Type": "application/json"}


def event_body(name: str, padding: int = 0) -> bytes:
    """An events.k8s.io/v1 Event; ``padding`` bytes of annotation make it large."""
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if padding:
        metadata["annotations"] = {"example.com/padding": "x" * padding}
    return json.dumps(
        {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": metadata,
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "example.com/audit-log-test",
            "reportingInstance": "audit-log-test-1",
            "action": "Testing",
            "reason": "Audited",
            "type": "Normal",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
        }
    ).encode()


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def start(level: str, args: Sequence[str], wait: bool = True) -> Daemon:
        """A daemon auditing at ``level``; ``{dir}`` in ``args`` is its work directory."""
        workdir = tmp_path / f"d{len(started)}"
        workdir.mkdir()
        policy = workdir / "policy.yaml"
        policy.write_text(NOT_HEALTH.format(level=level))
        flags = [arg.replace("{dir}", str(workdir)) for arg in args]
        daemon = Daemon(workdir, [f"--audit-policy-file={policy}", *flags])
        started.append(daemon)
        daemon.start(wait=wait)
        return daemon

    yield start
    for daemon in started:
        daemon.stop()


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line]


def wait_for(path: Path, want: Callable[[str], bool]) -> str:
    """The file's text once ``want`` holds of it (blocking mode writes before the answer;
    this only covers a slow file system)."""
    deadline = time.monotonic() + 10
    text = ""
    while time.monotonic() < deadline:
        try:
            text = path.read_text()
        except FileNotFoundError:
            # Not written yet, or between a rotation's rename and the new file's creation
            # (lumberjack's openNew has the same window).
            text = ""
        else:
            if want(text):
                return text
        time.sleep(0.1)
    raise AssertionError(f"audit log never complete:\n{text}")


# -- (a) the legacy format ---------------------------------------------------------------------

LEGACY = re.compile(
    r"^(?P<time>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)) AUDIT: "
    r'id="(?P<id>[^"]+)" stage="(?P<stage>\w+)" ip="(?P<ip>[^"]*)" method="(?P<method>\w+)" '
    r'user="(?P<user>[^"]*)" groups="(?P<groups>(?:[^"\\]|\\.)*)" as="(?P<as>[^"]*)" '
    r'asgroups="(?P<asgroups>[^"]*)" user-agent="(?P<ua>[^"]*)" '
    r'namespace="(?P<namespace>[^"]*)" uri="(?P<uri>[^"]*)" response="(?P<response>[^"]*)"$'
)


def test_legacy_format(launch: Callable[..., Daemon]) -> None:
    daemon = launch("Metadata", ["--audit-log-path={dir}/legacy.log", "--audit-log-format=legacy"])
    audit_log = daemon.workdir / "legacy.log"
    created = daemon.get(EVENTS, "POST", {**JSON, "User-Agent": "legacy-it"}, event_body("leg"))
    assert created[0] == 201, created
    missing = daemon.get(EVENTS + "/missing", headers={"User-Agent": "legacy-it"})
    assert missing[0] == 404
    version = daemon.get("/version", headers={"User-Agent": "legacy-it"})
    assert version[0] == 200
    ids = [created[1]["audit-id"], missing[1]["audit-id"], version[1]["audit-id"]]

    text = wait_for(audit_log, lambda t: all(t.count(f'id="{i}"') == 2 for i in ids))
    lines: dict[str, list[dict[str, str]]] = {}
    for line in text.splitlines():
        match = LEGACY.match(line)
        assert match is not None, line
        lines.setdefault(match["id"], []).append(match.groupdict())

    create = lines[ids[0]]
    assert [entry["stage"] for entry in create] == ["RequestReceived", "ResponseComplete"]
    # RequestReceived has no response yet; both lines carry the received time.
    assert create[0]["response"] == "<deferred>"
    assert create[1]["response"] == "201"
    assert create[0]["time"] == create[1]["time"]
    done = create[1]
    assert done["method"] == "create"
    assert done["user"] == "admin"
    assert '\\"system:masters\\"' in done["groups"]
    assert done["as"] == "<self>" and done["asgroups"] == "<lookup>"
    assert done["ip"] == "127.0.0.1"
    assert done["ua"] == "legacy-it"
    assert done["namespace"] == "default"
    assert done["uri"] == EVENTS

    get = lines[ids[1]][1]
    assert (get["method"], get["response"], get["uri"]) == ("get", "404", EVENTS + "/missing")

    # A non-resource request: no namespace.
    plain = lines[ids[2]][1]
    assert (plain["method"], plain["namespace"], plain["response"]) == ("get", "<none>", "200")
    # Not a json line anywhere.
    assert not any(line.startswith("{") for line in text.splitlines())


# -- (b) rotation with compression -------------------------------------------------------------

#: lumberjack's backup name of ``audit.log``: ``audit-2006-01-02T15-04-05.000.log``, and
#: ``.gz`` once compressed.
BACKUP = re.compile(r"^audit-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.log\.gz$")


def test_rotation_keeps_two_compressed_backups(launch: Callable[..., Daemon]) -> None:
    daemon = launch(
        "RequestResponse",
        [
            "--audit-log-path={dir}/logs/audit.log",
            "--audit-log-maxsize=1",
            "--audit-log-maxbackup=2",
            "--audit-log-compress",
        ],
    )
    logs = daemon.workdir / "logs"
    # Each create writes about 3 x 100 KB of objects (the request object at RequestReceived,
    # both objects at ResponseComplete): 16 of them pass 1 MB four times.
    ids = []
    for index in range(16):
        created = daemon.get(EVENTS, "POST", JSON, event_body(f"big-{index}", 100_000))
        assert created[0] == 201, created
        ids.append(created[1]["audit-id"])

    # ResponseComplete is written once the answer is sent: wait for the last one, so that
    # no rotation is still to come.
    wait_for(
        logs / "audit.log",
        lambda text: f'"auditID":"{ids[-1]}","stage":"ResponseComplete"' in text,
    )

    def settled() -> list[Path]:
        """The backups, once every rotated file is compressed (milling runs in a thread)
        and nothing changed for half a second."""
        deadline = time.monotonic() + 20
        names: list[str] = []
        previous: list[str] = []
        while time.monotonic() < deadline:
            names = sorted(p.name for p in logs.iterdir() if p.name != "audit.log")
            if names == previous and all(name.endswith(".gz") for name in names):
                return [logs / name for name in names]
            previous = names
            time.sleep(0.5)
        raise AssertionError(f"backups never settled: {names}")

    backups = settled()
    assert len(backups) == 2, backups
    for backup in backups:
        assert BACKUP.match(backup.name), backup.name
        with gzip.open(backup) as compressed:
            data = compressed.read()
        # Each backup was rotated before it passed 1 MB.
        assert 0 < len(data) <= 1024 * 1024
        events = json_lines(data.decode())
        assert all(e["kind"] == "Event" and e["level"] == "RequestResponse" for e in events)
    # The current file holds the newest records, and the last create's ResponseComplete.
    current = json_lines((logs / "audit.log").read_text())
    assert any(e["auditID"] == ids[-1] and e["stage"] == "ResponseComplete" for e in current)
    assert (logs / "audit.log").stat().st_size <= 1024 * 1024
    # Older backups were removed: the kept ones do not hold the first create's records.
    kept = set()
    for backup in backups:
        with gzip.open(backup, "rt") as text:
            kept |= {e["auditID"] for e in json_lines(text.read())}
    assert ids[0] not in kept


# -- (c) blocking-strict with a log that cannot be written ---------------------------------------


def metric_value(daemon: Daemon, name: str) -> float:
    code, _, body = daemon.get("/metrics")
    assert code == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_blocking_strict_fails_requests_it_cannot_record(launch: Callable[..., Daemon]) -> None:
    # /dev/full opens but every write fails (ENOSPC); the tests run as root, so a file's
    # permissions could not make it unwritable.
    daemon = launch("Metadata", ["--audit-log-path=/dev/full", "--audit-log-mode=blocking-strict"])
    before = metric_value(daemon, "apiserver_audit_requests_rejected_total")
    code, headers, body = daemon.get(EVENTS)
    assert code == 500
    assert headers["content-type"] == "text/plain"
    assert body == f'Internal Server Error: "{EVENTS}": failed to store audit event'.encode()
    assert headers["audit-id"]
    created = daemon.get(EVENTS, "POST", JSON, event_body("never"))
    assert created[0] == 500
    # Health paths are level None in the policy: they still answer.
    assert daemon.get("/livez")[0] == 200
    assert daemon.get("/readyz")[0] == 200
    after = metric_value(daemon, "apiserver_audit_requests_rejected_total")
    assert after - before == 2
    assert metric_value(daemon, 'apiserver_audit_error_total{plugin="log"}') >= 2
    assert "no space left on device" in daemon.log()


# -- (d) truncation ----------------------------------------------------------------------------


def test_truncation_drops_objects_of_a_large_event(launch: Callable[..., Daemon]) -> None:
    daemon = launch(
        "RequestResponse",
        [
            "--audit-log-path={dir}/audit.log",
            "--audit-log-truncate-enabled",
            "--audit-log-truncate-max-event-size=4096",
        ],
    )
    audit_log = daemon.workdir / "audit.log"
    big = daemon.get(EVENTS, "POST", JSON, event_body("big", 20_000))
    assert big[0] == 201, big
    small = daemon.get(EVENTS, "POST", JSON, event_body("small"))
    assert small[0] == 201, small
    big_id, small_id = big[1]["audit-id"], small[1]["audit-id"]

    def complete(text: str) -> bool:
        done = {e["auditID"] for e in json_lines(text) if e["stage"] == "ResponseComplete"}
        return {big_id, small_id} <= done

    events = json_lines(wait_for(audit_log, complete))
    truncated = [e for e in events if e["auditID"] == big_id]
    assert [e["stage"] for e in truncated] == ["RequestReceived", "ResponseComplete"]
    for event in truncated:
        assert "requestObject" not in event and "responseObject" not in event
        assert event["annotations"]["audit.k8s.io/truncated"] == "true"
        # Everything else is kept.
        assert event["objectRef"]["name"] == "big"
        assert event["level"] == "RequestResponse"
    assert truncated[1]["responseStatus"]["code"] == 201
    # An event under the limit keeps its objects and gets no annotation.
    kept = [e for e in events if e["auditID"] == small_id][-1]
    assert kept["requestObject"]["metadata"]["name"] == "small"
    assert kept["responseObject"]["metadata"]["name"] == "small"
    assert "audit.k8s.io/truncated" not in kept.get("annotations", {})


# -- (e) SIGTERM drains the batch buffer -------------------------------------------------------


def test_sigterm_drains_a_long_batch(launch: Callable[..., Daemon]) -> None:
    daemon = launch(
        "Metadata",
        [
            "--audit-log-path={dir}/audit.log",
            "--audit-log-mode=batch",
            "--audit-log-batch-max-wait=1h",
            "--audit-log-batch-max-size=10000",
        ],
    )
    audit_log = daemon.workdir / "audit.log"
    acknowledged = []
    for index in range(20):
        answer = daemon.get(EVENTS, "POST", JSON, event_body(f"e-{index}"))
        assert answer[0] == 201, answer
        acknowledged.append(answer[1]["audit-id"])
        listed = daemon.get(EVENTS)
        assert listed[0] == 200
        acknowledged.append(listed[1]["audit-id"])
    # Still queued: a batch waits an hour or 10000 events.
    assert not audit_log.exists() or audit_log.read_text() == ""

    daemon.signal(signal.SIGTERM)
    assert daemon.wait_exit(30) == 0, daemon.log()
    events = json_lines(audit_log.read_text())
    done = {e["auditID"] for e in events if e["stage"] == "ResponseComplete"}
    received = {e["auditID"] for e in events if e["stage"] == "RequestReceived"}
    assert set(acknowledged) <= done
    assert set(acknowledged) <= received
    # In order: each request's RequestReceived before its ResponseComplete.
    for audit_id in acknowledged:
        stages = [e["stage"] for e in events if e["auditID"] == audit_id]
        assert stages == ["RequestReceived", "ResponseComplete"], (audit_id, stages)


# -- (f) repeated requests, batch mode, JSON ---------------------------------------------------


def test_repeated_requests_are_each_recorded_whole(launch: Callable[..., Daemon]) -> None:
    """The same request again and again (the log's lines then come from templates of the
    request's shape, apiserver.audit.templates): each has its own two events, with its own
    audit ID and times, the same fields otherwise, and a 404 its Status."""
    daemon = launch("Metadata", ["--audit-log-path={dir}/audit.log", "--audit-log-mode=batch"])
    status, _, body = daemon.get(EVENTS, method="POST", headers=JSON, body=event_body("r1"))
    assert status == 201, body
    ids = []
    for path, code in [(f"{EVENTS}/r1", 200), (f"{EVENTS}/missing", 404)] * 4:
        status, headers, _ = daemon.get(path)
        assert status == code
        ids.append((headers["audit-id"], path, code))
    log = Path(daemon.workdir) / "audit.log"
    last = ids[-1][0]
    text = wait_for(log, lambda t: t.count(last) >= 2)
    events = json_lines(text)
    for audit_id, path, code in ids:
        mine = [event for event in events if event["auditID"] == audit_id]
        assert [event["stage"] for event in mine] == ["RequestReceived", "ResponseComplete"]
        received, complete = mine
        assert received["requestURI"] == complete["requestURI"] == path
        assert "responseStatus" not in received
        assert complete["responseStatus"]["code"] == code
        if code == 404:
            assert complete["responseStatus"]["reason"] == "NotFound"
        assert received["stageTimestamp"] == received["requestReceivedTimestamp"]
        assert complete["stageTimestamp"] >= complete["requestReceivedTimestamp"]
        # Authorization comes after audit: its annotations are in the later stages only.
        assert "annotations" not in received
        assert complete["annotations"]["authorization.k8s.io/decision"] == "allow"
        same = {
            key: value for key, value in received.items() if key not in ("stage", "stageTimestamp")
        }
        assert same == {
            key: value
            for key, value in complete.items()
            if key not in ("stage", "stageTimestamp", "responseStatus", "annotations")
        }
    first_get = next(event for event in events if event["auditID"] == ids[0][0])
    later_get = next(event for event in events if event["auditID"] == ids[6][0])
    assert {
        k: v
        for k, v in first_get.items()
        if k not in ("auditID", "requestReceivedTimestamp", "stageTimestamp")
    } == {
        k: v
        for k, v in later_get.items()
        if k not in ("auditID", "requestReceivedTimestamp", "stageTimestamp")
    }
