"""``authorization.k8s.io/v1``: SubjectAccessReview, LocalSubjectAccessReview,
SelfSubjectAccessReview and SelfSubjectRulesReview, answered by the server's authorizer chain.

References (``k8s.io/kubernetes``): ``pkg/registry/authorization/subjectaccessreview/rest.go``,
``localsubjectaccessreview/rest.go``, ``selfsubjectaccessreview/rest.go``,
``selfsubjectrulesreview/rest.go``, ``util/helpers.go`` (attributes from a spec: an empty
``version`` is authorized as ``*``) and ``pkg/apis/authorization/validation/validation.go``
(the messages; a bad value is shown as JSON, as current releases print it). Validation errors
are 422s whose kind is empty (the internal object's), so the message starts with the bare
group: ``.authorization.k8s.io "" is invalid: ...``.

The answer is the chain's decision (``allowed`` for Allow, ``denied`` for an explicit Deny),
its reason, and the authorizer's error as ``evaluationError``. Field and label selectors are
validated but not used to authorize: no authorizer here reads them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from twisted.internet.defer import Deferred

from apiserver.apimachinery import errors
from apiserver.apimachinery.fields import parse_field_selector
from apiserver.apimachinery.labels import SelectorParseError, parse_label_selector
from apiserver.auth.authz import AuthorizerError
from apiserver.auth.authz.rules import rules_of
from apiserver.auth.interface import ALLOW, DENY, Attributes, Authorizer, Decision, UserInfo

GROUP = "authorization.k8s.io"
Obj = dict[str, Any]


def _invalid(errs: list[errors.FieldError]) -> errors.StatusError:
    error = errors.invalid_error("", "", errs, group=GROUP)
    assert error.details is not None
    error.details.pop("kind", None)
    return error


def _selector_errors(attributes: Mapping[str, Any], name: str) -> list[errors.FieldError]:
    selector = attributes.get(name)
    if selector is None:
        return []
    path = f"spec.resourceAttributes.{name}"
    raw, requirements = selector.get("rawSelector"), selector.get("requirements")
    if raw and requirements:
        return [
            errors.invalid(
                f"{path}.rawSelector", raw, "may not specified at the same time as requirements"
            )
        ]
    if not raw and not requirements:
        return [
            errors.required(
                f"{path}.requirements",
                f"when {path} is specified, requirements or rawSelector is required",
            )
        ]
    return []


def _spec_errors(spec: Mapping[str, Any]) -> list[errors.FieldError]:
    """``ValidateSubjectAccessReviewSpec`` / ``ValidateSelfSubjectAccessReviewSpec``'s
    shared part: exactly one kind of attributes, then the selectors."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if resource is not None and non_resource is not None:
        shown = {"Path": non_resource.get("path", ""), "Verb": non_resource.get("verb", "")}
        return [
            errors.invalid(
                "spec.nonResourceAttributes",
                shown,
                "cannot be specified in combination with resourceAttributes",
            )
        ]
    if resource is None and non_resource is None:
        return [
            errors.invalid(
                "spec.resourceAttributes",
                "null",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )
        ]
    if resource is not None:
        return [
            *_selector_errors(resource, "fieldSelector"),
            *_selector_errors(resource, "labelSelector"),
        ]
    return []


def _meta_not_empty(meta: Mapping[str, Any]) -> bool:
    return any(key != "managedFields" and value for key, value in meta.items())


def validate_sar(obj: Obj) -> None:
    spec = obj.get("spec") or {}
    errs = _spec_errors(spec)
    if not spec.get("user") and not spec.get("groups"):
        errs.append(
            errors.invalid("spec.user", "", "at least one of user or group must be specified")
        )
    meta = obj.get("metadata") or {}
    if _meta_not_empty(meta):
        errs.append(errors.invalid("metadata", meta, "must be empty"))
    if errs:
        raise _invalid(errs)


def validate_ssar(obj: Obj) -> None:
    errs = _spec_errors(obj.get("spec") or {})
    meta = obj.get("metadata") or {}
    if _meta_not_empty(meta):
        errs.append(errors.invalid("metadata", meta, "must be empty"))
    if errs:
        raise _invalid(errs)


def validate_lsar(obj: Obj) -> None:
    spec = obj.get("spec") or {}
    errs = _spec_errors(spec)
    if not spec.get("user") and not spec.get("groups"):
        errs.append(
            errors.invalid("spec.user", "", "at least one of user or group must be specified")
        )
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    if _meta_not_empty({k: v for k, v in meta.items() if k != "namespace"}):
        errs.append(errors.invalid("metadata", meta, "must be empty except for namespace"))
    resource = spec.get("resourceAttributes")
    if resource is not None and (resource.get("namespace") or "") != namespace:
        errs.append(
            errors.invalid(
                "spec.resourceAttributes.namespace",
                resource.get("namespace") or "",
                "must match metadata.namespace",
            )
        )
    non_resource = spec.get("nonResourceAttributes")
    if non_resource is not None:
        shown = {"Path": non_resource.get("path", ""), "Verb": non_resource.get("verb", "")}
        errs.append(
            errors.invalid(
                "spec.nonResourceAttributes", shown, "disallowed on this kind of request"
            )
        )
    if errs:
        raise _invalid(errs)


