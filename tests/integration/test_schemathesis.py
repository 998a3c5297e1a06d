"""Schemathesis over the official events.k8s.io/v1 OpenAPI document against the real daemon."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

schemathesis = pytest.importorskip("schemathesis")

from hypothesis import HealthCheck, settings  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.integration.daemon import Daemon  # noqa: E402
from tests.integration.schemathesis_support import (  # noqa: E402
    load_reference,
    not_a_server_error_but_kube,
    prepare_document,
)

CHECKS = [
    not_a_server_error_but_kube,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]


@pytest.fixture(scope="module")
def st_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    daemon = Daemon(tmp_path_factory.mktemp("schemathesis") / "server", ["--event-ttl=1h"])
    try:
        daemon.start()
        yield daemon
    finally:
        daemon.stop()


SCHEMA = schemathesis.openapi.from_dict(prepare_document(load_reference())).exclude(
    path_regex="/watch/"
)


@SCHEMA.parametrize()
@settings(
    max_examples=20,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
def test_api(case, st_daemon: Daemon) -> None:  # type: ignore[no-untyped-def]
    case.call_and_validate(
        base_url=st_daemon.url,
        checks=CHECKS,
        verify=str(st_daemon.cert_dir / "apiserver.crt"),
        timeout=10,
    )
