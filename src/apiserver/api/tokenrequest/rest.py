"""``POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token``: the TokenRequest subresource.

:class:`TokenREST` follows ``pkg/registry/core/serviceaccount/storage/token.go`` (1.35), step by
step and in the same order, because the order decides which error a client sees first:

1. ``metadata.name`` in the body, when given, must be the service account's name (422
   ``must match the service account name if specified``); a different ``metadata.namespace``
   was already refused by the generic create handler (400, see :class:`TokenRequestAPI`).
2. The ServiceAccount must exist: 404 ``serviceaccounts "<name>" not found``.
3. ``metadata.uid``, when given, must be the ServiceAccount's UID: 409 (feature
   TokenRequestServiceAccountUIDValidation, beta and on in 1.35; when turned off, only a
   warning).
4. Audiences default to the API audiences (``--api-audiences``, else the issuers); name,
   namespace and uid are filled in from the ServiceAccount; ``creationTimestamp`` is now.
5. ``ValidateTokenRequest`` (422, 600 s to 2^32 s).
6. ``spec.boundObjectRef``: a core ``Pod`` (whose ``spec.serviceAccountName`` must be this
   account, 400 otherwise; its node, when scheduled, is named in the token even if the Node
   object is missing), ``Secret`` or ``Node``; any other kind is 400 ``cannot bind token to
   object of type <group>/<version>, Kind=<kind>``; a missing object is the store's 404
   (``pods "p" not found``); a ``uid`` that differs from the object's is 409.
7. The expiration rules of :class:`ExpirationPolicy` (``--service-account-max-token-expiration``,
   ``--service-account-extend-token-expiration``).
8. The token is signed (:meth:`~apiserver.auth.authn.serviceaccount.TokenSigner.generate`);
   ``status.expirationTimestamp`` is now plus ``spec.expirationSeconds`` -- the *requested*
   lifetime, also when the token itself was extended to a year.

``dryRun``: the reference's TokenREST ignores it (nothing is stored, the token is minted
anyway), so a valid ``dryRun=All`` gets a real token here too; invalid values get the
``CreateOptions`` 422 like every create. The reference records the token's ``jti`` as the
audit annotation ``authentication.kubernetes.io/issued-credential-id``; there is no audit
backend yet, so it is logged at debug level.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from apiserver.admission import CREATE, Admission, Attributes, run_mutating, run_validating
from apiserver.api.postonly import serve_post
from apiserver.api.tokenrequest import wire
from apiserver.apimachinery import errors, negotiation, request_options
from apiserver.apimachinery.meta_time import format_seconds
from apiserver.apimachinery.validation import validate_path_segment_name
from apiserver.auth.authn.serviceaccount import TokenSigner, make_username
from apiserver.http.app import RequestInfo, header_value
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.options.validate import (
    EXPIRATION_EXTENSION_SECONDS,
    WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS,
)
from apiserver.protobuf import codec as pbcodec
from apiserver.registry import codec
from apiserver.registry.storagecodec import StorageCodecError, decode_any
from apiserver.storage.interface import KeyNotFoundError, StorageError

log = Logger()

PREFIX = "/api/v1/namespaces/"
UID_VALIDATION_GATE = "TokenRequestServiceAccountUIDValidation"
ISSUED_CREDENTIAL_ID = "authentication.kubernetes.io/issued-credential-id"
_GR = errors.GroupResource(wire.GROUP, wire.KIND)


@attrs.frozen
class ExpirationPolicy:
    """How long a token lives (``token.go`` after validation).

    ``max_seconds`` (``--service-account-max-token-expiration``, 0 = no limit) first shortens
    a longer request, with the warning ``requested expiration of <n> seconds shortened to <m>
    seconds``. Then, with ``extend`` (``--service-account-extend-token-expiration``), a
    *pod-bound* request for exactly 3607 s whose audiences are all API audiences gets a token
    valid for ``max_extended_seconds`` (a year) carrying ``kubernetes.io.warnafter`` at the
    requested 3607 s. The cap applies first, so a maximum below 3607 s means no extension.
    """

    max_seconds: int = 0
    extend: bool = True
    max_extended_seconds: int = EXPIRATION_EXTENSION_SECONDS

    def apply(
        self, requested: int, pod_bound: bool, api_audiences_only: bool
    ) -> tuple[int, int, int, list[str]]:
        """``(spec seconds, token seconds, warnafter seconds or 0, warnings)``."""
        warnings: list[str] = []
        seconds = requested
        if self.max_seconds > 0 and seconds > self.max_seconds:
            warnings.append(
                f"requested expiration of {seconds} seconds shortened to {self.max_seconds} seconds"
            )
            seconds = self.max_seconds
        if (
            self.extend
            and pod_bound
            and seconds == WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS
            and api_audiences_only
        ):
            return seconds, self.max_extended_seconds, seconds, warnings
        return seconds, seconds, 0, warnings


def _group_version_kind(api_version: str, kind: str) -> tuple[str, str, str]:
    """``schema.FromAPIVersionAndKind``: an unparsable apiVersion leaves only the kind."""
    parts = api_version.split("/")
    if not api_version or api_version == "/":
        return "", "", kind
    if len(parts) == 1:
        return "", api_version, kind
    if len(parts) == 2:
        return parts[0], parts[1], kind
    return "", "", kind


def _ref(obj: dict[str, Any]) -> dict[str, str]:
    """``ref{Name, UID}`` of a stored object, with ``omitempty``."""
    meta = obj.get("metadata") or {}
    return {k: str(meta[k]) for k in ("name", "uid") if meta.get(k)}


class TokenREST:
    """Mints tokens for service accounts found in the store (see the module docstring)."""

    def __init__(
        self,
        signer: TokenSigner,
        store: Any,
        prefix: str,
        clock: IReactorTime,
        audiences: Sequence[str],
        policy: ExpirationPolicy,
        *,
        uid_validation: bool = True,
        new_jti: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        self.signer = signer
        self.store = store
        self.prefix = prefix.rstrip("/")
        self.clock = clock
        self.audiences = list(audiences)
        self.policy = policy
        self.uid_validation = uid_validation
        self.new_jti = new_jti

    async def _get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        """A stored object, or the registry's error (``NamespaceKeyFunc``, then NotFound)."""
        if not name:
            raise errors.bad_request("Name parameter required.")
        problems = validate_path_segment_name(name)
        if problems:
            raise errors.bad_request(
                f"Name parameter invalid: {errors.go_quote(name)}: {';'.join(problems)}"
            )
        path = f"{namespace}/{name}" if namespace else name
        try:
            kv = await self.store.get(f"{self.prefix}/{resource}/{path}".encode())
        except KeyNotFoundError:
            shown = "nodes" if resource == "minions" else resource
            raise errors.not_found(errors.GroupResource("", shown), name) from None
        except StorageError as error:
            raise errors.internal_error(str(error)) from None
        try:
            # Any stored format (--storage-media-type): JSON, YAML or the protobuf envelope.
            obj: Any = decode_any(kv.value)
        except (StorageCodecError, ValueError):
            obj = None
        if not isinstance(obj, dict):
            raise errors.internal_error(f"cannot decode {resource} {errors.go_quote(name)}")
        return obj

    async def create(
        self, namespace: str, name: str, request: dict[str, Any]
    ) -> tuple[dict[str, Any], list[str]]:
        """The response object and the warnings, or a StatusError."""
        meta = dict(request.get("metadata") or {})
        spec = request["spec"]
        warnings: list[str] = []
        if meta.get("name") and meta["name"] != name:
            raise errors.invalid_error(
                wire.KIND,
                name,
                [
                    errors.invalid(
                        "metadata.name",
                        meta["name"],
                        "must match the service account name if specified",
                    )
                ],
                group=wire.GROUP,
            )
        account = await self._get("serviceaccounts", namespace, name)
        sa_meta = account.get("metadata") or {}
        sa_uid = str(sa_meta.get("uid") or "")
        if meta.get("uid") and meta["uid"] != sa_uid:
            text = (
                f"the UID in the token request ({meta['uid']}) does not match the UID of the "
                f"service account ({sa_uid})"
            )
            if self.uid_validation:
                raise errors.conflict(_GR, name, text)
            warnings.append(
                f"{text} but {UID_VALIDATION_GATE} is not enabled. In the future, this will "
                "return a conflict error"
            )
        audiences = [a or "" for a in spec.get("audiences") or ()] or list(self.audiences)
        meta["name"] = meta.get("name") or name
        meta["namespace"] = meta.get("namespace") or namespace
        meta["uid"] = meta.get("uid") or sa_uid
        now = self.clock.seconds()
        meta["creationTimestamp"] = format_seconds(now)
        wire.validate(request)
        bound = spec.get("boundObjectRef")
        pod, secret, node = await self._bound_object(namespace, name, bound)
        seconds, lifetime, warn_after, capped = self.policy.apply(
            int(spec["expirationSeconds"]),
            pod is not None,
            set(audiences) <= set(self.audiences),
        )
        warnings.extend(capped)
        jti = self.new_jti()
        claims = self._claims(
            namespace, name, sa_uid, audiences, now, lifetime, warn_after, jti, pod, secret, node
        )
        token = self.signer.generate(claims)
        log.debug("{key}: JTI={jti}", key=ISSUED_CREDENTIAL_ID, jti=jti)
        out = wire.encode(
            meta, audiences, seconds, bound, token, format_seconds(int(now) + seconds)
        )
        return out, warnings

    async def _bound_object(
        self, namespace: str, name: str, ref: dict[str, Any] | None
    ) -> tuple[dict[str, str] | None, dict[str, str] | None, dict[str, str] | None]:
        """(pod, secret, node) claims of ``spec.boundObjectRef``."""
        if ref is None:
            return None, None, None
        group, version, kind = _group_version_kind(
            str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
        )
        ref_name = str(ref.get("name") or "")
        pod = secret = node = None
        if group == "" and kind == "Pod":
            obj = await self._get("pods", namespace, ref_name)
            pod_spec = obj.get("spec") or {}
            account = pod_spec.get("serviceAccountName") or pod_spec.get("serviceAccount") or ""
            if account != name:
                raise errors.bad_request(
                    f"cannot bind token for serviceaccount {errors.go_quote(name)} to pod "
                    "running with different serviceaccount name."
                )
            pod = _ref(obj)
            node_name = str(pod_spec.get("nodeName") or "")
            if node_name:
                try:
                    node = _ref(await self._get("minions", "", node_name))
                except errors.StatusError as error:
                    if error.code != 404:
                        raise
                    node = {"name": node_name}
        elif group == "" and kind == "Node":
            obj = await self._get("minions", "", ref_name)
            node = _ref(obj)
        elif group == "" and kind == "Secret":
            obj = await self._get("secrets", namespace, ref_name)
            secret = _ref(obj)
        else:
            raise errors.bad_request(
                f"cannot bind token to object of type {group}/{version}, Kind={kind}"
            )
        uid = str((obj.get("metadata") or {}).get("uid") or "")
        if ref.get("uid") and ref["uid"] != uid:
            raise errors.conflict(
                errors.GroupResource(group, kind),
                ref_name,
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID "
                "in record. The object might have been deleted and then recreated",
            )
        return pod, secret, node

    @staticmethod
    def _claims(
        namespace: str,
        name: str,
        uid: str,
        audiences: Iterable[str],
        now: float,
        lifetime: int,
        warn_after: int,
        jti: str,
        pod: dict[str, str] | None,
        secret: dict[str, str] | None,
        node: dict[str, str] | None,
    ) -> dict[str, Any]:
        """``serviceaccount.Claims``: public claims plus ``kubernetes.io``."""
        issued = int(now)
        private: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {k: v for k, v in (("name", name), ("uid", uid)) if v},
        }
        for key, ref in (("pod", pod), ("secret", secret), ("node", node)):
            if ref is not None:
                private[key] = ref
        if warn_after:
            private["warnafter"] = issued + warn_after
        return {
            "aud": list(audiences),
            "exp": issued + lifetime,
            "iat": issued,
            "jti": jti,
            "kubernetes.io": private,
            "nbf": issued,
            "sub": make_username(namespace, name),
        }


