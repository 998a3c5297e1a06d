"""Authentication, impersonation and authorization (spec/auth-audit-tls.md §0, §1, §8, §11).

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
from typing import Any

from twisted.logger import Logger

from apiserver.auth.authz.config import ConfigReloader, build_authorizer
from apiserver.auth.filter import AnonymousPolicy, AuthStages
from apiserver.auth.interface import Authenticator

log = Logger()


def _authenticator(
    config: Any, reactor: Any, store: Any
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
    authenticator, anonymous = build(config, reactor, store)
    return authenticator, anonymous


def _api_audiences(config: Any) -> tuple[str, ...]:
    audiences = tuple(getattr(config, "api_audiences", ()) or ())
    if not audiences:
        audiences = tuple(getattr(config, "service_account_issuer", ()) or ())
    return audiences


def build_auth(config: Any, reactor: Any, store: Any) -> AuthStages:
    """The configured stages.

    Raises ``ValueError`` naming the file for a bad ``--authorization-policy-file``,
    ``--authorization-config`` or webhook kubeconfig; the server makes that a start-up
    failure. ``--authorization-config`` is then re-read every minute on ``reactor``.
    """
    authorizer = build_authorizer(config, reactor)
    authenticator, anonymous = _authenticator(config, reactor, store)
    stages = AuthStages.build(
        authenticator,
        anonymous,
        authorizer,
        api_audiences=_api_audiences(config),
        request_header_names=(
            *(getattr(config, "requestheader_username_headers", ()) or ()),
            *(getattr(config, "requestheader_uid_headers", ()) or ()),
            *(getattr(config, "requestheader_group_headers", ()) or ()),
        ),
        request_header_prefixes=tuple(
            getattr(config, "requestheader_extra_headers_prefix", ()) or ()
        ),
    )
    path = getattr(config, "authorization_config", "")
    if path:
        stages.reloader = ConfigReloader(path, config, reactor, stages.set_authorizer)
        stages.reloader.start()
    return stages


__all__ = ["build_auth"]
