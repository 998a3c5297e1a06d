"""Authorization and impersonation against the real daemon over TLS.

Client certificates are signed by ``<workdir>/client-ca.crt``, which the daemon trusts with
``--client-ca-file``; anonymous requests present none. The authorization webhook is a small
HTTPS server run by the test on 127.0.0.1.
"""

from __future__ import annotations

import http.client
import json
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from apiserver.tls.clientcert import ensure_client_ca, issue_client_cert
from apiserver.tls.selfsigned import ensure_self_signed
from tests.integration.daemon import Daemon

pytestmark = pytest.mark.integration

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
Cert = tuple[str, str] | None


class Client:
    """HTTPS to one daemon, with or without a client certificate."""

    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon
        self.ca_cert, self.ca_key = ensure_client_ca(str(daemon.workdir))

    def cert(self, user: str, groups: Sequence[str] = ()) -> tuple[str, str]:
        directory = self.daemon.workdir / "clients"
        directory.mkdir(exist_ok=True)
        return issue_client_cert(self.ca_cert, self.ca_key, str(directory), user, groups)

    def request(
        self,
        path: str,
        cert: Cert = None,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        ctx = ssl.create_default_context(cafile=str(self.daemon.cert_dir / "apiserver.crt"))
        ctx.check_hostname = False
        if cert is not None:
            ctx.load_cert_chain(*cert)
        conn = http.client.HTTPSConnection("127.0.0.1", self.daemon.port, context=ctx, timeout=10)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def wait_ready(self, cert: Cert, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            proc = self.daemon.proc
            assert proc is not None
            if proc.poll() is not None:
                raise AssertionError(f"daemon exited:\n{self.daemon.log()}")
            if (self.daemon.cert_dir / "apiserver.crt").exists():
                try:
                    status, _, body = self.request("/readyz", cert)
                    if status == 200:
                        return
                    last = (status, body)
                except (OSError, ssl.SSLError, http.client.HTTPException) as error:
                    last = error
            time.sleep(0.1)
        raise AssertionError(f"not ready ({last!r}):\n{self.daemon.log()}")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., tuple[Daemon, Client]]]:
    started: list[Daemon] = []

    def start(args: Sequence[str] = (), ready_as: str | None = "admin") -> tuple[Daemon, Client]:
        workdir = tmp_path / f"d{len(started)}"
        workdir.mkdir()
        ca_cert, _ = ensure_client_ca(str(workdir))
        daemon = Daemon(workdir, [f"--client-ca-file={ca_cert}", *args])
        started.append(daemon)
        client = Client(daemon)
        daemon.start(wait=False)
        if ready_as is not None:
            cert = client.cert(ready_as, ["system:masters"]) if ready_as != "anonymous" else None
            client.wait_ready(cert)
        return daemon, client

    yield start
    for daemon in started:
        daemon.stop()


def status_of(body: bytes) -> dict[str, Any]:
    value = json.loads(body)
    assert isinstance(value, dict)
    return value


def test_rbac_bootstrap_policy(launch: Callable[..., tuple[Daemon, Client]]) -> None:
    _, client = launch(["--authorization-mode=RBAC"], ready_as="anonymous")
    for path in ("/readyz", "/livez", "/healthz", "/version"):
        assert client.request(path)[0] == 200, path
    code, headers, body = client.request("/readyz/ping")
    assert code == 403
    assert body == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
        b'"forbidden: User \\"system:anonymous\\" cannot get path \\"/readyz/ping\\"",'
        b'"reason":"Forbidden","details":{},"code":403}\n'
    )
    assert headers["content-type"] == "application/json"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-cache, private"
    assert headers.get("audit-id")
    code, _, body = client.request(EVENTS)
    assert code == 403
    assert status_of(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'events.events.k8s.io is forbidden: User "system:anonymous" cannot list '
        'resource "events" in API group "events.k8s.io" in the namespace "default"',
        "reason": "Forbidden",
        "details": {"group": "events.k8s.io", "kind": "events"},
        "code": 403,
    }
    assert client.request("/apis")[0] == 403  # discovery is for authenticated users

    admin = client.cert("admin", ["system:masters"])
    assert client.request(EVENTS, admin)[0] == 200
    assert client.request("/readyz/ping", admin)[0] == 200
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "test/controller",
        "reportingInstance": "test-1",
        "action": "Test",
        "reason": "Testing",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "type": "Normal",
    }
    code, _, body = client.request(
        EVENTS,
        admin,
        "POST",
        {"Content-Type": "application/json"},
        json.dumps(event).encode(),
    )
    assert code == 201, body

    bob = client.cert("bob", ["devs"])
    assert client.request("/apis", bob)[0] == 200
    code, _, body = client.request(EVENTS + "/e1", bob)
    assert code == 403
    assert status_of(body)["message"] == (
        'events.events.k8s.io "e1" is forbidden: User "bob" cannot get resource "events" in '
        'API group "events.k8s.io" in the namespace "default"'
    )
    prom = client.cert("prom", ["system:monitoring"])
    assert client.request("/readyz/ping", prom)[0] == 200

    # Impersonation: masters may, bob may not.
    code, _, body = client.request(EVENTS, admin, headers={"Impersonate-User": "bob"})
    assert code == 403
    assert 'User "bob" cannot list resource "events"' in status_of(body)["message"]
    code, _, _ = client.request(
        EVENTS, admin, headers={"Impersonate-User": "ops", "Impersonate-Group": "system:masters"}
    )
    assert code == 200
    code, _, body = client.request(EVENTS, bob, headers={"Impersonate-User": "alice"})
    assert code == 403
    assert status_of(body)["message"] == (
        'users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API '
        'group "" at the cluster scope'
    )
    code, _, body = client.request(EVENTS, admin, headers={"Impersonate-Group": "devs"})
    assert code == 400
    assert status_of(body)["message"] == (
        "requested [{Group  devs    }] without impersonating a user"
    )


