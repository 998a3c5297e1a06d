"""``make cluster``: a three-member etcd on loopback and two servers sharing one port.

The way to try scale-out and failover on one machine: both servers bind the same
``--secure-port`` with ``--permit-port-sharing`` (SO_REUSEPORT: the kernel spreads new
connections over them), keep their data in one etcd cluster (``--etcd-servers`` names all three
members, tried in order), and share one serving certificate and client CA, so one kubeconfig
reaches either. Kill an etcd member (its pid is printed) or one server and the other carries
on. Ctrl-C stops the servers, then etcd. :class:`EtcdCluster` is also what the failover tests
start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from apiserver.devrun import DEV_ISSUER, ca_bundle, kubeconfig, service_account_key
from apiserver.tls.clientcert import ensure_client_ca, issue_client_cert
from apiserver.tls.selfsigned import ensure_self_signed


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EtcdCluster:
    """``size`` etcd members on free loopback ports, data under ``base``.

    ``kill(i)`` SIGKILLs member ``i`` (a crash); ``leader()`` asks the members which one leads.
    ``heartbeat_ms`` and ``election_ms`` are etcd's ``--heartbeat-interval`` and
    ``--election-timeout`` (etcd's defaults: 100 and 1000): after a leader dies, the survivors
    elect a new one within one to two election timeouts.
    """

    def __init__(
        self,
        base: Path,
        size: int = 3,
        etcd: str | None = None,
        heartbeat_ms: int = 100,
        election_ms: int = 1000,
    ) -> None:
        self.etcd = etcd or shutil.which("etcd") or "etcd"
        self.base = base
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.names = [f"m{i}" for i in range(size)]
        self.client_urls = [f"http://127.0.0.1:{free_port()}" for _ in self.names]
        self.peer_urls = [f"http://127.0.0.1:{free_port()}" for _ in self.names]
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * size

    def command(self, i: int) -> list[str]:
        initial = ",".join(f"{n}={u}" for n, u in zip(self.names, self.peer_urls, strict=True))
        return [
            self.etcd,
            f"--name={self.names[i]}",
            f"--data-dir={self.base / self.names[i]}",
            f"--listen-client-urls={self.client_urls[i]}",
            f"--advertise-client-urls={self.client_urls[i]}",
            f"--listen-peer-urls={self.peer_urls[i]}",
            f"--initial-advertise-peer-urls={self.peer_urls[i]}",
            f"--initial-cluster={initial}",
            "--initial-cluster-state=new",
            "--initial-cluster-token=apiserver-dev",
            f"--heartbeat-interval={self.heartbeat_ms}",
            f"--election-timeout={self.election_ms}",
            "--logger=zap",
            "--log-level=warn",
        ]

    def start(self, timeout: float = 60.0) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        for i in range(len(self.names)):
            with open(self.base / f"{self.names[i]}.log", "ab") as log:
                self.processes[i] = subprocess.Popen(
                    self.command(i), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
        deadline = time.monotonic() + timeout
        while not all(self.healthy(i) for i in range(len(self.names))):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"etcd cluster not healthy after {timeout:g}s (logs: {self.base})"
                )
            for p in self.processes:
                if p is not None and p.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"an etcd member exited (logs: {self.base})")
            time.sleep(0.1)  # noqa: TID251 (a launcher with no reactor)

    def healthy(self, i: int) -> bool:
        try:
            with urllib.request.urlopen(self.client_urls[i] + "/health", timeout=1.0) as r:
                return b'"true"' in r.read()
        except OSError:
            return False

    def leader(self) -> int | None:
        """Index of the member the live members call leader (None when they do not know)."""
        import json

        ids: dict[int, int] = {}
        leader = 0
        for i, url in enumerate(self.client_urls):
            if self.processes[i] is None:
                continue
            try:
                request = urllib.request.Request(url + "/v3/maintenance/status", data=b"{}")
                with urllib.request.urlopen(request, timeout=1.0) as r:
                    status = json.loads(r.read())
            except OSError:
                continue
            ids[int(status["header"]["member_id"])] = i
            leader = int(status.get("leader") or 0)
        return ids.get(leader)

    def kill(self, i: int) -> None:
        process, self.processes[i] = self.processes[i], None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(timeout=10)

    def stop(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.terminate()
        for i, process in enumerate(self.processes):
            if process is not None:
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(timeout=10)
            self.processes[i] = None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m apiserver.devcluster")
    parser.add_argument("--port", type=int, default=6443)
    parser.add_argument("--var", default="var/cluster")
    parser.add_argument("extra", nargs="*", help="more apiserver flags (both servers)")
    args = parser.parse_args(argv)

    var = Path(args.var).resolve()
    cert_dir = var / "certs"
    cert, _key = ensure_self_signed(
        str(cert_dir), "127.0.0.1", "127.0.0.1", extra_names=[socket.gethostname()]
    )
    ca_path = cert_dir / "ca.crt"
    ca_path.write_bytes(ca_bundle(cert))
    client_ca, client_ca_key = ensure_client_ca(str(cert_dir))
    admin_cert, admin_key = issue_client_cert(
        client_ca, client_ca_key, str(cert_dir), "admin", ["system:masters"]
    )
    server = f"https://127.0.0.1:{args.port}"
    config_path = var / "kubeconfig"
    config_path.write_text(kubeconfig(server, ca_path.read_bytes(), admin_cert, admin_key))
    sa_key = service_account_key(cert_dir / "service-account.key")

    # A fresh etcd each time: its member ports are picked anew.
    shutil.rmtree(var / "etcd", ignore_errors=True)
    cluster = EtcdCluster(var / "etcd")
    cluster.start()
    exe = shutil.which("apiserver", path=os.path.dirname(sys.executable)) or "apiserver"
    flags = [
        f"--secure-port={args.port}",
        "--bind-address=127.0.0.1",
        "--permit-port-sharing",
        f"--cert-dir={cert_dir}",
        f"--client-ca-file={client_ca}",
        "--storage-backend=etcd3",
        "--etcd-servers=" + ",".join(cluster.client_urls),
        f"--service-account-issuer={DEV_ISSUER}",
        f"--service-account-key-file={sa_key}",
        f"--service-account-signing-key-file={sa_key}",
        *args.extra,
    ]
    servers = []
    for n in (1, 2):
        with open(var / f"apiserver-{n}.log", "ab") as log:
            servers.append(
                subprocess.Popen(
                    [exe, *flags], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
            )
    members = "\n".join(
        f"  etcd {name}: {url} (pid {p.pid if p else '-'})"
        for name, url, p in zip(cluster.names, cluster.client_urls, cluster.processes, strict=True)
    )
    print(
        f"""
apiserver cluster: two servers on {server} (pids {servers[0].pid}, {servers[1].pid}),
sharing the port with --permit-port-sharing; logs in {var}
{members}

  export KUBECONFIG={config_path}
  kubectl get --raw '/readyz?verbose'
  kubectl create serviceaccount demo; kubectl get serviceaccounts

Try failover: kill -9 one etcd member or one server; the rest carry on.
Stop everything with Ctrl-C.
""",
        flush=True,
    )
    stopping = False

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    try:
        while not stopping and any(s.poll() is None for s in servers):
            time.sleep(0.5)  # noqa: TID251 (a launcher with no reactor)
    except KeyboardInterrupt:
        pass
    finally:
        for s in servers:
            if s.poll() is None:
                s.send_signal(signal.SIGTERM)
        for s in servers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                s.wait(timeout=70)
            if s.poll() is None:
                s.kill()
                s.wait()
        cluster.stop()
        print("apiserver cluster: stopped", flush=True)


if __name__ == "__main__":
    main()
