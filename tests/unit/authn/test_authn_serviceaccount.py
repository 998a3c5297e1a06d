"""Service-account tokens: bound JWTs checked against the store, legacy Secret tokens."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from authn_helpers import NOW, FakeStore, ec_key, pem_private, pem_public, result_of, rsa_key
from cryptography.hazmat.primitives.asymmetric import ec
from twisted.internet.task import Clock

from apiserver.auth.authn.common import ConfigError
from apiserver.auth.authn.serviceaccount import (
    LEGACY_ISSUER,
    KeySet,
    ServiceAccountAuthenticator,
    TokenSigner,
    key_id,
    load_private_key,
    load_public_keys,
    parse_public_keys_pem,
)
from apiserver.auth.interface import AuthenticationError

ISSUER = "https://kubernetes.default.svc"
PREFIX = "/registry"


def sa(uid: str = "sa-uid", deleted: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "builder", "namespace": "ci", "uid": uid}
    if deleted:
        meta["deletionTimestamp"] = deleted
    return {"kind": "ServiceAccount", "apiVersion": "v1", "metadata": meta}


def setup(
    legacy: bool = False, lookup: bool = True, key: Any = None
) -> tuple[ServiceAccountAuthenticator, FakeStore, TokenSigner, Clock]:
    key = key or rsa_key("sa")
    store = FakeStore()
    store.put(f"{PREFIX}/serviceaccounts/ci/builder", sa())
    clock = Clock()
    clock.advance(NOW)
    issuers = [LEGACY_ISSUER] if legacy else [ISSUER, "https://old.example"]
    auth = ServiceAccountAuthenticator(
        issuers,
        KeySet.of([key.public_key()]),
        [ISSUER],
        store,
        PREFIX,
        clock,
        legacy=legacy,
        lookup=lookup,
    )
    signer = TokenSigner(key, LEGACY_ISSUER if legacy else ISSUER)
    return auth, store, signer, clock


def bound(signer: TokenSigner, **kw: Any) -> dict[str, Any]:
    claims = signer.bound_claims("ci", "builder", "sa-uid", [ISSUER], NOW)
    claims.update(kw)
    return claims


def test_bound_token_user() -> None:
    auth, _, signer, _ = setup()
    claims = bound(signer)
    result = result_of(auth.authenticate_token(signer.sign(claims), (ISSUER,)))
    assert result.user.name == "system:serviceaccount:ci:builder"
    assert result.user.uid == "sa-uid"
    assert result.user.groups == ("system:serviceaccounts", "system:serviceaccounts:ci")
    assert result.user.extra == {
        "authentication.kubernetes.io/credential-id": (f"JTI={claims['jti']}",)
    }
    assert result.audiences == (ISSUER,)


def test_header_and_kid() -> None:
    key = rsa_key("sa")
    signer = TokenSigner(key, ISSUER)
    header = json.loads(base64.urlsafe_b64decode(signer.sign({"a": 1}).split(".")[0] + "=="))
    assert header == {"alg": "RS256", "kid": key_id(key.public_key()), "typ": "JWT"}
    assert len(signer.kid) == 43
    assert TokenSigner(ec_key(ec.SECP384R1()), ISSUER).alg == "ES384"


def test_pod_and_node_binding() -> None:
    auth, store, signer, _ = setup()
    store.put(f"{PREFIX}/pods/ci/runner", {"metadata": {"name": "runner", "uid": "pod-uid"}})
    store.put(f"{PREFIX}/minions/node-1", {"metadata": {"name": "node-1", "uid": "node-uid"}})
    claims = signer.bound_claims(
        "ci",
        "builder",
        "sa-uid",
        [ISSUER],
        NOW,
        pod=("runner", "pod-uid"),
        node=("node-1", "node-uid"),
    )
    user = result_of(auth.authenticate_token(signer.sign(claims), (ISSUER,))).user
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("runner",)
    assert user.extra["authentication.kubernetes.io/pod-uid"] == ("pod-uid",)
    assert user.extra["authentication.kubernetes.io/node-name"] == ("node-1",)
    assert user.extra["authentication.kubernetes.io/node-uid"] == ("node-uid",)
    claims = signer.bound_claims("ci", "builder", "sa-uid", [ISSUER], NOW, pod=("runner", "other"))
    with pytest.raises(AuthenticationError) as info:
        result_of(auth.authenticate_token(signer.sign(claims), (ISSUER,)))
    assert str(info.value) == (
        "pod UID (pod-uid) does not match service account pod ref claim (other)"
    )
    claims = signer.bound_claims("ci", "builder", "sa-uid", [ISSUER], NOW, pod=("gone", "x"))
    with pytest.raises(AuthenticationError, match=r'^pods "gone" not found$'):
        result_of(auth.authenticate_token(signer.sign(claims), (ISSUER,)))


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"exp": int(NOW - 61)}, "service account token has expired"),
        ({"nbf": int(NOW + 61)}, "service account token is not valid yet"),
        ({"iat": int(NOW + 61)}, "service account token is issued in the future"),
    ],
)
def test_time_checks(claims: dict[str, Any], message: str) -> None:
    auth, _, signer, _ = setup()
    with pytest.raises(AuthenticationError, match=f"^{message}$"):
        result_of(auth.authenticate_token(signer.sign(bound(signer, **claims)), (ISSUER,)))


def test_leeway_of_a_minute() -> None:
    auth, _, signer, _ = setup()
    token = signer.sign(bound(signer, exp=int(NOW - 59), nbf=int(NOW + 59), iat=int(NOW + 59)))
    assert result_of(auth.authenticate_token(token, (ISSUER,))) is not None


def test_expires_on_the_clock() -> None:
    auth, _, signer, clock = setup()
    token = signer.sign(bound(signer))
    assert result_of(auth.authenticate_token(token, (ISSUER,))) is not None
    clock.advance(3600 + 61)
    with pytest.raises(AuthenticationError, match=r"has expired"):
        result_of(auth.authenticate_token(token, (ISSUER,)))


def test_wrong_audience() -> None:
    auth, _, signer, _ = setup()
    token = signer.sign(bound(signer, aud=["vault", "other"]))
    with pytest.raises(AuthenticationError) as info:
        auth.authenticate_token(token, (ISSUER,))
    assert str(info.value) == (
        'token audiences ["vault" "other"] is invalid for the target audiences '
        '["https://kubernetes.default.svc"]'
    )


def test_foreign_issuer_and_garbage_are_not_ours() -> None:
    auth, _, signer, _ = setup()
    assert auth.authenticate_token(signer.sign(bound(signer, iss="https://elsewhere")), ()) is None
    for junk in ("abc", "a.b.c", "{}.e30.x", "a.!!.c"):
        assert auth.authenticate_token(junk, ()) is None


def test_second_issuer_is_accepted() -> None:
    auth, _, signer, _ = setup()
    token = signer.sign(bound(signer, iss="https://old.example"))
    assert result_of(auth.authenticate_token(token, (ISSUER,))) is not None


def test_bad_signature_and_unknown_kid() -> None:
    auth, _, _, _ = setup()
    forger = TokenSigner(rsa_key("forger"), ISSUER)
    claims = bound(forger)
    with pytest.raises(AuthenticationError, match=r"^invalid signature, no keys found$"):
        auth.authenticate_token(forger.sign(claims), (ISSUER,))
    real_kid = key_id(rsa_key("sa").public_key())
    with pytest.raises(
        AuthenticationError, match=r"^go-jose/go-jose: error in cryptographic primitive$"
    ):
        auth.authenticate_token(forger.sign(claims, kid=real_kid), (ISSUER,))
    # No kid: every key is tried.
    with pytest.raises(AuthenticationError, match=r"cryptographic primitive"):
        auth.authenticate_token(forger.sign(claims, kid=""), (ISSUER,))


def test_missing_or_replaced_service_account() -> None:
    auth, store, signer, _ = setup()
    token = signer.sign(bound(signer))
    store.data.clear()
    with pytest.raises(AuthenticationError, match=r'^serviceaccounts "builder" not found$'):
        result_of(auth.authenticate_token(token, (ISSUER,)))
    store.put(f"{PREFIX}/serviceaccounts/ci/builder", sa(uid="new-uid"))
    with pytest.raises(AuthenticationError) as info:
        result_of(auth.authenticate_token(token, (ISSUER,)))
    assert str(info.value) == "service account UID (new-uid) does not match claim (sa-uid)"
    store.put(f"{PREFIX}/serviceaccounts/ci/builder", sa(deleted="2026-01-01T00:00:00Z"))
    with pytest.raises(AuthenticationError, match=r"^service account token has been invalidated$"):
        result_of(auth.authenticate_token(token, (ISSUER,)))


def test_ecdsa_keys() -> None:
    key = ec_key()
    auth, _, signer, _ = setup(key=key)
    assert signer.alg == "ES256"
    assert result_of(auth.authenticate_token(signer.sign(bound(signer)), (ISSUER,))) is not None


def legacy_secret(token: str, uid: str = "secret-uid") -> dict[str, Any]:
    return {
        "kind": "Secret",
        "metadata": {"name": "builder-token", "namespace": "ci", "uid": uid},
        "type": "kubernetes.io/service-account-token",
        "data": {"token": base64.b64encode(token.encode()).decode()},
    }


def test_legacy_token() -> None:
    auth, store, signer, _ = setup(legacy=True)
    token = signer.sign(signer.legacy_claims("ci", "builder", "sa-uid", "builder-token"), kid="")
    store.put(f"{PREFIX}/secrets/ci/builder-token", legacy_secret(token))
    result = result_of(auth.authenticate_token(token, (ISSUER,)))
    assert result.user.name == "system:serviceaccount:ci:builder"
    assert result.user.groups == ("system:serviceaccounts", "system:serviceaccounts:ci")
    assert result.audiences == (ISSUER,)
    store.put(f"{PREFIX}/secrets/ci/builder-token", legacy_secret("another"))
    with pytest.raises(AuthenticationError, match=r"^Token does not match server's copy$"):
        result_of(auth.authenticate_token(token, (ISSUER,)))
    del store.data[f"{PREFIX}/secrets/ci/builder-token".encode()]
    with pytest.raises(AuthenticationError, match=r"^Token has been invalidated$"):
        result_of(auth.authenticate_token(token, (ISSUER,)))


def test_legacy_token_without_lookup_and_bad_claims() -> None:
    auth, _, signer, _ = setup(legacy=True, lookup=False)
    token = signer.sign(signer.legacy_claims("ci", "builder", "sa-uid", "builder-token"))
    assert result_of(auth.authenticate_token(token, ())).user.uid == "sa-uid"
    claims = signer.legacy_claims("ci", "builder", "sa-uid", "builder-token")
    claims["sub"] = "system:serviceaccount:other:builder"
    with pytest.raises(AuthenticationError, match=r"^sub claim is invalid$"):
        result_of(auth.authenticate_token(signer.sign(claims), ()))
    del claims["kubernetes.io/serviceaccount/secret.name"]
    with pytest.raises(AuthenticationError, match=r"^secretName claim is missing$"):
        result_of(auth.authenticate_token(signer.sign(claims), ()))


def test_key_files(tmp_path: Path) -> None:
    rsa_private = rsa_key("sa")
    ec_private = ec_key()
    bundle = tmp_path / "keys.pem"
    bundle.write_bytes(pem_private(rsa_private) + b"junk\n" + pem_public(ec_private))
    keys = load_public_keys([str(bundle)], "service-account-key-file")
    assert [key_id(k) for k in keys] == [
        key_id(rsa_private.public_key()),
        key_id(ec_private.public_key()),
    ]
    bad = tmp_path / "bad.pem"
    bad.write_text("not a key\n")
    with pytest.raises(ConfigError) as info:
        load_public_keys([str(bad)], "service-account-key-file")
    assert str(info.value) == (
        f'--service-account-key-file: failed to parse key file "{bad}": data does not contain '
        "any valid RSA or ECDSA public keys"
    )
    with pytest.raises(ConfigError, match=r"--service-account-signing-key-file"):
        load_private_key(str(bad), "service-account-signing-key-file")
    with pytest.raises(ValueError):
        parse_public_keys_pem(b"")