def test_always_deny(launch: Callable[..., tuple[Daemon, Client]]) -> None:
    _, client = launch(["--authorization-mode=AlwaysDeny"])
    code, _, body = client.request("/healthz")
    assert code == 403
    assert status_of(body)["message"] == (
        'forbidden: User "system:anonymous" cannot get path "/healthz": Everything is forbidden.'
    )
    user = client.cert("carol", ["devs"])
    code, _, body = client.request(EVENTS, user)
    assert code == 403
    assert status_of(body)["message"].endswith(": Everything is forbidden.")
    assert client.request(EVENTS, client.cert("admin", ["system:masters"]))[0] == 200


def test_abac_policy_file(tmp_path: Path, launch: Callable[..., tuple[Daemon, Client]]) -> None:
    policy = tmp_path / "abac.jsonl"
    lines = [
        {
            "user": "alice",
            "readonly": True,
            "apiGroup": "*",
            "resource": "events",
            "namespace": "*",
        },
        {"group": "system:unauthenticated", "readonly": True, "nonResourcePath": "/readyz"},
    ]
    policy.write_text(
        "# test policy\n"
        + "\n".join(
            json.dumps(
                {
                    "apiVersion": "abac.authorization.kubernetes.io/v1beta1",
                    "kind": "Policy",
                    "spec": spec,
                }
            )
            for spec in lines
        )
        + "\n"
    )
    _, client = launch(
        ["--authorization-mode=ABAC", f"--authorization-policy-file={policy}"],
        ready_as="anonymous",
    )
    assert client.request("/healthz")[0] == 403
    alice = client.cert("alice")
    assert client.request(EVENTS, alice)[0] == 200
    code, _, body = client.request(
        EVENTS, alice, "POST", {"Content-Type": "application/json"}, b"{}"
    )
    assert code == 403
    assert status_of(body)["message"] == (
        'events.events.k8s.io is forbidden: User "alice" cannot create resource "events" in '
        'API group "events.k8s.io" in the namespace "default": No policy matched.'
    )


def test_bad_abac_file_stops_start_up(
    tmp_path: Path, launch: Callable[..., tuple[Daemon, Client]]
) -> None:
    policy = tmp_path / "broken.jsonl"
    policy.write_text('{"user": "alice"}\n{not json\n')
    daemon, _ = launch(
        ["--authorization-mode=ABAC", f"--authorization-policy-file={policy}"], ready_as=None
    )
    assert daemon.wait_exit(30) != 0
    log = daemon.log()
    assert f"error reading policy file {policy}, line 2" in log, log


# --- webhook -------------------------------------------------------------------------------


class WebhookServer:
    """An HTTPS SubjectAccessReview endpoint: allows ``alice``, denies everyone else."""

    def __init__(self, directory: Path) -> None:
        cert, key = ensure_self_signed(str(directory), "127.0.0.1", "127.0.0.1")
        self.ca_file = cert
        self.reviews: list[dict[str, Any]] = []
        reviews = self.reviews

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                review = json.loads(self.rfile.read(length))
                reviews.append(review)
                user = review["spec"].get("user")
                if user == "alice":
                    answer = {"allowed": True, "reason": "alice is fine"}
                else:
                    answer = {"allowed": False, "denied": True, "reason": "webhook says no"}
                data = json.dumps(
                    {"apiVersion": review["apiVersion"], "kind": review["kind"], "status": answer}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}/authorize"

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: hook
  cluster: {{server: "{self.url}", certificate-authority: {self.ca_file}}}
