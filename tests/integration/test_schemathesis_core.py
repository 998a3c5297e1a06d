"""Schemathesis over the core/v1 Event operations of the daemon's own ``/openapi/v3/api/v1``.

The document is the one the daemon serves (what ``kubectl explain`` and generated clients
read): built at collection time by the same function the daemon uses, and checked equal to
the daemon's answer by ``test_served_document_is_the_fuzzed_one``. It is adjusted as
:func:`tests.integration.schemathesis_support.prepare_document` explains (a ``default``
Status response, nullable times, no watch), and every events operation is fuzzed with the
same checks as the events.k8s.io/v1 run: no server error, status codes, content types,
response schemas and headers. Bounded (a few examples per operation, derandomized) so the
module runs in well under a minute.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis import Case  # noqa: E402

from apiserver.openapi.documents import api_v1_document  # noqa: E402
from tests.integration.daemon import Daemon  # noqa: E402
from tests.integration.schemathesis_support import prepare_document  # noqa: E402
from tests.integration.test_schemathesis import CHECKS, call_kwargs  # noqa: E402

CORE_SETTINGS = settings(
    max_examples=6,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def core_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    daemon = Daemon(tmp_path_factory.mktemp("schemathesis-core") / "server", ["--event-ttl=1h"])
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def served_document(core_daemon: Daemon) -> dict[str, Any]:
    status, _, body = core_daemon.get("/openapi/v3/api/v1", headers={"Accept": "application/json"})
    assert status == 200
    document: dict[str, Any] = json.loads(body)
    return document


OWN_DOCUMENT = api_v1_document(events=True, service_accounts=True)
CORE = (
    schemathesis.openapi.from_dict(prepare_document(OWN_DOCUMENT))
    .exclude(path_regex="/watch/")
    .include(path_regex="events")
)


@pytest.fixture(scope="module")
def session() -> Iterator[requests.Session]:
    with requests.Session() as shared:
        yield shared


def test_served_document_is_the_fuzzed_one(served_document: dict[str, Any]) -> None:
    assert served_document == json.loads(json.dumps(OWN_DOCUMENT))
    paths = served_document["paths"]
    assert set(paths["/api/v1/namespaces/{namespace}/events/{name}"]) >= {
        "get",
        "put",
        "patch",
        "delete",
    }
    assert set(paths["/api/v1/namespaces/{namespace}/events"]) >= {"get", "post", "delete"}
    assert "get" in paths["/api/v1/events"] and "/api/v1/watch/events" in paths
    post = paths["/api/v1/namespaces/{namespace}/events"]["post"]
    assert post["x-kubernetes-group-version-kind"] == {
        "group": "",
        "kind": "Event",
        "version": "v1",
    }


@CORE.parametrize()
@CORE_SETTINGS
def test_core_event_operations(case: Case, core_daemon: Daemon, session: requests.Session) -> None:
    case.call_and_validate(checks=CHECKS, session=session, **call_kwargs(core_daemon))
