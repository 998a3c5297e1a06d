"""Bootstrap tokens read from kube-system Secrets in the store."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from authn_helpers import NOW, FakeStore, result_of
from twisted.internet.task import Clock

from apiserver.auth.authn.bootstrap import BootstrapTokenAuthenticator
from apiserver.auth.interface import AuthenticationError
from apiserver.storage.interface import UnavailableError

TOKEN = "abcdef.0123456789abcdef"
KEY = "/registry/secrets/kube-system/bootstrap-token-abcdef"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def secret(**data: str) -> dict[str, Any]:
    values = {
        "token-id": "abcdef",
        "token-secret": "0123456789abcdef",
        "usage-bootstrap-authentication": "true",
        "expiration": "2030-01-01T00:00:00Z",
    }
    values.update(data)
    return {
        "kind": "Secret",
        "apiVersion": "v1",
        "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "data": {k: b64(v) for k, v in values.items() if v is not None},
    }


def make(obj: dict[str, Any] | None = None, prefix: str = "/registry/"):  # type: ignore[no-untyped-def]
    store = FakeStore()
    if obj is not None:
        store.put(KEY, obj)
    clock = Clock()
    clock.advance(NOW)
    return BootstrapTokenAuthenticator(store, prefix, clock), store


def test_valid_token() -> None:
    auth, store = make(
        secret(**{"auth-extra-groups": "system:bootstrappers:worker, system:bootstrappers:a-b"})
    )
    result = result_of(auth.authenticate_token(TOKEN, ()))
    assert result.user.name == "system:bootstrap:abcdef"
    assert result.user.groups == (
        "system:bootstrappers",
        "system:bootstrappers:a-b",
        "system:bootstrappers:worker",
    )
    assert store.gets == [KEY.encode()]


@pytest.mark.parametrize(
    "token", ["abcdef0123456789abcdef", "ABCDEF.0123456789abcdef", "abcdef.0123", "x" * 30]
)
def test_malformed_tokens_are_not_looked_up(token: str) -> None:
    auth, store = make(secret())
    assert auth.authenticate_token(token, ()) is None
    assert store.gets == []


@pytest.mark.parametrize(
    "change",
    [
        {"token-secret": "fedcba9876543210"},
        {"token-id": "zzzzzz"},
        {"usage-bootstrap-authentication": "false"},
        {"expiration": "2020-01-01T00:00:00Z"},
        {"expiration": "not a time"},
        {"auth-extra-groups": "system:masters"},
    ],
)
def test_every_mismatch_is_no_opinion(change: dict[str, str]) -> None:
    auth, _ = make(secret(**change))
    assert result_of(auth.authenticate_token(TOKEN, ())) is None


def test_wrong_type_deleted_or_missing_secret() -> None:
    obj = secret()
    obj["type"] = "Opaque"
    assert result_of(make(obj)[0].authenticate_token(TOKEN, ())) is None
    obj = secret()
    obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert result_of(make(obj)[0].authenticate_token(TOKEN, ())) is None
    assert result_of(make(None)[0].authenticate_token(TOKEN, ())) is None


def test_no_expiration_never_expires() -> None:
    obj = secret()
    del obj["data"]["expiration"]
    assert result_of(make(obj)[0].authenticate_token(TOKEN, ())) is not None


def test_store_failure_is_an_error() -> None:
    auth, store = make(secret())
    store.fail = UnavailableError("etcd is down")
    with pytest.raises(UnavailableError):
        result_of(auth.authenticate_token(TOKEN, ()))
    assert isinstance(store.fail, Exception)
    assert not isinstance(store.fail, AuthenticationError)
