"""Children start in order and stop in reverse, one after another."""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import Deferred

from apiserver.service.ordered import OrderedService


class Recorded(Service):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log
        self.stopping: Deferred[None] | None = None

    def startService(self) -> None:
        super().startService()
        self.log.append(f"start {self.name}")

    def stopService(self) -> Deferred[None]:
        super().stopService()
        self.log.append(f"stop {self.name}")
        self.stopping = Deferred()
        return self.stopping


def test_start_in_order_stop_in_reverse_sequentially() -> None:
    log: list[str] = []
    root = OrderedService()
    a, b, c = (root.add(Recorded(n, log)) for n in "abc")
    root.startService()
    assert log == ["start a", "start b", "start c"]
    done = root.stopService()
    assert log[3:] == ["stop c"]  # b waits until c has stopped
    c.stopping.callback(None)  # type: ignore[attr-defined]
    assert log[3:] == ["stop c", "stop b"]
    b.stopping.callback(None)  # type: ignore[attr-defined]
    assert log[3:] == ["stop c", "stop b", "stop a"]
    assert not done.called
    a.stopping.callback(None)  # type: ignore[attr-defined]
    assert done.called
    assert root.child_named("b") is b


def test_failed_stop_does_not_block_the_rest() -> None:
    log: list[str] = []
    root = OrderedService()
    a = root.add(Recorded("a", log))
    b = root.add(Recorded("b", log))
    root.startService()
    done = root.stopService()
    b.stopping.errback(RuntimeError("boom"))  # type: ignore[attr-defined]
    a.stopping.callback(None)  # type: ignore[attr-defined]
    assert done.called
    assert log[-2:] == ["stop b", "stop a"]
