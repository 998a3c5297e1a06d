"""``kubectl auth whoami`` / ``can-i``, ServiceAccounts with ``kubectl create token``, and the
review APIs through the Python client, against the real daemon over TLS.

kubectl sends its reviews as protobuf (client-go's typed clients prefer it); the Python client
sends JSON. Users: ``admin`` (system:masters) and ``bob`` by client certificate, ``carol`` by
``--token-auth-file``, and service accounts by the tokens ``kubectl create token`` mints.
"""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from apiserver.tls.selfsigned import ensure_self_signed
from tests.integration.daemon import Daemon, write_kubeconfig
from tests.integration.test_tokenrequest import bearer_get, signing_key
from tests.storage.etcdserver import EtcdServer

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

ISSUER = "https://kubernetes.default.svc"
CAROL_TOKEN = "carol-secret-token"
EVENTS = "/api/v1/namespaces/default/events"


class Kubectl:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def __call__(self, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            input=stdin,
        )

    def ok(self, *args: str) -> str:
        done = self(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done.stdout


def token_kubeconfig(daemon: Daemon, path: Path, token: str) -> Path:
    """A kubeconfig that presents only a bearer token."""
    ca_file = daemon.workdir / "ca.crt"
    ca_file.write_text((daemon.cert_dir / "apiserver.crt").read_text())
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {{server: "{daemon.url}", certificate-authority: {ca_file}}}
users:
- name: test
  user: {{token: {token}}}
contexts:
- name: test
  context: {{cluster: test, user: test}}
current-context: test
"""
    )
    return path


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []
    etcds: list[EtcdServer] = []

    def start(args: Sequence[str], backend: str = "sqlite") -> Daemon:
        workdir = tmp_path / f"d{len(started)}"
        workdir.mkdir()
        key = signing_key(workdir / "sa.key")
        tokens = workdir / "tokens.csv"
        tokens.write_text(f'{CAROL_TOKEN},carol,carol-uid,"qa,ops"\n')
        extra = [
            f"--service-account-issuer={ISSUER}",
            f"--service-account-key-file={key}",
            f"--service-account-signing-key-file={key}",
            f"--token-auth-file={tokens}",
        ]
        if backend == "etcd3":
            if shutil.which("etcd") is None:
                pytest.skip("etcd (Debian etcd-server) is not installed")
            etcd = EtcdServer(str(workdir / "etcd"))
            etcd.start()
            etcds.append(etcd)
            extra.append(f"--store-servers={etcd.client_url}")
        daemon = Daemon(workdir / "server", [*extra, *args])
        started.append(daemon)
        return daemon.start()

    yield start
    for daemon in started:
        daemon.stop()
    for etcd in etcds:
        etcd.stop()


def whoami(kubectl: Kubectl) -> dict[str, Any]:
    review: dict[str, Any] = json.loads(kubectl.ok("auth", "whoami", "-o", "json"))
    assert review["kind"] == "SelfSubjectReview"
    assert review["apiVersion"] == "authentication.k8s.io/v1"
    user: dict[str, Any] = review["status"]["userInfo"]
    return user


def test_whoami_and_can_i_under_rbac(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    daemon = launch(["--authorization-mode=RBAC"])
    admin = Kubectl(write_kubeconfig(daemon, tmp_path / "admin.kubeconfig"))
    bob = Kubectl(write_kubeconfig(daemon, tmp_path / "bob.kubeconfig", "bob", ("dev",)))
    carol = Kubectl(token_kubeconfig(daemon, tmp_path / "carol.kubeconfig", CAROL_TOKEN))

    # whoami: a client certificate user (table and YAML), a token user.
    table = bob.ok("auth", "whoami")
    assert table.splitlines()[0].split() == ["ATTRIBUTE", "VALUE"]
    assert "Username" in table and "bob" in table and "[dev system:authenticated]" in table
    user = whoami(bob)
    assert user["username"] == "bob"
    assert user["groups"] == ["dev", "system:authenticated"]
    assert "username: bob" in bob.ok("auth", "whoami", "-o", "yaml")
    assert whoami(carol) == {
        "username": "carol",
        "uid": "carol-uid",
        "groups": ["qa", "ops", "system:authenticated"],
    }

    # can-i: RBAC's bootstrap policy; bob may ask about himself, not write events.
    done = bob("auth", "can-i", "create", "events.events.k8s.io")
    assert (done.returncode, done.stdout.strip()) == (1, "no")
    assert admin.ok("auth", "can-i", "create", "events.events.k8s.io").strip() == "yes"
    assert bob.ok("auth", "can-i", "get", "/healthz").strip() == "yes"
    assert bob("auth", "can-i", "get", "/metrics").returncode == 1
    assert bob.ok("auth", "can-i", "create", "selfsubjectrulesreviews").strip() == "yes"
    done = bob("auth", "can-i", "get", "events", "--subresource=status", "-n", "kube-system")
    assert (done.returncode, done.stdout.strip()) == (1, "no")
    assert admin.ok("auth", "can-i", "delete", "events", "-n", "other").strip() == "yes"
    assert bob("auth", "can-i", "list", "events", "-q").stdout == ""

    # --as / --as-group go through impersonation (admin may impersonate).
    done = admin("auth", "can-i", "create", "events", "--as", "bob")
    assert (done.returncode, done.stdout.strip()) == (1, "no")
    as_master = admin(
        "auth", "can-i", "create", "events", "--as", "bob", "--as-group", "system:masters"
    )
    assert as_master.stdout.strip() == "yes"
    assert whoami(Kubectl(admin.kubeconfig))["username"] == "admin"
    impersonated = json.loads(admin.ok("auth", "whoami", "--as", "eve", "-o", "json"))
    assert impersonated["status"]["userInfo"]["username"] == "eve"
    # bob may not impersonate: the SSAR request itself is refused.
    refused = bob("auth", "can-i", "list", "events", "--as", "alice")
    assert refused.returncode == 1
    assert "cannot impersonate resource" in refused.stderr

    # --list: the rules RBAC grants bob (the self reviews and discovery URLs).
    listing = bob.ok("auth", "can-i", "--list")
    lines = listing.splitlines()
    assert lines[0].split() == ["Resources", "Non-Resource", "URLs", "Resource", "Names", "Verbs"]
    assert any(
        line.split() == ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"]
        for line in lines
    )
    assert any(line.split() == ["[/healthz]", "[]", "[get]"] for line in lines)
    assert "*.*" not in listing
    assert "*.*" in admin.ok("auth", "can-i", "--list")


def test_service_account_token_end_to_end(
    launch: Callable[..., Daemon], tmp_path: Path, backend: str = "sqlite"
) -> None:
    _service_accounts(launch(["--authorization-mode=RBAC"], backend), tmp_path)


def test_service_account_token_on_etcd(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    _service_accounts(launch(["--authorization-mode=RBAC"], "etcd3"), tmp_path)


def _service_accounts(daemon: Daemon, tmp_path: Path) -> None:
    admin = Kubectl(write_kubeconfig(daemon, tmp_path / "admin.kubeconfig"))
    assert admin.ok("create", "serviceaccount", "bot").strip() == "serviceaccount/bot created"
    listed = admin.ok("get", "serviceaccounts")
    assert listed.split()[:4] == ["NAME", "SECRETS", "AGE", "bot"]
    sa = json.loads(admin.ok("get", "sa", "bot", "-o", "json"))
    assert sa["kind"] == "ServiceAccount" and sa["metadata"]["namespace"] == "default"
    uid = sa["metadata"]["uid"]

    token = admin.ok("create", "token", "bot").strip()
    bot = Kubectl(token_kubeconfig(daemon, tmp_path / "bot.kubeconfig", token))
    user = whoami(bot)
    assert user["username"] == "system:serviceaccount:default:bot"
    assert user["uid"] == uid
    assert user["groups"] == [
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    ]
    done = bot("auth", "can-i", "list", "events")
    assert (done.returncode, done.stdout.strip()) == (1, "no")

    # Update, patch, label and watch through kubectl; list across namespaces.
    admin.ok("label", "sa", "bot", "team=a")
    admin.ok("patch", "sa", "bot", "-p", '{"automountServiceAccountToken":false}')
    patched = json.loads(admin.ok("get", "sa", "bot", "-o", "json"))
    assert patched["automountServiceAccountToken"] is False
    assert patched["metadata"]["labels"] == {"team": "a"}
    assert "bot" in admin.ok("get", "sa", "-A", "-l", "team=a")

    # Deleting the ServiceAccount invalidates its tokens (after the token cache's 10 s).
    admin.ok("delete", "sa", "bot")
    deadline = time.monotonic() + 30
    code = 0
    while time.monotonic() < deadline:
        code, _ = bearer_get(daemon, EVENTS, token)
        if code == 401:
            break
        time.sleep(0.5)
    assert code == 401
    # A new ServiceAccount of the same name has a new UID: the old token stays invalid.
    admin.ok("create", "serviceaccount", "bot")
    assert bearer_get(daemon, EVENTS, token)[0] == 401
    assert "No resources found" in admin("get", "sa", "-n", "elsewhere").stderr


def test_reviews_through_the_python_client(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    from kubernetes import client

    daemon = launch(["--authorization-mode=RBAC"])
    configuration = client.Configuration()
    configuration.host = daemon.url
    configuration.ssl_ca_cert = str(daemon.cert_dir / "apiserver.crt")
    configuration.cert_file = str(daemon.client_cert)
    configuration.key_file = str(daemon.client_key)
    api = client.ApiClient(configuration)
    authn = client.AuthenticationV1Api(api)
    authz = client.AuthorizationV1Api(api)

    review = authn.create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token=CAROL_TOKEN))
    )
    assert review.status.authenticated is True
    assert review.status.user.username == "carol"
    assert review.status.user.groups == ["qa", "ops", "system:authenticated"]
    assert review.status.audiences == [ISSUER]
    bad = authn.create_token_review(
        client.V1TokenReview(spec=client.V1TokenReviewSpec(token="nope"))
    )
    assert not bad.status.authenticated
    assert bad.status.error == "invalid bearer token"
    with pytest.raises(client.ApiException) as raised:
        authn.create_token_review(client.V1TokenReview(spec=client.V1TokenReviewSpec(token="")))
    assert raised.value.status == 400
    assert "token is required for TokenReview in authentication" in raised.value.body

    sar = authz.create_subject_access_review(
        client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user="carol",
                groups=["system:authenticated"],
                resource_attributes=client.V1ResourceAttributes(
                    verb="create", group="authorization.k8s.io", resource="selfsubjectaccessreviews"
                ),
            )
        )
    )
    assert sar.status.allowed is True
    assert sar.status.reason == (
        'RBAC: allowed by ClusterRoleBinding "system:basic-user" of ClusterRole '
        '"system:basic-user" to Group "system:authenticated"'
    )
    denied = authz.create_subject_access_review(
        client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user="carol",
                non_resource_attributes=client.V1NonResourceAttributes(path="/metrics", verb="get"),
            )
        )
    )
    assert denied.status.allowed is False and not denied.status.denied
    with pytest.raises(client.ApiException) as raised:
        authz.create_subject_access_review(
            client.V1SubjectAccessReview(
                spec=client.V1SubjectAccessReviewSpec(
                    user="carol",
                    resource_attributes=client.V1ResourceAttributes(verb="get"),
                    non_resource_attributes=client.V1NonResourceAttributes(path="/x", verb="get"),
                )
            )
        )
    assert raised.value.status == 422
    status = json.loads(raised.value.body)
    assert status["message"].startswith('.authorization.k8s.io "" is invalid: ')
    assert "cannot be specified in combination with resourceAttributes" in status["message"]

    local = authz.create_namespaced_local_subject_access_review(
        "team",
        client.V1LocalSubjectAccessReview(
            metadata=client.V1ObjectMeta(namespace="team"),
            spec=client.V1SubjectAccessReviewSpec(
                user="admin2",
                groups=["system:masters"],
                resource_attributes=client.V1ResourceAttributes(
                    namespace="team", verb="delete", resource="events"
                ),
            ),
        ),
    )
    assert local.status.allowed is True
    with pytest.raises(client.ApiException) as raised:
        authz.create_namespaced_local_subject_access_review(
            "team",
            client.V1LocalSubjectAccessReview(
                metadata=client.V1ObjectMeta(namespace="team"),
                spec=client.V1SubjectAccessReviewSpec(
                    user="x",
                    resource_attributes=client.V1ResourceAttributes(
                        namespace="other", verb="get", resource="events"
                    ),
                ),
            ),
        )
    assert raised.value.status == 422
    assert "must match metadata.namespace" in raised.value.body

    # Who may call them: bob (basic-user only) may not ask about others.
    from apiserver.tls.clientcert import ensure_client_ca, issue_client_cert

    ca_cert, ca_key = ensure_client_ca(str(daemon.workdir))
    cert, key = issue_client_cert(ca_cert, ca_key, str(tmp_path), "bob", ["dev"])
    configuration.cert_file, configuration.key_file = cert, key
    bob_authz = client.AuthorizationV1Api(client.ApiClient(configuration))
    with pytest.raises(client.ApiException) as raised:
        bob_authz.create_subject_access_review(sar)
    assert raised.value.status == 403
    assert json.loads(raised.value.body)["message"] == (
        'subjectaccessreviews.authorization.k8s.io is forbidden: User "bob" cannot create '
        'resource "subjectaccessreviews" in API group "authorization.k8s.io" at the cluster scope'
    )
    rules = bob_authz.create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(spec=client.V1SelfSubjectRulesReviewSpec(namespace="x"))
    )
    assert rules.status.incomplete is False
    assert any("selfsubjectreviews" in (r.resources or []) for r in rules.status.resource_rules)


def test_can_i_under_abac(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    policy = tmp_path / "abac.jsonl"
    lines = [
        {"user": "bob", "namespace": "*", "resource": "*", "apiGroup": "*", "readonly": True},
        {
            "group": "system:authenticated",
            "namespace": "*",
            "nonResourcePath": "*",
            "readonly": True,
        },
        {
            "group": "system:authenticated",
            "namespace": "*",
            "resource": "selfsubjectaccessreviews",
            "apiGroup": "authorization.k8s.io",
        },
        {
            "group": "system:authenticated",
            "namespace": "*",
            "resource": "selfsubjectrulesreviews",
            "apiGroup": "authorization.k8s.io",
        },
    ]
    policy.write_text(
        "\n".join(
            json.dumps(
                {
                    "apiVersion": "abac.authorization.kubernetes.io/v1beta1",
                    "kind": "Policy",
                    "spec": s,
                }
            )
            for s in lines
        )
        + "\n"
    )
    daemon = launch(["--authorization-mode=ABAC", f"--authorization-policy-file={policy}"])
    bob = Kubectl(write_kubeconfig(daemon, tmp_path / "bob.kubeconfig", "bob", ("dev",)))
    assert bob.ok("auth", "can-i", "list", "events").strip() == "yes"
    done = bob("auth", "can-i", "create", "events")
    assert (done.returncode, done.stdout.strip()) == (1, "no - No policy matched.")
    listing = bob.ok("auth", "can-i", "--list")
    assert any(
        line.split() == ["*.*", "[]", "[]", "[get", "list", "watch]"]
        for line in listing.splitlines()
    )
    # kubectl prints a non-resource rule once per verb.
    for verb in ("get", "list", "watch"):
        assert any(line.split() == ["[*]", "[]", f"[{verb}]"] for line in listing.splitlines())


class Webhook:
    """An HTTPS SubjectAccessReview endpoint: alice may do anything, everyone may ask the
    self reviews, nothing else is allowed (no opinion)."""

    def __init__(self, directory: Path) -> None:
        cert, key = ensure_self_signed(str(directory), "127.0.0.1", "127.0.0.1")
        self.ca_file = cert

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                spec = review["spec"]
                resource = (spec.get("resourceAttributes") or {}).get("resource", "")
                if spec.get("user") == "alice" or resource.startswith("selfsubject"):
                    answer: dict[str, Any] = {"allowed": True}
                else:
                    answer = {"allowed": False, "reason": "webhook says no"}
                data = json.dumps({**review, "status": answer}).encode()
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
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kubeconfig(self, path: Path) -> Path:
        url = f"https://127.0.0.1:{self.server.server_address[1]}/authorize"
        path.write_text(
            f"""apiVersion: v1
kind: Config
clusters:
- name: hook
  cluster: {{server: "{url}", certificate-authority: {self.ca_file}}}
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


def test_can_i_under_webhook(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    (tmp_path / "hook").mkdir()
    webhook = Webhook(tmp_path / "hook")
    try:
        config = webhook.kubeconfig(tmp_path / "hook.kubeconfig")
        daemon = launch(
            [
                "--authorization-mode=Webhook",
                f"--authorization-webhook-config-file={config}",
                "--authorization-webhook-version=v1",
            ]
        )
        alice = Kubectl(write_kubeconfig(daemon, tmp_path / "alice.kubeconfig", "alice", ()))
        bob = Kubectl(write_kubeconfig(daemon, tmp_path / "bob.kubeconfig", "bob", ()))
        assert alice.ok("auth", "can-i", "delete", "events").strip() == "yes"
        done = bob("auth", "can-i", "delete", "events")
        assert (done.returncode, done.stdout.strip()) == (1, "no - webhook says no")
        listing = bob("auth", "can-i", "--list")
        assert listing.returncode == 0, listing.stderr
        assert (
            "the list may be incomplete: webhook authorizer does not support user rule resolution"
            in listing.stderr
        )
    finally:
        webhook.server.shutdown()
        webhook.server.server_close()
