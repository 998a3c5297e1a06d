"""The TokenRequest API through the HTTP app (StubTreq, an in-memory store, a fixed clock):
bodies and Status errors as token.go and the create handler give them, the expiration rules of
--service-account-max-token-expiration and --service-account-extend-token-expiration, the
authorization attributes, and when the API is served at all."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from tests.unit.unit_helpers import AppResource, FakeStore, result_of
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.web.http_headers import Headers

from apiserver.api.tokenrequest import install_token_request, token_request_served
from apiserver.api.tokenrequest.rest import (
    PREFIX,
    ExpirationPolicy,
    TokenRequestAPI,
    TokenREST,
)
from apiserver.auth.authn.serviceaccount import (
    KeySet,
    ServiceAccountAuthenticator,
    TokenSigner,
)
from apiserver.auth.filter import AuthStages
from apiserver.auth.interface import (
    ALLOW,
    DENY,
    Attributes,
    AuthResult,
    Decision,
    UserInfo,
)
from apiserver.auth.requestinfo import parse_request_info
from apiserver.http.app import App, Router, ServingPolicy
from apiserver.http.chain import build_handler_chain
from apiserver.options import ServerConfig
from apiserver.protobuf import codec

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem_private(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


ISSUER = "https://kubernetes.default.svc"
PATH = "/api/v1/namespaces/ci/serviceaccounts/builder/token"
JTI = "6b1c1f54-5f0e-4b8e-9d49-3b1c0a6f2a11"
YEAR = 365 * 24 * 3600
SA = {"kind": "ServiceAccount", "metadata": {"name": "builder", "namespace": "ci", "uid": "sa-uid"}}


class Recorder:
    """An authorizer that records what it is asked and answers ``decision``."""

    def __init__(self, decision: str = ALLOW) -> None:
        self.decision = decision
        self.seen: list[Attributes] = []

    def authorize(self, attributes: Attributes) -> Decision:
        self.seen.append(attributes)
        return Decision(self.decision, "")


class Bob:
    def authenticate(self, request: Any) -> AuthResult:
        return AuthResult(UserInfo("bob", groups=("system:authenticated",)), ())


class Api:
    """One API under test: its HTTP client, store, clock and signer."""

    def __init__(
        self,
        policy: ExpirationPolicy | None = None,
        *,
        audiences: tuple[str, ...] = (ISSUER,),
        uid_validation: bool = True,
        authorizer: Recorder | None = None,
    ) -> None:
        self.store = FakeStore()
        self.store.put("/registry/serviceaccounts/ci/builder", SA)
        self.clock = Clock()
        self.clock.advance(NOW)
        self.signer = TokenSigner(KEY, ISSUER)
        self.rest = TokenREST(
            self.signer,
            self.store,
            "/registry",
            self.clock,
            audiences,
            policy or ExpirationPolicy(),
            uid_validation=uid_validation,
            new_jti=lambda: JTI,
        )
        router = Router()
        router.add_prefix(PREFIX, TokenRequestAPI(self.rest).handle)
        auth = AuthStages.build(Bob(), False, authorizer) if authorizer is not None else None
        app = build_handler_chain(router, self.clock, ServingPolicy(), auth=auth)
        self.treq = StubTreq(AppResource(app))

    def request(
        self,
        body: bytes | dict[str, Any] | None = None,
        path: str = PATH,
        method: str = "POST",
        content_type: str = "application/json",
        **headers: str,
    ) -> tuple[int, Headers, bytes]:
        data = json.dumps(body).encode() if isinstance(body, dict) else body
        sent = {"Content-Type": [content_type]}
        sent.update({k.replace("_", "-"): [v] for k, v in headers.items()})
        results: list[Any] = []
        d = self.treq.request(method, "https://x" + path, data=data, headers=sent)
        d.addCallback(lambda r: r.content().addCallback(lambda b: (r.code, r.headers, b)))
        d.addBoth(results.append)
        assert results, "the request did not complete synchronously"
        return result_of(results[0])

    def token(self, body: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
        """POST ``body``; the response object and the token's claims."""
        code, _, raw = self.request(body or {})
        assert code == 201, raw
        out = json.loads(raw)
        return out, claims_of(out["status"]["token"])


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def warnings_of(headers: Headers) -> list[str]:
    return [v.decode() for v in headers.getRawHeaders(b"warning", [])]


