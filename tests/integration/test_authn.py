"""Authentication against the real daemon over TLS: client certificates (kubectl, HTTP/2),
static tokens (the Python client, HTTP/1.1), an OIDC issuer and a token webhook served by the
test itself over TLS, front-proxy headers, service-account JWTs, and start-up failures.

Identities are made visible with ``--authorization-mode=RBAC``: a user outside
``system:masters`` gets a 403 whose message names them.
"""

from __future__ import annotations

import http.client
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

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from apiserver.auth.authn.serviceaccount import TokenSigner
from apiserver.tls.clientcert import ensure_client_ca, issue_client_cert
from apiserver.tls.selfsigned import ensure_self_signed
from tests.integration.daemon import Daemon, free_port, write_kubeconfig

pytestmark = pytest.mark.integration

EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
UNAUTHORIZED = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":'
    b'"Unauthorized","reason":"Unauthorized","code":401}\n'
)
KUBECTL = shutil.which("kubectl")
Cert = tuple[str, str] | None


def request(
    daemon: Daemon,
    path: str,
    cert: Cert = None,
    headers: dict[str, str] | None = None,
    method: str = "GET",
) -> tuple[int, dict[str, str], bytes]:
    """One HTTPS/1.1 request, with the given client certificate (none: no certificate)."""
    ctx = ssl.create_default_context(cafile=str(daemon.cert_dir / "apiserver.crt"))
    ctx.check_hostname = False
    if cert is not None:
        ctx.load_cert_chain(*cert)
    conn = http.client.HTTPSConnection("127.0.0.1", daemon.port, context=ctx, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def client_cert(daemon: Daemon, user: str, groups: Sequence[str] = ()) -> tuple[str, str]:
    ca_cert, ca_key = ensure_client_ca(str(daemon.workdir))
    directory = daemon.workdir / "clients"
    directory.mkdir(exist_ok=True)
    return issue_client_cert(ca_cert, ca_key, str(directory), user, groups)


def message(body: bytes) -> str:
    value = json.loads(body)["message"]
    assert isinstance(value, str)
    return value


def poll(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    """Wait for something the daemon does on its own (a fetch at start-up)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    started: list[Daemon] = []

    def start(args: Sequence[str] = (), wait: bool = True) -> Daemon:
        daemon = Daemon(tmp_path / f"d{len(started)}", args)
        started.append(daemon)
        return daemon.start(wait=wait)

    yield start
    for daemon in started:
        daemon.stop()


class TLSServer:
    """A small HTTPS server in a thread, with its own self-signed CA (for 127.0.0.1)."""

    def __init__(self, directory: Path, handler: type[BaseHTTPRequestHandler]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = ensure_self_signed(str(directory), "127.0.0.1", "127.0.0.1")
        self.ca_file = cert  # the leaf followed by its CA
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.server.owner = self  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> TLSServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


class _Quiet(BaseHTTPRequestHandler):
    # Keep-alive HTTP/1.1 like real identity providers: an HTTP/1.0 server closes the TLS
    # socket right after the answer, without close_notify, which races the client's read.
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def reply(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


# --- client certificates --------------------------------------------------------------------


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_with_client_certificates(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    daemon = launch(["--authorization-mode=RBAC"])
    assert KUBECTL is not None

    def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    admin = write_kubeconfig(daemon, tmp_path / "admin.kubeconfig", "alice", ["system:masters"])
    out = kubectl(admin, "get", "events.v1.events.k8s.io", "-n", "default", "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["items"] == []
    bob = write_kubeconfig(daemon, tmp_path / "bob.kubeconfig", "bob", ["devs"])
    out = kubectl(bob, "get", "events.v1.events.k8s.io", "-n", "default")
    assert out.returncode != 0
    assert 'User "bob" cannot list resource "events"' in out.stderr

    # A certificate from a CA the server does not trust: 401, even though anonymous is on.
    stranger_dir = tmp_path / "stranger"
    stranger_dir.mkdir()
    ca_cert, ca_key = ensure_client_ca(str(stranger_dir))
    cert, key = issue_client_cert(ca_cert, ca_key, str(stranger_dir), "mallory", ["system:masters"])
    code, _, body = request(daemon, "/readyz", (cert, key))
    assert code == 401
    assert body == UNAUTHORIZED


# --- static tokens --------------------------------------------------------------------------


def test_python_client_with_a_static_token(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    tokens = tmp_path / "tokens.csv"
    tokens.write_text('static-secret,alice,uid-1,"system:masters,dev"\nother,bob,uid-2\n')
    daemon = launch([f"--token-auth-file={tokens}", "--authorization-mode=RBAC"])

    def api(token: str) -> Any:
        configuration = client.Configuration()
        configuration.host = daemon.url
        configuration.ssl_ca_cert = str(daemon.cert_dir / "apiserver.crt")
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return client.EventsV1Api(client.ApiClient(configuration))

    assert api("static-secret").list_namespaced_event("default").items == []
    with pytest.raises(ApiException) as info:
        api("other").list_namespaced_event("default")
    assert info.value.status == 403
    assert 'User "bob"' in json.loads(info.value.body)["message"]
    with pytest.raises(ApiException) as info:
        api("wrong").list_namespaced_event("default")
    assert info.value.status == 401
    assert info.value.body.encode() == UNAUTHORIZED
    assert "www-authenticate" not in {k.lower() for k in info.value.headers}

    # An empty token (two spaces) is ignored with a warning: anonymous here.
    code, headers, _ = request(daemon, "/readyz", headers={"Authorization": "Bearer  static"})
    assert code == 200
    assert "extra space before the bearer token" in headers["warning"]


def test_bad_token_file_stops_start_up(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    tokens = tmp_path / "broken.csv"
    tokens.write_text("token-only,user\n")
    daemon = launch([f"--token-auth-file={tokens}"], wait=False)
    assert daemon.wait_exit(30) != 0
    log = daemon.log()
    assert str(tokens) in log
    assert "must have at least 3 columns" in log


# --- OIDC -------------------------------------------------------------------------------------


class _Issuer(_Quiet):
    def do_GET(self) -> None:
        owner: OIDCIssuer = self.server.owner  # type: ignore[attr-defined]
        if self.path == "/.well-known/openid-configuration":
            self.reply(200, {"issuer": owner.url, "jwks_uri": owner.url + "/keys"})
        elif self.path == "/keys":
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(owner.key.public_key()))
            jwk.update(kid="k1", use="sig", alg="RS256")
            self.reply(200, {"keys": [jwk]})
        else:
            self.reply(404, {})


class OIDCIssuer(TLSServer):
    def __init__(self, directory: Path) -> None:
        super().__init__(directory, _Issuer)
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    def token(self, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.url, "aud": "kube", "sub": "alice", "iat": now, "exp": now + 600}
        body.update(claims)
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": "k1"})


def test_oidc_issuer_over_tls(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    with OIDCIssuer(tmp_path / "idp") as issuer:
        daemon = launch(
            [
                f"--oidc-issuer-url={issuer.url}",
                "--oidc-client-id=kube",
                f"--oidc-ca-file={issuer.ca_file}",
                "--oidc-groups-claim=groups",
                "--authorization-mode=RBAC",
            ]
        )
        admin = issuer.token(groups=["system:masters"])
        bearer = {"Authorization": f"Bearer {admin}"}
        # The keys are fetched once the server runs; until then: 401 (not initialized).
        poll(lambda: request(daemon, EVENTS, headers=bearer)[0] == 200, "the OIDC keys")
        code, _, body = request(
            daemon, EVENTS, headers={"Authorization": f"Bearer {issuer.token()}"}
        )
        assert code == 403
        assert f'User "{issuer.url}#alice"' in message(body)
        code, _, body = request(
            daemon, EVENTS, headers={"Authorization": f"Bearer {issuer.token(groups=['dev'])}"}
        )
        assert code == 403
        for bad in (
            issuer.token(exp=int(time.time()) - 10, groups=["system:masters"]),
            issuer.token(aud="someone-else", groups=["system:masters"]),
        ):
            code, _, body = request(daemon, EVENTS, headers={"Authorization": f"Bearer {bad}"})
            assert (code, body) == (401, UNAUTHORIZED)


# --- front proxy ------------------------------------------------------------------------------


def test_front_proxy_headers(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    proxy_dir = tmp_path / "proxy"
    proxy_dir.mkdir()
    proxy_ca, proxy_ca_key = ensure_client_ca(str(proxy_dir), "front-proxy-ca")
    daemon = launch(
        [
            f"--requestheader-client-ca-file={proxy_ca}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--authorization-mode=RBAC",
        ]
    )
    proxy = issue_client_cert(proxy_ca, proxy_ca_key, str(proxy_dir), "front-proxy-client")
    code, _, body = request(daemon, EVENTS, proxy, {"X-Remote-User": "bob", "X-Remote-Group": "d"})
    assert code == 403
    assert 'User "bob"' in message(body)
    code, _, _ = request(
        daemon, EVENTS, proxy, {"X-Remote-User": "carol", "X-Remote-Group": "system:masters"}
    )
    assert code == 200
    # Forged headers without a front-proxy certificate are ignored: anonymous, or the
    # certificate's own user.
    forged = {"X-Remote-User": "root", "X-Remote-Group": "system:masters"}
    code, _, body = request(daemon, EVENTS, None, forged)
    assert code == 403
    assert 'User "system:anonymous"' in message(body)
    dave = client_cert(daemon, "dave")
    code, _, body = request(daemon, EVENTS, dave, forged)
    assert code == 403
    assert 'User "dave"' in message(body)
    # A proxy certificate with a name that is not allowed: 401.
    other = issue_client_cert(proxy_ca, proxy_ca_key, str(proxy_dir), "not-the-proxy")
    code, _, body = request(daemon, EVENTS, other, forged)
    assert (code, body) == (401, UNAUTHORIZED)


# --- service-account JWTs ---------------------------------------------------------------------


def test_service_account_tokens(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file = tmp_path / "sa.key"
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    issuer = "https://kubernetes.default.svc"
    daemon = launch(
        [
            f"--service-account-issuer={issuer}",
            f"--service-account-key-file={key_file}",
            f"--service-account-signing-key-file={key_file}",
        ]
    )
    signer = TokenSigner(key, issuer)
    now = time.time()
    cases = {
        "expired": signer.bound_claims("ci", "b", "u", [issuer], now - 7200, lifetime=600),
        "wrong audience": signer.bound_claims("ci", "b", "u", ["vault"], now),
        "no such service account": signer.bound_claims("ci", "b", "u", [issuer], now),
    }
    for name, claims in cases.items():
        headers = {"Authorization": f"Bearer {signer.sign(claims)}"}
        assert request(daemon, "/readyz", headers=headers)[::2] == (401, UNAUTHORIZED), name
    forged = TokenSigner(rsa.generate_private_key(public_exponent=65537, key_size=2048), issuer)
    headers = {
        "Authorization": f"Bearer {forged.sign(forged.bound_claims('ci', 'b', 'u', [issuer], now))}"
    }
    assert request(daemon, "/readyz", headers=headers)[0] == 401

    admin = (str(daemon.client_cert), str(daemon.client_key))
    code, headers, body = request(daemon, "/.well-known/openid-configuration", admin)
    assert code == 200
    assert headers["content-type"] == "application/json"
    assert headers["cache-control"] == "public, max-age=3600"
    document = json.loads(body)
    assert document["issuer"] == issuer
    code, headers, body = request(daemon, "/openid/v1/jwks", admin)
    assert code == 200
    assert headers["content-type"] == "application/jwk-set+json"
    assert json.loads(body)["keys"][0]["kid"] == signer.kid


# --- token webhook ----------------------------------------------------------------------------


class _Reviewer(_Quiet):
    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        token = review["spec"]["token"]
        status: dict[str, Any] = {"authenticated": False}
        if token == "webhook-admin":
            status = {
                "authenticated": True,
                "user": {"username": "hooked", "groups": ["system:masters"]},
            }
        elif token == "webhook-user":
            status = {"authenticated": True, "user": {"username": "hooked-user"}}
        self.reply(
            200, {"apiVersion": review["apiVersion"], "kind": "TokenReview", "status": status}
        )


def webhook_kubeconfig(path: Path, server: str, ca_file: str) -> Path:
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: authn, cluster: {{server: "{server}", certificate-authority: "{ca_file}"}}}}]
users: [{{name: apiserver, user: {{}}}}]
contexts: [{{name: webhook, context: {{cluster: authn, user: apiserver}}}}]
current-context: webhook
"""
    )
    return path


def test_token_webhook(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    with TLSServer(tmp_path / "hook", _Reviewer) as hook:
        kubeconfig = webhook_kubeconfig(
            tmp_path / "hook.kubeconfig", hook.url + "/review", hook.ca_file
        )
        daemon = launch(
            [
                f"--authentication-token-webhook-config-file={kubeconfig}",
                "--authorization-mode=RBAC",
            ]
        )
        assert request(daemon, EVENTS, headers={"Authorization": "Bearer webhook-admin"})[0] == 200
        code, _, body = request(daemon, EVENTS, headers={"Authorization": "Bearer webhook-user"})
        assert code == 403
        assert 'User "hooked-user"' in message(body)
        code, _, body = request(daemon, EVENTS, headers={"Authorization": "Bearer nope"})
        assert (code, body) == (401, UNAUTHORIZED)


def test_token_webhook_down(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    (tmp_path / "ca").mkdir()
    ca_file, _ = ensure_self_signed(str(tmp_path / "ca"), "127.0.0.1", "127.0.0.1")
    kubeconfig = webhook_kubeconfig(
        tmp_path / "down.kubeconfig", f"https://127.0.0.1:{free_port()}/review", ca_file
    )
    daemon = launch([f"--authentication-token-webhook-config-file={kubeconfig}"])
    for _ in range(3):
        code, _, body = request(daemon, "/readyz", headers={"Authorization": "Bearer anything"})
        assert (code, body) == (401, UNAUTHORIZED)
    admin = (str(daemon.client_cert), str(daemon.client_key))
    assert request(daemon, "/readyz", admin)[0] == 200
    assert daemon.proc is not None and daemon.proc.poll() is None


# --- --authentication-config ------------------------------------------------------------------


def test_authentication_config_anonymous_conditions(
    launch: Callable[..., Daemon], tmp_path: Path
) -> None:
    config = tmp_path / "authn.yaml"
    config.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n"
        "anonymous:\n  enabled: true\n  conditions: [{path: /livez}, {path: /readyz}]\n"
    )
    daemon = launch([f"--authentication-config={config}"])
    assert request(daemon, "/livez")[0] == 200
    assert request(daemon, "/readyz")[0] == 200
    assert request(daemon, "/healthz")[::2] == (401, UNAUTHORIZED)
    assert request(daemon, "/livez", headers={"Authorization": "Bearer bad"})[0] == 401


def test_unsupported_cel_stops_start_up(launch: Callable[..., Daemon], tmp_path: Path) -> None:
    config = tmp_path / "authn.yaml"
    config.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n"
        "jwt:\n- issuer: {url: 'https://idp.example', audiences: [kube]}\n"
        "  claimMappings:\n    username: {expression: 'claims.sub.reverse()'}\n"
    )
    daemon = launch([f"--authentication-config={config}"], wait=False)
    assert daemon.wait_exit(30) != 0
    log = daemon.log()
    assert str(config) in log
    assert "jwt[0].claimMappings.username.expression" in log
    assert "unsupported function reverse()" in log
