"""The review APIs through the HTTP app (StubTreq, a fixed clock, the real auth stages):
SelfSubjectReview, TokenReview, the access reviews and SelfSubjectRulesReview, in JSON and in
the protobuf kubectl sends, with the reference's errors."""

from __future__ import annotations

import json
from typing import Any

from tests.unit.unit_helpers import AppResource, result_of
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.web.http_headers import Headers

from apiserver.api.reviews import AUTHENTICATION_BASE, AUTHORIZATION_BASE, ReviewsAPI
from apiserver.auth.authz.builtin import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from apiserver.auth.authz.rbac import RBACAuthorizer
from apiserver.auth.authz.union import Union
from apiserver.auth.filter import AuthStages
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo
from apiserver.http.app import Router, ServingPolicy
from apiserver.http.chain import build_handler_chain
from apiserver.protobuf import codec

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
SSR = AUTHENTICATION_BASE + "selfsubjectreviews"
TR = AUTHENTICATION_BASE + "tokenreviews"
SSAR = AUTHORIZATION_BASE + "selfsubjectaccessreviews"
SAR = AUTHORIZATION_BASE + "subjectaccessreviews"
SSRR = AUTHORIZATION_BASE + "selfsubjectrulesreviews"
LSAR = AUTHORIZATION_BASE + "namespaces/team/localsubjectaccessreviews"

BOB = UserInfo("bob", "u-1", ("dev", "system:authenticated"), {"k": ("v",)})


class Cert:
    """Every request is ``bob`` (or the user the test sets)."""

    def __init__(self) -> None:
        self.user = BOB

    def authenticate(self, request: Any) -> AuthResult:
        return AuthResult(self.user)


class Tokens:
    """Token authenticators: ``good`` is carol for the audience ``api``, ``bad`` an error."""

    def authenticate_token(self, token: str, audiences: tuple[str, ...]) -> AuthResult | None:
        if token == "good":
            return AuthResult(UserInfo("carol", groups=("qa",)), ("api",))
        if token == "bad":
            raise AuthenticationError("token has expired")
        return None


class Harness:
    def __init__(self, authorizer: Any = None) -> None:
        self.clock = Clock()
        self.clock.advance(NOW)
        self.authn = Cert()
        stages = AuthStages.build(self.authn, False, authorizer)
        self.reviews = ReviewsAPI(
            self.clock, lambda: stages.authorization.authorizer, Tokens(), ("api",)
        )
        router = Router()
        router.add_prefix(AUTHENTICATION_BASE, self.reviews.handle)
        router.add_prefix(AUTHORIZATION_BASE, self.reviews.handle)
        app = build_handler_chain(router, self.clock, ServingPolicy(), auth=stages)
        self.treq = StubTreq(AppResource(app))

    def post(
        self,
        path: str,
        body: bytes | dict[str, Any],
        content_type: str = "application/json",
        accept: str = "application/json",
        method: str = "POST",
    ) -> tuple[int, Headers, bytes]:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        headers = {"Content-Type": [content_type], "Accept": [accept]}
        results: list[Any] = []
        d = self.treq.request(method, "https://x" + path, data=data, headers=headers)
        d.addCallback(lambda r: r.content().addCallback(lambda b: (r.code, r.headers, b)))
        d.addBoth(results.append)
        assert results, "the request did not complete synchronously"
        return result_of(results[0])

    def json(self, path: str, body: dict[str, Any], code: int = 201) -> dict[str, Any]:
        got, _, raw = self.post(path, body)
        assert got == code, raw
        out: dict[str, Any] = json.loads(raw)
        return out


RBAC = Union([PrivilegedGroups(), RBACAuthorizer()])


def test_self_subject_review_is_the_user() -> None:
    h = Harness()
    assert h.json(SSR, {}) == {
        "kind": "SelfSubjectReview",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"creationTimestamp": "2027-01-15T08:00:00Z"},
        "status": {
            "userInfo": {
                "username": "bob",
                "uid": "u-1",
                "groups": ["dev", "system:authenticated"],
                "extra": {"k": ["v"]},
            }
        },
    }