def status(code: int, reason: str, message: str, details: dict[str, Any] | None) -> bytes:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details is not None:
        body["details"] = details
    body["code"] = code
    return json.dumps(body, separators=(",", ":")).encode() + b"\n"


def put_pod(api: Api, name: str = "runner", account: str = "builder", node: str = "") -> None:
    spec: dict[str, Any] = {"serviceAccountName": account}
    if node:
        spec["nodeName"] = node
    api.store.put(
        f"/registry/pods/ci/{name}",
        {"metadata": {"name": name, "namespace": "ci", "uid": f"{name}-uid"}, "spec": spec},
    )


def pod_ref(name: str = "runner", **extra: str) -> dict[str, str]:
    return {"kind": "Pod", "apiVersion": "v1", "name": name, **extra}


# --- the happy path ----------------------------------------------------------------------------


def test_created_token_request_body_and_claims() -> None:
    api = Api()
    code, headers, raw = api.request(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}}
    )
    assert code == 201
    assert headers.getRawHeaders(b"content-type") == [b"application/json"]
    assert warnings_of(headers) == []
    out = json.loads(raw)
    token = out["status"].pop("token")
    assert out == {
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {
            "name": "builder",
            "namespace": "ci",
            "uid": "sa-uid",
            "creationTimestamp": "2027-01-15T08:00:00Z",
        },
        "spec": {"audiences": [ISSUER], "expirationSeconds": 3600, "boundObjectRef": None},
        "status": {"expirationTimestamp": "2027-01-15T09:00:00Z"},
    }
    assert list(json.loads(raw)) == ["kind", "apiVersion", "metadata", "spec", "status"]
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "RS256", "kid": api.signer.kid}
    claims = claims_of(token)
    assert claims == {
        "aud": [ISSUER],
        "exp": int(NOW) + 3600,
        "iat": int(NOW),
        "iss": ISSUER,
        "jti": JTI,
        "kubernetes.io": {
            "namespace": "ci",
            "serviceaccount": {"name": "builder", "uid": "sa-uid"},
        },
        "nbf": int(NOW),
        "sub": "system:serviceaccount:ci:builder",
    }
    # Keys sorted at every level, as go-jose writes the merged claim map.
    payload = token.split(".")[1]
    text = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    assert text == json.dumps(claims, sort_keys=True, separators=(",", ":"))


def test_the_token_authenticates_as_the_service_account() -> None:
    api = Api()
    out, _ = api.token()
    authenticator = ServiceAccountAuthenticator(
        [ISSUER],
        KeySet.of([KEY.public_key()]),
        [ISSUER],
        api.store,
        "/registry",
        api.clock,
        legacy=False,
    )
    result = result_of(authenticator.authenticate_token(out["status"]["token"], (ISSUER,)))
    assert result.user.name == "system:serviceaccount:ci:builder"
    assert result.user.uid == "sa-uid"


def test_audiences_given_and_defaulted() -> None:
    api = Api(audiences=(ISSUER, "api"))
    out, claims = api.token({"spec": {"audiences": ["vault"], "expirationSeconds": 1200}})
    assert out["spec"] == {
        "audiences": ["vault"],
        "expirationSeconds": 1200,
        "boundObjectRef": None,
    }
    assert claims["aud"] == ["vault"]
    assert claims["exp"] - claims["iat"] == 1200
    out, claims = api.token({"spec": {"audiences": []}})
    assert out["spec"]["audiences"] == claims["aud"] == [ISSUER, "api"]


