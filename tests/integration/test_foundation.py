"""The real daemon over TLS: health endpoints, /version, 404s, curl over h1 and h2, kubectl."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.daemon import Daemon, write_kubeconfig

CURL = shutil.which("curl")
KUBECTL = shutil.which("kubectl")


def curl(daemon: Daemon, path: str, *extra: str) -> subprocess.CompletedProcess[str]:
    assert CURL is not None
    return subprocess.run(
        [
            CURL,
            "-sS",
            "--cacert",
            str(daemon.cert_dir / "apiserver.crt"),
            "-w",
            "\n%{http_code} %{http_version}",
            *daemon.curl_auth(),
            *extra,
            daemon.url + path,
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_livez_readyz_healthz_ok(daemon: Daemon) -> None:
    for endpoint in ("/healthz", "/livez", "/readyz"):
        status, headers, body = daemon.get(endpoint)
        assert (status, body) == (200, b"ok")
        assert headers["content-type"] == "text/plain; charset=utf-8"
        assert headers["x-content-type-options"] == "nosniff"
        assert "audit-id" in headers
        assert headers["cache-control"] == "no-cache, private"


def test_readyz_verbose_lists_checks_in_order(daemon: Daemon) -> None:
    status, _, body = daemon.get("/readyz?verbose")
    assert status == 200
    lines = body.decode().splitlines()
    assert lines[0] == "[+]ping ok"
    assert lines[1] == "[+]log ok"
    assert lines[2] == "[+]sqlite ok"
    assert lines[3] == "[+]sqlite-readiness ok"
    assert "[+]poststarthook/storage-readiness ok" in lines
    assert lines[-2] == "[+]shutdown ok"
    assert lines[-1] == "readyz check passed"
    _, _, livez = daemon.get("/livez?verbose")
    assert "shutdown" not in livez.decode()
    assert "sqlite-readiness" not in livez.decode()


def test_exclude_and_unknown_exclude_warn(daemon: Daemon) -> None:
    status, _, body = daemon.get("/livez?verbose&exclude=log&exclude=nosuch&exclude=abc")
    text = body.decode()
    assert status == 200
    assert "[+]log excluded: ok" in text
    assert 'warn: some health checks cannot be excluded: no matches for "abc","nosuch"' in text


def test_per_check_paths_and_404s(daemon: Daemon) -> None:
    assert daemon.get("/livez/ping")[::2] == (200, b"ok")
    assert daemon.get("/readyz/poststarthook/storage-readiness")[::2] == (200, b"ok")
    status, headers, body = daemon.get("/livez/nosuch")
    assert (status, body) == (404, b"404 page not found\n")
    assert headers["content-type"] == "text/plain; charset=utf-8"
    assert daemon.get("/readyz/poststarthook")[0] == 404
    status, headers, body = daemon.get("/apis/nosuch.example/v1/things")
    assert status == 404
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource",
        "reason": "NotFound",
        "details": {},
        "code": 404,
    }
    assert daemon.get("/nosuch")[::2] == (404, b"404 page not found\n")


def test_version(daemon: Daemon) -> None:
    status, headers, body = daemon.get("/version")
    assert status == 200
    assert headers["content-type"] == "application/json"
    doc = json.loads(body)
    assert list(doc)[:9] == [
        "major",
        "minor",
        "gitVersion",
        "gitCommit",
        "gitTreeState",
        "buildDate",
        "goVersion",
        "compiler",
        "platform",
    ]
    assert (doc["major"], doc["minor"], doc["gitVersion"]) == ("1", "35", "v1.35.0")
    assert not body.endswith(b"\n")
    assert body.startswith(b'{\n  "major": "1"')


def test_version_flag_sets_reported_version(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--version=v1.33.7"])
    doc = json.loads(daemon.get("/version")[2])
    assert (doc["major"], doc["minor"], doc["gitVersion"]) == ("1", "33", "v1.33.7")


@pytest.mark.skipif(CURL is None, reason="curl not installed")
def test_curl_http1_and_http2(daemon: Daemon) -> None:
    h1 = curl(daemon, "/readyz?verbose", "--http1.1")
    assert h1.returncode == 0, h1.stderr
    assert h1.stdout.endswith("200 1.1")
    assert "readyz check passed" in h1.stdout
    h2 = curl(daemon, "/readyz?verbose", "--http2")
    assert h2.returncode == 0, h2.stderr
    assert h2.stdout.endswith("200 2")
    assert "readyz check passed" in h2.stdout


@pytest.mark.skipif(CURL is None, reason="curl not installed")
def test_disable_http2_serving(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(["--disable-http2-serving"])
    out = curl(daemon, "/livez", "--http2")
    assert out.stdout.endswith("200 1.1"), out


@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
def test_kubectl_get_raw_readyz(daemon: Daemon, tmp_path: Path) -> None:
    config = write_kubeconfig(daemon, tmp_path / "kubeconfig")
    out = subprocess.run(
        [KUBECTL, "--kubeconfig", str(config), "get", "--raw", "/readyz?verbose"],  # type: ignore[list-item]
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[+]ping ok\n")
    assert "readyz check passed" in out.stdout


def test_hsts_and_cors(start_daemon: Callable[..., Daemon]) -> None:
    daemon = start_daemon(
        [
            "--strict-transport-security-directives=max-age=31536000,includeSubDomains,preload",
            "--cors-allowed-origins=^https://good\\.example$",
        ]
    )
    _, headers, _ = daemon.get("/livez", headers={"Origin": "https://good.example"})
    assert headers["strict-transport-security"] == "max-age=31536000; includeSubDomains; preload"
    assert headers["access-control-allow-origin"] == "https://good.example"
    status, _, _ = daemon.get(
        "/livez", method="OPTIONS", headers={"Origin": "https://good.example"}
    )
    assert status == 204
    _, headers, _ = daemon.get("/livez", headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in headers


def test_port_sharing_two_processes(start_daemon: Callable[..., Daemon]) -> None:
    first = start_daemon(["--permit-port-sharing"])
    second = start_daemon(
        ["--permit-port-sharing", f"--client-ca-file={first.workdir / 'client-ca.crt'}"],
        port=first.port,
        name="second",
        cert_dir=first.cert_dir,
        wait=False,
    )
    second.client_cert, second.client_key = first.client_cert, first.client_key
    second.wait_ready()
    # The kernel spreads new connections over both processes; all must be answered.
    for _ in range(20):
        assert first.get("/livez")[0] == 200
    assert second.proc is not None and second.proc.poll() is None
    assert first.proc is not None and first.proc.poll() is None
