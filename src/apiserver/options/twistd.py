"""``ApiserverOptions``: the options of ``twistd apiserver [flags]``.

twistd's own parser is getopt-based and knows nothing of pflag syntax (``-v=3``, ``--flag value``
for any flag, repeated list flags), so ``parseOptions`` hands the whole argument list to
``parse_args``. ``--help`` and ``--version`` print and exit 0 as kube-apiserver's do
(component-base ``verflag``); ``--version=vX.Y.Z`` only changes the reported version.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any, TextIO

from twisted.python import usage

from apiserver.options.config import OptionsError, ServerConfig
from apiserver.options.help import render_help
from apiserver.options.parse import parse_args
from apiserver.version import VersionInfo, version_info

# Go field order of apimachinery's version.Info, as ``%#v`` prints it.
_GO_VERSION_FIELDS = (
    ("Major", "major"),
    ("Minor", "minor"),
    ("EmulationMajor", "emulationMajor"),
    ("EmulationMinor", "emulationMinor"),
    ("MinCompatibilityMajor", "minCompatibilityMajor"),
    ("MinCompatibilityMinor", "minCompatibilityMinor"),
    ("GitVersion", "gitVersion"),
    ("GitCommit", "gitCommit"),
    ("GitTreeState", "gitTreeState"),
    ("BuildDate", "buildDate"),
    ("GoVersion", "goVersion"),
    ("Compiler", "compiler"),
    ("Platform", "platform"),
)


def format_version_raw(info: VersionInfo) -> str:
    """``version.Info{Major:"1", Minor:"35", ...}`` like Go's ``fmt.Printf("%#v", info)``."""
    fields = info.as_dict()
    body = ", ".join(f'{go}:"{fields[py]}"' for go, py in _GO_VERSION_FIELDS)
    return f"version.Info{{{body}}}"


def version_output(config: ServerConfig) -> str | None:
    """What ``--version`` prints (without the newline), or None if nothing is to be printed."""
    raw = config.values["version"]
    if raw == "true":
        return f"Kubernetes {config.version}"
    if raw == "raw":
        return format_version_raw(version_info(config.version))
    return None


class ApiserverOptions(usage.Options):
    """Options for the ``apiserver`` twistd plugin; the parsed result is ``self.config``."""

    synopsis = "Usage: twistd [twistd options] apiserver [flags]"
    longdesc = "Kubernetes-compatible API server; see apiserver(8) or --help for the flags."

    config: ServerConfig
    stdout: TextIO | None = None  # where --help/--version print; sys.stdout when None
    #: The plugin's own arguments as given (``--workers`` starts its workers with them).
    argv: tuple[str, ...] = ()

    def parseOptions(self, options: Sequence[str] | None = None) -> None:
        """Parse with the flag table; print-and-exit for --help/--version."""
        if options is None:
            options = sys.argv[1:]
        try:
            config = parse_args(list(options))
        except OptionsError as exc:
            raise usage.UsageError(str(exc)) from exc
        self.config = config
        self.argv = tuple(options)
        self.update(config.values)
        out = self.stdout or sys.stdout
        if config.help:
            out.write(render_help())
            out.flush()
            raise SystemExit(0)
        printed = version_output(config)
        if printed is not None:
            out.write(printed + "\n")
            out.flush()
            raise SystemExit(0)
        self.postOptions()

    def getUsage(self, width: Any = None) -> str:
        return render_help()
