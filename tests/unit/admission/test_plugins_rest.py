"""The real plugins behind the events REST handler: refusals store nothing."""

from __future__ import annotations

import json
from pathlib import Path

from tests.unit.admission.test_admission import PATH, call, event, make, stored_values
from twisted.internet.task import Clock

from apiserver.admission.config import build_admission


def test_always_deny_refuses_in_mutating_admission_and_stores_nothing() -> None:
    setup = build_admission(Clock(), enable=["AlwaysDeny"])
    api, kv = make(setup.admission)
    answer = call(api, "POST", PATH, event("e1"), b"application/json")
    assert answer.code == 403
    body = json.loads(answer.body)
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'events.events.k8s.io "e1" is forbidden: admission control is denying all modifications'
    )
    assert stored_values(kv) == []


def test_event_rate_limit_leaves_events_k8s_io_alone(tmp_path: Path) -> None:
    """admission.go limits the core Event GroupKind only; this handler is events.k8s.io."""
    conf = tmp_path / "admission.yaml"
    conf.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
        "plugins:\n- name: EventRateLimit\n  configuration:\n"
        "    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n"
        "    kind: Configuration\n    limits:\n    - type: Server\n      qps: 1\n"
        "      burst: 1\n"
    )
    setup = build_admission(Clock(), enable=["EventRateLimit"], config_file=str(conf))
    api, kv = make(setup.admission)
    for index in range(3):
        answer = call(api, "POST", PATH, event(f"e{index}"), b"application/json")
        assert answer.code == 201, answer.body
    assert len(stored_values(kv)) == 3


def test_refused_updates_and_deletes_leave_the_stored_object_as_it_was() -> None:
    """Item 6 of the overload issue: a request refused at any stage writes nothing."""
    api, kv = make(None)
    assert call(api, "POST", PATH, event("e1", {"k": "v"}), b"application/json").code == 201
    before = stored_values(kv)
    api.admission = build_admission(Clock(), enable=["AlwaysDeny"]).admission
    refused = [
        call(api, "PUT", PATH + "/e1", event("e1", {"k": "w"}), b"application/json"),
        call(
            api,
            "PATCH",
            PATH + "/e1",
            json.dumps({"metadata": {"labels": {"k": "x"}}}).encode(),
            b"application/merge-patch+json",
        ),
        call(api, "DELETE", PATH + "/e1", b"", b"application/json"),
        call(api, "DELETE", PATH, b"", b"application/json"),
        call(api, "POST", PATH, event("e2"), b"application/json"),
    ]
    assert [answer.code for answer in refused] == [403] * 5
    assert stored_values(kv) == before
