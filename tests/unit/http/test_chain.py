"""The handler chain's order and slots (apiserver.http.chain.build_handler_chain)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from tests.unit.fake_request import FakeRequest
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from apiserver.auth.filter import AuthStages
from apiserver.auth.interface import AuthResult, UserInfo
from apiserver.http.app import Filter, RequestInfo, Router, ServingPolicy, Verdict
from apiserver.http.chain import build_handler_chain
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response, text

SLOTS = (
    "request_info",
    "authentication",
    "audit",
    "impersonation",
    "flow_control",
    "authorization",
)


@attrs.define
class Slots:
    """An ``AuthSlots`` made of whatever the test puts in it."""

    request_info: Filter | None = None
    authentication: Filter | None = None
    impersonation: Filter | None = None
    authorization: Filter | None = None


class Recorder:
    """A stage that notes its name (and the user it saw) and answers ``verdict``."""

    def __init__(self, name: str, log: list[tuple[str, str | None]], verdict: Verdict = None):
        self.name = name
        self.log = log
        self.verdict = verdict

    def __call__(self, request: HTTPRequest, info: RequestInfo) -> Verdict:
        self.log.append((self.name, info.user.name if info.user is not None else None))
        return self.verdict


def chain(
    log: list[tuple[str, str | None]], verdicts: dict[str, Verdict] | None = None, **kw: Any
) -> tuple[Any, Router]:
    verdicts = verdicts or {}
    stages = {name: Recorder(name, log, verdicts.get(name)) for name in SLOTS}

    def router_handler(request: HTTPRequest, info: RequestInfo) -> Response:
        log.append(("router", info.user.name if info.user is not None else None))
        return text(200, "ok")

    router = Router()
    router.add("/x", router_handler)
    auth = Slots(
        stages["request_info"],
        stages["authentication"],
        stages["impersonation"],
        stages["authorization"],
    )
    app = build_handler_chain(
        router,
        Clock(),
        ServingPolicy(),
        auth=auth,
        audit=stages["audit"],
        flow_control=stages["flow_control"],
        **kw,
    )
    return app, router


def test_stages_run_in_kube_order_then_the_router() -> None:
    log: list[tuple[str, str | None]] = []
    app, _ = chain(log)
    request = FakeRequest(b"GET", b"/x")
    app.handle(request)
    assert [name for name, _ in log] == [*SLOTS, "router"]
    assert request.code == 200 and request.finished


def test_a_refusal_stops_the_chain() -> None:
    log: list[tuple[str, str | None]] = []
    app, _ = chain(log, {"impersonation": text(403, "no")})
    request = FakeRequest(b"GET", b"/x")
    app.handle(request)
    assert [name for name, _ in log] == ["request_info", "authentication", "audit", "impersonation"]
    assert request.code == 403 and request.written == [b"no"]


def test_a_waiting_stage_resumes_at_the_next_one() -> None:
    log: list[tuple[str, str | None]] = []
    pending: Deferred[Response | None] = Deferred()
    app, _ = chain(log, {"audit": pending})
    request = FakeRequest(b"GET", b"/x")
    app.handle(request)
    assert [name for name, _ in log] == ["request_info", "authentication", "audit"]
    pending.callback(None)
    assert [name for name, _ in log] == [*SLOTS, "router"]
    assert request.finished


def test_a_waiting_stage_for_a_gone_client_goes_no_further() -> None:
    log: list[tuple[str, str | None]] = []
    pending: Deferred[Response | None] = Deferred()
    app, _ = chain(log, {"flow_control": pending})
    request = FakeRequest(b"GET", b"/x")
    app.handle(request)
    request.lose()
    pending.callback(None)
    assert log[-1][0] == "flow_control" and not request.finished


def test_a_failing_stage_is_a_500() -> None:
    log: list[tuple[str, str | None]] = []
    app, _ = chain(log, {"authorization": defer.fail(RuntimeError("boom"))})
    request = FakeRequest(b"GET", b"/x")
    app.handle(request)
    assert request.code == 500 and request.finished
    assert "router" not in [name for name, _ in log]


def test_empty_slots_add_no_stage() -> None:
    router = Router()
    assert build_handler_chain(router, Clock(), ServingPolicy()).stages == ()
    auth = AuthStages.build(None, True, None)
    app = build_handler_chain(router, Clock(), ServingPolicy(), auth=auth)
    assert app.stages == (
        auth.request_info,
        auth.authentication,
        auth.impersonation,
        auth.authorization,
    )
    audit = Recorder("audit", [])
    app = build_handler_chain(router, Clock(), ServingPolicy(), auth=auth, audit=audit)
    assert app.stages[2] is audit and len(app.stages) == 5


class HeaderAuthenticator:
    def authenticate(self, request: HTTPRequest) -> AuthResult | None:
        name = request.getHeader(b"x-test-user")
        return AuthResult(UserInfo(name.decode())) if name else None


def test_audit_sees_the_authenticated_user_before_impersonation_replaces_it() -> None:
    log: list[tuple[str, str | None]] = []
    seen: list[RequestInfo] = []

    def handler(request: HTTPRequest, info: RequestInfo) -> Response:
        seen.append(info)
        return text(200, "ok")

    router = Router()
    router.add("/x", handler)
    app = build_handler_chain(
        router,
        Clock(),
        ServingPolicy(),
        auth=AuthStages.build(HeaderAuthenticator(), False, None),
        audit=Recorder("audit", log),
        flow_control=Recorder("flow_control", log),
    )
    request = FakeRequest(
        b"GET", b"/x", {b"x-test-user": [b"bob"], b"impersonate-user": [b"alice"]}
    )
    app.handle(request)
    assert request.code == 200
    assert log == [("audit", "bob"), ("flow_control", "alice")]
    info = seen[0]
    assert info.authenticated_user is not None and info.authenticated_user.name == "bob"
    assert info.user is info.impersonated_user
    assert info.user is not None and info.user.name == "alice"


def test_the_synchronous_path_creates_no_deferred(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stages, router and write: not one Deferred for a request every stage lets through."""
    router = Router()
    router.add("/x", lambda request, info: text(200, "ok"))
    app = build_handler_chain(
        router,
        Clock(),
        ServingPolicy(),
        auth=AuthStages.build(HeaderAuthenticator(), True, None),
        audit=Recorder("audit", []),
        flow_control=Recorder("flow_control", []),
    )
    created: list[object] = []
    original = Deferred.__init__

    def counting(self: Deferred[Any], *args: Any, **kwargs: Any) -> None:
        created.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Deferred, "__init__", counting)
    request = FakeRequest(b"GET", b"/x", {b"x-test-user": [b"bob"]})
    app.handle(request)
    assert request.code == 200 and request.finished
    assert created == []
