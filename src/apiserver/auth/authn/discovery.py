"""The service-account issuer discovery endpoints.

Reference: ``KK/pkg/serviceaccount/openidmetadata.go`` and the route installation in
``KK/pkg/controlplane/apiserver`` (``ServiceAccountIssuerDiscovery``):

- ``GET /.well-known/openid-configuration``: ``application/json``, ``Cache-Control: public,
  max-age=3600``, compact JSON ``{"issuer", "jwks_uri", "response_types_supported":["id_token"],
  "subject_types_supported":["public"], "id_token_signing_alg_values_supported":[sorted,
  unique]}``;
- ``GET /openid/v1/jwks``: ``application/jwk-set+json``, the same Cache-Control, the public
  keys as JWKs (``{"keys":[{"use","kty","kid",...}]}``, one per key id).

The issuer is the first ``--service-account-issuer``. ``jwks_uri`` is
``--service-account-jwks-uri`` or ``https://<external host>:<secure port>/openid/v1/jwks``.
kube-apiserver installs the routes only when the documents can be built (an https issuer with
no query or fragment, and keys); otherwise it logs why and serves without them.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import orjson

from apiserver.auth.authn.serviceaccount import PublicKey, jwk, key_id, signing_alg
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

OPENID_CONFIG_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"
CACHE_CONTROL = "public, max-age=3600"


class DiscoveryError(ValueError):
    """The documents cannot be built from the configuration."""


def join_host_port(host: str, port: int) -> str:
    """Go's ``net.JoinHostPort``: IPv6 literals get brackets."""
    try:
        if isinstance(ipaddress.ip_address(host), ipaddress.IPv6Address):
            return f"[{host}]:{port}"
    except ValueError:
        pass
    return f"{host}:{port}"


def external_host(config: ServerConfig) -> str:
    """``--external-hostname``, else the advertise address, else the bind address when it is
    specific, else the host name (kube-apiserver's ``ExternalHost`` default)."""
    for candidate in (
        config.external_hostname or "",
        str(config.advertise_address or ""),
    ):
        if candidate:
            return candidate
    bind = str(config.bind_address or "")
    if bind and bind not in ("0.0.0.0", "::"):
        return bind
    return socket.gethostname()


def build_documents(
    issuer: str, jwks_uri: str, default_host_port: str, keys: Sequence[PublicKey]
) -> tuple[bytes, bytes]:
    """(openid-configuration, jwks) bodies; DiscoveryError with the reference's reason."""
    if not issuer:
        raise DiscoveryError("empty issuer URL")
    if not keys:
        raise DiscoveryError("no keys provided for validating keyset")
    parts = urlsplit(issuer)
    if parts.scheme != "https":
        raise DiscoveryError(f"issuer URL must use https scheme, got: {issuer}")
    if parts.query:
        raise DiscoveryError(f"issuer URL may not include a query, got: {issuer}")
    if parts.fragment:
        raise DiscoveryError(f"issuer URL may not include a fragment, got: {issuer}")
    if jwks_uri:
        if urlsplit(jwks_uri).scheme != "https":
            raise DiscoveryError(f"jwksURI requires https scheme, parsed as: {jwks_uri}")
    else:
        if not default_host_port:
            raise DiscoveryError(
                "attempted to build jwks_uri from external address , but could not construct "
                "a valid URL. Error: empty address"
            )
        jwks_uri = f"https://{default_host_port}{JWKS_PATH}"
    algs = sorted({signing_alg(k) for k in keys})
    config_doc = {
        "issuer": issuer,
        "jwks_uri": jwks_uri,
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": algs,
    }
    seen: set[str] = set()
    jwks: list[dict[str, str]] = []
    for key in keys:
        kid = key_id(key)
        if kid in seen:
            continue
        seen.add(kid)
        jwks.append(jwk(key))
    return orjson.dumps(config_doc), orjson.dumps({"keys": jwks})


def make_handlers(config_body: bytes, jwks_body: bytes) -> tuple[Any, Any]:
    """The two route handlers (``(request, info) -> Response``)."""
    config_response = Response(
        200,
        (("Content-Type", "application/json"), ("Cache-Control", CACHE_CONTROL)),
        config_body,
    )
    jwks_response = Response(
        200,
        (("Content-Type", "application/jwk-set+json"), ("Cache-Control", CACHE_CONTROL)),
        jwks_body,
    )

    def openid_configuration(request: HTTPRequest, info: Any) -> Response:
        return config_response

    def jwks(request: HTTPRequest, info: Any) -> Response:
        return jwks_response

    return openid_configuration, jwks
