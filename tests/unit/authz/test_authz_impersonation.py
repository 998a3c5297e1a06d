"""Impersonation header parsing and the resulting user (impersonation.go)."""

from __future__ import annotations

import pytest
from twisted.web.http_headers import Headers

from apiserver.auth.impersonation import (
    ImpersonationError,
    ImpersonationRequest,
    build_requests,
    impersonated_user,
    split_service_account,
    strip_headers,
)
from apiserver.auth.interface import UserInfo

BOB = UserInfo("bob")


def test_split_service_account() -> None:
    assert split_service_account("system:serviceaccount:ns:sa") == ("ns", "sa")
    assert split_service_account("system:serviceaccount:ns:sa:x") is None
    assert split_service_account("system:serviceaccount:Bad_NS:sa") is None
    assert split_service_account("alice") is None


def test_requests_and_attributes() -> None:
    headers = Headers(
        {
            "Impersonate-User": ["system:serviceaccount:ns:sa"],
            "Impersonate-Group": ["g1", "g2"],
            "Impersonate-Uid": ["u1"],
            "Impersonate-Extra-Acme.com%2FProject": ["p1", "p2"],
            "Impersonate-Extra-Bad%zz": ["v"],
        }
    )
    items = build_requests(headers)
    kinds = [(i.kind, i.name, i.namespace, i.field_path) for i in items]
    assert kinds == [
        ("ServiceAccount", "sa", "ns", ""),
        ("Group", "g1", "", ""),
        ("Group", "g2", "", ""),
        ("UserExtra", "p1", "", "acme.com/project"),
        ("UserExtra", "p2", "", "acme.com/project"),
        ("UserExtra", "v", "", "bad%zz"),
        ("UID", "u1", "", ""),
    ]
    sa = items[0].attributes(BOB)
    assert (sa.verb, sa.resource, sa.namespace, sa.name, sa.api_group, sa.api_version) == (
        "impersonate",
        "serviceaccounts",
        "ns",
        "sa",
        "",
        "v1",
    )
    extra = items[3].attributes(BOB)
    assert (extra.resource, extra.subresource, extra.api_group, extra.name) == (
        "userextras",
        "acme.com/project",
        "authentication.k8s.io",
        "p1",
    )
    uid = items[-1].attributes(BOB)
    assert (uid.resource, uid.api_group, uid.name) == ("uids", "authentication.k8s.io", "u1")
    user = impersonated_user(items, groups_given=True)
    assert user == UserInfo(
        "system:serviceaccount:ns:sa",
        uid="u1",
        groups=("g1", "g2", "system:authenticated"),
        extra={"acme.com/project": ("p1", "p2"), "bad%zz": ("v",)},
    )
    strip_headers(headers)
    assert list(headers.getAllRawHeaders()) == []


def test_groups_added() -> None:
    user = impersonated_user([ImpersonationRequest("User", "system:anonymous")], False)
    assert user.groups == ("system:unauthenticated",)
    items = [
        ImpersonationRequest("User", "a"),
        ImpersonationRequest("Group", "system:unauthenticated"),
    ]
    assert impersonated_user(items, True).groups == ("system:unauthenticated",)
    sa = [ImpersonationRequest("ServiceAccount", "sa", namespace="ns")]
    assert impersonated_user(sa, False).groups == (
        "system:serviceaccounts",
        "system:serviceaccounts:ns",
        "system:authenticated",
    )


def test_without_user() -> None:
    headers = Headers({"Impersonate-Uid": ["u1"], "Impersonate-Extra-K": ["v"]})
    with pytest.raises(ImpersonationError) as caught:
        build_requests(headers)
    assert str(caught.value) == (
        "requested [{UserExtra  v  authentication.k8s.io/v1  k} "
        "{UID  u1  authentication.k8s.io/v1  }] without impersonating a user"
    )
    assert build_requests(Headers({"Impersonate-Something": ["x"]})) == []
