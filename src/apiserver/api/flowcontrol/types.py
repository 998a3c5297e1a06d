"""flowcontrol.apiserver.k8s.io/v1 FlowSchema and PriorityLevelConfiguration: schema, defaults
and validation.

- Schema: the structural shape of ``k8s.io/api/flowcontrol/v1/types.go`` (strict decoding,
  strategic merge patch, managed fields): every list is ``+listType=atomic`` except the
  status ``conditions`` (``+listType=map``, ``+listMapKey=type``, patch strategy merge).
- Defaults: ``k8s.io/kubernetes pkg/apis/flowcontrol/v1/defaults.go`` (matchingPrecedence
  1000; nominalConcurrencyShares 30 when absent, lendablePercent 0; queuing 64 queues, hand
  8, queue length 50).
- Validation: ``pkg/apis/flowcontrol/validation/validation.go`` (kube 1.29+, where v1 lets a
  Limited level have 0 shares, ``lendablePercent`` is 0 to 100 and ``borrowingLimitPercent``
  non-negative), with its field paths and texts; the mandatory objects' specs are fixed
  (the exempt level may change only its ``exempt`` shares and lendable percent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from apiserver.api.events.schema import OBJECT_META
from apiserver.apimachinery import errors
from apiserver.apimachinery.errors import FieldError
from apiserver.apimachinery.schema import BOOLEAN, INTEGER, STRING, TIME, Field, List, Struct
from apiserver.apimachinery.validation import (
    name_is_dns_label,
    name_is_dns_subdomain,
    validate_object_meta,
)
from apiserver.flowcontrol.bootstrap import FLOW_SCHEMAS, MANDATORY, PRIORITY_LEVELS

_STRINGS = List(STRING, "atomic")


def _conditions(name: str) -> Field:
    condition = Struct(
        name,
        (
            Field("type", STRING),
            Field("status", STRING),
            Field("lastTransitionTime", TIME),
            Field("reason", STRING),
            Field("message", STRING),
        ),
    )
    return Field(
        "conditions",
        List(condition, "map", ("type",), patch_strategy="merge", patch_merge_key="type"),
    )


_SUBJECT = Struct(
    "Subject",
    (
        Field("kind", STRING, omitempty=False),
        Field(
            "user", Struct("UserSubject", (Field("name", STRING, omitempty=False),)), pointer=True
        ),
        Field(
            "group", Struct("GroupSubject", (Field("name", STRING, omitempty=False),)), pointer=True
        ),
        Field(
            "serviceAccount",
            Struct(
                "ServiceAccountSubject",
                (
                    Field("namespace", STRING, omitempty=False),
                    Field("name", STRING, omitempty=False),
                ),
            ),
            pointer=True,
        ),
    ),
)
_RESOURCE_RULE = Struct(
    "ResourcePolicyRule",
    (
        Field("verbs", _STRINGS, omitempty=False),
        Field("apiGroups", _STRINGS, omitempty=False),
        Field("resources", _STRINGS, omitempty=False),
        Field("clusterScope", BOOLEAN),
        Field("namespaces", _STRINGS),
    ),
)
_NON_RESOURCE_RULE = Struct(
    "NonResourcePolicyRule",
    (
        Field("verbs", _STRINGS, omitempty=False),
        Field("nonResourceURLs", _STRINGS, omitempty=False),
    ),
)
_RULES = Struct(
    "PolicyRulesWithSubjects",
    (
        Field("subjects", List(_SUBJECT, "atomic"), omitempty=False),
        Field("resourceRules", List(_RESOURCE_RULE, "atomic")),
        Field("nonResourceRules", List(_NON_RESOURCE_RULE, "atomic")),
    ),
)
FLOW_SCHEMA = Struct(
    "FlowSchema",
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field("metadata", OBJECT_META),
        Field(
            "spec",
            Struct(
                "FlowSchemaSpec",
                (
                    Field(
                        "priorityLevelConfiguration",
                        Struct(
                            "PriorityLevelConfigurationReference",
                            (Field("name", STRING, omitempty=False),),
                        ),
                        omitempty=False,
                    ),
                    Field("matchingPrecedence", INTEGER),
                    Field(
                        "distinguisherMethod",
                        Struct(
                            "FlowDistinguisherMethod", (Field("type", STRING, omitempty=False),)
                        ),
                        pointer=True,
                    ),
                    Field("rules", List(_RULES, "atomic")),
                ),
            ),
        ),
        Field("status", Struct("FlowSchemaStatus", (_conditions("FlowSchemaCondition"),))),
    ),
)
"""``flowcontrol/v1`` FlowSchema."""

_QUEUING = Struct(
    "QueuingConfiguration",
    (Field("queues", INTEGER), Field("handSize", INTEGER), Field("queueLengthLimit", INTEGER)),
)
PRIORITY_LEVEL = Struct(
    "PriorityLevelConfiguration",
    (
        Field("kind", STRING),
        Field("apiVersion", STRING),
        Field("metadata", OBJECT_META),
        Field(
            "spec",
            Struct(
                "PriorityLevelConfigurationSpec",
                (
                    Field("type", STRING, omitempty=False),
                    Field(
                        "limited",
                        Struct(
                            "LimitedPriorityLevelConfiguration",
                            (
                                Field("nominalConcurrencyShares", INTEGER, pointer=True),
                                Field(
                                    "limitResponse",
                                    Struct(
                                        "LimitResponse",
                                        (
                                            Field("type", STRING, omitempty=False),
                                            Field("queuing", _QUEUING, pointer=True),
                                        ),
                                    ),
                                ),
                                Field("lendablePercent", INTEGER, pointer=True),
                                Field("borrowingLimitPercent", INTEGER, pointer=True),
                            ),
                        ),
                        pointer=True,
                    ),
                    Field(
                        "exempt",
                        Struct(
                            "ExemptPriorityLevelConfiguration",
                            (
                                Field("nominalConcurrencyShares", INTEGER, pointer=True),
                                Field("lendablePercent", INTEGER, pointer=True),
                            ),
                        ),
                        pointer=True,
                    ),
                ),
            ),
        ),
        Field(
            "status",
            Struct(
                "PriorityLevelConfigurationStatus",
                (_conditions("PriorityLevelConfigurationCondition"),),
            ),
        ),
    ),
)
"""``flowcontrol/v1`` PriorityLevelConfiguration."""


# --- defaults (pkg/apis/flowcontrol/v1/defaults.go) -------------------------------------------


def default_flow_schema(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and spec.get("matchingPrecedence") in (None, 0):
        spec["matchingPrecedence"] = 1000


def default_priority_level(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    limited = spec.get("limited")
    if isinstance(limited, dict):
        if limited.get("nominalConcurrencyShares") is None:
            limited["nominalConcurrencyShares"] = 30
        if limited.get("lendablePercent") is None:
            limited["lendablePercent"] = 0
        response = limited.get("limitResponse")
        queuing = response.get("queuing") if isinstance(response, dict) else None
        if isinstance(queuing, dict):
            for key, value in (("queues", 64), ("handSize", 8), ("queueLengthLimit", 50)):
                if not queuing.get(key):
                    queuing[key] = value
    exempt = spec.get("exempt")
    if isinstance(exempt, dict):
        if exempt.get("nominalConcurrencyShares") is None:
            exempt["nominalConcurrencyShares"] = 0
        if exempt.get("lendablePercent") is None:
            exempt["lendablePercent"] = 0


# --- validation -----------------------------------------------------------------------------

SUPPORTED_VERBS = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "proxy",
    "update",
    "watch",
)
#: flowcontrol.FlowSchemaMaxMatchingPrecedence.
MAX_MATCHING_PRECEDENCE = 10000
MAX_QUEUES = 10 * 1000 * 1000
#: k8s.io/apiserver/pkg/util/shufflesharding: MaxHashBits.
MAX_HASH_BITS = 60
NS_ERR_INTRO = "each member of this list must be '*' or a DNS-1123 label; "

_MANDATORY_FLOW_SCHEMAS = {name: spec for name, spec in FLOW_SCHEMAS if name in MANDATORY}
_MANDATORY_LEVELS = {name: spec for name, spec in PRIORITY_LEVELS if name in MANDATORY}


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _verbs(rule: Mapping[str, Any], path: str) -> list[FieldError]:
    verbs = _list(rule.get("verbs"))
    if not verbs:
        return [errors.required(f"{path}.verbs", "verbs must contain at least one value")]
    if "*" in verbs:
        if len(verbs) > 1:
            return [
                errors.invalid(
                    f"{path}.verbs", verbs, "if '*' is present, must not specify other verbs"
                )
            ]
        return []
    if not set(verbs) <= set(SUPPORTED_VERBS):
        return [errors.not_supported(f"{path}.verbs", verbs, SUPPORTED_VERBS)]
    return []


def non_resource_url_error(url: str, path: str) -> FieldError | None:
    """``ValidateNonResourceURLPath``."""
    if not url:
        return errors.invalid(path, url, "must not be empty")
    if url == "/":
        return None
    if not url.startswith("/"):
        return errors.invalid(path, url, "must start with slash")
    if " " in url:
        return errors.invalid(path, url, "must not contain white-space")
    if "//" in url:
        return errors.invalid(path, url, "must not contain double slash")
    stars = url.count("*")
    if stars > 1 or (stars == 1 and url[-2:] != "/*"):
        return errors.invalid(path, url, "wildcard can only do suffix matching")
    return None


def _subject(subject: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    kind = subject.get("kind")
    others = {"User": "user", "Group": "group", "ServiceAccount": "serviceAccount"}
    if kind not in others:
        return [errors.not_supported(f"{path}.kind", kind or "", sorted(others))]
    own = others[kind]
    value = subject.get(own)
    if not isinstance(value, dict):
        errs.append(
            errors.required(f"{path}.{own}", f"{own} is required when subject kind is '{kind}'")
        )
    elif kind == "ServiceAccount":
        name = value.get("name") or ""
        if not name:
            errs.append(errors.required(f"{path}.{own}.name"))
        elif name != "*":
            errs.extend(
                errors.invalid(f"{path}.{own}.name", name, m)
                for m in name_is_dns_subdomain(name, False)
            )
        namespace = value.get("namespace") or ""
        if namespace:
            errs.extend(
                errors.invalid(f"{path}.{own}.namespace", namespace, m)
                for m in name_is_dns_label(namespace, False)
            )
        else:
            errs.append(
                errors.required(
                    f"{path}.{own}.namespace", "must specify namespace for service account"
                )
            )
    elif not value.get("name"):
        errs.append(errors.required(f"{path}.{own}.name"))
    for other_kind in ("ServiceAccount", "User", "Group"):
        field_name = others[other_kind]
        if other_kind != kind and subject.get(field_name) is not None:
            errs.append(
                errors.forbidden(
                    f"{path}.{field_name}",
                    f"{field_name} is forbidden when subject kind is not '{other_kind}'",
                )
            )
    return errs


def _resource_rule(rule: Mapping[str, Any], path: str) -> list[FieldError]:
    errs = _verbs(rule, path)
    groups = _list(rule.get("apiGroups"))
    if not groups:
        errs.append(
            errors.required(
                f"{path}.apiGroups", "resource rules must supply at least one api group"
            )
        )
    elif len(groups) > 1 and "*" in groups:
        errs.append(
            errors.invalid(
                f"{path}.apiGroups", groups, "if '*' is present, must not specify other api groups"
            )
        )
    resources = _list(rule.get("resources"))
    if not resources:
        errs.append(
            errors.required(f"{path}.resources", "resource rules must supply at least one resource")
        )
    elif len(resources) > 1 and "*" in resources:
        errs.append(
            errors.invalid(
                f"{path}.resources",
                resources,
                "if '*' is present, must not specify other resources",
            )
        )
    namespaces = _list(rule.get("namespaces"))
    if not namespaces and not rule.get("clusterScope"):
        errs.append(
            errors.required(
                f"{path}.namespaces",
                "resource rules that are not cluster scoped must supply at least one namespace",
            )
        )
    elif "*" in namespaces:
        if len(namespaces) > 1:
            errs.append(
                errors.invalid(
                    f"{path}.namespaces",
                    namespaces,
                    "if '*' is present, must not specify other namespaces",
                )
            )
    else:
        for index, namespace in enumerate(namespaces):
            errs.extend(
                errors.invalid(f"{path}.namespaces[{index}]", namespace, NS_ERR_INTRO + m)
                for m in name_is_dns_label(str(namespace), False)
            )
    return errs


def _non_resource_rule(rule: Mapping[str, Any], path: str) -> list[FieldError]:
    errs = _verbs(rule, path)
    urls = _list(rule.get("nonResourceURLs"))
    if not urls:
        errs.append(
            errors.required(
                f"{path}.nonResourceURLs", "nonResourceURLs must contain at least one value"
            )
        )
    elif "*" in urls:
        if len(urls) > 1:
            errs.append(
                errors.invalid(
                    f"{path}.nonResourceURLs",
                    urls,
                    "if '*' is present, must not specify other non-resource URLs",
                )
            )
    else:
        for index, url in enumerate(urls):
            error = non_resource_url_error(str(url), f"{path}.nonResourceURLs[{index}]")
            if error is not None:
                errs.append(error)
    return errs


def _status_conditions(status: Any) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    conditions = _list(status.get("conditions")) if isinstance(status, dict) else []
    for index, condition in enumerate(conditions):
        kind = condition.get("type") if isinstance(condition, dict) else ""
        path = f"status.conditions[{index}]"
        if kind in seen:
            errs.append(errors.duplicate(f"{path}.type", kind))
        seen.add(kind or "")
        if not kind:
            errs.append(errors.required(f"{path}.type", "must not be empty"))
    return errs


def validate_flow_schema_spec(name: str, spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateFlowSchemaSpec`` and the mandatory objects' fixed specs."""
    errs: list[FieldError] = []
    precedence = spec.get("matchingPrecedence") or 0
    path = "spec.matchingPrecedence"
    if precedence <= 0:
        errs.append(errors.invalid(path, precedence, "must be a positive value"))
    if precedence > MAX_MATCHING_PRECEDENCE:
        errs.append(
            errors.invalid(path, precedence, f"must not be greater than {MAX_MATCHING_PRECEDENCE}")
        )
    if precedence == 1 and name != "exempt":
        errs.append(
            errors.invalid(
                path, precedence, "only the schema named 'exempt' may have matchingPrecedence 1"
            )
        )
    method = spec.get("distinguisherMethod")
    if isinstance(method, dict) and method.get("type") not in ("ByNamespace", "ByUser"):
        errs.append(
            # Go prints the internal struct, which has no json tags: {"Type":"..."}.
            errors.not_supported(
                "spec.distinguisherMethod.type",
                {"Type": method.get("type")},
                ["ByNamespace", "ByUser"],
            )
        )
    reference = spec.get("priorityLevelConfiguration")
    level = reference.get("name") if isinstance(reference, dict) else ""
    if level:
        errs.extend(
            errors.invalid("spec.priorityLevelConfiguration.name", level, m)
            for m in name_is_dns_subdomain(level, False)
        )
    else:
        errs.append(
            errors.required(
                "spec.priorityLevelConfiguration.name", "must reference a priority level"
            )
        )
    for index, rules in enumerate(_list(spec.get("rules"))):
        path = f"spec.rules[{index}]"
        subjects = _list(rules.get("subjects"))
        if not subjects:
            errs.append(
                errors.required(f"{path}.subjects", "subjects must contain at least one value")
            )
        for i, subject in enumerate(subjects):
            errs.extend(_subject(subject, f"{path}.subjects[{i}]"))
        resource_rules = _list(rules.get("resourceRules"))
        non_resource_rules = _list(rules.get("nonResourceRules"))
        if not resource_rules and not non_resource_rules:
            errs.append(
                errors.required(
                    path, "at least one of resourceRules and nonResourceRules has to be non-empty"
                )
            )
        for i, rule in enumerate(resource_rules):
            errs.extend(_resource_rule(rule, f"{path}.resourceRules[{i}]"))
        for i, rule in enumerate(non_resource_rules):
            errs.extend(_non_resource_rule(rule, f"{path}.nonResourceRules[{i}]"))
    fixed = _MANDATORY_FLOW_SCHEMAS.get(name)
    if fixed is not None and dict(spec) != fixed:
        errs.append(
            errors.FieldError(
                errors.INVALID, "spec", errors.OMIT, f"spec of '{name}' must equal the fixed value"
            )
        )
    return errs


