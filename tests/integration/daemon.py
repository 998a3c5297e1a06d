"""Start the real daemon (``twistd apiserver``) on 127.0.0.1 for integration tests.

The working tree (``src/`` and the repository root, where ``twisted/plugins`` lives) goes
first on PYTHONPATH, so the daemon runs the code under test even if the installed copy is
older. Every daemon a test starts is stopped by the fixture that started it.
"""

from __future__ import annotations

import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from apiserver.tls.clientcert import ensure_client_ca, issue_client_cert

REPO = Path(__file__).resolve().parents[2]
TWISTD = str(Path(sys.executable).parent / "twistd")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def source_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(REPO)])
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Daemon:
    """One server process; ``get`` speaks HTTPS/1.1 to it with the generated CA trusted."""

    def __init__(
        self,
        workdir: Path,
        args: Sequence[str] = (),
        port: int | None = None,
        cert_dir: Path | None = None,
        authenticate: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        #: Variables added to the daemon's environment (``NOTIFY_SOCKET``, ``JOURNAL_STREAM``).
        self.env = dict(env or {})
        self.port = port or free_port()
        self.cert_dir = cert_dir or workdir / "certs"
        self.data_dir = workdir / "data"
        self.log_path = workdir / "daemon.log"
        self.args = list(args)
        #: Requests from ``get`` carry a system:masters client certificate signed by
        #: ``<workdir>/client-ca.crt``, which the daemon trusts via --client-ca-file (as with
        #: kube-apiserver, AlwaysAllow turns anonymous requests off).
        self.authenticate = authenticate
        self.client_cert: Path | None = None
        self.client_key: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        extra = []
        if self.authenticate and not any(a.startswith("--client-ca-file") for a in self.args):
            extra.append(f"--client-ca-file={self.workdir / 'client-ca.crt'}")
        return [
            TWISTD,
            "--nodaemon",
            "--pidfile=",
            "apiserver",
            f"--secure-port={self.port}",
            "--bind-address=127.0.0.1",
            f"--cert-dir={self.cert_dir}",
            f"--data-dir={self.data_dir}",
            *extra,
            *self.args,
        ]

    def start(self, wait: bool = True, timeout: float = 30.0) -> Daemon:
        self.prepare()
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.command(),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**source_env(), **self.env},
            cwd=self.workdir,
        )
        log.close()
        if wait:
            self.wait_ready(timeout)
        return self

    def prepare(self) -> None:
        """The work directory and the client credentials the daemon will trust."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.authenticate:
            ca_cert, ca_key = ensure_client_ca(str(self.workdir))
            cert, key = issue_client_cert(
                ca_cert, ca_key, str(self.workdir), "admin", ["system:masters"]
            )
            self.client_cert, self.client_key = Path(cert), Path(key)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.cert_dir / "apiserver.crt"))
        ctx.check_hostname = False
        if self.client_cert is not None and self.client_key is not None:
            ctx.load_cert_chain(str(self.client_cert), str(self.client_key))
        return ctx

    def curl_auth(self) -> list[str]:
        """curl arguments that present the admin client certificate."""
        if self.client_cert is None or self.client_key is None:
            return []
        return ["--cert", str(self.client_cert), "--key", str(self.client_key)]

    def get(
        self,
        path: str,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        timeout: float = 10.0,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.ssl_context(), timeout=timeout
        )
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def wait_ready(self, timeout: float = 30.0, path: str = "/readyz") -> None:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.log()}")
            if (self.cert_dir / "apiserver.crt").exists():
                try:
                    status, _, body = self.get(path, timeout=2)
                    if status == 200:
                        return
                    last = (status, body)
                except (OSError, ssl.SSLError, http.client.HTTPException) as error:
                    last = error
            time.sleep(0.1)
        raise AssertionError(f"daemon not ready after {timeout}s ({last!r}):\n{self.log()}")

    def signal(self, signum: int = signal.SIGTERM) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


def write_kubeconfig(
    daemon: Daemon, path: Path, user: str = "admin", groups: Sequence[str] = ("system:masters",)
) -> Path:
    """A kubeconfig trusting the daemon's CA, with a client certificate for ``user``.

    The certificate is signed by ``<workdir>/client-ca.crt``; start the daemon with
    ``--client-ca-file`` pointing there (see :func:`client_ca_args`) for it to authenticate.
    """
    ca = (daemon.cert_dir / "apiserver.crt").read_text()
    ca_file = daemon.workdir / "ca.crt"
    ca_file.write_text(ca)
    ca_cert, ca_key = ensure_client_ca(str(daemon.workdir))
    cert, key = issue_client_cert(ca_cert, ca_key, str(daemon.workdir), user, groups)
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: {daemon.url}
    certificate-authority: {ca_file}
users:
- name: test
  user:
    client-certificate: {cert}
    client-key: {key}
contexts:
- name: test
  context: {{cluster: test, user: test}}
current-context: test
"""
    )
    return path
