"""The HTTP side of the review APIs (``AS/pkg/endpoints/handlers/create.go``): routing,
options, body, admission, answer. See the package docstring."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from apiserver.admission import CREATE, Admission, Attributes, run_mutating, run_validating
from apiserver.api.postonly import serve_post
from apiserver.api.reviews import authentication, authorization, wire
from apiserver.apimachinery import errors, negotiation, request_options
from apiserver.apimachinery.managedfields import update_managed_fields
from apiserver.apimachinery.meta_time import format_seconds
from apiserver.auth.authn.common import TokenAuthenticator
from apiserver.auth.interface import Authorizer
from apiserver.http.app import RequestInfo, header_value
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.protobuf import codec as pbcodec
from apiserver.registry import codec

Obj = dict[str, Any]

AUTHENTICATION_BASE = "/apis/authentication.k8s.io/v1/"
AUTHORIZATION_BASE = "/apis/authorization.k8s.io/v1/"


@attrs.frozen
class Review:
    """One review resource."""

    group: str
    resource: str
    kind: str
    namespaced: bool = False

    @property
    def singular(self) -> str:
        return self.resource[:-1]


TOKEN_REVIEW = Review(authentication.GROUP, "tokenreviews", "TokenReview")
SELF_SUBJECT_REVIEW = Review(authentication.GROUP, "selfsubjectreviews", "SelfSubjectReview")
SUBJECT_ACCESS_REVIEW = Review(authorization.GROUP, "subjectaccessreviews", "SubjectAccessReview")
LOCAL_SUBJECT_ACCESS_REVIEW = Review(
    authorization.GROUP, "localsubjectaccessreviews", "LocalSubjectAccessReview", namespaced=True
)
SELF_SUBJECT_ACCESS_REVIEW = Review(
    authorization.GROUP, "selfsubjectaccessreviews", "SelfSubjectAccessReview"
)
SELF_SUBJECT_RULES_REVIEW = Review(
    authorization.GROUP, "selfsubjectrulesreviews", "SelfSubjectRulesReview"
)
#: The reviews whose answer is the request object (with ``status``): SelfSubjectReview and
#: SelfSubjectRulesReview build new objects.
ECHOED = frozenset(
    {TOKEN_REVIEW, SUBJECT_ACCESS_REVIEW, LOCAL_SUBJECT_ACCESS_REVIEW, SELF_SUBJECT_ACCESS_REVIEW}
)
REVIEWS: dict[str, tuple[Review, ...]] = {
    authentication.GROUP: (SELF_SUBJECT_REVIEW, TOKEN_REVIEW),
    authorization.GROUP: (
        LOCAL_SUBJECT_ACCESS_REVIEW,
        SELF_SUBJECT_ACCESS_REVIEW,
        SELF_SUBJECT_RULES_REVIEW,
        SUBJECT_ACCESS_REVIEW,
    ),
}


def discovery_groups() -> list[tuple[str, str, tuple[Obj, ...], tuple[Obj, ...]]]:
    """The arguments of ``discovery.documents.ExtraGroup`` for both groups (the assembly
    builds them, so this package needs no import of the discovery package)."""
    out = []
    for group, reviews in REVIEWS.items():
        resources = tuple(
            {
                "name": r.resource,
                "singularName": r.singular,
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["create"],
            }
            for r in reviews
        )
        aggregated = tuple(
            {
                "resource": r.resource,
                "responseKind": {"group": "", "version": "", "kind": r.kind},
                "scope": "Namespaced" if r.namespaced else "Cluster",
                "singularResource": r.singular,
                "verbs": ["create"],
            }
            for r in reviews
        )
        out.append((group, "v1", resources, aggregated))
    return out


def _target(path: str) -> tuple[Review, str] | None:
    """(review, URL namespace) of a review path."""
    for base, group in (
        (AUTHENTICATION_BASE, authentication.GROUP),
        (AUTHORIZATION_BASE, authorization.GROUP),
    ):
        if not path.startswith(base):
            continue
        parts = path[len(base) :].split("/")
        namespace = ""
        if len(parts) == 3 and parts[0] == "namespaces" and parts[1]:
            namespace, parts = parts[1], parts[2:]
        if len(parts) != 1:
            return None
        for review in REVIEWS[group]:
            if review.resource == parts[0] and review.namespaced == bool(namespace):
                return review, namespace
    return None


class ReviewsAPI:
    """Serves both review groups; mounted on :data:`AUTHENTICATION_BASE` and
    :data:`AUTHORIZATION_BASE`.

    ``authorizer`` returns the server's current authorizer chain (None: AlwaysAllow), read
    per request because ``--authorization-config`` may replace it; ``tokens`` are the token
    authenticators TokenReview asks (None: no token authenticator configured).
    """

    def __init__(
        self,
        clock: IReactorTime,
        authorizer: Callable[[], Authorizer | None],
        tokens: TokenAuthenticator | None,
        api_audiences: Sequence[str] = (),
        admission: Admission | None = None,
    ) -> None:
        self.clock = clock
        self.authorizer = authorizer
        self.tokens = tokens
        self.api_audiences = tuple(api_audiences)
        self.admission = admission

    def handle(self, request: HTTPRequest, info: RequestInfo) -> Response | Deferred[Any]:
        return serve_post(request, info, _target(info.path), self.create)

    async def create(
        self, request: HTTPRequest, info: RequestInfo, review: Review, namespace: str
    ) -> Response:
        out = negotiation.negotiate_output(
            header_value(request, b"accept") or None,
            is_list=False,
            is_watch=False,
            check_target=False,
        )
        opts = request_options.parse_write_options(info.query)
        request_options.validate_create_options(opts)
        fmt = wire.body_format(header_value(request, b"content-type") or None)
        raw = request.content.read() if request.content is not None else b""
        obj = wire.decode(raw, fmt, review.group, review.kind)
        warnings = wire.check_strict(
            raw, fmt, review.group, review.kind, opts.effective_field_validation
        )
        meta = dict(obj.get("metadata") or {})
        for key in wire.WIPED:
            meta.pop(key, None)
        given = meta.get("namespace") or ""
        if review.namespaced:
            if given and given != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent "
                    "on the request"
                )
            if namespace:
                meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        obj["metadata"] = meta
        if review in ECHOED:
            # The create handler's field manager records the request object's fields before
            # REST Create; the reviews that answer with the request object keep them.
            manager = request_options.field_manager_or_user_agent(
                opts.field_manager or "", header_value(request, b"user-agent")
            )
            self._track(review, obj, manager)
        result = await self._create(info, review, namespace, obj, bool(opts.dry_run))
        body = wire.with_type_meta(review.group, review.kind, result)
        headers = (
            ("Content-Type", out.media_type),
            *(("Warning", f"299 - {errors.go_quote(w)}") for w in warnings),
        )
        if out.media_type == negotiation.PROTOBUF:
            return Response(201, headers, pbcodec.encode_object(body))
        media = "yaml" if out.media_type == negotiation.YAML else "json"
        pretty = out.pretty or negotiation.wants_pretty(
            info.query, header_value(request, b"user-agent")
        )
        return Response(201, headers, codec.encode(body, media, pretty))

    def _track(self, review: Review, obj: Obj, manager: str) -> None:
        """``FieldManager.UpdateNoErrors`` of a create (no managed fields when the object does
        not fit the schema, as there)."""
        message = pbcodec.message_for(f"{review.group}/v1", review.kind)
        assert message is not None
        api_version = f"{review.group}/v1"
        entries = update_managed_fields(
            None,
            wire.with_type_meta(review.group, review.kind, obj),
            manager,
            "Update",
            api_version,
            format_seconds(self.clock.seconds()),
            wire.schema_of(message.DESCRIPTOR),
        )
        if entries:
            obj["metadata"]["managedFields"] = entries

    async def _admit(
        self, info: RequestInfo, review: Review, namespace: str, obj: Obj, dry_run: bool
    ) -> None:
        """``createValidation`` (and the mutating step before it) on the request object."""
        admission = self.admission
        if admission is None:
            return
        attributes = Attributes(
            CREATE,
            review.group,
            "v1",
            review.resource,
            review.kind,
            namespace,
            "",
            obj,
            dry_run=dry_run,
            user=info.user,
        )
        await run_mutating(admission, attributes)
        await run_validating(admission, attributes)

    async def _create(
        self, info: RequestInfo, review: Review, namespace: str, obj: Obj, dry_run: bool
    ) -> Obj:
        user = info.user
        if review is SELF_SUBJECT_REVIEW:
            if user is None:
                raise errors.bad_request("no user present on request")
            await self._admit(info, review, namespace, obj, dry_run)
            return authentication.self_subject_review(user, format_seconds(self.clock.seconds()))
        if review is TOKEN_REVIEW:
            if not (obj.get("spec") or {}).get("token"):
                raise errors.bad_request("token is required for TokenReview in authentication")
            await self._admit(info, review, namespace, obj, dry_run)
            return await authentication.token_review(obj, self.tokens, self.api_audiences)
        if review is SELF_SUBJECT_RULES_REVIEW:
            if user is None:
                raise errors.bad_request("no user present on request")
            rules_namespace = (obj.get("spec") or {}).get("namespace") or ""
            if not rules_namespace:
                raise errors.bad_request("no namespace on request")
            await self._admit(info, review, namespace, obj, dry_run)
            return authorization.rules_review(self.authorizer(), user, rules_namespace)
        spec = obj.get("spec") or {}
        if review is SELF_SUBJECT_ACCESS_REVIEW:
            authorization.validate_ssar(obj)
            if user is None:
                raise errors.bad_request("no user present on request")
            subject = user
        elif review is SUBJECT_ACCESS_REVIEW:
            authorization.validate_sar(obj)
            subject = authorization.user_from_spec(spec)
        else:
            authorization.validate_lsar(obj)
            if not namespace:
                raise errors.bad_request("namespace is required on this type: ")
            resource = spec.get("resourceAttributes") or {}
            if (resource.get("namespace") or "") != namespace:
                raise errors.bad_request(
                    f"spec.resourceAttributes.namespace must match namespace: {namespace}"
                )
            subject = authorization.user_from_spec(spec)
        await self._admit(info, review, namespace, obj, dry_run)
        attributes = authorization.attributes_from(subject, spec)
        status = await authorization.authorize(
            self.authorizer(), attributes, authorization.selector_problems(spec)
        )
        return {"metadata": obj.get("metadata") or {}, "spec": spec, "status": status}


__all__ = [
    "AUTHENTICATION_BASE",
    "AUTHORIZATION_BASE",
    "REVIEWS",
    "Review",
    "ReviewsAPI",
    "discovery_groups",
]
