"""The bootstrap configuration of API Priority and Fairness, as flowcontrol.apiserver.k8s.io/v1.

kube-apiserver creates these objects at start-up (k8s.io/apiserver/pkg/apis/flowcontrol/
bootstrap/default.go): two mandatory PriorityLevelConfigurations (``exempt``, ``catch-all``)
and FlowSchemas (``exempt``, ``catch-all``), and the suggested ones. They are built here as
the v1 objects a client reads: priority and fairness starts with them, and the ensurer
(:mod:`apiserver.api.flowcontrol.ensurer`) stores them, after which the stored objects are
the configuration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

GROUP = "flowcontrol.apiserver.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
#: ``apf.kubernetes.io/autoupdate-spec``: the server keeps the spec as it suggests it.
AUTO_UPDATE = "apf.kubernetes.io/autoupdate-spec"
#: The names of the mandatory objects (one FlowSchema and one PriorityLevelConfiguration each):
#: the ensurer always restores them and their specs may not be changed.
MANDATORY = frozenset({"exempt", "catch-all"})

_ALL_RESOURCES = {
    "verbs": ["*"],
    "apiGroups": ["*"],
    "resources": ["*"],
    "clusterScope": True,
    "namespaces": ["*"],
}
_ALL_NON_RESOURCES = {"verbs": ["*"], "nonResourceURLs": ["*"]}


def _group(name: str) -> dict[str, Any]:
    return {"kind": "Group", "group": {"name": name}}


def _user(name: str) -> dict[str, Any]:
    return {"kind": "User", "user": {"name": name}}


def _kube_system_sa() -> dict[str, Any]:
    return {"kind": "ServiceAccount", "serviceAccount": {"name": "*", "namespace": "kube-system"}}


_EVERYONE = [_group("system:unauthenticated"), _group("system:authenticated")]


def _queuing(queues: int, hand: int, length: int) -> dict[str, Any]:
    return {
        "type": "Queue",
        "queuing": {"queues": queues, "handSize": hand, "queueLengthLimit": length},
    }


def _limited(shares: int, lendable: int, response: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "Limited",
        "limited": {
            "nominalConcurrencyShares": shares,
            "limitResponse": response,
            "lendablePercent": lendable,
        },
    }


#: (name, spec) of every PriorityLevelConfiguration: mandatory first, then suggested.
PRIORITY_LEVELS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("catch-all", _limited(5, 0, {"type": "Reject"})),
    ("exempt", {"type": "Exempt", "exempt": {"nominalConcurrencyShares": 0, "lendablePercent": 0}}),
    ("system", _limited(30, 33, _queuing(64, 6, 50))),
    ("node-high", _limited(40, 25, _queuing(64, 6, 50))),
    ("leader-election", _limited(10, 0, _queuing(16, 4, 50))),
    ("workload-high", _limited(40, 50, _queuing(128, 6, 50))),
    ("workload-low", _limited(100, 90, _queuing(128, 6, 50))),
    ("global-default", _limited(20, 50, _queuing(128, 6, 50))),
)


def _schema(
    level: str, precedence: int, distinguisher: str | None, rules: dict[str, Any]
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priorityLevelConfiguration": {"name": level},
        "matchingPrecedence": precedence,
    }
    if distinguisher is not None:
        spec["distinguisherMethod"] = {"type": distinguisher}
    spec["rules"] = [rules]
    return spec


def _everything(subjects: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "subjects": subjects,
        "resourceRules": [dict(_ALL_RESOURCES)],
        "nonResourceRules": [dict(_ALL_NON_RESOURCES)],
    }


#: (name, spec) of every FlowSchema: mandatory first, then suggested (default.go's order).
FLOW_SCHEMAS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("exempt", _schema("exempt", 1, None, _everything([_group("system:masters")]))),
    ("catch-all", _schema("catch-all", 10000, "ByUser", _everything(list(_EVERYONE)))),
    ("system-nodes", _schema("system", 500, "ByUser", _everything([_group("system:nodes")]))),
    (
        "system-node-high",
        _schema(
            "node-high",
            400,
            "ByUser",
            {
                "subjects": [_group("system:nodes")],
                "resourceRules": [
                    {
                        "verbs": ["*"],
                        "apiGroups": [""],
                        "resources": ["nodes", "nodes/status"],
                        "clusterScope": True,
                        "namespaces": ["*"],
                    },
                    {
                        "verbs": ["*"],
                        "apiGroups": ["coordination.k8s.io"],
                        "resources": ["leases"],
                        "namespaces": ["*"],
                    },
                ],
            },
        ),
    ),
    (
        "probes",
        _schema(
            "exempt",
            2,
            None,
            {
                "subjects": list(_EVERYONE),
                "nonResourceRules": [
                    {"verbs": ["get"], "nonResourceURLs": ["/healthz", "/readyz", "/livez"]}
                ],
            },
        ),
    ),
    (
        "system-leader-election",
        _schema(
            "leader-election",
            100,
            "ByUser",
            {
                "subjects": [
                    _user("system:kube-controller-manager"),
                    _user("system:kube-scheduler"),
                    _kube_system_sa(),
                ],
                "resourceRules": [
                    {
                        "verbs": ["get", "create", "update"],
                        "apiGroups": ["coordination.k8s.io"],
                        "resources": ["leases"],
                        "namespaces": ["*"],
                    }
                ],
            },
        ),
    ),
    (
        "kube-controller-manager",
        _schema(
            "workload-high",
            800,
            "ByNamespace",
            _everything([_user("system:kube-controller-manager")]),
        ),
    ),
    (
        "kube-scheduler",
        _schema("workload-high", 800, "ByNamespace", _everything([_user("system:kube-scheduler")])),
    ),
    (
        "kube-system-service-accounts",
        _schema("workload-high", 900, "ByNamespace", _everything([_kube_system_sa()])),
    ),
    (
        "service-accounts",
        _schema("workload-low", 9000, "ByUser", _everything([_group("system:serviceaccounts")])),
    ),
    ("global-default", _schema("global-default", 9900, "ByUser", _everything(list(_EVERYONE)))),
)


def _metadata(name: str, uid: str, created: str) -> dict[str, Any]:
    return {
        "name": name,
        "uid": uid,
        "resourceVersion": "1",
        "generation": 1,
        "creationTimestamp": created,
        "annotations": {AUTO_UPDATE: "true"},
    }


def priority_level_objects(created: str, new_uid: Callable[[], str]) -> list[dict[str, Any]]:
    """The PriorityLevelConfigurations as a v1 client reads them."""
    return [
        {
            "kind": "PriorityLevelConfiguration",
            "apiVersion": API_VERSION,
            "metadata": _metadata(name, new_uid(), created),
            "spec": spec,
            "status": {},
        }
        for name, spec in PRIORITY_LEVELS
    ]


def flow_schema_objects(created: str, new_uid: Callable[[], str]) -> list[dict[str, Any]]:
    """The FlowSchemas as a v1 client reads them, each with the ``Dangling`` condition
    kube-apiserver's config controller writes (every level here exists)."""
    objects = []
    for name, spec in FLOW_SCHEMAS:
        level = spec["priorityLevelConfiguration"]["name"]
        condition = {
            "type": "Dangling",
            "status": "False",
            "lastTransitionTime": created,
            "reason": "Found",
            "message": "This FlowSchema references the PriorityLevelConfiguration object "
            f'named "{level}" and it exists',
        }
        objects.append(
            {
                "kind": "FlowSchema",
                "apiVersion": API_VERSION,
                "metadata": _metadata(name, new_uid(), created),
                "spec": spec,
                "status": {"conditions": [condition]},
            }
        )
    return objects
