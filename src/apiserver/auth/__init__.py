"""Authentication, impersonation and authorization (k8s.io/apiserver ``pkg/endpoints/filters``).

``build_auth(config, reactor, store)`` returns the stages the handler chain runs for every
request (:class:`apiserver.auth.filter.AuthStages`, which
:func:`apiserver.http.chain.build_handler_chain` takes as its ``auth`` slots): request info,
authentication with the authenticators of :mod:`apiserver.auth.authn`, impersonation and
authorization with the authorizer chain of :mod:`apiserver.auth.authz.config`.

Until the authenticators exist (the ``authn`` package is optional here), no credential is
recognised and every request is anonymous (``system:anonymous``), as if only the anonymous
authenticator were configured.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from apiserver.auth.authz.config import ConfigReloader, build_authorizer
from apiserver.auth.filter import AnonymousPolicy, AuthStages
from apiserver.auth.interface import Authenticator

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

log = Logger()


def _authenticator(
    config: ServerConfig, reactor: Any, store: Any, parts: list[Any]
) -> tuple[Authenticator | None, AnonymousPolicy]:
    """``authn.build_authenticator`` when that package exists; else none and anonymous on."""
    if importlib.util.find_spec("apiserver.auth.authn") is None:
        log.warn("no authenticators available: every request is anonymous")
        return None, True
    authn = importlib.import_module("apiserver.auth.authn")
    build = getattr(authn, "build_authenticator", None)
    if build is None:
        log.warn("no authenticators available: every request is anonymous")
        return None, True
    authenticator, anonymous = build(config, reactor, store, parts)
    return authenticator, anonymous


def _api_audiences(config: ServerConfig) -> tuple[str, ...]:
    audiences = tuple(config.api_audiences or ())
    if not audiences:
        audiences = tuple(config.service_account_issuer or ())
    return audiences


def build_auth(config: ServerConfig, reactor: Any, store: Any) -> AuthStages:
    """The configured stages.

    Raises ``ValueError`` naming the file for a bad ``--authorization-policy-file``,
    ``--authorization-config`` or webhook kubeconfig; the server makes that a start-up
    failure. ``--authorization-config`` is re-read every minute on ``reactor`` once the
    server's tree starts: nothing is scheduled here; the loops and key loaders are listed in
    the filter's ``background`` for the auth-reload service to start and stop.
    """
    authorizer = build_authorizer(config, reactor)
    parts: list[Any] = []
    authenticator, anonymous = _authenticator(config, reactor, store, parts)
    stages = AuthStages.build(
        authenticator,
        anonymous,
        authorizer,
        api_audiences=_api_audiences(config),
        request_header_names=(
            *(config.requestheader_username_headers or ()),
            *(config.requestheader_uid_headers or ()),
            *(config.requestheader_group_headers or ()),
        ),
        request_header_prefixes=tuple(config.requestheader_extra_headers_prefix or ()),
    )
    path = config.authorization_config
    if path:
        stages.reloader = ConfigReloader(path, config, reactor, stages.set_authorizer)
        parts.append(stages.reloader)
    stages.background = parts
    return stages


__all__ = ["build_auth"]
