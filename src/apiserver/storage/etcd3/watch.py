"""Watches over the gateway's streaming ``/v3/watch``.

The gateway turns etcd's bidirectional watch stream into one HTTP request: the body carries
``{"create_request": {...}}`` and the response is a never-ending chunked stream of
newline-delimited JSON objects ``{"result": WatchResponse}`` (or ``{"error": {...}}``). The
first result has ``created: true``; a watch whose start revision is compacted then gets
``canceled: true`` with ``compact_revision``. Note that proto3 omits ``type`` for PUT (enum 0).

Like clientv3's watcher, a broken stream is re-established (on the next endpoint, with capped
exponential backoff on the injected clock) from the last delivered revision + 1, so no event is
lost or repeated as long as etcd still has that history; if it has been compacted meanwhile,
``done`` errbacks with CompactedError (kube-apiserver then answers 410 Gone).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from twisted.internet.defer import Deferred
from twisted.internet.protocol import Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.storage.etcd3.gateway import as_int, b64, error_from_message, prefix_end, unb64
from apiserver.storage.interface import (
    CompactedError,
    KeyValue,
    StorageError,
    StorageTimeoutError,
    UnavailableError,
    WatchEvent,
)

if TYPE_CHECKING:
    from apiserver.storage.etcd3.store import Etcd3Store

log = Logger()

#: Reconnect backoff: first delay, factor, cap (seconds).
BACKOFF_INITIAL = 0.05
BACKOFF_FACTOR = 2.0
BACKOFF_MAX = 2.0


def kv_from_json(data: dict[str, Any]) -> KeyValue:
    return KeyValue(
        key=unb64(data.get("key")),
        value=unb64(data.get("value")),
        create_revision=as_int(data.get("create_revision")),
        mod_revision=as_int(data.get("mod_revision")),
        lease=as_int(data.get("lease")),
    )


def event_from_json(data: dict[str, Any]) -> WatchEvent:
    kv = kv_from_json(data.get("kv") or {})
    prev = data.get("prev_kv")
    prev_kv = kv_from_json(prev) if prev else None
    if data.get("type") == "DELETE":
        return WatchEvent(type="DELETE", kv=kv, prev_kv=prev_kv)
    return WatchEvent(type="PUT", kv=kv, prev_kv=prev_kv)


class _StreamProtocol(Protocol):
    """Splits the response body into lines and hands each JSON object to the watch."""

    def __init__(self, watch: Etcd3Watch) -> None:
        self._watch = watch
        self._buffer = b""
        self.closed = False

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        if b"\n" not in self._buffer:
            return
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            if self.closed:
                return
            if line.strip():
                try:
                    self._watch._message(self, line)
                except Exception as e:  # a bug or a message we do not understand
                    log.failure("etcd watch: cannot handle {line!r}", line=line[:200])
                    self._watch._fail(StorageError(f"bad watch message: {e}"))
                    return

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        if not self.closed:
            self.closed = True
            self._watch._stream_lost(self, reason)

    def close(self) -> None:
        self.closed = True
        transport: Any = self.transport
        if transport is not None:
            transport.loseConnection()


class Etcd3Watch:
    """One watch on a key prefix; see the module docstring."""

    def __init__(
        self,
        store: Etcd3Store,
        prefix: bytes,
        start_revision: int,
        callback: Callable[[WatchEvent], None],
        *,
        guessed_start: bool = False,
    ) -> None:
        self.done: Deferred[None] = Deferred()
        self._store = store
        self._prefix = prefix
        self._callback = callback
        # The revision to resume from; 0 means "now" (what etcd calls no start revision).
        self._next_revision = start_revision
        # The start revision was chosen by the store for a "from now on" watch.
        self._guessed_start = guessed_start
        self._stream: _StreamProtocol | None = None
        self._connecting: Deferred[Any] | None = None
        self._retry: Any = None  # IDelayedCall
        self._backoff = BACKOFF_INITIAL
        self._finished = False
        self.created = False

    # -- life cycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self._connect()

    def cancel(self) -> None:
        """Stop delivery and close the stream; ``done`` fires with None."""
        self._finish(None)

    def _finish(self, result: StorageError | None) -> None:
        if self._finished:
            return
        self._finished = True
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        if self._connecting is not None:
            connecting, self._connecting = self._connecting, None
            connecting.cancel()
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()
        self._store._watch_finished(self)
        if result is None:
            self.done.callback(None)
        else:
            self.done.errback(result)

    # -- connecting ---------------------------------------------------------------------------

    def _connect(self) -> None:
        self._retry = None
        if self._finished:
            return
        request: dict[str, Any] = {
            "key": b64(self._prefix),
            "range_end": b64(prefix_end(self._prefix)),
            "prev_kv": True,
        }
        if self._next_revision > 0:
            request["start_revision"] = str(self._next_revision)
        d = self._store._gateway.open_stream("/v3/watch", {"create_request": request})
        self._connecting = d
        d.addCallbacks(self._connected, self._connect_failed)

    def _connected(self, response: Any) -> None:
        self._connecting = None
        if self._finished:
            response.deliverBody(_Discard())
            return
        self._stream = _StreamProtocol(self)
        response.deliverBody(self._stream)

    def _connect_failed(self, failure: Failure) -> None:
        self._connecting = None
        if self._finished:
            return
        log.info("etcd watch on {prefix!r} could not connect: {f}", prefix=self._prefix, f=failure)
        self._schedule_retry()

    def _schedule_retry(self) -> None:
        if self._finished or self._retry is not None:
            return
        delay, self._backoff = self._backoff, min(self._backoff * BACKOFF_FACTOR, BACKOFF_MAX)
        self._retry = self._store._clock.callLater(delay, self._connect)

    def _stream_lost(self, stream: _StreamProtocol, reason: Failure) -> None:
        if stream is not self._stream:
            return
        self._stream = None
        self.created = False
        if self._finished:
            return
        log.debug("etcd watch on {prefix!r} lost its stream: {r}", prefix=self._prefix, r=reason)
        self._schedule_retry()

    # -- messages -----------------------------------------------------------------------------

    def _message(self, stream: _StreamProtocol, line: bytes) -> None:
        if stream is not self._stream or self._finished:
            return
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            log.warn("etcd watch: undecodable line {line!r}", line=line[:200])
            return
        if "error" in message and "result" not in message:
            error = message["error"]
            if isinstance(error, dict):
                text = str(error.get("message") or error.get("error") or "")
                code = as_int(error.get("grpc_code") or error.get("code"))
            else:
                text, code = str(message.get("message") or error), as_int(message.get("code"))
            self._stream_error(error_from_message(text, code))
            return
        result = message.get("result") or {}
        compact_revision = as_int(result.get("compact_revision"))
        if compact_revision:
            if self._guessed_start:
                # "From now on", guessed from an old revision: fall back to etcd's now.
                self._restart_from_now()
                return
            self._fail(
                CompactedError(
                    f"required revision {self._next_revision} has been compacted "
                    f"(compacted revision {compact_revision})",
                    key=self._prefix,
                    revision=compact_revision,
                )
            )
            return
        if result.get("canceled"):
            reason = result.get("cancel_reason") or "watch canceled by etcd"
            self._fail(error_from_message(str(reason)))
            return
        if result.get("created"):
            self.created = True
            self._backoff = BACKOFF_INITIAL
            if self._next_revision == 0:
                header = result.get("header") or {}
                self._next_revision = as_int(header.get("revision")) + 1
        events = result.get("events")
        if not events:
            return
        self._guessed_start = False
        for data in events:
            event = event_from_json(data)
            # etcd sends all events of one revision in one message, so resuming from the last
            # revision + 1 neither repeats nor skips any.
            self._next_revision = event.kv.mod_revision + 1
            try:
                self._callback(event)
            except Exception:
                log.failure("etcd watch callback failed")
            if self._finished or stream is not self._stream:
                return

    def _stream_error(self, error: StorageError) -> None:
        """An error object in the stream: retry what may pass (this member has no leader,
        timed out, ...), give up on the rest."""
        if not isinstance(error, UnavailableError | StorageTimeoutError):
            self._fail(error)
            return
        log.info("etcd watch on {prefix!r}: {e}; reconnecting", prefix=self._prefix, e=error)
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()
        self.created = False
        self._schedule_retry()

    def _fail(self, error: StorageError) -> None:
        self._finish(error)

    def _restart_from_now(self) -> None:
        self._guessed_start = False
        self._next_revision = 0
        if self._stream is not None:
            stream, self._stream = self._stream, None
            stream.close()
        self._connect()


class _Discard(Protocol):
    def connectionMade(self) -> None:
        transport: Any = self.transport
        if transport is not None:
            transport.loseConnection()
