"""The rule resolvers behind SelfSubjectRulesReview, the protobuf messages of the reviews and
ServiceAccounts, and their schemas against the official OpenAPI definitions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from apiserver.api.serviceaccounts.view import SCHEMA
from apiserver.auth.authz.abac import ABACAuthorizer, Policy
from apiserver.auth.authz.builtin import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from apiserver.auth.authz.node import NodeAuthorizer
from apiserver.auth.authz.rbac import RBACAuthorizer
from apiserver.auth.authz.rules import EVERYTHING, NonResourceRule, ResourceRule, rules_of
from apiserver.auth.authz.union import Union
from apiserver.auth.interface import UserInfo
from apiserver.openapi.documents import api_v1_document, review_documents
from apiserver.protobuf import codec

REFERENCE = Path(__file__).resolve().parents[2] / "reference"
BOB = UserInfo("bob", groups=("dev", "system:authenticated"))


def test_union_concatenates_and_marks_incomplete() -> None:
    node = UserInfo("system:node:n1", groups=("system:nodes",))
    chain = Union([PrivilegedGroups(), NodeAuthorizer(), AlwaysDeny(), AlwaysAllow()])
    rules = rules_of(chain, node, "default")
    assert rules.incomplete
    assert rules.error == "node authorizer does not support user rule resolution"
    assert rules.resource_rules == EVERYTHING.resource_rules
    assert not rules_of(chain, BOB, "default").incomplete
    assert rules_of(None, BOB, "x") == EVERYTHING


def test_abac_rules_for_the_namespace() -> None:
    abac = ABACAuthorizer(
        [
            Policy(user="bob", namespace="team", resource="events", api_group="*", readonly=True),
            Policy(user="bob", namespace="*", non_resource_path="/healthz"),
            Policy(user="alice", namespace="*", resource="*", api_group="*"),
        ]
    )
    rules = abac.rules_for(BOB, "team")
    assert rules.resource_rules == (ResourceRule(("get", "list", "watch"), ("*",), ("events",)),)
    assert rules.non_resource_rules == (NonResourceRule(("*",), ("/healthz",)),)
    assert abac.rules_for(BOB, "other").resource_rules == ()


def test_rbac_rules_split_resource_and_urls() -> None:
    rules = RBACAuthorizer().rules_for(UserInfo("x", groups=("system:masters",)), "default")
    assert ResourceRule(("*",), ("*",), ("*",)) in rules.resource_rules
    assert NonResourceRule(("*",), ("*",)) in rules.non_resource_rules
    assert RBACAuthorizer().rules_for(UserInfo("nobody"), "default").resource_rules == ()


def test_extra_values_round_trip_in_protobuf() -> None:
    review = {
        "kind": "SubjectAccessReview",
        "apiVersion": "authorization.k8s.io/v1",
        "metadata": {},
        "spec": {
            "resourceAttributes": {"verb": "get", "labelSelector": {"rawSelector": "a=b"}},
            "user": "u",
            "extra": {"b": ["2", "3"], "a": ["1"]},
        },
        "status": {"allowed": True},
    }
    api_version, kind, message = codec.unwrap(codec.encode_object(review))
    decoded = codec.decode(codec.message_for(api_version, kind), message)  # type: ignore[arg-type]
    assert decoded["spec"] == {
        "resourceAttributes": {"verb": "get", "labelSelector": {"rawSelector": "a=b"}},
        "user": "u",
        "extra": {"a": ["1"], "b": ["2", "3"]},
    }
    assert decoded["status"] == {"allowed": True}


def _official(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((REFERENCE / name).read_text())
    return document


def test_served_review_documents_are_the_official_ones() -> None:
    served = review_documents()
    assert served["apis/authentication.k8s.io/v1"] == _official("authentication-v1-openapi.json")
    assert served["apis/authorization.k8s.io/v1"] == _official("authorization-v1-openapi.json")
    group = served["apis/authentication.k8s.io"]["paths"]["/apis/authentication.k8s.io/"]
    assert group["get"]["operationId"] == "getAuthenticationAPIGroup"
    assert group["get"]["tags"] == ["authentication"]


REVIEW_KINDS = [
    ("authentication-v1-openapi.json", "authentication", "authentication.k8s.io/v1", kind)
    for kind in ("TokenReview", "SelfSubjectReview")
] + [
    ("authorization-v1-openapi.json", "authorization", "authorization.k8s.io/v1", kind)
    for kind in (
        "SubjectAccessReview",
        "LocalSubjectAccessReview",
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
    )
]


def _fields_match(schemas: dict[str, Any], name: str, descriptor: Any, seen: set[str]) -> None:
    """Every property of the official schema is a field of our message, recursively."""
    if name in seen:
        return
    seen.add(name)
    schema = schemas[name]
    ours = {f.name: f for f in descriptor.fields}
    for prop, spec in schema.get("properties", {}).items():
        if prop in ("kind", "apiVersion"):
            continue
        assert prop in ours, f"{name}.{prop} is not in {descriptor.full_name}"
        ref = spec.get("$ref") or (spec.get("allOf") or [{}])[0].get("$ref")
        items = spec.get("items") or {}
        ref = ref or items.get("$ref") or (items.get("allOf") or [{}])[0].get("$ref")
        field = ours[prop]
        if ref and field.message_type is not None and "meta.v1" not in ref:
            _fields_match(schemas, ref.rsplit("/", 1)[-1], field.message_type, seen)


@pytest.mark.parametrize(("document", "short", "api_version", "kind"), REVIEW_KINDS)
def test_review_messages_match_the_official_schemas(
    document: str, short: str, api_version: str, kind: str
) -> None:
    schemas = _official(document)["components"]["schemas"]
    message = codec.message_for(api_version, kind)
    assert message is not None
    _fields_match(schemas, f"io.k8s.api.{short}.v1.{kind}", message.DESCRIPTOR, set())


def test_service_account_schema_matches_the_official_one() -> None:
    schemas = _official("core-v1-events-serviceaccounts-openapi.json")["components"]["schemas"]
    official = schemas["io.k8s.api.core.v1.ServiceAccount"]
    assert set(official["properties"]) == set(SCHEMA.field_names())
    message = codec.message_for("v1", "ServiceAccount")
    assert message is not None
    _fields_match(schemas, "io.k8s.api.core.v1.ServiceAccount", message.DESCRIPTOR, set())
    served = api_v1_document(events=True, service_accounts=True)["components"]["schemas"]
    assert served["io.k8s.api.core.v1.ServiceAccount"] == official
    paths = api_v1_document(events=True, service_accounts=True)["paths"]
    assert "/api/v1/namespaces/{namespace}/serviceaccounts/{name}" in paths
    assert "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token" not in paths
