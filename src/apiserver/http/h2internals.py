"""The private parts of ``h2``, ``hpack``, ``hyperframe`` and Twisted that our HTTP/2 fast path
(:mod:`apiserver.http.h2`, :mod:`apiserver.http.h2request`) relies on, checked at start-up.

Why: the fast path reaches inside these libraries (h2's stream creation and output buffer,
hpack's table, Twisted's ``H2Connection`` bookkeeping, two module globals it replaces). None of
that is public API, so a release may rename or reshape any of it without notice. setup.cfg
bounds the versions the fast path was tested with; this check is the second line: before the
fast path is installed (``configure_http2``) every internal it touches is looked up and its
shape compared with what the code expects (a method's parameters, an attribute on a freshly
built connection and stream, an enum member). When anything differs the server serves
HTTP/2 with Twisted's own ``twisted.web._http2.H2Connection`` instead, which only uses the
libraries' public API, and says once, in the log, what was different.

What is checked is what the code uses, listed by where it is used; a new use of a private
member in the fast path belongs here too (``tests/unit/http/test_h2internals.py`` checks
that the list finds a member that is taken away).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

#: Functions and methods the fast path calls or overrides, with the parameter names it
#: passes (positionally or by name), as ``module:qualified.name``.
CALLABLES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # h2: the receive path opens streams and decodes header blocks itself.
    ("h2.connection:_decode_headers", ("decoder", "encoded_header_block")),
    ("h2.connection:H2Connection._begin_new_stream", ("self", "stream_id", "allowed_ids")),
    ("h2.connection:H2Connection._terminate_connection", ("self", "error_code")),
    ("h2.connection:H2Connection.data_to_send", ("self", "amount")),
    ("h2.connection:H2Connection.local_flow_control_window", ("self", "stream_id")),
    ("h2.stream:H2StreamStateMachine.process_input", ("self", "input_")),
    ("h2.utilities:validate_headers", ("headers", "hdr_validation_flags")),
    ("h2.utilities:normalize_inbound_headers", ("headers", "hdr_validation_flags")),
    ("h2.utilities:validate_outbound_headers", ("headers", "hdr_validation_flags")),
    ("h2.utilities:normalize_outbound_headers", ("headers", "hdr_validation_flags")),
    # hpack: the literal encoder and the caching decoder subclass these.
    ("hpack:Encoder.add", ("self", "to_add", "sensitive", "huffman")),
    ("hpack:Encoder.encode", ("self", "headers", "huffman")),
    ("hpack:Decoder.decode", ("self", "data", "raw")),
    ("hpack.hpack:encode_integer", ("integer", "prefix_bits")),
    # hyperframe: replaced by quiet_frame_repr.
    ("hyperframe.frame:_raw_data_repr", ("data",)),
    # Twisted: FastH2Connection overrides or calls these.
    ("twisted.web._http2:H2Connection.__init__", ("self", "reactor")),
    ("twisted.web._http2:H2Connection.connectionLost", ("self", "reason", "_cancelTimeouts")),
    ("twisted.web._http2:H2Connection._sendPrioritisedData", ("self", "args")),
    ("twisted.web._http2:H2Connection._requestDataReceived", ("self", "event")),
    ("twisted.web._http2:H2Connection._requestEnded", ("self", "event")),
    ("twisted.web._http2:H2Connection._requestAborted", ("self", "event")),
    ("twisted.web._http2:H2Connection._handlePriorityUpdate", ("self", "event")),
    ("twisted.web._http2:H2Connection._requestDone", ("self", "streamID")),
    ("twisted.web._http2:H2Connection._send100Continue", ("self", "streamID")),
    ("twisted.web._http2:H2Connection._terminate", ("self", "reason")),
    ("twisted.web._http2:H2Connection._tryToWriteControlData", ("self",)),
    ("twisted.web._http2:H2Connection._isSecure", ("self",)),
    (
        "twisted.web._http2:H2Stream.__init__",
        ("self", "streamID", "connection", "headers", "requestFactory", "site", "factory"),
    ),
    ("twisted.protocols.tls:TLSMemoryBIOProtocol.write", ("self", "bytes")),
    ("twisted.protocols.tls:_AggregateSmallWrites.flush", ("self",)),
    # Twisted, for the lean request (h2request.py).
    (
        "twisted.internet._producer_helpers:_PullToPush.__init__",
        ("self", "pullProducer", "consumer"),
    ),
    ("twisted.internet._producer_helpers:_PullToPush.startStreaming", ("self",)),
    ("twisted.internet._producer_helpers:_PullToPush.stopStreaming", ("self",)),
    ("twisted.web.http:_getContentFile", ("length",)),
)

#: Module-level names, classes and enum members the fast path reads.
NAMES: tuple[str, ...] = (
    "h2.connection:AllowedStreamIDs.ODD",
    "h2.connection:ConnectionState.SERVER_OPEN",
    "h2.stream:StreamState.OPEN",
    "h2.stream:StreamState.HALF_CLOSED_REMOTE",
    "h2.stream:StreamState.CLOSED",
    "h2.stream:StreamInputs.SEND_END_STREAM",
    "h2.utilities:CONNECTION_HEADERS",
    "h2.utilities:HeaderValidationFlags",
    "hpack:NeverIndexedHeaderTuple",
    "twisted.web._http2:_END_STREAM_SENTINEL",
    "twisted.protocols.tls:BufferingTLSTransport",
    "twisted.web.http:H2Connection",
)

#: Fields of ``h2.utilities.HeaderValidationFlags`` that the fast path sets by name.
VALIDATION_FLAGS = ("is_client", "is_trailer", "is_response_header", "is_push_promise")

#: Attributes of live objects (a Twisted ``H2Connection`` and what it holds), by object.
INSTANCE_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "twisted H2Connection": (
        "conn",
        "streams",
        "priority",
        "_reactor",
        "_stillProducing",
        "_consumerBlocked",
        "_bufferedControlFrames",
        "_outboundStreamQueues",
        "_streamCleanupCallbacks",
    ),
    "h2 H2Connection": (
        "config",
        "encoder",
        "decoder",
        "streams",
        "state_machine",
        "incoming_buffer",
        "local_settings",
        "highest_inbound_stream_id",
        "max_inbound_frame_size",
        "max_outbound_frame_size",
        "outbound_flow_control_window",
        "_data_to_send",
        "_closed_streams",
        "_frame_dispatch_table",
    ),
    "h2 FrameBuffer": ("_data", "_preamble_len", "_headers_buffer"),
    "h2 H2Configuration": (
        "validate_inbound_headers",
        "validate_outbound_headers",
        "normalize_outbound_headers",
    ),
    "h2 H2Stream": ("state_machine", "outbound_flow_control_window", "_expected_content_length"),
    "h2 H2StreamStateMachine": (
        "state",
        "client",
        "headers_received",
        "headers_sent",
        "stream_closed_by",
    ),
    "hpack Encoder": ("header_table",),
    "hpack Decoder": ("header_table", "max_allowed_table_size", "max_header_list_size"),
    "hpack HeaderTable": ("dynamic_entries", "maxsize", "resized", "STATIC_TABLE_MAPPING"),
}


def _resolve(spec: str) -> Any:
    """The object named ``module:attr.attr...``; raises if any part is missing."""
    module_name, _, path = spec.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in path.split("."):
        target = getattr(target, part)
    return target


def _check_callables(problems: list[str], callables: Sequence[tuple[str, tuple[str, ...]]]) -> None:
    for spec, expected in callables:
        try:
            parameters = inspect.signature(_resolve(spec)).parameters
        except (ImportError, AttributeError) as error:
            problems.append(f"{spec} is missing ({error})")
            continue
        except (TypeError, ValueError) as error:
            problems.append(f"{spec} has no inspectable signature ({error})")
            continue
        found = tuple(parameters)
        # The expected parameters first; any added later must be optional.
        extra = found[len(expected) :]
        if found[: len(expected)] != expected or any(
            parameters[name].default is inspect.Parameter.empty
            and parameters[name].kind
            not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            for name in extra
        ):
            problems.append(f"{spec} takes {found}, expected {expected}")


def _check_names(problems: list[str], names: Sequence[str]) -> None:
    for spec in names:
        try:
            value = _resolve(spec)
        except (ImportError, AttributeError) as error:
            problems.append(f"{spec} is missing ({error})")
            continue
        if value is None:
            problems.append(f"{spec} is None")


def _live_objects() -> dict[str, Any]:
    """A Twisted HTTP/2 connection on a fake clock, one stream opened the way the fast path
    opens it (``_begin_new_stream``), and the objects they hold."""
    from h2.connection import AllowedStreamIDs
    from twisted.internet.task import Clock
    from twisted.web import _http2

    connection = _http2.H2Connection(reactor=Clock())
    conn = connection.conn
    stream = conn._begin_new_stream(1, AllowedStreamIDs.ODD)
    return {
        "twisted H2Connection": connection,
        "h2 H2Connection": conn,
        "h2 FrameBuffer": conn.incoming_buffer,
        "h2 H2Configuration": conn.config,
        "h2 H2Stream": stream,
        "h2 H2StreamStateMachine": stream.state_machine,
        "hpack Encoder": conn.encoder,
        "hpack Decoder": conn.decoder,
        "hpack HeaderTable": conn.encoder.header_table,
    }


def _check_instances(problems: list[str], attributes: dict[str, tuple[str, ...]]) -> None:
    try:
        objects = _live_objects()
    except Exception as error:  # any failure here means the shapes changed
        problems.append(f"building a Twisted/h2 connection and stream failed: {error!r}")
        return
    for label, names in attributes.items():
        target = objects[label]
        problems.extend(
            f"{label} has no attribute {name}" for name in names if not hasattr(target, name)
        )
    conn = objects["h2 H2Connection"]
    if not isinstance(getattr(conn, "_data_to_send", None), bytearray):
        problems.append("h2 H2Connection._data_to_send is not a bytearray")
    entries = getattr(objects["hpack HeaderTable"], "dynamic_entries", None)
    if entries is not None and not hasattr(entries, "appendleft"):
        problems.append("hpack HeaderTable.dynamic_entries is not a deque")


def _check_flags(problems: list[str]) -> None:
    try:
        fields = _resolve("h2.utilities:HeaderValidationFlags")._fields
    except (ImportError, AttributeError):
        return  # reported by _check_names
    if tuple(fields) != VALIDATION_FLAGS:
        problems.append(
            f"h2.utilities.HeaderValidationFlags has {fields}, expected {VALIDATION_FLAGS}"
        )


#: The checks, in order; tests may run them on altered lists.
CHECKS: tuple[Callable[[list[str]], None], ...] = (
    lambda problems: _check_callables(problems, CALLABLES),
    lambda problems: _check_names(problems, NAMES),
    _check_flags,
    lambda problems: _check_instances(problems, INSTANCE_ATTRIBUTES),
)


def h2_internals_problems() -> list[str]:
    """What differs from the internals the fast path was written against; empty when the
    fast path can be installed."""
    problems: list[str] = []
    for check in CHECKS:
        check(problems)
    return problems


__all__ = ["h2_internals_problems"]
