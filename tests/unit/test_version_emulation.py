"""/version reflects --emulated-version and --min-compatibility-version (apiserver.version)."""

from __future__ import annotations

from apiserver.options import parse_args
from apiserver.version import kube_component_version, version_info


def test_defaults_are_the_binary_version_and_one_minor_below() -> None:
    info = version_info("v1.35.0")
    assert (info.emulationMajor, info.emulationMinor) == ("1", "35")
    assert (info.minCompatibilityMajor, info.minCompatibilityMinor) == ("1", "34")


def test_emulated_and_min_compatibility_versions_are_reported() -> None:
    config = parse_args(["--emulated-version=kube=1.33", "--min-compatibility-version=1.32"])
    info = version_info(
        "v1.35.0",
        emulated=kube_component_version(config.emulated_version),
        min_compatibility=kube_component_version(config.min_compatibility_version),
    )
    assert (info.major, info.minor, info.gitVersion) == ("1", "35", "v1.35.0")
    assert (info.emulationMajor, info.emulationMinor) == ("1", "33")
    assert (info.minCompatibilityMajor, info.minCompatibilityMinor) == ("1", "32")
    # Without --min-compatibility-version: one minor below the emulated version.
    only = version_info("v1.35.0", emulated=(1, 33))
    assert only.minCompatibilityMinor == "32"


def test_other_components_are_not_kubes() -> None:
    assert kube_component_version(("other=1.2",)) is None
    assert kube_component_version(("1.34",)) == (1, 34)
