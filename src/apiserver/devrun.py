"""``make run``: start the server on the embedded store and tell a new user how to reach it.

It creates the self-signed serving certificate first (the same files the server itself would
generate in ``--cert-dir``), writes a kubeconfig that trusts its CA, prints how to use it with
kubectl and curl, then replaces itself with ``apiserver`` in the foreground (Ctrl-C stops it
gracefully). A service-account signing key and issuer are set unless ``--service-account-*``
flags are given, so that ``kubectl create serviceaccount`` and ``kubectl create token`` work.
Unless ``--token-auth-file`` is given, the admin also gets a static bearer token (made once,
in ``<var>/certs/tokens.csv``) and the operator console's sign-in URL carries it in its
fragment, which the browser never sends (docs/console.md).
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import secrets
import shutil
import socket
import sys
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from apiserver.tls.clientcert import ensure_client_ca, issue_client_cert
from apiserver.tls.selfsigned import ensure_self_signed

_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----\n?", re.S)


def ca_bundle(cert_file: str) -> bytes:
    """The CA part of a self-signed ``apiserver.crt`` (leaf first, then its CA)."""
    blocks = _PEM.findall(Path(cert_file).read_bytes())
    return blocks[-1] if blocks else b""


def kubeconfig(server: str, ca_pem: bytes, client_cert: str, client_key: str) -> str:
    ca = base64.b64encode(ca_pem).decode()
    return f"""apiVersion: v1
kind: Config
clusters:
- name: apiserver
  cluster:
    server: {server}
    certificate-authority-data: {ca}
users:
- name: admin
  user:
    client-certificate: {client_cert}
    client-key: {client_key}
contexts:
- name: apiserver
  context:
    cluster: apiserver
    user: admin
current-context: apiserver
"""


#: The development server's service-account issuer (kube-apiserver's usual in-cluster one).
DEV_ISSUER = "https://kubernetes.default.svc.cluster.local"


def service_account_key(path: Path) -> Path:
    """An RSA key for service-account tokens, made once (TokenRequest, as kube-apiserver,
    needs ``--service-account-issuer`` and a signing key: ``kubectl create token`` works out
    of the box)."""
    if not path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)
    return path


def admin_token(path: Path) -> str:
    """The admin's bearer token for the console, made once (a ``--token-auth-file`` line:
    ``token,user,uid,"groups"``), readable by its owner only."""
    if not path.exists():
        path.write_text(f'{secrets.token_urlsafe(32)},admin,admin,"system:masters"\n')
        path.chmod(0o600)
    return path.read_text().partition(",")[0]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m apiserver.devrun")
    parser.add_argument("--port", type=int, default=6443)
    parser.add_argument("--var", default="var")
    parser.add_argument("extra", nargs="*", help="more apiserver flags")
    args = parser.parse_args(argv)

    var = Path(args.var).resolve()
    cert_dir, data_dir = var / "certs", var / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    cert, _key = ensure_self_signed(
        str(cert_dir), "127.0.0.1", "127.0.0.1", extra_names=[socket.gethostname()]
    )
    ca_path = cert_dir / "ca.crt"
    ca_path.write_bytes(ca_bundle(cert))
    server = f"https://127.0.0.1:{args.port}"
    config_path = var / "kubeconfig"
    client_ca, client_ca_key = ensure_client_ca(str(cert_dir))
    admin_cert, admin_key = issue_client_cert(
        client_ca, client_ca_key, str(cert_dir), "admin", ["system:masters"]
    )
    config_path.write_text(kubeconfig(server, ca_path.read_bytes(), admin_cert, admin_key))

    own_tokens = any(flag.startswith("--token-auth-file") for flag in args.extra)
    tokens_path = cert_dir / "tokens.csv"
    console = f"{server}/ui/"
    if not own_tokens:
        console += f"#token={admin_token(tokens_path)}"
    print(
        f"""
apiserver: starting on {server} (embedded store in {data_dir})

  Console (signs the admin in): {console}
  (the browser must accept the CA {ca_path}, or skip its warning once)

  export KUBECONFIG={config_path}
  kubectl get --raw '/readyz?verbose'
  kubectl auth whoami
  curl --cacert {ca_path} --cert {cert_dir}/admin.crt --key {cert_dir}/admin.key \\
       '{server}/livez?verbose'

Stop it with Ctrl-C (graceful shutdown).
""",
        flush=True,
    )
    exe = shutil.which("apiserver", path=os.path.dirname(sys.executable)) or "apiserver"
    flags = [
        f"--secure-port={args.port}",
        "--bind-address=127.0.0.1",
        f"--cert-dir={cert_dir}",
        f"--data-dir={data_dir}",
        f"--client-ca-file={client_ca}",
    ]
    if not any(flag.startswith("--service-account-") for flag in args.extra):
        sa_key = service_account_key(cert_dir / "service-account.key")
        flags += [
            f"--service-account-issuer={DEV_ISSUER}",
            f"--service-account-key-file={sa_key}",
            f"--service-account-signing-key-file={sa_key}",
        ]
    if not own_tokens:
        flags.append(f"--token-auth-file={tokens_path}")
    flags += args.extra
    os.execv(exe, [exe, *flags])


if __name__ == "__main__":
    main()
