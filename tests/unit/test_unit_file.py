"""etc/apiserver.service and etc/apiserver.env: the directives operators rely on, what
``systemd-analyze verify`` and ``systemd-analyze security --offline=yes`` say of the unit, and
why ``MemoryDenyWriteExecute=`` is off.

``systemd-analyze`` is in Debian's ``systemd`` package; where it is missing those two tests
are skipped (the rest still runs). Both run offline: no systemd needs to be running.
"""

from __future__ import annotations

import ctypes
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "etc" / "apiserver.service"
ENV_FILE = REPO / "etc" / "apiserver.env"
ANALYZE = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(
    ANALYZE is None, reason="systemd-analyze is missing (Debian package: systemd)"
)

#: ``systemd-analyze security`` rates 0 (hardened) to 10 (unprotected); up to 2.5 is "OK".
MAX_EXPOSURE = 2.5


def directives(text: str) -> list[tuple[str, str, str]]:
    """(section, key, value) for each assignment, in order (a key may repeat)."""
    found: list[tuple[str, str, str]] = []
    section = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, _, value = line.partition("=")
        found.append((section, key.strip(), value.strip()))
    return found


def service() -> dict[str, list[str]]:
    """The [Service] section: every value each key was given."""
    values: dict[str, list[str]] = {}
    for section, key, value in directives(UNIT.read_text()):
        if section == "Service":
            values.setdefault(key, []).append(value)
    return values


def test_readiness_watchdog_and_files() -> None:
    unit = service()
    assert unit["Type"] == ["notify"]
    assert unit["NotifyAccess"] == ["main"]
    assert unit["WatchdogSec"] == ["30s"]
    assert unit["KillSignal"] == ["SIGTERM"]
    assert unit["LimitNOFILE"] == ["65536"]
    assert unit["EnvironmentFile"] == ["-/etc/default/apiserver"]
    # Where `make install` puts twistd; the flags come from the environment file.
    assert shlex.split(unit["ExecStart"][0]) == [
        "/opt/apiserver/bin/twistd",
        "--nodaemon",
        "--pidfile=",
        "apiserver",
        "$APISERVER_FLAGS",
    ]


def test_sandbox_directives() -> None:
    unit = service()
    expected = {
        "DynamicUser": "yes",
        "StateDirectory": "apiserver",
        "LogsDirectory": "apiserver",
        "RuntimeDirectory": "apiserver",
        "UMask": "0077",
        "NoNewPrivileges": "yes",
        "ProtectSystem": "strict",
        "ProtectHome": "yes",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes",
        "ProtectClock": "yes",
        "ProtectHostname": "yes",
        "RestrictNamespaces": "yes",
        "LockPersonality": "yes",
        "RestrictRealtime": "yes",
        "RestrictSUIDSGID": "yes",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "SystemCallArchitectures": "native",
        # No capabilities: the commented lines in the unit add CAP_NET_BIND_SERVICE for 443.
        "CapabilityBoundingSet": "",
        "AmbientCapabilities": "",
    }
    assert {key: unit.get(key, ["<unset>"])[-1] for key in expected} == expected
    assert unit["SystemCallFilter"][0] == "@system-service"
    commented = UNIT.read_text()
    assert "#   CapabilityBoundingSet=CAP_NET_BIND_SERVICE\n" in commented
    assert "#   AmbientCapabilities=CAP_NET_BIND_SERVICE\n" in commented


def test_environment_file_writes_only_where_the_unit_allows() -> None:
    """--data-dir and --cert-dir are under StateDirectory= (the rest is read-only)."""
    assignments = {key: value for _, key, value in directives(ENV_FILE.read_text())}
    flags = shlex.split(assignments["APISERVER_FLAGS"].strip('"'))
    assert "--data-dir=/var/lib/apiserver" in flags
    assert "--cert-dir=/var/lib/apiserver/certs" in flags
    assert "--secure-port=6443" in flags  # needs no capability


def fake_root(tmp_path: Path) -> Path:
    """A root where the unit is installed and its ExecStart binary exists, as after
    ``make install``, so that ``verify --root`` can check the path."""
    root = tmp_path / "root"
    twistd = root / "opt" / "apiserver" / "bin" / "twistd"
    twistd.parent.mkdir(parents=True)
    twistd.write_text("#!/bin/sh\n")
    twistd.chmod(0o755)
    units = root / "etc" / "systemd" / "system"
    units.mkdir(parents=True)
    shutil.copy(UNIT, units / "apiserver.service")
    return root