def test_yaml_in_and_out() -> None:
    api = Api()
    code, headers, raw = api.request(
        b"spec:\n  expirationSeconds: 900\n",
        content_type="application/yaml",
        Accept="application/yaml",
    )
    assert code == 201
    assert headers.getRawHeaders(b"content-type") == [b"application/yaml"]
    assert b"expirationSeconds: 900\n" in raw and raw.startswith(b"kind: TokenRequest\n")


def test_request_metadata_is_echoed_with_the_server_fields() -> None:
    api = Api()
    out, _ = api.token(
        {"metadata": {"name": "builder", "namespace": "ci", "uid": "sa-uid", "labels": {"a": "b"}}}
    )
    assert out["metadata"] == {
        "name": "builder",
        "namespace": "ci",
        "uid": "sa-uid",
        "creationTimestamp": "2027-01-15T08:00:00Z",
        "labels": {"a": "b"},
    }


def test_dry_run_still_issues_a_token_and_bad_values_are_refused() -> None:
    api = Api()
    code, _, raw = api.request({}, path=PATH + "?dryRun=All")
    assert code == 201 and json.loads(raw)["status"]["token"]
    code, _, raw = api.request({}, path=PATH + "?dryRun=Maybe")
    assert code == 422
    assert json.loads(raw)["message"] == (
        'CreateOptions.meta.k8s.io "" is invalid: dryRun: Unsupported value: ["Maybe"]: '
        'supported values: "All"'
    )


# --- --service-account-max-token-expiration ----------------------------------------------------


def test_longer_requests_are_shortened_to_the_maximum_with_a_warning() -> None:
    api = Api(ExpirationPolicy(max_seconds=7200))
    code, headers, raw = api.request({"spec": {"expirationSeconds": 9000}})
    assert code == 201
    assert warnings_of(headers) == [
        '299 - "requested expiration of 9000 seconds shortened to 7200 seconds"'
    ]
    out = json.loads(raw)
    assert out["spec"]["expirationSeconds"] == 7200
    assert out["status"]["expirationTimestamp"] == "2027-01-15T10:00:00Z"
    claims = claims_of(out["status"]["token"])
    assert claims["exp"] - claims["iat"] == 7200


def test_requests_within_the_maximum_are_kept() -> None:
    api = Api(ExpirationPolicy(max_seconds=7200))
    code, headers, raw = api.request({"spec": {"expirationSeconds": 7200}})
    assert code == 201 and warnings_of(headers) == []
    assert claims_of(json.loads(raw)["status"]["token"])["exp"] == int(NOW) + 7200


# --- --service-account-extend-token-expiration ---------------------------------------------------


def test_pod_bound_3607_token_is_extended_to_a_year_with_warnafter() -> None:
    api = Api(ExpirationPolicy(max_seconds=7200))
    put_pod(api)
    out, claims = api.token({"spec": {"expirationSeconds": 3607, "boundObjectRef": pod_ref()}})
    assert claims["exp"] == int(NOW) + YEAR
    assert claims["kubernetes.io"]["warnafter"] == int(NOW) + 3607
    assert claims["kubernetes.io"]["pod"] == {"name": "runner", "uid": "runner-uid"}
    # The response speaks of what was asked for, not of the year.
    assert out["spec"]["expirationSeconds"] == 3607
    assert out["status"]["expirationTimestamp"] == "2027-01-15T09:00:07Z"
    assert out["spec"]["boundObjectRef"] == pod_ref()


