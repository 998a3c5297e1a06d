"""The auth stages in the handler chain, through treq's StubTreq over a tiny router (no network)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.unit.fake_request import FakeRequest
from tests.unit.unit_helpers import AppResource
from treq.testing import StubTreq
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from apiserver.auth.authz import AuthorizerError
from apiserver.auth.authz.abac import ABACAuthorizer, Policy
from apiserver.auth.authz.builtin import AlwaysDeny, PrivilegedGroups
from apiserver.auth.authz.rbac import RBACAuthorizer
from apiserver.auth.authz.union import Union
from apiserver.auth.filter import AuthStages
from apiserver.auth.interface import (
    ALLOW,
    DENY,
    NO_OPINION,
    Attributes,
    AuthenticationError,
    AuthResult,
    Decision,
    UserInfo,
)
from apiserver.http.app import RequestInfo, Router, ServingPolicy
from apiserver.http.chain import build_handler_chain
from apiserver.http.response import Response, text
from apiserver.protobuf import codec

UNAUTHORIZED = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
    b'"message":"Unauthorized","reason":"Unauthorized","code":401}\n'
)
ADMIN = UserInfo("admin", groups=("system:masters", "system:authenticated"))
BOB = UserInfo("bob", uid="42", groups=("devs", "system:authenticated"))


def status_from_protobuf(body: bytes) -> dict[str, Any]:
    api_version, kind, raw = codec.unwrap(body)
    return {"kind": kind, "apiVersion": api_version, **codec.decode(codec.Status, raw)}


class HeaderAuthenticator:
    """``X-Test-User: name[,group...]`` authenticates; ``bad`` is invalid; optional delay."""

    def __init__(self, deferred: bool = False, audiences: tuple[str, ...] = ()) -> None:
        self.deferred = deferred
        self.audiences = audiences
        self.seen: list[Any] = []

    def authenticate(self, request: Any) -> AuthResult | Deferred[AuthResult | None] | None:
        value = request.getHeader(b"x-test-user")
        self.seen.append(request.getHeader(b"authorization"))
        if value is None:
            result = None
        elif value == b"bad":
            if self.deferred:
                return fail(AuthenticationError("invalid"))
            raise AuthenticationError("invalid")
        else:
            name, *groups = value.decode().split(",")
            result = AuthResult(UserInfo(name, groups=tuple(groups)), self.audiences)
        return succeed(result) if self.deferred else result


class SlowAuthorizer:
    """Answers with a Deferred the test fires."""

    def __init__(self) -> None:
        self.pending: list[tuple[Attributes, Deferred[Decision]]] = []

    def authorize(self, attributes: Attributes) -> Deferred[Decision]:
        d: Deferred[Decision] = Deferred()
        self.pending.append((attributes, d))
        return d


class Raising:
    def __init__(self, decision: str = NO_OPINION) -> None:
        self.decision = decision

    def authorize(self, attributes: Attributes) -> Decision:
        raise AuthorizerError("webhook down", self.decision, "")


def make(auth: AuthStages) -> tuple[StubTreq, list[tuple[Any, RequestInfo]]]:
    seen: list[tuple[Any, RequestInfo]] = []

    def echo(request: Any, info: RequestInfo) -> Response:
        seen.append((request, info))
        user = info.user
        assert user is not None
        body = {
            "user": user.name,
            "groups": list(user.groups),
            "uid": user.uid,
            "extra": {k: list(v) for k, v in user.extra.items()},
            "authorization": [
                h.decode() for h in request.requestHeaders.getRawHeaders("authorization", [])
            ],
            "impersonate": [
                n.decode()
                for n, _ in request.requestHeaders.getAllRawHeaders()
                if n.lower().startswith(b"impersonate-")
            ],
        }
        return Response(200, (("Content-Type", "application/json"),), json.dumps(body).encode())

    router = Router()
    router.add("/healthz", lambda request, info: text(200, "ok"))
    router.add("/readyz", lambda request, info: text(200, "ok"))
    router.add("/readyz/ping", lambda request, info: text(200, "ok"))
    router.add("/who", echo)
    router.add_prefix("/api/", echo)
    router.add_prefix("/apis/", echo)
    app = build_handler_chain(router, Clock(), ServingPolicy(), auth=auth)
    return StubTreq(AppResource(app)), seen


class FilterTests(SynchronousTestCase):
    def get(self, treq: StubTreq, path: str, **kw: Any) -> tuple[int, Any, bytes]:
        method = kw.pop("method", "GET")
        response = self.successResultOf(treq.request(method, "https://x" + path, **kw))
        body = self.successResultOf(response.content())
        return response.code, response.headers, body

    # -- authentication --------------------------------------------------------------------

    def test_anonymous_allowed_and_always_allow(self) -> None:
        treq, _ = make(AuthStages.build(None, True, None))
        code, _, body = self.get(treq, "/who")
        assert code == 200
        data = json.loads(body)
        assert (data["user"], data["groups"]) == ("system:anonymous", ["system:unauthenticated"])

    def test_no_credentials_without_anonymous_is_401(self) -> None:
        treq, _ = make(AuthStages.build(HeaderAuthenticator(), False, None))
        code, headers, body = self.get(treq, "/apis/events.k8s.io/v1/events")
        assert (code, body) == (401, UNAUTHORIZED)
        assert headers.getRawHeaders("content-type") == ["application/json"]
        assert not headers.hasHeader("www-authenticate")
        assert headers.getRawHeaders("cache-control") == ["no-cache, private"]
        # Non-API paths get the same Status.
        assert self.get(treq, "/healthz")[::2] == (401, UNAUTHORIZED)

    def test_refusals_are_protobuf_when_accept_picks_it(self) -> None:
        """ErrorNegotiated: client-go's protobuf Accept gets the 401/403 Status in protobuf."""
        accept = {"Accept": "application/vnd.kubernetes.protobuf, application/json"}
        treq, _ = make(AuthStages.build(HeaderAuthenticator(), False, None))
        code, headers, body = self.get(treq, "/api/v1/events", headers=accept)
        assert code == 401
        assert headers.getRawHeaders("content-type") == ["application/vnd.kubernetes.protobuf"]
        assert {"metadata": {}, **status_from_protobuf(body)} == json.loads(UNAUTHORIZED)
        code, _, body = self.get(treq, "/api/v1/events", headers={"Accept": "application/json"})
        assert (code, body) == (401, UNAUTHORIZED)
        code, headers, body = self.get(
            self.rbac(), "/api/v1/namespaces/default/events", headers=accept
        )
        assert code == 403
        assert headers.getRawHeaders("x-content-type-options") == ["nosniff"]
        status = status_from_protobuf(body)
        assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
        assert status["message"].startswith('events is forbidden: User "system:anonymous"')

    def test_invalid_credentials_are_401_even_with_anonymous(self) -> None:
        treq, _ = make(AuthStages.build(HeaderAuthenticator(), True, None))
        code, _, body = self.get(treq, "/healthz", headers={"X-Test-User": "bad"})
        assert (code, body) == (401, UNAUTHORIZED)

    def test_anonymous_conditions_by_path(self) -> None:
        treq, _ = make(
            AuthStages.build(HeaderAuthenticator(), lambda path: path == "/healthz", None)
        )
        assert self.get(treq, "/healthz")[0] == 200
        assert self.get(treq, "/readyz")[0] == 401

    def test_authenticated_user_attached_and_credentials_removed(self) -> None:
        authn = HeaderAuthenticator()
        treq, seen = make(AuthStages.build(authn, False, None, request_header_names=["X-My-User"]))
        code, _, body = self.get(
            treq,
            "/who",
            headers={
                "X-Test-User": "bob,devs",
                "Authorization": "Bearer abc",
                "X-Remote-User": "mallory",
                "X-Remote-Extra-Scopes": "all",
                "X-My-User": "eve",
            },
        )
        assert code == 200
        assert json.loads(body)["user"] == "bob"
        assert authn.seen == [b"Bearer abc"]
        request, info = seen[0]
        for name in ("authorization", "x-remote-user", "x-remote-extra-scopes", "x-my-user"):
            assert not request.requestHeaders.hasHeader(name), name
        assert info.authenticated_user is not None
        assert info.authenticated_user.name == "bob"
        assert info.impersonated_user is None
        assert info.resolved is not None and info.resolved.verb == "get"
        assert info.authorization == ("allow", "")

    def test_deferred_authenticator(self) -> None:
        treq, _ = make(AuthStages.build(HeaderAuthenticator(deferred=True), False, None))
        code, _, body = self.get(treq, "/who", headers={"X-Test-User": "bob"})
        assert code == 200 and json.loads(body)["user"] == "bob"
        assert self.get(treq, "/who")[::2] == (401, UNAUTHORIZED)
        bad = {"X-Test-User": "bad"}
        assert self.get(treq, "/who", headers=bad)[::2] == (401, UNAUTHORIZED)

    def test_audiences_must_intersect(self) -> None:
        authn = HeaderAuthenticator(audiences=("other",))
        treq, _ = make(AuthStages.build(authn, False, None, api_audiences=["api"]))
        assert self.get(treq, "/who", headers={"X-Test-User": "bob"})[::2] == (
            401,
            UNAUTHORIZED,
        )
        authn.audiences = ("api", "other")
        assert self.get(treq, "/who", headers={"X-Test-User": "bob"})[0] == 200
        authn.audiences = ()  # no audiences in the credential: not checked
        assert self.get(treq, "/who", headers={"X-Test-User": "bob"})[0] == 200

    def test_bad_resource_path_is_500_before_authentication(self) -> None:
        treq, _ = make(AuthStages.build(HeaderAuthenticator(), False, None))
        code, headers, body = self.get(treq, "/api/v1/watch?x=1")
        assert code == 500
        assert body == (
            b'Internal Server Error: "/api/v1/watch?x=1": unable to determine kind and '
            b"namespace from url, /api/v1/watch?x=1"
        )
        assert headers.getRawHeaders("content-type") == ["text/plain"]
        assert headers.getRawHeaders("x-content-type-options") == ["nosniff"]

    # -- authorization ---------------------------------------------------------------------

    def rbac(self, authn: Any = None, anonymous: bool = True) -> StubTreq:
        chain = Union([PrivilegedGroups(), RBACAuthorizer()])
        return make(AuthStages.build(authn or HeaderAuthenticator(), anonymous, chain))[0]

    def test_rbac_anonymous_health_and_forbidden_texts(self) -> None:
        treq = self.rbac()
        assert self.get(treq, "/readyz")[0] == 200
        code, headers, body = self.get(treq, "/readyz/ping")
        assert code == 403
        assert body == (
            b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
            b'"forbidden: User \\"system:anonymous\\" cannot get path \\"/readyz/ping\\"",'
            b'"reason":"Forbidden","details":{},"code":403}\n'
        )
        assert headers.getRawHeaders("content-type") == ["application/json"]
        assert headers.getRawHeaders("x-content-type-options") == ["nosniff"]
        code, _, body = self.get(treq, "/api/v1/namespaces/default/events")
        assert code == 403
        assert json.loads(body) == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": 'events is forbidden: User "system:anonymous" cannot list resource '
            '"events" in API group "" in the namespace "default"',
            "reason": "Forbidden",
            "details": {"kind": "events"},
            "code": 403,
        }

    def test_forbidden_with_group_name_and_html_escaping(self) -> None:
        treq = self.rbac()
        code, _, body = self.get(
            treq,
            "/apis/events.k8s.io/v1/namespaces/ns/events/e1",
            headers={"X-Test-User": "a<b>&c"},
        )
        assert code == 403
        status = json.loads(body)
        assert status["message"] == (
            'events.events.k8s.io "e1" is forbidden: User "a&lt;b&gt;&amp;c" cannot get '
            'resource "events" in API group "events.k8s.io" in the namespace "ns"'
        )
        assert status["details"] == {"name": "e1", "group": "events.k8s.io", "kind": "events"}

    def test_masters_may_do_anything_and_discovery_for_authenticated(self) -> None:
        treq = self.rbac()
        admin = {"X-Test-User": "admin,system:masters"}
        assert self.get(treq, "/readyz/ping", headers=admin)[0] == 200
        assert self.get(treq, "/api/v1/namespaces/default/events", headers=admin)[0] == 200
        assert (
            self.get(
                treq, "/apis/events.k8s.io/v1", headers={"X-Test-User": "u,system:authenticated"}
            )[0]
            == 200
        )
        assert self.get(treq, "/apis/events.k8s.io/v1")[0] == 403
        monitor = {"X-Test-User": "prom,system:monitoring"}
        assert self.get(treq, "/readyz/ping", headers=monitor)[0] == 200

    def test_head_is_its_own_verb(self) -> None:
        treq = self.rbac()
        code, _, _ = self.get(treq, "/healthz", method="HEAD")
        assert code == 403

    def test_always_deny_reason_and_pretty_for_curl(self) -> None:
        treq = make(AuthStages.build(None, True, Union([PrivilegedGroups(), AlwaysDeny()])))[0]
        code, _, body = self.get(treq, "/healthz")
        assert code == 403
        assert json.loads(body)["message"] == (
            'forbidden: User "system:anonymous" cannot get path "/healthz": Everything is '
            "forbidden."
        )
        _, _, pretty = self.get(treq, "/healthz", headers={"User-Agent": "curl/8.0"})
        assert pretty.startswith(b'{\n  "kind": "Status"')

    def test_yaml_negotiated(self) -> None:
        treq = make(AuthStages.build(None, True, Union([PrivilegedGroups(), AlwaysDeny()])))[0]
        code, headers, body = self.get(treq, "/healthz", headers={"Accept": "application/yaml"})
        assert code == 403
        assert headers.getRawHeaders("content-type") == ["application/yaml"]
        assert b"reason: Forbidden" in body

    def test_authorizer_error_is_500_unless_allowed(self) -> None:
        treq = make(AuthStages.build(None, True, Union([PrivilegedGroups(), Raising()])))[0]
        code, headers, body = self.get(treq, "/healthz?a=1")
        assert (code, body) == (500, b'Internal Server Error: "/healthz?a=1": webhook down')
        assert headers.getRawHeaders("content-type") == ["text/plain"]
        allowed = ABACAuthorizer([Policy(group="system:unauthenticated", non_resource_path="*")])
        treq = make(AuthStages.build(None, True, Union([Raising(), allowed])))[0]
        assert self.get(treq, "/healthz")[0] == 200
        treq = make(AuthStages.build(None, True, Union([Raising(DENY)])))[0]
        assert self.get(treq, "/healthz")[0] == 500

    def test_deferred_authorizer(self) -> None:
        slow = SlowAuthorizer()
        treq = make(AuthStages.build(None, True, Union([PrivilegedGroups(), slow])))[0]
        d = treq.get("https://x/healthz")
        self.assertNoResult(d)
        attributes, pending = slow.pending[0]
        assert (attributes.verb, attributes.path, attributes.resource_request) == (
            "get",
            "/healthz",
            False,
        )
        pending.callback(Decision(DENY, "no way"))
        treq.flush()
        response = self.successResultOf(d)
        assert response.code == 403
        body = self.successResultOf(response.content())
        assert json.loads(body)["message"].endswith('path "/healthz": no way')
        d = treq.get("https://x/healthz")
        slow.pending[1][1].callback(Decision(ALLOW))
        treq.flush()
        assert self.successResultOf(d).code == 200

    # -- impersonation ---------------------------------------------------------------------

    def test_impersonation_by_masters(self) -> None:
        treq = self.rbac()
        code, _, body = self.get(
            treq,
            "/apis/who",
            headers={
                "X-Test-User": "admin,system:masters",
                "Impersonate-User": "alice",
                "Impersonate-Group": ["devs", "ops"],
                "Impersonate-Uid": "u-1",
                "Impersonate-Extra-Scopes": ["a", "b"],
                "Impersonate-Extra-Example.com%2fKey": "v",
            },
        )
        assert code == 200, body
        data = json.loads(body)
        assert data["user"] == "alice"
        assert data["groups"] == ["devs", "ops", "system:authenticated"]
        assert data["uid"] == "u-1"
        assert data["extra"] == {"scopes": ["a", "b"], "example.com/key": ["v"]}
        assert data["impersonate"] == []

    def test_impersonated_user_is_authorized(self) -> None:
        treq = self.rbac()
        admin = {"X-Test-User": "admin,system:masters"}
        code, _, body = self.get(
            treq, "/readyz/ping", headers={**admin, "Impersonate-User": "system:anonymous"}
        )
        assert code == 403
        assert json.loads(body)["message"] == (
            'forbidden: User "system:anonymous" cannot get path "/readyz/ping"'
        )

    def test_service_account_groups(self) -> None:
        treq = self.rbac()
        code, _, body = self.get(
            treq,
            "/apis/who",
            headers={
                "X-Test-User": "admin,system:masters",
                "Impersonate-User": "system:serviceaccount:kube-system:default",
            },
        )
        assert code == 200
        assert json.loads(body)["groups"] == [
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
            "system:authenticated",
        ]

    def test_impersonation_refused(self) -> None:
        treq = self.rbac()
        code, _, body = self.get(
            treq, "/who", headers={"X-Test-User": "bob", "Impersonate-User": "alice"}
        )
        assert code == 403
        status = json.loads(body)
        assert status["message"] == (
            'users "alice" is forbidden: User "bob" cannot impersonate resource "users" in '
            'API group "" at the cluster scope'
        )
        assert status["details"] == {"name": "alice", "kind": "users"}
        code, _, body = self.get(
            treq,
            "/who",
            headers={"X-Test-User": "bob", "Impersonate-User": "system:serviceaccount:ns:sa"},
        )
        assert json.loads(body)["message"] == (
            'serviceaccounts "sa" is forbidden: User "bob" cannot impersonate resource '
            '"serviceaccounts" in API group "" in the namespace "ns"'
        )

    def test_impersonation_refusal_of_extras_names_the_subresource(self) -> None:
        allow_users = ABACAuthorizer(
            [Policy(user="bob", resource="users", namespace="*", api_group="*")]
        )
        treq = make(AuthStages.build(HeaderAuthenticator(), True, Union([allow_users])))[0]
        code, _, body = self.get(
            treq,
            "/who",
            headers={
                "X-Test-User": "bob",
                "Impersonate-User": "alice",
                "Impersonate-Extra-Scopes": "view",
            },
        )
        assert code == 403
        assert json.loads(body)["message"] == (
            'userextras.authentication.k8s.io "view" is forbidden: User "bob" cannot '
            'impersonate resource "userextras/scopes" in API group "authentication.k8s.io" '
            "at the cluster scope: No policy matched."
        )

    def test_impersonation_without_user_is_400(self) -> None:
        treq = self.rbac()
        code, _, body = self.get(
            treq,
            "/who",
            headers={"X-Test-User": "admin,system:masters", "Impersonate-Group": "devs"},
        )
        assert code == 400
        status = json.loads(body)
        assert status["reason"] == "BadRequest"
        assert status["message"] == "requested [{Group  devs    }] without impersonating a user"

    def test_impersonation_with_always_allow(self) -> None:
        treq = make(AuthStages.build(None, True, None))[0]
        code, _, body = self.get(treq, "/who", headers={"Impersonate-User": "system:anonymous"})
        assert code == 200
        assert json.loads(body)["groups"] == ["system:unauthenticated"]

    def test_deferred_impersonation_check(self) -> None:
        slow = SlowAuthorizer()
        treq = make(AuthStages.build(HeaderAuthenticator(), True, Union([slow])))[0]
        d = treq.get("https://x/who", headers={"X-Test-User": "bob", "Impersonate-User": "al"})
        attributes, pending = slow.pending[0]
        assert (attributes.verb, attributes.resource, attributes.name) == (
            "impersonate",
            "users",
            "al",
        )
        pending.callback(Decision(ALLOW))
        attributes, pending = slow.pending[1]
        assert attributes.user.name == "al" and attributes.path == "/who"
        pending.callback(Decision(ALLOW))
        treq.flush()
        response = self.successResultOf(d)
        assert response.code == 200
        d = treq.get("https://x/who", headers={"X-Test-User": "bob", "Impersonate-User": "al"})
        slow.pending[2][1].errback(AuthorizerError("down", ALLOW))
        treq.flush()
        assert self.successResultOf(d).code == 403


