"""The generic registry: kube-apiserver's ``genericregistry.Store`` over our storage interface.

Follows k8s.io/apiserver ``pkg/registry/generic/registry/store.go`` and
``pkg/storage/etcd3/store.go``: objects live under
``<prefix>/<resource>/<namespace>/<name>``; ``resourceVersion`` is the store's ``mod_revision``
and is never written into the stored bytes; create is "put if absent"; updates are
compare-and-swap in a retry loop (``GuaranteedUpdate``); a write whose bytes equal the stored
ones is skipped (no new revision, TTL not refreshed); every real write attaches the TTL.

This layer knows nothing about HTTP or API versions: it stores and returns "internal" dicts
(for events: core v1 field names) and raises storage errors for the REST layer to map.

Where conversion happens: the bytes are the *stored shape* (for events a core/v1 Event as
kube-apiserver stores it, ``--storage-media-type``); the registry's objects are the internal
form. A :class:`StorageConversion` given by the resource turns one into the other, right
next to the serializer (:mod:`apiserver.registry.storagecodec`), and a decoded object is
memoized per (key, revision) *after* that conversion: a revision is decoded and converted
once, however many GETs, lists and watchers read it. The API views (events.k8s.io/v1 and
core/v1) convert the internal form to their own JSON at the REST boundary, where the encoded
bytes of each stored revision are kept too (``apiserver.api.events.encoding``).
"""

from __future__ import annotations

import copy
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from apiserver.apimachinery import errors
from apiserver.gocompat.quote import go_quote
from apiserver.registry.storagecodec import (
    PROTOBUF,
    StorageCodecError,
    StorageSerializer,
    serializer_for,
)
from apiserver.storage.flowcontrol import MAX_PENDING_PER_WATCHER, pausable_watch
from apiserver.storage.interface import (
    CachedLists,
    CompactedError,
    ConflictError,
    CurrentReads,
    KeyExistsError,
    KeyNotFoundError,
    KeyValue,
    PausableWatch,
    RangeResult,
    Store,
    WatchEvent,
    cached_lists_of,
    current_reads_of,
)
from apiserver.storage.value import TransformPending, ValueTransformer, ValueTransformError

Obj = dict[str, Any]
#: Decoded objects kept per (key, revision); oldest out first.
DECODE_CACHE_SIZE = 20000
#: How many plugin answers one read waits for before it gives up (each wait is bounded by the
#: KMS provider's timeout; more than one only when another DEK or a race gets in between).
MAX_TRANSFORM_WAITS = 8
PLUGIN_TIMED_OUT = "timed out waiting for the KMS plugin"
T = TypeVar("T")
TryUpdate = Callable[[Obj | None], Awaitable[Obj | None]]


@attrs.define
class ListPage:
    """One page of a list: items (internal dicts) in key order, and where the next begins."""

    items: list[Obj]
    revision: int
    next_key: bytes | None
    remaining: int | None


@attrs.frozen
class StorageConversion:
    """Between the registry's objects and the stored shape of a serializer.

    ``to_stored(obj)``: the stored shape of ``obj`` (``kind`` and ``apiVersion`` first, no
    ``metadata.resourceVersion``; ``obj`` itself is not changed). ``from_stored(stored)``:
    the object of a freshly decoded stored dict (which it may reuse); the registry sets its
    resourceVersion afterwards.
    """

    to_stored: Callable[[Obj], Obj]
    from_stored: Callable[[Obj], Obj]
    #: With a protobuf serializer: the bytes of ``obj``'s stored shape said without
    #: building that shape, or None where it cannot say them (``to_stored`` then does).
    #: Why: building the stored dict was about a fifth of a create's storage encoding.
    to_protobuf: Callable[[Obj], bytes | None] | None = None


def type_meta_conversion(kind: str, api_version: str) -> StorageConversion:
    """The stored shape is the object itself with ``kind``/``apiVersion`` added."""
    type_meta = {"kind": kind, "apiVersion": api_version}

    def to_stored(obj: Obj) -> Obj:
        meta = obj.get("metadata") or {}
        if "resourceVersion" in meta:
            meta = {k: v for k, v in meta.items() if k != "resourceVersion"}
        body: Obj = {**type_meta}
        for key, value in obj.items():
            if key in ("kind", "apiVersion"):
                continue
            body[key] = meta if key == "metadata" else value
        return body

    def from_stored(stored: Obj) -> Obj:
        stored.pop("kind", None)
        stored.pop("apiVersion", None)
        return stored

    return StorageConversion(to_stored, from_stored)