def attributes_from(user: UserInfo, spec: Mapping[str, Any]) -> Attributes:
    """``ResourceAttributesFrom`` / ``NonResourceAttributesFrom`` (``util/helpers.go``)."""
    resource = spec.get("resourceAttributes")
    if resource is not None:
        return Attributes(
            user=user,
            verb=resource.get("verb") or "",
            resource_request=True,
            namespace=resource.get("namespace") or "",
            api_group=resource.get("group") or "",
            api_version=resource.get("version") or "*",
            resource=resource.get("resource") or "",
            subresource=resource.get("subresource") or "",
            name=resource.get("name") or "",
        )
    non_resource = spec.get("nonResourceAttributes") or {}
    return Attributes(
        user=user,
        verb=non_resource.get("verb") or "",
        resource_request=False,
        path=non_resource.get("path") or "",
    )


def user_from_spec(spec: Mapping[str, Any]) -> UserInfo:
    """``authorizationAttributesFrom``: exactly the spec's identity (no implicit groups)."""
    extra = spec.get("extra") or {}
    return UserInfo(
        name=spec.get("user") or "",
        uid=spec.get("uid") or "",
        groups=tuple(spec.get("groups") or ()),
        extra={key: tuple(values) for key, values in extra.items()},
    )


def _status(decision: str, reason: str, error: str) -> Obj:
    """``SubjectAccessReviewStatus``: ``allowed`` always, the rest ``omitempty``."""
    status: Obj = {"allowed": decision == ALLOW}
    if decision == DENY:
        status["denied"] = True
    if reason:
        status["reason"] = reason
    if error:
        status["evaluationError"] = error
    return status


_LABEL_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


def selector_problems(spec: Mapping[str, Any]) -> list[str]:
    """What ``util/helpers.go`` reports of the spec's selectors in ``evaluationError``: a
    ``rawSelector`` that does not parse is ignored, a requirement whose operator is unknown
    is dropped (the selector is then partially ignored)."""
    resource = spec.get("resourceAttributes") or {}
    problems: list[str] = []
    for name, parse in (
        ("fieldSelector", parse_field_selector),
        ("labelSelector", parse_label_selector),
    ):
        selector = resource.get(name)
        if not selector:
            continue
        path = f"spec.resourceAttributes.{name}"
        raw = selector.get("rawSelector") or ""
        if raw:
            try:
                parse(raw)
            except (SelectorParseError, errors.StatusError, ValueError):
                problems.append(f"{path} ignored due to parse error")
            continue
        requirements = selector.get("requirements") or ()
        if any(r.get("operator") not in _LABEL_OPERATORS for r in requirements):
            problems.append(f"{path} partially ignored due to parse error")
    return problems


async def authorize(
    authorizer: Authorizer | None, attributes: Attributes, problems: Sequence[str] = ()
) -> Obj:
    """The status the chain gives ``attributes`` (None: an AlwaysAllow chain); ``problems``
    (:func:`selector_problems`) are appended to ``evaluationError``, joined by ``; ``."""
    if authorizer is None:
        decision, reason, error = ALLOW, "", ""
    else:
        try:
            result = authorizer.authorize(attributes)
            answer: Decision = await result if isinstance(result, Deferred) else result
            decision, reason, error = answer.decision, answer.reason, ""
        except AuthorizerError as failure:
            decision, reason, error = failure.decision, failure.reason, failure.message
    return _status(decision, reason, "; ".join([e for e in (error, *problems) if e]))


def rules_review(authorizer: Authorizer | None, user: UserInfo, namespace: str) -> Obj:
    """``SelfSubjectRulesReview``'s answer: a new object, the namespace not echoed."""
    rules = rules_of(authorizer, user, namespace)
    status: Obj = {
        "resourceRules": [rule.to_json() for rule in rules.resource_rules],
        "nonResourceRules": [rule.to_json() for rule in rules.non_resource_rules],
        "incomplete": rules.incomplete,
    }
    if rules.error:
        status["evaluationError"] = rules.error
    return {"metadata": {}, "spec": {}, "status": status}


__all__ = [
    "GROUP",
    "attributes_from",
    "authorize",
    "rules_review",
    "user_from_spec",
    "validate_lsar",
    "validate_sar",
    "validate_ssar",
]