users:
- name: apiserver
  user: {{token: secret-token}}
contexts:
- name: hook
  context: {{cluster: hook, user: apiserver}}
current-context: hook
"""
        )
        return path

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook(tmp_path: Path) -> Iterator[WebhookServer]:
    directory = tmp_path / "webhook"
    directory.mkdir()
    server = WebhookServer(directory)
    yield server
    server.stop()


def test_webhook_authorizer(
    tmp_path: Path, webhook: WebhookServer, launch: Callable[..., tuple[Daemon, Client]]
) -> None:
    kubeconfig = webhook.kubeconfig(tmp_path / "hook.kubeconfig")
    _, client = launch(
        [
            "--authorization-mode=Webhook",
            f"--authorization-webhook-config-file={kubeconfig}",
            "--authorization-webhook-version=v1",
            "--authorization-webhook-cache-authorized-ttl=5m",
            "--authorization-webhook-cache-unauthorized-ttl=0s",
        ]
    )
    webhook.reviews.clear()  # the readiness probes were made as system:masters: none
    alice = client.cert("alice", ["devs"])
    assert client.request(EVENTS, alice)[0] == 200
    assert client.request(EVENTS, alice)[0] == 200  # cached for 5m
    assert len(webhook.reviews) == 1
    review = webhook.reviews[0]
    assert review["apiVersion"] == "authorization.k8s.io/v1"
    assert review["spec"]["resourceAttributes"] == {
        "namespace": "default",
        "verb": "list",
        "group": "events.k8s.io",
        "version": "v1",
        "resource": "events",
    }
    assert review["spec"]["user"] == "alice"
    assert review["spec"]["groups"] == ["devs", "system:authenticated"]

    bob = client.cert("bob")
    for _ in range(2):
        code, _, body = client.request("/healthz", bob)
        assert code == 403
        assert status_of(body)["message"] == (
            'forbidden: User "bob" cannot get path "/healthz": webhook says no'
        )
    assert len(webhook.reviews) == 3  # an unauthorized TTL of 0s caches nothing
    assert webhook.reviews[-1]["spec"]["nonResourceAttributes"] == {
        "path": "/healthz",
        "verb": "get",
    }


def test_authorization_config_with_match_conditions(
    tmp_path: Path, webhook: WebhookServer, launch: Callable[..., tuple[Daemon, Client]]
) -> None:
    kubeconfig = webhook.kubeconfig(tmp_path / "hook.kubeconfig")
    config = tmp_path / "authz.yaml"
    config.write_text(
        f"""apiVersion: apiserver.config.k8s.io/v1
kind: AuthorizationConfiguration
authorizers:
- type: Webhook
  name: events-hook
  webhook:
    timeout: 5s
    subjectAccessReviewVersion: v1beta1
    matchConditionSubjectAccessReviewVersion: v1
    failurePolicy: Deny
    connectionInfo: {{type: KubeConfigFile, kubeConfigFile: {kubeconfig}}}
    matchConditions:
    - expression: has(request.resourceAttributes)
    - expression: request.resourceAttributes.resource == 'events'
- type: RBAC
  name: rbac
"""
    )
    _, client = launch([f"--authorization-config={config}"], ready_as="anonymous")
    webhook.reviews.clear()
    assert client.request("/readyz")[0] == 200  # non-resource: webhook skipped, RBAC allows
    assert webhook.reviews == []
    alice = client.cert("alice")
    assert client.request(EVENTS, alice)[0] == 200
    assert webhook.reviews[0]["apiVersion"] == "authorization.k8s.io/v1beta1"
    assert webhook.reviews[0]["spec"]["group"] == ["system:authenticated"]
    code, _, body = client.request(EVENTS, client.cert("bob"))
    assert code == 403
    assert status_of(body)["message"].endswith(": webhook says no")


def test_bad_authorization_config_stops_start_up(
    tmp_path: Path, launch: Callable[..., tuple[Daemon, Client]]
) -> None:
    config = tmp_path / "authz.yaml"
    config.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthorizationConfiguration\n"
        "authorizers:\n- {type: RBAC, name: not-rbac}\n"
    )
    daemon, _ = launch([f"--authorization-config={config}"], ready_as=None)
    assert daemon.wait_exit(30) != 0
    log = daemon.log()
    assert str(config) in log and "expected name rbac for authorizer RBAC" in log, log