def parse_path(path: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of ``/api/v1/namespaces/{ns}/serviceaccounts/{name}/token``."""
    if not path.startswith(PREFIX):
        return None
    parts = path[len(PREFIX) :].split("/")
    if len(parts) != 4 or parts[1] != "serviceaccounts" or parts[3] != "token":
        return None
    if not parts[0] or not parts[2]:
        return None
    return parts[0], parts[2]


class TokenRequestAPI:
    """The HTTP side (``handlers/create.go``): routing, options, body, response.

    Mounted on ``/api/v1/namespaces/``; every other path below it is the router's 404 Status,
    any method but POST on the token path the 405 the server gives elsewhere. Authorization
    (verb ``create``, resource ``serviceaccounts``, subresource ``token``, in the namespace)
    happened before, in the filter chain.
    """

    def __init__(self, rest: TokenREST, admission: Admission | None = None) -> None:
        self.rest = rest
        #: Admission before the token is issued (apiserver.admission); None: none at all.
        self.admission = admission

    def handle(self, request: HTTPRequest, info: RequestInfo) -> Response | Deferred[Any]:
        return serve_post(request, info, parse_path(info.path), self.create)

    async def create(
        self, request: HTTPRequest, info: RequestInfo, namespace: str, name: str
    ) -> Response:
        out = negotiation.negotiate_output(
            header_value(request, b"accept") or None,
            is_list=False,
            is_watch=False,
            check_target=False,
        )
        fmt = wire.body_format(header_value(request, b"content-type") or None)
        raw = request.content.read() if request.content is not None else b""
        opts = request_options.parse_write_options(info.query)
        request_options.validate_create_options(opts)
        decoded = wire.decode_request(raw, fmt, opts.effective_field_validation)
        obj = decoded.obj
        given = (obj.get("metadata") or {}).get("namespace") or ""
        if given and given != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        admission = self.admission
        if admission is not None:
            # CREATE on serviceaccounts/token: mutating after decoding, validating before
            # the token is issued (TokenREST.Create calls createValidation first).
            attributes = Attributes(
                CREATE,
                "",
                "v1",
                "serviceaccounts",
                wire.KIND,
                namespace,
                name,
                obj,
                subresource="token",
                dry_run=bool(opts.dry_run),
                user=info.user,
            )
            await run_mutating(admission, attributes)
            await run_validating(admission, attributes)
        result, warnings = await self.rest.create(namespace, name, obj)
        media = "yaml" if out.media_type == negotiation.YAML else "json"
        pretty = out.pretty or negotiation.wants_pretty(
            info.query, header_value(request, b"user-agent")
        )
        headers = [("Content-Type", out.media_type)]
        for warning in (*decoded.warnings, *warnings):
            headers.append(("Warning", f"299 - {errors.go_quote(warning)}"))
        if out.media_type == negotiation.PROTOBUF:
            # The built-in kinds' third serializer: the envelope around the message.
            return Response(201, tuple(headers), pbcodec.encode_object(result))
        return Response(201, tuple(headers), codec.encode(result, media, pretty))
