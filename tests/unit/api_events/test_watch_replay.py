"""The initial events of a watch (resourceVersion 0 or unset) go out under back-pressure: a
bounded chunk per reactor turn while the connection takes them, nothing while it is full, and
nothing is kept once the client is gone (issue 17)."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock

from apiserver.api.events import watchstream
from apiserver.api.events.watchstream import _Replay

LINE = 10_000  # bytes per initial event


class Stream:
    """What _Replay uses of a WatchStream; a 'connection' that pauses past ``room`` bytes."""

    def __init__(self, clock: Clock, room: int) -> None:
        self.clock = clock
        self.ended = False
        self._pending: list[bytes] | None = None
        self.written: list[bytes] = []
        self.room = room
        self.replay: _Replay | None = None
        self.done = 0

    def _send(self, event_type: str, obj: Any) -> None:
        self._pending = [*(self._pending or []), b"x" * (LINE - 1) + b"\n"]

    def _bookmark(self, revision: int, initial_events_end: bool = False) -> None:
        self._pending = [*(self._pending or []), b"BOOKMARK %d\n" % revision]

    def flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending:
            self.written.append(b"".join(pending))
            if sum(map(len, self.written)) >= self.room and self.replay is not None:
                self.replay.pauseProducing()

    def _replay_done(self) -> None:
        self.done += 1


def make(room: int, items: int = 100, bookmark: int = 7) -> tuple[Stream, _Replay, Clock]:
    clock = Clock()
    stream = Stream(clock, room)
    replay = _Replay(stream, [{}] * items, bookmark)  # type: ignore[arg-type]
    stream.replay = replay
    return stream, replay, clock


def test_a_bounded_chunk_per_turn_then_the_bookmark_then_the_hand_over() -> None:
    stream, replay, clock = make(room=1 << 30)
    replay.start()
    first = len(stream.written[0])
    assert first <= watchstream.REPLAY_BYTES + LINE
    assert stream.done == 0
    for _ in range(200):
        clock.advance(0)
    body = b"".join(stream.written)
    assert body.count(b"x\n") == 100
    assert body.endswith(b"BOOKMARK 7\n")
    assert stream.done == 1
    assert replay.items is None


def test_nothing_more_is_written_while_the_connection_is_full() -> None:
    stream, replay, clock = make(room=3 * watchstream.REPLAY_BYTES)
    replay.start()
    for _ in range(50):
        clock.advance(0)
    held = sum(map(len, stream.written))
    # Written until the connection filled, then no more however many turns pass.
    assert held < 3 * watchstream.REPLAY_BYTES + watchstream.REPLAY_BYTES + LINE
    assert not clock.getDelayedCalls()
    stream.room = 1 << 30  # drained
    replay.resumeProducing()
    for _ in range(200):
        clock.advance(0)
    assert b"".join(stream.written).count(b"x\n") == 100
    assert stream.done == 1


def test_hand_over_waits_until_the_connection_drains() -> None:
    # Everything fits in one turn but fills the connection: the live watch takes over only
    # once it has room again.
    stream, replay, clock = make(room=5 * LINE, items=5, bookmark=-1)
    replay.start()
    clock.advance(0)
    assert stream.done == 0
    replay.resumeProducing()
    clock.advance(0)
    assert stream.done == 1


def test_a_dropped_client_releases_everything() -> None:
    stream, replay, clock = make(room=1 << 30)
    replay.start()
    replay.stopProducing()  # the connection is gone
    assert replay.items is None
    assert not clock.getDelayedCalls()
    written = len(stream.written)
    replay.resumeProducing()
    clock.advance(0)
    assert len(stream.written) == written
    assert stream.done == 0
