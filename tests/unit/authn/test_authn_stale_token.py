"""Bound tokens past ``warnafter`` (kept valid, noted once) and pod-bound tokens naming a node."""

from __future__ import annotations

from typing import Any, cast

import pytest
from authn_helpers import NOW, FakeStore, result_of, rsa_key
from twisted.internet.task import Clock
from twisted.logger import ILogObserver, Logger

from apiserver.auth.authn import serviceaccount
from apiserver.auth.authn.serviceaccount import (
    KeySet,
    ServiceAccountAuthenticator,
    TokenSigner,
)
from apiserver.auth.interface import AuthenticationError

ISSUER = "https://kubernetes.default.svc"
PREFIX = "/registry"


def setup() -> tuple[ServiceAccountAuthenticator, FakeStore, TokenSigner, Clock]:
    store = FakeStore()
    store.put(
        f"{PREFIX}/serviceaccounts/ci/builder",
        {"metadata": {"name": "builder", "namespace": "ci", "uid": "sa-uid"}},
    )
    store.put(f"{PREFIX}/pods/ci/runner", {"metadata": {"name": "runner", "uid": "pod-uid"}})
    clock = Clock()
    clock.advance(NOW)
    key = rsa_key("sa")
    auth = ServiceAccountAuthenticator(
        [ISSUER], KeySet.of([key.public_key()]), [ISSUER], store, PREFIX, clock, legacy=False
    )
    return auth, store, TokenSigner(key, ISSUER), clock


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    monkeypatch.setattr(serviceaccount, "log", Logger(observer=cast(ILogObserver, events.append)))
    return events


def texts(events: list[dict[str, Any]]) -> list[str]:
    from twisted.logger import formatEvent

    return [formatEvent(e) for e in events]


def extended(signer: TokenSigner) -> str:
    """A kubelet-style token: valid a year, warnafter after 3607 s."""
    claims = signer.bound_claims(
        "ci",
        "builder",
        "sa-uid",
        [ISSUER],
        NOW,
        lifetime=365 * 24 * 3600,
        pod=("runner", "pod-uid"),
        warn_after=NOW + 3607,
    )
    return signer.generate(claims)


def test_token_past_warnafter_is_accepted_and_logged_once(logged: list[dict[str, Any]]) -> None:
    auth, _, signer, clock = setup()
    token = extended(signer)
    assert result_of(auth.authenticate_token(token, (ISSUER,))) is not None
    assert logged == []
    clock.advance(3607 + 100)
    for _ in range(3):
        result = result_of(auth.authenticate_token(token, (ISSUER,)))
        assert result.user.name == "system:serviceaccount:ci:builder"
    assert texts(logged) == [
        "authentication.k8s.io/stale-token: subject: system:serviceaccount:ci:builder, "
        "seconds after warning threshold: 100"
    ]
    assert logged[0]["log_level"].name == "info"
    # Another token of the same account is another entry.
    other = extended(signer)
    clock.advance(1)
    assert result_of(auth.authenticate_token(other, (ISSUER,))) is not None
    assert len(logged) == 2


def test_a_stale_token_carries_the_audit_annotation_on_every_request(
    logged: list[dict[str, Any]],
) -> None:
    auth, _, signer, clock = setup()
    token = extended(signer)
    fresh = result_of(auth.authenticate_token(token, (ISSUER,)))
    assert fresh.annotations == {}
    clock.advance(3607 + 100)
    first = result_of(auth.authenticate_token(token, (ISSUER,)))
    clock.advance(5)
    second = result_of(auth.authenticate_token(token, (ISSUER,)))
    # claims.go: audit.AddAuditAnnotation on each request, not only the logged first one.
    assert first.annotations == {
        "authentication.k8s.io/stale-token": "subject: system:serviceaccount:ci:builder, "
        "seconds after warning threshold: 100"
    }
    assert second.annotations == {
        "authentication.k8s.io/stale-token": "subject: system:serviceaccount:ci:builder, "
        "seconds after warning threshold: 105"
    }
    assert first.audiences == (ISSUER,)
    assert len(logged) == 1


def test_exactly_at_warnafter_is_not_stale(logged: list[dict[str, Any]]) -> None:
    auth, _, signer, clock = setup()
    token = extended(signer)
    clock.advance(3607)
    assert result_of(auth.authenticate_token(token, (ISSUER,))) is not None
    assert logged == []


def test_memory_of_logged_tokens_is_bounded(
    logged: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serviceaccount, "STALE_LOG_MEMORY", 2)
    auth, _, signer, clock = setup()
    tokens = [extended(signer) for _ in range(3)]
    clock.advance(4000)
    for token in tokens:
        result_of(auth.authenticate_token(token, (ISSUER,)))
    assert len(logged) == 3
    result_of(auth.authenticate_token(tokens[0], (ISSUER,)))  # forgotten: logged again
    assert len(logged) == 4


def test_pod_bound_node_claim_is_not_looked_up() -> None:
    auth, store, signer, _ = setup()
    claims = signer.bound_claims(
        "ci",
        "builder",
        "sa-uid",
        [ISSUER],
        NOW,
        pod=("runner", "pod-uid"),
        node=("node-1", "node-uid"),
    )
    user = result_of(auth.authenticate_token(signer.generate(claims), (ISSUER,))).user
    assert user.extra["authentication.kubernetes.io/node-name"] == ("node-1",)
    assert user.extra["authentication.kubernetes.io/node-uid"] == ("node-uid",)
    assert b"/registry/minions/node-1" not in store.gets
    # A token bound to the node itself is still checked against the store.
    claims = signer.bound_claims(
        "ci", "builder", "sa-uid", [ISSUER], NOW, node=("node-1", "node-uid")
    )
    with pytest.raises(AuthenticationError, match=r'^nodes "node-1" not found$'):
        result_of(auth.authenticate_token(signer.generate(claims), (ISSUER,)))