@pytest.mark.parametrize(
    ("policy", "spec", "lifetime"),
    [
        # Turned off.
        (ExpirationPolicy(extend=False), {"boundObjectRef": pod_ref()}, 3607),
        # Not bound to a pod.
        (ExpirationPolicy(), {}, 3607),
        # An audience that is not the API's.
        (ExpirationPolicy(), {"boundObjectRef": pod_ref(), "audiences": ["vault"]}, 3607),
        # A maximum below 3607 s shortens the request first: no extension.
        (ExpirationPolicy(max_seconds=3600), {"boundObjectRef": pod_ref()}, 3600),
    ],
)
def test_no_extension(policy: ExpirationPolicy, spec: dict[str, Any], lifetime: int) -> None:
    api = Api(policy)
    put_pod(api)
    _, claims = api.token({"spec": {"expirationSeconds": 3607, **spec}})
    assert claims["exp"] - claims["iat"] == lifetime
    assert "warnafter" not in claims["kubernetes.io"]


def test_only_exactly_3607_is_extended() -> None:
    api = Api()
    put_pod(api)
    _, claims = api.token({"spec": {"expirationSeconds": 3608, "boundObjectRef": pod_ref()}})
    assert claims["exp"] - claims["iat"] == 3608


def test_expiration_policy_rules() -> None:
    policy = ExpirationPolicy(max_seconds=7200)
    assert policy.apply(3607, True, True) == (3607, YEAR, 3607, [])
    assert policy.apply(3607, False, True) == (3607, 3607, 0, [])
    assert policy.apply(3607, True, False) == (3607, 3607, 0, [])
    assert policy.apply(9000, True, True) == (
        7200,
        7200,
        0,
        ["requested expiration of 9000 seconds shortened to 7200 seconds"],
    )
    assert ExpirationPolicy().apply(10**9, False, True) == (10**9, 10**9, 0, [])
    assert ExpirationPolicy(max_extended_seconds=5 * 3600).apply(3607, True, True)[1] == 5 * 3600


# --- bound objects -------------------------------------------------------------------------------


def test_pod_on_a_node_names_the_node() -> None:
    api = Api()
    put_pod(api, node="node-1")
    api.store.put("/registry/minions/node-1", {"metadata": {"name": "node-1", "uid": "n-uid"}})
    _, claims = api.token({"spec": {"boundObjectRef": pod_ref()}})
    assert claims["kubernetes.io"]["node"] == {"name": "node-1", "uid": "n-uid"}
    # A missing Node object still leaves its name in the token.
    put_pod(api, name="other", node="node-2")
    _, claims = api.token({"spec": {"boundObjectRef": pod_ref("other")}})
    assert claims["kubernetes.io"]["node"] == {"name": "node-2"}


def test_secret_and_node_binding() -> None:
    api = Api()
    api.store.put("/registry/secrets/ci/s", {"metadata": {"name": "s", "uid": "s-uid"}})
    api.store.put("/registry/minions/n", {"metadata": {"name": "n", "uid": "n-uid"}})
    secret = {"kind": "Secret", "apiVersion": "v1", "name": "s", "uid": "s-uid"}
    _, claims = api.token({"spec": {"boundObjectRef": secret}})
    assert claims["kubernetes.io"]["secret"] == {"name": "s", "uid": "s-uid"}
    _, claims = api.token({"spec": {"boundObjectRef": {"kind": "Node", "name": "n"}}})
    assert claims["kubernetes.io"]["node"] == {"name": "n", "uid": "n-uid"}
    assert "pod" not in claims["kubernetes.io"]