@needs_analyze
def test_systemd_analyze_verify(tmp_path: Path) -> None:
    """No unknown or invalid directive, ExecStart exists, the man page is found.

    ``--recursive-errors=no``: the empty root has no sysinit.target and the like, which the
    unit's default dependencies would otherwise pull in. ``man apiserver(8)`` (from
    Documentation=) is looked up in a MANPATH holding the repository's page.
    """
    assert ANALYZE is not None
    root = fake_root(tmp_path)
    man8 = tmp_path / "man" / "man8"
    man8.mkdir(parents=True)
    shutil.copy(REPO / "man" / "apiserver.8", man8 / "apiserver.8")
    result = subprocess.run(
        [
            ANALYZE,
            "verify",
            f"--root={root}",
            "--recursive-errors=no",
            "/etc/systemd/system/apiserver.service",
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "MANPATH": str(tmp_path / "man")},
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


@needs_analyze
def test_systemd_analyze_verify_fails_on_a_misspelt_directive(tmp_path: Path) -> None:
    """The check above can fail: a typo in a directive is reported."""
    assert ANALYZE is not None
    root = fake_root(tmp_path)
    installed = root / "etc" / "systemd" / "system" / "apiserver.service"
    installed.write_text(installed.read_text().replace("ProtectHome=", "ProtectHom="))
    result = subprocess.run(
        [
            ANALYZE,
            "verify",
            "--man=no",
            f"--root={root}",
            "--recursive-errors=no",
            "/etc/systemd/system/apiserver.service",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert "Unknown key 'ProtectHom'" in result.stderr


def exposure(unit: Path) -> float:
    assert ANALYZE is not None
    result = subprocess.run(
        [ANALYZE, "security", "--offline=yes", "--no-pager", str(unit)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    match = re.search(
        r"Overall exposure level for apiserver\.service: (\d+\.\d+) ([A-Z]+)", result.stdout
    )
    assert match, result.stdout + result.stderr
    return float(match.group(1))


@needs_analyze
def test_systemd_analyze_security_exposure_is_ok(tmp_path: Path) -> None:
    assert exposure(UNIT) <= MAX_EXPOSURE
    # The measure can fail: the same unit without its sandbox is rated far above it.
    bare = tmp_path / "apiserver.service"
    kept = [
        line
        for line in UNIT.read_text().splitlines()
        if not line.startswith(("Protect", "Private", "Restrict", "SystemCall", "Capability"))
        and not line.startswith(("DynamicUser", "NoNewPrivileges"))
    ]
    bare.write_text("\n".join(kept) + "\n")
    assert exposure(bare) > MAX_EXPOSURE


@needs_analyze
def test_the_port_443_variant_is_still_ok(tmp_path: Path) -> None:
    """The unit's recipe for a port below 1024 (one capability, no private user namespace)
    keeps the rating within the target."""
    text = UNIT.read_text()
    assert "set PrivateUsers=no further down" in text
    variant = tmp_path / "apiserver.service"
    variant.write_text(
        text.replace("\nCapabilityBoundingSet=\n", "\nCapabilityBoundingSet=CAP_NET_BIND_SERVICE\n")
        .replace("\nAmbientCapabilities=\n", "\nAmbientCapabilities=CAP_NET_BIND_SERVICE\n")
        .replace("\nPrivateUsers=yes\n", "\nPrivateUsers=no\n")
    )
    assert variant.read_text().count("=CAP_NET_BIND_SERVICE\n") == 4  # 2 commented, 2 set
    assert exposure(variant) <= MAX_EXPOSURE


PR_SET_MDWE = 65
PR_MDWE_REFUSE_EXEC_GAIN = 1

# What every TLS context of the server does (apiserver/tls/context.py sets an ALPN select
# callback, and a verify callback when client certificates are asked for), under the
# kernel's write-xor-execute for the process: the same rule MemoryDenyWriteExecute=yes
# enforces.
_UNDER_WX = textwrap.dedent(
    f"""
    import ctypes, sys
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl({PR_SET_MDWE}, {PR_MDWE_REFUSE_EXEC_GAIN}, 0, 0, 0) != 0:
        sys.exit(3)
    from OpenSSL import SSL
    context = SSL.Context(SSL.TLS_METHOD)
    try:
        context.set_alpn_select_callback(lambda connection, offered: offered[0])
        context.set_verify(SSL.VERIFY_PEER, lambda *args: True)
    except MemoryError as error:
        print(error)
        sys.exit(4)
    """
)


def _kernel_has_mdwe() -> bool:
    """PR_SET_MDWE exists from Linux 6.3 on; PR_GET_MDWE answers -1 (EINVAL) before."""
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.prctl(PR_SET_MDWE + 1, 0, 0, 0, 0) >= 0)


@pytest.mark.skipif(not _kernel_has_mdwe(), reason="the kernel has no PR_SET_MDWE (Linux < 6.3)")
def test_memory_deny_write_execute_is_off_exactly_while_cffi_needs_wx_memory() -> None:
    """pyOpenSSL's callbacks are cffi ``ffi.callback()`` closures, which cffi places in
    write+execute memory: under W^X the server could not build its TLS context. Should a
    cffi release stop needing it, this fails and asks for MemoryDenyWriteExecute=yes."""
    result = subprocess.run(
        [sys.executable, "-c", _UNDER_WX], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode in (0, 4), result.stderr
    needs_wx = result.returncode == 4
    if needs_wx:
        assert "write+execute memory" in result.stdout
    assert service().get("MemoryDenyWriteExecute", ["no"])[-1] == ("no" if needs_wx else "yes")
