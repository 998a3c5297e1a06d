"""OIDC/JWT authentication against an issuer served by StubTreq (no network)."""

from __future__ import annotations

import json
from typing import Any

import jwt
import pytest
from authn_helpers import NOW, result_of, rsa_key
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.web.resource import Resource

from apiserver.auth.authn.cel import compile_expression
from apiserver.auth.authn.oidc import (
    ALL_SIGNING_ALGS,
    ClaimMapping,
    JWTAuthenticator,
    JWTConfig,
    ValidationRule,
)
from apiserver.auth.interface import AuthenticationError
from apiserver.gocompat.timefmt import format_unix_time_string as go_time

ISSUER = "https://idp.example"


class Issuer(Resource):
    """/.well-known/openid-configuration and /jwks."""

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.keys: dict[str, Any] = {"k1": rsa_key("idp").public_key()}
        self.requests: list[bytes] = []
        self.down = False
        self.issuer = ISSUER

    def render_GET(self, request: Any) -> bytes:
        self.requests.append(request.path)
        if self.down:
            request.setResponseCode(503)
            return b"unavailable"
        if request.path == b"/.well-known/openid-configuration":
            return json.dumps({"issuer": self.issuer, "jwks_uri": ISSUER + "/jwks"}).encode()
        if request.path == b"/jwks":
            keys = []
            for kid, key in self.keys.items():
                jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key))
                jwk.update(kid=kid, use="sig", alg="RS256")
                keys.append(jwk)
            return json.dumps({"keys": keys}).encode()
        request.setResponseCode(404)
        return b"not found"


def make(config: JWTConfig | None = None, start: bool = True):  # type: ignore[no-untyped-def]
    issuer = Issuer()
    stub = StubTreq(issuer)
    clock = Clock()
    clock.advance(NOW)
    auth = JWTAuthenticator(
        config
        or JWTConfig(
            issuer_url=ISSUER,
            audiences=("kubernetes",),
            username=ClaimMapping(claim="sub", prefix=ISSUER + "#"),
            groups=ClaimMapping(claim="groups", prefix="oidc:"),
        ),
        stub,
        clock,
    )
    if start:
        auth.start()
        stub.flush()
    return auth, issuer, stub, clock


def token(
    claims: dict[str, Any] | None = None, key_name: str = "idp", kid: str = "k1", **kw: Any
) -> str:
    body = {
        "iss": ISSUER,
        "aud": "kubernetes",
        "sub": "alice",
        "exp": int(NOW + 600),
        "iat": int(NOW),
    }
    body.update(claims or {})
    body.update(kw)
    return jwt.encode(body, rsa_key(key_name), algorithm="RS256", headers={"kid": kid})


def check(auth: JWTAuthenticator, stub: StubTreq, value: str) -> Any:
    d = auth.authenticate_token(value, ())
    stub.flush()
    return result_of(d)


def test_valid_token_user() -> None:
    auth, issuer, stub, _ = make()
    assert auth.initialized
    result = check(auth, stub, token(groups=["dev", "ops"], jti="id-1"))
    assert result.user.name == "https://idp.example#alice"
    assert result.user.groups == ("oidc:dev", "oidc:ops")
    assert result.user.extra == {"authentication.kubernetes.io/credential-id": ("JTI=id-1",)}
    assert issuer.requests == [b"/.well-known/openid-configuration", b"/jwks"]
    single = check(auth, stub, token(groups="admins"))
    assert single.user.groups == ("oidc:admins",)


def test_not_initialized_and_retry_every_ten_seconds() -> None:
    auth, issuer, stub, clock = make(start=False)
    issuer.down = True
    auth.start()
    stub.flush()
    with pytest.raises(AuthenticationError, match=r"^oidc: authenticator not initialized$"):
        auth.authenticate_token(token(), ())
    issuer.down = False
    clock.advance(9)
    stub.flush()
    assert not auth.initialized
    clock.advance(1)
    stub.flush()
    assert auth.initialized
    assert check(auth, stub, token()) is not None


def test_discovery_issuer_must_match() -> None:
    auth, issuer, stub, _ = make(start=False)
    issuer.issuer = "https://evil.example"
    auth.start()
    stub.flush()
    assert not auth.initialized


def test_other_issuers_are_not_ours() -> None:
    auth, _, _, _ = make()
    assert auth.authenticate_token(token(iss="https://other.example"), ()) is None
    assert auth.authenticate_token("not-a-jwt", ()) is None


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        (
            {"aud": "someone-else"},
            'oidc: verify token: oidc: expected audience "kubernetes" got ["someone-else"]',
        ),
        (
            {"exp": int(NOW - 1)},
            f"oidc: verify token: oidc: token is expired (Token Expiry: {go_time(NOW - 1)})",
        ),
        ({"nbf": int(NOW + 301)}, "oidc: verify token: oidc: current time "),
    ],
)
def test_verification_errors(claims: dict[str, Any], message: str) -> None:
    auth, _, stub, _ = make()
    with pytest.raises(AuthenticationError) as info:
        check(auth, stub, token(claims))
    assert str(info.value).startswith(message)


