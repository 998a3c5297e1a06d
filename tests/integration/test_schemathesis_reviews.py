"""Schemathesis over the review APIs and core/v1 ServiceAccounts, from the daemon's own
OpenAPI documents (``/openapi/v3/apis/authentication.k8s.io/v1``,
``/openapi/v3/apis/authorization.k8s.io/v1`` and the ServiceAccount part of
``/openapi/v3/api/v1``).

As for events (:mod:`tests.integration.test_schemathesis_core`): the documents are built by
the functions the daemon uses and checked equal to what it serves, adjusted by
``prepare_document``, and every operation is fuzzed with the same checks (no server error,
status codes, content types, response schemas and headers). The daemon runs with RBAC and
TokenRequest, so TokenReview and the access reviews go through real authenticators and
authorizers. Bounded: a few derandomized examples per operation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis import Case  # noqa: E402

from apiserver.openapi.documents import api_v1_document, review_documents  # noqa: E402
from tests.integration.daemon import Daemon  # noqa: E402
from tests.integration.schemathesis_support import prepare_document  # noqa: E402
from tests.integration.test_schemathesis import CHECKS, call_kwargs  # noqa: E402
from tests.integration.test_tokenrequest import signing_key  # noqa: E402

REVIEW_SETTINGS = settings(
    max_examples=8,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
DOCUMENTS = review_documents()
AUTHENTICATION = schemathesis.openapi.from_dict(
    prepare_document(DOCUMENTS["apis/authentication.k8s.io/v1"])
).exclude(path_regex="/v1/$")
AUTHORIZATION = schemathesis.openapi.from_dict(
    prepare_document(DOCUMENTS["apis/authorization.k8s.io/v1"])
).exclude(path_regex="/v1/$")
CORE_V1 = api_v1_document(events=True, service_accounts=True, token_request=True)
SERVICE_ACCOUNTS = (
    schemathesis.openapi.from_dict(prepare_document(CORE_V1))
    .exclude(path_regex="/watch/")
    .include(path_regex="serviceaccounts")
)


@pytest.fixture(scope="module")
def review_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    workdir: Path = tmp_path_factory.mktemp("schemathesis-reviews")
    key = signing_key(workdir / "sa.key")
    daemon = Daemon(
        workdir / "server",
        [
            "--authorization-mode=RBAC",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={key}",
            f"--service-account-signing-key-file={key}",
        ],
    )
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as shared:
        yield shared


def _served(daemon: Daemon, key: str) -> dict[str, Any]:
    status, _, body = daemon.get(f"/openapi/v3/{key}", headers={"Accept": "application/json"})
    assert status == 200, body
    document: dict[str, Any] = json.loads(body)
    return document


def test_served_documents_are_the_fuzzed_ones(review_daemon: Daemon) -> None:
    for key, document in DOCUMENTS.items():
        assert _served(review_daemon, key) == json.loads(json.dumps(document))
    assert _served(review_daemon, "api/v1") == json.loads(json.dumps(CORE_V1))


@AUTHENTICATION.parametrize()
@REVIEW_SETTINGS
def test_authentication_operations(
    case: Case, review_daemon: Daemon, session: requests.Session
) -> None:
    case.call_and_validate(checks=CHECKS, session=session, **call_kwargs(review_daemon))


@AUTHORIZATION.parametrize()
@REVIEW_SETTINGS
def test_authorization_operations(
    case: Case, review_daemon: Daemon, session: requests.Session
) -> None:
    case.call_and_validate(checks=CHECKS, session=session, **call_kwargs(review_daemon))


@SERVICE_ACCOUNTS.parametrize()
@REVIEW_SETTINGS
def test_service_account_operations(
    case: Case, review_daemon: Daemon, session: requests.Session
) -> None:
    case.call_and_validate(checks=CHECKS, session=session, **call_kwargs(review_daemon))
