"""Authentication, impersonation and authorization (spec/auth-audit-tls.md §0-§8, §11).

``build_auth(config, reactor, store)`` returns the filter the HTTP app calls for every
request (:class:`apiserver.http.app.AuthCheck`), or None when everyone is allowed.
"""

from __future__ import annotations

from typing import Any

from apiserver.http.app import AuthCheck


def build_auth(config: Any, reactor: Any, store: Any) -> AuthCheck | None:
    """The configured filter chain; None until the authenticators and authorizers land."""
    return None