@pytest.mark.parametrize(
    ("ref", "code", "reason", "message", "details"),
    [
        (
            {"kind": "ConfigMap", "apiVersion": "v1", "name": "x"},
            400,
            "BadRequest",
            "cannot bind token to object of type /v1, Kind=ConfigMap",
            None,
        ),
        (
            {"kind": "Pod", "apiVersion": "apps/v1", "name": "runner"},
            400,
            "BadRequest",
            "cannot bind token to object of type apps/v1, Kind=Pod",
            None,
        ),
        (
            pod_ref("gone"),
            404,
            "NotFound",
            'pods "gone" not found',
            {"name": "gone", "kind": "pods"},
        ),
        (
            {"kind": "Secret", "apiVersion": "v1", "name": "gone"},
            404,
            "NotFound",
            'secrets "gone" not found',
            {"name": "gone", "kind": "secrets"},
        ),
        (
            {"kind": "Node", "apiVersion": "v1", "name": "gone"},
            404,
            "NotFound",
            'nodes "gone" not found',
            {"name": "gone", "kind": "nodes"},
        ),
        (
            pod_ref(uid="old-uid"),
            409,
            "Conflict",
            'Operation cannot be fulfilled on Pod "runner": the UID in the bound object '
            "reference (old-uid) does not match the UID in record. The object might have been "
            "deleted and then recreated",
            {"name": "runner", "kind": "Pod"},
        ),
        (
            pod_ref("stranger"),
            400,
            "BadRequest",
            'cannot bind token for serviceaccount "builder" to pod running with different '
            "serviceaccount name.",
            None,
        ),
        ({"kind": "Pod"}, 400, "BadRequest", "Name parameter required.", None),
    ],
)
def test_bound_object_errors(
    ref: dict[str, str], code: int, reason: str, message: str, details: dict[str, Any] | None
) -> None:
    api = Api()
    put_pod(api)
    put_pod(api, name="stranger", account="someone-else")
    got = api.request({"spec": {"boundObjectRef": ref}})
    assert (got[0], got[2]) == (code, status(code, reason, message, details))


# --- errors ------------------------------------------------------------------------------------


def test_missing_service_account_is_404() -> None:
    api = Api()
    code, _, raw = api.request({}, path="/api/v1/namespaces/ci/serviceaccounts/x/token")
    assert (code, raw) == (
        404,
        status(
            404,
            "NotFound",
            'serviceaccounts "x" not found',
            {"name": "x", "kind": "serviceaccounts"},
        ),
    )


@pytest.mark.parametrize(
    ("seconds", "detail"),
    [
        (599, "may not specify a duration less than 10 minutes"),
        (0, "may not specify a duration less than 10 minutes"),
        (2**32 + 1, "may not specify a duration larger than 2^32 seconds"),
    ],
)
def test_expiration_out_of_bounds_is_422(seconds: int, detail: str) -> None:
    api = Api()
    code, _, raw = api.request({"spec": {"expirationSeconds": seconds}})
    text = f"Invalid value: {seconds}: {detail}"
    assert (code, raw) == (
        422,
        status(
            422,
            "Invalid",
            f'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: {text}',
            {
                "group": "authentication.k8s.io",
                "kind": "TokenRequest",
                "causes": [
                    {
                        "reason": "FieldValueInvalid",
                        "message": text,
                        "field": "spec.expirationSeconds",
                    }
                ],
            },
        ),
    )


def test_bounds_are_inclusive() -> None:
    api = Api()
    assert api.request({"spec": {"expirationSeconds": 600}})[0] == 201
    assert api.request({"spec": {"expirationSeconds": 2**32}})[0] == 201


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b"",
            "the object provided is unrecognized (must be of type TokenRequest): couldn't get "
            "version/kind; json parse error: unexpected end of JSON input (<empty>)",
        ),
        (
            b"{not json",
            "the object provided is unrecognized (must be of type TokenRequest): couldn't get "
            "version/kind; json parse error: invalid character 'n' looking for beginning of "
            "object key string ({not json)",
        ),
        (
            b'{"spec":{"expirationSeconds":"1h"}}',
            'TokenRequest in version "v1" cannot be handled as a TokenRequest: json: cannot '
            "unmarshal string into Go struct field TokenRequestSpec.spec.expirationSeconds of "
            "type int64",
        ),
        (
            b'{"spec":{"audiences":"api"}}',
            'TokenRequest in version "v1" cannot be handled as a TokenRequest: json: cannot '
            "unmarshal string into Go struct field TokenRequestSpec.spec.audiences of type "
            "[]string",
        ),
        (
            b'{"spec":[]}',
            'TokenRequest in version "v1" cannot be handled as a TokenRequest: json: cannot '
            "unmarshal array into Go struct field TokenRequest.spec of type v1.TokenRequestSpec",
        ),
        (
            b'{"apiVersion":"v1","kind":"TokenRequest"}',
            'TokenRequest in version "v1" cannot be handled as a TokenRequest: no kind '
            '"TokenRequest" is registered for version "v1" in scheme '
            '"pkg/api/legacyscheme/scheme.go:30"',
        ),
    ],
)
def test_undecodable_bodies_are_400(body: bytes, message: str) -> None:
    api = Api()
    code, _, raw = api.request(body)
    assert (code, raw) == (400, status(400, "BadRequest", message, None))


