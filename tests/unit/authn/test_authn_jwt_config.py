"""AuthenticationConfiguration files and the legacy --oidc-* flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver.auth.authn.common import ConfigError
from apiserver.auth.authn.jwt_config import (
    AnonymousConfig,
    jwt_from_flags,
    parse_authentication_config,
)
from apiserver.auth.authn.oidc import ALL_SIGNING_ALGS, ClaimMapping
from apiserver.options.config import ServerConfig

GOOD = b"""
apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: https://idp.example
    audiences: [a, b]
    audienceMatchPolicy: MatchAny
  claimValidationRules:
  - claim: hd
    requiredValue: example.com
  - expression: "claims.tenant != 'blocked'"
    message: blocked
  claimMappings:
    username: {claim: sub, prefix: "idp:"}
    groups: {expression: "claims.roles"}
    uid: {claim: oid}
    extra:
    - key: example.com/tenant
      valueExpression: claims.tenant
  userValidationRules:
  - expression: "!user.username.startsWith('system:')"
    message: no system users
anonymous:
  enabled: true
  conditions: [{path: /livez}, {path: /readyz}]
"""


def parse(text: bytes | str, disallowed: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    data = text.encode() if isinstance(text, str) else text
    return parse_authentication_config(data, "/etc/authn.yaml", disallowed)


def test_good_file() -> None:
    config = parse(GOOD)
    (jwt,) = config.jwt
    assert jwt.issuer_url == "https://idp.example"
    assert jwt.audiences == ("a", "b")
    assert jwt.username == ClaimMapping(claim="sub", prefix="idp:")
    assert jwt.groups.expression is not None
    assert jwt.uid == ClaimMapping(claim="oid")
    assert [k for k, _ in jwt.extra] == ["example.com/tenant"]
    assert jwt.required_claims == (("hd", "example.com"),)
    assert len(jwt.claim_rules) == 1 and len(jwt.user_rules) == 1
    assert jwt.signing_algs == ALL_SIGNING_ALGS
    assert config.anonymous == AnonymousConfig(True, ("/livez", "/readyz"))


@pytest.mark.parametrize("version", ["v1", "v1beta1", "v1alpha1"])
def test_versions(version: str) -> None:
    config = parse(
        f"apiVersion: apiserver.config.k8s.io/{version}\nkind: AuthenticationConfiguration\n"
    )
    assert config.jwt == () and config.anonymous is None


def header(body: str) -> str:
    return "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n" + body


def jwt_entry(
    issuer: str = "url: https://idp.example\n    audiences: [a]",
    mappings: str = "username: {claim: sub, prefix: ''}",
) -> str:
    return header(f"jwt:\n- issuer:\n    {issuer}\n  claimMappings:\n    {mappings}\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            jwt_entry("url: http://idp.example\n    audiences: [a]"),
            'jwt[0].issuer.url: Invalid value: "http://idp.example": URL scheme must be https',
        ),
        (
            jwt_entry("url: https://idp.example?x=1\n    audiences: [a]"),
            "URL must not contain a query",
        ),
        (
            jwt_entry("url: https://idp.example\n    audiences: [a, b]"),
            'jwt[0].issuer.audienceMatchPolicy: Invalid value: "": '
            "audienceMatchPolicy must be MatchAny for multiple audiences",
        ),
        (
            jwt_entry("url: https://idp.example\n    audiences: []"),
            "jwt[0].issuer.audiences: Required value: "
            "at least one jwt[0].issuer.audiences is required",
        ),
        (
            jwt_entry(mappings="username: {claim: sub}"),
            "jwt[0].claimMappings.username.prefix: Required value: prefix is required when "
            "claim is set. It can be set to an empty string to disable prefixing",
        ),
        (
            jwt_entry(mappings="username: {claim: sub, expression: claims.sub}"),
            'jwt[0].claimMappings.username: Invalid value: "": '
            "claim and expression can't both be set",
        ),
        (
            jwt_entry(mappings="username: {expression: claims.email}"),
            "claims.email_verified must be used in claimMappings.username.expression",
        ),
        (
            jwt_entry(
                mappings="username: {expression: 'claims.sub'}\n    extra: "
                "[{key: kubernetes.io/x, valueExpression: claims.sub}]"
            ),
            "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
        ),
        (
            jwt_entry(
                mappings="username: {expression: 'claims.sub'}\n    extra: "
                "[{key: Example.com/X, valueExpression: claims.sub}]"
            ),
            "must be lowercase",
        ),
        (
            jwt_entry(mappings="username: {expression: 'claims.sub.frob()'}"),
            'jwt[0].claimMappings.username.expression: Invalid value: "claims.sub.frob()": '
            "compilation failed: unsupported function frob()",
        ),
        (
            header("anonymous:\n  enabled: false\n  conditions: [{path: /livez}]\n"),
            "enabled should be set to true when conditions are defined",
        ),
    ],
)
def test_validation_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse(text)
    assert str(info.value).startswith(
        '--authentication-config "/etc/authn.yaml": invalid authentication config: '
    )
    assert message in str(info.value)


def test_email_with_email_verified_is_fine() -> None:
    text = jwt_entry(
        mappings="username: {expression: \"claims.email_verified ? claims.email : ''\"}"
    )
    assert parse(text).jwt[0].username.expression is not None


def test_disallowed_issuer_and_duplicates() -> None:
    text = header(
        "jwt:\n"
        "- issuer: {url: 'https://kubernetes.default.svc', audiences: [a]}\n"
        "  claimMappings: {username: {claim: sub, prefix: ''}}\n"
        "- issuer: {url: 'https://kubernetes.default.svc', audiences: [a]}\n"
        "  claimMappings: {username: {claim: sub, prefix: ''}}\n"
    )
    with pytest.raises(ConfigError) as info:
        parse(text, ("https://kubernetes.default.svc",))
    assert "URL must not overlap with disallowed issuers: [https://kubernetes.default.svc]" in str(
        info.value
    )
    assert 'jwt[1].issuer.url: Duplicate value: "https://kubernetes.default.svc"' in str(info.value)


def test_strict_decoding_and_kind() -> None:
    with pytest.raises(ConfigError, match=r'unknown field "jwt\[0\].issuer.colour"'):
        parse(header("jwt:\n- issuer: {url: 'https://i', audiences: [a], colour: red}\n"))
    with pytest.raises(ConfigError, match=r'unknown field "extra"'):
        parse(header("extra: 1\n"))
    with pytest.raises(ConfigError, match=r'no kind "Other"'):
        parse("apiVersion: apiserver.config.k8s.io/v1\nkind: Other\n")
    with pytest.raises(ConfigError, match=r"empty config file"):
        parse(b"  \n")
    with pytest.raises(ConfigError, match=r"/etc/authn.yaml"):
        parse(b"jwt: [unclosed\n")


def flags(**values: object) -> ServerConfig:
    return ServerConfig.defaults().evolve(**values)


def test_flags_username_prefix_rules() -> None:
    base = {"oidc_issuer_url": "https://idp.example", "oidc_client_id": "kube"}
    config = jwt_from_flags(flags(**base))
    assert config is not None
    assert config.username == ClaimMapping(claim="sub", prefix="https://idp.example#")
    assert config.audiences == ("kube",)
    assert config.signing_algs == ("RS256",)
    email = jwt_from_flags(flags(**base, oidc_username_claim="email"))
    assert email is not None and email.username.prefix == ""
    dash = jwt_from_flags(flags(**base, oidc_username_prefix="-"))
    assert dash is not None and dash.username.prefix == ""
    literal = jwt_from_flags(flags(**base, oidc_username_prefix="oidc:"))
    assert literal is not None and literal.username.prefix == "oidc:"
    groups = jwt_from_flags(
        flags(
            **base,
            oidc_groups_claim="groups",
            oidc_groups_prefix="g:",
            oidc_required_claim={"hd": "x"},
        )
    )
    assert groups is not None
    assert groups.groups == ClaimMapping(claim="groups", prefix="g:")
    assert groups.required_claims == (("hd", "x"),)
    assert jwt_from_flags(flags()) is None


def test_flags_without_issuer(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        jwt_from_flags(flags(oidc_username_claim="email"))
    assert str(info.value) == (
        "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* flags "
        "are set"
    )
    with pytest.raises(ConfigError, match=r"--oidc-ca-file"):
        jwt_from_flags(
            flags(
                oidc_issuer_url="https://i",
                oidc_client_id="c",
                oidc_ca_file=str(tmp_path / "absent.pem"),
            )
        )
