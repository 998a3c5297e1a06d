"""Admission in the REST layer: called after decoding, before storage, with the chain's user."""

from __future__ import annotations

import json
from typing import Any

from tests.event_fixtures import event_dict
from tests.unit.fake_request import FakeRequest
from tests.unit.unit_helpers import FakeStore, result_of
from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from apiserver.admission import (
    CREATE,
    DELETE,
    UPDATE,
    AlwaysAdmit,
    Attributes,
    Operation,
    run_mutating,
    run_validating,
)
from apiserver.api.events.rest import GR, EventsAPI
from apiserver.api.tokenrequest.rest import ExpirationPolicy, TokenRequestAPI, TokenREST
from apiserver.apimachinery import errors
from apiserver.auth.authn.serviceaccount import TokenSigner
from apiserver.auth.interface import UserInfo
from apiserver.http.app import RequestInfo, parse_query
from apiserver.http.response import Response
from apiserver.registry.store import Registry
from apiserver.storage.memory import MemoryStore

BOB = UserInfo("bob", groups=("system:authenticated",))
PATH = "/apis/events.k8s.io/v1/namespaces/ns/events"


def stored_values(store: MemoryStore) -> list[bytes]:
    """Every value the store holds now."""
    page = result_of(store.range(b"/"))
    return [kv.value for kv in page.kvs]


