"""``parse_args``: the command line -> a validated ``ServerConfig``.

The syntax is Go ``pflag``'s, as kube-apiserver uses it: ``--flag=value``, ``--flag value``, bare
``--flag`` for booleans (``--flag false`` would leave ``false`` as a positional argument, as in Go),
``-v=3``, ``-v 3``, ``-v3``, ``-h``; underscores in names are read as dashes (component-base's
``WordSepNormalizeFunc``); ``--`` ends the flags. Unlike pflag, which stops at the first problem,
every problem is collected and reported at once, so an operator fixes a unit file in one go.

``--help`` and ``--version``/``--version=raw`` skip the semantic validation, as kube-apiserver
prints help or version before it validates anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apiserver.gocompat.quote import go_quote
from apiserver.options.config import OptionsError, ServerConfig
from apiserver.options.flagtypes import FlagValueError
from apiserver.options.table import FLAGS, LONG_NAMES, SHORT_NAMES, Flag
from apiserver.options.validate import validate

COMMAND_NAME = "apiserver"


class _Parser:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {flag.name: flag.default for flag in FLAGS}
        self.explicit: set[str] = set()
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.positional: list[str] = []

    def apply(self, flag: Flag, raw: str, shown: str) -> None:
        kind = flag.flag_type
        try:
            parsed = kind.parse(raw)
        except FlagValueError as exc:
            self.errors.append(
                f"invalid argument {go_quote(raw)} for {go_quote(shown)} flag: {exc}"
            )
            return
        first = flag.name not in self.explicit
        self.values[flag.name] = kind.merge(self.values[flag.name], parsed, first)
        self.explicit.add(flag.name)
        if flag.deprecated and first:
            self.warnings.append(f"Flag {shown} has been deprecated, {flag.deprecated}")

    def long(self, arg: str, rest: list[str]) -> None:
        body = arg[2:]
        if body[:1] in ("-", "="):
            self.errors.append(f"bad flag syntax: {arg}")
            return
        name, eq, value = body.partition("=")
        key = name.replace("_", "-")
        flag = LONG_NAMES.get(key)
        if flag is None:
            self.errors.append(f"unknown flag: --{name}")
            return
        shown = f"--{key}"
        if eq:
            self.apply(flag, value, shown)
        elif flag.flag_type.no_opt_default is not None:
            self.apply(flag, flag.flag_type.no_opt_default, shown)
        elif rest:
            self.apply(flag, rest.pop(0), shown)
        else:
            self.errors.append(f"flag needs an argument: {arg}")

    def short(self, arg: str, rest: list[str]) -> None:
        shorthands = arg[1:]
        while shorthands:
            letter = shorthands[0]
            flag = SHORT_NAMES.get(letter)
            if flag is None:
                self.errors.append(f"unknown shorthand flag: {letter!r} in -{shorthands}")
                return
            no_opt = flag.flag_type.no_opt_default
            if len(shorthands) > 2 and shorthands[1] == "=":
                value, shorthands = shorthands[2:], ""
            elif no_opt is not None:
                value, shorthands = no_opt, shorthands[1:]
            elif len(shorthands) > 1:
                value, shorthands = shorthands[1:], ""
            elif rest:
                value, shorthands = rest.pop(0), ""
            else:
                self.errors.append(f"flag needs an argument: {letter!r} in -{shorthands}")
                return
            self.apply(flag, value, f"-{letter}, --{flag.name}")

    def run(self, argv: Sequence[str]) -> None:
        rest = list(argv)
        while rest:
            arg = rest.pop(0)
            if len(arg) < 2 or arg[0] != "-":
                self.positional.append(arg)
            elif arg == "--":
                self.positional.extend(rest)
                break
            elif arg.startswith("--"):
                self.long(arg, rest)
            else:
                self.short(arg, rest)
        if self.positional:
            got = "[" + " ".join(go_quote(a) for a in self.positional) + "]"
            self.errors.append(f'"{COMMAND_NAME}" does not take any arguments, got {got}')


def parse_args(argv: Sequence[str]) -> ServerConfig:
    """Parse and validate a command line (without the program name).

    Raises ``OptionsError`` listing every problem. With ``--help`` or ``--version`` (``true`` or
    ``raw``) only the syntax is checked: the caller prints and exits.
    """
    parser = _Parser()
    parser.run(argv)
    values, errors, warnings = parser.values, parser.errors, parser.warnings
    if not errors and (values["help"] or values["version"] in ("true", "raw")):
        return ServerConfig(values, parser.explicit, warnings)
    more_errors, more_warnings = validate(values, frozenset(parser.explicit))
    errors.extend(more_errors)
    if errors:
        raise OptionsError(errors)
    return ServerConfig(values, parser.explicit, warnings + more_warnings)
