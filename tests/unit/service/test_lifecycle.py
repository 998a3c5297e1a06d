"""The shutdown sequence on a fake clock (k8s.io/apiserver ``pkg/server/genericapiserver.go``)."""

from __future__ import annotations

import json

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from apiserver.http.app import RequestInfo
from apiserver.service.lifecycle import Lifecycle


def info(path: str = "/apis/x", long_running: bool = False) -> RequestInfo:
    return RequestInfo("GET", path, {}, long_running, path.startswith("/api"))


class Recorder:
    def __init__(self) -> None:
        self.events: list[str] = []
        self.exit_codes: list[int] = []

    def make(self, clock: Clock, **kw: object) -> Lifecycle:
        def stop_listening() -> Deferred[None]:
            self.events.append(f"stop-listening@{clock.seconds():g}")
            return succeed(None)

        return Lifecycle(
            clock,
            stop_listening=stop_listening,
            stop_process=lambda: self.events.append(f"stop-process@{clock.seconds():g}"),
            on_initiated=lambda: self.events.append(f"initiated@{clock.seconds():g}"),
            exit_now=self.exit_codes.append,
            **kw,  # type: ignore[arg-type]
        )


def test_delay_then_stop_listening_then_exit() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock, shutdown_delay=5.0)
    life.on_signal()
    assert rec.events == ["initiated@0"]
    assert life.gate(info(), "curl") is None  # still serving normally during the delay
    clock.advance(4.9)
    assert rec.events == ["initiated@0"]
    clock.advance(0.1)
    assert rec.events == ["initiated@0", "stop-listening@5", "stop-process@5"]
    assert life.done.called


def test_mode_a_new_requests_get_503_status() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock)
    life.request_started(info())
    life.on_signal()
    refused = life.gate(info(), "curl")
    assert refused is not None and refused.code == 503
    assert refused.header("Retry-After") == "1"
    assert json.loads(refused.body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "apiserver is shutting down",
        "reason": "ServiceUnavailable",
        "code": 503,
    }
    assert refused.body.endswith(b"}\n")
    # exempt paths and the kube-apiserver user agent still pass
    assert life.gate(info("/readyz"), "curl") is None
    assert life.gate(info("/livez/ping"), "curl") is None
    assert life.gate(info("/metrics"), "curl") is None
    assert life.gate(info(), "kube-apiserver/v1.35") is None
    # the in-flight request holds the exit until it finishes
    assert rec.events == ["initiated@0", "stop-listening@0"]
    clock.advance(1)
    life.request_finished(info())
    assert rec.events[-1] == "stop-process@1"


def test_mode_b_429_and_listener_open_until_drained() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock, send_retry_after=True, shutdown_delay=1.0)
    life.request_started(info())
    life.on_signal()
    clock.advance(1)
    refused = life.gate(info(), "curl")
    assert refused is not None and refused.code == 429
    assert refused.header("Retry-After") == "5"
    assert refused.header("Connection") == "close"
    assert refused.header("Content-Type") == "text/plain; charset=utf-8"
    assert refused.body == b"The apiserver is shutting down, please try again later.\n"
    assert rec.events == ["initiated@0"]  # listener still open
    life.request_finished(info())
    assert rec.events == ["initiated@0", "stop-listening@1", "stop-process@1"]


def test_drain_bounded_by_request_timeout() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock, request_timeout=60.0)
    life.request_started(info())
    life.on_signal()
    clock.advance(59)
    assert not life.drained
    clock.advance(1)
    assert life.drained
    assert rec.events[-1] == "stop-process@60"


def test_watches_do_not_count_as_in_flight() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock)
    life.request_started(info(long_running=True))
    life.on_signal()
    assert life.drained


class FakeWatch:
    def __init__(self, clock: Clock, ended: list[float]) -> None:
        self.clock, self.ended = clock, ended

    def terminate(self) -> None:
        self.ended.append(self.clock.seconds())


def test_watch_termination_grace_period_ends_watches_rate_limited() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock, watch_grace=2.0)
    ended: list[float] = []
    for _ in range(3):
        life.add_watch(FakeWatch(clock, ended))
    life.on_signal()
    assert ended == [0.0]
    clock.pump([1 / 200] * 3)
    assert len(ended) == 3
    assert life.drained


def test_watch_grace_bounds_the_wait() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock, watch_grace=1.0)
    ended: list[float] = []
    for _ in range(1000):
        life.add_watch(FakeWatch(clock, ended))
    life.on_signal()
    clock.advance(1.0)
    assert life.drained
    assert len(ended) < 1000


def test_second_signal_exits_with_status_1() -> None:
    clock, rec = Clock(), Recorder()
    life = rec.make(clock, shutdown_delay=30.0)
    life.on_signal()
    assert rec.exit_codes == []
    life.on_signal()
    assert rec.exit_codes == [1]