def test_go_time() -> None:
    assert go_time(0) == "1970-01-01 00:00:00 +0000 UTC"
    assert go_time(1.5) == "1970-01-01 00:00:01.5 +0000 UTC"


def test_bad_signature_refetches_keys_then_fails() -> None:
    auth, issuer, stub, _ = make()
    with pytest.raises(AuthenticationError) as info:
        check(auth, stub, token(key_name="forger"))
    assert str(info.value) == (
        "oidc: verify token: failed to verify signature: failed to verify id token signature"
    )
    assert issuer.requests.count(b"/jwks") == 2


def test_key_rotation() -> None:
    auth, issuer, stub, _ = make()
    issuer.keys["k2"] = rsa_key("rotated").public_key()
    result = check(auth, stub, token(key_name="rotated", kid="k2"))
    assert result.user.name == "https://idp.example#alice"
    assert issuer.requests.count(b"/jwks") == 2


def test_unsupported_algorithm() -> None:
    auth, _, stub, _ = make()
    hs = jwt.encode(
        {"iss": ISSUER, "aud": "kubernetes", "sub": "a", "exp": int(NOW + 60)},
        "a-shared-secret-that-is-long-enough!!",
        algorithm="HS256",
    )
    with pytest.raises(AuthenticationError, match=r"unsupported algorithm"):
        check(auth, stub, hs)


def test_email_claim_and_required_claims() -> None:
    config = JWTConfig(
        issuer_url=ISSUER,
        audiences=("kubernetes",),
        username=ClaimMapping(claim="email", prefix=""),
        required_claims=(("hd", "example.com"),),
    )
    auth, _, stub, _ = make(config)
    ok = check(auth, stub, token(email="a@example.com", email_verified=True, hd="example.com"))
    assert ok.user.name == "a@example.com"
    with pytest.raises(AuthenticationError, match=r"^oidc: email not verified$"):
        check(auth, stub, token(email="a@example.com", email_verified=False, hd="example.com"))
    with pytest.raises(AuthenticationError) as info:
        check(auth, stub, token(email="a@example.com", hd="evil.com"))
    assert str(info.value) == (
        "oidc: required claim hd value does not match. Got = evil.com, want = example.com"
    )
    with pytest.raises(
        AuthenticationError, match=r"^oidc: required claim hd not present in ID token$"
    ):
        check(auth, stub, token(email="a@example.com"))
    with pytest.raises(AuthenticationError) as info:
        check(auth, stub, token(hd="example.com"))
    assert str(info.value) == 'oidc: parse username claims "email": claim not present'


def test_expressions_and_rules() -> None:
    claims = ["claims"]
    config = JWTConfig(
        issuer_url=ISSUER,
        audiences=("a", "kubernetes"),
        username=ClaimMapping(expression=compile_expression("'idp:' + claims.sub", claims)),
        groups=ClaimMapping(
            expression=compile_expression("claims.roles.map(r, 'role:' + r)", claims)
        ),
        uid=ClaimMapping(expression=compile_expression("claims.?uid.orValue('none')", claims)),
        extra=(("example.com/tenant", compile_expression("claims.tenant", claims)),),
        claim_rules=(
            ValidationRule(
                compile_expression("claims.tenant != 'blocked'", claims), "tenant blocked"
            ),
        ),
        user_rules=(
            ValidationRule(
                compile_expression("!user.username.startsWith('idp:system:')", ["user"]),
                "no system",
            ),
        ),
        signing_algs=ALL_SIGNING_ALGS,
    )
    auth, _, stub, _ = make(config)
    user = check(auth, stub, token(roles=["x", "y"], tenant="t1")).user
    assert (user.name, user.uid, user.groups) == ("idp:alice", "none", ("role:x", "role:y"))
    assert user.extra["example.com/tenant"] == ("t1",)
    with pytest.raises(AuthenticationError) as info:
        check(auth, stub, token(roles=[], tenant="blocked"))
    assert str(info.value) == (
        "oidc: error evaluating claim validation expression: validation expression "
        "'claims.tenant != 'blocked'' failed: tenant blocked"
    )
    with pytest.raises(AuthenticationError, match=r"user info validation rule"):
        check(auth, stub, token(sub="system:admin", roles=[], tenant="t"))
    with pytest.raises(AuthenticationError, match=r"no such key: roles"):
        check(auth, stub, token(tenant="t"))
    with pytest.raises(AuthenticationError, match=r'expected audience in \["a" "kubernetes"\]'):
        check(auth, stub, token(aud=["b"], roles=[], tenant="t"))


def test_fetch_failure_during_refresh() -> None:
    auth, issuer, stub, _ = make()
    issuer.down = True
    with pytest.raises(AuthenticationError, match=r"fetching keys"):
        check(auth, stub, token(key_name="forger"))


def test_stop_cancels_retries() -> None:
    auth, issuer, stub, clock = make(start=False)
    issuer.down = True
    auth.start()
    stub.flush()
    auth.stop()
    issuer.down = False
    clock.advance(30)
    stub.flush()
    assert not auth.initialized
