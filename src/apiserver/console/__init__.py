"""The operator console at ``/ui/`` (docs/console.md).

A Klein application (:mod:`apiserver.console.routes`) that serves one page and its static
assets; the browser reads everything it shows from the real API with the user's bearer
token, so authorization decides what each user sees exactly as it does for kubectl.
:func:`console_handler` is what the handler chain calls for ``/ui`` paths
(:class:`apiserver.http.app.App` ``console=``).
"""

from __future__ import annotations

from collections.abc import Callable

from apiserver.console.relay import relay
from apiserver.console.routes import Console
from apiserver.http.request import HTTPRequest

__all__ = ["Console", "console_handler"]


def console_handler(console: Console | None = None) -> Callable[[HTTPRequest], None]:
    """The console's routes as a handler of the server's own requests."""
    return relay((console or Console()).app.resource())
