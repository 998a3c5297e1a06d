"""The version this server reports on ``/version`` and ``--version``.

We target Kubernetes 1.35 behaviour, so we report ourselves as v1.35.0; clients
use the reported minor for their version-skew warnings. ``--version=vX.Y.Z`` overrides it, as
kube-apiserver's ``--version`` flag does (component-base/version/verflag).
"""

from __future__ import annotations

import platform
import re
import sys

import attrs

DEFAULT_GIT_VERSION = "v1.35.0"
GIT_COMMIT = "0" * 40
BUILD_DATE = "2026-11-22T00:00:00Z"

_SEMVER = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:[-+][0-9A-Za-z.+-]*)?$")


@attrs.frozen
class VersionInfo:
    """Fields in the order kube-apiserver's ``/version`` prints them (apimachinery version.Info)."""

    major: str
    minor: str
    gitVersion: str
    gitCommit: str
    gitTreeState: str
    buildDate: str
    goVersion: str
    compiler: str
    platform: str
    emulationMajor: str
    emulationMinor: str
    minCompatibilityMajor: str
    minCompatibilityMinor: str

    def as_dict(self) -> dict[str, str]:
        return attrs.asdict(self)


def parse_semver(value: str) -> tuple[int, int, int] | None:
    """``vX.Y.Z`` (with an optional pre-release or build suffix) as numbers, else None."""
    match = _SEMVER.match(value)
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2)), int(match.group(3))


def _platform() -> str:
    machine = platform.machine().lower()
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)
    return f"{sys.platform}/{arch}"


def kube_component_version(
    entries: tuple[str, ...] | list[str], component: str = "kube"
) -> tuple[int, int] | None:
    """The ``major.minor`` given for ``component`` in ``--emulated-version`` or
    ``--min-compatibility-version`` (``[component=]major.minor`` entries, already
    validated), or None."""
    for entry in entries:
        name, eq, version = entry.partition("=")
        if not eq:
            name, version = "kube", entry
        if name.strip() != component:
            continue
        major, _, minor = version.strip().partition(".")
        try:
            return int(major), int(minor.split(".")[0])
        except ValueError:
            return None
    return None


def version_info(
    git_version: str = DEFAULT_GIT_VERSION,
    emulated: tuple[int, int] | None = None,
    min_compatibility: tuple[int, int] | None = None,
) -> VersionInfo:
    """The ``/version`` document for ``git_version`` (default: ours).

    ``emulationMajor``/``emulationMinor`` are ``--emulated-version`` (default: the binary's
    version) and ``minCompatibilityMajor``/``minCompatibilityMinor`` are
    ``--min-compatibility-version`` (default: one minor below the emulated version), as
    k8s.io/component-base ``compatibility`` reports them in ``/version``.
    """
    parsed = parse_semver(git_version) or (1, 35, 0)
    major, minor = str(parsed[0]), str(parsed[1])
    emu = emulated or (parsed[0], parsed[1])
    compat = min_compatibility or (emu[0], max(emu[1] - 1, 0))
    return VersionInfo(
        major=major,
        minor=minor,
        gitVersion=git_version,
        gitCommit=GIT_COMMIT,
        gitTreeState="clean",
        buildDate=BUILD_DATE,
        goVersion=f"python{platform.python_version()}",
        compiler="cpython",
        platform=_platform(),
        emulationMajor=str(emu[0]),
        emulationMinor=str(emu[1]),
        minCompatibilityMajor=str(compat[0]),
        minCompatibilityMinor=str(compat[1]),
    )
