"""Service-account tokens: bound (projected) JWTs and legacy Secret tokens.

References: ``KK/pkg/serviceaccount/jwt.go`` (the authenticator), ``claims.go`` (bound-token
validation), ``legacy.go`` (Secret tokens), ``AS/pkg/authentication/serviceaccount/util.go``
(the user) and ``AS/.../keyutil`` (``ParsePublicKeysPEM``).

Flow of :meth:`ServiceAccountAuthenticator.authenticate_token`:

1. Unverified pre-check: three dot-separated parts, a JSON payload, an ``iss`` this
   authenticator accepts (``kubernetes/serviceaccount`` for legacy tokens, the
   ``--service-account-issuer`` values for bound ones). Failing it: not mine.
2. Keys are picked by the header ``kid`` (all keys when absent); none: ``invalid signature, no
   keys found``. A signature that no key verifies is an error. The issuer is checked again
   after the signature: ``token issuer "<iss>" is invalid``.
3. Audiences: a token without ``aud`` (legacy) gets the API audiences; the token's audiences
   must meet the request's (``--api-audiences``), else ``token audiences ["a"] is invalid for
   the target audiences ["b"]``.
4. Bound tokens: ``exp``/``nbf``/``iat`` with a minute of leeway, then the ServiceAccount (and
   the Secret, Pod and Node the token names) must exist in the store at the reference keys
   (``<prefix>/serviceaccounts/<ns>/<name>``, ``<prefix>/secrets/<ns>/<name>``,
   ``<prefix>/pods/<ns>/<name>``, ``<prefix>/minions/<name>``) with the same UID and must not
   have been deleted more than the leeway ago. A missing object is ``<resource> "<name>" not
   found``; all of these are 401s. Since ServiceAccountTokenNodeBinding went GA, kube-apiserver
   always has a getter for bound tokens, so these lookups do not depend on
   ``--service-account-lookup``.
5. Legacy tokens: the private ``kubernetes.io/serviceaccount/*`` claims must be present and
   agree with ``sub``; with ``--service-account-lookup`` the Secret's ``data.token`` must equal
   the token and the ServiceAccount's UID the claim.
6. A bound token past its ``kubernetes.io.warnafter`` time is still accepted, as
   kube-apiserver accepts it (``claims.go`` ``Validate``): the reference only adds the audit
   annotation ``authentication.k8s.io/stale-token`` (``subject: <sub>, seconds after warning
   threshold: <n>``) and counts it in ``serviceaccount_stale_tokens_total``. Here the
   annotation travels in :attr:`AuthResult.annotations` to the request's audit event, on every
   request with the token; the same text is also logged at info level, once per token (by
   ``jti``; a bounded memory of :data:`STALE_LOG_MEMORY` tokens).
7. A pod-bound token's ``node`` claim is only read, never looked up (the node is information
   there, ServiceAccountTokenPodNodeInfo); a token bound to a Node itself is checked.

Why PyJWT only for the signature (``PyJWS``): the claim checks must give the reference's exact
error texts and leeway, which PyJWT's own claim validation words differently.

:class:`TokenSigner` mirrors the token generator (``jwt.go`` ``JWTTokenGenerator``): header
``alg`` from the key (RS256, ES256/384/512) and ``kid`` = base64url(SHA-256(PKIX DER)).
:meth:`TokenSigner.generate` signs exactly as the generator does (the TokenRequest API,
:mod:`apiserver.api.tokenrequest`, uses it); :meth:`TokenSigner.sign` and
:meth:`TokenSigner.bound_claims` let tests and tools mint tokens this server accepts.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import hashlib
import json
import re
import uuid
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from twisted.internet.defer import ensureDeferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from apiserver.auth.authn.common import (
    CREDENTIAL_ID,
    ConfigError,
    TokenOutcome,
    go_string_list,
    intersect,
    read_file,
)
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo
from apiserver.gocompat.marshal import go_marshal
from apiserver.gocompat.quote import go_quote
from apiserver.registry.storagecodec import StorageCodecError, decode_any
from apiserver.storage.interface import KeyNotFoundError

LEGACY_ISSUER = "kubernetes/serviceaccount"
LEEWAY = 60.0
SA_PREFIX = "system:serviceaccount:"
ALL_SA_GROUP = "system:serviceaccounts"
POD_NAME_KEY = "authentication.kubernetes.io/pod-name"
POD_UID_KEY = "authentication.kubernetes.io/pod-uid"
NODE_NAME_KEY = "authentication.kubernetes.io/node-name"
NODE_UID_KEY = "authentication.kubernetes.io/node-uid"
STALE_TOKEN_ANNOTATION = "authentication.k8s.io/stale-token"
#: Stale tokens remembered so that each is logged once; the oldest is forgotten first.
STALE_LOG_MEMORY = 4096

log = Logger()

PublicKey = rsa.RSAPublicKey | ec.EllipticCurvePublicKey
PrivateKey = rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\r?\n.*?-----END \1-----", re.DOTALL)
_CURVE_ALG = {"secp256r1": "ES256", "secp384r1": "ES384", "secp521r1": "ES512"}
_CURVE_NAME = {"secp256r1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"}
_RSA_ALGS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")


# --- keys ------------------------------------------------------------------------------------


def key_id(key: PublicKey) -> str:
    """base64url-nopad(SHA-256(PKIX DER of the public key)) (``keyIDFromPublicKey``)."""
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


def signing_alg(key: PublicKey) -> str:
    """RS256 for RSA; ES256/384/512 for P-256/384/521 (``signerFromRSAPrivateKey`` & co)."""
    if isinstance(key, rsa.RSAPublicKey):
        return "RS256"
    alg = _CURVE_ALG.get(key.curve.name)
    if alg is None:
        raise ValueError(f"unknown private key curve, must be 256, 384, or 521: {key.curve.name}")
    return alg


def parse_public_keys_pem(data: bytes) -> list[PublicKey]:
    """Every RSA or ECDSA key in a PEM file, private keys and certificates giving their public
    half; other blocks are tolerated (``keyutil.ParsePublicKeysPEM``)."""
    keys: list[PublicKey] = []
    for match in _PEM_BLOCK.finditer(data):
        block = match.group(0)
        key: Any = None
        kind = match.group(1)
        try:
            if kind == b"CERTIFICATE":
                key = x509.load_pem_x509_certificate(block).public_key()
            elif b"PRIVATE KEY" in kind:
                key = serialization.load_pem_private_key(block, password=None).public_key()
            elif b"PUBLIC KEY" in kind:
                key = serialization.load_pem_public_key(block)
        except (ValueError, TypeError):
            continue
        if isinstance(key, rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
            keys.append(key)
    if not keys:
        raise ValueError("data does not contain any valid RSA or ECDSA public keys")
    return keys


def load_public_keys(paths: Sequence[str], flag: str) -> list[PublicKey]:
    """The keys of every file; ConfigError ``failed to parse key file "<f>": <why>``."""
    keys: list[PublicKey] = []
    for path in paths:
        data = read_file(path, flag)
        try:
            keys.extend(parse_public_keys_pem(data))
        except ValueError as error:
            raise ConfigError(
                f"--{flag}: failed to parse key file {go_quote(path)}: {error}"
            ) from None
    return keys


def load_private_key(path: str, flag: str) -> PrivateKey:
    """The signing key; ConfigError naming the file when it is not an RSA/ECDSA private key."""
    data = read_file(path, flag)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"--{flag}: failed to parse {go_quote(path)}: {error}") from None
    if not isinstance(key, rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise ConfigError(f"--{flag}: {go_quote(path)} is not an RSA or ECDSA private key")
    if isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name not in _CURVE_ALG:
        raise ConfigError(f"--{flag}: {go_quote(path)}: unsupported curve {key.curve.name}")
    return key


def _b64(value: int, length: int | None = None) -> str:
    size = length if length is not None else max(1, (value.bit_length() + 7) // 8)
    return base64.urlsafe_b64encode(value.to_bytes(size, "big")).rstrip(b"=").decode()


def jwk(key: PublicKey) -> dict[str, str]:
    """The public JWK, fields in go-jose's order: use, kty, kid, crv, alg, x, y, n, e."""
    out: dict[str, str] = {"use": "sig"}
    if isinstance(key, rsa.RSAPublicKey):
        numbers = key.public_numbers()
        out.update(kty="RSA", kid=key_id(key), alg="RS256", n=_b64(numbers.n), e=_b64(numbers.e))
        return out
    ec_numbers = key.public_numbers()
    size = (key.curve.key_size + 7) // 8
    out.update(
        kty="EC",
        kid=key_id(key),
        crv=_CURVE_NAME[key.curve.name],
        alg=signing_alg(key),
        x=_b64(ec_numbers.x, size),
        y=_b64(ec_numbers.y, size),
    )
    return out


