"""``--http2-max-streams-per-connection``: the MAX_CONCURRENT_STREAMS we advertise.

kube-apiserver advertises 100 when the flag is 0 (spec/auth-audit-tls.md §10), which is also
the h2 library's default, so nothing changes then. For another value, twisted.web offers no
setting: its protocol switcher builds ``twisted.web._http2.H2Connection`` by name, so we
install a subclass there that rewrites the local settings before the preface is sent. One
server runs per process, so a process-wide setting is what the flag means here.
"""

from __future__ import annotations

from typing import Any

from h2.settings import SettingCodes, Settings
from twisted.web import _http2, http

DEFAULT_MAX_STREAMS = 100


def configure_http2(max_streams: int) -> None:
    """Advertise ``max_streams`` (0: the default 100) on every new HTTP/2 connection."""
    streams = max_streams or DEFAULT_MAX_STREAMS
    base = _http2.H2Connection

    class LimitedH2Connection(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            conn = self.conn
            conn.local_settings = Settings(
                client=False,
                initial_values={
                    SettingCodes.MAX_CONCURRENT_STREAMS: streams,
                    SettingCodes.MAX_HEADER_LIST_SIZE: conn.DEFAULT_MAX_HEADER_LIST_SIZE,
                },
            )

    http.H2Connection = LimitedH2Connection  # type: ignore[misc]
