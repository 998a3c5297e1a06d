"""The write coalescer: one write per dirty stream and reactor turn, in order, nothing lost."""

from __future__ import annotations

from twisted.internet.task import Clock

from apiserver.http.coalesce import WriteCoalescer


class Stream:
    def __init__(self, coalescer: WriteCoalescer) -> None:
        self.coalescer = coalescer
        self.pending: list[bytes] | None = None
        self.writes: list[bytes] = []

    def send(self, data: bytes) -> None:
        if self.pending is None:
            self.pending = [data]
            self.coalescer.mark(self)
        else:
            self.pending.append(data)

    def flush(self) -> None:
        pending, self.pending = self.pending, None
        if pending:
            self.writes.append(b"".join(pending))


def test_nothing_is_written_before_the_reactor_turns() -> None:
    clock = Clock()
    coalescer = WriteCoalescer(clock)
    stream = Stream(coalescer)
    stream.send(b"a\n")
    assert stream.writes == []
    assert coalescer.pending == 1
    clock.advance(0)
    assert stream.writes == [b"a\n"]
    assert coalescer.pending == 0


def test_lines_of_one_turn_leave_in_one_write_per_stream() -> None:
    clock = Clock()
    coalescer = WriteCoalescer(clock)
    first, second = Stream(coalescer), Stream(coalescer)
    for line in (b"1\n", b"2\n", b"3\n"):
        first.send(line)
        second.send(line)
    assert len(clock.getDelayedCalls()) == 1
    clock.advance(0)
    assert first.writes == [b"1\n2\n3\n"]
    assert second.writes == [b"1\n2\n3\n"]


def test_a_later_line_waits_for_the_next_run() -> None:
    clock = Clock()
    coalescer = WriteCoalescer(clock)
    stream = Stream(coalescer)
    stream.send(b"1\n")
    clock.advance(0)
    stream.send(b"2\n")
    assert stream.writes == [b"1\n"]
    clock.advance(0)
    assert stream.writes == [b"1\n", b"2\n"]


def test_a_stream_marked_while_flushing_is_flushed_on_the_next_run() -> None:
    clock = Clock()
    coalescer = WriteCoalescer(clock)
    late = Stream(coalescer)

    class Trigger(Stream):
        def flush(self) -> None:
            super().flush()
            late.send(b"late\n")

    trigger = Trigger(coalescer)
    trigger.send(b"x\n")
    coalescer.run()  # what the reactor calls
    assert trigger.writes == [b"x\n"]
    assert late.writes == []
    assert coalescer.pending == 1
    clock.advance(0)
    assert late.writes == [b"late\n"]


def test_a_delay_holds_the_flush() -> None:
    clock = Clock()
    coalescer = WriteCoalescer(clock, delay=0.01)
    stream = Stream(coalescer)
    stream.send(b"a\n")
    clock.advance(0.005)
    assert stream.writes == []
    clock.advance(0.005)
    assert stream.writes == [b"a\n"]


def test_after_a_fan_out_the_next_run_waits_a_little() -> None:
    clock = Clock()
    coalescer = WriteCoalescer(clock, busy_streams=3, busy_delay=0.02)
    streams = [Stream(coalescer) for _ in range(3)]
    for stream in streams:
        stream.send(b"a\n")
    clock.advance(0)  # the first fan-out leaves at once
    assert all(s.writes == [b"a\n"] for s in streams)
    for stream in streams:
        stream.send(b"b\n")
    clock.advance(0.01)
    assert all(s.writes == [b"a\n"] for s in streams)  # held: the last run was busy
    streams[0].send(b"c\n")
    clock.advance(0.01)
    assert streams[0].writes == [b"a\n", b"b\nc\n"]  # one write for both
    assert streams[1].writes == [b"a\n", b"b\n"]


def test_a_quiet_run_brings_back_next_turn_flushes() -> None:
    clock = Clock()
    coalescer = WriteCoalescer(clock, busy_streams=3, busy_delay=0.02)
    streams = [Stream(coalescer) for _ in range(3)]
    for stream in streams:
        stream.send(b"a\n")
    clock.advance(0)
    streams[0].send(b"b\n")
    clock.advance(0.02)  # busy delay for this run, which flushes one stream only
    streams[0].send(b"c\n")
    clock.advance(0)
    assert streams[0].writes == [b"a\n", b"b\n", b"c\n"]
