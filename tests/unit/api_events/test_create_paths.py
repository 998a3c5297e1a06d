"""The create handler's two paths give the same answers: ``EventsAPI._create_now`` (no
coroutine: the store's Deferred with callbacks, when nothing but the write can wait) and the
coroutine ``EventsAPI.create`` (admission, dry runs, sealed values) -- both follow
k8s.io/apiserver pkg/endpoints/handlers/create.go."""

from __future__ import annotations

import random
import re
from typing import Any

import pytest
from tests.unit.api_events.rest_harness import RestHarness, event, ns_path

from apiserver.apimachinery.names import generate_name
from apiserver.registry.store import Registry

EVENTS = ns_path("ns1")
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _replies(monkeypatch: pytest.MonkeyPatch, fast: bool) -> list[tuple[int, Any, Any]]:
    if not fast:
        monkeypatch.setattr(Registry, "creates_now", property(lambda self: False))
    api = RestHarness()
    predictor = random.Random()
    predictor.setstate(api.api.rng.getstate())
    names = [generate_name("gen-", predictor) for _ in range(9)]
    for name in names[:3]:
        api.create(name)
    generated = event("")
    generated["metadata"] = {"generateName": "gen-", "namespace": "ns1"}
    invalid = event("bad")
    invalid["type"] = "Other"
    bodies: list[tuple[Any, dict[str, str]]] = [
        (event("e1"), {}),
        (event("e1"), {}),  # already exists
        (invalid, {}),
        (generated, {}),  # three names taken: the fourth is used
        (event("e2", extra_field=1), {}),  # a strict-decoding warning
        (event("e3"), {"accept": "application/yaml"}),
        (b"{", {}),
    ]
    out = []
    for body, headers in bodies:
        reply = api.post(EVENTS, body, **headers)
        text = _UID.sub("<uid>", reply.body.decode())
        shown = sorted(
            (name, values)
            for name, values in reply.headers.getAllRawHeaders()
            if name not in (b"Audit-Id", b"Date")  # random, and the wall clock
        )
        out.append((reply.code, shown, text))
    return out


def test_fast_and_coroutine_paths_answer_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _replies(monkeypatch, True)
    with monkeypatch.context() as patched:
        slow = _replies(patched, False)
    assert [code for code, _, _ in fast] == [201, 409, 422, 201, 201, 201, 400]
    assert fast == slow
