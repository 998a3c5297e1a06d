"""The log backend (k8s.io/apiserver plugin/pkg/audit/log/backend.go, pkg/audit/format.go,
pkg/server/options/audit.go) and lumberjack's rotation, on a fake clock and tmp_path files."""

from __future__ import annotations

import gzip
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from twisted.internet.task import Clock

from apiserver.audit.buffered import BufferedSink
from apiserver.audit.compose import IgnoreErrorsSink
from apiserver.audit.encoding import encode_event
from apiserver.audit.interface import AuditEvent, NoMetrics
from apiserver.audit.log import (
    MEGABYTE,
    LogSink,
    Rotation,
    backup_name,
    build_log_backend,
    event_string,
    old_log_files,
    worker_log_path,
)
from apiserver.options import parse_args

#: 2026-11-25T15:04:05.678Z
NOW = 1795619045.678


class Metrics(NoMetrics):
    def __init__(self) -> None:
        self.errors: list[tuple[str, int]] = []

    def error(self, plugin: str, count: int) -> None:
        self.errors.append((plugin, count))


def sample(**changes: Any) -> AuditEvent:
    event: AuditEvent = {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": "6f0d6a2c-1b7e-4c49-9d0a-3f1f0e5b8c21",
        "stage": "ResponseComplete",
        "requestURI": "/apis/events.k8s.io/v1/namespaces/default/events?limit=500&watch=0",
        "verb": "list",
        "user": {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]},
        "sourceIPs": ["10.0.0.1", "127.0.0.1"],
        "userAgent": 'kubectl/v1.35.0 (linux/amd64) "é"\t',
        "objectRef": {
            "resource": "events",
            "namespace": "default",
            "apiGroup": "events.k8s.io",
            "apiVersion": "v1",
        },
        "responseStatus": {"metadata": {}, "code": 200},
        "requestReceivedTimestamp": "2026-11-25T15:04:05.123400Z",
        "stageTimestamp": "2026-11-25T15:04:05.125000Z",
    }
    event.update(changes)
    return event


