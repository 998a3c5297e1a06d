"""apiserver.http.h2internals and the fallback of ``configure_http2``.

The check must find every kind of change a library release can make to what the fast path
uses (a missing function, method, module global, instance attribute, a changed signature),
and ``configure_http2`` must then install Twisted's own HTTP/2 connection, say so once in
the log, and still serve (through ``ApiSite``, and with the advertised stream limit).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

import h2.config
import h2.connection
import h2.events
import h2.frame_buffer
import hpack
import hyperframe.frame
import pytest
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.logger import ILogObserver, LogEvent, Logger, formatEvent
from twisted.web import _http2, http

from apiserver.http import h2 as h2_module
from apiserver.http.app import App, RequestInfo, Router, ServingPolicy
from apiserver.http.h2 import FastH2Connection, StockH2Connection, configure_http2
from apiserver.http.h2internals import h2_internals_problems
from apiserver.http.response import text
from apiserver.http.site import ApiRequest, ApiSite


@pytest.fixture(autouse=True)
def restore_h2_class(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http, "H2Connection", http.H2Connection)


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[LogEvent]]:
    """What ``configure_http2`` logs, as if it had not reported anything yet."""
    events: list[LogEvent] = []
    monkeypatch.setattr(h2_module, "_log", Logger(observer=cast(ILogObserver, events.append)))
    monkeypatch.setattr(h2_module, "_fallback_reported", False)
    yield events


def test_the_installed_libraries_have_every_internal() -> None:
    assert h2_internals_problems() == []


def _keep_init_without(cls: type, name: str) -> Callable[..., None]:
    original = cls.__init__  # type: ignore[misc]

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        delattr(self, name)

    return init


# (what is changed, the attribute set or removed, the replacement or None to remove it, what
# the report names)
CHANGES: list[tuple[Any, str, Any, str]] = [
    (hyperframe.frame, "_raw_data_repr", None, "hyperframe.frame:_raw_data_repr"),
    (h2.connection, "_decode_headers", None, "h2.connection:_decode_headers"),
    (h2.connection.H2Connection, "_begin_new_stream", None, "_begin_new_stream"),
    (_http2.H2Connection, "_requestDone", None, "H2Connection._requestDone"),
    (_http2, "_END_STREAM_SENTINEL", None, "_END_STREAM_SENTINEL"),
    (
        hpack.Encoder,
        "add",
        lambda self, to_add, sensitive, huffman, extra: b"",
        "hpack:Encoder.add",
    ),
    (
        h2.frame_buffer.FrameBuffer,
        "__init__",
        _keep_init_without(h2.frame_buffer.FrameBuffer, "_preamble_len"),
        "FrameBuffer has no attribute _preamble_len",
    ),
    (
        h2.connection.H2Connection,
        "__init__",
        _keep_init_without(h2.connection.H2Connection, "_data_to_send"),
        "_data_to_send",
    ),
]


@pytest.mark.parametrize(
    ("owner", "name", "replacement", "reported"),
    CHANGES,
    ids=[f"{getattr(o, '__name__', o)}.{n}" for o, n, _, _ in CHANGES],
)
def test_a_changed_internal_is_found(
    monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, replacement: Any, reported: str
) -> None:
    if replacement is None:
        monkeypatch.delattr(owner, name)
    else:
        monkeypatch.setattr(owner, name, replacement)
    problems = h2_internals_problems()
    assert problems
    assert any(reported in problem for problem in problems), problems


def test_a_new_optional_parameter_is_not_a_change(monkeypatch: pytest.MonkeyPatch) -> None:
    original = hpack.Encoder.add

    def add(self: Any, to_add: Any, sensitive: bool, huffman: bool = False, more: int = 0) -> bytes:
        return original(self, to_add, sensitive, huffman)

    monkeypatch.setattr(hpack.Encoder, "add", add)
    assert h2_internals_problems() == []


def test_the_fast_path_is_installed_when_nothing_changed(logged: list[LogEvent]) -> None:
    assert configure_http2(0) is True
    installed: Any = http.H2Connection
    assert issubclass(installed, FastH2Connection)
    assert logged == []


def test_a_changed_internal_installs_twisteds_connection_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, logged: list[LogEvent]
) -> None:
    monkeypatch.delattr(h2.connection.H2Connection, "_begin_new_stream")
    assert configure_http2(7) is False
    assert configure_http2(7) is False
    installed: Any = http.H2Connection
    assert issubclass(installed, StockH2Connection)
    assert not issubclass(installed, FastH2Connection)
    assert not getattr(installed, "servesLeanRequests", False)
    (event,) = logged
    assert event["log_level"].name == "warn"
    assert "_begin_new_stream" in formatEvent(event)


def _h2_client_get(path: str) -> h2.connection.H2Connection:
    client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    client.initiate_connection()
    client.send_headers(
        1,
        [(":method", "GET"), (":path", path), (":scheme", "https"), (":authority", "x")],
        end_stream=True,
    )
    return client


class TLSLikeTransport(StringTransport):
    """A memory transport that says ALPN picked ``h2``."""

    negotiatedProtocol = b"h2"


def _served_over_alpn() -> tuple[Any, list[Any]]:
    """``GET /hello`` over HTTP/2 through ``ApiSite``'s HTTP/1.1 channel and ALPN: the
    HTTP/2 connection that served it and the client's events."""
    clock = MemoryReactorClock()
    router = Router()

    def handler(request: Any, info: RequestInfo) -> Any:
        return text(200, "hi")

    router.add("/hello", handler)
    site = ApiSite(App(router, clock, ServingPolicy()), reactor=clock)
    channel: Any = site.buildProtocol(None)
    transport = TLSLikeTransport()
    channel.makeConnection(transport)
    client = _h2_client_get("/hello")
    channel.dataReceived(client.data_to_send())
    connection = channel._h2
    events: list[Any] = []
    for _ in range(10):
        if not isinstance(connection, FastH2Connection) and connection._sendingDeferred is None:
            # Twisted's own connection sends from its own loop, one frame a turn, on the
            # reactor it was built with (H1Channel gives it none).
            connection._sendPrioritisedData()
        clock.advance(0)
        events += client.receive_data(transport.value())
        transport.clear()
    return connection, events


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "stock"])
def test_both_paths_serve_the_api_site(monkeypatch: pytest.MonkeyPatch, fast: bool) -> None:
    if not fast:
        # (Taking a real internal away would break h2 itself, which uses it too.)
        monkeypatch.setattr(h2_module, "h2_internals_problems", lambda: ["changed"])
        monkeypatch.setattr(h2_module, "_fallback_reported", True)
    assert configure_http2(3) is fast
    connection, events = _served_over_alpn()
    assert isinstance(connection, FastH2Connection) is fast
    if not fast:
        assert connection.requestFactory is ApiRequest
    settings = [e for e in events if isinstance(e, h2.events.RemoteSettingsChanged)]
    advertised = settings[0].changed_settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS]
    assert advertised.new_value == 3
    (response,) = [e for e in events if isinstance(e, h2.events.ResponseReceived)]
    assert dict(response.headers)[b":status"] == b"200"
    body = b"".join(e.data for e in events if isinstance(e, h2.events.DataReceived))
    assert body == b"hi"
    assert any(isinstance(e, h2.events.StreamEnded) for e in events)