@attrs.frozen
class KeySet:
    """The verification keys with their ids (``staticPublicKeysGetter``)."""

    keys: tuple[PublicKey, ...]
    by_id: Mapping[str, tuple[PublicKey, ...]]

    @classmethod
    def of(cls, keys: Sequence[PublicKey]) -> KeySet:
        by_id: dict[str, list[PublicKey]] = {}
        for key in keys:
            by_id.setdefault(key_id(key), []).append(key)
        return cls(tuple(keys), {k: tuple(v) for k, v in by_id.items()})

    def lookup(self, kid: str) -> tuple[PublicKey, ...]:
        if not kid:
            return self.keys
        return self.by_id.get(kid, ())


# --- claims helpers ----------------------------------------------------------------------------


def _b64url_json(part: str) -> Any:
    padded = part + "=" * (-len(part) % 4)
    return json.loads(base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True))


def unverified_issuer(token: str) -> str | None:
    """The ``iss`` of a compact JWT without checking anything; None if it is not one."""
    if token.strip().startswith("{"):
        return None
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        if "=" in parts[1]:
            return None
        payload = _b64url_json(parts[1])
    except (ValueError, binascii.Error, UnicodeError):
        return None
    if not isinstance(payload, dict):
        return None
    iss = payload.get("iss", "")
    return iss if isinstance(iss, str) else None


