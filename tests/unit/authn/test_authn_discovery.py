"""The service-account issuer discovery documents and their routes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from authn_helpers import ec_key, pem_private, pem_public, rsa_key
from cryptography.hazmat.primitives.asymmetric import ec

from apiserver.auth.authn import install_authn_routes
from apiserver.auth.authn.discovery import (
    DiscoveryError,
    build_documents,
    join_host_port,
    make_handlers,
)
from apiserver.auth.authn.serviceaccount import key_id
from apiserver.http.app import Router
from apiserver.options.config import ServerConfig


def test_documents_field_order_and_bytes() -> None:
    rsa_public = rsa_key("sa").public_key()
    ec_public = ec_key(ec.SECP384R1()).public_key()
    config_body, jwks_body = build_documents(
        "https://issuer.example", "", "api.example:6443", [rsa_public, ec_public, rsa_public]
    )
    assert config_body == (
        b'{"issuer":"https://issuer.example","jwks_uri":"https://api.example:6443/openid/v1/jwks",'
        b'"response_types_supported":["id_token"],"subject_types_supported":["public"],'
        b'"id_token_signing_alg_values_supported":["ES384","RS256"]}'
    )
    keys = json.loads(jwks_body)["keys"]
    assert [list(k) for k in keys] == [
        ["use", "kty", "kid", "alg", "n", "e"],
        ["use", "kty", "kid", "crv", "alg", "x", "y"],
    ]
    assert keys[0]["kid"] == key_id(rsa_public)
    assert keys[0]["e"] == "AQAB"
    assert keys[1]["crv"] == "P-384"
    assert keys[1]["alg"] == "ES384"
    assert len(keys[1]["x"]) == 64  # 48 bytes, base64url without padding


@pytest.mark.parametrize(
    ("issuer", "message"),
    [
        ("http://issuer.example", "issuer URL must use https scheme, got: http://issuer.example"),
        ("https://i.example?x=1", "issuer URL may not include a query, got: https://i.example?x=1"),
        ("kubernetes/serviceaccount", "issuer URL must use https scheme"),
    ],
)
def test_documents_need_an_https_issuer(issuer: str, message: str) -> None:
    with pytest.raises(DiscoveryError, match=message.replace("?", r"\?")):
        build_documents(issuer, "", "h:1", [rsa_key("sa").public_key()])


def test_explicit_jwks_uri_and_ipv6_host() -> None:
    body, _ = build_documents(
        "https://i.example", "https://keys.example/jwks", "", [rsa_key("sa").public_key()]
    )
    assert json.loads(body)["jwks_uri"] == "https://keys.example/jwks"
    assert join_host_port("::1", 6443) == "[::1]:6443"
    assert join_host_port("10.0.0.1", 6443) == "10.0.0.1:6443"


def test_handlers_headers() -> None:
    config_handler, jwks_handler = make_handlers(b"{}", b'{"keys":[]}')
    config_response = config_handler(None, None)
    assert config_response.header("Content-Type") == "application/json"
    assert config_response.header("Cache-Control") == "public, max-age=3600"
    jwks_response = jwks_handler(None, None)
    assert jwks_response.header("Content-Type") == "application/jwk-set+json"
    assert jwks_response.body == b'{"keys":[]}'


def test_install_routes(tmp_path: Path) -> None:
    key_file = tmp_path / "sa.pub"
    key_file.write_bytes(pem_public(rsa_key("sa")))
    router = Router()
    install_authn_routes(router, ServerConfig.defaults())
    assert router.resolve("/openid/v1/jwks") is None
    config = ServerConfig.defaults().evolve(
        service_account_issuer=("https://kubernetes.default.svc",),
        service_account_key_file=(str(key_file),),
        external_hostname="api.example",
        secure_port=8443,
    )
    install_authn_routes(router, config)
    handler = router.resolve("/.well-known/openid-configuration")
    assert handler is not None
    response: Any = handler(None, None)  # type: ignore[arg-type]
    doc = json.loads(response.body)
    assert doc["jwks_uri"] == "https://api.example:8443/openid/v1/jwks"
    assert router.resolve("/openid/v1/jwks") is not None
    # A non-URL issuer: no routes (logged), no failure.
    other = Router()
    install_authn_routes(
        other, config.evolve(service_account_issuer=("kubernetes/serviceaccount",))
    )
    assert other.resolve("/openid/v1/jwks") is None
    # The TLS key serves when no key file is given.
    tls_key = tmp_path / "tls.key"
    tls_key.write_bytes(pem_private(rsa_key("sa")))
    third = Router()
    install_authn_routes(
        third,
        config.evolve(service_account_key_file=(), tls_private_key_file=str(tls_key)),
    )
    assert third.resolve("/openid/v1/jwks") is not None
