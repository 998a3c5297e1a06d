"""The server's TLS transport: Twisted's, with the per-request calls into OpenSSL made
directly.

Why: Twisted's ``TLSMemoryBIOProtocol`` reaches OpenSSL through pyOpenSSL's ``Connection``,
and on an established connection each request costs, besides the encryption itself, about
a dozen of its methods (``bio_write``, ``recv`` twice, ``bio_read`` twice, ``send``), each
allocating a 32 KiB cffi buffer, running three callback checks and, for the last ``recv``
and ``bio_read`` of a read (nothing more to read or to send), raising and catching an
exception; every attribute read on a ``Connection`` also goes through its ``__getattr__``
hook. Measured with callgrind (bench/README.md, "The GET path"), that is a sizeable part of
a GET of one event. This class keeps Twisted's protocol whole (handshake, shutdown,
producers, buffering of writes that OpenSSL cannot take yet, error handling) and replaces
only the three steps an established connection repeats:

- bytes received go into the memory BIO with ``BIO_write``;
- application data comes out with ``SSL_read`` into one preallocated buffer (the reactor
  thread is the only user), until ``SSL_get_error`` says ``SSL_ERROR_WANT_READ``;
- application data goes in with ``SSL_write`` (16 KiB at a time, as Twisted does) and the
  records come out of the BIO with ``BIO_read``, an empty BIO being a return value rather
  than an exception.

Anything else OpenSSL answers (a close_notify, an alert, a failed callback of the context)
is handed to pyOpenSSL's own ``Connection._raise_ssl_error`` /
``Connection._handle_bio_errors``, so it becomes exactly the exception pyOpenSSL would have
raised, and Twisted's handling of it runs unchanged. Until the handshake is done, and for
any connection this module cannot serve (see :func:`lean_tls_protocol`), Twisted's own
methods run.

These are private names of pyOpenSSL (``Connection._ssl``, ``_into_ssl``, ``_from_ssl``,
``_context``, ``_raise_ssl_error``, ``_handle_bio_errors``, the context's callback helpers
and their ``_problems``) and of Twisted (``TLSMemoryBIOProtocol._tlsConnection``,
``_handshakeDone``, ``_lostTLSConnection``, ``_aborted``, ``_appSendBuffer``,
``_bufferedWrite``, ``_unbufferPendingWrites``, ``_shutdownTLS``,
``_tlsShutdownFinished``). Tested with pyOpenSSL 26.4 and Twisted 26.10;
:func:`lean_tls_protocol` checks every one of them when the listener starts and returns
Twisted's class unchanged, with a log line, when one is missing.
"""

from __future__ import annotations

import inspect
from typing import Any

from OpenSSL import SSL
from twisted.logger import Logger
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOProtocol
from twisted.python.failure import Failure

log = Logger()

try:
    from OpenSSL._util import ffi as _ffi
    from OpenSSL._util import lib as _lib
except ImportError:  # pragma: no cover - a pyOpenSSL that moved its bindings
    _ffi = _lib = None

#: Twisted's sizes: at most 32 KiB per read from the connection or the BIO, 16 KiB (one
#: TLS record's payload) per write.
READ_SIZE = 2**15
WRITE_SIZE = 2**14

#: Private names this module uses, checked by :func:`lean_tls_protocol`.
_CONNECTION_NAMES = ("_raise_ssl_error", "_handle_bio_errors")
_CONNECTION_ATTRIBUTES = ("_ssl", "_into_ssl", "_from_ssl", "_context")
_CONTEXT_HELPERS = ("_verify_helper", "_alpn_select_helper", "_ocsp_helper")
_PROTOCOL_NAMES = (
    "_producer",
    "_bufferedWrite",
    "_unbufferPendingWrites",
    "_shutdownTLS",
    "_tlsShutdownFinished",
    "_flushSendBIO",
    "_flushReceiveBIO",
    "_write",
)
_LIB_NAMES = (
    "SSL_read",
    "SSL_write",
    "SSL_get_error",
    "BIO_read",
    "BIO_write",
    "BIO_should_retry",
    "BIO_should_read",
    "SSL_ERROR_WANT_READ",
)

#: The one buffer ``SSL_read`` and ``BIO_read`` fill; its bytes are copied out at once
#: (``ffi.unpack``), before anything else can run on the reactor thread.
_buffer: Any = _ffi.new("char[]", READ_SIZE) if _ffi is not None else None


