"""``--help`` text, laid out the way kube-apiserver (cobra + pflag) lays it out.

One section per flag group (``Generic flags:``), flags sorted by name, the type word after the
name, the columns aligned within a section, ``(default X)`` when the default is not the type's
zero value, and ``(DEPRECATED: ...)`` for deprecated flags (pflag hides those; we show them, so that
nobody wonders whether a flag from an old unit file is still accepted). Each upstream alias gets a
line of its own saying which flag it stands for. Lines are not wrapped.
"""

from __future__ import annotations

from apiserver.options.flagtypes import is_zero
from apiserver.options.table import FLAGS, GROUPS, Flag

DESCRIPTION = (
    "The API server validates and configures data for API objects and serves REST operations on "
    "them; it is the front end to the cluster's shared state. This server implements the "
    "events.k8s.io/v1 Event resource and the health endpoints (/healthz, /livez, /readyz) of "
    "kube-apiserver, and accepts kube-apiserver's command line."
)


def default_text(flag: Flag) -> str | None:
    """What ``(default ...)`` shows for ``flag``, or None when pflag would show nothing."""
    if is_zero(flag.type, flag.default):
        return None
    text = flag.flag_type.format(flag.default)
    if flag.type == "string":  # pflag quotes the defaults of string flags only
        return f'"{text}"'
    return text


def _left(flag: Flag, name: str) -> str:
    if flag.short and name == flag.name:
        line = f"  -{flag.short}, --{name}"
    else:
        line = f"      --{name}"
    label = flag.flag_type.label
    return f"{line} {label}" if label else line


def _usage(flag: Flag) -> str:
    text = flag.help
    default = default_text(flag)
    if default is not None:
        text += f" (default {default})"
    if flag.deprecated:
        text += f" (DEPRECATED: {flag.deprecated})"
    return text


def render_group(group: str) -> str:
    """The lines of one section, aligned like pflag's ``FlagUsages``."""
    rows: list[tuple[str, str]] = []
    for flag in sorted((f for f in FLAGS if f.group == group), key=lambda f: f.name):
        rows.append((_left(flag, flag.name), _usage(flag)))
        for alias in flag.aliases:
            rows.append((_left(flag, alias), f"(alias of --{flag.name})"))
    width = max(len(left) for left, _ in rows)
    return "".join(f"{left.ljust(width)}   {usage}\n" for left, usage in rows)


def render_help() -> str:
    """The whole ``--help`` output."""
    parts = [
        DESCRIPTION,
        "",
        "Usage:",
        "  apiserver [flags]",
        "  twistd apiserver [flags]",
        "",
    ]
    for group in GROUPS:
        if any(flag.group == group for flag in FLAGS):
            parts.append(f"{group} flags:")
            parts.append("")
            parts.append(render_group(group))
    return "\n".join(parts)