@pytest.fixture
def utc() -> Iterator[None]:
    """Go prints the received time in the local zone; these lines are for TZ=UTC."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    yield
    if old is None:
        del os.environ["TZ"]
    else:
        os.environ["TZ"] = old
    time.tzset()


# -- the legacy line (what Go's audit.EventString prints for the same event) ------------------


def test_legacy_line_byte_exact(utc: None) -> None:
    assert event_string(sample()) == (
        '2026-11-25T15:04:05.1234Z AUDIT: id="6f0d6a2c-1b7e-4c49-9d0a-3f1f0e5b8c21" '
        'stage="ResponseComplete" ip="10.0.0.1" method="list" user="system:admin" '
        'groups="\\"system:masters\\",\\"system:authenticated\\"" as="<self>" '
        'asgroups="<lookup>" user-agent="kubectl/v1.35.0 (linux/amd64) \\"é\\"\\t" '
        'namespace="default" uri="/apis/events.k8s.io/v1/namespaces/default/events?limit=500'
        '&watch=0" response="200"'
    )


def test_legacy_line_placeholders_and_impersonation(utc: None) -> None:
    event = sample(
        user={},
        impersonatedUser={"username": "bob", "groups": ["dev", "ops"]},
        requestReceivedTimestamp="2026-11-25T15:04:05.000000Z",
        stage="RequestReceived",
        verb="get",
        requestURI="/healthz",
        userAgent="",
    )
    del event["sourceIPs"], event["objectRef"], event["responseStatus"]
    assert event_string(event) == (
        '2026-11-25T15:04:05Z AUDIT: id="6f0d6a2c-1b7e-4c49-9d0a-3f1f0e5b8c21" '
        'stage="RequestReceived" ip="<unknown>" method="get" user="<none>" groups="<none>" '
        'as="bob" asgroups="\\"dev\\",\\"ops\\"" user-agent="" namespace="<none>" '
        'uri="/healthz" response="<deferred>"'
    )


def test_legacy_line_user_without_groups_and_impersonation_without_groups(utc: None) -> None:
    event = sample(
        user={"username": "alice"},
        impersonatedUser={"username": "bob"},
        objectRef={"resource": "namespaces", "name": "x"},
        responseStatus={"metadata": {}, "code": 401, "status": "Failure"},
    )
    line = event_string(event)
    assert ' user="alice" groups="<none>" as="bob" asgroups="<lookup>" ' in line
    assert ' namespace="<none>" ' in line
    assert line.endswith(' response="401"')


def test_legacy_time_in_the_local_zone() -> None:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "Asia/Kolkata"
    time.tzset()
    try:
        assert event_string(sample()).startswith("2026-11-25T20:34:05.1234+05:30 AUDIT: ")
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


# -- the json line -----------------------------------------------------------------------------


def test_json_line_is_go_encoding_of_the_event() -> None:
    line = encode_event(sample(userAgent="a<b>&c\u2028"))
    assert line.endswith(b"}\n") and line.count(b"\n") == 1
    assert line.startswith(b'{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata",')
    assert b"?limit=500\\u0026watch=0" in line
    assert b'"userAgent":"a\\u003cb\\u003e\\u0026c\\u2028"' in line
    assert orjson.loads(line) == sample(userAgent="a<b>&c\u2028")


def sink(path: Path | str, fmt: str = "json", rotation: Rotation | None = None, **kw: Any) -> Any:
    clock = kw.pop("clock", None) or Clock()
    metrics = kw.pop("metrics", None) or Metrics()
    s = LogSink(str(path), fmt, rotation or Rotation(), clock, metrics)  # type: ignore[arg-type]
    s.start()
    return s


def test_start_creates_the_directory_0700_and_the_file_0600(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "audit.log"
    s = sink(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert path.read_bytes() == b""
    assert s.process_events([sample(), sample(stage="RequestReceived")]) is True
    lines = path.read_bytes().splitlines(keepends=True)
    assert lines == [encode_event(sample()), encode_event(sample(stage="RequestReceived"))]
    assert s.shutdown().called


def test_appends_to_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_bytes(b"before\n")
    s = sink(path, fmt="legacy")
    s.process_events([sample()])
    assert path.read_bytes().startswith(b"before\n")
    assert path.read_bytes().endswith(b' response="200"\n')
    assert path.read_bytes().count(b"\n") == 2


def test_standard_output(capfd: pytest.CaptureFixture[str]) -> None:
    s = sink("-")
    assert s.process_events([sample()]) is True
    assert capfd.readouterr().out.encode() == encode_event(sample())


def test_a_failed_write_answers_false_and_counts(tmp_path: Path) -> None:
    metrics = Metrics()
    s = sink("/dev/full", metrics=metrics)  # every write fails with ENOSPC
    assert s.process_events([sample(), sample()]) is False
    assert metrics.errors == [("log", 2)]


def test_a_line_larger_than_the_file_limit_fails_alone(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    metrics = Metrics()
    s = sink(path, rotation=Rotation(max_size_mb=1), metrics=metrics)
    huge = sample(userAgent="x" * MEGABYTE)
    assert s.process_events([sample(), huge, sample()]) is False
    assert metrics.errors == [("log", 1)]
    assert path.read_bytes() == encode_event(sample()) * 2


# -- rotation (gopkg.in/natefinch/lumberjack.v2) -----------------------------------------------


def test_backup_name_is_lumberjacks() -> None:
    assert backup_name("/var/log/audit.log", NOW) == "/var/log/audit-2026-11-25T15-04-05.678.log"
    assert backup_name("/var/log/audit", NOW) == "/var/log/audit-2026-11-25T15-04-05.678"
    assert backup_name("/x/a.b.json", 0.0005) == "/x/a.b-1970-01-01T00-00-00.000.json"


def test_zero_maxsize_is_lumberjacks_100_megabytes() -> None:
    assert Rotation().max_bytes == 100 * MEGABYTE
    assert Rotation(max_size_mb=3).max_bytes == 3 * MEGABYTE


def fill(s: Any, megabytes: float) -> None:
    """Write about ``megabytes`` of events, in calls of 64 events."""
    event = sample(userAgent="u" * 4000)
    per_event = len(encode_event(event))
    count = int(megabytes * MEGABYTE / per_event)
    while count > 0:
        assert s.process_events([event] * min(64, count)) is True
        count -= 64


def test_rotation_with_compression(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    clock = Clock()
    clock.advance(NOW)
    s = sink(path, rotation=Rotation(max_size_mb=1, compress=True), clock=clock)
    fill(s, 1.5)
    names = sorted(os.listdir(tmp_path))
    assert names == ["audit-2026-11-25T15-04-05.678.log.gz", "audit.log"]
    backup = gzip.decompress((tmp_path / names[0]).read_bytes())
    assert len(backup) <= MEGABYTE
    per_event = len(encode_event(sample(userAgent="u" * 4000)))
    assert len(backup) + path.stat().st_size == int(1.5 * MEGABYTE / per_event) * per_event
    # Every line is whole, in one file or the other.
    assert all(orjson.loads(line)["kind"] == "Event" for line in backup.splitlines())
    assert stat.S_IMODE((tmp_path / names[0]).stat().st_mode) == 0o600
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_maxbackup_keeps_the_newest(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    clock = Clock()
    clock.advance(NOW)
    s = sink(path, rotation=Rotation(max_size_mb=1, max_backups=2), clock=clock)
    for _ in range(4):
        fill(s, 0.6)
        clock.advance(60)
    fill(s, 0.6)  # about 3 MB in all: 3 or 4 rotations
    backups = [name for _, name in old_log_files(str(path))]
    assert len(backups) == 2
    assert sorted(os.listdir(tmp_path)) == sorted([*backups, "audit.log"])
    assert backups[0] > backups[1]  # newest first


def test_maxage_removes_backups_by_the_time_in_their_name(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    day = 86400.0
    old = tmp_path / Path(backup_name(str(path), NOW - 3 * day - 1)).name
    old_gz = tmp_path / (Path(backup_name(str(path), NOW - 10 * day)).name + ".gz")
    recent = tmp_path / Path(backup_name(str(path), NOW - 2 * day)).name
    other = tmp_path / "audit-notatime.log"
    for f in (old, old_gz, recent, other):
        f.write_bytes(b"x\n")
    os.utime(recent, (0, 0))  # the file time does not matter, only the name
    clock = Clock()
    clock.advance(NOW)
    s = sink(path, rotation=Rotation(max_age_days=3), clock=clock)
    s.process_events([sample()])  # the first write opens the file and mills
    assert sorted(os.listdir(tmp_path)) == sorted(["audit.log", recent.name, other.name])


def test_mill_runs_in_the_given_runner_and_shutdown_waits_for_it(tmp_path: Path) -> None:
    from twisted.internet.defer import Deferred

    path = tmp_path / "audit.log"
    runs: list[tuple[Any, Deferred[None]]] = []

    def later(function: Any) -> Deferred[None]:
        d: Deferred[None] = Deferred()
        runs.append((function, d))
        return d

    clock = Clock()
    clock.advance(NOW)
    s = LogSink(str(path), "json", Rotation(max_size_mb=1, compress=True), clock, Metrics(), later)
    s.start()
    fill(s, 1.2)
    assert len(runs) == 1  # the first open; the rotation's run is coalesced behind it
    done = s.shutdown()
    assert not done.called
    function, d = runs.pop()
    function()
    d.callback(None)
    assert len(runs) == 1 and not done.called  # the coalesced run
    function, d = runs.pop()
    function()
    d.callback(None)
    assert done.called
    assert sorted(os.listdir(tmp_path)) == ["audit-2026-11-25T15-04-05.678.log.gz", "audit.log"]


# -- building from the command line ------------------------------------------------------------


def test_no_path_no_backend() -> None:
    assert build_log_backend(parse_args([]), Clock(), NoMetrics()) is None


def test_build_creates_nothing_and_wraps_per_mode(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.log"
    config = parse_args([f"--audit-log-path={path}"])
    backend = build_log_backend(config, Clock(), NoMetrics())
    assert isinstance(backend, IgnoreErrorsSink)  # blocking by default
    assert not (tmp_path / "logs").exists()
    backend.start()
    assert path.exists()
    config = parse_args([f"--audit-log-path={path}", "--audit-log-mode=batch"])
    assert isinstance(build_log_backend(config, Clock(), NoMetrics()), BufferedSink)
    config = parse_args([f"--audit-log-path={path}", "--audit-log-mode=blocking-strict"])
    assert isinstance(build_log_backend(config, Clock(), NoMetrics()), LogSink)


def test_build_refuses_a_path_that_cannot_be_a_file(tmp_path: Path) -> None:
    config = parse_args([f"--audit-log-path={tmp_path}"])
    with pytest.raises(ValueError, match=r"--audit-log-path: .*is a directory"):
        build_log_backend(config, Clock(), NoMetrics())
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    config = parse_args([f"--audit-log-path={blocker}/audit.log"])
    with pytest.raises(ValueError, match=r"--audit-log-path: .*not a directory"):
        build_log_backend(config, Clock(), NoMetrics())


def test_batch_mode_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    clock = Clock()
    config = parse_args(
        [f"--audit-log-path={path}", "--audit-log-mode=batch", "--audit-log-format=legacy"]
    )
    backend = build_log_backend(config, clock, NoMetrics())
    assert backend is not None
    backend.start()
    assert backend.process_events([sample()]) is True
    assert path.read_bytes() == b""
    done = backend.shutdown()
    assert done.called
    assert path.read_bytes().endswith(b' response="200"\n')


def test_each_worker_of_several_has_its_own_log_file() -> None:
    assert worker_log_path("/var/log/audit.log", (1, 2)) == "/var/log/audit.worker-1.log"
    assert worker_log_path("/var/log/audit", (0, 4)) == "/var/log/audit.worker-0"
    # One process, or one worker, keeps the path; standard output stays shared.
    assert worker_log_path("/var/log/audit.log", None) == "/var/log/audit.log"
    assert worker_log_path("/var/log/audit.log", (0, 1)) == "/var/log/audit.log"
    assert worker_log_path("-", (1, 2)) == "-"