@pytest.mark.parametrize("deferred", [False, True])
def test_synchronous_path_has_no_deferred(deferred: bool) -> None:
    """RBAC with a synchronous authenticator runs every auth stage synchronously."""
    auth = AuthStages.build(HeaderAuthenticator(deferred=deferred), True, Union([RBACAuthorizer()]))
    request = FakeRequest(b"GET", b"/readyz")
    info = RequestInfo("GET", "/readyz", {}, False, False)
    stages = [auth.request_info, auth.authentication, auth.impersonation, auth.authorization]
    results = []
    for stage in stages:
        results.append(stage(request, info))
        if results[-1] is not None:
            break
    if deferred:
        assert results[0] is None and isinstance(results[1], Deferred)
    else:
        assert results == [None, None, None, None]
        assert info.authorization is not None and info.authorization[0] == "allow"


def test_request_info_of_a_request_line_without_query_is_parsed_once() -> None:
    """The resolver keeps its (frozen) answer per method and path when there is no query;
    a query, or a path it cannot read, is parsed every time."""
    resolve = AuthStages.build(None, True, None).request_info
    path = "/apis/events.k8s.io/v1/namespaces/memo/events/e1"
    first = RequestInfo("GET", path, {}, False, True)
    second = RequestInfo("GET", path, {}, False, True)
    assert resolve(FakeRequest(b"GET", path.encode()), first) is None
    assert resolve(FakeRequest(b"GET", path.encode()), second) is None
    assert first.resolved is not None and second.resolved is first.resolved
    assert (first.resolved.verb, first.resolved.name) == ("get", "e1")
    other = RequestInfo("DELETE", path, {}, False, True)
    resolve(FakeRequest(b"DELETE", path.encode()), other)
    assert other.resolved is not None and other.resolved.verb == "delete"
    listing = "/apis/events.k8s.io/v1/namespaces/memo/events"
    watch = RequestInfo("GET", listing, {b"watch": [b"1"]}, True, True)
    resolve(FakeRequest(b"GET", listing.encode() + b"?watch=1"), watch)
    plain = RequestInfo("GET", listing, {}, False, True)
    resolve(FakeRequest(b"GET", listing.encode()), plain)
    assert watch.resolved is not None and watch.resolved.verb == "watch"
    assert plain.resolved is not None and plain.resolved.verb == "list"
    for _ in range(2):
        bad = RequestInfo("GET", "/api/v1/watch", {}, False, True)
        answer = resolve(FakeRequest(b"GET", b"/api/v1/w%61tch"), bad)
        assert isinstance(answer, Response) and answer.code == 500
        assert answer.body == (
            b'Internal Server Error: "/api/v1/w%61tch": unable to determine kind and '
            b"namespace from url, /api/v1/w%61tch"
        )