class _Untransformable(errors.StatusError):
    """A stored value no transformer could read: the 500 of a GET (etcd3/store.go
    ``storage.NewInternalError(err)``); a list re-words it with the key."""

    def __init__(self, key: bytes, reason: str) -> None:
        super().__init__(
            500,
            "InternalError",
            f"Internal error occurred: {reason}",
            {"causes": [{"message": reason}]},
        )
        self.key = key
        self.reason = reason

    def in_list(self) -> errors.StatusError:
        """etcd3/store.go ``processListItem``: ``unable to transform key "<key>": <err>``."""
        return errors.internal_error(
            f"unable to transform key {go_quote(self.key.decode(errors='replace'))}: {self.reason}"
        )


class NoChange(Exception):
    """Raised by a try-update function to keep the stored object as it is."""


def metadata(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
        obj["metadata"] = meta
    return meta


def _set_revision(kv: KeyValue, obj: Obj) -> Obj:
    metadata(obj)["resourceVersion"] = str(kv.mod_revision)
    return obj


class Registry:
    """Stores objects of one resource; ``kind``/``api_version`` are written into stored bytes.

    What it reads from memory and how its watches apply back-pressure follows the store's
    declared ``capabilities`` (``apiserver.storage.interface.StoreCapabilities``), read once
    here: a store that declares nothing is read through its Deferred methods, and its
    watches get flow control from ``apiserver.storage.flowcontrol`` (at most
    ``max_pending_per_watcher`` changes held for a paused watch).
    """

    def __init__(
        self,
        store: Store,
        *,
        prefix: str = "/registry",
        resource: str = "events",
        group_resource: errors.GroupResource,
        storage_kind: str = "Event",
        storage_api_version: str = "v1",
        ttl: Callable[[], int] = lambda: 0,
        media_type: str = "application/json",
        max_pending_per_watcher: int = MAX_PENDING_PER_WATCHER,
        conversion: StorageConversion | None = None,
        serializer: StorageSerializer | None = None,
        transformer: ValueTransformer | None = None,
        namespaced: bool = True,
    ) -> None:
        self.store = store
        #: False for a cluster-scoped resource: keys are ``<prefix>/<resource>/<name>``
        #: (kube-apiserver's ``NoNamespaceKeyFunc``) and ``namespace`` arguments are "".
        self.namespaced = namespaced
        self._current: CurrentReads | None = current_reads_of(store)
        self._cached: CachedLists | None = cached_lists_of(store)
        self._max_pending = max_pending_per_watcher
        self.base = f"{prefix.rstrip('/')}/{resource}/"
        self.group_resource = group_resource
        self.ttl = ttl
        self._decoded: dict[tuple[bytes, int], Obj] = {}
        #: ``--storage-media-type`` writes; reads accept every format (storagecodec).
        self.serializer = serializer if serializer is not None else serializer_for(media_type)
        self.conversion = conversion or type_meta_conversion(storage_kind, storage_api_version)
        self._to_stored = self.conversion.to_stored
        self._from_stored = self.conversion.from_stored
        self._encode = self.serializer.encode
        self._to_protobuf = (
            self.conversion.to_protobuf if self.serializer.media_type == PROTOBUF else None
        )
        self._decode_bytes = self.serializer.decode
        #: Encryption at rest (``--encryption-provider-config``): None costs nothing; else
        #: values are sealed on write and opened on read, the key as authenticated data,
        #: and the (key, revision) of values read stale are remembered so that an update
        #: rewrites them even when the object did not change (etcd3/store.go GuaranteedUpdate).
        self._transformer = transformer
        self._stale: dict[tuple[bytes, int], None] = {}
        if transformer is not None:
            self._decode = self._decode_transformed  # type: ignore[method-assign]

    def for_group_resource(self, group_resource: errors.GroupResource) -> Registry:
        """This registry naming ``group_resource`` in its errors: the same store, keys,
        serializer and decoded-object memo. kube-apiserver serves one stored resource under
        two groups this way (core and events.k8s.io events share one storage)."""
        if group_resource == self.group_resource:
            return self
        clone = copy.copy(self)
        clone.group_resource = group_resource
        return clone

    # --- keys and bytes -------------------------------------------------------------------

    def key(self, namespace: str, name: str) -> bytes:
        if not self.namespaced:
            return f"{self.base}{name}".encode()
        return f"{self.base}{namespace}/{name}".encode()

    def prefix(self, namespace: str | None) -> bytes:
        return (self.base + (f"{namespace}/" if namespace else "")).encode()

    def encode(self, obj: Obj) -> bytes:
        """Stored bytes: the stored shape of ``obj`` (no resourceVersion), serialized."""
        if self._to_protobuf is not None:
            data = self._to_protobuf(obj)
            if data is not None:
                return data
        return self._encode(self._to_stored(obj))

    def decode(self, kv: KeyValue) -> Obj:
        """The object stored in ``kv`` with its resourceVersion; shared, treat as read-only.

        Decoded objects are memoized per (key, revision): a stored revision never changes, and
        lists, gets and watch fan-out read the same revisions over and over.
        """
        memo_key = (kv.key, kv.mod_revision)
        cached = self._decoded.get(memo_key)
        if cached is not None:
            return cached
        obj = self._decode(kv)
        decoded = self._decoded
        if len(decoded) >= DECODE_CACHE_SIZE:
            del decoded[next(iter(decoded))]
        decoded[memo_key] = obj
        return obj

    def _decode(self, kv: KeyValue) -> Obj:
        try:
            stored = self._decode_bytes(kv.value)
        except StorageCodecError as error:
            # kube-apiserver answers a value it cannot decode with a 500 naming the key
            # (k8s.io/apiserver pkg/storage/etcd3/store.go decode errors, storage.NewInternalError).
            raise errors.internal_error(f"{kv.key.decode(errors='replace')}: {error}") from None
        obj = self._from_stored(stored)
        metadata(obj)["resourceVersion"] = str(kv.mod_revision)
        return obj

    def forget_decoded(self) -> None:
        """Drop every decoded object and stale mark: the encryption configuration changed
        (a reload), so what was current may now be stale."""
        self._decoded.clear()
        self._stale.clear()

    def _decode_transformed(self, kv: KeyValue) -> Obj:
        """:meth:`_decode` behind the value transformer (installed only with one)."""
        assert self._transformer is not None
        try:
            plain, stale = self._transformer.from_storage(kv.value, kv.key)
        except ValueTransformError as error:
            raise _Untransformable(kv.key, str(error)) from None
        if stale:
            marks = self._stale
            if len(marks) >= DECODE_CACHE_SIZE:
                del marks[next(iter(marks))]
            marks[(kv.key, kv.mod_revision)] = None
        try:
            stored = self._decode_bytes(plain)
        except StorageCodecError as error:
            raise errors.internal_error(f"{kv.key.decode(errors='replace')}: {error}") from None
        obj = self._from_stored(stored)
        metadata(obj)["resourceVersion"] = str(kv.mod_revision)
        return obj

    async def _seal(self, data: bytes, key: bytes) -> bytes:
        """``TransformToStorage`` (etcd3/store.go: a failure is an internal error), waiting
        for the plugin when the transformer needs it (a KMS v1 Encrypt)."""
        assert self._transformer is not None
        for _ in range(MAX_TRANSFORM_WAITS):
            try:
                return self._transformer.to_storage(data, key)
            except ValueTransformError as error:
                raise errors.internal_error(str(error)) from None
            except TransformPending as pending:
                await pending.ready
        raise errors.internal_error(PLUGIN_TIMED_OUT)

    # --- reads -----------------------------------------------------------------------------

    def _current_value(self, key: bytes) -> tuple[bool, KeyValue | None]:
        current = self._current
        if current is None:
            return False, None
        return current.current_value(key)

    def get_now(self, namespace: str, name: str) -> tuple[bool, Obj | None]:
        """(True, object or None when absent) if the store can answer from memory at once
        (a store declaring ``current_reads``: the watch cache over the embedded store), else
        (False, None): use :meth:`get`."""
        known, value = self._current_value(self.key(namespace, name))
        if not known:
            return False, None
        if value is None:
            return True, None
        try:
            return True, self.decode(value)
        except TransformPending:
            return False, None  # the caller's asynchronous path waits for the plugin

    async def get(self, namespace: str, name: str) -> Obj:
        known, obj = self.get_now(namespace, name)
        if known:
            if obj is None:
                raise errors.not_found(self.group_resource, name)
            return obj
        try:
            kv = await self.store.get(self.key(namespace, name))
        except KeyNotFoundError:
            raise errors.not_found(self.group_resource, name) from None
        try:
            return self.decode(kv)
        except TransformPending as pending:
            return await self._decode_after(kv, pending)

    async def get_or_none(self, namespace: str, name: str) -> tuple[Obj | None, int]:
        known, value = self._current_value(self.key(namespace, name))
        if known:
            if value is None:
                return None, 0
            kv = value
        else:
            try:
                kv = await self.store.get(self.key(namespace, name))
            except KeyNotFoundError:
                return None, 0
        try:
            return self.decode(kv), kv.mod_revision
        except TransformPending as pending:
            return await self._decode_after(kv, pending), kv.mod_revision

    async def _decode_after(self, kv: KeyValue, pending: TransformPending) -> Obj:
        """:meth:`decode` once the value transformer's plugin call has answered (a KMS
        Decrypt of a DEK not cached yet: :class:`~apiserver.storage.value.TransformPending`)."""
        return await _after_plugin(
            pending, lambda: self.decode(kv), lambda: _Untransformable(kv.key, PLUGIN_TIMED_OUT)
        )

    def list_revision_now(self, namespace: str | None) -> int | None:
        """The revision a consistent :meth:`list_page` (no start key, no revision) would be
        read at, when the store knows it at once (declared ``current_reads``); else None."""
        current = self._current
        if current is None:
            return None
        return current.current_revision_now(self.prefix(namespace))

    async def current_revision(self) -> int:
        return await self.store.current_revision()

    async def list_page(
        self,
        namespace: str | None,
        *,
        start_key: bytes = b"",
        revision: int = 0,
        limit: int = 0,
        keep: Callable[[Obj], bool] | None = None,
        want_remaining: bool = False,
    ) -> ListPage:
        """Up to ``limit`` matching items from ``start_key`` at ``revision`` (0: latest).

        As etcd3's GetList: with a filter, keeps reading until the page is full or the range
        ends; ``next_key`` is the key after the last item when more keys remain.
        """
        prefix = self.prefix(namespace)
        if revision == 0 and not start_key and self._current is not None:
            current = self._current.current_snapshot(prefix)
            if current is not None:
                try:
                    return self._page_from(current, limit, keep, want_remaining)
                except TransformPending as pending:
                    # Objects decoded before the wait are memoized: a retry redoes the rest.
                    return await _after_plugin(
                        pending,
                        lambda: self._page_from(current, limit, keep, want_remaining),
                        lambda: errors.internal_error(PLUGIN_TIMED_OUT),
                    )
        items: list[Obj] = []
        start = start_key or prefix
        read_revision = revision
        remaining: int | None = None
        while True:
            batch = max(limit - len(items), 0) if limit else 0
            if keep is not None and limit:
                batch = max(batch, min(limit * 2, 10000))
            result: RangeResult = await self.store.range(
                prefix, start_key=start, limit=batch, revision=read_revision
            )
            read_revision = result.revision
            last_key: bytes | None = None
            taken = 0
            try:
                for kv in result.kvs:
                    taken += 1
                    last_key = kv.key
                    try:
                        obj = self.decode(kv)
                    except TransformPending as pending:
                        obj = await self._decode_after(kv, pending)
                    if keep is None or keep(obj):
                        items.append(obj)
                        if limit and len(items) >= limit:
                            break
            except _Untransformable as failed:
                raise failed.in_list() from None
            more_in_batch = taken < len(result.kvs)
            has_more = result.more or more_in_batch
            if limit and len(items) >= limit:
                next_key = (last_key + b"\x00") if (has_more and last_key is not None) else None
                if next_key is not None and want_remaining:
                    remaining = result.count - taken
                return ListPage(items, read_revision, next_key, remaining)
            if not result.more or last_key is None:
                return ListPage(items, read_revision, None, None)
            start = last_key + b"\x00"

    def can_list_cached(self, namespace: str | None) -> bool:
        """Whether :meth:`list_cached` may be used (a store declaring ``cached_lists`` that
        caches this prefix)."""
        cached = self._cached
        return cached is not None and cached.is_cached(self.prefix(namespace))

    async def list_cached(
        self,
        namespace: str | None,
        *,
        min_revision: int = 0,
        limit: int = 0,
        keep: Callable[[Obj], bool] | None = None,
        want_remaining: bool = False,
    ) -> ListPage:
        """A list served from the watch cache, at least as new as ``min_revision``.

        kube-apiserver serves ``resourceVersion=0`` and NotOlderThan lists from its cacher; a
        limited page carries a continue token at the cache's revision, whose next page is an
        exact read from the store.
        """
        cached = self._cached
        if cached is None:
            raise TypeError("list_cached on a store that does not declare cached_lists")
        result = await cached.list_cached(self.prefix(namespace), min_revision)
        try:
            return self._page_from(result, limit, keep, want_remaining)
        except TransformPending as pending:
            return await _after_plugin(
                pending,
                lambda: self._page_from(result, limit, keep, want_remaining),
                lambda: errors.internal_error(PLUGIN_TIMED_OUT),
            )

    def _page_from(
        self,
        result: RangeResult,
        limit: int,
        keep: Callable[[Obj], bool] | None,
        want_remaining: bool,
    ) -> ListPage:
        """A page out of a whole in-memory range (the watch cache's snapshot)."""
        items: list[Obj] = []
        kvs = result.kvs
        for index, kv in enumerate(kvs):
            try:
                obj = self.decode(kv)
            except _Untransformable as failed:
                raise failed.in_list() from None
            if keep is not None and not keep(obj):
                continue
            items.append(obj)
            if limit and len(items) >= limit:
                rest = len(kvs) - index - 1
                if rest == 0:
                    break
                remaining = rest if want_remaining else None
                return ListPage(items, result.revision, kv.key + b"\x00", remaining)
        return ListPage(items, result.revision, None, None)

    # --- writes ----------------------------------------------------------------------------

    async def create(self, obj: Obj, *, dry_run: bool = False) -> Obj:
        meta = metadata(obj)
        namespace, name = meta.get("namespace", ""), meta["name"]
        data = self.encode(obj)
        if dry_run:
            existing, _ = await self.get_or_none(namespace, name)
            if existing is not None:
                raise errors.already_exists(self.group_resource, name)
            return obj
        key = self.key(namespace, name)
        if self._transformer is not None:
            data = await self._seal(data, key)
        try:
            kv = await self.store.create(key, data, ttl=self.ttl())
        except KeyExistsError:
            raise errors.already_exists(self.group_resource, name) from None
        meta["resourceVersion"] = str(kv.mod_revision)
        return obj

    @property
    def creates_now(self) -> bool:
        """Whether :meth:`create_now` can start a write at once: values are not sealed
        (encryption at rest may have to wait for its KMS plugin)."""
        return self._transformer is None

    def create_now(self, obj: Obj) -> Deferred[Obj]:
        """:meth:`create` (not a dry run, values not sealed: :attr:`creates_now`) as the
        store's Deferred with two callbacks instead of a coroutine, for the create handler's
        fast path; the same bytes, key, TTL, errors and ``resourceVersion``."""
        meta = metadata(obj)
        data = self.encode(obj)
        d = self.store.create(self.key(meta.get("namespace", ""), meta["name"]), data, self.ttl())
        return d.addCallbacks(
            _set_revision, self._exists, callbackArgs=(obj,), errbackArgs=(meta["name"],)
        )

    def _exists(self, failure: Failure, name: str) -> Failure:
        if failure.check(KeyExistsError):
            raise errors.already_exists(self.group_resource, name) from None
        return failure

    async def guaranteed_update(
        self,
        namespace: str,
        name: str,
        try_update: TryUpdate,
        *,
        dry_run: bool = False,
        allow_create: bool = True,
        attach_ttl: bool = True,
        max_attempts: int = 16,
    ) -> tuple[Obj, bool]:
        """Read, let ``try_update`` produce the new object, compare-and-swap; retry on races.

        ``try_update(None)`` is asked to create when the object is missing (PUT and apply
        create). Returns (object, created). Errors raised by ``try_update`` propagate.
        ``attach_ttl=False`` writes an update without a TTL, as etcd3/store.go does for an
        update function that gives none (generic/registry/store.go marking an object for
        deletion uses ``storage.SimpleUpdate``): the key then no longer expires.
        """
        key = self.key(namespace, name)
        for _ in range(max_attempts):
            current, revision = await self.get_or_none(namespace, name)
            if current is None:
                if not allow_create:
                    raise errors.not_found(self.group_resource, name)
                new = await try_update(None)
                if new is None:
                    raise errors.not_found(self.group_resource, name)
                if dry_run:
                    return new, True
                data = self.encode(new)
                if self._transformer is not None:
                    data = await self._seal(data, key)
                try:
                    kv = await self.store.create(key, data, ttl=self.ttl())
                except KeyExistsError:
                    continue
                metadata(new)["resourceVersion"] = str(kv.mod_revision)
                return new, True
            try:
                new = await try_update(current)
            except NoChange:
                return current, False
            if new is None:
                return current, False
            data = self.encode(new)
            if data == self.encode(current) and (key, revision) not in self._stale:
                metadata(new)["resourceVersion"] = str(revision)
                return new, False
            if dry_run:
                metadata(new)["resourceVersion"] = str(revision)
                return new, False
            if self._transformer is not None:
                data = await self._seal(data, key)
            try:
                ttl = self.ttl() if attach_ttl else 0
                kv = await self.store.update(key, data, revision, ttl=ttl)
            except (ConflictError, KeyNotFoundError):
                continue
            metadata(new)["resourceVersion"] = str(kv.mod_revision)
            return new, False
        raise errors.conflict(self.group_resource, name, errors.MODIFIED)

    async def delete(
        self,
        namespace: str,
        name: str,
        check: Callable[[Obj], None] | None = None,
        *,
        dry_run: bool = False,
        max_attempts: int = 16,
        validate: Callable[[Obj], Awaitable[None]] | None = None,
    ) -> Obj:
        """Delete after ``check(current)`` passes (preconditions) and ``validate(current)``
        (validating admission: store.go ``Delete`` calls its ``deleteValidation`` on the
        object it is about to delete, on every attempt); returns the last state."""
        key = self.key(namespace, name)
        for _ in range(max_attempts):
            current, revision = await self.get_or_none(namespace, name)
            if current is None:
                raise errors.not_found(self.group_resource, name)
            if check is not None:
                check(current)
            if validate is not None:
                await validate(current)
            if dry_run:
                return current
            try:
                await self.store.delete(key, revision)
            except ConflictError:
                continue
            except KeyNotFoundError:
                raise errors.not_found(self.group_resource, name) from None
            return current
        raise errors.conflict(self.group_resource, name, errors.MODIFIED)

    # --- watch -----------------------------------------------------------------------------

    def watch(
        self, namespace: str | None, start_revision: int, callback: Callable[[WatchEvent], None]
    ) -> PausableWatch:
        """A watch of the namespace (or every namespace) with flow control: the store's own
        when it declares ``WatchFlowControl.PAUSE`` (the watch cache), else made pausable
        (``apiserver.storage.flowcontrol``), so a slow client never grows memory without
        bound, with or without ``--watch-cache``."""
        if self._transformer is not None:
            callback = _InOrder(callback)
        return pausable_watch(
            self.store, self.prefix(namespace), start_revision, callback, self._max_pending
        )


async def _after_plugin(
    pending: TransformPending, attempt: Callable[[], T], timed_out: Callable[[], Exception]
) -> T:
    """``attempt()`` again after each plugin answer it waited for (``TransformPending``),
    at most :data:`MAX_TRANSFORM_WAITS` times."""
    for _ in range(MAX_TRANSFORM_WAITS):
        await pending.ready
        try:
            return attempt()
        except TransformPending as again:
            pending = again
    raise timed_out()


class _InOrder:
    """A watch callback that waits, in order, for the value transformer's plugin: an event
    whose decoding raised :class:`~apiserver.storage.value.TransformPending` is delivered
    again once the plugin answered, and the events after it wait behind it (a Go watcher
    blocks on the same call, k8s.io/apiserver ``pkg/storage/etcd3/watcher.go``). Only with
    a transformer installed."""

    __slots__ = ("deliver", "held")

    def __init__(self, deliver: Callable[[WatchEvent], None]) -> None:
        self.deliver = deliver
        self.held: list[WatchEvent] | None = None

    def __call__(self, event: WatchEvent) -> None:
        if self.held is not None:
            self.held.append(event)
            return
        try:
            self.deliver(event)
        except TransformPending as pending:
            self.held = [event]
            pending.ready.addCallback(self._release)

    def _release(self, _: object) -> None:
        held, self.held = self.held or [], None
        for index, event in enumerate(held):
            self(event)
            if self.held is not None:  # waiting again: the rest stays behind that event
                self.held.extend(held[index + 1 :])
                return


__all__ = [
    "CompactedError",
    "ListPage",
    "NoChange",
    "Obj",
    "Registry",
    "StorageConversion",
    "metadata",
    "type_meta_conversion",
]
