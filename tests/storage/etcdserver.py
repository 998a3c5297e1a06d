"""A throw-away etcd server for tests: Debian's ``etcd-server`` (3.4) on free loopback ports.

The ports are picked once, so ``stop()`` + ``start()`` brings the same member back on the same
URLs with the same data directory (what a restart of etcd looks like to its clients).
``pause()``/``resume()`` freeze and thaw the process (SIGSTOP/SIGCONT): connections stay open
but nothing answers, as with a hung etcd.

Optional TLS: pass ``cert_file``/``key_file`` (server certificate) and ``trusted_ca_file``
(then clients must present a certificate signed by that CA, ``--client-cert-auth``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.request
from types import TracebackType

ETCD = shutil.which("etcd")


def etcd_available() -> bool:
    return ETCD is not None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class EtcdServer:
    """One etcd member named ``default`` on 127.0.0.1."""

    def __init__(
        self,
        data_dir: str,
        *,
        cert_file: str | None = None,
        key_file: str | None = None,
        trusted_ca_file: str | None = None,
        extra_args: list[str] | None = None,
        start_timeout: float = 30.0,
    ) -> None:
        self.data_dir = data_dir
        self.client_port = free_port()
        self.peer_port = free_port()
        self.tls = cert_file is not None
        self._cert_file = cert_file
        self._key_file = key_file
        self._trusted_ca_file = trusted_ca_file
        self._extra_args = list(extra_args or [])
        self._start_timeout = start_timeout
        scheme = "https" if self.tls else "http"
        self.client_url = f"{scheme}://127.0.0.1:{self.client_port}"
        self.peer_url = f"http://127.0.0.1:{self.peer_port}"
        self.log_path = data_dir.rstrip("/") + ".log"
        self._process: subprocess.Popen[bytes] | None = None
        self._paused = False

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def command(self) -> list[str]:
        if ETCD is None:
            raise RuntimeError("etcd is not installed (apt-get install etcd-server)")
        args = [
            ETCD,
            "--name",
            "default",
            "--data-dir",
            self.data_dir,
            "--listen-client-urls",
            self.client_url,
            "--advertise-client-urls",
            self.client_url,
            "--listen-peer-urls",
            self.peer_url,
            "--initial-advertise-peer-urls",
            self.peer_url,
            "--initial-cluster",
            f"default={self.peer_url}",
            "--initial-cluster-state",
            "new",
            "--logger",
            "zap",
            "--log-level",
            "warn",
        ]
        if self.tls:
            args += ["--cert-file", str(self._cert_file), "--key-file", str(self._key_file)]
            if self._trusted_ca_file is not None:
                args += ["--trusted-ca-file", self._trusted_ca_file, "--client-cert-auth"]
        return args + self._extra_args

    def start(self) -> None:
        """Spawn etcd and return once ``/health`` answers healthy (or raise RuntimeError)."""
        if self.running:
            return
        os.makedirs(os.path.dirname(os.path.abspath(self.data_dir)), exist_ok=True)
        log = open(self.log_path, "ab")
        try:
            self._process = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        finally:
            log.close()
        self._paused = False
        deadline = time.monotonic() + self._start_timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"etcd exited with {self._process.returncode}:\n{self.log_tail()}"
                )
            if self._healthy():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"etcd not healthy after {self._start_timeout}s:\n{self.log_tail()}")

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.tls:
            return None
        context = ssl.create_default_context(cafile=self._trusted_ca_file)
        if self._trusted_ca_file is not None:
            context.load_cert_chain(str(self._cert_file), str(self._key_file))
        else:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(
                self.client_url + "/health", timeout=1.0, context=self._ssl_context()
            ) as response:
                return b'"true"' in response.read()
        except OSError:
            return False

    def stop(self) -> None:
        """Terminate etcd (SIGTERM; SIGKILL after 10 s) and wait for it."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        if self._paused:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGCONT)
            self._paused = False
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL etcd (a crash) and wait for it."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.kill()
        process.wait(timeout=10)
        self._paused = False

    def pause(self) -> None:
        """Freeze etcd (SIGSTOP): it accepts connections but answers nothing."""
        if self._process is not None and not self._paused:
            self._process.send_signal(signal.SIGSTOP)
            self._paused = True
            self._wait_state("T")

    def _wait_state(self, wanted: str, timeout: float = 2.0) -> None:
        """Wait until the kernel reports etcd in ``wanted`` state (``T``: stopped), so that a
        caller never races the signal's delivery on a loaded machine."""
        assert self._process is not None
        deadline = time.monotonic() + timeout
        stat = f"/proc/{self._process.pid}/stat"
        while time.monotonic() < deadline:
            try:
                with open(stat) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return
            if state == wanted:
                return
            time.sleep(0.01)

    def resume(self) -> None:
        """Thaw a paused etcd (SIGCONT)."""
        if self._process is not None and self._paused:
            self._process.send_signal(signal.SIGCONT)
            self._paused = False

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return b"\n".join(f.read().splitlines()[-lines:]).decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self) -> EtcdServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
