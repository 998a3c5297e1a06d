"""A worker's listener joins the shared port only once ``listen_after`` fires
(apiserver.service.listener.ListenerService): not at the privileged start, not at the
start, never when stopped first; a port it then cannot take is reported, not raised."""

from __future__ import annotations

import socket
from typing import Any

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.error import CannotListenError
from twisted.internet.ssl import CertificateOptions
from twisted.internet.testing import MemoryReactor
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import Site

from apiserver.service.listener import ListenerService


def listener(port: int, wait: Deferred[Any] | None, failures: list[Failure]) -> ListenerService:
    return ListenerService(
        Site(Resource()),
        CertificateOptions,
        port,
        "127.0.0.1",
        reactor=MemoryReactor(),
        reuse_port=True,
        listen_after=(lambda: wait) if wait is not None else None,
        on_listen_failed=failures.append,
    )


def test_without_a_wait_it_listens_at_the_privileged_start() -> None:
    failures: list[Failure] = []
    service = listener(0, None, failures)
    service.privilegedStartService()
    try:
        assert service.port is not None
        assert service.bound_port() > 0
    finally:
        service.stop_listening()


def test_it_listens_only_once_the_wait_fires() -> None:
    failures: list[Failure] = []
    wait: Deferred[None] = Deferred()
    service = listener(0, wait, failures)
    service.privilegedStartService()
    service.startService()
    assert service.port is None
    wait.callback(None)
    try:
        assert service.port is not None
        with socket.create_connection(("127.0.0.1", service.bound_port()), timeout=5):
            pass  # the kernel accepts: the socket listens
        assert failures == []
    finally:
        service.stopService()
    assert service.port is None


def test_stopped_before_the_wait_fires_it_never_listens() -> None:
    failures: list[Failure] = []
    wait: Deferred[None] = Deferred()
    service = listener(0, wait, failures)
    service.startService()
    service.stopService()
    assert wait.called  # cancelled
    assert service.port is None
    assert failures == []


def test_a_port_it_cannot_take_is_reported_to_on_listen_failed() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()  # without SO_REUSEPORT: nobody else may listen on it
        failures: list[Failure] = []
        wait: Deferred[None] = Deferred()
        service = listener(taken.getsockname()[1], wait, failures)
        service.startService()
        wait.callback(None)
        assert service.port is None
        assert len(failures) == 1
        with pytest.raises(CannotListenError):
            failures[0].raiseException()
        service.stopService()
