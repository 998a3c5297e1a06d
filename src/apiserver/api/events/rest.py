"""The REST handlers of events: get, list, watch, create, update, patch, delete and
deletecollection, with kube-apiserver's semantics, for one served version each
(``events.k8s.io/v1`` or core ``v1``, an :class:`~apiserver.api.events.views.EventView`).

Follows k8s.io/apiserver ``pkg/endpoints/handlers/{get,create,update,patch,delete,watch}.go``
and ``pkg/registry/generic/registry/store.go``. Both versions share one registry (one stored
object, two views, as kube-apiserver's cohabiting event storage); objects are handled in the
internal shape (core v1 field names) and requests and responses are converted at this
boundary by the view, which also decides the error texts' group, the schema, the validation
rule set and the accepted field labels.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextvars import Context, copy_context
from typing import Any

import attrs
import orjson
import yaml
from twisted.internet.defer import Deferred, fail, gatherResults
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.admission import (
    CREATE,
    DELETE,
    UPDATE,
    Admission,
    Attributes,
    Operation,
    run_mutating,
    run_validating,
)
from apiserver.api.events import convert, deletion, selection, validation
from apiserver.api.events.createfields import CreateManagedFields
from apiserver.api.events.encoding import EncodedEvents, ListBodies
from apiserver.api.events.protowire import EventsProtobuf, decode_delete_options
from apiserver.api.events.tables import partial_object, table_for
from apiserver.api.events.views import CORE_V1, EVENTS_V1, EventView, other_versions
from apiserver.api.events.watchstream import WatchStream
from apiserver.apimachinery import continue_token as tokens
from apiserver.apimachinery import errors, negotiation, request_options, strict_fast
from apiserver.apimachinery import patch as fieldmanagement
from apiserver.apimachinery.fields import FieldSelector, escape_value, parse_field_selector
from apiserver.apimachinery.labels import LabelSelector
from apiserver.apimachinery.managedfields import update_managed_fields
from apiserver.apimachinery.meta_time import format_seconds
from apiserver.apimachinery.names import generate_name
from apiserver.apimachinery.uid import new_uuid
from apiserver.gocompat import deepjson, yamlguard
from apiserver.http.app import STREAMING, RequestInfo, header_value
from apiserver.http.coalesce import WriteCoalescer
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.http.watchevents import watch_event_counts
from apiserver.registry import codec
from apiserver.registry.store import Obj, Registry, TryUpdate, metadata
from apiserver.storage.interface import (
    CompactedError,
    FutureRevisionError,
    StorageTimeoutError,
    UnavailableError,
)

log = Logger()

GROUP = "events.k8s.io"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
BASE = f"/apis/{API_VERSION}/"
GR = errors.GroupResource(GROUP, "events")
KIND = "Event"
WIPED_ON_CREATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
)
KEPT_ON_UPDATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)
EXPIRED_LIST = "The resourceVersion for the provided list is too old."
EXPIRED_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted between "
    "the time the first chunk was returned and now may show up in the list."
)


#: How many parsed paths ``EventsAPI.handle`` keeps (all are dropped when full).
TARGETS_MAX = 4096
_UNPARSED = object()

#: go-restful's refusal of a method no route serves, negotiated like every Status.
_NO_METHOD = errors.method_not_supported()


@attrs.frozen
class Target:
    """What a path under ``/apis/events.k8s.io/v1/`` addresses."""

    namespace: str | None
    name: str | None
    watch_path: bool

    @property
    def is_item(self) -> bool:
        return self.name is not None


def parse_target(path: str, base: str = BASE, resource: str = "events") -> Target | None:
    """``namespaces/{ns}/<resource>[/{name}]``, ``<resource>``, and the ``watch/`` forms under
    ``base``."""
    if not path.startswith(base):
        return None
    parts = path[len(base) :].split("/")
    watch_path = False
    if parts and parts[0] == "watch":
        watch_path = True
        parts = parts[1:]
    if len(parts) == 1 and parts[0] == resource:
        return Target(None, None, watch_path)
    if len(parts) in (3, 4) and parts[0] == "namespaces" and parts[2] == resource and parts[1]:
        if len(parts) == 4:
            if not parts[3]:
                return None
            return Target(parts[1], parts[3], watch_path)
        return Target(parts[1], None, watch_path)
    return None


class EventsAPI:
    """Serves every path of one events version (``view``); one instance per served version,
    all over the same registry."""

    def __init__(
        self,
        registry: Registry,
        clock: IReactorTime,
        *,
        min_request_timeout: float = 1800.0,
        delete_collection_workers: int = 1,
        lifecycle: Any = None,
        rng: random.Random | None = None,
        list_cached: Callable[[bytes, int], Deferred[Any]] | None = None,
        admission: Admission | None = None,
        view: EventView = EVENTS_V1,
    ) -> None:
        self.view = view
        self._base = view.base
        self._resource = view.resource
        self._kind = view.kind
        self._list_kind = view.kind + "List"
        api = view.api_version
        self._validate_create_rules = view.validate_create or (
            lambda obj: validation.validate_create(obj, api=api)
        )
        self._validate_update_rules = view.validate_update or (
            lambda new, old: validation.validate_update(new, old, api=api)
        )
        field_label = view.field_label or (
            lambda label, value: selection.convert_field_label(api, label, value)
        )
        self._field_label = field_label
        #: Managed fields of the other served version, compared in their own field names.
        self._other_versions = other_versions(view)
        self.gr = view.group_resource
        self.watch_counts = watch_event_counts(view.group, view.version, view.resource)
        self.to_wire = view.to_wire
        # The registry's not-found and conflict texts name this view's group.
        registry = registry.for_group_resource(self.gr)
        self.registry = registry
        #: Admission between decoding and storage (apiserver.admission); None: none at all.
        self.admission = admission
        self.clock = clock
        self.min_request_timeout = min_request_timeout
        self.delete_workers = max(1, delete_collection_workers)
        self.lifecycle = lifecycle
        self.rng = rng or random.Random()
        self.list_cached = list_cached
        self.encoded = EncodedEvents(
            api_version=view.api_version, to_item=lambda o: view.to_wire(o, False), kind=view.kind
        )
        self.list_bodies = ListBodies()
        #: application/vnd.kubernetes.protobuf bodies and answers (api/events/protowire.py).
        self.protobuf = EventsProtobuf(view.api_version, view.to_wire, kind=view.kind)
        self._outputs: dict[tuple[str | None, bool, bool], Any] = {}
        #: parse_target's answers by path (see ``handle``).
        self._targets: dict[str, Any] = {}
        self.create_fields = CreateManagedFields(view.api_version, view.schema, view.to_wire)
        #: Watch output leaves in one write per stream and reactor turn (http/coalesce.py).
        self.coalescer = WriteCoalescer(clock)

    # --- dispatch ------------------------------------------------------------------------

    def handle(self, request: HTTPRequest, info: RequestInfo) -> Response | Deferred[Any] | object:
        # A path's target is a pure function of it, and frozen: clients ask for the same
        # paths again and again, so each is parsed once (bounded).
        path = info.path
        targets = self._targets
        target = targets.get(path, _UNPARSED)
        if target is _UNPARSED:
            target = parse_target(path, self._base, self._resource)
            if len(targets) >= TARGETS_MAX:
                targets.clear()
            targets[path] = target
        if target is None:
            return self._error(request, errors.ROUTE_NOT_FOUND)
        method = info.method
        if target.watch_path:
            if method != "GET":
                return self._error(request, _NO_METHOD)
            return self._run(self.watch(request, info, target), request)
        if target.is_item:
            if method == "GET":
                answer = self._get_now(request, info, target)
                if answer is not None:
                    return answer
            handler = {
                "GET": self.get,
                "PUT": self.update,
                "PATCH": self.patch,
                "DELETE": self.delete,
            }.get(method)
        elif target.namespace is None:
            handler = {"GET": self.list_or_watch}.get(method)
        elif method == "POST":
            return self._create_now(request, info, target)
        else:
            handler = {
                "GET": self.list_or_watch,
                "DELETE": self.delete_collection,
            }.get(method)
        if handler is None:
            return self._error(request, _NO_METHOD)
        return self._run(handler(request, info, target), request)

    def _run(self, coro: Coroutine[Any, Any, Any], request: HTTPRequest) -> Deferred[Any]:
        return Deferred.fromCoroutine(coro).addErrback(self._to_status, request)

    def _to_status(self, failure: Any, request: HTTPRequest) -> Any:
        """The Status answer of a failed handler: its StatusError, or a storage error
        mapped as the reference maps it; anything else stays a failure (a 500)."""
        error = failure.check(errors.StatusError)
        if error is not None:
            return self._error(request, failure.value)
        if failure.check(CompactedError):
            return self._error(request, errors.expired(EXPIRED_LIST))
        if failure.check(StorageTimeoutError):
            # etcd3 store: a request that hit its context deadline
            # (``storage.NewTimeoutError``).
            return self._error(
                request,
                errors.timeout(
                    "Timeout: request did not complete within requested timeout - "
                    "context deadline exceeded"
                ),
            )
        if failure.check(UnavailableError):
            return self._error(request, errors.internal_error(failure.getErrorMessage()))
        return failure

    # --- shared pieces ---------------------------------------------------------------------

    @staticmethod
    def _error(request: HTTPRequest, error: errors.StatusError) -> Response:
        """The Status of ``error``, in protobuf when Accept picks protobuf (``ErrorNegotiated``)."""
        return negotiation.error_response(error, header_value(request, b"accept"))

    def _output(
        self, request: HTTPRequest, info: RequestInfo, *, is_list: bool, is_watch: bool
    ) -> Any:
        accept = header_value(request, b"accept") or None
        key = (accept, is_list, is_watch)
        known = self._outputs.get(key)
        if known is not None:
            return known
        out = negotiation.negotiate_output(accept, is_list=is_list, is_watch=is_watch)
        # Negotiation is a pure function of these three and its result is frozen: clients
        # send the same few Accept headers, so the answers are kept (bounded; errors are not).
        if len(self._outputs) < 256:
            self._outputs[key] = out
        return out

    def _plain_json(self, request: HTTPRequest, info: RequestInfo, out: Any) -> bool:
        """Whether ``out`` is compact JSON: the form answered with cached bytes."""
        return bool(out.kind == "json" and not self._pretty(request, info, out))

    def _pretty(self, request: HTTPRequest, info: RequestInfo, out: Any = None) -> bool:
        if out is not None and getattr(out, "pretty", False):
            return True
        return negotiation.wants_pretty(info.query, header_value(request, b"user-agent"))

    def _respond(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        code: int,
        obj: Any,
        out: Any,
        warnings: Sequence[str] = (),
    ) -> Response:
        media = (
            "yaml"
            if out.kind == "yaml" or out.media_type.startswith("application/yaml")
            else "json"
        )
        if out.media_type == negotiation.PROTOBUF:
            return self.protobuf.response(code, obj, warnings)
        body = codec.encode(obj, media, self._pretty(request, info, out))
        headers: list[tuple[str, str]] = [("Content-Type", out.media_type)]
        for warning in warnings:
            headers.append(("Warning", f"299 - {errors.go_quote(warning)}"))
        return Response(code, tuple(headers), body)

    def _render_object(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        code: int,
        internal: Obj,
        warnings: Sequence[str] = (),
        *,
        stored: bool = False,
    ) -> Response:
        out = self._output(request, info, is_list=False, is_watch=False)
        if not warnings and self._plain_json(request, info, out):
            # Compact JSON, one header: a stored revision's cached bytes, else (a write's
            # answer) what _respond would write, without its general steps.
            if stored:
                data = self.encoded.object(internal) + b"\n"
            elif out.media_type.startswith("application/yaml"):
                return self._respond(request, info, code, self.to_wire(internal), out)
            else:
                data = codec.encode_json(self.to_wire(internal))
            return Response(code, (("Content-Type", out.media_type),), data)
        if stored and out.kind == "protobuf":
            return self.protobuf.plain(code, self.protobuf.object(internal))
        if out.kind == "table":
            body = table_for(
                [internal],
                out.version,
                {"resourceVersion": metadata(internal).get("resourceVersion", "")},
                negotiation.include_object(info.query),
                self.clock.seconds(),
                self.to_wire,
                self.view.table_row,
                self.view.columns,
            )
        elif out.kind == "partial":
            body = partial_object(internal, out.version)
        else:
            body = self.to_wire(internal)
        return self._respond(request, info, code, body, out, list(warnings))

    def _decode_body(self, request: HTTPRequest, field_validation: str) -> tuple[Obj, list[str]]:
        """The request body, decoded (its internal form: the object a create or update
        writes), and the strict-decoding warnings; decoding, the strict check, the type meta
        check and the conversion in the order of k8s.io/apiserver
        pkg/endpoints/handlers/create.go (each may fail with its Status error).

        The view's generated decoder (:mod:`.fastdecode`) converts the usual body at once
        and says it has no unknown field; with no duplicate key either
        (:func:`strict_fast.no_duplicates`) the full strict check has nothing to find.
        Anything it does not vouch for goes the general way, which words every error."""
        fmt = negotiation.negotiate_body(header_value(request, b"content-type") or None)
        raw = request.content.read() if request.content is not None else b""
        internal: Obj | None = None
        warnings: list[str] = []
        if fmt == "protobuf":
            # Strict field validation has nothing to check in protobuf.
            body = self.protobuf.decode_body(raw)
        else:
            body = decode_document(raw, fmt, self._kind)
            fast = self.view.decode_fast
            if fast is not None:
                internal = fast(body)
            if internal is None or (
                field_validation != "Ignore"
                and (fmt != "json" or not strict_fast.no_duplicates(raw, body))
            ):
                warnings = self._strict(raw, fmt, field_validation, body)
        self._check_type_meta(body)
        if internal is None:
            internal = self._to_internal(body)
        return internal, warnings

    def _strict(self, raw: bytes, fmt: str, field_validation: str, obj: Obj) -> list[str]:
        if field_validation == "Ignore":
            return []
        problems = fieldmanagement.strict_errors(raw, fmt, self.view.schema, decoded=obj)
        if not problems:
            return []
        if field_validation == "Strict":
            raise errors.bad_request(
                f'{self._kind} in version "{self.view.version}" cannot be handled as a '
                f"{self._kind}: strict decoding error: {', '.join(problems)}"
            )
        return problems

    def _check_type_meta(self, obj: Obj) -> None:
        errors.check_type_meta(obj, self.view.api_version, self._kind, self.view.version)

    def _to_internal(self, obj: Obj) -> Obj:
        try:
            return self.view.to_internal(obj)
        except convert.DecodeError as error:
            raise errors.bad_request(
                f'{self._kind} in version "{self.view.version}" cannot be handled as a '
                f"{self._kind}: {error}"
            ) from None

    def _manager(self, request: HTTPRequest, opts: Any) -> str:
        return request_options.field_manager_or_user_agent(
            opts.field_manager or "", header_value(request, b"user-agent")
        )

    # --- get -----------------------------------------------------------------------------

    async def get(self, request: HTTPRequest, info: RequestInfo, target: Target) -> Response:
        assert target.namespace is not None and target.name is not None
        rv = _query_str(info.query, b"resourceVersion")
        if rv not in ("", "0"):
            wanted = _parse_rv(rv)
            current = await self.registry.current_revision()
            if wanted > current:
                raise errors.too_large_resource_version(wanted, current)
        obj = await self.registry.get(target.namespace, target.name)
        return self._render_object(request, info, 200, obj, stored=True)

    def _get_now(self, request: HTTPRequest, info: RequestInfo, target: Target) -> Response | None:
        """A GET answered without a coroutine when the store knows the object at once (the
        embedded store's committed state: the answer :meth:`get` would give); else None."""
        assert target.namespace is not None and target.name is not None
        if _query_str(info.query, b"resourceVersion") not in ("", "0"):
            return None
        try:
            # A stored value that cannot be read (encryption at rest) is a Status 500 here too.
            known, obj = self.registry.get_now(target.namespace, target.name)
            if not known:
                return None
            if obj is None:
                raise errors.not_found(self.gr, target.name)
            return self._render_object(request, info, 200, obj, stored=True)
        except errors.StatusError as error:
            return self._error(request, error)

    # --- admission -------------------------------------------------------------------------

    def _attributes(
        self,
        operation: Operation,
        info: RequestInfo,
        namespace: str,
        obj: Obj | None,
        old: Obj | None = None,
        dry_run: bool = False,
    ) -> Attributes:
        """What admission is told (``admission.NewAttributesRecord`` in the handlers): on
        DELETE ``obj`` is None and ``old`` the object being deleted."""
        named = obj if obj is not None else old
        return Attributes(
            operation,
            self.view.group,
            self.view.version,
            self._resource,
            self._kind,
            namespace,
            (metadata(named).get("name") or "") if named is not None else "",
            obj,
            old,
            dry_run=dry_run,
            user=info.user,
        )

    # --- create ----------------------------------------------------------------------------

    def _create_input(
        self, request: HTTPRequest, info: RequestInfo, target: Target
    ) -> tuple[Any, list[str], Obj, dict[str, Any], str]:
        """What a create writes, before admission: the options, the strict-decoding
        warnings, the decoded object, its metadata and the field manager (create.go up to
        its admission step)."""
        assert target.namespace is not None
        opts = request_options.parse_write_options(info.query)
        request_options.validate_create_options(opts)
        internal, warnings = self._decode_body(request, opts.effective_field_validation)
        meta = metadata(internal)
        for key in WIPED_ON_CREATE:
            meta.pop(key, None)
        namespace = meta.get("namespace") or ""
        if namespace and namespace != target.namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        meta["namespace"] = target.namespace
        if meta.get("resourceVersion"):
            raise errors.StatusError(
                500, "", "resourceVersion should not be set on objects to be created"
            )
        return opts, warnings, internal, meta, self._manager(request, opts)

    async def create(self, request: HTTPRequest, info: RequestInfo, target: Target) -> Response:
        """``handlers/create.go``: decode, admission, then the write (:meth:`_create_now` is
        the same without a coroutine where nothing but the write can wait)."""
        opts, warnings, internal, meta, manager = self._create_input(request, info, target)
        return await self._continue_create(
            request, info, target, opts, warnings, internal, meta, manager
        )

    async def _create_attempts(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        target: Target,
        internal: Obj,
        meta: dict[str, Any],
        manager: str,
        warnings: list[str],
        dry_run: bool,
        first: int,
    ) -> Response:
        """The write, from attempt ``first`` on: a ``generateName`` whose generated name is
        taken is tried again with another (``names.go``'s retries in the create handler)."""
        assert target.namespace is not None
        admission = self.admission
        attempts = _attempts(meta)
        for attempt in range(first, attempts):
            # Only metadata is written to from here on (name, uid, timestamps, managedFields,
            # resourceVersion): a copy of it keeps ``internal`` whole for another attempt.
            cmeta = dict(meta)
            candidate = {**internal, "metadata": cmeta}
            if attempts > 1:
                cmeta["name"] = generate_name(cmeta["generateName"], self.rng)
            self._prepare_create(candidate, manager)
            if admission is not None:
                await run_validating(
                    admission,
                    self._attributes(CREATE, info, target.namespace, candidate, dry_run=dry_run),
                )
            try:
                created = await self.registry.create(candidate, dry_run=dry_run)
            except errors.StatusError as error:
                if error.reason == "AlreadyExists" and attempts > 1:
                    if attempt == attempts - 1:
                        raise errors.generate_name_conflict(self.gr, cmeta["name"]) from None
                    continue
                raise
            if dry_run:
                metadata(created).pop("resourceVersion", None)
            return self._render_object(request, info, 201, created, warnings)
        raise AssertionError("unreachable")

    def _create_now(
        self, request: HTTPRequest, info: RequestInfo, target: Target
    ) -> Response | Deferred[Any]:
        """:meth:`create` without a coroutine when nothing in it can wait but the store's
        write (no admission, not a dry run, values not sealed): the same steps and answers,
        the write's Deferred carrying the rendering. Why: the coroutine's machinery
        (``Deferred.fromCoroutine``, a context copy, two resumptions) was a measurable part
        of a create's reactor time; every other case, and a ``generateName`` retry after a
        taken name, goes through :meth:`create` / :meth:`_create_attempts`."""
        try:
            opts, warnings, internal, meta, manager = self._create_input(request, info, target)
            if self.admission is not None or opts.dry_run or not self.registry.creates_now:
                return self._run(
                    self._continue_create(
                        request, info, target, opts, warnings, internal, meta, manager
                    ),
                    request,
                )
            cmeta = dict(meta)
            candidate = {**internal, "metadata": cmeta}
            if _attempts(meta) > 1:
                cmeta["name"] = generate_name(cmeta["generateName"], self.rng)
            self._prepare_create(candidate, manager)
            d = self.registry.create_now(candidate)
        except errors.StatusError as error:
            return self._error(request, error)
        except Exception:
            return fail().addErrback(self._to_status, request)
        d.addCallbacks(
            self._created,
            self._create_failed,
            callbackArgs=(request, info, warnings),
            # The context of the request (its trace span) for the retries' storage calls.
            errbackArgs=(request, info, target, internal, meta, manager, warnings, copy_context()),
        )
        return d.addErrback(self._to_status, request)

    async def _continue_create(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        target: Target,
        opts: Any,
        warnings: list[str],
        internal: Obj,
        meta: dict[str, Any],
        manager: str,
    ) -> Response:
        """:meth:`create` after :meth:`_create_input`."""
        assert target.namespace is not None
        dry_run = bool(opts.dry_run)
        admission = self.admission
        if admission is not None:
            # Mutating admission sees the decoded object before generateName and the
            # server-set fields, as in handlers/create.go.
            await run_mutating(
                admission,
                self._attributes(CREATE, info, target.namespace, internal, dry_run=dry_run),
            )
            meta = metadata(internal)
        return await self._create_attempts(
            request, info, target, internal, meta, manager, warnings, dry_run, 0
        )

    def _created(
        self, created: Obj, request: HTTPRequest, info: RequestInfo, warnings: list[str]
    ) -> Response:
        return self._render_object(request, info, 201, created, warnings)

    def _create_failed(
        self,
        failure: Failure,
        request: HTTPRequest,
        info: RequestInfo,
        target: Target,
        internal: Obj,
        meta: dict[str, Any],
        manager: str,
        warnings: list[str],
        context: Context,
    ) -> Any:
        """A taken generated name: the remaining attempts, as :meth:`_create_attempts`, in
        the request's context (as if they had run in :meth:`create`'s coroutine)."""
        error = failure.value
        if (
            not isinstance(error, errors.StatusError)
            or error.reason != "AlreadyExists"
            or _attempts(meta) == 1
        ):
            return failure
        return context.run(
            Deferred.fromCoroutine,
            self._create_attempts(
                request, info, target, internal, meta, manager, warnings, False, 1
            ),
        )

    def _prepare_create(self, internal: Obj, manager: str) -> None:
        """Validation, then the server-set fields (uid, creationTimestamp, managedFields)."""
        meta = metadata(internal)
        meta["uid"] = new_uuid()
        meta["creationTimestamp"] = format_seconds(self.clock.seconds())
        self._validate_create(internal)
        self._track_update(None, internal, manager)
        _canonical_meta(internal)

    def _validate_create(self, internal: Obj) -> None:
        errs = self._validate_create_rules(internal)
        if errs:
            raise errors.invalid_error(self._kind, metadata(internal).get("name", "") or "", errs)

    def _track_update(self, old: Obj | None, new: Obj, manager: str) -> None:
        """managedFields for an ``Update`` operation by ``manager`` (v1 field paths)."""
        now = format_seconds(self.clock.seconds())
        if old is None:
            metadata(new)["managedFields"] = self.create_fields.entries(new, manager, now)
            return
        view = self.view
        metadata(new)["managedFields"] = update_managed_fields(
            view.to_wire(old),
            view.to_wire(new),
            manager,
            "Update",
            view.api_version,
            now,
            view.schema,
            views=self._other_versions,
        )

    # --- update ----------------------------------------------------------------------------

    async def update(self, request: HTTPRequest, info: RequestInfo, target: Target) -> Response:
        assert target.namespace is not None and target.name is not None
        opts = request_options.parse_write_options(info.query)
        request_options.validate_update_options(opts)
        new, warnings = self._decode_body(request, opts.effective_field_validation)
        self._check_identity(new, target)
        manager = self._manager(request, opts)
        admission = self.admission
        namespace, dry_run = target.namespace, bool(opts.dry_run)

        async def try_update(current: Obj | None) -> Obj:
            candidate = _deep_copy(new)
            if current is None:
                meta = metadata(candidate)
                for key in WIPED_ON_CREATE:
                    meta.pop(key, None)
                meta.pop("resourceVersion", None)
                if admission is None:
                    self._prepare_create(candidate, manager)
                    return candidate
                attributes = self._attributes(CREATE, info, namespace, candidate, None, dry_run)
                await run_mutating(admission, attributes)
                self._prepare_create(candidate, manager)
                await run_validating(admission, attributes)
                return candidate
            if admission is None:
                return self._prepare_update(candidate, current, manager, check_rv=True)
            attributes = self._attributes(UPDATE, info, namespace, candidate, current, dry_run)
            await run_mutating(admission, attributes)
            updated = self._prepare_update(candidate, current, manager, check_rv=True)
            await run_validating(admission, attributes)
            return updated

        # The UID sent in the body is the precondition of a delete the update may cause
        # (rest/update.go defaultUpdatedObjectInfo.Preconditions).
        obj, created = await self._store_update(
            target, try_update, bool(opts.dry_run), metadata(new).get("uid") or None
        )
        return self._render_object(request, info, 201 if created else 200, obj, warnings)

    def _check_identity(self, obj: Obj, target: Target) -> None:
        meta = metadata(obj)
        name = meta.get("name") or ""
        if name != target.name:
            raise errors.bad_request(
                f"the name of the object ({name}) does not match the name on the URL "
                f"({target.name})"
            )
        namespace = meta.get("namespace") or ""
        if namespace and namespace != target.namespace:
            raise errors.bad_request(
                f"the namespace of the object ({namespace}) does not match the namespace on the "
                f"request ({target.namespace})"
            )
        meta["namespace"] = target.namespace

    def _uid_precondition_failed(self, cur_meta: dict[str, Any], uid: str) -> errors.StatusError:
        """The storage layer's UID precondition failure as the 409 kube-apiserver answers
        (k8s.io/apiserver pkg/storage/errors.go NewInvalidObjError via storeerr)."""
        name = cur_meta.get("name", "")
        return errors.conflict(
            self.gr,
            name,
            "StorageError: invalid object, Code: 4, Key: "
            f"{self.registry.key(cur_meta.get('namespace', ''), name).decode()}, "
            "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in "
            f"precondition: {uid}, UID in object meta: {cur_meta.get('uid', '')}",
        )

    def _prepare_update(
        self, new: Obj, current: Obj, manager: str | None, *, check_rv: bool
    ) -> Obj:
        meta, cur_meta = metadata(new), metadata(current)
        name = cur_meta.get("name", "")
        rv = meta.get("resourceVersion") or ""
        if check_rv and rv and rv != cur_meta.get("resourceVersion"):
            raise errors.conflict(self.gr, name, errors.MODIFIED)
        uid = meta.get("uid") or ""
        if uid and uid != cur_meta.get("uid"):
            raise self._uid_precondition_failed(cur_meta, uid)
        for key in KEPT_ON_UPDATE:
            if key == "uid" and uid:
                continue
            if key in cur_meta:
                meta[key] = cur_meta[key]
            else:
                meta.pop(key, None)
        if "managedFields" not in meta and "managedFields" in cur_meta:
            meta["managedFields"] = cur_meta["managedFields"]
        meta["resourceVersion"] = cur_meta.get("resourceVersion", "")
        errs = self._validate_update_rules(new, current)
        if errs:
            raise errors.invalid_error(self._kind, name, errs)
        if manager is not None:
            self._track_update(current, new, manager)
        _canonical_meta(new)
        if deletion.should_delete_during_update(new, current):
            raise deletion.EmptiedFinalizers(new)
        return new

    # --- patch -----------------------------------------------------------------------------

    async def patch(self, request: HTTPRequest, info: RequestInfo, target: Target) -> Response:
        assert target.namespace is not None and target.name is not None
        patch_type = negotiation.patch_type(header_value(request, b"content-type") or None)
        opts = request_options.parse_write_options(info.query)
        request_options.validate_patch_options(opts, patch_type)
        raw = request.content.read() if request.content is not None else b""
        manager = self._manager(request, opts)
        patcher = fieldmanagement.Patcher(
            patch_type,
            raw,
            manager=manager,
            force=bool(opts.force),
            api_version=self.view.api_version,
            validation=opts.effective_field_validation,
            schema=self.view.schema,
            kind=self._kind,
            views=self._other_versions,
        )
        admission = self.admission
        namespace, dry_run = target.namespace, bool(opts.dry_run)

        async def try_update(current: Obj | None) -> Obj:
            now = format_seconds(self.clock.seconds())
            current_v1 = self.to_wire(current) if current is not None else None
            if current_v1 is None:
                if patch_type != "apply":
                    raise errors.not_found(self.gr, target.name or "")
                uid = patcher.uid_in_patch()
                if uid:
                    raise errors.conflict(
                        self.gr,
                        target.name or "",
                        f"uid mismatch: the provided object specified uid {uid}, and no "
                        "existing object was found",
                    )
            patched = patcher.apply(current_v1, now)
            new = self._to_internal(patched)
            self._check_identity(new, target)
            attributes: Attributes | None = None
            if current is None:
                meta = metadata(new)
                for key in WIPED_ON_CREATE:
                    meta.pop(key, None)
                meta.pop("resourceVersion", None)
                if admission is not None:
                    attributes = self._attributes(CREATE, info, namespace, new, None, dry_run)
                    await run_mutating(admission, attributes)
                    meta = metadata(new)
                meta["uid"] = new_uuid()
                meta["creationTimestamp"] = format_seconds(self.clock.seconds())
                self._validate_create(new)
                if admission is not None and attributes is not None:
                    await run_validating(admission, attributes)
                _canonical_meta(new)
                return new
            if admission is not None:
                attributes = self._attributes(UPDATE, info, namespace, new, current, dry_run)
                await run_mutating(admission, attributes)
            # The Patcher already tracked managedFields for this manager.
            updated = self._prepare_update(new, current, None, check_rv=True)
            if admission is not None and attributes is not None:
                await run_validating(admission, attributes)
            return updated

        # A patch has no preconditions (handlers/patch.go gives no object to
        # DefaultUpdatedObjectInfo).
        obj, created = await self._store_update(target, try_update, bool(opts.dry_run), None)
        warnings = list(getattr(patcher, "warnings", []))
        return self._render_object(request, info, 201 if created else 200, obj, warnings)

    # --- delete ----------------------------------------------------------------------------

    def _delete_options(self, request: HTTPRequest, info: RequestInfo) -> Any:
        raw = request.content.read() if request.content is not None else b""
        fmt = "json"
        if raw.strip():
            fmt = negotiation.negotiate_body(header_value(request, b"content-type") or None)
            if fmt == "protobuf":
                raw, fmt = decode_delete_options(raw), "json"
        opts = request_options.parse_delete_options(info.query, raw, fmt)
        request_options.validate_delete_options(opts)
        return opts

    async def delete(self, request: HTTPRequest, info: RequestInfo, target: Target) -> Response:
        assert target.namespace is not None and target.name is not None
        opts = self._delete_options(request, info)
        deleted, gone = await self._delete_or_mark(target.namespace, target.name, opts, info)
        if not gone:
            # k8s.io/apiserver pkg/endpoints/handlers/delete.go: an object kept (for its
            # finalizers) is the answer, 202 only when orphanDependents=false was asked for.
            code = 202 if opts.orphan_dependents is False else 200
            return self._render_object(request, info, code, deleted)
        meta = metadata(deleted)
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": self._deleted_details(meta),
        }
        out = self._output(request, info, is_list=False, is_watch=False)
        if out.kind == "protobuf":
            return self.protobuf.response(200, body)
        return Response(200, (("Content-Type", "application/json"),), codec.encode_json(body))

    def _deleted_details(self, meta: dict[str, Any]) -> dict[str, Any]:
        """StatusDetails of a deletion: ``group`` is omitted for core (``omitempty``)."""
        details: dict[str, Any] = {"name": meta.get("name", "")}
        if self.view.group:
            details["group"] = self.view.group
        details["kind"] = self._resource
        details["uid"] = meta.get("uid", "")
        return details

    def _delete_validation(
        self, info: RequestInfo, namespace: str, dry_run: bool
    ) -> Callable[[Obj], Awaitable[None]] | None:
        """Validating admission of a DELETE, run on the object about to be deleted or marked
        (``rest.AdmissionToValidateObjectDeleteFunc`` in handlers/delete.go: the attributes
        carry no new object, the stored one as the old); None when nothing is plugged in."""
        admission = self.admission
        if admission is None or not admission.handles(DELETE):
            return None

        async def validate(current: Obj) -> None:
            attributes = self._attributes(DELETE, info, namespace, None, current, dry_run)
            await run_validating(admission, attributes)

        return validate

    async def _delete_or_mark(
        self, namespace: str, name: str, opts: Any, info: RequestInfo
    ) -> tuple[Obj, bool]:
        """store.go ``Delete`` for events: (last state, True) once removed, or (the object
        marked by :func:`deletion.mark_as_deleting`, False) while finalizers are pending.

        The plain removal reads the object once; only an object with finalizers is read
        again, by the marking's compare-and-swap (which writes nothing when it is already
        marked, as a second DELETE finds it)."""
        check = _preconditions(opts, self._kind)
        dry_run = bool(opts.dry_run)
        validate = self._delete_validation(info, namespace, dry_run)
        try:
            gone = await self.registry.delete(
                namespace,
                name,
                deletion.unless_finalizing(check),
                dry_run=dry_run,
                validate=validate,
            )
            return gone, True
        except deletion.Finalizing:
            pass

        async def mark(current: Obj | None) -> Obj:
            assert current is not None  # allow_create=False
            check(current)
            if validate is not None:
                await validate(current)
            return deletion.mark_as_deleting(current, self.clock.seconds())

        try:
            # store.go marks with storage.SimpleUpdate, which gives no TTL: the marked event
            # stays until its finalizers are gone.
            marked, _ = await self.registry.guaranteed_update(
                namespace, name, mark, dry_run=dry_run, allow_create=False, attach_ttl=False
            )
        except deletion.DeleteNow:
            # The finalizers went away meanwhile (store.go errDeleteNow).
            gone = await self.registry.delete(
                namespace, name, check, dry_run=dry_run, validate=validate
            )
            return gone, True
        return marked, False

    async def _store_update(
        self,
        target: Target,
        try_update: TryUpdate,
        dry_run: bool,
        uid: str | None,
    ) -> tuple[Obj, bool]:
        """``GuaranteedUpdate``, then store.go's ``deleteWithoutFinalizers`` when the update
        emptied the finalizers of an object being deleted (``uid`` its precondition)."""
        assert target.namespace is not None and target.name is not None
        try:
            return await self.registry.guaranteed_update(
                target.namespace, target.name, try_update, dry_run=dry_run
            )
        except deletion.EmptiedFinalizers as emptied:
            return await self._delete_emptied(target, emptied.obj, uid, dry_run), False

    async def _delete_emptied(
        self, target: Target, obj: Obj, uid: str | None, dry_run: bool
    ) -> Obj:
        """store.go ``deleteWithoutFinalizers``: an update removed the last finalizer of an
        object marked for deletion, so it is deleted; the update's result ``obj`` is the
        answer, also when someone else deleted it first."""
        assert target.namespace is not None and target.name is not None

        def check(current: Obj) -> None:
            cur_meta = metadata(current)
            if uid and uid != cur_meta.get("uid"):
                raise self._uid_precondition_failed(cur_meta, uid)

        try:
            await self.registry.delete(target.namespace, target.name, check, dry_run=dry_run)
        except errors.StatusError as error:
            if error.reason != "NotFound":
                raise
        return obj

    async def delete_collection(
        self, request: HTTPRequest, info: RequestInfo, target: Target
    ) -> Response:
        assert target.namespace is not None
        delete_opts = self._delete_options(request, info)
        list_opts = request_options.parse_list_options(info.query)
        request_options.validate_list_options(list_opts, is_watch=False)
        keep = self._filter(list_opts, target.namespace)
        page = await self.registry.list_page(target.namespace, keep=keep)
        found: set[int] = set()

        async def delete_one(obj: Obj) -> None:
            meta = metadata(obj)
            try:
                await self._delete_or_mark(target.namespace or "", meta["name"], delete_opts, info)
            except errors.StatusError as error:
                if error.reason == "NotFound":
                    return
                raise
            found.add(id(obj))

        await _in_workers(page.items, delete_one, self.delete_workers)
        # store.go DeleteCollection answers with the items as listed (also those only
        # marked for their finalizers), in list order; here without those already gone.
        deleted = [obj for obj in page.items if id(obj) in found]
        body = {
            "kind": self._list_kind,
            "apiVersion": self.view.api_version,
            "metadata": {"resourceVersion": str(page.revision)},
            "items": [self.to_wire(o, False) for o in deleted],
        }
        out = self._output(request, info, is_list=True, is_watch=False)
        return self._respond(request, info, 200, body, out)

    # --- list and watch --------------------------------------------------------------------

    def _filter(self, opts: Any, namespace: str | None) -> Callable[[Obj], bool] | None:
        labels = _parse_labels(opts.label_selector)
        fields = (
            None if opts.field_selector.empty else opts.field_selector.transform(self._field_label)
        )
        if labels is None and fields is None:
            return None
        labels_of, fields_of = self.view.labels_of, self.view.fields_of

        def keep(obj: Obj) -> bool:
            if labels is not None and not labels.matches(labels_of(obj)):
                return False
            return fields is None or fields.matches(fields_of(obj))

        return keep

    async def list_or_watch(self, request: HTTPRequest, info: RequestInfo, target: Target) -> Any:
        opts = request_options.parse_list_options(info.query)
        if opts.watch:
            return await self.watch(request, info, target)
        request_options.validate_list_options(opts, is_watch=False)
        keep = self._filter(opts, target.namespace)
        namespace = target.namespace or _namespace_from_fields(opts.field_selector)
        rv_text = opts.resource_version or ""
        match = opts.resource_version_match or ""
        limit = opts.limit or 0
        start_key = b""
        revision = 0
        from_cache = False
        min_revision = 0
        prefix = self.registry.prefix(namespace)
        if opts.continue_:
            if rv_text not in ("", "0"):
                raise errors.bad_request(
                    "specifying resource version is not allowed when using continue"
                )
            try:
                start, token_rv = tokens.decode_continue(opts.continue_, prefix.decode())
            except tokens.ContinueTokenError as error:
                raise errors.bad_request(str(error)) from None
            start_key = start.encode()
            revision = token_rv if token_rv > 0 else 0
        elif rv_text == "0" and match != "Exact":
            # "any": the watch cache answers (kube-apiserver's cacher semantics).
            from_cache = self.registry.can_list_cached(namespace)
        elif rv_text not in ("", "0"):
            wanted = _parse_rv(rv_text)
            if match == "Exact" or (match == "" and limit > 0):
                revision = wanted
            else:
                current = await self.registry.current_revision()
                if wanted > current:
                    raise errors.too_large_resource_version(wanted, current)
                from_cache = self.registry.can_list_cached(namespace)
                min_revision = wanted
        if not from_cache and not start_key and not revision:
            # A consistent read: if the store already knows the revision it would be read at,
            # a body kept for this request at that revision is the answer.
            now = self.registry.list_revision_now(namespace)
            if now is not None:
                known = self._kept_list(request, info, (now, bytes(request.uri)))
                if known is not None:
                    return known
        try:
            if from_cache:
                page = await self.registry.list_cached(
                    namespace,
                    min_revision=min_revision,
                    limit=limit,
                    keep=keep,
                    want_remaining=keep is None,
                )
            else:
                page = await self.registry.list_page(
                    namespace,
                    start_key=start_key,
                    revision=revision,
                    limit=limit,
                    keep=keep,
                    want_remaining=keep is None,
                )
        except CompactedError:
            if opts.continue_:
                start = start_key[len(prefix) :].rstrip(b"\x00").decode()
                fresh = tokens.encode_continue(start, -1)
                raise errors.StatusError(
                    410, "Expired", EXPIRED_CONTINUE, list_meta={"continue": fresh}
                ) from None
            raise errors.expired(EXPIRED_LIST) from None
        except StorageTimeoutError:
            if not from_cache:
                raise
            current = await self.registry.current_revision()
            raise errors.too_large_resource_version(min_revision, current) from None
        except FutureRevisionError:
            current = await self.registry.current_revision()
            raise errors.too_large_resource_version(revision, current) from None
        list_meta: dict[str, Any] = {"resourceVersion": str(page.revision)}
        if page.next_key is not None:
            list_meta["continue"] = tokens.encode_continue(
                page.next_key[len(prefix) :].rstrip(b"\x00").decode(), page.revision
            )
            if page.remaining is not None:
                list_meta["remainingItemCount"] = page.remaining
        # The same request at the same revision lists the same page: its JSON is reused.
        key = (page.revision, bytes(request.uri))
        return self._render_list(request, info, page.items, list_meta, key)

    def _kept_list(
        self, request: HTTPRequest, info: RequestInfo, key: tuple[int, bytes]
    ) -> Response | None:
        """The kept JSON body for ``key``, if the request wants plain JSON and one is kept."""
        out = self._output(request, info, is_list=True, is_watch=False)
        if out.kind == "protobuf":
            body = self.protobuf.list_bodies.get(key)
            return None if body is None else self.protobuf.plain(200, body)
        body = self.list_bodies.get(key)
        if body is None:
            return None
        if not self._plain_json(request, info, out):
            return None
        return Response(200, (("Content-Type", out.media_type),), body)

    def _render_list(
        self,
        request: HTTPRequest,
        info: RequestInfo,
        items: list[Obj],
        list_meta: dict[str, Any],
        cache_key: tuple[int, bytes] | None = None,
    ) -> Response:
        out = self._output(request, info, is_list=True, is_watch=False)
        if self._plain_json(request, info, out):
            bodies = self.list_bodies
            raw = bodies.get(cache_key) if cache_key is not None else None
            if raw is None:
                raw = self.encoded.list_body(items, list_meta)
                if cache_key is not None:
                    bodies.put(cache_key, raw)
            return Response(200, (("Content-Type", out.media_type),), raw)
        if out.kind == "protobuf":
            kept = self.protobuf.list_bodies
            raw = kept.get(cache_key) if cache_key is not None else None
            if raw is None:
                raw = self.protobuf.list_body(items, list_meta)
                if cache_key is not None:
                    kept.put(cache_key, raw)
            return self.protobuf.plain(200, raw)
        body: Any
        if out.kind == "table":
            body = table_for(
                items,
                out.version,
                list_meta,
                negotiation.include_object(info.query),
                self.clock.seconds(),
                self.to_wire,
                self.view.table_row,
                self.view.columns,
            )
        elif out.kind == "partial":
            body = {
                "kind": "PartialObjectMetadataList",
                "apiVersion": f"meta.k8s.io/{out.version}",
                "metadata": list_meta,
                "items": [partial_object(o, out.version) for o in items],
            }
        else:
            body = {
                "kind": self._list_kind,
                "apiVersion": self.view.api_version,
                "metadata": list_meta,
                "items": [self.to_wire(o, False) for o in items],
            }
        return self._respond(request, info, 200, body, out)

    async def watch(self, request: HTTPRequest, info: RequestInfo, target: Target) -> object:
        opts = request_options.parse_list_options(info.query, watch_path=target.watch_path)
        request_options.validate_list_options(opts, is_watch=True)
        opts = request_options.default_watch_list(opts)
        if opts.resource_version not in ("", "0"):
            # The cacher's ``ParseResourceVersion`` refuses what is not a number before the
            # watch starts (k8s.io/apiserver pkg/storage/cacher/cacher.go Watch): the same
            # 400 as list and get.
            _parse_rv(opts.resource_version)
        if target.name is not None:
            existing = opts.field_selector
            named = existing.requires_exact_match("metadata.name")
            if named is not None and named != target.name:
                raise errors.bad_request("fieldSelector metadata.name doesn't match requested name")
            term = f"metadata.name={escape_value(target.name)}"
            text = f"{existing},{term}" if not existing.empty else term
            opts = dataclasses.replace(opts, field_selector=parse_field_selector(text))
        keep = self._filter(opts, target.namespace)
        out = self._output(request, info, is_list=False, is_watch=True)
        namespace = target.namespace or _namespace_from_fields(opts.field_selector)
        if opts.timeout_seconds:
            timeout = float(opts.timeout_seconds)
        else:
            timeout = self.min_request_timeout * (1 + self.rng.random())
        stream = WatchStream(
            request,
            self.registry,
            namespace,
            keep=keep,
            out=out,
            clock=self.clock,
            timeout=timeout,
            resource_version=opts.resource_version or "",
            send_initial_events=bool(opts.send_initial_events),
            allow_bookmarks=bool(opts.allow_watch_bookmarks),
            include_object=negotiation.include_object(info.query),
            pretty=self._pretty(request, info),
            to_v1=self.to_wire,
            lifecycle=self.lifecycle,
            encoded=self.encoded,
            coalescer=self.coalescer,
            protobuf=self.protobuf,
            table=(self.view.table_row, self.view.columns),
            counts=self.watch_counts,
        )
        await stream.start()
        return STREAMING