def validate_flow_schema(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidateFlowSchema`` (create and update alike)."""
    meta = obj.get("metadata") or {}
    errs = validate_object_meta(meta, namespaced=False, name_fn=name_is_dns_subdomain)
    spec = obj.get("spec")
    errs.extend(
        validate_flow_schema_spec(meta.get("name") or "", spec if isinstance(spec, dict) else {})
    )
    errs.extend(_status_conditions(obj.get("status")))
    return errs


def required_entropy_bits(deck_size: int, hand_size: int) -> int:
    """shufflesharding.RequiredEntropyBits."""
    return math.ceil(math.log2(deck_size) * hand_size)


def _queuing(queuing: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    length = queuing.get("queueLengthLimit") or 0
    if length <= 0:
        errs.append(errors.invalid(f"{path}.queueLengthLimit", length, "must be positive"))
    queues = queuing.get("queues") or 0
    if queues <= 0:
        errs.append(errors.invalid(f"{path}.queues", queues, "must be positive"))
    elif queues > MAX_QUEUES:
        errs.append(
            errors.invalid(f"{path}.queues", queues, f"must not be greater than {MAX_QUEUES}")
        )
    hand = queuing.get("handSize") or 0
    if hand <= 0:
        errs.append(errors.invalid(f"{path}.handSize", hand, "must be positive"))
    elif hand > queues:
        errs.append(
            errors.invalid(
                f"{path}.handSize", hand, f"should not be greater than queues ({queues})"
            )
        )
    elif required_entropy_bits(queues, hand) > MAX_HASH_BITS:
        errs.append(
            errors.invalid(
                f"{path}.handSize",
                hand,
                f"required entropy bits of deckSize {queues} and handSize {hand} should not be "
                f"greater than {MAX_HASH_BITS}",
            )
        )
    return errs


def _percent(value: Any, path: str) -> list[FieldError]:
    if value is not None and not 0 <= value <= 100:
        return [errors.invalid(path, value, "must be between 0 and 100, inclusive")]
    return []


def validate_priority_level_spec(name: str, spec: Mapping[str, Any]) -> list[FieldError]:
    """``ValidatePriorityLevelConfigurationSpec`` and the mandatory objects' fixed specs."""
    errs: list[FieldError] = []
    kind = spec.get("type") or ""
    if (name == "exempt") != (kind == "Exempt"):
        errs.append(
            errors.invalid(
                "spec.type", kind, "type must be 'Exempt' if and only if name is 'exempt'"
            )
        )
    limited = spec.get("limited")
    exempt = spec.get("exempt")
    if kind == "Exempt":
        if limited is not None:
            errs.append(errors.forbidden("spec.limited", "must be nil if the type is not Limited"))
        if isinstance(exempt, dict):
            shares = exempt.get("nominalConcurrencyShares")
            if shares is not None and shares < 0:
                errs.append(
                    errors.invalid(
                        "spec.exempt.nominalConcurrencyShares",
                        shares,
                        "must be a non-negative integer",
                    )
                )
            errs.extend(_percent(exempt.get("lendablePercent"), "spec.exempt.lendablePercent"))
    elif kind == "Limited":
        if exempt is not None:
            errs.append(errors.forbidden("spec.exempt", "must be nil if the type is Limited"))
        if not isinstance(limited, dict):
            errs.append(errors.required("spec.limited", "must not be empty when type is Limited"))
        else:
            shares = limited.get("nominalConcurrencyShares") or 0
            if shares < 0:
                errs.append(
                    errors.invalid(
                        "spec.limited.nominalConcurrencyShares",
                        shares,
                        "must be a non-negative integer",
                    )
                )
            errs.extend(_percent(limited.get("lendablePercent"), "spec.limited.lendablePercent"))
            borrowing = limited.get("borrowingLimitPercent")
            if borrowing is not None and borrowing < 0:
                errs.append(
                    errors.invalid(
                        "spec.limited.borrowingLimitPercent",
                        borrowing,
                        "if specified, must be a non-negative integer",
                    )
                )
            response = limited.get("limitResponse") or {}
            response_type = response.get("type") or ""
            queuing = response.get("queuing")
            path = "spec.limited.limitResponse"
            if response_type == "Reject":
                if queuing is not None:
                    errs.append(
                        errors.forbidden(
                            f"{path}.queuing",
                            "must be nil if limited.limitResponse.type is not Limited",
                        )
                    )
            elif response_type == "Queue":
                if not isinstance(queuing, dict):
                    errs.append(
                        errors.required(
                            f"{path}.queuing",
                            "must not be empty if limited.limitResponse.type is Limited",
                        )
                    )
                else:
                    errs.extend(_queuing(queuing, f"{path}.queuing"))
            else:
                errs.append(
                    errors.not_supported(f"{path}.type", response_type, ["Queue", "Reject"])
                )
    else:
        errs.append(errors.not_supported("spec.type", kind, ["Exempt", "Limited"]))
    fixed = _MANDATORY_LEVELS.get(name)
    if fixed is not None:
        compared = dict(spec)
        wanted = dict(fixed)
        if name == "exempt":
            # kube lets the exempt level's shares and lendable percent be changed.
            compared.pop("exempt", None)
            wanted.pop("exempt", None)
        if compared != wanted:
            errs.append(
                errors.FieldError(
                    errors.INVALID,
                    "spec",
                    errors.OMIT,
                    f"spec of '{name}' must equal the fixed value",
                )
            )
    return errs


def validate_priority_level(obj: Mapping[str, Any]) -> list[FieldError]:
    """``ValidatePriorityLevelConfiguration`` (create and update alike)."""
    meta = obj.get("metadata") or {}
    errs = validate_object_meta(meta, namespaced=False, name_fn=name_is_dns_subdomain)
    spec = obj.get("spec")
    errs.extend(
        validate_priority_level_spec(meta.get("name") or "", spec if isinstance(spec, dict) else {})
    )
    errs.extend(_status_conditions(obj.get("status")))
    return errs


def validate_status(obj: Mapping[str, Any]) -> list[FieldError]:
    """``Validate...StatusUpdate``: only the conditions."""
    return _status_conditions(obj.get("status"))


__all__: Sequence[str] = (
    "FLOW_SCHEMA",
    "PRIORITY_LEVEL",
    "default_flow_schema",
    "default_priority_level",
    "validate_flow_schema",
    "validate_priority_level",
    "validate_status",
)
