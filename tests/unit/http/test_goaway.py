"""--goaway-chance (apiserver.http.goaway) on both HTTP/2 connection classes, with the h2
library as the client (the harness of test_h2)."""

from __future__ import annotations

from typing import Any

import h2.events
import pytest
from http_helpers import parse_frames
from hyperframe.frame import DataFrame, GoAwayFrame
from test_h2 import SERVER_PATH_IDS, SERVER_PATHS, SMALL, Peer, Routes, serving
from tests.unit.fake_request import FakeRequest

from apiserver.http.goaway import ProbabilisticGoaway


class GoawayRoutes(Routes):
    """``/goaway`` asks the decider, then answers as ``/small``; ``/later`` as Routes."""

    def __init__(self, decider: ProbabilisticGoaway) -> None:
        super().__init__()
        self.decider = decider

    def render(self, request: Any) -> Any:
        if request.path == b"/goaway":
            self.decider(request)
            request.setHeader(b"content-type", b"application/json")
            return SMALL
        return super().render(request)


def peer_with(decider: ProbabilisticGoaway) -> Peer:
    peer = Peer()
    routes = GoawayRoutes(decider)
    peer.routes = routes
    peer.site.resource = routes
    return peer


@pytest.mark.parametrize("path", SERVER_PATHS, ids=SERVER_PATH_IDS)
def test_goaway_follows_the_whole_response_and_the_connection_closes(
    path: tuple[str, bool],
) -> None:
    with serving(*path):
        peer = peer_with(ProbabilisticGoaway(1.0))
        sid = peer.request(b"/goaway")
        peer.flush()
        assert peer.answers[sid].ended
        assert bytes(peer.answers[sid].body) == SMALL
        terminated = [e for e in peer.events if isinstance(e, h2.events.ConnectionTerminated)]
        assert len(terminated) == 1
        assert terminated[0].error_code == 0
        assert terminated[0].last_stream_id == sid
        kinds = [type(frame) for frame in peer.frames]
        assert kinds.index(GoAwayFrame) > max(
            i for i, kind in enumerate(kinds) if kind is DataFrame
        )
        assert peer.transport.disconnecting


@pytest.mark.parametrize("path", SERVER_PATHS, ids=SERVER_PATH_IDS)
def test_open_streams_are_served_to_the_end_before_the_connection_closes(
    path: tuple[str, bool],
) -> None:
    with serving(*path):
        peer = peer_with(ProbabilisticGoaway(1.0))
        first = peer.request(b"/later")
        peer.flush()
        second = peer.request(b"/goaway")
        peer.flush()
        assert peer.answers[second].ended
        goaways = [f for f in peer.frames if isinstance(f, GoAwayFrame)]
        assert [(g.last_stream_id, g.error_code) for g in goaways] == [(second, 0)]
        assert not peer.transport.disconnecting
        # The client (h2) reads nothing after a GOAWAY: look at the server's bytes instead.
        later = peer.routes.later[0]
        later.write(b"done")
        later.finish()
        for _ in range(5):
            peer.advance()
        frames = parse_frames(peer.transport.value())
        assert any(isinstance(f, DataFrame) and f.stream_id == first for f in frames)
        assert peer.transport.disconnecting


def test_chance_zero_or_a_miss_sends_nothing() -> None:
    with serving(*SERVER_PATHS[2]):
        for decider in (ProbabilisticGoaway(0.0), ProbabilisticGoaway(0.4, lambda: 0.5)):
            peer = peer_with(decider)
            for _ in range(3):
                sid = peer.request(b"/goaway")
                peer.flush()
                assert peer.answers[sid].ended
            assert not [f for f in peer.frames if isinstance(f, GoAwayFrame)]
            assert not peer.transport.disconnecting


def test_only_one_goaway_per_connection() -> None:
    with serving(*SERVER_PATHS[2]):
        peer = peer_with(ProbabilisticGoaway(1.0))
        peer.request(b"/later")
        peer.flush()
        peer.request(b"/goaway")
        peer.request(b"/goaway")
        peer.server.dataReceived(peer.client.data_to_send())
        for _ in range(5):
            peer.advance()
        frames = parse_frames(peer.transport.value())
        assert len([f for f in frames if isinstance(f, GoAwayFrame)]) == 1


def test_http1_requests_are_not_eligible() -> None:
    draws: list[int] = []

    def next_value() -> float:
        draws.append(1)
        return 0.0

    request = FakeRequest(b"GET", b"/x", {}, b"")
    ProbabilisticGoaway(1.0, next_value)(request)
    assert draws == []