# --- module helpers ------------------------------------------------------------------------


def decode_document(raw: bytes, fmt: str, kind: str = KIND) -> Obj:
    """A request body as a dict; syntax errors are 400 as the reference words them."""
    if fmt == "yaml":
        try:
            value = yamlguard.load(raw) if raw.strip() else None
        except yamlguard.JSONDepthError as error:
            # The JSON of the YAML nests past encoding/json's limit: meta.Interpret's error.
            raise _unrecognized(
                f"couldn't get version/kind; json parse error: {error}", raw, kind
            ) from None
        except yamlguard.YAMLBoundError as error:
            # go-yaml's own words: "yaml: document contains excessive aliasing".
            text = f"error converting YAML to JSON: yaml: {error}"
            if str(error).endswith(yamlguard.DEPTH_TEXT):
                # Nested past go-yaml's 10,000 levels: transformDecodeError's whole answer.
                raise _unrecognized(text, raw, kind) from None
            raise errors.bad_request(text) from None
        except yaml.YAMLError as error:
            raise errors.bad_request(f"error converting YAML to JSON: {error}") from None
    else:
        try:
            value = orjson.loads(raw) if raw.strip() else None
        except orjson.JSONDecodeError as error:
            if not str(error).startswith("depth limit exceeded"):
                raise errors.bad_request(
                    f"couldn't get version/kind; json parse error: {error}"
                ) from None
            value = _decode_deep(raw, kind)
    if value is None:
        raise errors.bad_request(
            "Object 'Kind' is missing in '" + raw.decode("utf-8", "replace") + "'"
        )
    if not isinstance(value, dict):
        raise errors.bad_request(
            f'{kind} in version "{VERSION}" cannot be handled as a {kind}: json: cannot '
            f"unmarshal {type(value).__name__} into Go value of type v1.{kind}"
        )
    return value


