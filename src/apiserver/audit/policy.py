"""``--audit-policy-file``: reading, validating and evaluating an ``audit.k8s.io/v1`` Policy.

Follows k8s.io/apiserver:

- ``pkg/audit/policy/reader.go`` (``LoadPolicyFromFile``): the file is YAML or JSON; decoding is
  strict first, and a strict-only problem (an unknown or duplicated field) falls back to
  lenient decoding with the warning ``Audit policy contains errors, falling back to lenient
  decoding: <err>``; only ``audit.k8s.io/v1`` is known; the policy is validated; zero rules is
  ``loaded illegal policy with 0 rules``. Every error names the file (``<err>: from file
  <path>``, ``failed to read file path "<path>": <err>``) and stops start-up (a
  ``ValueError``, as for the other configuration files).
- ``pkg/apis/audit/validation/validation.go`` (``ValidatePolicy``): levels, omitted stages,
  non-resource URLs (a leading ``/``, ``*`` only last), groups (DNS subdomains or ``*``),
  ``resourceNames`` only with resources, and resources and non-resource URLs never mixed.
- ``pkg/audit/policy/checker.go`` (``policyRuleEvaluator``): the first matching rule decides;
  no match is level None; the policy's ``omitStages`` are added to every rule's, and a rule's
  ``omitManagedFields`` overrides the policy's when set.

The evaluation runs for every request once a policy is loaded, so each rule's answer
(:class:`AuditConfig`) is built once at load time and the matching allocates nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs
import yaml
from twisted.logger import Logger

from apiserver.apimachinery.errors import (
    FieldError,
    aggregate_text,
    invalid,
    not_supported,
    required,
)
from apiserver.apimachinery.strict import load_yaml_noting_duplicates
from apiserver.apimachinery.validation import name_is_dns_subdomain
from apiserver.audit.interface import API_VERSION, LEVELS, STAGES, Level, Stage
from apiserver.auth.interface import UserInfo
from apiserver.auth.requestinfo import RequestInfo

log = Logger()

POLICY_KIND = "Policy"


@attrs.frozen(slots=True)
class AuditConfig:
    """``RequestAuditConfig``: what the policy decided for one request."""

    level: Level
    omit_stages: frozenset[Stage] = frozenset()
    omit_managed_fields: bool = False


@attrs.frozen(slots=True)
class GroupResources:
    """``GroupResources``: a group (``*`` for any) and resources and names in it."""

    group: str = ""
    resources: tuple[str, ...] = ()
    resource_names: tuple[str, ...] = ()


@attrs.frozen(slots=True)
class PolicyRule:
    """``PolicyRule``; empty lists match everything."""

    level: str
    users: frozenset[str] = frozenset()
    user_groups: frozenset[str] = frozenset()
    verbs: frozenset[str] = frozenset()
    resources: tuple[GroupResources, ...] = ()
    namespaces: frozenset[str] = frozenset()
    non_resource_urls: tuple[str, ...] = ()
    omit_stages: tuple[str, ...] = ()
    #: None: the policy's ``omitManagedFields`` applies.
    omit_managed_fields: bool | None = None


@attrs.frozen
class Policy:
    """A loaded, valid policy and its evaluator (``NewPolicyRuleEvaluator``)."""

    rules: tuple[PolicyRule, ...]
    omit_stages: tuple[str, ...] = ()
    omit_managed_fields: bool = False
    _pairs: tuple[tuple[PolicyRule, AuditConfig], ...] = attrs.field(
        init=False, repr=False, eq=False
    )
    _fallback: AuditConfig = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        configs = tuple(
            AuditConfig(
                rule.level,  # type: ignore[arg-type]  # validated: one of LEVELS
                frozenset((*self.omit_stages, *rule.omit_stages)),  # type: ignore[arg-type]
                self.omit_managed_fields
                if rule.omit_managed_fields is None
                else rule.omit_managed_fields,
            )
            for rule in self.rules
        )
        default = AuditConfig(
            "None",
            frozenset(self.omit_stages),  # type: ignore[arg-type]
            self.omit_managed_fields,
        )
        # Rules after one that matches every request are never reached: evaluation stops
        # before it and answers its config (a catch-all rule, usually the last, or the
        # only one, as in "audit everything at Metadata").
        pairs = tuple(zip(self.rules, configs, strict=True))
        fallback = default
        for index, rule in enumerate(self.rules):
            if _matches_everything(rule):
                pairs, fallback = pairs[:index], configs[index]
                break
        object.__setattr__(self, "_pairs", pairs)
        object.__setattr__(self, "_fallback", fallback)

    def evaluate(self, user: UserInfo | None, info: RequestInfo) -> AuditConfig:
        """``EvaluatePolicyRule``: the first rule that matches the request, else level None.

        ``user`` is None for a request that failed authentication (rules naming users or
        groups then never match).
        """
        for rule, config in self._pairs:
            if rule_matches(rule, user, info):
                return config
        return self._fallback


def _matches_everything(rule: PolicyRule) -> bool:
    """A rule without any condition (``ruleMatches`` is true for every request)."""
    return not (
        rule.users
        or rule.user_groups
        or rule.verbs
        or rule.resources
        or rule.namespaces
        or rule.non_resource_urls
    )


def rule_matches(rule: PolicyRule, user: UserInfo | None, info: RequestInfo) -> bool:
    """``ruleMatches``: every non-empty list must match."""
    if rule.users and (user is None or user.name not in rule.users):
        return False
    if rule.user_groups:
        if user is None or rule.user_groups.isdisjoint(user.groups):
            return False
    if rule.verbs and info.verb not in rule.verbs:
        return False
    if rule.namespaces or rule.resources:
        return _matches_resource(rule, info)
    if rule.non_resource_urls:
        return _matches_non_resource(rule, info)
    return True


def _matches_non_resource(rule: PolicyRule, info: RequestInfo) -> bool:
    if info.resource_request:
        return False
    path = info.path
    for spec in rule.non_resource_urls:
        if spec == "*" or spec == path:
            return True
        if spec.endswith("*") and path.startswith(spec.rstrip("*")):
            return True
    return False


def _matches_resource(rule: PolicyRule, info: RequestInfo) -> bool:
    if not info.resource_request:
        return False
    # Cluster-scoped resources have the namespace "".
    if rule.namespaces and info.namespace not in rule.namespaces:
        return False
    if not rule.resources:
        return True
    group, resource, subresource = info.api_group, info.resource, info.subresource
    combined = f"{resource}/{subresource}" if subresource else resource
    for entry in rule.resources:
        if entry.group != group and entry.group != "*":
            continue
        if not entry.resources:
            return True
        if entry.resource_names and info.name not in entry.resource_names:
            continue
        for res in entry.resources:
            if res == combined or res == "*":
                return True
            if subresource and res.startswith("*/") and subresource == res[2:]:
                return True
            if res.endswith("/*") and resource == res[:-2]:
                return True
    return False


# --- reading ---------------------------------------------------------------------------------


class PolicyError(ValueError):
    """The policy file cannot be used; the message names the file, as kube-apiserver's."""


