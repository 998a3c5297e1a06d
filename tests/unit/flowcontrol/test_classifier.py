"""Classification against the bootstrap FlowSchemas (apiserver.flowcontrol.classifier)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from apiserver.flowcontrol.bootstrap import FLOW_SCHEMAS, flow_schema_objects
from apiserver.flowcontrol.classifier import Classifier, compile_flow_schema

_ids = itertools.count()
CLASSIFIER = Classifier(
    compile_flow_schema(obj)
    for obj in flow_schema_objects("2026-01-01T00:00:00Z", lambda: f"uid-{next(_ids)}")
)
AUTH = "system:authenticated"

#: (expected schema, user, groups, resource request, verb, group, resource, namespace, path)
CASES = [
    ("exempt", "admin", ("system:masters", AUTH), True, "create", "events.k8s.io", "events",
     "default", ""),
    ("exempt", "admin", ("system:masters",), False, "get", "", "", "", "/metrics"),
    ("probes", "alice", (AUTH,), False, "get", "", "", "", "/livez"),
    ("probes", "system:anonymous", ("system:unauthenticated",), False, "get", "", "", "",
     "/readyz"),
    ("system-leader-election", "system:kube-scheduler", (AUTH,), True, "update",
     "coordination.k8s.io", "leases", "kube-system", ""),
    ("system-leader-election", "system:serviceaccount:kube-system:x", (AUTH,), True, "get",
     "coordination.k8s.io", "leases", "kube-system", ""),
    ("system-node-high", "system:node:n1", ("system:nodes", AUTH), True, "patch", "",
     "nodes/status", "", ""),
    ("system-nodes", "system:node:n1", ("system:nodes", AUTH), True, "list", "", "pods", "ns",
     ""),
    ("kube-controller-manager", "system:kube-controller-manager", (AUTH,), True, "list",
     "events.k8s.io", "events", "", ""),
    ("kube-scheduler", "system:kube-scheduler", (AUTH,), True, "create", "events.k8s.io",
     "events", "default", ""),
    ("kube-system-service-accounts", "system:serviceaccount:kube-system:ctrl",
     ("system:serviceaccounts", AUTH), False, "get", "", "", "", "/version"),
    ("service-accounts", "system:serviceaccount:team:bot", ("system:serviceaccounts", AUTH),
     True, "list", "events.k8s.io", "events", "team", ""),
    ("global-default", "alice", (AUTH,), True, "create", "events.k8s.io", "events", "default",
     ""),
    ("global-default", "alice", (AUTH,), False, "post", "", "", "", "/anything"),
    ("catch-all", "stranger", (), True, "get", "", "events", "default", ""),
]  # fmt: skip


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[4]}")
def test_representative_request_of_each_schema(case: tuple[Any, ...]) -> None:
    expected, user, groups, resource_request, verb, group, resource, ns, path = case
    schema = CLASSIFIER.classify(user, groups, resource_request, verb, group, resource, ns, path)
    assert schema is not None and schema.name == expected


def test_every_bootstrap_schema_is_covered() -> None:
    assert {name for name, _ in FLOW_SCHEMAS} == {case[0] for case in CASES}


def test_schemas_sorted_by_precedence_then_name() -> None:
    keys = [(s.precedence, s.name) for s in CLASSIFIER.schemas]
    assert keys == sorted(keys)
    assert CLASSIFIER.schemas[0].name == "exempt"


def name_for(verb: str, path: str) -> str:
    schema = CLASSIFIER.classify("a", (AUTH,), False, verb, "", "", "", path)
    assert schema is not None
    return schema.name


def test_probe_prefix_rule_follows_rule_go() -> None:
    # rule.go's matchPolicyRuleNonResourceURL turns "/livez" into the prefix "/livez/".
    assert name_for("get", "/livez/ping") == "probes"
    assert name_for("post", "/livez") == "global-default"
    assert name_for("get", "/livezz") == "global-default"


def test_candidates_are_remembered_per_user() -> None:
    first = CLASSIFIER.candidates("carol", (AUTH,))
    assert CLASSIFIER.candidates("carol", (AUTH,)) is first
    assert [c[0].name for c in first] == ["probes", "global-default", "catch-all"]


def test_a_repeated_request_is_classified_from_memory_and_memory_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import apiserver.flowcontrol.classifier as classifier_module

    classifier = Classifier(
        compile_flow_schema(obj)
        for obj in flow_schema_objects("2026-01-01T00:00:00Z", lambda: f"uid-{next(_ids)}")
    )
    monkeypatch.setattr(classifier_module, "DECISION_CACHE_SIZE", 3)
    request = ("alice", (AUTH,), True, "create", "events.k8s.io", "events", "default", "")
    first = classifier.classify(*request)
    assert first is not None and first.name == "global-default"
    # Remembered: the rules are not consulted again for the same request.
    classifier._by_user.clear()
    monkeypatch.setattr(classifier, "candidates", lambda *a: pytest.fail("rules consulted"))
    assert classifier.classify(*request) is first
    monkeypatch.undo()
    monkeypatch.setattr(classifier_module, "DECISION_CACHE_SIZE", 3)
    for namespace in ("a", "b", "c", "d"):
        classifier.classify("alice", (AUTH,), True, "get", "", "events", namespace, "")
    assert len(classifier._decided) <= 3
    # Every answer is still the rules' answer after the memory was cleared.
    for case in CASES:
        expected, user, groups, resource_request, verb, group, resource, ns, path = case
        schema = classifier.classify(
            user, groups, resource_request, verb, group, resource, ns, path
        )
        assert schema is not None and schema.name == expected