def _decode_deep(raw: bytes, kind: str) -> Any:
    """A JSON body nested past orjson's 1,024 levels, read as Go reads it up to its 10,000
    (:mod:`apiserver.gocompat.deepjson`). Past that, or invalid, the answer is
    ``transformDecodeError``'s for a body whose kind could not be read (k8s.io/apiserver
    pkg/endpoints/handlers/rest.go): ``meta.Interpret``'s ``encoding/json`` error with a
    summary of the body."""
    try:
        return deepjson.loads(raw)
    except deepjson.DeepJSONError as error:
        raise _unrecognized(
            f"couldn't get version/kind; json parse error: {error}", raw, kind
        ) from None


def _unrecognized(error: str, raw: bytes, kind: str) -> errors.StatusError:
    """``transformDecodeError`` for a body whose kind could not be read (k8s.io/apiserver
    pkg/endpoints/handlers/rest.go)."""
    return errors.bad_request(
        f"the object provided is unrecognized (must be of type {kind}): {error} "
        f"({errors.summarize_data(raw)})"
    )


def _attempts(meta: dict[str, Any]) -> int:
    """How many names a create tries: eight generated ones for ``generateName`` without a
    name (k8s.io/apiserver pkg/registry/generic/registry/store.go), else the one given."""
    return 8 if meta.get("generateName") and not meta.get("name") else 1


