"""The REST handler of flowcontrol.apiserver.k8s.io/v1 (see the package docstring).

Follows k8s.io/apiserver's generic store and handlers (``pkg/endpoints/handlers/create.go``,
``update.go``, ``patch.go``, ``delete.go``, ``watch.go``) and the flowcontrol strategies
(k8s.io/kubernetes ``pkg/registry/flowcontrol/flowschema/strategy.go``,
``prioritylevelconfiguration/strategy.go``): create clears the status and sets generation 1;
an update of the object keeps the stored status and bumps the generation when the spec
changed; an update of ``/status`` keeps everything but the status (and managed fields).
Neither may create (``AllowCreateOnUpdate`` false). Deletion is immediate (no graceful
deletion), answered with a Success Status. JSON and YAML bodies, JSON answers, and the Table
kubectl asks for, with the columns of k8s.io/kubernetes/pkg/printers/internalversion/
printers.go.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import attrs
import orjson
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.admission import Admission
from apiserver.admission.interface import (
    CREATE,
    DELETE,
    UPDATE,
    Attributes,
    Operation,
    run_mutating,
    run_validating,
)
from apiserver.api.events.rest import decode_document
from apiserver.api.flowcontrol import types
from apiserver.apimachinery import continue_token as tokens
from apiserver.apimachinery import errors, negotiation, request_options
from apiserver.apimachinery.errors import FieldError
from apiserver.apimachinery.managedfields import update_managed_fields
from apiserver.apimachinery.names import generate_name
from apiserver.apimachinery.patch import Patcher, strict_errors
from apiserver.apimachinery.schema import Struct, go_normalize
from apiserver.apimachinery.uid import new_uuid
from apiserver.flowcontrol.bootstrap import API_VERSION, GROUP, VERSION
from apiserver.http.app import STREAMING, HandlerResult, RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.registry.store import NoChange, Obj, Registry, metadata
from apiserver.storage.interface import (
    CompactedError,
    PausableWatch,
    StorageTimeoutError,
    UnavailableError,
    WatchEvent,
)

log = Logger()

BASE = f"/apis/{GROUP}/{VERSION}/"
WATCH_BASE = BASE + "watch/"
VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


@attrs.frozen
class Kind:
    """One of the two resources."""

    resource: str
    kind: str
    singular: str
    schema: Struct
    default: Callable[[Obj], None]
    validate: Callable[[Mapping[str, Any]], list[FieldError]]

    @property
    def group_resource(self) -> errors.GroupResource:
        return errors.GroupResource(GROUP, self.resource)


FLOW_SCHEMAS = Kind(
    "flowschemas",
    "FlowSchema",
    "flowschema",
    types.FLOW_SCHEMA,
    types.default_flow_schema,
    types.validate_flow_schema,
)
PRIORITY_LEVELS = Kind(
    "prioritylevelconfigurations",
    "PriorityLevelConfiguration",
    "prioritylevelconfiguration",
    types.PRIORITY_LEVEL,
    types.default_priority_level,
    types.validate_priority_level,
)
KINDS = {kind.resource: kind for kind in (FLOW_SCHEMAS, PRIORITY_LEVELS)}
#: (resource, kind, singular) of the two resources.
RESOURCES = tuple((k.resource, k.kind, k.singular) for k in KINDS.values())


def discovery_group() -> Any:
    """The group for :func:`apiserver.discovery.install_discovery`'s ``extra_groups``: returns
    the arguments of ``ExtraGroup`` (the assembly builds it, so this package needs no import of
    the discovery package)."""
    resources: list[dict[str, Any]] = []
    aggregated = []
    for name, kind, singular in RESOURCES:
        resources.append(
            {
                "name": name,
                "singularName": singular,
                "namespaced": False,
                "kind": kind,
                "verbs": list(VERBS),
            }
        )
        resources.append(
            {
                "name": f"{name}/status",
                "singularName": "",
                "namespaced": False,
                "kind": kind,
                "verbs": ["get", "patch", "update"],
            }
        )
        aggregated.append(
            {
                "resource": name,
                "responseKind": {"group": "", "version": "", "kind": kind},
                "scope": "Cluster",
                "singularResource": singular,
                "verbs": list(VERBS),
                "subresources": [
                    {
                        "subresource": "status",
                        "responseKind": {"group": "", "version": "", "kind": kind},
                        "verbs": ["get", "patch", "update"],
                    }
                ],
            }
        )
    return GROUP, VERSION, tuple(resources), tuple(aggregated)


def to_wire(kind: Kind, obj: Obj) -> Obj:
    """The v1 object a client reads: ``kind`` and ``apiVersion`` first."""
    body: Obj = {"kind": kind.kind, "apiVersion": API_VERSION}
    for key, value in obj.items():
        if key not in ("kind", "apiVersion"):
            body[key] = value
    return body


def normalize(kind: Kind, obj: Obj) -> Obj:
    """``obj`` as it comes out of decoding into the Go struct: unknown fields gone,
    ``omitempty`` zero values left out (:func:`apiserver.apimachinery.schema.go_normalize`);
    without ``kind``/``apiVersion``."""
    out: Obj = go_normalize(obj, kind.schema)
    out.pop("kind", None)
    out.pop("apiVersion", None)
    return out


def _json(code: int, body: Any, warnings: Sequence[str] = ()) -> Response:
    headers: list[tuple[str, str]] = [("Content-Type", "application/json")]
    headers.extend(("Warning", f"299 - {errors.go_quote(w)}") for w in warnings)
    return Response(code, tuple(headers), orjson.dumps(body) + b"\n")


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


def _age(meta: Mapping[str, Any], now: float) -> str:
    try:
        created = datetime.strptime(meta["creationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")
    except (KeyError, TypeError, ValueError):
        return "<unknown>"
    return human_duration(now - created.replace(tzinfo=UTC).timestamp())


def _cells(resource: str, obj: Mapping[str, Any], now: float, missing: bool) -> list[Any]:
    meta = obj["metadata"]
    age = _age(meta, now)
    spec = obj.get("spec") or {}
    if resource == "flowschemas":
        method = spec.get("distinguisherMethod")
        return [
            meta["name"],
            (spec.get("priorityLevelConfiguration") or {}).get("name", ""),
            spec.get("matchingPrecedence", 0),
            method["type"] if method else "<none>",
            age,
            "True" if missing else "False",
        ]
    if spec.get("type") == "Exempt":
        shares = (spec.get("exempt") or {}).get("nominalConcurrencyShares", 0)
        return [meta["name"], "Exempt", shares, "<none>", "<none>", "<none>", age]
    limited = spec.get("limited") or {}
    queuing = (limited.get("limitResponse") or {}).get("queuing")
    shares = limited.get("nominalConcurrencyShares", 0)
    if queuing:
        return [
            meta["name"],
            "Limited",
            shares,
            queuing.get("queues"),
            queuing.get("handSize"),
            queuing.get("queueLengthLimit"),
            age,
        ]
    return [meta["name"], "Limited", shares, "<none>", "<none>", "<none>", age]


def _now_text(clock: IReactorTime) -> str:
    return datetime.fromtimestamp(clock.seconds(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _header(request: HTTPRequest, name: bytes) -> str:
    value = request.getHeader(name)
    if isinstance(value, bytes):
        return value.decode("latin-1")
    return value or ""


def _check_preconditions(kind: Kind, opts: Any) -> Callable[[Obj], None]:
    uid = opts.preconditions_uid
    rv = opts.preconditions_resource_version

    def check(current: Obj) -> None:
        meta = metadata(current)
        name = meta.get("name", "")
        if uid and uid != meta.get("uid"):
            raise errors.conflict(
                kind.group_resource,
                name,
                f"the UID in the precondition ({uid}) does not match the UID in record "
                f"({meta.get('uid', '')}). The object might have been deleted and then recreated",
            )
        if rv and rv != meta.get("resourceVersion"):
            raise errors.conflict(
                kind.group_resource,
                name,
                f"the ResourceVersion in the precondition ({rv}) does not match the "
                f"ResourceVersion in record ({meta.get('resourceVersion', '')}). The object "
                "might have been modified",
            )

    return check


def _same_but_bookkeeping(new: Obj, current: Obj) -> bool:
    """Whether ``new`` equals ``current`` but for managed fields and resourceVersion."""
    ignored = ("managedFields", "resourceVersion")
    new_meta = {k: v for k, v in metadata(new).items() if k not in ignored}
    cur_meta = {k: v for k, v in metadata(current).items() if k not in ignored}
    if new_meta != cur_meta:
        return False
    return {k: v for k, v in new.items() if k != "metadata"} == {
        k: v for k, v in current.items() if k != "metadata"
    }


class FlowControlAPI:
    """``/apis/flowcontrol.apiserver.k8s.io/v1/<resource>[/<name>[/status]]`` and the
    ``watch/`` paths, over one :class:`Registry` per resource (cluster-scoped keys)."""

    def __init__(
        self,
        clock: IReactorTime,
        registries: Mapping[str, Registry],
        *,
        min_request_timeout: float = 1800.0,
        missing_level: Callable[[str], bool] = lambda _: False,
        new_uid: Callable[[], str] = new_uuid,
        wall_clock: Callable[[], float] = time.time,
        admission: Admission | None = None,
    ) -> None:
        self.clock = clock
        self.registries = dict(registries)
        self.min_request_timeout = min_request_timeout
        #: Whether a priority level name is not configured (the MissingPL column).
        self.missing_level = missing_level
        self.new_uid = new_uid
        self.wall_clock = wall_clock
        self.rng = random.Random()
        #: Admission (apiserver.admission) around every write; None: no plugin acts.
        self.admission = admission

    # --- dispatch ----------------------------------------------------------------------------

    def handle(self, request: HTTPRequest, info: RequestInfo) -> HandlerResult:
        path = info.path
        watch_path = path.startswith(WATCH_BASE)
        rest = path[len(WATCH_BASE if watch_path else BASE) :].split("/")
        kind = KINDS.get(rest[0])
        if kind is None or len(rest) > 3 or (len(rest) == 3 and rest[2] != "status"):
            return errors.StatusError(
                404, "NotFound", "the server could not find the requested resource", {}
            ).response()
        name = rest[1] if len(rest) > 1 and rest[1] else None
        status = len(rest) == 3
        method = info.method
        handlers: dict[str, Callable[..., Coroutine[Any, Any, Any]]]
        if watch_path or (status and name is None):
            handlers = {} if status else {"GET": self.watch}
        elif name is not None:
            handlers = {"GET": self.get, "PUT": self.update, "PATCH": self.patch}
            if not status:
                handlers["DELETE"] = self.delete
        else:
            handlers = {
                "GET": self.list_or_watch,
                "POST": self.create,
                "DELETE": self.delete_collection,
            }
        handler = handlers.get(method)
        if handler is None:
            return errors.method_not_supported().response()
        return self._run(handler(request, info, kind, name, status))

    @staticmethod
    def _run(coro: Coroutine[Any, Any, Any]) -> Deferred[Any]:
        def to_status(failure: Failure) -> Any:
            if failure.check(errors.StatusError):
                return failure.value.response()  # type: ignore[union-attr]
            if failure.check(CompactedError):
                return errors.expired(
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter."
                ).response()
            if failure.check(StorageTimeoutError):
                return errors.timeout(
                    "Timeout: request did not complete within requested timeout - "
                    "context deadline exceeded"
                ).response()
            if failure.check(UnavailableError):
                return errors.internal_error(failure.getErrorMessage()).response()
            return failure

        return Deferred.fromCoroutine(coro).addErrback(to_status)

    def _table_wanted(self, request: HTTPRequest) -> bool:
        return "as=Table" in _header(request, b"accept")

    def _object_response(
        self, request: HTTPRequest, kind: Kind, code: int, obj: Obj, warnings: Sequence[str] = ()
    ) -> Response:
        if self._table_wanted(request):
            return _json(code, self._table(kind, [obj], None), warnings)
        return _json(code, to_wire(kind, obj), warnings)

    def _table(self, kind: Kind, objects: Sequence[Obj], revision: int | None) -> Obj:
        now = self.wall_clock()
        rows = [
            {
                "cells": _cells(
                    kind.resource,
                    obj,
                    now,
                    kind is FLOW_SCHEMAS
                    and self.missing_level(
                        ((obj.get("spec") or {}).get("priorityLevelConfiguration") or {}).get(
                            "name", ""
                        )
                    ),
                ),
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj["metadata"],
                },
            }
            for obj in objects
        ]
        meta: Obj = {}
        if revision is not None:
            meta["resourceVersion"] = str(revision)
        return {
            "kind": "Table",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": meta,
            "columnDefinitions": COLUMNS[kind.resource],
            "rows": rows,
        }

    # --- reads -------------------------------------------------------------------------------

    async def get(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: str, status: bool
    ) -> Response:
        obj = await self.registries[kind.resource].get("", name)
        return self._object_response(request, kind, 200, obj)

    def _selector(self, info: RequestInfo) -> Callable[[Obj], bool] | None:
        opts = request_options.parse_list_options(info.query)
        request_options.validate_list_options(opts, is_watch=False)
        labels = opts.label_selector
        fields = opts.field_selector
        if labels.empty and fields.empty:
            return None
        name = fields.requires_exact_match("metadata.name") if not fields.empty else None

        def keep(obj: Obj) -> bool:
            meta = obj.get("metadata") or {}
            if name is not None and meta.get("name") != name:
                return False
            return labels.empty or labels.matches(meta.get("labels") or {})

        return keep

    async def list_or_watch(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: None, status: bool
    ) -> Any:
        watch = info.query.get(b"watch")
        if watch and watch[-1].lower() not in (b"0", b"false"):
            return await self.watch(request, info, kind, None, False)
        keep = self._selector(info)
        opts = request_options.parse_list_options(info.query)
        registry = self.registries[kind.resource]
        prefix = registry.prefix(None)
        start_key = b""
        revision = 0
        if opts.continue_:
            if (opts.resource_version or "") not in ("", "0"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            try:
                start, token_rv = tokens.decode_continue(opts.continue_, prefix.decode())
            except tokens.ContinueTokenError as error:
                raise errors.bad_request(str(error)) from None
            start_key, revision = start.encode(), max(token_rv, 0)
        page = await registry.list_page(
            None,
            start_key=start_key,
            revision=revision,
            limit=opts.limit or 0,
            keep=keep,
            want_remaining=keep is None,
        )
        list_meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
        if page.next_key is not None:
            list_meta["continue"] = tokens.encode_continue(
                page.next_key[len(prefix) :].rstrip(b"\x00").decode(), page.revision
            )
            if page.remaining is not None:
                list_meta["remainingItemCount"] = page.remaining
        if self._table_wanted(request):
            table = self._table(kind, page.items, page.revision)
            table["metadata"] = list_meta
            return _json(200, table)
        return _json(
            200,
            {
                "kind": kind.kind + "List",
                "apiVersion": API_VERSION,
                "metadata": list_meta,
                "items": [to_wire(kind, obj) for obj in page.items],
            },
        )

    # --- writes ------------------------------------------------------------------------------

    def _decode(self, request: HTTPRequest, kind: Kind, validation: str) -> tuple[Obj, list[str]]:
        fmt = negotiation.negotiate_body(_header(request, b"content-type") or None)
        if fmt == "protobuf":
            raise errors.unsupported_media_type()
        raw = request.content.read() if request.content is not None else b""
        obj = decode_document(raw, fmt)
        errors.check_type_meta(obj, API_VERSION, kind.kind, VERSION)
        warnings: list[str] = []
        if validation != "Ignore":
            problems = strict_errors(raw, fmt, kind.schema, decoded=obj)
            if problems and validation == "Strict":
                raise errors.bad_request(
                    f'{kind.kind} in version "{VERSION}" cannot be handled as a {kind.kind}: '
                    f"strict decoding error: {', '.join(problems)}"
                )
            warnings = problems
        return normalize(kind, obj), warnings

    def _manager(self, request: HTTPRequest, opts: Any) -> str:
        return request_options.field_manager_or_user_agent(
            opts.field_manager or "", _header(request, b"user-agent")
        )

    def _track(
        self, kind: Kind, old: Obj | None, new: Obj, manager: str, subresource: str = ""
    ) -> None:
        """managedFields of a create/update (``FieldManager.UpdateNoErrors``)."""
        entries = update_managed_fields(
            to_wire(kind, old) if old is not None else None,
            to_wire(kind, new),
            manager,
            "Update",
            API_VERSION,
            _now_text(self.clock),
            kind.schema,
            subresource=subresource,
        )
        meta = metadata(new)
        if entries:
            meta["managedFields"] = entries
        else:
            meta.pop("managedFields", None)

    async def _admit(
        self,
        operation: Operation,
        info: RequestInfo,
        kind: Kind,
        obj: Obj | None,
        old: Obj | None,
        *,
        dry_run: bool,
        subresource: str = "",
    ) -> None:
        """Mutating then validating admission of a write (the handlers' admission calls)."""
        admission = self.admission
        if admission is None:
            return
        named = obj if obj is not None else old
        attributes = Attributes(
            operation,
            GROUP,
            VERSION,
            kind.resource,
            kind.kind,
            "",
            (metadata(named).get("name") or "") if named is not None else "",
            obj,
            old,
            subresource=subresource,
            dry_run=dry_run,
            user=info.user,
        )
        if operation != DELETE:
            await run_mutating(admission, attributes)
        await run_validating(admission, attributes)

    def _invalid(self, kind: Kind, name: str, errs: list[FieldError]) -> errors.StatusError:
        return errors.invalid_error(kind.kind, name, errs, GROUP)

    async def create(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: None, status: bool
    ) -> Response:
        opts = request_options.parse_write_options(info.query)
        request_options.validate_create_options(opts)
        obj, warnings = self._decode(request, kind, opts.effective_field_validation)
        meta = metadata(obj)
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = generate_name(str(meta["generateName"]))
        self._prepare_create(kind, obj)
        await self._admit(CREATE, info, kind, obj, None, dry_run=opts.is_dry_run)
        self._track(kind, None, obj, self._manager(request, opts))
        created = await self.registries[kind.resource].create(obj, dry_run=opts.is_dry_run)
        return self._object_response(request, kind, 201, created, warnings)

    def _prepare_create(self, kind: Kind, obj: Obj) -> None:
        """PrepareForCreate (no status, the first generation), server fields, defaults,
        validation."""
        meta = metadata(obj)
        if not meta.get("namespace"):
            meta.pop("namespace", None)
        obj["status"] = {}
        meta["generation"] = 1
        meta["uid"] = self.new_uid()
        meta["creationTimestamp"] = _now_text(self.clock)
        kind.default(obj)
        errs = kind.validate(to_wire(kind, obj))
        if errs:
            raise self._invalid(kind, meta.get("name") or "", errs)

    def _prepare_update(
        self,
        kind: Kind,
        current: Obj,
        new: Obj,
        status: bool,
        manager: str,
        track: bool = True,
    ) -> Obj:
        """The strategies' PrepareForUpdate, the identity checks and validation."""
        cur_meta = metadata(current)
        meta = metadata(new)
        name = cur_meta.get("name", "")
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        meta["name"] = name
        if not meta.get("namespace"):
            meta.pop("namespace", None)
        rv = meta.get("resourceVersion")
        if rv and rv != cur_meta.get("resourceVersion"):
            raise errors.conflict(kind.group_resource, name, MODIFIED)
        if meta.get("uid") and meta["uid"] != cur_meta.get("uid"):
            raise errors.conflict(
                kind.group_resource,
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, UID in object meta: "
                f"{cur_meta.get('uid', '')}",
            )
        if status:
            managed = meta.get("managedFields")
            new["metadata"] = meta = dict(cur_meta)
            if managed is not None:
                meta["managedFields"] = managed
            new["spec"] = current.get("spec")
        else:
            new["status"] = current.get("status") or {}
            meta["uid"] = cur_meta.get("uid")
            meta["creationTimestamp"] = cur_meta.get("creationTimestamp")
            generation = cur_meta.get("generation") or 1
            kind.default(new)
            meta["generation"] = (
                generation + 1 if new.get("spec") != current.get("spec") else generation
            )
        meta.pop("resourceVersion", None)
        wire = to_wire(kind, new)
        errs = types.validate_status(wire) if status else kind.validate(wire)
        if errs:
            raise self._invalid(kind, name, errs)
        if _same_but_bookkeeping(new, current):
            raise NoChange  # nothing to write, managed fields included (as kube skips it)
        if track:  # server-side apply recorded its own managed fields
            self._track(kind, current, new, manager, "status" if status else "")
        return new

    async def update(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: str, status: bool
    ) -> Response:
        opts = request_options.parse_write_options(info.query)
        request_options.validate_update_options(opts)
        body, warnings = self._decode(request, kind, opts.effective_field_validation)
        manager = self._manager(request, opts)
        registry = self.registries[kind.resource]

        async def try_update(current: Obj | None) -> Obj | None:
            if current is None:
                raise errors.not_found(kind.group_resource, name)
            new = self._prepare_update(
                kind, current, orjson.loads(orjson.dumps(body)), status, manager
            )
            await self._admit(
                UPDATE,
                info,
                kind,
                new,
                current,
                dry_run=opts.is_dry_run,
                subresource="status" if status else "",
            )
            return new

        result, _ = await registry.guaranteed_update(
            "", name, try_update, dry_run=opts.is_dry_run, allow_create=False
        )
        return self._object_response(request, kind, 200, result, warnings)

    async def patch(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: str, status: bool
    ) -> Response:
        content_type = _header(request, b"content-type")
        patch_type = negotiation.patch_type(content_type or None)
        opts = request_options.parse_write_options(info.query)
        request_options.validate_patch_options(opts, patch_type)
        raw = request.content.read() if request.content is not None else b""
        manager = self._manager(request, opts)
        patcher = Patcher(
            patch_type,
            raw,
            manager=manager,
            api_version=API_VERSION,
            force=bool(opts.force),
            validation=opts.effective_field_validation,
            schema=kind.schema,
            kind=kind.kind,
            track_managed_fields=False,
        )
        registry = self.registries[kind.resource]
        applying = patcher.patch_type == "apply"

        async def try_update(current: Obj | None) -> Obj | None:
            if current is None:
                if not applying or status:
                    raise errors.not_found(kind.group_resource, name)
                # patch.go: server-side apply creates a missing object (forceAllowCreate).
                created = normalize(kind, patcher.apply(None, _now_text(self.clock)))
                meta = metadata(created)
                if meta.get("name", name) != name:
                    raise errors.bad_request(
                        f"the name of the object ({meta['name']}) does not match the name on "
                        f"the URL ({name})"
                    )
                meta["name"] = name
                self._prepare_create(kind, created)
                await self._admit(CREATE, info, kind, created, None, dry_run=opts.is_dry_run)
                return created
            patched = normalize(kind, patcher.apply(to_wire(kind, current), _now_text(self.clock)))
            meta = metadata(patched)
            if not applying:
                # The patch's resourceVersion is a precondition; none means "the current one".
                meta.setdefault("resourceVersion", metadata(current).get("resourceVersion"))
            else:
                meta["resourceVersion"] = metadata(current).get("resourceVersion")
            new = self._prepare_update(kind, current, patched, status, manager, not applying)
            if new == current:
                raise NoChange
            await self._admit(
                UPDATE,
                info,
                kind,
                new,
                current,
                dry_run=opts.is_dry_run,
                subresource="status" if status else "",
            )
            return new

        result, created = await registry.guaranteed_update(
            "", name, try_update, dry_run=opts.is_dry_run, allow_create=applying and not status
        )
        return self._object_response(
            request, kind, 201 if created else 200, result, patcher.warnings
        )

    def _delete_options(self, request: HTTPRequest, info: RequestInfo) -> Any:
        raw = request.content.read() if request.content is not None else b""
        fmt = "json"
        if raw.strip():
            fmt = negotiation.negotiate_body(_header(request, b"content-type") or None)
        opts = request_options.parse_delete_options(info.query, raw, fmt)
        request_options.validate_delete_options(opts)
        return opts

    def _delete_admission(
        self, info: RequestInfo, kind: Kind, dry_run: bool
    ) -> Callable[[Obj], Coroutine[Any, Any, None]] | None:
        if self.admission is None:
            return None

        async def validate(current: Obj) -> None:
            await self._admit(DELETE, info, kind, None, current, dry_run=dry_run)

        return validate

    async def delete(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: str, status: bool
    ) -> Response:
        opts = self._delete_options(request, info)
        deleted = await self.registries[kind.resource].delete(
            "",
            name,
            _check_preconditions(kind, opts),
            dry_run=opts.is_dry_run,
            validate=self._delete_admission(info, kind, opts.is_dry_run),
        )
        meta = metadata(deleted)
        return _json(
            200,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {
                    "name": meta.get("name", ""),
                    "group": GROUP,
                    "kind": kind.resource,
                    "uid": meta.get("uid", ""),
                },
            },
        )

    async def delete_collection(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: None, status: bool
    ) -> Response:
        opts = self._delete_options(request, info)
        keep = self._selector(info)
        registry = self.registries[kind.resource]
        page = await registry.list_page(None, keep=keep)
        deleted = []
        for obj in page.items:
            try:
                gone = await registry.delete(
                    "",
                    metadata(obj)["name"],
                    _check_preconditions(kind, opts),
                    dry_run=opts.is_dry_run,
                    validate=self._delete_admission(info, kind, opts.is_dry_run),
                )

            except errors.StatusError as error:
                if error.code == 404:
                    continue
                raise
            deleted.append(to_wire(kind, gone))
        return _json(
            200,
            {
                "kind": kind.kind + "List",
                "apiVersion": API_VERSION,
                "metadata": {"resourceVersion": str(page.revision)},
                "items": deleted,
            },
        )

    # --- watch -------------------------------------------------------------------------------

    async def watch(
        self, request: HTTPRequest, info: RequestInfo, kind: Kind, name: str | None, status: bool
    ) -> object:
        opts = request_options.parse_list_options(info.query, watch_path=True)
        request_options.validate_list_options(opts, is_watch=True)
        keep = self._selector(info)
        if name is None and info.path.startswith(WATCH_BASE):
            parts = info.path[len(WATCH_BASE) :].split("/")
            name = parts[1] if len(parts) > 1 and parts[1] else None
        if name is not None:
            wanted = name
            outer = keep

            def keep(obj: Obj) -> bool:
                return metadata(obj).get("name") == wanted and (outer is None or outer(obj))

        registry = self.registries[kind.resource]
        rv_text = opts.resource_version or ""
        initial: list[Obj] = []
        if rv_text in ("", "0"):
            page = await registry.list_page(None, keep=keep)
            initial, start = page.items, page.revision + 1
        else:
            try:
                start = int(rv_text) + 1
            except ValueError:
                raise errors.bad_request(
                    f'resourceVersion: Invalid value: "{rv_text}": must be a valid integer'
                ) from None
        table = self._table_wanted(request)
        request.setResponseCode(200)
        request.responseHeaders.setRawHeaders(b"content-type", [b"application/json"])
        request.responseHeaders.setRawHeaders(b"cache-control", [b"no-cache, private"])

        def line(event_type: str, obj: Obj) -> bytes:
            body = self._table(kind, [obj], None) if table else to_wire(kind, obj)
            return orjson.dumps({"type": event_type, "object": body}) + b"\n"

        request.write(b"".join(line("ADDED", obj) for obj in initial))
        state: dict[str, Any] = {"watch": None, "timer": None}

        def end() -> None:
            watch_ = state["watch"]
            state["watch"] = None
            if watch_ is not None:
                watch_.cancel()
            timer: IDelayedCall | None = state["timer"]
            if timer is not None and timer.active():
                timer.cancel()
            if not request.finished and not request._disconnected:
                request.finish()

        def deliver(event: WatchEvent) -> None:
            if event.type == "BOOKMARK" or request.finished or request._disconnected:
                return
            if event.type == "PUT":
                obj = registry.decode(event.kv)
                was = registry.decode(event.prev_kv) if event.prev_kv is not None else None
                now_kept = keep is None or keep(obj)
                was_kept = was is not None and (keep is None or keep(was))
                if now_kept:
                    kind_ = "MODIFIED" if was_kept else "ADDED"
                    request.write(line(kind_, obj))
                elif was_kept and was is not None:
                    request.write(line("DELETED", obj))
            elif event.prev_kv is not None:
                old = registry.decode(event.prev_kv)
                if keep is None or keep(old):
                    meta = {**metadata(old), "resourceVersion": str(event.kv.mod_revision)}
                    request.write(line("DELETED", {**old, "metadata": meta}))

        def failed(failure: Failure) -> None:
            if failure.check(CompactedError):
                status_ = {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "metadata": {},
                    "status": "Failure",
                    "message": "The resourceVersion for the provided watch is too old.",
                    "reason": "Expired",
                    "code": 410,
                }
                if not request.finished and not request._disconnected:
                    request.write(orjson.dumps({"type": "ERROR", "object": status_}) + b"\n")
            end()

        watch_: PausableWatch = registry.watch(None, start, deliver)
        state["watch"] = watch_
        watch_.done.addCallbacks(lambda _: end(), failed)
        timeout = (
            float(opts.timeout_seconds)
            if opts.timeout_seconds
            else self.min_request_timeout * (1 + self.rng.random())
        )
        state["timer"] = self.clock.callLater(timeout, end)
        request.notifyFinish().addBoth(lambda _: end())
        return STREAMING


__all__ = [
    "BASE",
    "FLOW_SCHEMAS",
    "KINDS",
    "PRIORITY_LEVELS",
    "FlowControlAPI",
    "Kind",
    "discovery_group",
    "to_wire",
]
