"""The TokenRequest API with the real daemon and a real ``kubectl create token``.

A ServiceAccount is written straight into the embedded store (as JSON) before the daemon
starts: TokenRequest reads any stored format (tests/integration/test_reviews.py creates them
through the API). kubectl, with the admin client certificate, asks for
tokens; the token then authenticates as ``system:serviceaccount:ci:builder`` (RBAC makes the
identity visible in a 403), and its ``exp`` shows the cap of
``--service-account-max-token-expiration``.
"""

from __future__ import annotations

import base64
import http.client
import json
import shutil
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.integration.daemon import Daemon, source_env, write_kubeconfig

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl")
ISSUER = "https://kubernetes.default.svc"
SA_UID = "0b0e7d4c-1b7e-4f0e-9d43-6f3e6a6c5e21"
EVENTS = "/apis/events.k8s.io/v1/namespaces/ci/events"

#: Writes ``{key: object}`` into the embedded store of a stopped daemon, through the store's
#: public API (run in a child process: it needs a reactor of its own).
SEED = """
import json, sys
from twisted.internet import defer, task
from apiserver.storage.sqlite import SqliteStore

async def main(reactor):
    store = SqliteStore(sys.argv[1], reactor)
    await store.start()
    for key, value in json.loads(sys.argv[2]).items():
        await store.create(key.encode(), json.dumps(value).encode())
    await store.stop()

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""


def seed(data_dir: Path, objects: dict[str, Any]) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [sys.executable, "-c", SEED, str(data_dir / "store.db"), json.dumps(objects)],
        env=source_env(),
        check=True,
        timeout=60,
    )


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def start(args: Sequence[str], objects: dict[str, Any]) -> Daemon:
        daemon = Daemon(tmp_path / f"d{len(started)}", args)
        started.append(daemon)
        seed(daemon.data_dir, objects)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.stop()


def signing_key(path: Path) -> Path:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return path


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def claims_of(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


def bearer_get(daemon: Daemon, path: str, token: str) -> tuple[int, dict[str, Any]]:
    """A request with only the token (no client certificate)."""
    ctx = ssl.create_default_context(cafile=str(daemon.cert_dir / "apiserver.crt"))
    ctx.check_hostname = False
    conn = http.client.HTTPSConnection("127.0.0.1", daemon.port, context=ctx, timeout=10)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_create_token(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    key = signing_key(tmp_path / "sa.key")
    daemon = launch(
        [
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={key}",
            f"--service-account-signing-key-file={key}",
            "--service-account-max-token-expiration=2h",
            "--authorization-mode=RBAC",
        ],
        {
            "/registry/serviceaccounts/ci/builder": {
                "kind": "ServiceAccount",
                "apiVersion": "v1",
                "metadata": {"name": "builder", "namespace": "ci", "uid": SA_UID},
            }
        },
    )
    kubeconfig = write_kubeconfig(daemon, tmp_path / "admin.kubeconfig")

    # Longer than the maximum: shortened to it, with the server's warning.
    done = kubectl(kubeconfig, "create", "token", "builder", "-n", "ci", "--duration=3h")
    assert done.returncode == 0, done.stderr
    assert "requested expiration of 10800 seconds shortened to 7200 seconds" in done.stderr
    token = done.stdout.strip()
    claims = claims_of(token)
    assert claims["exp"] - claims["iat"] == 7200
    assert claims["iss"] == ISSUER and claims["aud"] == [ISSUER]
    assert claims["sub"] == "system:serviceaccount:ci:builder"
    assert claims["kubernetes.io"]["serviceaccount"] == {"name": "builder", "uid": SA_UID}

    # Within the maximum: as asked; the whole TokenRequest with -o json.
    done = kubectl(
        kubeconfig, "create", "token", "builder", "-n", "ci", "--duration=30m", "-o", "json"
    )
    assert done.returncode == 0, done.stderr
    request = json.loads(done.stdout)
    assert request["kind"] == "TokenRequest"
    assert request["spec"]["expirationSeconds"] == 1800
    claims = claims_of(request["status"]["token"])
    assert claims["exp"] - claims["iat"] == 1800

    # The token authenticates as the service account: RBAC names it in the 403.
    code, body = bearer_get(daemon, EVENTS, token)
    assert code == 403, body
    assert body["message"] == (
        'events.events.k8s.io is forbidden: User "system:serviceaccount:ci:builder" cannot '
        'list resource "events" in API group "events.k8s.io" in the namespace "ci"'
    )
    # ... and may not mint tokens itself (verb create on serviceaccounts/token).
    code, body = bearer_get(daemon, "/api/v1/namespaces/ci/serviceaccounts/builder/token", token)
    assert code == 403
    assert 'cannot get resource "serviceaccounts/token"' in body["message"]
    # A token that is not signed by the server's key is refused outright.
    forged = token.rsplit(".", 1)[0] + ".AAAA"
    assert bearer_get(daemon, EVENTS, forged)[0] == 401

    # The reference's errors, as kubectl shows them.
    done = kubectl(kubeconfig, "create", "token", "ghost", "-n", "ci")
    assert done.returncode != 0
    assert 'serviceaccounts "ghost" not found' in done.stderr
    done = kubectl(kubeconfig, "create", "token", "builder", "-n", "ci", "--duration=5m")
    assert done.returncode != 0
    assert "may not specify a duration less than 10 minutes" in done.stderr

    # core/v1 events share the /api/v1/namespaces/ prefix with the token subresource.
    done = kubectl(kubeconfig, "get", "--raw", "/api/v1/namespaces/ci/events")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kind"] == "EventList"
    # Discovery lists the subresource (after core/v1 events and serviceaccounts, by name).
    done = kubectl(kubeconfig, "get", "--raw", "/api/v1")
    assert done.returncode == 0, done.stderr
    assert [r["name"] for r in json.loads(done.stdout)["resources"]] == [
        "events",
        "serviceaccounts",
        "serviceaccounts/token",
    ]
