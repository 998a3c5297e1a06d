"""One client watch: a chunked stream of ``{"type": ..., "object": ...}`` lines.

Follows k8s.io/apiserver ``pkg/endpoints/handlers/watch.go`` (headers flushed at once, one
JSON document and a newline per event, a clean end on timeout) and ``pkg/storage/etcd3/
watcher.go`` (initial events, then changes after the start revision; an update that starts
matching the selectors is ADDED, one that stops matching is DELETED with the old object;
DELETED carries the last state with the deletion's revision).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
from twisted.internet.interfaces import IDelayedCall, IPushProducer, IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from apiserver.api.events import convert
from apiserver.api.events.encoding import EncodedEvents
from apiserver.api.events.protowire import EventsProtobuf
from apiserver.api.events.tables import partial_object, table_for
from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.negotiation import PROTOBUF
from apiserver.http.coalesce import WriteCoalescer
from apiserver.http.request import HTTPRequest
from apiserver.http.status import status_body
from apiserver.http.watchevents import WatchEventCounts
from apiserver.registry.store import Obj, Registry, metadata
from apiserver.storage.interface import CompactedError, PausableWatch, WatchEvent

log = Logger()

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
TOO_OLD = "The resourceVersion for the provided watch is too old."


class _EventMemo:
    """One change decoded and encoded once, however many watchers it goes to."""

    __slots__ = ("event", "lines", "new", "old")

    def __init__(self, event: WatchEvent, registry: Registry) -> None:
        self.event = event
        self.new = registry.decode(event.kv) if event.type == "PUT" else None
        self.old: Obj | None = None
        if event.prev_kv is not None:
            # DELETED (or no longer matching) carries the last state at the change's revision.
            prev = registry.decode(event.prev_kv)
            meta = {**metadata(prev), "resourceVersion": str(event.kv.mod_revision)}
            self.old = {**prev, "metadata": meta}
        #: Watch lines (or protobuf frames) per (event type, encoding of a served version).
        self.lines: dict[tuple[str, EncodedEvents | EventsProtobuf], bytes] = {}


_last_memo: _EventMemo | None = None


def _memo_for(event: WatchEvent, registry: Registry) -> _EventMemo:
    """The memo of ``event``: fan-out hands the same event object to every watcher in turn."""
    global _last_memo
    memo = _last_memo
    if memo is None or memo.event is not event:
        memo = _last_memo = _EventMemo(event, registry)
    return memo


#: Bytes of initial events written per reactor turn while the connection takes them (and at
#: least one event): about what a connection buffers before it asks its producer to pause, so
#: a client that stops reading holds this much of the replay, not all of it.
REPLAY_BYTES = 64 << 10


@implementer(IPushProducer)
class _Replay:
    """Writes a watch's initial events a chunk per reactor turn, pausing with the connection.

    The response's producer until the last event (and the initial-events-end bookmark) is
    written; then :meth:`WatchStream._replay_done` hands over to the live watch. Released
    (its items dropped, its call cancelled) as soon as the stream ends, a dropped client
    included.
    """

    def __init__(self, stream: WatchStream, items: list[Obj], bookmark: int) -> None:
        self.stream = stream
        self.items: list[Obj] | None = items
        self.pos = 0
        #: The revision of the initial-events-end bookmark to send last (-1: none).
        self.bookmark = bookmark
        #: Set by the connection (registering may pause at once when its buffer is full).
        self.paused = False
        self.call: IDelayedCall | None = None

    def pauseProducing(self) -> None:
        self.paused = True
        if self.call is not None and self.call.active():
            self.call.cancel()
        self.call = None

    def resumeProducing(self) -> None:
        self.paused = False
        if self.call is None and self.items is not None:
            self.call = self.stream.clock.callLater(0, self._run)

    def stopProducing(self) -> None:
        self.release()

    def release(self) -> None:
        self.pauseProducing()
        self.items = None

    def _run(self) -> None:
        self.call = None
        stream, items = self.stream, self.items
        if items is None or self.paused or stream.ended:
            return
        pos, size, count = self.pos, 0, len(items)
        while pos < count and size < REPLAY_BYTES:
            stream._send("ADDED", items[pos])
            pos += 1
            pending = stream._pending
            if pending:
                size += len(pending[-1])
        self.pos = pos
        if pos >= count and self.bookmark >= 0:
            stream._bookmark(self.bookmark, initial_events_end=True)
            self.bookmark = -1
        stream.flush()  # may pause us at once, when the connection's buffer fills
        if stream.ended or self.items is None:
            return
        if self.pos < len(items) or self.bookmark >= 0:
            if not self.paused:
                self.call = stream.clock.callLater(0, self._run)
        elif not self.paused:
            self.items = None
            stream._replay_done()
        # else: all written but the connection is full: handed over once it drains.

    def start(self) -> None:
        """The first chunk at once (as the whole replay was written before), the rest on
        later turns."""
        if not self.paused:
            self._run()


class WatchStream:
    """Streams changes of one registry prefix to one HTTP request until it ends."""

    def __init__(
        self,
        request: HTTPRequest,
        registry: Registry,
        namespace: str | None,
        *,
        keep: Callable[[Obj], bool] | None,
        out: Any,
        clock: IReactorTime,
        timeout: float,
        resource_version: str,
        send_initial_events: bool,
        allow_bookmarks: bool,
        include_object: str,
        pretty: bool,
        to_v1: Callable[..., Obj],
        encoded: EncodedEvents,
        coalescer: WriteCoalescer,
        lifecycle: Any = None,
        protobuf: EventsProtobuf | None = None,
        table: tuple[Callable[[Obj, float], list[Any]], tuple[dict[str, Any], ...]] | None = None,
        counts: WatchEventCounts | None = None,
    ) -> None:
        self.request = request
        #: ``apiserver_watch_events_total`` / ``_sizes`` of the stream's resource.
        self.counts = counts if counts is not None else WatchEventCounts()
        self.registry = registry
        self.namespace = namespace
        self.keep = keep
        self.out = out
        self.clock = clock
        self.timeout = timeout
        self.resource_version = resource_version
        self.send_initial_events = send_initial_events
        self.allow_bookmarks = allow_bookmarks
        self.include_object = include_object
        self.to_v1 = to_v1
        self.lifecycle = lifecycle
        self.encoded = encoded
        self._plain_json = out.kind == "json"
        #: Protobuf frames (length-prefixed WatchEvents) instead of JSON lines.
        self.protobuf = protobuf if out.media_type.startswith(PROTOBUF) else None
        #: The resource's Table cells and column definitions (None: the events').
        self.table = table
        self.watch: PausableWatch | None = None
        #: The initial events still being written (resourceVersion 0 or unset), or None.
        self._replay: _Replay | None = None
        self.timer: IDelayedCall | None = None
        self.ended = False
        self._columns_sent = False
        #: Output waiting for the coalescer's next run (None: nothing waiting).
        self._pending: list[bytes] | None = None
        self.coalescer = coalescer

    async def start(self) -> None:
        initial: list[Obj] = []
        rv = self.resource_version
        if rv in ("", "0"):
            if self.send_initial_events:
                page = await self.registry.list_page(self.namespace, keep=self.keep)
                initial = page.items
                start_revision = page.revision + 1
                initial_revision = page.revision
            else:
                start_revision = await self.registry.current_revision() + 1
                initial_revision = start_revision - 1
        else:
            start_revision = int(rv) + 1
            initial_revision = int(rv)

        request = self.request
        request.setResponseCode(200)
        request.setHeader(b"content-type", self.out.media_type.encode())
        request.setHeader(b"cache-control", b"no-cache, private")
        request.write(b"")
        request.notifyFinish().addBoth(self._client_gone)
        if self.lifecycle is not None:
            self.lifecycle.add_watch(self)

        if self.ended:
            return
        watch = self.watch = self.registry.watch(self.namespace, start_revision, self._on_event)
        watch.done.addCallbacks(self._watch_ended, self._watch_failed)
        if self.ended:
            return
        if initial or (self.send_initial_events and self.allow_bookmarks):
            # The initial events go out under the same back-pressure as live ones (issue 17):
            # a chunk per reactor turn while the connection takes them, none while it is full;
            # changes meanwhile wait, bounded, in the paused watch (k8s.io/apiserver
            # pkg/storage/cacher/cache_watcher.go sends its initEvents through the same
            # result channel as live events).
            watch.pauseProducing()
            bookmark = initial_revision if self.send_initial_events and self.allow_bookmarks else -1
            self._replay = _Replay(self, initial, bookmark)
            self.request.registerProducer(self._replay, True)
            self._replay.start()
        else:
            # Flow control: every registry watch pauses while the connection's buffer is full
            # and is ended once it falls too far behind (bounded memory), from the watch cache
            # or, with --watch-cache=false, apiserver.storage.flowcontrol.
            self.request.registerProducer(watch, True)
        if not self.ended:
            self.timer = self.clock.callLater(self.timeout, self.end)

    def _replay_done(self) -> None:
        """The initial events are all written and the connection has room: the live watch
        takes over as the response's producer."""
        self._replay = None
        watch = self.watch
        if self.ended or watch is None:
            return
        self.request.unregisterProducer()
        self.request.registerProducer(watch, True)
        watch.resumeProducing()

    # --- events ------------------------------------------------------------------------

    def _on_event(self, event: WatchEvent) -> None:
        if self.ended:
            return
        if event.type == "BOOKMARK":
            if self.allow_bookmarks:
                self._bookmark(event.kv.mod_revision)
            return
        keep = self.keep
        try:
            memo = _memo_for(event, self.registry)
        except StatusError as error:
            # A stored value that cannot be decoded: an ERROR event and the end of the watch,
            # as k8s.io/apiserver pkg/storage/etcd3/watcher.go sends its transform errors.
            self._write(
                {
                    "type": "ERROR",
                    "object": status_body(error.code, error.reason, error.message, error.details),
                }
            )
            self.end()
            return
        new, old = memo.new, memo.old
        new_match = new is not None and (keep is None or keep(new))
        old_match = old is not None and (keep is None or keep(old))
        if new_match:
            assert new is not None
            self._send("MODIFIED" if old_match else "ADDED", new, memo)
        elif old_match:
            assert old is not None
            self._send("DELETED", old, memo)

    def _encode_object(self, obj: Obj) -> Any:
        kind = self.out.kind
        if kind == "table":
            table = table_for(
                [obj],
                self.out.version,
                {"resourceVersion": metadata(obj).get("resourceVersion", "")},
                self.include_object,
                self.clock.seconds(),
                self.to_v1,
                *(self.table or ()),
            )
            if self._columns_sent:
                table["columnDefinitions"] = None
            self._columns_sent = True
            return table
        if kind == "partial":
            return partial_object(obj, self.out.version)
        return self.to_v1(obj)

    def _send(self, event_type: str, obj: Obj, memo: _EventMemo | None = None) -> None:
        if self._plain_json:
            key = (event_type, self.encoded)
            line = memo.lines.get(key) if memo is not None else None
            if line is None:
                line = self.encoded.watch_line(event_type, obj)
                if memo is not None:
                    memo.lines[key] = line
            self._write_bytes(line)
            return
        protobuf = self.protobuf
        if protobuf is not None and self.out.kind == "protobuf":
            pb_key = (event_type, protobuf)
            frame = memo.lines.get(pb_key) if memo is not None else None
            if frame is None:
                frame = protobuf.watch_frame(event_type, obj)
                if memo is not None:
                    memo.lines[pb_key] = frame
            self._write_bytes(frame)
            return
        self._write({"type": event_type, "object": self._encode_object(obj)})

    def _write_bytes(self, line: bytes) -> None:
        if self.ended:
            return
        self.counts.sent(len(line))
        pending = self._pending
        if pending is None:
            self._pending = [line]
            self.coalescer.mark(self)
        else:
            pending.append(line)

    def flush(self) -> None:
        """Write what is waiting in one piece (called by the coalescer, and before ending)."""
        pending, self._pending = self._pending, None
        if pending and not self.ended:
            self._emit(pending[0] if len(pending) == 1 else b"".join(pending))

    def _emit(self, data: bytes) -> None:
        try:
            self.request.write(data)
        except Exception:
            log.failure("writing a watch event failed")
            self.end()

    def _bookmark(self, revision: int, initial_events_end: bool = False) -> None:
        meta: dict[str, Any] = {"resourceVersion": str(revision)}
        if initial_events_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        empty = self.to_v1(convert.empty_internal(meta))
        meta = empty["metadata"]
        if self.out.kind == "partial":
            body: Any = {
                "kind": "PartialObjectMetadata",
                "apiVersion": f"meta.k8s.io/{self.out.version}",
                "metadata": meta,
            }
        else:
            body = empty
        self._write({"type": "BOOKMARK", "object": body})

    def _write(self, event: dict[str, Any]) -> None:
        if self.protobuf is not None:
            self._write_bytes(self.protobuf.watch_frame_of(event["type"], event["object"]))
            return
        self._write_bytes(orjson.dumps(event, option=orjson.OPT_APPEND_NEWLINE))

    def _watch_ended(self, _: object) -> None:
        """The store or the cache ended the watch (a slow watcher, a re-list): end cleanly."""
        self.end()

    def _watch_failed(self, failure: Failure) -> None:
        if self.ended:
            return
        if failure.check(CompactedError):
            status = status_body(410, "Expired", TOO_OLD)
            self._write({"type": "ERROR", "object": status})
        else:
            log.failure("watch on {prefix} failed", failure, prefix=self.namespace)
            status = status_body(
                500, "InternalError", f"Internal error occurred: {failure.getErrorMessage()}"
            )
            self._write({"type": "ERROR", "object": status})
        self.end()

    # --- ending ------------------------------------------------------------------------

    def terminate(self) -> None:
        """The server is shutting down: end the stream cleanly (k8s.io/apiserver
        ``pkg/server/filters/watch_termination.go``)."""
        self.end()

    def end(self) -> None:
        """Finish the chunked response (timeout, shutdown or a watch error)."""
        if self.ended:
            return
        self.flush()
        if self.ended:  # the flush itself failed and ended the stream
            return
        self._stop()
        if not self.request.finished and not self.request._disconnected:
            self.request.finish()

    def _client_gone(self, _: object) -> None:
        self._stop()

    def _stop(self) -> None:
        self.ended = True
        self._pending = None
        if self._replay is not None:
            replay, self._replay = self._replay, None
            replay.release()
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        if self.watch is not None:
            watch, self.watch = self.watch, None
            try:
                self.request.unregisterProducer()
            except Exception:
                pass
            watch.cancel()
        if self.lifecycle is not None:
            self.lifecycle.remove_watch(self)