def test_unknown_fields_warn_or_fail_with_field_validation() -> None:
    api = Api()
    body = {"spec": {"expirationSeconds": 900, "bogus": 1}}
    code, headers, _ = api.request(body)
    assert code == 201
    assert warnings_of(headers) == ['299 - "unknown field \\"spec.bogus\\""']
    code, _, raw = api.request(body, path=PATH + "?fieldValidation=Strict")
    assert (code, raw) == (
        400,
        status(
            400,
            "BadRequest",
            'TokenRequest in version "v1" cannot be handled as a TokenRequest: strict decoding '
            'error: unknown field "spec.bogus"',
            None,
        ),
    )
    code, headers, _ = api.request(body, path=PATH + "?fieldValidation=Ignore")
    assert code == 201 and warnings_of(headers) == []


#: What ``kubectl create token builder -n ci --duration=3h --audience=a --audience=b
#: --bound-object-kind=Pod --bound-object-name=p --bound-object-uid=u1`` (1.32) sends.
KUBECTL_PROTOBUF = (
    b"k8s\x00\n(\n\x18authentication.k8s.io/v1\x12\x0cTokenRequest\x125\n\x10\n\x00\x12\x00"
    b'\x1a\x00"\x00*\x002\x008\x00B\x00\x12\x1b\n\x01a\n\x01b\x1a\x10\n\x03Pod\x12\x02v1\x1a\x01p"'
    b'\x02u1 \xb0T\x1a\x04\n\x00\x12\x00\x1a\x00"\x00'
)
PROTOBUF = "application/vnd.kubernetes.protobuf"


def test_protobuf_body_from_kubectl() -> None:
    api = Api(ExpirationPolicy(max_seconds=7200))
    api.store.put(
        "/registry/pods/ci/p",
        {"metadata": {"name": "p", "uid": "u1"}, "spec": {"serviceAccountName": "builder"}},
    )
    code, headers, raw = api.request(
        KUBECTL_PROTOBUF, content_type=PROTOBUF, Accept=f"{PROTOBUF},application/json"
    )
    assert code == 201, raw
    # The answer is protobuf too, as kube-apiserver writes it (client-go prefers it).
    assert headers.getRawHeaders(b"content-type") == [PROTOBUF.encode()]
    api_version, kind, message = codec.unwrap(raw)
    assert (api_version, kind) == ("authentication.k8s.io/v1", "TokenRequest")
    out = codec.decode(codec.TokenRequest, message)
    assert out["spec"] == {
        "audiences": ["a", "b"],
        "expirationSeconds": 7200,
        "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "u1"},
    }
    claims = claims_of(out["status"]["token"])
    assert claims["aud"] == ["a", "b"]
    assert claims["kubernetes.io"]["pod"] == {"name": "p", "uid": "u1"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            b"\x00",
            "the object provided is unrecognized (must be of type TokenRequest): data too short "
            "(00)",
        ),
        (
            b"{}\x00\x00",
            "the object provided is unrecognized (must be of type TokenRequest): provided data "
            "does not appear to be a protobuf message, expected prefix [107 56 115 0] ({}\x00\x00)",
        ),
        (
            KUBECTL_PROTOBUF[:60],
            "the object provided is unrecognized (must be of type TokenRequest): unexpected EOF "
            f"({KUBECTL_PROTOBUF[:30].hex()} ...)",
        ),
        (
            b"k8s\x00\n\t\n\x02v1\x12\x03Pod\x12\x00",
            'Pod in version "v1" cannot be handled as a TokenRequest: no kind "Pod" is '
            'registered for version "v1" in scheme "pkg/api/legacyscheme/scheme.go:30"',
        ),
    ],
)
def test_bad_protobuf_bodies_are_400(body: bytes, message: str) -> None:
    code, _, raw = Api().request(body, content_type=PROTOBUF)
    assert (code, json.loads(raw)["message"]) == (400, message)


