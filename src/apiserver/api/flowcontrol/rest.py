"""The read-only REST handler of flowcontrol.apiserver.k8s.io/v1 (see the package docstring)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson
from twisted.internet.interfaces import IDelayedCall, IReactorTime

from apiserver.flowcontrol.bootstrap import API_VERSION, GROUP, VERSION
from apiserver.http.app import STREAMING, HandlerResult, RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.http.status import status_body

BASE = f"/apis/{GROUP}/{VERSION}/"
VERBS = ("get", "list", "watch")
METHOD_NOT_ALLOWED = "the server does not allow this method on the requested resource"

#: (resource, kind, singular) of the two resources.
RESOURCES = (
    ("flowschemas", "FlowSchema", "flowschema"),
    ("prioritylevelconfigurations", "PriorityLevelConfiguration", "prioritylevelconfiguration"),
)


def discovery_group() -> Any:
    """The group for :func:`apiserver.discovery.install_discovery`'s ``extra_groups``: returns
    the arguments of ``ExtraGroup`` (the assembly builds it, so this package needs no import of
    the discovery package)."""
    resources = tuple(
        {
            "name": name,
            "singularName": singular,
            "namespaced": False,
            "kind": kind,
            "verbs": list(VERBS),
        }
        for name, kind, singular in RESOURCES
    )
    aggregated = tuple(
        {
            "resource": name,
            "responseKind": {"group": "", "version": "", "kind": kind},
            "scope": "Cluster",
            "singularResource": singular,
            "verbs": list(VERBS),
        }
        for name, kind, singular in RESOURCES
    )
    return GROUP, VERSION, resources, aggregated


def _json(code: int, body: Any) -> Response:
    return Response(code, (("Content-Type", "application/json"),), orjson.dumps(body) + b"\n")


def _status(code: int, reason: str, message: str, details: dict[str, Any] | None) -> Response:
    return _json(code, status_body(code, reason, message, details))


def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery/pkg/util/duration.HumanDuration (the AGE column)."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rest = s % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rest = (s % 3600) // 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def _column(name: str, type_: str, description: str, priority: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "type": type_,
        "format": "name" if name == "Name" else "",
        "description": description,
        "priority": priority,
    }


NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
AGE_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)

COLUMNS = {
    "flowschemas": [
        _column("Name", "string", NAME_DOC),
        _column(
            "PriorityLevel",
            "string",
            "priorityLevelConfiguration should reference a "
            "PriorityLevelConfiguration in the cluster.",
        ),
        _column(
            "MatchingPrecedence",
            "string",
            "matchingPrecedence is used to choose among "
            "the FlowSchemas that match a given request.",
        ),
        _column(
            "DistinguisherMethod",
            "string",
            "distinguisherMethod defines how to compute "
            "the flow distinguisher for requests that match this schema.",
        ),
        _column("Age", "string", AGE_DOC),
        _column(
            "MissingPL", "string", "indicates if the PriorityLevelConfiguration is found or not"
        ),
    ],
    "prioritylevelconfigurations": [
        _column("Name", "string", NAME_DOC),
        _column(
            "Type",
            "string",
            "`type` indicates whether this priority level is subject to "
            "limitation on request execution.",
        ),
        _column(
            "NominalConcurrencyShares",
            "string",
            "nominalConcurrencyShares (NCS) "
            "contributes to the computation of the NominalConcurrencyLimit (NominalCL) "
            "of this level.",
        ),
        _column("Queues", "string", "`queues` is the number of queues for this priority level."),
        _column(
            "HandSize",
            "string",
            "`handSize` is a small positive number that "
            "configures the shuffle sharding of requests into queues.",
        ),
        _column(
            "QueueLengthLimit",
            "string",
            "`queueLengthLimit` is the maximum number of "
            "requests allowed to be waiting in a given queue of this priority level at a "
            "time.",
        ),
        _column("Age", "string", AGE_DOC),
    ],
}


def _cells(resource: str, obj: Mapping[str, Any], now: float) -> list[Any]:
    meta = obj["metadata"]
    created = datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    age = human_duration(now - (created - datetime(1970, 1, 1)).total_seconds())
    spec = obj["spec"]
    if resource == "flowschemas":
        method = spec.get("distinguisherMethod")
        return [
            meta["name"],
            spec["priorityLevelConfiguration"]["name"],
            spec.get("matchingPrecedence", 0),
            method["type"] if method else "<none>",
            age,
            "False",
        ]
    if spec["type"] == "Exempt":
        shares = spec.get("exempt", {}).get("nominalConcurrencyShares", 0)
        return [meta["name"], "Exempt", shares, "<none>", "<none>", "<none>", age]
    limited = spec["limited"]
    queuing = (limited.get("limitResponse") or {}).get("queuing")
    shares = limited.get("nominalConcurrencyShares", 0)
    if queuing:
        return [
            meta["name"],
            "Limited",
            shares,
            queuing["queues"],
            queuing["handSize"],
            queuing["queueLengthLimit"],
            age,
        ]
    return [meta["name"], "Limited", shares, "<none>", "<none>", "<none>", age]


class FlowControlAPI:
    """``/apis/flowcontrol.apiserver.k8s.io/v1/<resource>[/<name>]``: get, list, watch."""

    def __init__(
        self,
        clock: IReactorTime,
        flow_schemas: Sequence[Mapping[str, Any]],
        priority_levels: Sequence[Mapping[str, Any]],
        min_request_timeout: float = 1800.0,
    ) -> None:
        self.clock = clock
        self.objects = {
            "flowschemas": list(flow_schemas),
            "prioritylevelconfigurations": list(priority_levels),
        }
        self.kinds = {name: kind for name, kind, _ in RESOURCES}
        self.min_request_timeout = min_request_timeout

    def handle(self, request: HTTPRequest, info: RequestInfo) -> HandlerResult:
        rest = info.path[len(BASE) :].split("/")
        resource = rest[0]
        if resource not in self.objects or len(rest) > 2:
            return _status(404, "NotFound", "the server could not find the requested resource", {})
        if info.method != "GET":
            return _status(405, "MethodNotAllowed", METHOD_NOT_ALLOWED, {})
        objects = self.objects[resource]
        table = "as=Table" in (request.getHeader(b"accept") or b"").decode("latin-1")
        if len(rest) == 2 and rest[1]:
            for obj in objects:
                if obj["metadata"]["name"] == rest[1]:
                    return self._table(resource, [obj]) if table else _json(200, obj)
            return _status(
                404,
                "NotFound",
                f'{resource}.{GROUP} "{rest[1]}" not found',
                {"name": rest[1], "group": GROUP, "kind": resource},
            )
        watch = info.query.get(b"watch")
        if watch and watch[-1].lower() not in (b"0", b"false"):
            return self._watch(request, info, objects)
        if table:
            return self._table(resource, objects)
        return _json(
            200,
            {
                "kind": self.kinds[resource] + "List",
                "apiVersion": API_VERSION,
                "metadata": {"resourceVersion": "1"},
                "items": objects,
            },
        )

    def _table(self, resource: str, objects: Sequence[Mapping[str, Any]]) -> Response:
        now = time.time()
        rows = [
            {
                "cells": _cells(resource, obj, now),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj["metadata"],
                },
            }
            for obj in objects
        ]
        return _json(
            200,
            {
                "kind": "Table",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": {"resourceVersion": "1"},
                "columnDefinitions": COLUMNS[resource],
                "rows": rows,
            },
        )

    def _watch(
        self, request: HTTPRequest, info: RequestInfo, objects: Sequence[Mapping[str, Any]]
    ) -> object:
        """Every object as ADDED (unless resuming from resourceVersion 1), then nothing until
        the timeout: the configuration never changes."""
        request.setResponseCode(200)
        request.responseHeaders.setRawHeaders(b"content-type", [b"application/json"])
        request.responseHeaders.setRawHeaders(b"cache-control", [b"no-cache, private"])
        rv = info.query.get(b"resourceVersion")
        events = b""
        if not rv or rv[0] in (b"", b"0"):
            events = b"".join(
                orjson.dumps({"type": "ADDED", "object": obj}) + b"\n" for obj in objects
            )
        request.write(events)
        timeout_values = info.query.get(b"timeoutSeconds")
        try:
            timeout = float(timeout_values[0]) if timeout_values else 0.0
        except ValueError:
            timeout = 0.0
        if timeout <= 0:
            timeout = self.min_request_timeout
        call: IDelayedCall = self.clock.callLater(timeout, self._end, request)
        request.notifyFinish().addBoth(lambda _: call.cancel() if call.active() else None)
        return STREAMING

    @staticmethod
    def _end(request: HTTPRequest) -> None:
        if not request.finished and not request._disconnected:
            request.finish()
