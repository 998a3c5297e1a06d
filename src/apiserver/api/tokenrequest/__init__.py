"""The TokenRequest API: ``POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token``.

kube-apiserver serves the ``serviceaccounts/token`` subresource only when it has a token
generator, that is ``--service-account-signing-key-file`` together with a first
``--service-account-issuer`` (``pkg/registry/core/rest/storage_core.go``; kube-apiserver refuses
to start without them, this server starts and simply does
not serve the path). Unserved, the path is the router's 404 Status (``the server could not find
the requested resource``), what kube answers for any path it has no route for.

- :mod:`apiserver.api.tokenrequest.wire`: decoding, defaulting, validation, encoding;
- :mod:`apiserver.api.tokenrequest.rest`: the handler and the token rules
  (``--service-account-max-token-expiration``, ``--service-account-extend-token-expiration``).

Tokens are verified by the service-account authenticator
(:mod:`apiserver.auth.authn.serviceaccount`) with ``--service-account-key-file``, which must
hold the signing key's public half, as with kube-apiserver.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from apiserver.admission import Admission
from apiserver.api.tokenrequest.rest import (
    PREFIX,
    UID_VALIDATION_GATE,
    ExpirationPolicy,
    TokenRequestAPI,
    TokenREST,
)
from apiserver.auth.authn import api_audiences
from apiserver.auth.authn.serviceaccount import TokenSigner, load_private_key
from apiserver.options.validate import feature_enabled

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

log = Logger()

__all__ = ["ExpirationPolicy", "TokenREST", "TokenRequestAPI", "install_token_request"]


def token_request_served(config: ServerConfig) -> bool:
    """Whether the configuration gives a token generator (signing key and first issuer)."""
    issuers = tuple(config.service_account_issuer or ())
    return bool(config.service_account_signing_key_file) and bool(issuers) and bool(issuers[0])


def install_token_request(
    router: Any,
    config: ServerConfig,
    store: Any,
    clock: IReactorTime,
    admission: Admission | None = None,
) -> bool:
    """Mount the API on ``router`` when :func:`token_request_served`; True if mounted.

    The signing key is read here; a bad one raises the ``ConfigError`` (a ValueError) naming
    ``--service-account-signing-key-file`` that stops start-up.
    """
    if not token_request_served(config):
        if config.service_account_signing_key_file or config.service_account_issuer:
            log.info(
                "serviceaccounts/token (TokenRequest) is not served: it needs both "
                "--service-account-signing-key-file and --service-account-issuer"
            )
        return False
    issuer = str(config.service_account_issuer[0])
    key = load_private_key(
        config.service_account_signing_key_file, "service-account-signing-key-file"
    )
    policy = ExpirationPolicy(
        max_seconds=int(config.service_account_max_token_expiration or 0),
        extend=bool(config.service_account_extend_token_expiration),
    )
    rest = TokenREST(
        TokenSigner(key, issuer),
        store,
        str(config.store_prefix or "/registry"),
        clock,
        api_audiences(config),
        policy,
        uid_validation=feature_enabled(config.feature_gates or {}, UID_VALIDATION_GATE),
    )
    router.add_prefix(PREFIX, TokenRequestAPI(rest, admission).handle)
    log.info("serving serviceaccounts/token (TokenRequest) for issuer {issuer}", issuer=issuer)
    return True