def test_other_body_types_are_415() -> None:
    code, _, raw = Api().request(b"x", content_type="text/plain")
    assert code == 415
    assert json.loads(raw)["message"] == (
        "the body of the request was in an unknown format - accepted media types include: "
        "application/json, application/yaml, application/vnd.kubernetes.protobuf"
    )


def test_metadata_must_match_the_path() -> None:
    api = Api()
    code, _, raw = api.request({"metadata": {"namespace": "other"}})
    assert (code, raw) == (
        400,
        status(
            400,
            "BadRequest",
            "the namespace of the provided object does not match the namespace sent on the request",
            None,
        ),
    )
    code, _, raw = api.request({"metadata": {"name": "other"}})
    assert code == 422
    assert json.loads(raw)["message"] == (
        'TokenRequest.authentication.k8s.io "builder" is invalid: metadata.name: Invalid '
        'value: "other": must match the service account name if specified'
    )


def test_uid_must_match_the_service_account() -> None:
    code, _, raw = Api().request({"metadata": {"uid": "old"}})
    assert (code, raw) == (
        409,
        status(
            409,
            "Conflict",
            'Operation cannot be fulfilled on TokenRequest.authentication.k8s.io "builder": the '
            "UID in the token request (old) does not match the UID of the service account "
            "(sa-uid)",
            {"name": "builder", "group": "authentication.k8s.io", "kind": "TokenRequest"},
        ),
    )
    code, headers, raw = Api(uid_validation=False).request({"metadata": {"uid": "old"}})
    assert code == 201
    assert json.loads(raw)["metadata"]["uid"] == "old"
    assert warnings_of(headers) == [
        '299 - "the UID in the token request (old) does not match the UID of the service '
        "account (sa-uid) but TokenRequestServiceAccountUIDValidation is not enabled. In the "
        'future, this will return a conflict error"'
    ]


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
def test_other_verbs_are_405(method: str) -> None:
    code, _, raw = Api().request({}, method=method)
    assert (code, raw) == (
        405,
        status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
            {},
        ),
    )


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/namespaces/ci/serviceaccounts/builder",
        "/api/v1/namespaces/ci/serviceaccounts/builder/token/x",
        "/api/v1/namespaces/ci/pods/builder/token",
        "/api/v1/namespaces//serviceaccounts/builder/token",
    ],
)
def test_other_paths_stay_404(path: str) -> None:
    code, _, raw = Api().request({}, path=path)
    assert (code, raw) == (
        404,
        status(404, "NotFound", "the server could not find the requested resource", {}),
    )


# --- authorization -------------------------------------------------------------------------------


def test_request_info_of_the_token_path() -> None:
    info = parse_request_info("POST", PATH)
    assert (info.verb, info.api_group, info.namespace, info.resource, info.subresource) == (
        "create",
        "",
        "ci",
        "serviceaccounts",
        "token",
    )
    assert info.name == "builder" and info.resource_request


