"""The audit policy: reading, validation and matching (apiserver.audit.policy), after
k8s.io/apiserver pkg/audit/policy/{reader,checker}_test.go and pkg/apis/audit/validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from twisted.logger import ILogObserver, LogEvent, formatEvent, globalLogPublisher
from zope.interface import implementer

from apiserver.audit.policy import (
    AuditConfig,
    GroupResources,
    Policy,
    PolicyError,
    PolicyRule,
    load_policy_bytes,
    load_policy_file,
)
from apiserver.auth.interface import UserInfo
from apiserver.auth.requestinfo import RequestInfo, parse_request_info

HEAD = "apiVersion: audit.k8s.io/v1\nkind: Policy\n"

ALICE = UserInfo("alice", groups=("devs", "system:authenticated"))
BOB = UserInfo("bob", groups=("system:authenticated",))


def info(method: str, path: str, query: str = "") -> RequestInfo:
    parsed: dict[bytes, list[bytes]] = {}
    for pair in query.split("&") if query else []:
        key, _, value = pair.partition("=")
        parsed.setdefault(key.encode(), []).append(value.encode())
    return parse_request_info(method, path, parsed)


EVENT = "/apis/events.k8s.io/v1/namespaces/default/events/e1"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
TOKEN = "/api/v1/namespaces/ns1/serviceaccounts/sa/token"
POD_LOG = "/api/v1/namespaces/ns1/pods/p1/log"


def level(policy: Policy, user: UserInfo | None, request: RequestInfo) -> str:
    return policy.evaluate(user, request).level


# --- reading ---------------------------------------------------------------------------------


def test_a_yaml_policy_is_read() -> None:
    policy = load_policy_bytes(
        (
            HEAD
            + "omitStages: [RequestReceived]\n"
            + "rules:\n"
            + "- level: None\n  nonResourceURLs: ['/healthz*']\n"
            + "- level: RequestResponse\n  resources:\n  - group: ''\n    resources: [pods]\n"
            + "    resourceNames: [p1]\n"
            + "- level: Metadata\n  omitStages: [ResponseStarted]\n  omitManagedFields: false\n"
        ).encode()
    )
    assert len(policy.rules) == 3
    assert policy.rules[1].resources == (GroupResources("", ("pods",), ("p1",)),)
    assert policy.omit_stages == ("RequestReceived",)
    assert policy.rules[2].omit_managed_fields is False


def test_a_json_policy_is_read() -> None:
    doc = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "rules": [{"level": "Metadata", "verbs": ["get"]}],
    }
    policy = load_policy_bytes(json.dumps(doc).encode())
    assert policy.rules == (PolicyRule("Metadata", verbs=frozenset({"get"})),)


def test_the_example_policy_in_etc_is_valid() -> None:
    policy = load_policy_file(str(Path(__file__).parents[3] / "etc" / "audit-policy.yaml"))
    assert policy.rules[0].level == "None"
    assert level(policy, ALICE, info("GET", "/healthz")) == "None"
    assert level(policy, ALICE, info("POST", EVENTS)) == "Request"
    assert level(policy, ALICE, info("GET", EVENT)) == "Metadata"


def test_zero_rules_is_an_error() -> None:
    with pytest.raises(PolicyError, match=r"^loaded illegal policy with 0 rules$"):
        load_policy_bytes(HEAD.encode())
    with pytest.raises(PolicyError, match=r"^loaded illegal policy with 0 rules$"):
        load_policy_bytes((HEAD + "rules: []\n").encode())


def test_unknown_fields_fall_back_to_lenient_decoding_with_a_warning() -> None:
    seen: list[LogEvent] = []

    @implementer(ILogObserver)
    def observe(event: LogEvent) -> None:
        seen.append(event)

    globalLogPublisher.addObserver(observe)
    try:
        policy = load_policy_bytes(
            (HEAD + "rules:\n- level: Metadata\n  bogus: 1\nextra: true\n").encode()
        )
    finally:
        globalLogPublisher.removeObserver(observe)
    assert policy.rules == (PolicyRule("Metadata"),)
    texts = [formatEvent(e) for e in seen]
    assert any(
        t.startswith("Audit policy contains errors, falling back to lenient decoding: ")
        and 'unknown field "rules[0].bogus"' in t
        and 'unknown field "extra"' in t
        for t in texts
    ), texts


def test_duplicate_fields_fall_back_to_lenient_decoding() -> None:
    policy = load_policy_bytes((HEAD + "rules:\n- level: None\n  level: Metadata\n").encode())
    assert policy.rules[0].level == "Metadata"


def test_wrong_types_fail_decoding() -> None:
    with pytest.raises(
        PolicyError, match=r"^failed decoding: rules\[0\]\.level: expected a string"
    ):
        load_policy_bytes((HEAD + "rules:\n- level: 3\n").encode())
    with pytest.raises(PolicyError, match=r"^failed decoding: rules: expected a list"):
        load_policy_bytes((HEAD + "rules: 3\n").encode())


@pytest.mark.parametrize(
    "head",
    [
        "apiVersion: audit.k8s.io/v1beta1\nkind: Policy\n",
        "apiVersion: audit.k8s.io/v1\nkind: Event\n",
    ],
)
def test_only_audit_k8s_io_v1_policy_is_known(head: str) -> None:
    with pytest.raises(PolicyError, match=r"^failed decoding: no kind"):
        load_policy_bytes((head + "rules:\n- level: None\n").encode())


def test_a_document_without_kind_fails() -> None:
    with pytest.raises(PolicyError, match="Object 'Kind' is missing"):
        load_policy_bytes(b"rules:\n- level: None\n")
    with pytest.raises(PolicyError, match=r"^failed decoding: "):
        load_policy_bytes(b"rules: [\n")


def test_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ValueError) as caught:
        load_policy_file(str(missing))
    assert str(caught.value) == (
        f'failed to read file path "{missing}": open {missing}: no such file or directory'
    )
    bad = tmp_path / "policy.yaml"
    bad.write_text(HEAD)
    with pytest.raises(ValueError) as caught:
        load_policy_file(str(bad))
    assert str(caught.value) == f"loaded illegal policy with 0 rules: from file {bad}"


# --- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ("- verbs: [get]\n", "rules[0].level: Required value"),
        (
            "- level: Everything\n",
            'rules[0].level: Unsupported value: "Everything": supported values: "None", '
            '"Metadata", "Request", "RequestResponse"',
        ),
        (
            "- level: None\n  nonResourceURLs: [healthz]\n",
            'rules[0].nonResourceURLs[0]: Invalid value: "healthz": non-resource URL rules must '
            "begin with a '/' character",
        ),
        (
            "- level: None\n  nonResourceURLs: ['/a*/b']\n",
            'rules[0].nonResourceURLs[0]: Invalid value: "/a*/b": non-resource URL wildcards '
            "'*' must be the final character of the rule",
        ),
        (
            "- level: None\n  nonResourceURLs: ['/x']\n  namespaces: [default]\n",
            'rules[0].nonResourceURLs: Invalid value: ["/x"]: rules cannot apply to both '
            "regular resources and non-resource URLs",
        ),
        (
            "- level: None\n  resources:\n  - resourceNames: [x]\n",
            'rules[0].resources.resourceNames: Invalid value: ["x"]: using resourceNames '
            "requires at least one resource",
        ),
        (
            "- level: None\n  resources:\n  - group: Not_A_Group\n    resources: [x]\n",
            'rules[0].resources.group: Invalid value: "Not_A_Group": a lowercase RFC 1123',
        ),
        (
            "- level: None\n  omitStages: [Sometime]\n",
            'rules[0].omitStages[0]: Invalid value: "Sometime": allowed stages are '
            "RequestReceived,ResponseStarted,ResponseComplete,Panic",
        ),
    ],
)
def test_validation(rules: str, message: str) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy_bytes((HEAD + "rules:\n" + rules).encode())
    assert str(caught.value).startswith(message)


def test_validation_reports_every_error_at_once() -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy_bytes((HEAD + "omitStages: [Never]\nrules:\n- verbs: [get]\n").encode())
    assert str(caught.value) == (
        '[omitStages[0]: Invalid value: "Never": allowed stages are '
        "RequestReceived,ResponseStarted,ResponseComplete,Panic, rules[0].level: Required value]"
    )


def test_a_lone_star_is_a_valid_url() -> None:
    load_policy_bytes((HEAD + "rules:\n- level: None\n  nonResourceURLs: ['*']\n").encode())


# --- matching --------------------------------------------------------------------------------


def test_the_first_matching_rule_wins_and_no_match_is_none() -> None:
    policy = Policy(
        (
            PolicyRule("Request", users=frozenset({"alice"})),
            PolicyRule("Metadata", verbs=frozenset({"get"})),
        )
    )
    assert level(policy, ALICE, info("GET", EVENT)) == "Request"
    assert level(policy, BOB, info("GET", EVENT)) == "Metadata"
    assert level(policy, BOB, info("DELETE", EVENT)) == "None"


def test_users_and_groups_never_match_without_a_user() -> None:
    policy = Policy(
        (
            PolicyRule("Request", users=frozenset({"alice"})),
            PolicyRule("Metadata", user_groups=frozenset({"devs"})),
            PolicyRule("RequestResponse"),
        )
    )
    assert level(policy, None, info("GET", EVENT)) == "RequestResponse"
    assert level(policy, UserInfo("carol", groups=("devs",)), info("GET", EVENT)) == "Metadata"


def test_verbs_come_from_the_request_info() -> None:
    policy = Policy(
        (
            PolicyRule("Request", verbs=frozenset({"watch"})),
            PolicyRule("Metadata", verbs=frozenset({"list"})),
            PolicyRule("RequestResponse", verbs=frozenset({"post"})),
        )
    )
    assert level(policy, ALICE, info("GET", EVENTS, "watch=1")) == "Request"
    assert level(policy, ALICE, info("GET", EVENTS)) == "Metadata"
    # Non-resource requests: the lower-cased method.
    assert level(policy, ALICE, info("POST", "/logs")) == "RequestResponse"


def rules_for(*entries: GroupResources, namespaces: tuple[str, ...] = ()) -> Policy:
    return Policy((PolicyRule("Metadata", resources=entries, namespaces=frozenset(namespaces)),))


@pytest.mark.parametrize(
    ("entry", "path", "matches"),
    [
        (GroupResources("events.k8s.io", ("events",)), EVENT, True),
        (GroupResources("", ("events",)), EVENT, False),
        (GroupResources("*", ("events",)), EVENT, True),
        (GroupResources("events.k8s.io"), EVENT, True),
        (GroupResources("*", ("*",)), POD_LOG, True),
        (GroupResources("", ("pods",)), POD_LOG, False),
        (GroupResources("", ("pods/log",)), POD_LOG, True),
        (GroupResources("", ("pods/*",)), POD_LOG, True),
        (GroupResources("", ("*/log",)), POD_LOG, True),
        (GroupResources("", ("*/status",)), POD_LOG, False),
        (GroupResources("", ("*/log",)), "/api/v1/namespaces/ns1/pods/p1", False),
        (GroupResources("", ("serviceaccounts/token",)), TOKEN, True),
        (GroupResources("", ("pods/log",), ("p1",)), POD_LOG, True),
        (GroupResources("", ("pods/log",), ("p2",)), POD_LOG, False),
        (GroupResources("events.k8s.io", ("events",)), "/healthz", False),
    ],
)
def test_resources(entry: GroupResources, path: str, matches: bool) -> None:
    got = level(rules_for(entry), ALICE, info("GET", path))
    assert got == ("Metadata" if matches else "None")


def test_namespaces_match_resource_requests_only_and_empty_is_cluster_scope() -> None:
    policy = rules_for(namespaces=("default",))
    assert level(policy, ALICE, info("GET", EVENT)) == "Metadata"
    assert level(policy, ALICE, info("GET", TOKEN)) == "None"
    assert level(policy, ALICE, info("GET", "/healthz")) == "None"
    cluster = rules_for(namespaces=("",))
    assert level(cluster, ALICE, info("GET", "/api/v1/nodes/n1")) == "Metadata"
    assert level(cluster, ALICE, info("GET", EVENT)) == "None"


@pytest.mark.parametrize(
    ("spec", "path", "matches"),
    [
        ("*", "/healthz", True),
        ("/healthz", "/healthz", True),
        ("/healthz", "/healthz/ping", False),
        ("/healthz*", "/healthz/ping", True),
        ("/healthz/*", "/healthz", False),
        ("/version", "/version/", False),
        ("*", EVENT, False),
    ],
)
def test_non_resource_urls(spec: str, path: str, matches: bool) -> None:
    policy = Policy((PolicyRule("Metadata", non_resource_urls=(spec,)),))
    assert level(policy, ALICE, info("GET", path)) == ("Metadata" if matches else "None")


def test_omit_stages_are_unioned_and_omit_managed_fields_defaults_to_the_policy() -> None:
    policy = Policy(
        (
            PolicyRule("Metadata", verbs=frozenset({"get"}), omit_stages=("ResponseStarted",)),
            PolicyRule("Request", omit_managed_fields=False),
        ),
        omit_stages=("RequestReceived",),
        omit_managed_fields=True,
    )
    assert policy.evaluate(ALICE, info("GET", EVENT)) == AuditConfig(
        "Metadata", frozenset({"RequestReceived", "ResponseStarted"}), True
    )
    assert policy.evaluate(ALICE, info("POST", EVENTS)) == AuditConfig(
        "Request", frozenset({"RequestReceived"}), False
    )
    # No match: level None with the policy's own settings (checker.go).
    assert Policy((PolicyRule("Metadata", verbs=frozenset({"x"})),), ("Panic",), True).evaluate(
        ALICE, info("GET", EVENT)
    ) == AuditConfig("None", frozenset({"Panic"}), True)


def test_rules_after_a_catch_all_are_never_reached() -> None:
    # Evaluation stops at the first rule without conditions, as ruleMatches would.
    policy = load_policy_bytes(
        (
            HEAD + "omitStages: [RequestReceived]\nrules:\n"
            "- level: None\n  users: [bob]\n"
            "- level: Metadata\n  omitStages: [ResponseStarted]\n"
            "- level: RequestResponse\n"
        ).encode()
    )
    assert level(policy, BOB, info("GET", EVENT)) == "None"
    metadata = policy.evaluate(ALICE, info("GET", EVENT))
    assert metadata.level == "Metadata"
    assert metadata.omit_stages == frozenset({"RequestReceived", "ResponseStarted"})
    assert level(policy, None, info("GET", "/healthz")) == "Metadata"
    # Only a catch-all: every request, its config.
    only = load_policy_bytes((HEAD + "rules:\n- level: Request\n").encode())
    assert level(only, None, info("POST", EVENTS)) == "Request"
    assert level(only, ALICE, info("GET", "/livez")) == "Request"
