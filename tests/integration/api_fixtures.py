"""Module-scoped daemons for the Event API tests, on both storage backends.

The etcd variant starts Debian's etcd-server on free loopback ports (the same launcher the
storage tests use) and points the daemon at it with ``--store-servers``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.event_fixtures import event_dict
from tests.integration.daemon import Daemon, write_kubeconfig
from tests.storage.etcdserver import EtcdServer

BACKENDS = ["sqlite", "etcd3"]


def event_body(name: str, namespace: str = "default", note: str = "n") -> bytes:
    return json.dumps(event_dict(name, namespace, note=note)).encode()


class ApiServer:
    """A running daemon plus what clients need to reach it."""

    def __init__(
        self, daemon: Daemon, kubeconfig: Path, backend: str, etcd_url: str | None = None
    ) -> None:
        self.daemon = daemon
        self.kubeconfig = kubeconfig
        self.backend = backend
        #: The etcd the daemon stores in (etcd3 backend), for tests that read or write it.
        self.etcd_url = etcd_url

    def python_client(self):  # type: ignore[no-untyped-def]
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.daemon.url
        configuration.ssl_ca_cert = str(self.daemon.cert_dir / "apiserver.crt")
        configuration.cert_file = str(self.daemon.workdir / "admin.crt")
        configuration.key_file = str(self.daemon.workdir / "admin.key")
        return client.ApiClient(configuration)


@pytest.fixture(scope="module", params=BACKENDS)
def api_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ApiServer]:
    backend = request.param
    workdir = tmp_path_factory.mktemp(f"api-{backend}")
    args: list[str] = ["--event-ttl=1h"]
    etcd: EtcdServer | None = None
    if backend == "etcd3":
        if shutil.which("etcd") is None:
            pytest.skip("etcd (Debian etcd-server) is not installed")
        etcd = EtcdServer(str(workdir / "etcd"))
        etcd.start()
        args.append(f"--store-servers={etcd.client_url}")
    daemon = Daemon(workdir / "server", args)
    try:
        daemon.start()
        kubeconfig = write_kubeconfig(daemon, workdir / "kubeconfig")
        yield ApiServer(daemon, kubeconfig, backend, etcd.client_url if etcd else None)
    finally:
        daemon.stop()
        if etcd is not None:
            etcd.stop()