def test_authorization_attributes_and_403() -> None:
    allow = Recorder()
    assert Api(authorizer=allow).request({})[0] == 201
    (attributes,) = allow.seen
    assert (
        attributes.verb,
        attributes.api_group,
        attributes.api_version,
        attributes.namespace,
        attributes.resource,
        attributes.subresource,
        attributes.name,
    ) == ("create", "", "v1", "ci", "serviceaccounts", "token", "builder")
    code, _, raw = Api(authorizer=Recorder(DENY)).request({})
    assert (code, raw) == (
        403,
        status(
            403,
            "Forbidden",
            'serviceaccounts "builder" is forbidden: User "bob" cannot create resource '
            '"serviceaccounts/token" in API group "" in the namespace "ci"',
            {"name": "builder", "kind": "serviceaccounts"},
        ),
    )


# --- when it is served ---------------------------------------------------------------------------


def _config(tmp_path: Path, **values: Any) -> ServerConfig:
    return ServerConfig(values={"store-prefix": "/registry", **values})


def test_served_only_with_a_signing_key_and_an_issuer(tmp_path: Path) -> None:
    key = tmp_path / "sa.key"
    key.write_bytes(pem_private(KEY))
    store = FakeStore()
    store.put("/registry/serviceaccounts/ci/builder", SA)
    clock = Clock()
    for values, served in (
        ({}, False),
        ({"service-account-issuer": (ISSUER,)}, False),
        ({"service-account-signing-key-file": str(key)}, False),
        ({"service-account-signing-key-file": str(key), "service-account-issuer": ("",)}, False),
        (
            {"service-account-signing-key-file": str(key), "service-account-issuer": (ISSUER,)},
            True,
        ),
    ):
        config = _config(tmp_path, **values)
        router = Router()
        assert token_request_served(config) is served
        assert install_token_request(router, config, store, clock) is served
        assert (router.resolve(PATH) is not None) is served


def test_installed_api_applies_the_flags(tmp_path: Path) -> None:
    key = tmp_path / "sa.key"
    key.write_bytes(pem_private(KEY))
    store = FakeStore()
    store.put("/registry/serviceaccounts/ci/builder", SA)
    put_pod_store = {
        "metadata": {"name": "p", "uid": "p-uid"},
        "spec": {"serviceAccountName": "builder"},
    }
    store.put("/registry/pods/ci/p", put_pod_store)
    clock = Clock()
    clock.advance(NOW)
    config = _config(
        tmp_path,
        **{
            "service-account-signing-key-file": str(key),
            "service-account-issuer": (ISSUER, "https://old"),
            "api-audiences": ("api",),
            "service-account-max-token-expiration": 7200.0,
            "service-account-extend-token-expiration": False,
        },
    )
    router = Router()
    assert install_token_request(router, config, store, clock)
    treq = StubTreq(AppResource(App(router, clock, ServingPolicy())))
    results: list[Any] = []
    body = json.dumps(
        {"spec": {"expirationSeconds": 3607, "boundObjectRef": {"kind": "Pod", "name": "p"}}}
    ).encode()
    d = treq.request("POST", "https://x" + PATH, data=body)
    d.addCallback(lambda r: r.content())
    d.addBoth(results.append)
    out = json.loads(results[0])
    claims = claims_of(out["status"]["token"])
    assert claims["iss"] == ISSUER
    assert claims["aud"] == ["api"]
    assert claims["exp"] - claims["iat"] == 3607  # extension turned off
    body = json.dumps({"spec": {"expirationSeconds": 86400}}).encode()
    results.clear()
    d = treq.request("POST", "https://x" + PATH, data=body)
    d.addCallback(lambda r: r.content())
    d.addBoth(results.append)
    claims = claims_of(json.loads(results[0])["status"]["token"])
    assert claims["exp"] - claims["iat"] == 7200


def test_a_bad_signing_key_stops_start_up(tmp_path: Path) -> None:
    bad = tmp_path / "bad.key"
    bad.write_text("not a key\n")
    config = _config(
        tmp_path,
        **{"service-account-signing-key-file": str(bad), "service-account-issuer": (ISSUER,)},
    )
    with pytest.raises(ValueError, match="--service-account-signing-key-file"):
        install_token_request(Router(), config, FakeStore(), Clock())
