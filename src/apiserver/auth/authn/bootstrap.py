"""Bootstrap tokens (``--enable-bootstrap-token-auth``).

Reference: ``KK/plugin/pkg/auth/authenticator/token/bootstrap/bootstrap.go`` and
``k8s.io/cluster-bootstrap`` (``token/api``, ``token/util``, ``secret``).

A token ``<id>.<secret>`` (``\\A([a-z0-9]{6})\\.([a-z0-9]{16})\\z``) names the Secret
``kube-system/bootstrap-token-<id>``, read from the store at the reference key
``<store-prefix>/secrets/kube-system/bootstrap-token-<id>`` (a core v1 Secret as JSON, its
``data`` values base64). It authenticates when the Secret is of type
``bootstrap.kubernetes.io/token``, not being deleted, and its data holds ``token-secret``
(compared in constant time), ``token-id`` = id, ``usage-bootstrap-authentication`` = ``true``
and an ``expiration`` (RFC 3339) not yet past. User ``system:bootstrap:<id>``; groups
``system:bootstrappers`` plus the valid ``auth-extra-groups`` entries, sorted.

Every failure is "not mine" (the next token authenticator runs); only a store failure other
than "not found" is an error.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hmac
import json
import re
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.auth.authn.common import TokenOutcome
from apiserver.auth.interface import AuthResult, UserInfo
from apiserver.storage.interface import KeyNotFoundError, KeyValue

log = Logger()

TOKEN_RE = re.compile(r"\A([a-z0-9]{6})\.([a-z0-9]{16})\Z")
GROUP_RE = re.compile(r"\Asystem:bootstrappers:[a-z0-9:-]{0,255}[a-z0-9]\Z")
SECRET_TYPE = "bootstrap.kubernetes.io/token"
SECRET_PREFIX = "bootstrap-token-"
USER_PREFIX = "system:bootstrap:"
DEFAULT_GROUP = "system:bootstrappers"


def _data(secret: dict[str, Any], key: str) -> str:
    data = secret.get("data") or {}
    raw = data.get(key)
    if not isinstance(raw, str):
        return ""
    try:
        return base64.b64decode(raw, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return ""


def _expired(secret: dict[str, Any], now: float) -> bool:
    expiration = _data(secret, "expiration")
    if not expiration:
        return False
    try:
        when = _dt.datetime.fromisoformat(expiration.replace("Z", "+00:00"))
    except ValueError:
        log.warn("unparseable expiration time ({v}) in bootstrap token secret", v=expiration)
        return True
    if when.tzinfo is None:
        return True
    return when.timestamp() <= now


def _groups(secret: dict[str, Any]) -> tuple[str, ...] | None:
    groups = {DEFAULT_GROUP}
    extra = _data(secret, "auth-extra-groups")
    if not extra:
        return tuple(sorted(groups))
    for group in extra.split(","):
        group = group.strip()
        if not GROUP_RE.match(group):
            return None
        groups.add(group)
    return tuple(sorted(groups))


class BootstrapTokenAuthenticator:
    """Authenticates bootstrap tokens against their Secrets in the store."""

    def __init__(self, store: Any, prefix: str, clock: IReactorTime) -> None:
        self.store = store
        self.prefix = prefix.rstrip("/")
        self.clock = clock

    def key(self, token_id: str) -> bytes:
        return f"{self.prefix}/secrets/kube-system/{SECRET_PREFIX}{token_id}".encode()

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        match = TOKEN_RE.match(token)
        if match is None:
            return None
        token_id, token_secret = match.group(1), match.group(2)
        d: Deferred[KeyValue] = self.store.get(self.key(token_id))
        return d.addCallbacks(self._check, self._missing, callbackArgs=(token_id, token_secret))

    @staticmethod
    def _missing(failure: Failure) -> None:
        failure.trap(KeyNotFoundError)
        return None

    def _check(self, kv: KeyValue, token_id: str, token_secret: str) -> AuthResult | None:
        try:
            secret = json.loads(kv.value)
        except ValueError:
            return None
        if not isinstance(secret, dict):
            return None
        name = f"{SECRET_PREFIX}{token_id}"
        if (secret.get("metadata") or {}).get("deletionTimestamp"):
            log.debug("bootstrap token secret {name} is deleted and awaiting removal", name=name)
            return None
        if secret.get("type") != SECRET_TYPE or not secret.get("data"):
            return None
        stored = _data(secret, "token-secret")
        if not hmac.compare_digest(stored.encode(), token_secret.encode()):
            return None
        if _data(secret, "token-id") != token_id:
            return None
        if _expired(secret, self.clock.seconds()):
            return None
        if _data(secret, "usage-bootstrap-authentication") != "true":
            return None
        groups = _groups(secret)
        if groups is None:
            return None
        return AuthResult(UserInfo(name=USER_PREFIX + token_id, groups=groups))
