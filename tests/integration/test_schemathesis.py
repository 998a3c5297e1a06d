"""Schemathesis over the official events.k8s.io/v1 OpenAPI document against the real daemon.

What runs (one daemon for the module, embedded store, TLS verified with its own CA):

* ``test_official_document``: every operation of the official document (adjusted as
  :mod:`tests.integration.schemathesis_support` explains: no ``consistentWatchCache``, a
  ``default`` Status response, nullable times, no watch), examples + coverage + fuzzing
  phases, positive and negative generation;
* ``test_enriched_document``: the same with the documented option values, DNS-shaped path
  parameters and example bodies, so generated requests reach validation, storage and the
  three patch types plus apply (see ``enrich_for_fuzzing``);
* fixed cases: a whole create/read/list/patch/apply/replace/delete cycle, and watches, each
  response validated with the same checks (a watch stream line by line).

Checks: ``not_a_server_error`` (except the reason-less 500s kube-apiserver answers by design,
see ``KUBE_UNWRAPPED_500``), ``status_code_conformance`` (kept: the ``default`` Status response
stands for the error codes kube documents in prose), ``content_type_conformance``,
``response_schema_conformance`` and ``response_headers_conformance``.

Bounds: ``max_examples`` per operation and ``derandomize=True`` keep the run deterministic and
at about a minute on two cores (35 to 60 s measured, a few thousand requests); every request
has a 10 s client timeout; watches carry ``timeoutSeconds=1`` so the server closes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis import Case, Response  # noqa: E402
from schemathesis.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.daemon import Daemon  # noqa: E402
from tests.integration.schemathesis_support import (  # noqa: E402
    SEED_NAME,
    SEED_NAMESPACE,
    enrich_for_fuzzing,
    is_kube_unwrapped_500,
    load_reference,
    not_a_server_error_but_kube,
    prepare_document,
    seed_event,
)

GROUP = "/apis/events.k8s.io/v1"
ITEM = GROUP + "/namespaces/{namespace}/events/{name}"
COLLECTION = GROUP + "/namespaces/{namespace}/events"
WATCH_ITEM = GROUP + "/watch/namespaces/{namespace}/events/{name}"
WATCH_COLLECTION = GROUP + "/watch/namespaces/{namespace}/events"
WATCH_ALL = GROUP + "/watch/events"

CHECKS = [
    not_a_server_error_but_kube,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
FUZZ_SETTINGS = settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    # Health checks measure Hypothesis's own generation; a slow daemon reply must not fail
    # the run, and many generated cases are filtered on purpose (e.g. DNS patterns).
    suppress_health_check=list(HealthCheck),
)

# The deprecated /watch/ operations stream until ``timeoutSeconds``: covered by fixed cases.
OFFICIAL = schemathesis.openapi.from_dict(prepare_document(load_reference()))
ENRICHED = schemathesis.openapi.from_dict(enrich_for_fuzzing(load_reference()))
OFFICIAL_NO_WATCH = OFFICIAL.exclude(path_regex="/watch/")
ENRICHED_NO_WATCH = ENRICHED.exclude(path_regex="/watch/")


@pytest.fixture(scope="module")
def st_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    daemon = Daemon(tmp_path_factory.mktemp("schemathesis") / "server", ["--event-ttl=1h"])
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


def call_kwargs(daemon: Daemon, authenticate: bool = True) -> dict[str, Any]:
    """requests options: the daemon's CA, a 10 s timeout and the system:masters client
    certificate the daemon trusts (AlwaysAllow turns anonymous requests off)."""
    kwargs: dict[str, Any] = {
        "base_url": daemon.url,
        "verify": str(daemon.cert_dir / "apiserver.crt"),
        "timeout": 10,
    }
    if authenticate and daemon.client_cert is not None and daemon.client_key is not None:
        kwargs["cert"] = (str(daemon.client_cert), str(daemon.client_key))
    return kwargs


def put_event(daemon: Daemon, event: dict[str, Any]) -> dict[str, Any]:
    meta = event["metadata"]
    status, _, body = daemon.get(
        f"{GROUP}/namespaces/{meta['namespace']}/events/{meta['name']}",
        method="PUT",
        headers={"Content-Type": "application/json"},
        body=json.dumps(event).encode(),
    )
    assert status in (200, 201), body
    stored: dict[str, Any] = json.loads(body)
    return stored


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    """One keep-alive session for the module: a TLS handshake per request (what schemathesis
    does without one) costs more than the request itself."""
    with requests.Session() as shared:
        yield shared


@pytest.fixture
def seeded(st_daemon: Daemon) -> Daemon:
    """The seed event exists again before each operation (a fuzzed DELETE may remove it)."""
    put_event(st_daemon, seed_event())
    return st_daemon


@OFFICIAL_NO_WATCH.parametrize()
@FUZZ_SETTINGS
def test_official_document(case: Case, st_daemon: Daemon, session: requests.Session) -> None:
    case.call_and_validate(checks=CHECKS, session=session, **call_kwargs(st_daemon))


@ENRICHED_NO_WATCH.parametrize()
@FUZZ_SETTINGS
def test_enriched_document(case: Case, seeded: Daemon, session: requests.Session) -> None:
    case.call_and_validate(checks=CHECKS, session=session, **call_kwargs(seeded))


def call_checked(case: Case, daemon: Daemon, expected: int) -> dict[str, Any]:
    response = case.call_and_validate(checks=CHECKS, **call_kwargs(daemon))
    assert response.status_code == expected, response.content
    body: dict[str, Any] = json.loads(response.content)
    return body


def test_fixed_lifecycle(st_daemon: Daemon) -> None:
    """Every success code the document lists, each reply checked like the fuzzed ones."""
    namespace = "lifecycle"
    item = {"namespace": namespace, "name": "e1"}
    event = seed_event(namespace, "e1")
    post = ENRICHED[COLLECTION]["POST"]
    created = call_checked(
        post.Case(path_parameters={"namespace": namespace}, body=event), st_daemon, 201
    )
    assert created["metadata"]["name"] == "e1"
    generated = dict(event, metadata={"generateName": "gen-"})
    made = call_checked(
        post.Case(path_parameters={"namespace": namespace}, body=generated), st_daemon, 201
    )
    assert made["metadata"]["name"].startswith("gen-")
    call_checked(post.Case(path_parameters={"namespace": namespace}, body=event), st_daemon, 409)

    call_checked(ENRICHED[ITEM]["GET"].Case(path_parameters=item), st_daemon, 200)
    listed = call_checked(
        ENRICHED[COLLECTION]["GET"].Case(
            path_parameters={"namespace": namespace}, query={"limit": 1}
        ),
        st_daemon,
        200,
    )
    assert len(listed["items"]) == 1 and listed["metadata"]["continue"]
    call_checked(ENRICHED[GROUP + "/events"]["GET"].Case(), st_daemon, 200)
    call_checked(ENRICHED[GROUP + "/"]["GET"].Case(), st_daemon, 200)

    patch = ENRICHED[ITEM]["PATCH"]
    patches: list[tuple[str, Any]] = [
        ("application/merge-patch+json", {"metadata": {"labels": {"m": "1"}}}),
        ("application/strategic-merge-patch+json", {"metadata": {"labels": {"s": "1"}}}),
        (
            "application/json-patch+json",
            [{"op": "add", "path": "/metadata/labels/j", "value": "1"}],
        ),
    ]
    for media_type, body in patches:
        call_checked(
            patch.Case(path_parameters=item, body=body, media_type=media_type), st_daemon, 200
        )
    apply = "application/apply-patch+yaml"
    applied = seed_event(namespace, "e1")
    applied["metadata"] = {"name": "e1", "labels": {"a": "1"}}
    call_checked(
        patch.Case(
            path_parameters=item, body=applied, media_type=apply, query={"fieldManager": "fz"}
        ),
        st_daemon,
        200,
    )
    fresh = seed_event(namespace, "applied")
    call_checked(
        patch.Case(
            path_parameters={"namespace": namespace, "name": "applied"},
            body=fresh,
            media_type=apply,
            query={"fieldManager": "fz"},
        ),
        st_daemon,
        201,
    )
    # A merge patch of a missing event is a 404 Status.
    call_checked(
        patch.Case(
            path_parameters={"namespace": namespace, "name": "missing"},
            body={"metadata": {"labels": {"x": "y"}}},
            media_type="application/merge-patch+json",
        ),
        st_daemon,
        404,
    )

    put = ENRICHED[ITEM]["PUT"]
    current = call_checked(ENRICHED[ITEM]["GET"].Case(path_parameters=item), st_daemon, 200)
    current["metadata"]["labels"] = {"replaced": "yes"}
    call_checked(put.Case(path_parameters=item, body=current), st_daemon, 200)
    call_checked(put.Case(path_parameters=item, body=current), st_daemon, 409)  # stale RV
    other = seed_event(namespace, "put-created")
    call_checked(
        put.Case(path_parameters={"namespace": namespace, "name": "put-created"}, body=other),
        st_daemon,
        201,
    )

    deleted = call_checked(ENRICHED[ITEM]["DELETE"].Case(path_parameters=item), st_daemon, 200)
    assert deleted["kind"] == "Status" and deleted["status"] == "Success"
    call_checked(ENRICHED[ITEM]["DELETE"].Case(path_parameters=item), st_daemon, 404)
    removed = call_checked(
        ENRICHED[COLLECTION]["DELETE"].Case(path_parameters={"namespace": namespace}),
        st_daemon,
        200,
    )
    assert removed["kind"] == "EventList" and len(removed["items"]) == 3


def watch_lines(case: Case, daemon: Daemon) -> tuple[Response, list[bytes]]:
    response = case.call(**call_kwargs(daemon))
    assert response.status_code == 200, response.content
    return response, [line for line in response.content.split(b"\n") if line.strip()]


def as_response(template: Response, content: bytes) -> Response:
    """``template`` with ``content`` as its body: one watch line seen as a whole reply."""
    return Response(
        status_code=template.status_code,
        headers=template.headers,
        content=content,
        request=template.request,
        elapsed=template.elapsed,
        verify=template.verify,
    )


def check_watch(case: Case, daemon: Daemon) -> list[dict[str, Any]]:
    """Validate each line of a watch reply as the body of the matching /watch/ operation
    (documented schema WatchEvent), and each event object as the body of a GET (Event)."""
    response, lines = watch_lines(case, daemon)
    watch_path = case.operation.path
    if "/watch/" not in watch_path:
        watch_path = watch_path.replace(GROUP + "/", GROUP + "/watch/")
    if case.path_parameters and "name" in case.path_parameters:
        watch_path = WATCH_ITEM
    watch_op = ENRICHED[watch_path]["GET"].Case(path_parameters=case.path_parameters)
    read_op = ENRICHED[ITEM]["GET"].Case(path_parameters={"namespace": "n", "name": "n"})
    events = []
    for line in lines:
        watch_op.validate_response(as_response(response, line), checks=CHECKS)
        event = json.loads(line)
        events.append(event)
        if event["type"] != "ERROR":
            body = json.dumps(event["object"]).encode()
            read_op.validate_response(as_response(response, body), checks=CHECKS)
    return events


@pytest.mark.parametrize(
    ("path", "params", "query"),
    [
        (WATCH_COLLECTION, {"namespace": "watched"}, {}),
        (WATCH_ITEM, {"namespace": "watched", "name": "w1"}, {}),
        (WATCH_ALL, {}, {"fieldSelector": "metadata.namespace=watched"}),
        (COLLECTION, {"namespace": "watched"}, {"watch": "true"}),
        (GROUP + "/events", {}, {"watch": "1", "labelSelector": "fuzz=yes"}),
    ],
)
def test_fixed_watch(
    st_daemon: Daemon, path: str, params: dict[str, str], query: dict[str, str]
) -> None:
    """Watches end at ``timeoutSeconds``; initial ADDEDs and the initial-events BOOKMARK
    (k8s.io/apiserver ``pkg/storage/cacher``) are each a schema-valid WatchEvent carrying a
    schema-valid Event."""
    put_event(st_daemon, seed_event("watched", "w1"))
    put_event(st_daemon, seed_event("elsewhere", "w1"))
    full_query = {**query, "timeoutSeconds": "1", "allowWatchBookmarks": "true"}
    case = ENRICHED[path]["GET"].Case(path_parameters=params or None, query=full_query)
    events = check_watch(case, st_daemon)
    added = [e for e in events if e["type"] == "ADDED"]
    namespaces = {e["object"]["metadata"]["namespace"] for e in added}
    if path == GROUP + "/events":
        assert {"watched", "elsewhere"} <= namespaces
    else:
        assert namespaces == {"watched"}
    assert events[-1]["type"] == "BOOKMARK"


def test_watch_from_resource_version_sees_changes(st_daemon: Daemon) -> None:
    """A watch from a resourceVersion streams the later MODIFIED and DELETED events."""
    stored = put_event(st_daemon, seed_event("changes", "c1"))
    stored["metadata"]["labels"] = {"changed": "yes"}
    put_event(st_daemon, stored)
    status, _, body = st_daemon.get(f"{GROUP}/namespaces/changes/events/c1", method="DELETE")
    assert status == 200, body
    case = ENRICHED[WATCH_COLLECTION]["GET"].Case(
        path_parameters={"namespace": "changes"},
        query={"timeoutSeconds": 1, "resourceVersion": stored["metadata"]["resourceVersion"]},
    )
    events = check_watch(case, st_daemon)
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED"]


@pytest.mark.parametrize("path", [GROUP + "/", GROUP + "/events", WATCH_ALL])
def test_unauthenticated_is_a_status(st_daemon: Daemon, path: str) -> None:
    """Without a client certificate every operation answers the 401 Status (spec
    auth-audit-tls §1), which conforms to the ``default`` response; watches too."""
    case = OFFICIAL[path]["GET"].Case(query={"timeoutSeconds": 1} if "watch" in path else None)
    response = case.call_and_validate(checks=CHECKS, **call_kwargs(st_daemon, False))
    assert response.status_code == 401, response.content
    assert json.loads(response.content)["reason"] == "Unauthorized"


def test_seed_coordinates_match_examples() -> None:
    """The enriched document's path examples point at the event the fixture seeds."""
    params = ENRICHED.raw_schema["paths"][ITEM]["parameters"]
    examples = {p["name"]: p.get("example") for p in params if p["in"] == "path"}
    assert examples == {"name": SEED_NAME, "namespace": SEED_NAMESPACE}


