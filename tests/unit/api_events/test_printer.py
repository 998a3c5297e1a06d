"""Table columns and cells of Events (printers.go printEvent)."""

from __future__ import annotations

from typing import Any

import pytest

from apiserver.api.events import convert as c
from apiserver.api.events.printer import COLUMN_DEFINITIONS, event_row

NOW = c.wire_time_to_epoch("2024-01-10T00:00:00Z")


def test_column_definitions() -> None:
    assert [(col["name"], col["priority"]) for col in COLUMN_DEFINITIONS] == [
        ("Last Seen", 0),
        ("Type", 0),
        ("Reason", 0),
        ("Object", 0),
        ("Subobject", 1),
        ("Source", 1),
        ("Message", 0),
        ("First Seen", 1),
        ("Count", 1),
        ("Name", 1),
    ]
    for col in COLUMN_DEFINITIONS:
        assert list(col) == ["name", "type", "format", "description", "priority"]
        assert col["type"] == "string"
        assert col["format"] == ("name" if col["name"] == "Name" else "")
    descriptions = {col["name"]: col["description"] for col in COLUMN_DEFINITIONS}
    assert descriptions["Last Seen"] == (
        "The time at which the most recent occurrence of this event was recorded."
    )
    assert descriptions["Count"] == "The number of times this event has occurred."
    assert descriptions["Subobject"].startswith("If referring to a piece of an object")
    assert descriptions["Name"].startswith("Name must be unique within a namespace.")


def row(**fields: Any) -> list[str | int]:
    return event_row(c.core_v1_to_internal(fields), NOW)


def test_core_event_row() -> None:
    cells = row(
        metadata={"name": "pod.1"},
        involvedObject={"kind": "Pod", "name": "web", "fieldPath": "spec.containers{app}"},
        reason="Pulled",
        message="  Image pulled\n",
        source={"component": "kubelet", "host": "node-1"},
        firstTimestamp="2024-01-09T23:00:00Z",
        lastTimestamp="2024-01-09T23:55:00Z",
        count=4,
        type="Normal",
    )
    assert cells == [
        "5m",
        "Normal",
        "Pulled",
        "pod/web",
        "spec.containers{app}",
        "kubelet, node-1",
        "Image pulled",
        "60m",
        4,
        "pod.1",
    ]


def test_new_style_event_row() -> None:
    cells = event_row(
        c.v1_to_internal(
            {
                "metadata": {"name": "n"},
                "eventTime": "2024-01-09T23:59:30.000000Z",
                "regarding": {"kind": "Node"},
                "reportingController": "ctl",
                "reportingInstance": "ctl-1",
                "note": "x",
            }
        ),
        NOW,
    )
    # no last/first timestamp: both from eventTime; kind only without a name; count 1
    assert cells == ["30s", "", "", "node", "", "ctl, ctl-1", "x", "30s", 1, "n"]


def test_series_wins_for_last_seen_and_count() -> None:
    cells = row(
        lastTimestamp="2024-01-01T00:00:00Z",
        count=9,
        eventTime="2024-01-09T00:00:00.000000Z",
        series={"count": 7, "lastObservedTime": "2024-01-09T23:00:00.000000Z"},
    )
    assert cells[0] == "60m"
    assert cells[7] == "24h"
    assert cells[8] == 7


def test_unset_times_and_source_without_host() -> None:
    cells = row(source={"component": "kubelet"}, series={})
    assert cells[0] == "<unknown>"
    assert cells[7] == "<unknown>"
    assert cells[5] == "kubelet"
    assert cells[8] == 0  # a series' own count is shown as is
    assert row()[5] == ""
    assert row()[8] == 1


def test_future_times() -> None:
    assert row(lastTimestamp="2024-01-10T00:00:01Z")[0] == "0s"
    assert row(lastTimestamp="2024-01-10T00:00:05Z")[0] == "<invalid>"


@pytest.mark.parametrize(
    ("message", "cell"),
    [("\t x \u00a0", "x"), ("\x1cx\x1c", "\x1cx\x1c"), ("a\nb", "a\nb")],
)
def test_message_trimmed_like_go(message: str, cell: str) -> None:
    assert row(message=message)[6] == cell