def test_kubectl_whoami_protobuf_body() -> None:
    """The 83 bytes kubectl sends (an empty SelfSubjectReview); the answer in protobuf."""
    body = bytes.fromhex(
        "6b387300"
        + "0a2d0a18"
        + b"authentication.k8s.io/v1".hex()
        + "1211"
        + b"SelfSubjectReview".hex()
        + "121a0a100a0012001a0022002a0032003800420012060a040a0012001a002200"
    )
    assert len(body) == 83
    h = Harness()
    code, headers, raw = h.post(
        SSR,
        body,
        content_type="application/vnd.kubernetes.protobuf",
        accept="application/vnd.kubernetes.protobuf,application/json",
    )
    assert code == 201
    assert headers.getRawHeaders(b"content-type") == [b"application/vnd.kubernetes.protobuf"]
    api_version, kind, message = codec.unwrap(raw)
    assert (api_version, kind) == ("authentication.k8s.io/v1", "SelfSubjectReview")
    review = codec.decode(codec.message_for(api_version, kind), message)  # type: ignore[arg-type]
    assert review["status"]["userInfo"]["username"] == "bob"
    assert review["status"]["userInfo"]["extra"] == {"k": ["v"]}


def test_wrong_kind_and_methods() -> None:
    h = Harness()
    code, _, raw = h.post(SSR, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview"})
    assert code == 400
    assert 'no kind "TokenReview" is registered' in json.loads(raw)["message"]
    code, _, raw = h.post(SSR, b"", method="GET")
    assert code == 405
    code, _, _ = h.post(AUTHORIZATION_BASE + "nothing", {})
    assert code == 404
    code, _, raw = h.post(SAR, {"spec": {"user": 5}})
    assert code == 400


def test_token_review() -> None:
    h = Harness()
    out = h.json(TR, {"spec": {"token": "good"}})
    assert out["spec"] == {"token": "good"}
    assert out["status"] == {
        "authenticated": True,
        "user": {"username": "carol", "groups": ["qa", "system:authenticated"]},
        "audiences": ["api"],
    }
    assert h.json(TR, {"spec": {"token": "bad"}})["status"] == {
        "user": {},
        "error": "token has expired",
    }
    assert h.json(TR, {"spec": {"token": "other"}})["status"]["error"] == "invalid bearer token"
    code, _, raw = h.post(TR, {"spec": {"token": "good", "audiences": ["elsewhere"]}})
    assert code == 500
    assert json.loads(raw)["message"] == "Internal error occurred: error validating audiences"
    code, _, raw = h.post(TR, {"spec": {}})
    assert code == 400
    assert json.loads(raw)["message"] == "token is required for TokenReview in authentication"


def test_self_subject_access_review_under_rbac() -> None:
    h = Harness(RBAC)
    out = h.json(SSAR, {"spec": {"resourceAttributes": {"verb": "create", "resource": "events"}}})
    assert out["status"] == {"allowed": False}
    # The create handler's field manager recorded the request's fields.
    assert out["metadata"] == {
        "managedFields": [
            {
                "manager": "unknown",
                "operation": "Update",
                "apiVersion": "authorization.k8s.io/v1",
                "time": "2027-01-15T08:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:resourceAttributes": {"f:resource": {}, "f:verb": {}}}},
            }
        ]
    }
    h.authn.user = UserInfo("root", groups=("system:masters",))
    out = h.json(SSAR, {"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})
    assert out["spec"] == {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}
    assert out["status"] == {"allowed": True}


def test_always_deny_reason() -> None:
    h = Harness(Union([PrivilegedGroups(), AlwaysAllow()]))
    out = h.json(SSAR, {"spec": {"resourceAttributes": {"verb": "get", "resource": "events"}}})
    assert out["status"] == {"allowed": True}
    h = Harness(Union([PrivilegedGroups(), AlwaysDeny(), AlwaysAllow()]))
    out = h.json(SAR, {"spec": {"user": "x", "resourceAttributes": {"verb": "get"}}})
    assert out["status"] == {"allowed": True}


def test_subject_access_review_validation() -> None:
    h = Harness()
    code, _, raw = h.post(SAR, {"spec": {}})
    assert code == 422
    status = json.loads(raw)
    assert status["message"] == (
        '.authorization.k8s.io "" is invalid: [spec.resourceAttributes: Invalid value: '
        '"null": exactly one of nonResourceAttributes or resourceAttributes must be specified, '
        'spec.user: Invalid value: "": at least one of user or group must be specified]'
    )
    assert status["details"]["group"] == "authorization.k8s.io"
    assert "kind" not in status["details"]
    code, _, raw = h.post(
        SAR,
        {
            "metadata": {"name": "x"},
            "spec": {"groups": ["g"], "resourceAttributes": {"verb": "get"}},
        },
    )
    assert code == 422
    assert "metadata: Invalid value" in json.loads(raw)["message"]
    out = h.json(
        SAR,
        {
            "spec": {
                "user": "u",
                "extra": {"e": ["1"]},
                "resourceAttributes": {"verb": "get", "resource": "events"},
            }
        },
    )
    assert out["spec"]["extra"] == {"e": ["1"]}
    assert out["status"] == {"allowed": True}


def test_local_subject_access_review_namespaces() -> None:
    h = Harness()
    body: dict[str, Any] = {
        "spec": {"user": "u", "resourceAttributes": {"namespace": "team", "verb": "get"}}
    }
    out = h.json(LSAR, body)
    assert out["metadata"]["namespace"] == "team"
    code, _, raw = h.post(LSAR, {**body, "metadata": {"namespace": "other"}})
    assert code == 400
    assert json.loads(raw)["message"] == (
        "the namespace of the provided object does not match the namespace sent on the request"
    )
    code, _, raw = h.post(
        LSAR,
        {"spec": {"user": "u", "nonResourceAttributes": {"path": "/x", "verb": "get"}}},
    )
    assert code == 422
    assert "disallowed on this kind of request" in json.loads(raw)["message"]


def test_self_subject_rules_review() -> None:
    h = Harness(RBAC)
    code, _, raw = h.post(SSRR, {"spec": {}})
    assert code == 400
    assert json.loads(raw)["message"] == "no namespace on request"
    out = h.json(SSRR, {"spec": {"namespace": "default"}})
    assert out["spec"] == {}
    status = out["status"]
    assert status["incomplete"] is False
    assert {
        "verbs": ["create"],
        "apiGroups": ["authorization.k8s.io"],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    } in status["resourceRules"]
    assert {
        "verbs": ["get"],
        "nonResourceURLs": ["/livez", "/readyz", "/healthz", "/version", "/version/"],
    } in status["nonResourceRules"]
    everything = Harness(None).json(SSRR, {"spec": {"namespace": "x"}})["status"]
    assert everything == {
        "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
        "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
        "incomplete": False,
    }


def test_selector_parse_errors_are_evaluation_errors() -> None:
    h = Harness(RBAC)
    h.authn.user = UserInfo("root", groups=("system:masters",))
    out = h.json(
        SSAR,
        {
            "spec": {
                "resourceAttributes": {
                    "verb": "list",
                    "resource": "events",
                    "fieldSelector": {"rawSelector": "a"},
                    "labelSelector": {
                        "requirements": [{"key": "k", "operator": "Almost", "values": ["v"]}]
                    },
                }
            }
        },
    )
    assert out["status"] == {
        "allowed": True,
        "evaluationError": "spec.resourceAttributes.fieldSelector ignored due to parse error; "
        "spec.resourceAttributes.labelSelector partially ignored due to parse error",
    }


def test_field_validation() -> None:
    """Unknown fields: warnings by default, a 400 with ``fieldValidation=Strict`` (what
    ``kubectl create -f`` sends)."""
    h = Harness()
    body = {"spec": {"user": "u", "resourceAttributes": {"verb": "get", "resorce": "x"}}}
    code, headers, _ = h.post(SAR, body)
    assert code == 201
    assert headers.getRawHeaders(b"warning") == [
        b'299 - "unknown field \\"spec.resourceAttributes.resorce\\""'
    ]
    code, _, raw = h.post(SAR + "?fieldValidation=Strict", body)
    assert code == 400
    assert json.loads(raw)["message"] == (
        'SubjectAccessReview in version "v1" cannot be handled as a SubjectAccessReview: '
        'strict decoding error: unknown field "spec.resourceAttributes.resorce"'
    )
    extra = {"spec": {"user": "u", "extra": {"k": ["v"]}, "nonResourceAttributes": {}}}
    code, headers, _ = h.post(SAR + "?fieldValidation=Strict", extra)
    assert code == 201
    assert headers.getRawHeaders(b"warning") is None
