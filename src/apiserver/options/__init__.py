"""Command-line options: one declarative table of every flag, and what is derived from it.

- ``FLAGS`` / ``Flag`` (``table``): every flag with type, default, group, help, aliases, status.
- ``parse_args`` (``parse``): pflag-style parsing plus validation -> frozen ``ServerConfig``,
  or ``OptionsError`` listing every problem.
- ``ApiserverOptions`` (``twistd``): the twistd plugin's ``usage.Options``.
- ``render_help`` (``help``) and ``render_man`` (``manpage``): ``--help`` and ``apiserver(8)``.
- ``ineffective_flags`` (``config``): flags a user set that the server does not act on yet.
"""

from apiserver.options.config import OptionsError, ServerConfig, ineffective_flags
from apiserver.options.help import render_help
from apiserver.options.parse import parse_args
from apiserver.options.table import FLAGS, Flag
from apiserver.options.twistd import ApiserverOptions


def render_man() -> str:
    """The troff page apiserver(8) (see ``manpage``; imported lazily so that
    ``python -m apiserver.options.manpage`` does not import the module twice)."""
    from apiserver.options.manpage import render_man as render

    return render()


__all__ = [
    "FLAGS",
    "ApiserverOptions",
    "Flag",
    "OptionsError",
    "ServerConfig",
    "ineffective_flags",
    "parse_args",
    "render_help",
    "render_man",
]