class _Lean:
    """What an established connection's direct calls need, looked up once.

    Kept apart from the protocol on purpose: Twisted's ``ProtocolWrapper`` has a
    ``__getattr__``, which makes every attribute read on a TLS protocol instance go through
    a slower lookup, so the per-request code reads from this object instead.
    """

    __slots__ = ("connection", "into", "out", "problems", "public", "ssl", "transport", "wrapped")

    def __init__(self, protocol: Any, connection: Any) -> None:
        self.connection = connection
        self.ssl = connection._ssl
        self.into = connection._into_ssl
        self.out = connection._from_ssl
        #: The TCP transport and the application protocol: fixed for the connection.
        self.transport = protocol.transport
        self.wrapped = protocol.wrappedProtocol
        #: True while a read or write goes through Twisted's methods (see ``problems``).
        self.public = False
        context = connection._context
        #: The ``_problems`` lists of pyOpenSSL's callback helpers (verify, ALPN, OCSP): an
        #: exception a callback raised waits there for the next pyOpenSSL call to raise it.
        #: The callbacks only run during a handshake (the server context refuses
        #: renegotiation), whose pyOpenSSL call raises them at once, so these stay empty on
        #: an established connection; should one not be, the read or write goes through
        #: pyOpenSSL, which raises it.
        self.problems = tuple(
            helper._problems
            for helper in (getattr(context, name) for name in _CONTEXT_HELPERS)
            if helper is not None
        )


def _lean_class(base: type[TLSMemoryBIOProtocol]) -> type[TLSMemoryBIOProtocol]:
    want_read = _lib.SSL_ERROR_WANT_READ
    ssl_read = _lib.SSL_read
    ssl_write = _lib.SSL_write
    ssl_get_error = _lib.SSL_get_error
    bio_read = _lib.BIO_read
    bio_write = _lib.BIO_write
    bio_should_retry = _lib.BIO_should_retry
    bio_should_read = _lib.BIO_should_read
    unpack = _ffi.unpack
    buffer = _buffer

    def receive(protocol: Any, lean: _Lean) -> None:
        """Twisted's ``_flushReceiveBIO``: application data out of OpenSSL, to the protocol
        it wraps, then whatever OpenSSL has to send."""
        ssl = lean.ssl
        wrapped = lean.wrapped
        while not protocol._lostTLSConnection:
            result = ssl_read(ssl, buffer, READ_SIZE)
            if result > 0:
                if not protocol._aborted:
                    wrapped.dataReceived(unpack(buffer, result))
                continue
            if ssl_get_error(ssl, result) == want_read:
                break
            # What Connection.recv would raise, handled as Twisted's _flushReceiveBIO
            # handles it.
            try:
                lean.connection._raise_ssl_error(ssl, result)
            except SSL.WantReadError:
                break
            except SSL.ZeroReturnError:
                protocol._shutdownTLS()
                protocol._tlsShutdownFinished(None)
            except SSL.Error:
                protocol._tlsShutdownFinished(Failure())
            else:
                break  # not an error after all (SSL_ERROR_NONE): nothing was read
        send(lean)

    def send(lean: _Lean) -> None:
        """Twisted's ``_flushSendBIO``: the records OpenSSL made, to the TCP transport."""
        out = lean.out
        result = bio_read(out, buffer, READ_SIZE)
        if result > 0:
            lean.transport.write(unpack(buffer, result))
            return
        if bio_should_retry(out) and bio_should_read(out):
            return  # nothing to send (Twisted: WantReadError, ignored)
        try:
            lean.connection._handle_bio_errors(out, result)
        except SSL.WantReadError:
            pass

    def write(protocol: Any, lean: _Lean, data: bytes) -> None:
        """Twisted's ``_write``: application bytes into OpenSSL, 16 KiB at a time, each
        followed by sending what it made."""
        if protocol._lostTLSConnection:
            return
        ssl = lean.ssl
        total = len(data)
        sent = 0
        while sent < total:
            chunk = data if total <= WRITE_SIZE else data[sent : sent + WRITE_SIZE]
            result = ssl_write(ssl, chunk, len(chunk))
            if result <= 0:
                # What Connection.send would raise, handled as Twisted's _write does.
                try:
                    lean.connection._raise_ssl_error(ssl, result)
                except SSL.WantReadError:
                    protocol._bufferedWrite(data[sent:])
                    break
                except SSL.Error:
                    protocol._tlsShutdownFinished(Failure())
                    break
                break  # not an error after all (SSL_ERROR_NONE), yet nothing written
            sent += result
            send(lean)

    class LeanTLS(base):  # type: ignore[valid-type,misc]
        """``base`` (Twisted's TLS protocol) with direct OpenSSL calls once the handshake
        is done (module docstring)."""

        #: Set once the handshake is done; None: Twisted's own methods.
        _lean: _Lean | None = None

        def _goLean(self) -> None:
            connection = self._tlsConnection
            if type(connection) is SSL.Connection and connection._from_ssl is not None:
                self._lean = _Lean(self, connection)

        def _public(self, lean: _Lean | None, method: Any, *args: Any) -> None:
            """Twisted's own ``method`` (pyOpenSSL's calls all the way down)."""
            if lean is None:
                method(*args)
                return
            lean.public = True
            try:
                method(*args)
            finally:
                lean.public = False

        def dataReceived(self, data: bytes) -> None:
            lean = self._lean
            if lean is None or any(lean.problems):
                self._public(lean, super().dataReceived, data)
                if lean is None and self._handshakeDone and not self._lostTLSConnection:
                    self._goLean()
                return
            into = lean.into
            written = bio_write(into, data, len(data))
            if written <= 0:
                lean.connection._handle_bio_errors(into, written)
            if self._appSendBuffer:
                self._unbufferPendingWrites()
            receive(self, lean)

        def _flushReceiveBIO(self) -> None:
            lean = self._lean
            if lean is None or lean.public:
                super()._flushReceiveBIO()
                return
            receive(self, lean)

        def _flushSendBIO(self) -> None:
            lean = self._lean
            if lean is None or lean.public:
                super()._flushSendBIO()
                return
            send(lean)

        def _write(self, data: bytes) -> None:
            lean = self._lean
            if lean is None or lean.public or type(data) is not bytes or any(lean.problems):
                self._public(lean, super()._write, data)
                return
            write(self, lean, data)

        def writeNow(self, data: bytes) -> None:
            """``write`` without the small-write buffer: what it holds is written first, then
            ``data``, at once (for an HTTP/1.1 response's head, ``H1Channel.writeData``)."""
            self._aggregator.flush()
            if self.disconnecting and self._producer is None:
                return  # TLSMemoryBIOProtocol.write drops these too
            self._write(data)

    if not issubclass(base, BufferingTLSTransport):
        LeanTLS.writeNow = LeanTLS.write  # type: ignore[method-assign]  # no buffer to go around
    LeanTLS.__name__ = LeanTLS.__qualname__ = f"Lean{base.__name__}"
    return LeanTLS


