"""JWT (OpenID Connect) authentication: the ``--oidc-*`` flags and ``AuthenticationConfiguration``
``jwt`` entries.

Reference: ``AS/plugin/pkg/authenticator/token/oidc/oidc.go`` on top of go-oidc's verifier.

- A token whose unverified ``iss`` is not the issuer URL is not ours (the next authenticator
  runs). Until the issuer's keys are loaded: ``oidc: authenticator not initialized``.
- Keys: ``<issuer>/.well-known/openid-configuration`` (or the configured ``discoveryURL``),
  whose ``issuer`` must equal the URL, then its ``jwks_uri``; fetched over TLS with treq,
  trusting ``--oidc-ca-file`` / ``certificateAuthority`` or the host's roots. The first attempt
  is immediate, then every 10 seconds until it works. A token signed by an unknown key makes
  the key set be fetched again (key rotation), as go-oidc's ``RemoteKeySet`` does.
- Verification, in go-oidc's order, each failure being ``oidc: verify token: <why>``:
  issuer, audience (one of the configured audiences), expiry (no leeway), ``nbf`` (5 minutes
  of leeway), algorithm (``--oidc-signing-algs``; all of RS/ES/PS 256/384/512 for a
  configuration file), signature.
- Then the user: username from its claim (``email`` with ``email_verified`` present requires
  true) plus prefix, or from a CEL expression; groups (a string or a list) plus prefix, or an
  expression; uid; extra; the required claims (string-compared); the claim and user
  validation rules. ``jti`` becomes ``authentication.kubernetes.io/credential-id: JTI=<jti>``.

Distributed claims (``_claim_names``/``_claim_sources``) are not resolved.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import jwt
import treq
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.auth.authn.cel import CELError, Program
from apiserver.auth.authn.common import CREDENTIAL_ID, TokenOutcome, go_string_list
from apiserver.auth.authn.serviceaccount import unverified_issuer
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo
from apiserver.auth.kubeconfig import describe_failure
from apiserver.gocompat.jsonvalues import go_json_kind
from apiserver.gocompat.quote import go_quote
from apiserver.gocompat.timefmt import ZERO_TIME_SECONDS, format_unix_time_string

log = Logger()

ALL_SIGNING_ALGS = (
    "ES256", "ES384", "ES512", "PS256", "PS384", "PS512", "RS256", "RS384", "RS512",
)  # fmt: skip
WELL_KNOWN = "/.well-known/openid-configuration"
RETRY_INTERVAL = 10.0
FETCH_TIMEOUT = 30.0
NBF_LEEWAY = 300.0


@attrs.frozen
class ClaimMapping:
    """``PrefixedClaimOrExpression`` / ``ClaimOrExpression``."""

    claim: str = ""
    prefix: str | None = None
    expression: Program | None = None


@attrs.frozen
class ValidationRule:
    expression: Program
    message: str = ""


@attrs.frozen
class JWTConfig:
    """One JWT authenticator, as ``apiserver.JWTAuthenticator`` after defaulting."""

    issuer_url: str
    audiences: tuple[str, ...]
    discovery_url: str = ""
    ca_pem: bytes | None = None
    username: ClaimMapping = ClaimMapping(claim="sub", prefix="")
    groups: ClaimMapping = ClaimMapping()
    uid: ClaimMapping = ClaimMapping()
    extra: tuple[tuple[str, Program], ...] = ()
    required_claims: tuple[tuple[str, str], ...] = ()
    claim_rules: tuple[ValidationRule, ...] = ()
    user_rules: tuple[ValidationRule, ...] = ()
    signing_algs: tuple[str, ...] = ("RS256",)


class _ClaimMissing(Exception):
    pass


def _claim_string(claims: Mapping[str, Any], name: str) -> str:
    if name not in claims:
        raise _ClaimMissing("claim not present")
    value = claims[name]
    if not isinstance(value, str):
        raise _ClaimMissing(
            f"json: cannot unmarshal {go_json_kind(value)} into Go value of type string"
        )
    return value


def _string_list(value: Any) -> list[str]:
    """convertCELValueToStringList."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise CELError("expression must return a string or a list of strings")


