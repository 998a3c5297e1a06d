"""journald's log format: ``<N>`` priorities (sd-daemon(3)), no timestamps, one record a line;
chosen only when ``$JOURNAL_STREAM`` is twistd's standard output."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from twisted.python.reflect import namedAny

from apiserver.journald import (
    format_event,
    journald_observer,
    use_journald_logger,
)
from apiserver.tap import Options


def event(level: LogLevel | None, message: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "log_format": message,
        "log_time": 1700000000.0,
        "log_system": "-",
        **extra,
    }
    if level is not None:
        out["log_level"] = level
    return out


@pytest.mark.parametrize(
    ("level", "priority"),
    [
        (LogLevel.debug, "<7>"),
        (LogLevel.info, "<6>"),
        (LogLevel.warn, "<4>"),
        (LogLevel.error, "<3>"),
        (LogLevel.critical, "<2>"),
        (None, "<6>"),
    ],
)
def test_priority_prefix_and_no_timestamp(level: LogLevel | None, priority: str) -> None:
    assert format_event(event(level, "storage is {state}", state="ready")) == (
        f"{priority}[-] storage is ready\n"
    )


def test_multi_line_message_one_record_per_line() -> None:
    text = format_event(event(LogLevel.warn, "first\nsecond\n\nfourth"))
    assert text == "<4>[-] first\n<4>second\n<4>\n<4>fourth\n"


def test_traceback_lines_share_the_priority() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        failure = Failure()
    text = format_event(event(LogLevel.critical, "hook failed", log_failure=failure))
    assert text is not None
    lines = text.splitlines()
    assert lines[0] == "<2>[-] hook failed"
    assert len(lines) > 3
    assert all(line.startswith("<2>") for line in lines)
    assert "<2>builtins.ValueError: boom" in lines


def test_empty_event_writes_nothing() -> None:
    out = io.StringIO()
    journald_observer(out)({"log_level": LogLevel.info, "log_time": 0.0})
    journald_observer(out)(event(LogLevel.error, "x"))
    assert out.getvalue() == "<3>[-] x\n"


def stream_of(path: Path) -> tuple[Any, str]:
    handle = open(path, "w")
    stat = os.fstat(handle.fileno())
    return handle, f"{stat.st_dev}:{stat.st_ino}"


def test_chosen_only_when_journal_stream_is_our_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    handle, identity = stream_of(tmp_path / "out")
    other, other_identity = stream_of(tmp_path / "other")
    try:
        nodaemon: dict[str, Any] = {"nodaemon": True, "logfile": None, "logger": None}
        assert not use_journald_logger(dict(nodaemon), {}, handle)
        assert not use_journald_logger(dict(nodaemon), {"JOURNAL_STREAM": other_identity}, handle)
        assert not use_journald_logger(dict(nodaemon), {"JOURNAL_STREAM": "junk"}, handle)
        env = {"JOURNAL_STREAM": identity}
        # twistd would not log to standard output, or the operator chose a logger.
        assert not use_journald_logger({"nodaemon": False, "logfile": None}, env, handle)
        assert not use_journald_logger({"nodaemon": True, "logfile": "x.log"}, env, handle)
        assert not use_journald_logger({**nodaemon, "syslog": True}, env, handle)
        assert not use_journald_logger({**nodaemon, "logger": object}, env, handle)
        assert not use_journald_logger(None, env, handle)

        options = dict(nodaemon)
        assert use_journald_logger(options, env, handle)
        assert use_journald_logger({"nodaemon": False, "logfile": "-"}, env, handle)
    finally:
        handle.close()
        other.close()
    # twistd imports the factory by name (its ServerOptions.postOptions) and calls it.
    out = io.StringIO()
    monkeypatch.setattr("sys.stdout", out)
    namedAny(options["logger"])()(event(LogLevel.warn, "careful"))
    assert out.getvalue() == "<4>[-] careful\n"


def test_plugin_options_choose_the_journal_logger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def parse() -> dict[str, Any]:
        parent: dict[str, Any] = {"nodaemon": True, "logfile": None, "logger": None}
        options = Options()
        options.parent = parent  # type: ignore[assignment]
        options.parseOptions(["--secure-port=6443"])
        return parent

    handle, identity = stream_of(tmp_path / "out")
    try:
        monkeypatch.setattr("sys.stdout", handle)
        monkeypatch.delenv("JOURNAL_STREAM", raising=False)
        assert parse()["logger"] is None
        monkeypatch.setenv("JOURNAL_STREAM", identity)
        assert parse()["logger"] == "apiserver.journald.stdout_observer"
    finally:
        handle.close()
