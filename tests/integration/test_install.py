"""``make install`` and ``make uninstall``: the server as a system service.

One install into a temporary prefix, with every destination overridden, runs what it
installed (``twistd apiserver --help``, ``apiserver --version``, the man page) and then
uninstalls; one staged under ``DESTDIR`` with the default paths checks that the tree names
its final paths (so ``systemd-analyze verify --root`` accepts it) and that uninstall takes
the same DESTDIR. Each creates a virtualenv and lets pip install the package and its
dependencies (from pip's cache or the package index): about 15 s each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")
ANALYZE = shutil.which("systemd-analyze")

pytestmark = pytest.mark.skipif(MAKE is None, reason="make is missing")


def make(*args: str) -> subprocess.CompletedProcess[str]:
    assert MAKE is not None
    # The test's own Python makes the virtualenv (the Makefile's default is python3).
    result = subprocess.run(
        [MAKE, "--no-print-directory", "-C", str(REPO), *args, f"PYTHON={base_python()}"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result


def base_python() -> str:
    """The interpreter the test's virtualenv was made from."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = Path(sys.base_prefix) / "bin" / version
    return str(candidate) if candidate.exists() else sys.executable


def run(*argv: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run(
        [str(a) for a in argv],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
        timeout=120,
        check=False,
    )


def render_man(page: Path) -> str:
    if shutil.which("man"):
        result = run("man", "-l", "-P", "cat", page)
    else:
        result = run("groff", "-man", "-Tutf8", page)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_install_runs_and_uninstall_removes_it(tmp_path: Path) -> None:
    prefix = tmp_path / "opt"
    paths = {
        "PREFIX": prefix,
        "MANDIR": tmp_path / "man" / "man8",
        "UNITDIR": tmp_path / "units",
        "ENVDIR": tmp_path / "default",
    }
    variables = [f"{k}={v}" for k, v in paths.items()]
    make("install", *variables)

    installed = [
        prefix / "bin" / "twistd",
        prefix / "bin" / "apiserver",
        paths["MANDIR"] / "apiserver.8",
        paths["UNITDIR"] / "apiserver.service",
        paths["ENVDIR"] / "apiserver",
    ]
    assert [p for p in installed if not p.exists()] == []

    # The installed copy runs on its own: no PYTHONPATH, outside the repository.
    helped = run(prefix / "bin" / "twistd", "apiserver", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "twistd apiserver [flags]" in helped.stdout
    assert "--secure-port" in helped.stdout
    version = run(prefix / "bin" / "apiserver", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, "Kubernetes v1.35.0")
    # Under ProtectSystem=strict twistd could not write its plugin cache: install did.
    (cache,) = prefix.glob("lib/python3*/site-packages/twisted/plugins/dropin.cache")
    assert cache.stat().st_size > 0

    page = render_man(paths["MANDIR"] / "apiserver.8")
    assert "apiserver - Kubernetes-compatible API server" in page
    assert "--secure-port" in page

    # The unit runs what this install put in place, with its environment file.
    unit = (paths["UNITDIR"] / "apiserver.service").read_text()
    assert f"ExecStart={prefix}/bin/twistd --nodaemon --pidfile= apiserver" in unit
    assert f"EnvironmentFile=-{paths['ENVDIR']}/apiserver\n" in unit
    assert "/opt/apiserver" not in unit
    assert (paths["ENVDIR"] / "apiserver").read_bytes() == (REPO / "etc/apiserver.env").read_bytes()
    # Readable by the service's dynamic user, whatever root's umask.
    assert all(p.stat().st_mode & 0o004 for p in installed)

    # A second install keeps an edited environment file; uninstall keeps it too.
    edited = "APISERVER_FLAGS=--secure-port=7443\n"
    (paths["ENVDIR"] / "apiserver").write_text(edited)
    make("install", *variables)
    assert (paths["ENVDIR"] / "apiserver").read_text() == edited
    out = make("uninstall", *variables).stdout
    assert "was changed: kept" in out
    assert [p for p in installed if p.exists()] == [paths["ENVDIR"] / "apiserver"]
    assert not prefix.exists()

    # An unedited one goes.
    shutil.copy(REPO / "etc" / "apiserver.env", paths["ENVDIR"] / "apiserver")
    make("uninstall", *variables)
    assert not (paths["ENVDIR"] / "apiserver").exists()


def test_destdir_stages_the_default_layout(tmp_path: Path) -> None:
    stage = tmp_path / "stage"
    make("install", f"DESTDIR={stage}")
    prefix = stage / "opt" / "apiserver"
    installed = [
        prefix / "bin" / "twistd",
        prefix / "bin" / "apiserver",
        stage / "usr" / "local" / "share" / "man" / "man8" / "apiserver.8",
        stage / "etc" / "systemd" / "system" / "apiserver.service",
        stage / "etc" / "default" / "apiserver",
    ]
    assert [p for p in installed if not p.exists()] == []
    # The scripts name the interpreter where the tree will be, not where it was staged.
    for script in ("twistd", "apiserver"):
        assert (prefix / "bin" / script).read_text().splitlines()[0] == (
            "#!/opt/apiserver/bin/python"
        )
    assert str(stage) not in (prefix / "pyvenv.cfg").read_text()
    # Until then, the staged interpreter runs it.
    version = run(prefix / "bin" / "python", prefix / "bin" / "apiserver", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, "Kubernetes v1.35.0")
    unit = installed[3].read_text()
    assert "ExecStart=/opt/apiserver/bin/twistd " in unit
    assert unit == (REPO / "etc" / "apiserver.service").read_text()

    if ANALYZE is not None:
        verified = run(
            ANALYZE,
            "verify",
            "--man=no",
            f"--root={stage}",
            "--recursive-errors=no",
            "/etc/systemd/system/apiserver.service",
        )
        assert (verified.returncode, verified.stderr) == (0, "")

    make("uninstall", f"DESTDIR={stage}")
    assert [p for p in installed if p.exists()] == []
    assert not prefix.exists()