class JWTAuthenticator:
    """Verifies ID tokens of one issuer."""

    def __init__(self, config: JWTConfig, client: Any, clock: IReactorTime) -> None:
        self.config = config
        self.client = client
        self.clock = clock
        self.jwks_uri: str | None = None
        self.keys: list[jwt.PyJWK] = []
        self._waiters: list[Deferred[None]] = []
        self._retry: IDelayedCall | None = None
        self._stopped = False

    # -- key loading ------------------------------------------------------------------------

    @property
    def initialized(self) -> bool:
        return self.jwks_uri is not None

    def start(self) -> None:
        """Begin loading the issuer's keys now, retrying every 10 seconds until it works."""
        self._retry = None
        if self._stopped or self.initialized:
            return
        d = maybeDeferred(self._initialize)

        def failed(failure: Failure) -> None:
            log.error(
                "oidc authenticator: initializing plugin: {why}", why=describe_failure(failure)
            )
            if not self._stopped:
                self._retry = self.clock.callLater(RETRY_INTERVAL, self.start)

        d.addErrback(failed)

    def stop(self) -> None:
        self._stopped = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()

    def _get_json(self, url: str) -> Deferred[Any]:
        d: Deferred[Any] = self.client.request("GET", url)
        timer = self.clock.callLater(FETCH_TIMEOUT, d.cancel)

        def got(response: Any) -> Deferred[Any]:
            def parse(body: bytes) -> Any:
                if response.code != 200:
                    raise ValueError(
                        f"{response.code} {response.phrase.decode('latin-1', 'replace')}: "
                        + body.decode("utf-8", "replace").strip()
                    )
                return json.loads(body)

            return treq.content(response).addCallback(parse)

        def done(result: Any) -> Any:
            if timer.active():
                timer.cancel()
            return result

        return d.addCallback(got).addBoth(done)

    def _initialize(self) -> Deferred[None]:
        config = self.config
        url = config.discovery_url or config.issuer_url.rstrip("/") + WELL_KNOWN

        def got_discovery(doc: Any) -> Deferred[None]:
            if not isinstance(doc, dict):
                raise ValueError("oidc: failed to decode provider discovery object")
            if doc.get("issuer") != config.issuer_url:
                raise ValueError(
                    "oidc: issuer did not match the issuer returned by provider, expected "
                    f"{go_quote(config.issuer_url)} got {go_quote(str(doc.get('issuer') or ''))}"
                )
            jwks_uri = doc.get("jwks_uri")
            if not isinstance(jwks_uri, str) or not jwks_uri:
                raise ValueError("oidc: provider discovery object has no jwks_uri")
            return self._fetch_keys(jwks_uri).addCallback(lambda _: self._ready(jwks_uri))

        return self._get_json(url).addCallback(got_discovery)

    def _ready(self, jwks_uri: str) -> None:
        self.jwks_uri = jwks_uri
        log.info("oidc authenticator: keys of issuer {iss} loaded", iss=self.config.issuer_url)

    def _fetch_keys(self, jwks_uri: str) -> Deferred[None]:
        def got(doc: Any) -> None:
            if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
                raise ValueError("oidc: failed to decode keys")
            keys: list[jwt.PyJWK] = []
            for entry in doc["keys"]:
                if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
                    continue
                try:
                    keys.append(jwt.PyJWK(entry))
                except (jwt.PyJWTError, ValueError, TypeError, KeyError):
                    continue
            self.keys = keys

        return self._get_json(jwks_uri).addCallback(got)

    def _refresh_keys(self) -> Deferred[None]:
        """Fetch the key set again; concurrent callers share one fetch."""
        waiter: Deferred[None] = Deferred()
        self._waiters.append(waiter)
        if len(self._waiters) == 1:
            assert self.jwks_uri is not None
            self._fetch_keys(self.jwks_uri).addBoth(self._refreshed)
        return waiter

    def _refreshed(self, result: Any) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if isinstance(result, Failure):
                waiter.errback(result)
            else:
                waiter.callback(None)

    # -- verification ----------------------------------------------------------------------

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        config = self.config
        iss = unverified_issuer(token)
        if iss == "accounts.google.com":
            iss = "https://accounts.google.com"
        if iss is None or iss != config.issuer_url:
            return None
        if not self.initialized:
            raise AuthenticationError("oidc: authenticator not initialized")
        header, claims = self._check_claims(token)
        alg = header.get("alg")
        if alg not in config.signing_algs:
            raise _verify_error(
                "oidc: id token signed with unsupported algorithm, expected "
                f"{go_string_list(config.signing_algs)} got {go_quote(str(alg))}"
            )
        kid = header.get("kid") or ""
        if self._verify(token, str(alg), kid):
            return self._user(claims)

        def refreshed(_: object) -> AuthResult:
            if not self._verify(token, str(alg), kid):
                raise _verify_error(
                    "failed to verify signature: failed to verify id token signature"
                )
            return self._user(claims)

        def fetch_failed(failure: Failure) -> AuthResult:
            raise _verify_error(
                f"failed to verify signature: fetching keys {describe_failure(failure)}"
            )

        return self._refresh_keys().addCallbacks(refreshed, fetch_failed)

    def _check_claims(self, token: str) -> tuple[dict[str, Any], dict[str, Any]]:
        config = self.config
        try:
            decoded = jwt.PyJWS().decode_complete(token, options={"verify_signature": False})
        except jwt.PyJWTError as error:
            raise _verify_error(f"oidc: malformed jwt: {error}") from None
        header = decoded["header"]
        try:
            claims = json.loads(decoded["payload"])
        except ValueError as error:
            raise _verify_error(f"oidc: failed to unmarshal claims: {error}") from None
        if not isinstance(claims, dict):
            raise _verify_error("oidc: failed to unmarshal claims")
        iss = claims.get("iss")
        if iss != config.issuer_url:
            raise _verify_error(
                "oidc: id token issued by a different provider, expected "
                f"{go_quote(config.issuer_url)} got {go_quote(str(iss or ''))}"
            )
        aud = claims.get("aud")
        token_auds = [aud] if isinstance(aud, str) else list(aud or [])
        if not any(a in config.audiences for a in token_auds):
            if len(config.audiences) == 1:
                raise _verify_error(
                    f"oidc: expected audience {go_quote(config.audiences[0])} got "
                    f"{go_string_list([str(a) for a in token_auds])}"
                )
            raise _verify_error(
                f"oidc: expected audience in {go_string_list(sorted(config.audiences))} got "
                f"{go_string_list([str(a) for a in token_auds])}"
            )
        now = self.clock.seconds()
        exp = claims.get("exp")
        expiry = float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
        if expiry is None or expiry < now:
            shown = format_unix_time_string(expiry if expiry is not None else ZERO_TIME_SECONDS)
            raise _verify_error(f"oidc: token is expired (Token Expiry: {shown})")
        nbf = claims.get("nbf")
        if isinstance(nbf, int | float) and not isinstance(nbf, bool) and now + NBF_LEEWAY < nbf:
            raise _verify_error(
                f"oidc: current time {format_unix_time_string(now)} before the nbf (not before) "
                f"time: {format_unix_time_string(float(nbf))}"
            )
        return header, claims

    def _verify(self, token: str, alg: str, kid: str) -> bool:
        jws = jwt.PyJWS()
        for key in self.keys:
            if kid and key.key_id != kid:
                continue
            try:
                jws.decode_complete(token, key=key, algorithms=[alg])
            except (jwt.PyJWTError, ValueError, TypeError):
                continue
            return True
        return False

    # -- the user -------------------------------------------------------------------------------

    def _user(self, claims: dict[str, Any]) -> AuthResult:
        config = self.config
        env = {"claims": claims}
        username = self._username(claims, env)
        groups = self._groups(claims, env)
        uid = self._uid(claims, env)
        extra: dict[str, tuple[str, ...]] = {}
        for key, program in config.extra:
            try:
                values = _string_list(program.evaluate(env))
            except CELError as error:
                raise AuthenticationError(
                    f"oidc: error evaluating extra claim expression: {program.source}: {error}"
                ) from None
            if values:
                extra[key] = tuple(values)
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            extra.setdefault(CREDENTIAL_ID, (f"JTI={jti}",))
        for claim, wanted in config.required_claims:
            if claim not in claims:
                raise AuthenticationError(f"oidc: required claim {claim} not present in ID token")
            got = claims[claim]
            if not isinstance(got, str):
                raise AuthenticationError(
                    f"oidc: parse claim {claim}: json: cannot unmarshal {go_json_kind(got)} into "
                    "Go value of type string"
                )
            if got != wanted:
                raise AuthenticationError(
                    f"oidc: required claim {claim} value does not match. Got = {got}, "
                    f"want = {wanted}"
                )
        _check_rules(config.claim_rules, env, "oidc: error evaluating claim validation expression")
        user = UserInfo(name=username, uid=uid, groups=tuple(groups), extra=extra)
        if config.user_rules:
            user_env = {
                "user": {
                    "username": user.name,
                    "uid": user.uid,
                    "groups": list(user.groups),
                    "extra": {k: list(v) for k, v in user.extra.items()},
                }
            }
            _check_rules(
                config.user_rules, user_env, "oidc: error evaluating user info validation rule"
            )
        return AuthResult(user)

    def _username(self, claims: dict[str, Any], env: Mapping[str, Any]) -> str:
        mapping = self.config.username
        if mapping.expression is not None:
            try:
                value = mapping.expression.evaluate(env)
            except CELError as error:
                raise AuthenticationError(
                    f"oidc: error evaluating username claim expression: {error}"
                ) from None
            if not isinstance(value, str):
                raise AuthenticationError(
                    "oidc: error evaluating username claim expression: username claim "
                    "expression must return a string"
                )
            if not value:
                raise AuthenticationError("oidc: empty username via CEL expression is not allowed")
            return value
        try:
            username = _claim_string(claims, mapping.claim)
        except _ClaimMissing as error:
            raise AuthenticationError(
                f"oidc: parse username claims {go_quote(mapping.claim)}: {error}"
            ) from None
        if mapping.claim == "email" and "email_verified" in claims:
            verified = claims["email_verified"]
            if not isinstance(verified, bool):
                raise AuthenticationError(
                    "oidc: parse 'email_verified' claim: json: cannot unmarshal "
                    f"{go_json_kind(verified)} into Go value of type bool"
                )
            if not verified:
                raise AuthenticationError("oidc: email not verified")
        if mapping.prefix:
            return mapping.prefix + username
        return username

    def _groups(self, claims: dict[str, Any], env: Mapping[str, Any]) -> list[str]:
        mapping = self.config.groups
        if mapping.claim:
            if mapping.claim in claims:
                value = claims[mapping.claim]
                if isinstance(value, str):
                    groups = [value]
                elif isinstance(value, list) and all(isinstance(v, str) for v in value):
                    groups = list(value)
                else:
                    raise AuthenticationError(
                        f"oidc: parse groups claim {go_quote(mapping.claim)}: json: cannot "
                        f"unmarshal {go_json_kind(value)} into Go value of type string"
                    )
                if mapping.prefix:
                    groups = [mapping.prefix + g for g in groups]
                return groups
            return []
        if mapping.expression is None:
            return []
        try:
            return _string_list(mapping.expression.evaluate(env))
        except CELError as error:
            raise AuthenticationError(
                f"oidc: error evaluating group claim expression: {error}"
            ) from None

    def _uid(self, claims: dict[str, Any], env: Mapping[str, Any]) -> str:
        mapping = self.config.uid
        if mapping.claim:
            try:
                return _claim_string(claims, mapping.claim)
            except _ClaimMissing as error:
                raise AuthenticationError(
                    f"oidc: parse uid claim {go_quote(mapping.claim)}: {error}"
                ) from None
        if mapping.expression is None:
            return ""
        try:
            value = mapping.expression.evaluate(env)
        except CELError as error:
            raise AuthenticationError(
                f"oidc: error evaluating uid claim expression: {error}"
            ) from None
        if not isinstance(value, str):
            raise AuthenticationError(
                "oidc: error evaluating uid claim expression: uid claim expression must "
                "return a string"
            )
        return value


def _check_rules(rules: Sequence[ValidationRule], env: Mapping[str, Any], what: str) -> None:
    for rule in rules:
        try:
            value = rule.expression.evaluate(env)
        except CELError as error:
            raise AuthenticationError(f"{what}: {error}") from None
        if not isinstance(value, bool):
            raise AuthenticationError(f"{what}: validation expression must return a boolean")
        if not value:
            raise AuthenticationError(
                f"{what}: validation expression '{rule.expression.source}' failed: {rule.message}"
            )


def _verify_error(message: str) -> AuthenticationError:
    return AuthenticationError(f"oidc: verify token: {message}")
