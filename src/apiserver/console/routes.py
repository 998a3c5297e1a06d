"""The console's Klein application: the page at ``/ui/`` and its static assets.

Klein is where its routing and templating fit and speed does not matter: the API itself is
routed by :class:`apiserver.http.app.Router` (docs/architecture.md, "Why the HTTP layer and
the router are our own"). Routes are relative to ``/ui`` (the mount point):

- ``/ui`` redirects to ``/ui/``, so the page's relative links resolve under it;
- ``/ui/`` is the page (:class:`apiserver.console.page.ConsolePage`);
- ``/ui/static/<name>`` is one asset (:mod:`apiserver.console.assets`), 304 on a matching
  ``If-None-Match``;
- anything else is a plain-text 404, as the server's other non-API paths answer.

Every answer carries a Content-Security-Policy that allows only this origin (no inline
script, no other host) and forbids framing, ``nosniff`` and ``no-referrer`` (a token in the
URL fragment is never sent anywhere, and the page links nowhere else).
"""

from __future__ import annotations

from collections.abc import Mapping

from klein import Klein
from twisted.web.iweb import IRequest
from werkzeug.exceptions import MethodNotAllowed, NotFound

from apiserver.console.assets import Asset, load_assets, version_of
from apiserver.console.page import ConsolePage

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    # Revalidate every time (the ETag makes that a 304): a new release is seen at once.
    (b"cache-control", b"no-cache"),
)


def _secure(request: IRequest) -> None:
    for name, value in SECURITY_HEADERS:
        request.setHeader(name, value)


def _plain(request: IRequest, code: int, text: str) -> bytes:
    request.setResponseCode(code)
    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
    return text.encode()


class Console:
    """The routes, bound to one set of assets (read when built)."""

    app = Klein()

    def __init__(self, assets: Mapping[str, Asset] | None = None) -> None:
        self.assets = dict(assets) if assets is not None else load_assets()
        self.version = version_of(self.assets)

    @app.route("/", methods=["GET", "HEAD"], strict_slashes=False)
    def index(self, request: IRequest) -> ConsolePage | bytes:
        _secure(request)
        if not request.path.endswith(b"/"):
            # /ui: the page's links are relative, so it must be read as a folder.
            request.setResponseCode(301)
            request.setHeader(b"location", request.path + b"/")
            return b""
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        return ConsolePage(self.version)

    @app.route("/static/<string:name>", methods=["GET", "HEAD"])
    def static(self, request: IRequest, name: str) -> bytes:
        _secure(request)
        asset = self.assets.get(name)
        if asset is None:
            return _plain(request, 404, "404 page not found\n")
        request.setHeader(b"content-type", asset.media_type.encode())
        request.setHeader(b"etag", asset.etag.encode())
        match = request.getHeader(b"if-none-match")
        if match is not None and asset.etag.encode() in match:
            request.setResponseCode(304)
            return b""
        return asset.body

    @app.handle_errors(NotFound)
    def not_found(self, request: IRequest, failure: object) -> bytes:
        _secure(request)
        return _plain(request, 404, "404 page not found\n")

    @app.handle_errors(MethodNotAllowed)
    def not_allowed(self, request: IRequest, failure: object) -> bytes:
        _secure(request)
        request.setHeader(b"allow", b"GET, HEAD")
        return _plain(request, 405, "405 method not allowed\n")
