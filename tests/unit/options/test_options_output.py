"""--help, --version, the twistd options class, the man page, and ineffective_flags."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest
from twisted.python import usage

from apiserver.options import (
    FLAGS,
    ApiserverOptions,
    ineffective_flags,
    parse_args,
    render_help,
    render_man,
)
from apiserver.options.table import BY_NAME, GROUPS
from apiserver.version import DEFAULT_GIT_VERSION

REPO = Path(__file__).resolve().parents[3]
MAN_PAGE = REPO / "man" / "apiserver.8"


def run_options(argv: list[str]) -> tuple[ApiserverOptions, str, int | None]:
    """Parse like twistd does; returns the options, what was printed, and the exit code."""
    options = ApiserverOptions()
    out = io.StringIO()
    options.stdout = out
    code: int | None = None
    try:
        options.parseOptions(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    return options, out.getvalue(), code


# -- --help ----------------------------------------------------------------------------------


def test_help_lists_every_flag_and_alias() -> None:
    text = render_help()
    for flag in FLAGS:
        assert re.search(rf"^\s+(-\w, )?--{re.escape(flag.name)}\b", text, re.M), flag.name
        for alias in flag.aliases:
            assert f"--{alias}" in text
            assert re.search(rf"--{re.escape(alias)} .*\(alias of --{flag.name}\)", text)


def test_help_is_grouped_in_order() -> None:
    text = render_help()
    positions = [text.index(f"\n{group} flags:\n") for group in GROUPS]
    assert positions == sorted(positions)
    generic = text[text.index("Generic flags:") : text.index("Etcd flags:")]
    assert "--secure-port" not in generic and "--request-timeout duration" in generic


def test_help_lines_look_like_pflag() -> None:
    lines = render_help().splitlines()
    assert any(
        re.fullmatch(r"      --secure-port int +Port of the HTTPS endpoint.*\(default 6443\)", ln)
        for ln in lines
    )
    assert any(re.fullmatch(r"  -v, --v Level +Log verbosity.*", ln) for ln in lines)
    assert any(re.fullmatch(r"  -h, --help +Print this help and exit\.", ln) for ln in lines)
    assert any(
        "--cert-dir string " in ln and '(default "/var/run/kubernetes")' in ln for ln in lines
    )
    assert any("--event-ttl duration" in ln and "(default 1h0m0s)" in ln for ln in lines)
    assert any("--oidc-signing-algs strings" in ln and "(default [RS256])" in ln for ln in lines)
    assert any(
        "--service-node-port-range portRange" in ln and "(default 30000-32767)" in ln
        for ln in lines
    )
    assert any(re.match(r"      --profiling +Serve", ln) for ln in lines)  # booleans: no type
    assert any("--version version[=true]" in ln for ln in lines)
    deprecated = [ln for ln in lines if "--admission-control strings" in ln]
    assert deprecated and "(DEPRECATED: use --enable-admission-plugins" in deprecated[0]
    goaway = [ln for ln in lines if "--goaway-chance float" in ln]
    assert goaway and "(default" not in goaway[0]  # zero values show no default


def test_help_columns_are_aligned_per_group() -> None:
    text = render_help()
    for group in GROUPS:
        section = text.split(f"{group} flags:\n\n", 1)[1].split("\n\n", 1)[0]
        starts = {len(re.match(r"(\s+-\S.*?   )\S", ln).group(1)) for ln in section.splitlines()}  # type: ignore[union-attr]
        assert len(starts) == 1, group


# -- ApiserverOptions ---------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--help"], ["-h"], ["--secure-port=1", "-h"]])
def test_help_prints_and_exits_zero(argv: list[str]) -> None:
    _, out, code = run_options(argv)
    assert code == 0
    assert out == render_help()


def test_get_usage_is_the_help() -> None:
    assert ApiserverOptions().getUsage() == render_help()
    assert render_help() in str(ApiserverOptions())


def test_version_prints_and_exits_zero() -> None:
    _, out, code = run_options(["--version"])
    assert (out, code) == (f"Kubernetes {DEFAULT_GIT_VERSION}\n", 0)
    assert out == "Kubernetes v1.35.0\n"
    _, out, code = run_options(["--version=true", "--secure-port=0"])  # not validated
    assert (out, code) == ("Kubernetes v1.35.0\n", 0)


def test_version_raw_prints_the_whole_struct() -> None:
    _, out, code = run_options(["--version=raw"])
    assert code == 0
    assert out.startswith('version.Info{Major:"1", Minor:"35", ')
    assert 'GitVersion:"v1.35.0"' in out and out.endswith("}\n")
    for field in ("GitCommit", "GitTreeState", "BuildDate", "GoVersion", "Compiler", "Platform"):
        assert f"{field}:" in out


def test_version_override_sets_the_reported_version_and_continues() -> None:
    options, out, code = run_options(["--version=v1.36.1"])
    assert (out, code) == ("", None)
    assert options.config.version == "v1.36.1"
    options, out, code = run_options(["--version=false"])
    assert (out, code) == ("", None)
    assert options.config.version == DEFAULT_GIT_VERSION


def test_version_then_override_prints_the_override() -> None:
    _, out, code = run_options(["--version=v1.36.1", "--version"])
    assert (out, code) == ("Kubernetes v1.35.0\n", 0)  # last occurrence wins, as in pflag
    _, out, code = run_options(["--version=v1.36.1", "--version=raw"])
    assert 'GitVersion:"v1.35.0"' in out


def test_options_store_the_config() -> None:
    options, out, code = run_options(["--secure-port=8443", "--etcd-servers=http://e:2379"])
    assert (out, code) == ("", None)
    assert options.config.secure_port == 8443
    assert options.config.store_servers == ("http://e:2379",)
    assert options["secure-port"] == 8443


def test_errors_become_one_usage_error() -> None:
    with pytest.raises(usage.UsageError) as info:
        ApiserverOptions().parseOptions(["--nope", "--secure-port=0", "--goaway-chance=1"])
    assert str(info.value).splitlines() == [
        "unknown flag: --nope",
        "--secure-port 0 must be between 1 and 65535, inclusive. It cannot be turned off with 0",
        "--goaway-chance can not be less than 0 or greater than 0.02",
    ]


def test_parses_as_a_twistd_subcommand() -> None:
    class Parent(usage.Options):  # the way twistd's ServerOptions hands over to a plugin
        optFlags = [["nodaemon", "n", "don't daemonize"]]
        subCommands = [("apiserver", None, ApiserverOptions, "test")]

    parent = Parent()
    parent.parseOptions(["--nodaemon", "apiserver", "--secure-port", "9443", "-v=2"])
    config = parent.subOptions.config
    assert (config.secure_port, config.v) == (9443, 2)


# -- man page -----------------------------------------------------------------------------------


def test_man_page_is_up_to_date() -> None:
    assert MAN_PAGE.read_text() == render_man(), (
        "man/apiserver.8 is stale: run `python -m apiserver.options.manpage > man/apiserver.8`"
    )


def test_man_page_is_deterministic_and_complete() -> None:
    page = render_man()
    assert page == render_man()
    assert page.startswith('.\\" Generated')
    assert '.TH APISERVER 8 ""' in page
    for section in (
        "NAME",
        "SYNOPSIS",
        "DESCRIPTION",
        "OPTIONS",
        "FILES",
        "SIGNALS",
        "EXIT STATUS",
    ):
        assert f"\n.SH {section}\n" in page
    assert "twistd" in page and "\\fB\\-\\-data\\-dir\\fR" in page
    for flag in FLAGS:
        assert "\\-\\-" + flag.name.replace("-", "\\-") + "\\fR" in page, flag.name
        for alias in flag.aliases:
            assert alias.replace("-", "\\-") in page
    for group in GROUPS:
        assert f'.SS "{group} flags"' in page
    assert "/var/lib/apiserver" in page and "/var/run/kubernetes" in page
    assert "SIGTERM" in page and "SIGINT" in page and "second" in page
    assert not re.search(r"^[.'](?!\\\"|TH|SH|SS|TP|PP|br|B |RI |BR )", page, re.M)


def man_entries() -> dict[str, str]:
    """Flag name -> the text of its entry in the man page."""
    entries = {}
    for chunk in render_man().split("\n.TP\n")[1:]:
        tag, _, body = chunk.partition("\n")
        match = re.search(r"\\fB\\-\\-((?:[a-z0-9]|\\-)+)\\fR", tag)
        if match:
            entries[match.group(1).replace("\\-", "-")] = body
    return entries


def test_man_page_marks_unimplemented_flags() -> None:
    sentence = (
        "Accepted and validated; not acted on yet: the server logs at start\\-up that it has "
        "no effect."
    )
    entries = man_entries()
    assert set(entries) == set(BY_NAME)
    for flag in FLAGS:
        entry = entries[flag.name]
        assert (sentence in entry) == (not flag.implemented), flag.name
        assert ("Deprecated:" in entry) == bool(flag.deprecated), flag.name
        assert "Default: " in entry


def test_manpage_module_prints_the_page() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "apiserver.options.manpage"],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO / "src"), "PATH": ""},
    )
    assert result.stdout == render_man()
    assert result.stderr == ""


# -- ineffective_flags ---------------------------------------------------------------------------


def test_no_ineffective_flags_by_default() -> None:
    assert ineffective_flags(parse_args([])) == []


def test_ineffective_flags_names_unimplemented_non_default_flags() -> None:
    config = parse_args(
        [
            "--secure-port=7443",  # implemented
            "--goaway-chance=0.01",  # implemented
            "--enable-priority-and-fairness=false",  # implemented
            "--enable-logs-handler=false",  # not implemented, but the default value
            "--kubelet-timeout=10s",  # alias of a not implemented flag
        ]
    )
    assert ineffective_flags(config) == [
        "nodeagent-timeout",
    ]


def test_implemented_flags_are_never_ineffective() -> None:
    config = parse_args(["--store-servers=http://a:2379", "-v=5", "--profiling=false"])
    assert ineffective_flags(config) == []
    assert BY_NAME["profiling"].implemented
