"""The bootstrap ensurer and the config consumer on the in-memory store and a fake clock
(apiserver.api.flowcontrol.ensurer, controller)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from tests.unit.api_flowcontrol.test_rest import LEVEL, SCHEMA, Harness
from tests.unit.flowcontrol.test_filters import EVENTS, make_apf, request_for
from tests.unit.unit_helpers import result_of
from twisted.internet import defer

from apiserver.api.flowcontrol.controller import ConfigController
from apiserver.api.flowcontrol.ensurer import Ensurer, should_update_spec
from apiserver.flowcontrol.bootstrap import AUTO_UPDATE, FLOW_SCHEMAS, PRIORITY_LEVELS


def ensure(h: Harness) -> None:
    ids = itertools.count()
    ensurer = Ensurer(h.registries, h.clock, lambda: f"boot-{next(ids)}")
    result_of(defer.ensureDeferred(ensurer.ensure()))


def names(h: Harness, resource: str) -> list[str]:
    return sorted(i["metadata"]["name"] for i in h.json("GET", resource)[1]["items"])


def test_ensurer_creates_the_bootstrap_objects() -> None:
    h = Harness()
    ensure(h)
    assert names(h, "flowschemas") == sorted(name for name, _ in FLOW_SCHEMAS)
    assert names(h, "prioritylevelconfigurations") == sorted(name for name, _ in PRIORITY_LEVELS)
    obj = h.json("GET", "flowschemas/global-default")[1]
    assert obj["metadata"]["annotations"] == {AUTO_UPDATE: "true"}
    assert obj["metadata"]["generation"] == 1
    revision = obj["metadata"]["resourceVersion"]
    ensure(h)  # nothing to do the second time
    assert h.json("GET", "flowschemas/global-default")[1]["metadata"]["resourceVersion"] == (
        revision
    )


def test_mandatory_objects_are_restored_and_recreated() -> None:
    h = Harness()
    ensure(h)
    assert h.json("DELETE", "flowschemas/catch-all")[0] == 200
    code, _ = h.json(
        "PATCH",
        "prioritylevelconfigurations/exempt",
        {"metadata": {"annotations": {AUTO_UPDATE: "false"}}},
        content_type="application/merge-patch+json",
    )
    assert code == 200
    ensure(h)
    assert "catch-all" in names(h, "flowschemas")
    exempt = h.json("GET", "prioritylevelconfigurations/exempt")[1]
    assert exempt["metadata"]["annotations"][AUTO_UPDATE] == "true"


def test_suggested_objects_follow_their_annotation() -> None:
    h = Harness()
    ensure(h)
    # A changed spec with autoupdate false is left alone.
    code, changed = h.json(
        "PATCH",
        "flowschemas/service-accounts",
        {
            "metadata": {"annotations": {AUTO_UPDATE: "false"}},
            "spec": {"matchingPrecedence": 8000},
        },
        content_type="application/merge-patch+json",
    )
    assert code == 200 and changed["metadata"]["generation"] == 2
    # A changed spec with autoupdate true is put back.
    h.json(
        "PATCH",
        "flowschemas/global-default",
        {"spec": {"matchingPrecedence": 9800}},
        content_type="application/merge-patch+json",
    )
    # A deleted suggested object is created again.
    h.json("DELETE", "prioritylevelconfigurations/workload-low")
    ensure(h)
    kept = h.json("GET", "flowschemas/service-accounts")[1]
    assert kept["spec"]["matchingPrecedence"] == 8000
    restored = h.json("GET", "flowschemas/global-default")[1]
    assert restored["spec"]["matchingPrecedence"] == 9900
    assert restored["metadata"]["generation"] == 3
    assert "workload-low" in names(h, "prioritylevelconfigurations")


def test_unknown_annotation_counts_as_true_only_at_generation_one() -> None:
    assert should_update_spec({"generation": 1})
    assert not should_update_spec({"generation": 2})
    assert should_update_spec({"generation": 5, "annotations": {AUTO_UPDATE: "T"}})
    assert should_update_spec({"generation": 1, "annotations": {AUTO_UPDATE: "no"}})


def test_objects_no_longer_bootstrapped_are_removed_when_autoupdated() -> None:
    h = Harness()
    ensure(h)
    auto: dict[str, Any] = json.loads(json.dumps(LEVEL))
    auto["metadata"] = {"name": "retired", "annotations": {AUTO_UPDATE: "true"}}
    h.json("POST", "prioritylevelconfigurations", auto)
    h.json("POST", "prioritylevelconfigurations", LEVEL)  # no annotation: the user's
    ensure(h)
    listed = names(h, "prioritylevelconfigurations")
    assert "retired" not in listed and "tiny" in listed


def test_controller_reconfigures_live_and_marks_dangling_schemas() -> None:
    h = Harness()
    apf = make_apf(h.clock, total=600)
    ids = itertools.count()
    controller = ConfigController(
        apf, h.registries, h.clock, Ensurer(h.registries, h.clock, lambda: f"b-{next(ids)}")
    )
    producer = controller.wait_ensured()
    consumer = controller.wait_digested()
    controller.start()
    try:
        assert producer.called and consumer.called
        stored_uid = h.json("GET", "flowschemas/global-default")[1]["metadata"]["uid"]
        request, info = request_for("GET", EVENTS, user="flooder")
        apf(request, info)
        assert request.responseHeaders.getRawHeaders(b"x-kubernetes-pf-flowschema-uid") == [
            stored_uid.encode()
        ]
        # A schema naming a level that does not exist yet: dangling, then found.
        code, created = h.json("POST", "flowschemas", SCHEMA)
        assert code == 201
        h.clock.advance(0)
        status = h.json("GET", "flowschemas/mine")[1]["status"]
        assert status["conditions"][0]["reason"] == "NotFound"
        assert status["conditions"][0]["status"] == "True"
        h.json("POST", "prioritylevelconfigurations", LEVEL)
        h.clock.advance(0)
        assert apf.levels["tiny"].nominal == 3
        request, info = request_for("GET", "/x/y", user="flooder")
        apf(request, info)
        assert request.responseHeaders.getRawHeaders(b"x-kubernetes-pf-flowschema-uid") == [
            created["metadata"]["uid"].encode()
        ]
        status = h.json("GET", "flowschemas/mine")[1]["status"]
        assert status["conditions"][0]["reason"] == "Found"
        # Deleting it sends flooder back.
        h.json("DELETE", "flowschemas/mine")
        h.clock.advance(0)
        request, info = request_for("GET", "/x/y", user="flooder")
        apf(request, info)
        assert request.responseHeaders.getRawHeaders(b"x-kubernetes-pf-flowschema-uid") == [
            stored_uid.encode()
        ]
        # Every minute the ensurer runs again: a deleted mandatory object comes back.
        h.json("DELETE", "prioritylevelconfigurations/catch-all")
        h.clock.advance(60)
        assert "catch-all" in names(h, "prioritylevelconfigurations")
    finally:
        controller.stop()
    assert all(not call.active() for call in h.clock.getDelayedCalls())


def test_the_exempt_levels_settable_fields_are_kept() -> None:
    h = Harness()
    ensure(h)
    code, patched = h.json(
        "PATCH",
        "prioritylevelconfigurations/exempt",
        {"spec": {"exempt": {"nominalConcurrencyShares": 5, "lendablePercent": 10}}},
        content_type="application/merge-patch+json",
    )
    assert code == 200, patched
    code, refused = h.json(  # the type stays fixed
        "PATCH",
        "prioritylevelconfigurations/exempt",
        {"spec": {"type": "Limited"}},
        content_type="application/merge-patch+json",
    )
    assert code == 422 and "spec.type" in refused["message"]
    ensure(h)
    exempt = h.json("GET", "prioritylevelconfigurations/exempt")[1]["spec"]["exempt"]
    assert exempt == {"nominalConcurrencyShares": 5, "lendablePercent": 10}