def _missing(base: type[TLSMemoryBIOProtocol]) -> list[str]:
    """The private names this module needs that are not there."""
    if _lib is None or _ffi is None:
        return ["OpenSSL._util.lib"]
    missing = [f"lib.{name}" for name in _LIB_NAMES if not hasattr(_lib, name)]
    missing += [
        f"Connection.{name}" for name in _CONNECTION_NAMES if not hasattr(SSL.Connection, name)
    ]
    missing += [f"{base.__name__}.{name}" for name in _PROTOCOL_NAMES if not hasattr(base, name)]
    try:
        probe = SSL.Connection(SSL.Context(SSL.TLS_SERVER_METHOD), None)
    except Exception:  # pragma: no cover - OpenSSL refuses a bare context
        return [*missing, "Connection(context, None)"]
    missing += [f"Connection.{name}" for name in _CONNECTION_ATTRIBUTES if not hasattr(probe, name)]
    context = probe.get_context()
    missing += [f"Context.{name}" for name in _CONTEXT_HELPERS if not hasattr(context, name)]
    missing += [
        f"{base.__name__}.{name}"
        for name in ("_handshakeDone", "_lostTLSConnection", "_aborted")
        if not hasattr(base, name)
    ]
    try:
        source = inspect.getsource(TLSMemoryBIOProtocol.makeConnection)
    except (OSError, TypeError):  # no source installed: the instance attribute is unchecked
        source = "self._appSendBuffer"
    if "self._appSendBuffer" not in source:
        missing.append("TLSMemoryBIOProtocol._appSendBuffer")
    return missing


def lean_tls_protocol(base: type[TLSMemoryBIOProtocol]) -> type[TLSMemoryBIOProtocol]:
    """``base`` with the direct calls (module docstring), or ``base`` itself, logged, when
    the pyOpenSSL or Twisted internals it relies on are not all there."""
    missing = _missing(base)
    if missing:
        log.warn(
            "TLS: serving through pyOpenSSL's public methods (internals not found: {missing})",
            missing=", ".join(missing),
        )
        return base
    return _lean_class(base)