class Recording:
    """Labels the object when mutating; records what validation saw; may refuse."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[tuple[str, Operation, str, str | None, bool]] = []
        self.seen: list[Attributes] = []

    def handles(self, operation: Operation) -> bool:
        return True

    def admit(self, attributes: Attributes) -> None:
        self.seen.append(attributes)
        assert attributes.obj is not None
        meta = attributes.obj["metadata"]
        meta.setdefault("labels", {})["admitted"] = "yes"
        user = attributes.user.name if attributes.user else None
        self.calls.append(("admit", attributes.operation, attributes.name, user, "uid" in meta))

    def validate(self, attributes: Attributes) -> Deferred[None]:
        seen = attributes.obj if attributes.obj is not None else attributes.old_obj
        assert seen is not None
        meta = seen["metadata"]
        user = attributes.user.name if attributes.user else None
        self.calls.append(("validate", attributes.operation, attributes.name, user, "uid" in meta))
        if self.refuse:
            return defer.fail(errors.StatusError(403, "Forbidden", "denied by admission"))
        return defer.succeed(None)


def event(name: str, labels: dict[str, str] | None = None) -> bytes:
    return json.dumps(event_dict(name, "ns", labels=labels or {})).encode()


def call(api: EventsAPI, method: str, path: str, body: bytes, content_type: bytes) -> Response:
    uri = path.encode()
    request = FakeRequest(method.encode(), uri, {b"content-type": [content_type]}, body)
    info = RequestInfo(method, path, parse_query(uri), False, True)
    info.user = BOB
    answer = result_of(api.handle(request, info))
    assert isinstance(answer, Response)
    return answer


def make(admission: Any) -> tuple[EventsAPI, MemoryStore]:
    clock = Clock()
    kv = MemoryStore(clock)
    result_of(kv.start())
    registry = Registry(kv, group_resource=GR)
    return EventsAPI(registry, clock, admission=admission), kv


def test_create_mutates_before_the_server_fields_and_validates_just_before_storage() -> None:
    admission = Recording()
    api, kv = make(admission)
    answer = call(api, "POST", PATH, event("e1"), b"application/json")
    assert answer.code == 201, answer.body
    assert json.loads(answer.body)["metadata"]["labels"] == {"admitted": "yes"}
    assert admission.calls == [
        ("admit", CREATE, "e1", "bob", False),
        ("validate", CREATE, "e1", "bob", True),
    ]
    stored = json.loads(stored_values(kv)[0])
    assert stored["metadata"]["labels"] == {"admitted": "yes"}


def test_a_validating_refusal_stores_nothing() -> None:
    api, kv = make(Recording(refuse=True))
    answer = call(api, "POST", PATH, event("e1"), b"application/json")
    assert answer.code == 403 and json.loads(answer.body)["message"] == "denied by admission"
    assert stored_values(kv) == []


def test_update_and_patch_are_update_operations_with_the_old_object() -> None:
    admission = Recording()
    api, _ = make(admission)
    assert call(api, "POST", PATH, event("e1"), b"application/json").code == 201
    admission.calls.clear()
    admission.seen.clear()
    answer = call(api, "PUT", PATH + "/e1", event("e1", {"k": "v"}), b"application/json")
    assert answer.code == 200, answer.body
    assert json.loads(answer.body)["metadata"]["labels"] == {"k": "v", "admitted": "yes"}
    patch = json.dumps({"metadata": {"labels": {"k": "w"}}}).encode()
    answer = call(api, "PATCH", PATH + "/e1", patch, b"application/merge-patch+json")
    assert answer.code == 200, answer.body
    assert [(c[0], c[1]) for c in admission.calls] == [
        ("admit", UPDATE),
        ("validate", UPDATE),
        ("admit", UPDATE),
        ("validate", UPDATE),
    ]
    old = admission.seen[0].old_obj
    assert old is not None and old["metadata"]["labels"] == {"admitted": "yes"}


def test_delete_is_validated_with_the_stored_object_and_a_refusal_deletes_nothing() -> None:
    allowed = Recording()
    api, kv = make(allowed)
    assert call(api, "POST", PATH, event("e1"), b"application/json").code == 201
    allowed.calls.clear()
    allowed.seen.clear()
    assert call(api, "DELETE", PATH + "/e1", b"", b"application/json").code == 200
    # No mutating call on DELETE; validating sees no new object, the stored one as old.
    assert allowed.calls == [("validate", DELETE, "e1", "bob", True)]
    assert allowed.seen == [] and stored_values(kv) == []

    refused = Recording()
    api, kv = make(refused)
    assert call(api, "POST", PATH, event("e2"), b"application/json").code == 201
    refused.refuse = True
    answer = call(api, "DELETE", PATH + "/e2", b"", b"application/json")
    assert answer.code == 403 and json.loads(answer.body)["message"] == "denied by admission"
    assert len(stored_values(kv)) == 1
    answer = call(api, "DELETE", PATH, b"", b"application/json")  # deletecollection
    assert answer.code == 403
    assert len(stored_values(kv)) == 1


def test_delete_validation_sees_no_new_object() -> None:
    seen: list[Attributes] = []

    class Spy(Recording):
        def validate(self, attributes: Attributes) -> Deferred[None]:
            seen.append(attributes)
            return super().validate(attributes)

    api, _ = make(Spy())
    assert call(api, "POST", PATH, event("e3"), b"application/json").code == 201
    seen.clear()
    assert call(api, "DELETE", PATH + "/e3", b"", b"application/json").code == 200
    assert [(a.operation, a.obj is None, a.old_obj is not None) for a in seen] == [
        (DELETE, True, True)
    ]


def test_put_of_a_missing_object_is_a_create() -> None:
    admission = Recording()
    api, _ = make(admission)
    answer = call(api, "PUT", PATH + "/e2", event("e2"), b"application/json")
    assert answer.code == 201, answer.body
    assert admission.calls == [
        ("admit", CREATE, "e2", "bob", False),
        ("validate", CREATE, "e2", "bob", True),
    ]


def test_no_admission_and_always_admit() -> None:
    api, _ = make(None)
    assert call(api, "POST", PATH, event("e1"), b"application/json").code == 201
    api, _ = make(AlwaysAdmit())
    assert call(api, "POST", PATH, event("e1"), b"application/json").code == 201
    attributes = Attributes(CREATE, "", "v1", "pods", "Pod", "ns", "p", {})
    assert result_of(Deferred.fromCoroutine(run_mutating(AlwaysAdmit(), attributes))) is None
    assert result_of(Deferred.fromCoroutine(run_validating(AlwaysAdmit(), attributes))) is None


def token_api(admission: Any) -> tuple[TokenRequestAPI, FakeStore]:
    from tests.unit.api_tokenrequest.test_tokenrequest_api import ISSUER, KEY, NOW, SA

    store = FakeStore()
    store.put("/registry/serviceaccounts/ci/builder", SA)
    clock = Clock()
    clock.advance(NOW)
    rest = TokenREST(
        TokenSigner(KEY, ISSUER), store, "/registry", clock, (ISSUER,), ExpirationPolicy()
    )
    return TokenRequestAPI(rest, admission), store


def post_token(api: TokenRequestAPI) -> Response:
    path = "/api/v1/namespaces/ci/serviceaccounts/builder/token"
    body = json.dumps({"spec": {"audiences": [ISSUER_AUDIENCE]}}).encode()
    request = FakeRequest(b"POST", path.encode(), {b"content-type": [b"application/json"]}, body)
    info = RequestInfo("POST", path, {}, False, True)
    info.user = BOB
    answer = result_of(api.handle(request, info))
    assert isinstance(answer, Response)
    return answer


ISSUER_AUDIENCE = "https://kubernetes.default.svc"


class TokenRecording(Recording):
    def admit(self, attributes: Attributes) -> None:
        self.seen.append(attributes)
        self.calls.append(("admit", attributes.operation, attributes.name, "bob", False))


def test_token_request_is_a_create_on_the_token_subresource() -> None:
    admission = TokenRecording()
    api, _ = token_api(admission)
    answer = post_token(api)
    assert answer.code == 201, answer.body
    attributes = admission.seen[0]
    assert (attributes.resource, attributes.subresource, attributes.operation) == (
        "serviceaccounts",
        "token",
        CREATE,
    )
    assert (attributes.namespace, attributes.name, attributes.user) == ("ci", "builder", BOB)
    assert [c[0] for c in admission.calls] == ["admit", "validate"]


def test_token_request_refused_by_admission_issues_no_token() -> None:
    api, store = token_api(TokenRecording(refuse=True))
    answer = post_token(api)
    assert answer.code == 403
    assert store.gets == []  # refused before the service account was even read
