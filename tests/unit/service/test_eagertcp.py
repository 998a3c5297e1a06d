"""EagerServer: sends at once when nothing is queued, queues the rest in order."""

from __future__ import annotations

import socket
from typing import Any

from apiserver.service.eagertcp import EagerServer


def make(sock: socket.socket) -> tuple[EagerServer, list[str]]:
    """An EagerServer around ``sock`` with the reactor registration recorded, not done."""
    server = EagerServer.__new__(EagerServer)
    calls: list[str] = []
    server.socket = sock
    server.connected = True
    server.disconnecting = False
    server._writeDisconnected = False
    server.dataBuffer = b""
    server.offset = 0
    server._tempDataBuffer = []
    server._tempDataLen = 0
    server.producer = None
    server.streamingProducer = False
    server.producerPaused = False
    server.bufferSize = 2**16
    server.startWriting = lambda: calls.append("startWriting")  # type: ignore[method-assign]
    return server, calls


def pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    return a, b


def test_a_write_with_nothing_queued_is_sent_at_once() -> None:
    a, b = pair()
    with a, b:
        server, calls = make(a)
        server.write(b"HTTP/1.1 200 OK\r\n\r\n")
        assert b.recv(100) == b"HTTP/1.1 200 OK\r\n\r\n"
        assert calls == []
        assert server._tempDataLen == 0


def test_what_the_socket_does_not_take_is_queued_and_later_writes_wait_behind_it() -> None:
    a, b = pair()
    with a, b:
        a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        server, calls = make(a)
        big = bytes(range(256)) * 4096  # 1 MiB: more than the socket takes at once
        server.write(big)
        assert calls == ["startWriting"]
        queued = server._tempDataLen
        assert 0 < queued < len(big)
        server.write(b"tail")  # must not overtake the queued bytes
        assert server._tempDataLen == queued + 4
        received = bytearray()
        while len(received) < len(big) - queued:
            received += b.recv(1 << 20)
        assert bytes(received) == big[: len(big) - queued]
        assert b"".join(server._tempDataBuffer) == big[len(big) - queued :] + b"tail"


def test_a_closing_or_disconnected_transport_takes_the_ordinary_path() -> None:
    a, b = pair()
    with a, b:
        server, calls = make(a)
        server.disconnecting = True
        server.write(b"late")
        assert calls == ["startWriting"]
        assert server._tempDataBuffer == [b"late"]
        server2: Any
        server2, calls2 = make(a)
        server2.connected = False
        server2.write(b"x")
        assert calls2 == [] and server2._tempDataBuffer == []
