"""Which FlowSchema, priority level and flow a request belongs to.

Follows k8s.io/apiserver/pkg/util/flowcontrol/rule.go and apf_controller.go's ``Match``: the
FlowSchemas are tried by ascending ``matchingPrecedence`` (then name); the first whose rule
matches the user (subjects) and the request (resource or non-resource rules) wins, and the
flow is the schema plus its distinguisher (the user name, the namespace, or nothing).

Everything that does not depend on the request is done once: schemas are sorted and their
rules compiled to sets; and the schemas whose subjects match a user are remembered per
``(name, groups)``, so a request only tests the rules of the few schemas left.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

SA_PREFIX = "system:serviceaccount:"
#: How many users' candidate lists are remembered before the memory starts over.
USER_CACHE_SIZE = 4096
#: Classifications remembered (see Classifier.classify); cleared when full.
DECISION_CACHE_SIZE = 8192
_UNDECIDED = object()


def _set_or_all(values: Iterable[str], wildcard: str) -> frozenset[str] | None:
    """None stands for "everything" (rule.go's ``containsString`` wildcard: a list of just
    the wildcard); otherwise the exact values."""
    listed = list(values)
    if len(listed) == 1 and listed[0] == wildcard:
        return None
    return frozenset(listed)


@attrs.define(frozen=True, slots=True)
class ResourceRule:
    verbs: frozenset[str] | None
    groups: frozenset[str] | None
    resources: frozenset[str] | None
    namespaces: frozenset[str] | None
    cluster_scope: bool

    def matches(self, verb: str, group: str, resource: str, namespace: str) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        if self.resources is not None and resource not in self.resources:
            return False
        if self.groups is not None and group not in self.groups:
            return False
        if not namespace:
            return self.cluster_scope
        return self.namespaces is None or namespace in self.namespaces


@attrs.define(frozen=True, slots=True)
class NonResourceRule:
    verbs: frozenset[str] | None
    every_url: bool
    exact: frozenset[str]
    #: rule.go's prefix match: ``/x`` and ``/x/*`` both cover ``/x/...``.
    prefixes: tuple[str, ...]

    def matches(self, verb: str, path: str) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        return self.every_url or path in self.exact or path.startswith(self.prefixes)


@attrs.define(frozen=True, slots=True)
class Subject:
    kind: str
    name: str
    namespace: str = ""

    def matches(self, name: str, groups: tuple[str, ...]) -> bool:
        if self.kind == "User":
            return self.name in ("*", name)
        if self.kind == "Group":
            return self.name == "*" or self.name in groups
        if self.kind == "ServiceAccount":
            if not name.startswith(SA_PREFIX):
                return False
            rest = name[len(SA_PREFIX) :]
            if self.name == "*":
                return rest.startswith(self.namespace + ":")
            return rest == f"{self.namespace}:{self.name}"
        return False


@attrs.define(frozen=True, slots=True)
class PolicyRules:
    subjects: tuple[Subject, ...]
    resource_rules: tuple[ResourceRule, ...]
    non_resource_rules: tuple[NonResourceRule, ...]

    def matches_user(self, name: str, groups: tuple[str, ...]) -> bool:
        return any(s.matches(name, groups) for s in self.subjects)


@attrs.define(eq=False, slots=True)
class FlowSchema:
    """One compiled FlowSchema; ``uid`` is the header value, already encoded."""

    name: str
    uid: bytes
    precedence: int
    level: str
    #: ``ByUser``, ``ByNamespace`` or None (every request of the schema is one flow).
    distinguisher: str | None
    rules: tuple[PolicyRules, ...]
    #: Set by :class:`apiserver.flowcontrol.apf.PriorityAndFairness`: the priority level's
    #: state and this schema's counters, so the request path needs no look-up by name.
    level_state: Any = None
    stats: Any = None
    #: ``(uid,)``: the response header's values, built once.
    header_values: tuple[bytes, ...] = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.header_values = (self.uid,)


#: A schema with one of its rules whose subjects matched: (schema, resource rules,
#: non-resource rules).
Candidate = tuple[FlowSchema, tuple[ResourceRule, ...], tuple[NonResourceRule, ...]]


def _compile_rules(raw: Mapping[str, Any]) -> PolicyRules:
    subjects = []
    for subject in raw.get("subjects") or ():
        kind = subject["kind"]
        if kind == "User":
            subjects.append(Subject(kind, subject["user"]["name"]))
        elif kind == "Group":
            subjects.append(Subject(kind, subject["group"]["name"]))
        elif kind == "ServiceAccount":
            sa = subject["serviceAccount"]
            subjects.append(Subject(kind, sa["name"], sa["namespace"]))
    resource_rules = tuple(
        ResourceRule(
            _set_or_all(rule.get("verbs") or (), "*"),
            _set_or_all(rule.get("apiGroups") or (), "*"),
            _set_or_all(rule.get("resources") or (), "*"),
            _set_or_all(rule.get("namespaces") or (), "*"),
            bool(rule.get("clusterScope")),
        )
        for rule in raw.get("resourceRules") or ()
    )
    non_resource_rules = []
    for rule in raw.get("nonResourceRules") or ():
        urls = list(rule.get("nonResourceURLs") or ())
        prefixes = []
        for url in urls:
            prefix = url.removesuffix("*")
            prefixes.append(prefix if prefix.endswith("/") else prefix + "/")
        non_resource_rules.append(
            NonResourceRule(
                _set_or_all(rule.get("verbs") or (), "*"),
                "*" in urls,
                frozenset(urls),
                tuple(prefixes),
            )
        )
    return PolicyRules(tuple(subjects), resource_rules, tuple(non_resource_rules))


def compile_flow_schema(obj: Mapping[str, Any]) -> FlowSchema:
    """A v1 FlowSchema object (as :mod:`apiserver.flowcontrol.bootstrap` builds it) compiled."""
    spec = obj["spec"]
    method = spec.get("distinguisherMethod")
    return FlowSchema(
        obj["metadata"]["name"],
        obj["metadata"]["uid"].encode(),
        int(spec.get("matchingPrecedence", 1000)),
        spec["priorityLevelConfiguration"]["name"],
        method["type"] if method else None,
        tuple(_compile_rules(rules) for rules in spec.get("rules") or ()),
    )


class Classifier:
    """The schemas by precedence and the per-user memory of which may match."""

    def __init__(self, schemas: Iterable[FlowSchema]) -> None:
        self.schemas: tuple[FlowSchema, ...] = tuple(
            sorted(schemas, key=lambda s: (s.precedence, s.name))
        )
        self._by_user: dict[tuple[str, tuple[str, ...]], tuple[Candidate, ...]] = {}
        self._decided: dict[tuple[Any, ...], FlowSchema | None] = {}
        self.catch_all = next((s for s in self.schemas if s.name == "catch-all"), None)

    def candidates(self, name: str, groups: tuple[str, ...]) -> tuple[Candidate, ...]:
        """The (schema, rules) pairs, in precedence order, whose subjects match this user:
        what is left to test per request is the rules' verbs, resources and paths."""
        key = (name, groups)
        found = self._by_user.get(key)
        if found is None:
            found = tuple(
                (schema, rules.resource_rules, rules.non_resource_rules)
                for schema in self.schemas
                for rules in schema.rules
                if rules.matches_user(name, groups)
            )
            if len(self._by_user) >= USER_CACHE_SIZE:
                self._by_user.clear()
            self._by_user[key] = found
        return found

    def classify(
        self,
        name: str,
        groups: tuple[str, ...],
        resource_request: bool,
        verb: str,
        group: str,
        resource: str,
        namespace: str,
        path: str,
    ) -> FlowSchema | None:
        """The first schema whose subjects match the user and whose rules match the request
        (rule.go: a schema's rule must match both with the same ``PolicyRulesWithSubjects``)."""
        # The answer depends only on these values, which repeat from request to request
        # (the same clients ask for the same things): remembered, bounded, instead of testing
        # the rules again each time.
        # The path matters to non-resource rules only: a resource request's path names its
        # object, which no rule looks at, and would make every object a key of its own.
        key = (
            name,
            groups,
            resource_request,
            verb,
            group,
            resource,
            namespace,
            "" if resource_request else path,
        )
        decided = self._decided.get(key, _UNDECIDED)
        if decided is not _UNDECIDED:
            return decided  # type: ignore[return-value]
        found = self._by_user.get((name, groups))
        if found is None:
            found = self.candidates(name, groups)
        schema_found = self.catch_all
        if resource_request:
            for schema, resource_rules, _ in found:
                if any(rule.matches(verb, group, resource, namespace) for rule in resource_rules):
                    schema_found = schema
                    break
        else:
            for schema, _, non_resource_rules in found:
                if any(nrule.matches(verb, path) for nrule in non_resource_rules):
                    schema_found = schema
                    break
        if len(self._decided) >= DECISION_CACHE_SIZE:
            self._decided.clear()
        self._decided[key] = schema_found
        return schema_found
