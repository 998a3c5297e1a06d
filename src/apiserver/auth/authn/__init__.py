"""Authentication: the authenticators kube-apiserver builds from its flags, combined as it does.

Reference: ``KK/pkg/kubeapiserver/authenticator/config.go`` (``Config.New``) and
``KK/pkg/kubeapiserver/options/authentication.go``.

:func:`build_authenticator` returns ``(authenticator, anonymous_allowed)``:

- the request authenticators, in order: front proxy (``--requestheader-client-ca-file``),
  x509 (``--client-ca-file``), ``Authorization: Bearer`` and the WebSocket bearer protocol;
  both bearer readers share one token union, cached 10 s on success (never on failure):
  token file, legacy service-account tokens, bound service-account tokens, bootstrap tokens,
  JWT/OIDC (``--oidc-*`` or ``--authentication-config``), webhook. The union is wrapped by the
  group adder, so every authenticated user (not ``system:anonymous``) carries
  ``system:authenticated``; the filter only handles anonymous requests and errors;
- ``anonymous_allowed``: ``--anonymous-auth``, forced off (with kube-apiserver's log line)
  when the authorization modes contain AlwaysAllow -- the default mode. An
  ``AuthenticationConfiguration`` ``anonymous`` section replaces the flag; with
  ``conditions`` the authenticator itself answers ``system:anonymous`` for the listed paths and
  ``anonymous_allowed`` is False.

A bad file or flag value raises :class:`~apiserver.auth.authn.common.ConfigError` (a
``ValueError``) naming the flag, the file and the problem.

:func:`install_authn_routes` adds the service-account issuer discovery documents.

The ``--authentication-config`` file is re-read every minute; a valid new version replaces the
JWT authenticators (an invalid one is logged and ignored; ``anonymous`` may not change), as
kube-apiserver's dynamic reload does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from twisted.internet.interfaces import IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from apiserver.auth.authn.bootstrap import BootstrapTokenAuthenticator
from apiserver.auth.authn.common import (
    AudienceAgnostic,
    ConfigError,
    TokenAuthenticator,
    TokenOutcome,
)
from apiserver.auth.authn.discovery import (
    JWKS_PATH,
    OPENID_CONFIG_PATH,
    DiscoveryError,
    build_documents,
    external_host,
    join_host_port,
    make_handlers,
)
from apiserver.auth.authn.jwt_config import (
    AuthenticationConfig,
    jwt_from_flags,
    oidc_flags_set,
    parse_authentication_config,
)
from apiserver.auth.authn.oidc import JWTAuthenticator, JWTConfig
from apiserver.auth.authn.requestheader import OVERLAP_ERROR, RequestHeaderAuthenticator
from apiserver.auth.authn.serviceaccount import (
    LEGACY_ISSUER,
    KeySet,
    PublicKey,
    ServiceAccountAuthenticator,
    load_private_key,
    load_public_keys,
    parse_public_keys_pem,
)
from apiserver.auth.authn.tokenfile import TokenFileAuthenticator
from apiserver.auth.authn.union import (
    BearerTokenAuthenticator,
    RequestUnion,
    TokenCache,
    TokenUnion,
    TopLevelAuthenticator,
    WebSocketProtocolAuthenticator,
)
from apiserver.auth.authn.webhook import WebhookTokenAuthenticator
from apiserver.auth.authn.x509 import ChainVerifier, X509Authenticator
from apiserver.auth.interface import Authenticator
from apiserver.auth.kubeconfig import KubeconfigError, KubeconfigTarget, load_kubeconfig

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

log = Logger()

TOKEN_SUCCESS_TTL = 10.0
TOKEN_FAILURE_TTL = 0.0
CONFIG_RELOAD_INTERVAL = 60.0
ALWAYS_ALLOW_LOG = (
    "AnonymousAuth is not allowed with the AlwaysAllow authorizer. Resetting AnonymousAuth to "
    "false. You should use a different authorizer"
)

__all__ = ["ConfigError", "build_authenticator", "install_authn_routes"]


def api_audiences(config: ServerConfig) -> tuple[str, ...]:
    """``--api-audiences``, defaulting to the service-account issuers."""
    audiences = tuple(config.api_audiences or ())
    return audiences or tuple(config.service_account_issuer or ())


def _store_prefix(config: ServerConfig) -> str:
    return str(config.store_prefix or "/registry")


def service_account_keys(config: ServerConfig) -> list[PublicKey]:
    """The verification keys: ``--service-account-key-file``, else ``--tls-private-key-file``
    when it holds a usable key and no signing key file is given (kube-apiserver's default)."""
    files = tuple(config.service_account_key_file or ())
    if files:
        return load_public_keys(files, "service-account-key-file")
    tls_key = config.tls_private_key_file
    if tls_key and not config.service_account_signing_key_file:
        try:
            with open(tls_key, "rb") as f:
                return parse_public_keys_pem(f.read())
        except (OSError, ValueError):
            log.warn("No TLS key provided, service account token authentication disabled")
    return []


def _anonymous(
    config: ServerConfig, file_config: AuthenticationConfig | None
) -> tuple[bool, frozenset[str] | None]:
    if file_config is not None and file_config.anonymous is not None:
        anonymous = file_config.anonymous
        if not anonymous.enabled:
            return False, None
        if anonymous.paths:
            return False, frozenset(anonymous.paths)
        return True, None
    allowed = bool(config.anonymous_auth)
    if allowed and not config.authorization_config:
        modes = tuple(config.authorization_mode or ()) or ("AlwaysAllow",)
        if "AlwaysAllow" in modes:
            log.warn(ALWAYS_ALLOW_LOG)
            allowed = False
    return allowed, None


class ReloadingJWT:
    """The JWT authenticators of ``--authentication-config``, replaced when the file changes."""

    def __init__(
        self,
        path: str,
        config: AuthenticationConfig,
        data: bytes,
        disallowed: Sequence[str],
        audiences: Sequence[str],
        reactor: Any,
        client_factory: Any = None,
    ) -> None:
        self.path = path
        self.disallowed = tuple(disallowed)
        self.audiences = tuple(audiences)
        self.reactor = reactor
        self.client_factory = client_factory or _http_client
        self.config = config
        self.digest = hashlib.sha256(data).digest()
        self._loop: LoopingCall | None = None
        self._union = TokenUnion(())
        self.authenticators = self._build(config.jwt)

    @property
    def authenticators(self) -> list[JWTAuthenticator]:
        """The current issuers' authenticators, in the file's order."""
        return self._authenticators

    @authenticators.setter
    def authenticators(self, value: list[JWTAuthenticator]) -> None:
        # The union asked per token is rebuilt with them (tokenunion.New over the current
        # set, as the reference swaps its authenticator on reload).
        self._authenticators = value
        self._union = TokenUnion(value)

    def _build(self, configs: Sequence[JWTConfig]) -> list[JWTAuthenticator]:
        built = [
            JWTAuthenticator(c, self.client_factory(c, self.reactor), self.reactor) for c in configs
        ]
        if self._loop is not None:
            # Running: the new authenticators start loading their issuers' keys now.
            for authenticator in built:
                authenticator.start()
        return built

    def start(self, interval: float = CONFIG_RELOAD_INTERVAL) -> None:
        """Start loading the issuers' keys and re-reading the file every ``interval``
        seconds (the server's auth-reload service calls this when the tree starts)."""
        if self._loop is not None:
            return
        for authenticator in self.authenticators:
            authenticator.start()
        loop = LoopingCall(self.reload)
        loop.clock = self.reactor
        loop.start(interval, now=False).addErrback(
            lambda f: log.failure("authentication config reload stopped", f)
        )
        self._loop = loop

    def stop(self) -> None:
        """Stop re-reading the file and every authenticator's key loading."""
        loop, self._loop = self._loop, None
        if loop is not None and loop.running:
            loop.stop()
        for authenticator in self.authenticators:
            authenticator.stop()

    def reload(self) -> None:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except OSError as error:
            log.error("reading {path}: {error}", path=self.path, error=error)
            return
        digest = hashlib.sha256(data).digest()
        if digest == self.digest:
            return
        try:
            config = parse_authentication_config(data, self.path, self.disallowed)
        except ConfigError as error:
            log.error("ignoring the new authentication configuration: {error}", error=error)
            return
        if config.anonymous != self.config.anonymous:
            log.error(
                "ignoring the new authentication configuration {path}: the anonymous section "
                "may not change while the server runs",
                path=self.path,
            )
            return
        old = self.authenticators
        self.authenticators = self._build(config.jwt)
        self.config = config
        self.digest = digest
        for authenticator in old:
            authenticator.stop()
        log.info("authentication configuration {path} reloaded", path=self.path)

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        return self._union.authenticate_token(token, audiences)


def _http_client(config: JWTConfig, reactor: Any) -> Any:
    target = KubeconfigTarget(path="oidc", server=config.issuer_url, ca_pem=config.ca_pem)
    return target.http_client(reactor)


def _token_authenticators(
    config: ServerConfig,
    reactor: Any,
    store: Any,
    file_config: AuthenticationConfig | None,
    data: bytes,
    parts: list[Any],
) -> list[TokenAuthenticator]:
    audiences = api_audiences(config)
    clock: IReactorTime = reactor
    prefix = _store_prefix(config)
    tokens: list[TokenAuthenticator] = []
    if config.token_auth_file:
        tokens.append(
            AudienceAgnostic(TokenFileAuthenticator.from_file(config.token_auth_file), audiences)
        )
    if config.service_account_signing_key_file:
        load_private_key(
            config.service_account_signing_key_file, "service-account-signing-key-file"
        )
    keys = service_account_keys(config)
    issuers = tuple(config.service_account_issuer or ())
    if keys:
        key_set = KeySet.of(keys)
        tokens.append(
            ServiceAccountAuthenticator(
                [LEGACY_ISSUER],
                key_set,
                audiences,
                store,
                prefix,
                clock,
                legacy=True,
                lookup=bool(config.service_account_lookup),
            )
        )
        if issuers:
            tokens.append(
                ServiceAccountAuthenticator(
                    issuers, key_set, audiences, store, prefix, clock, legacy=False
                )
            )
    elif issuers:
        log.warn(
            "--service-account-issuer is set but no service account key is available "
            "(--service-account-key-file): service account token authentication is disabled"
        )
    if config.enable_bootstrap_token_auth:
        tokens.append(
            AudienceAgnostic(BootstrapTokenAuthenticator(store, prefix, clock), audiences)
        )
    if file_config is not None and config.authentication_config:
        reloading = ReloadingJWT(
            config.authentication_config, file_config, data, issuers, audiences, reactor
        )
        parts.append(reloading)
        tokens.append(reloading)
    else:
        flags_jwt = jwt_from_flags(config)
        if flags_jwt is not None:
            authenticator = JWTAuthenticator(flags_jwt, _http_client(flags_jwt, reactor), clock)
            parts.append(authenticator)
            tokens.append(AudienceAgnostic(authenticator, audiences))
    webhook_file = config.authentication_token_webhook_config_file
    if webhook_file:
        try:
            target = load_kubeconfig(webhook_file)
        except KubeconfigError as error:
            raise ConfigError(f"--authentication-token-webhook-config-file: {error}") from None
        webhook = WebhookTokenAuthenticator(
            target,
            target.http_client(reactor),
            clock,
            version=config.authentication_token_webhook_version or "v1beta1",
            implicit_audiences=audiences,
        )
        ttl = float(config.authentication_token_webhook_cache_ttl)
        tokens.append(TokenCache(webhook, clock, ttl, ttl, cache_errors=False))
    return tokens


def build_authenticator(
    config: ServerConfig, reactor: Any, store: Any, parts: list[Any] | None = None
) -> tuple[Authenticator, bool]:
    """The configured authenticator and whether anonymous requests are allowed (see module
    docstring). Raises ConfigError (a ValueError) for unusable flags or files.

    Nothing is scheduled here: the parts that load keys or re-read files once running (OIDC
    issuers, the ``--authentication-config`` reloader) are appended to ``parts``, each with
    ``start()`` and ``stop()``, for the server's service tree to run."""
    if parts is None:
        parts = []
    audiences = api_audiences(config)
    clock: IReactorTime = reactor
    file_config: AuthenticationConfig | None = None
    data = b""
    if config.authentication_config:
        path = config.authentication_config
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as error:
            raise ConfigError(
                f"--authentication-config: cannot read {path!r}: {error.strerror or error}"
            ) from None
        file_config = parse_authentication_config(
            data, path, tuple(config.service_account_issuer or ())
        )
        if file_config.jwt and oidc_flags_set(config):
            raise ConfigError("authentication-config file and oidc-* flags are mutually exclusive")
        if file_config.anonymous is not None and config.is_set("anonymous-auth"):
            raise ConfigError(
                "--anonymous-auth flag cannot be set when anonymous field is configured in "
                "authentication configuration file"
            )
    anonymous_allowed, anonymous_paths = _anonymous(config, file_config)

    request_authenticators: list[Authenticator] = []
    client_ca: ChainVerifier | None = None
    if config.client_ca_file:
        client_ca = ChainVerifier.from_file(config.client_ca_file, "client-ca-file", clock)
    if config.requestheader_client_ca_file:
        proxy_ca = ChainVerifier.from_file(
            config.requestheader_client_ca_file, "requestheader-client-ca-file", clock
        )
        allowed_names = tuple(config.requestheader_allowed_names or ())
        if client_ca is not None and not allowed_names and proxy_ca.overlaps(client_ca):
            raise ConfigError(OVERLAP_ERROR)
        request_authenticators.append(
            RequestHeaderAuthenticator(
                proxy_ca,
                allowed_names,
                tuple(config.requestheader_username_headers or ()),
                tuple(config.requestheader_uid_headers or ()),
                tuple(config.requestheader_group_headers or ()),
                tuple(config.requestheader_extra_headers_prefix or ()),
                audiences,
            )
        )
    if client_ca is not None:
        request_authenticators.append(X509Authenticator(client_ca, audiences))
    tokens = _token_authenticators(config, reactor, store, file_config, data, parts)
    cached: TokenCache | None = None
    if tokens:
        cached = TokenCache(
            TokenUnion(tokens), clock, TOKEN_SUCCESS_TTL, TOKEN_FAILURE_TTL, cache_errors=True
        )
        request_authenticators.append(BearerTokenAuthenticator(cached, audiences))
        request_authenticators.append(WebSocketProtocolAuthenticator(cached, audiences))
    authenticator = TopLevelAuthenticator(
        RequestUnion(request_authenticators), anonymous_paths, tokens=cached
    )
    return authenticator, anonymous_allowed


def install_authn_routes(router: Any, config: ServerConfig) -> None:
    """Register ``/.well-known/openid-configuration`` and ``/openid/v1/jwks`` when a
    service-account issuer is configured and the documents can be built; otherwise log why
    (kube-apiserver serves on without them)."""
    issuers = tuple(config.service_account_issuer or ())
    if not issuers:
        return
    keys = service_account_keys(config)
    port = int(config.secure_port or 6443)
    host_port = join_host_port(external_host(config), port)
    try:
        config_body, jwks_body = build_documents(
            issuers[0], config.service_account_jwks_uri or "", host_port, keys
        )
    except DiscoveryError as error:
        log.error(
            "Could not construct pre-rendered responses for ServiceAccountIssuerDiscovery "
            "endpoints. Endpoints will not be enabled. Error: {error}",
            error=error,
        )
        return
    openid_configuration, jwks = make_handlers(config_body, jwks_body)
    router.add(OPENID_CONFIG_PATH, openid_configuration)
    router.add(JWKS_PATH, jwks)