def _canonical_meta(obj: Obj) -> None:
    """Put ``obj``'s metadata in the one order kube-apiserver encodes it in (see
    :func:`convert.canonical_object_meta`), so that an unchanged object is stored unchanged."""
    obj["metadata"] = convert.canonical_object_meta(metadata(obj))


def _deep_copy(obj: Obj) -> Obj:
    result: Obj = orjson.loads(orjson.dumps(obj))
    return result


def _query_str(query: dict[bytes, list[bytes]], name: bytes) -> str:
    values = query.get(name)
    return values[-1].decode("utf-8", "replace") if values else ""


def _parse_rv(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {text}") from None
    if value < 0:
        raise errors.bad_request(f"invalid resource version: {text}")
    return value


def _parse_labels(selector: LabelSelector) -> LabelSelector | None:
    return None if selector.empty else selector


def _namespace_from_fields(selector: FieldSelector) -> str | None:
    """A ``metadata.namespace=x`` term narrows a cluster-wide list or watch to ``x``."""
    return selector.requires_exact_match("metadata.namespace")


def _preconditions(opts: Any, kind: str = KIND) -> Callable[[Obj], None]:
    uid = opts.preconditions_uid
    rv = opts.preconditions_resource_version

    def check(current: Obj) -> None:
        meta = metadata(current)
        name = meta.get("name", "")
        if uid and uid != meta.get("uid"):
            raise errors.conflict(
                errors.GroupResource("", kind),
                name,
                f"the UID in the precondition ({uid}) does not match the UID in record "
                f"({meta.get('uid', '')}). The object might have been deleted and then recreated",
            )
        if rv and rv != meta.get("resourceVersion"):
            raise errors.conflict(
                errors.GroupResource("", kind),
                name,
                f"the ResourceVersion in the precondition ({rv}) does not match the "
                f"ResourceVersion in record ({meta.get('resourceVersion', '')}). The object "
                "might have been modified",
            )

    return check


async def _in_workers(
    items: Sequence[Obj], work: Callable[[Obj], Coroutine[Any, Any, None]], workers: int
) -> None:
    """``work`` on every item by ``workers`` loops, as store.go ``DeleteCollection`` runs its
    workers: they take the items in list order, a loop stops at its first error while the
    others go on, and once all have stopped the first error is raised as it was (a
    StatusError keeps its code; nothing wraps it)."""
    pending = iter(items)
    failures: list[Exception] = []

    async def loop() -> None:
        for item in pending:
            try:
                await work(item)
            except Exception as error:  # kept, and the first one raised below
                failures.append(error)
                return

    loops = [Deferred.fromCoroutine(loop()) for _ in range(min(workers, len(items)))]
    if loops:
        await gatherResults(loops, consumeErrors=True)
    if failures:
        raise failures[0]


__all__ = ["CORE_V1", "EVENTS_V1", "EventsAPI", "Target", "decode_document", "parse_target"]