def status_response(code: int, body: bytes) -> Response:
    request = requests.Request("GET", "https://127.0.0.1/apis/events.k8s.io/v1/").prepare()
    return Response(code, {"content-type": ["application/json"]}, body, request, 0.0, True)


@pytest.mark.parametrize(
    ("code", "body", "allowed"),
    [
        (
            500,
            b'{"kind":"Status","status":"Failure","message":"json: cannot unmarshal","code":500}',
            True,
        ),
        (500, b'{"kind":"Status","message":"boom","reason":"InternalError","code":500}', False),
        (500, b"Internal Server Error", False),
        (503, b'{"kind":"Status","message":"x","code":503}', False),
        (500, b'{"kind":"Status","code":500}', False),
    ],
)
def test_only_reasonless_500_statuses_pass(code: int, body: bytes, allowed: bool) -> None:
    """The not-a-server-error exception is exactly kube's unwrapped decoder error shape."""
    assert is_kube_unwrapped_500(status_response(code, body)) is allowed


def test_prepared_document_adjustments() -> None:
    original = load_reference()
    prepared = prepare_document(original)
    assert "consistentWatchCache" in json.dumps(original)  # the file is left alone
    assert "consistentWatchCache" not in json.dumps(prepared)
    schemas = prepared["components"]["schemas"]
    assert schemas["io.k8s.apimachinery.pkg.apis.meta.v1.Time"]["nullable"] is True
    for path, item in prepared["paths"].items():
        names = {p["name"] for p in item.get("parameters", [])}
        assert ("watch" in names) == ("/watch/" in path), path
        for method, operation in item.items():
            if method != "parameters":
                assert "default" in operation["responses"], (method, path)