_POLICY_FIELDS = frozenset({"apiVersion", "kind", "metadata", "rules", "omitStages"})
_POLICY_FIELDS_ALL = _POLICY_FIELDS | {"omitManagedFields"}
_RULE_FIELDS = frozenset(
    {
        "level",
        "users",
        "userGroups",
        "verbs",
        "resources",
        "namespaces",
        "nonResourceURLs",
        "omitStages",
        "omitManagedFields",
    }
)
_GROUP_FIELDS = frozenset({"group", "resources", "resourceNames"})


class _DecodeError(Exception):
    """A value of the wrong type: no lenient decoding can read it."""


class _Reader:
    """Turns the parsed document into a :class:`Policy`, noting strict-only problems."""

    def __init__(self) -> None:
        self.strict: list[str] = []

    def fields(self, value: Any, path: str, known: frozenset[str]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise _DecodeError(f"{path}: expected an object, got {_json_kind(value)}")
        for key in value:
            if key not in known:
                where = f"{path}.{key}" if path else str(key)
                self.strict.append(f'unknown field "{where}"')
        return value

    @staticmethod
    def string(obj: dict[str, Any], key: str, path: str) -> str:
        value = obj.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise _DecodeError(f"{_join(path, key)}: expected a string, got {_json_kind(value)}")
        return value

    @staticmethod
    def strings(obj: dict[str, Any], key: str, path: str) -> tuple[str, ...]:
        value = obj.get(key)
        if value is None:
            return ()
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _DecodeError(f"{_join(path, key)}: expected a list of strings")
        return tuple(value)

    @staticmethod
    def boolean(obj: dict[str, Any], key: str, path: str) -> bool | None:
        value = obj.get(key)
        if value is None:
            return None
        if not isinstance(value, bool):
            raise _DecodeError(f"{_join(path, key)}: expected a boolean, got {_json_kind(value)}")
        return value

    def policy(self, doc: Any) -> Policy:
        top = self.fields(doc, "", _POLICY_FIELDS_ALL)
        raw_rules = top.get("rules")
        if raw_rules is not None and not isinstance(raw_rules, list):
            raise _DecodeError(f"rules: expected a list, got {_json_kind(raw_rules)}")
        rules = tuple(self.rule(raw, f"rules[{i}]") for i, raw in enumerate(raw_rules or ()))
        return Policy(
            rules,
            self.strings(top, "omitStages", ""),
            bool(self.boolean(top, "omitManagedFields", "")),
        )

    def rule(self, raw: Any, path: str) -> PolicyRule:
        obj = self.fields(raw, path, _RULE_FIELDS)
        raw_resources = obj.get("resources")
        if raw_resources is not None and not isinstance(raw_resources, list):
            raise _DecodeError(f"{path}.resources: expected a list")
        resources = tuple(
            self.group(item, f"{path}.resources[{i}]") for i, item in enumerate(raw_resources or ())
        )
        return PolicyRule(
            level=self.string(obj, "level", path),
            users=frozenset(self.strings(obj, "users", path)),
            user_groups=frozenset(self.strings(obj, "userGroups", path)),
            verbs=frozenset(self.strings(obj, "verbs", path)),
            resources=resources,
            namespaces=frozenset(self.strings(obj, "namespaces", path)),
            non_resource_urls=self.strings(obj, "nonResourceURLs", path),
            omit_stages=self.strings(obj, "omitStages", path),
            omit_managed_fields=self.boolean(obj, "omitManagedFields", path),
        )

    def group(self, raw: Any, path: str) -> GroupResources:
        obj = self.fields(raw, path, _GROUP_FIELDS)
        return GroupResources(
            self.string(obj, "group", path),
            self.strings(obj, "resources", path),
            self.strings(obj, "resourceNames", path),
        )


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def validate_policy(policy: Policy) -> list[FieldError]:
    """``ValidatePolicy``: every problem, each naming its field."""
    errors = _validate_stages(policy.omit_stages, "omitStages")
    for index, rule in enumerate(policy.rules):
        path = f"rules[{index}]"
        if not rule.level:
            errors.append(required(f"{path}.level"))
        elif rule.level not in LEVELS:
            errors.append(not_supported(f"{path}.level", rule.level, LEVELS))
        for i, url in enumerate(rule.non_resource_urls):
            if url == "*":
                continue
            field = f"{path}.nonResourceURLs[{i}]"
            if not url.startswith("/"):
                errors.append(
                    invalid(field, url, "non-resource URL rules must begin with a '/' character")
                )
            if url and "*" in url[:-1]:
                errors.append(
                    invalid(
                        field,
                        url,
                        "non-resource URL wildcards '*' must be the final character of the rule",
                    )
                )
        for group in rule.resources:
            if group.group and group.group != "*":
                problems = name_is_dns_subdomain(group.group, False)
                if problems:
                    errors.append(
                        invalid(f"{path}.resources.group", group.group, ",".join(problems))
                    )
            if group.resource_names and not group.resources:
                errors.append(
                    invalid(
                        f"{path}.resources.resourceNames",
                        list(group.resource_names),
                        "using resourceNames requires at least one resource",
                    )
                )
        errors.extend(_validate_stages(rule.omit_stages, f"{path}.omitStages"))
        if rule.non_resource_urls and (rule.resources or rule.namespaces):
            errors.append(
                invalid(
                    f"{path}.nonResourceURLs",
                    list(rule.non_resource_urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                )
            )
    return errors


def _validate_stages(stages: Sequence[str], path: str) -> list[FieldError]:
    return [
        invalid(f"{path}[{i}]", stage, "allowed stages are " + ",".join(STAGES))
        for i, stage in enumerate(stages)
        if stage not in STAGES
    ]


def _parse_document(data: bytes) -> tuple[Any, list[str]]:
    """The document as plain values, and its duplicated keys (YAML is a superset of JSON)."""
    text = data.decode("utf-8")
    if text.lstrip().startswith("{"):
        duplicates: list[str] = []

        def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
            result: dict[str, Any] = {}
            for key, value in items:
                if key in result:
                    duplicates.append(key)
                result[key] = value
            return result

        try:
            return json.loads(text, object_pairs_hook=pairs), duplicates
        except json.JSONDecodeError:
            pass  # YAML flow mappings start with "{" too
    return load_yaml_noting_duplicates(text)


def load_policy_bytes(data: bytes) -> Policy:
    """``LoadPolicyFromBytes``: decode, check the kind and version, validate."""
    try:
        doc, duplicates = _parse_document(data)
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as error:
        raise PolicyError(f"failed decoding: {error}") from None
    if not isinstance(doc, dict):
        raise PolicyError(f"failed decoding: Object 'Kind' is missing in '{_short(data)}'")
    kind, api_version = doc.get("kind"), doc.get("apiVersion")
    if not kind or not isinstance(kind, str):
        raise PolicyError(f"failed decoding: Object 'Kind' is missing in '{_short(data)}'")
    if api_version != API_VERSION or kind != POLICY_KIND:
        raise PolicyError(
            f'failed decoding: no kind "{kind}" is registered for version '
            f'"{api_version if isinstance(api_version, str) else ""}" '
            'in scheme "k8s.io/apiserver/pkg/audit/scheme.go:29"'
        )
    reader = _Reader()
    try:
        policy = reader.policy(doc)
    except _DecodeError as error:
        raise PolicyError(f"failed decoding: {error}") from None
    strict = [f'duplicate field "{key}"' for key in duplicates] + reader.strict
    if strict:
        log.warn(
            "Audit policy contains errors, falling back to lenient decoding: "
            "strict decoding error: {errors}",
            errors=", ".join(strict),
        )
    errors = validate_policy(policy)
    if errors:
        raise PolicyError(aggregate_text(errors))
    if not policy.rules:
        raise PolicyError("loaded illegal policy with 0 rules")
    log.debug("Load audit policy rules success policyCnt={count}", count=len(policy.rules))
    return policy


def _short(data: bytes) -> str:
    return data.decode("utf-8", "replace").strip()


def load_policy_file(path: str) -> Policy:
    """``LoadPolicyFromFile``: every error names the file."""
    if not path:
        raise PolicyError("file path not specified")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        # Go's *PathError: "open <path>: no such file or directory".
        reason = error.strerror or str(error)
        reason = reason[:1].lower() + reason[1:]
        raise PolicyError(f'failed to read file path "{path}": open {path}: {reason}') from None
    try:
        return load_policy_bytes(data)
    except PolicyError as error:
        raise PolicyError(f"{error}: from file {path}") from None