def _audiences(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise AuthenticationError(
        "go-jose/go-jose/jwt: expected string or array value to unmarshal to Audience"
    )


def _numeric(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AuthenticationError(f"go-jose/go-jose/jwt: invalid {name} claim")
    return float(value)


def _timestamp(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def verify_signature(
    token: str, keys: Sequence[PublicKey]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) once one of ``keys`` verifies the signature; AuthenticationError
    otherwise. The algorithm must fit the key (RSA: RS/PS; EC: the ES of its curve)."""
    errors: list[str] = []
    jws = jwt.PyJWS()
    for key in keys:
        algs = list(_RSA_ALGS) if isinstance(key, rsa.RSAPublicKey) else [signing_alg(key)]
        try:
            decoded = jws.decode_complete(token, key=key, algorithms=algs)
        except (jwt.PyJWTError, ValueError, TypeError):
            errors.append("go-jose/go-jose: error in cryptographic primitive")
            continue
        try:
            claims = json.loads(decoded["payload"])
        except ValueError:
            raise AuthenticationError("go-jose/go-jose/jwt: invalid claims") from None
        if not isinstance(claims, dict):
            raise AuthenticationError("go-jose/go-jose/jwt: invalid claims")
        return decoded["header"], claims
    from apiserver.auth.authn.common import aggregate_message

    raise AuthenticationError(aggregate_message([Exception(e) for e in errors]))


def make_username(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def split_username(username: str) -> tuple[str, str] | None:
    if not username.startswith(SA_PREFIX):
        return None
    parts = username[len(SA_PREFIX) :].split(":")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return None
    return parts[0], parts[1]


def sa_groups(namespace: str) -> tuple[str, ...]:
    return (ALL_SA_GROUP, f"{ALL_SA_GROUP}:{namespace}")


# --- the authenticator ---------------------------------------------------------------------


class ServiceAccountAuthenticator:
    """One of the two service-account token authenticators (legacy or bound)."""

    def __init__(
        self,
        issuers: Sequence[str],
        keys: KeySet,
        implicit_audiences: Sequence[str],
        store: Any,
        prefix: str,
        clock: IReactorTime,
        legacy: bool,
        lookup: bool = True,
    ) -> None:
        self.issuers = frozenset(issuers)
        self.keys = keys
        self.implicit_audiences = tuple(implicit_audiences)
        self.store = store
        self.prefix = prefix.rstrip("/")
        self.clock = clock
        self.legacy = legacy
        self.lookup = lookup
        self._stale_logged: OrderedDict[str, None] = OrderedDict()

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> TokenOutcome:
        iss = unverified_issuer(token)
        if iss is None or iss not in self.issuers:
            return None
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return None
        kid = header.get("kid") or ""
        keys = self.keys.lookup(kid if isinstance(kid, str) else "")
        if not keys:
            raise AuthenticationError("invalid signature, no keys found")
        _, claims = verify_signature(token, keys)
        issuer = claims.get("iss")
        if issuer not in self.issuers:
            raise AuthenticationError(f"token issuer {go_quote(str(issuer or ''))} is invalid")
        token_auds = _audiences(claims.get("aud"))
        if not token_auds:
            token_auds = self.implicit_audiences
        requested = audiences or self.implicit_audiences
        auds = intersect(token_auds, requested)
        if not auds and self.implicit_audiences:
            raise AuthenticationError(
                f"token audiences {go_string_list(token_auds)} is invalid for the target "
                f"audiences {go_string_list(requested)}"
            )
        if not self.legacy:
            return ensureDeferred(self._validate_bound(claims, auds))
        d = ensureDeferred(self._validate_legacy(token, claims))
        return d.addCallback(lambda user: AuthResult(user, auds))

    # -- store access --------------------------------------------------------------------------

    async def _get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        path = f"{namespace}/{name}" if namespace else name
        key = f"{self.prefix}/{resource}/{path}".encode()
        try:
            kv = await self.store.get(key)
        except KeyNotFoundError:
            shown = "nodes" if resource == "minions" else resource
            raise AuthenticationError(f"{shown} {go_quote(name)} not found") from None
        try:
            # Any stored format (--storage-media-type): JSON, YAML or the protobuf envelope.
            obj: Any = decode_any(kv.value)
        except (StorageCodecError, ValueError):
            obj = None
        if not isinstance(obj, dict):
            raise AuthenticationError(f"{resource} {go_quote(name)} could not be decoded")
        return obj

    # -- bound tokens ----------------------------------------------------------------------

    async def _validate_bound(
        self, claims: dict[str, Any], audiences: tuple[str, ...]
    ) -> AuthResult:
        now = self.clock.seconds()
        nbf, exp, iat = (_numeric(claims, n) for n in ("nbf", "exp", "iat"))
        if nbf is not None and now + LEEWAY < nbf:
            raise AuthenticationError("service account token is not valid yet")
        if exp is not None and now - LEEWAY > exp:
            raise AuthenticationError("service account token has expired")
        if iat is not None and now + LEEWAY < iat:
            raise AuthenticationError("service account token is issued in the future")
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            raise AuthenticationError(
                "service account token claims could not be validated due to unexpected "
                "private claim"
            )
        namespace = str(private.get("namespace") or "")
        saref = private.get("serviceaccount") or {}
        if not isinstance(saref, dict) or not namespace or not saref.get("name"):
            raise AuthenticationError(
                "service account token claims could not be validated due to unexpected "
                "private claim"
            )
        deleted_before = now - LEEWAY

        def invalidated(obj: dict[str, Any]) -> bool:
            when = _timestamp((obj.get("metadata") or {}).get("deletionTimestamp"))
            return when is not None and when < deleted_before

        sa = await self._get("serviceaccounts", namespace, str(saref["name"]))
        if invalidated(sa):
            raise AuthenticationError("service account token has been invalidated")
        sa_uid = str((sa.get("metadata") or {}).get("uid") or "")
        if sa_uid != str(saref.get("uid") or ""):
            raise AuthenticationError(
                f"service account UID ({sa_uid}) does not match claim ({saref.get('uid') or ''})"
            )
        extra: dict[str, tuple[str, ...]] = {}
        for kind, resource, label in (
            ("secret", "secrets", "service account secret ref claim"),
            ("pod", "pods", "service account pod ref claim"),
            ("node", "minions", "service account node ref claim"),
        ):
            ref = private.get(kind)
            if not isinstance(ref, dict):
                continue
            name = str(ref.get("name") or "")
            if kind == "node" and isinstance(private.get("pod"), dict):
                # The node of a pod-bound token is information only: read, not looked up.
                extra[NODE_NAME_KEY] = (name,)
                if ref.get("uid"):
                    extra[NODE_UID_KEY] = (str(ref["uid"]),)
                continue
            obj = await self._get(resource, "" if kind == "node" else namespace, name)
            if invalidated(obj):
                raise AuthenticationError("service account token has been invalidated")
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            if uid != str(ref.get("uid") or ""):
                raise AuthenticationError(
                    f"{kind} UID ({uid}) does not match {label} ({ref.get('uid') or ''})"
                )
            if kind == "pod":
                extra[POD_NAME_KEY] = (name,)
                extra[POD_UID_KEY] = (uid,)
            elif kind == "node":
                extra[NODE_NAME_KEY] = (name,)
                if uid:
                    extra[NODE_UID_KEY] = (uid,)
        stale = self._note_stale(claims, private.get("warnafter"), now)
        jti = claims.get("jti")
        if isinstance(jti, str) and jti:
            extra[CREDENTIAL_ID] = (f"JTI={jti}",)
        user = UserInfo(
            name=make_username(namespace, str(saref["name"])),
            uid=sa_uid,
            groups=sa_groups(namespace),
            extra=extra,
        )
        if stale is None:
            return AuthResult(user, audiences)
        return AuthResult(user, audiences, {STALE_TOKEN_ANNOTATION: stale})

    def _note_stale(self, claims: Mapping[str, Any], warn_after: Any, now: float) -> str | None:
        """The ``stale-token`` audit annotation's value when ``now`` is past a non-zero
        ``warnafter`` (the token stays valid), else None; logged once per token."""
        if isinstance(warn_after, bool) or not isinstance(warn_after, int | float):
            return None
        if not warn_after or now <= warn_after:
            return None
        seconds = int(now) - int(warn_after)
        subject = claims.get("sub") or ""
        value = f"subject: {subject}, seconds after warning threshold: {seconds}"
        jti = claims.get("jti")
        key = jti if isinstance(jti, str) and jti else f"{claims.get('sub')}/{claims.get('iat')}"
        if key in self._stale_logged:
            return value
        self._stale_logged[key] = None
        if len(self._stale_logged) > STALE_LOG_MEMORY:
            self._stale_logged.popitem(last=False)
        log.info(
            "{annotation}: subject: {subject}, seconds after warning threshold: {seconds}",
            annotation=STALE_TOKEN_ANNOTATION,
            subject=subject,
            seconds=seconds,
        )
        return value

    # -- legacy tokens -----------------------------------------------------------------------

    async def _validate_legacy(self, token: str, claims: dict[str, Any]) -> UserInfo:
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise AuthenticationError("sub claim is missing")
        fields = (
            ("namespace", "kubernetes.io/serviceaccount/namespace"),
            ("secretName", "kubernetes.io/serviceaccount/secret.name"),
            ("serviceAccountName", "kubernetes.io/serviceaccount/service-account.name"),
            ("serviceAccountUID", "kubernetes.io/serviceaccount/service-account.uid"),
        )
        values: dict[str, str] = {}
        for label, claim in fields:
            value = claims.get(claim)
            if not isinstance(value, str) or not value:
                raise AuthenticationError(f"{label} claim is missing")
            values[label] = value
        namespace, sa_name = values["namespace"], values["serviceAccountName"]
        if split_username(subject) != (namespace, sa_name):
            raise AuthenticationError("sub claim is invalid")
        if self.lookup:
            try:
                secret = await self._get("secrets", namespace, values["secretName"])
            except AuthenticationError:
                raise AuthenticationError("Token has been invalidated") from None
            if (secret.get("metadata") or {}).get("deletionTimestamp"):
                raise AuthenticationError("Token has been invalidated")
            stored = (secret.get("data") or {}).get("token")
            try:
                stored_bytes = base64.b64decode(stored or "", validate=True)
            except (binascii.Error, ValueError):
                stored_bytes = b""
            if stored_bytes != token.encode():
                raise AuthenticationError("Token does not match server's copy")
            sa = await self._get("serviceaccounts", namespace, sa_name)
            if (sa.get("metadata") or {}).get("deletionTimestamp"):
                raise AuthenticationError("Token has been invalidated")
            sa_uid = str((sa.get("metadata") or {}).get("uid") or "")
            if sa_uid != values["serviceAccountUID"]:
                raise AuthenticationError(
                    f"Service account UID ({sa_uid}) does not match claim "
                    f"({values['serviceAccountUID']})"
                )
        return UserInfo(
            name=make_username(namespace, sa_name),
            uid=values["serviceAccountUID"],
            groups=sa_groups(namespace),
        )


# --- minting tokens (tests, tools) -------------------------------------------------------------


class TokenSigner:
    """Signs service-account tokens as kube-apiserver's token generator does."""

    def __init__(self, key: PrivateKey, issuer: str) -> None:
        self.key = key
        self.issuer = issuer
        self.alg = signing_alg(key.public_key())
        self.kid = key_id(key.public_key())

    def sign(self, claims: Mapping[str, Any], kid: str | None = None) -> str:
        headers = {"kid": self.kid if kid is None else kid}
        return jwt.encode(dict(claims), self.key, algorithm=self.alg, headers=headers)

    def generate(self, claims: Mapping[str, Any]) -> str:
        """``GenerateToken``: ``iss`` set to the issuer, header ``{"alg","kid"}`` only (no
        ``typ``), and the claims serialized by Go's ``json.Marshal`` rules with the keys
        sorted at every level, as go-jose's builder marshals the merged claim map."""
        payload = dict(claims)
        payload["iss"] = self.issuer
        data = go_marshal(payload, sort_keys=True)
        return jwt.PyJWS().encode(
            data.encode(), self.key, algorithm=self.alg, headers={"kid": self.kid, "typ": None}
        )

    def bound_claims(
        self,
        namespace: str,
        name: str,
        uid: str,
        audiences: Sequence[str],
        now: float,
        lifetime: float = 3600.0,
        pod: tuple[str, str] | None = None,
        secret: tuple[str, str] | None = None,
        node: tuple[str, str] | None = None,
        warn_after: float | None = None,
    ) -> dict[str, Any]:
        """The claims of a projected token (``claims.go`` ``Claims``)."""
        private: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": name, "uid": uid},
        }
        if pod is not None:
            private["pod"] = {"name": pod[0], "uid": pod[1]}
        if secret is not None:
            private["secret"] = {"name": secret[0], "uid": secret[1]}
        if node is not None:
            private["node"] = {"name": node[0], "uid": node[1]}
        if warn_after is not None:
            private["warnafter"] = int(warn_after)
        return {
            "aud": list(audiences),
            "exp": int(now + lifetime),
            "iat": int(now),
            "iss": self.issuer,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": private,
            "nbf": int(now),
            "sub": make_username(namespace, name),
        }

    def legacy_claims(
        self, namespace: str, name: str, uid: str, secret_name: str
    ) -> dict[str, Any]:
        """The claims of a Secret-based token (``legacy.go`` ``LegacyClaims``)."""
        return {
            "iss": LEGACY_ISSUER,
            "kubernetes.io/serviceaccount/namespace": namespace,
            "kubernetes.io/serviceaccount/secret.name": secret_name,
            "kubernetes.io/serviceaccount/service-account.name": name,
            "kubernetes.io/serviceaccount/service-account.uid": uid,
            "sub": make_username(namespace, name),
        }
