"""The console's Klein routes (apiserver.console.routes), through treq's StubTreq."""

from __future__ import annotations

import re
from typing import Any

from treq.testing import StubTreq
from twisted.trial.unittest import SynchronousTestCase
from twisted.web.resource import Resource

from apiserver.console import Console
from apiserver.console.assets import Asset, load_assets, version_of
from apiserver.console.routes import CONTENT_SECURITY_POLICY


def stub(console: Console | None = None) -> StubTreq:
    root = Resource()
    root.putChild(b"ui", (console or Console()).app.resource())
    return StubTreq(root)


class RouteTests(SynchronousTestCase):
    def fetch(self, treq: StubTreq, path: str, **kw: Any) -> tuple[int, Any, bytes]:
        method = kw.pop("method", "GET")
        response = self.successResultOf(
            treq.request(method, "https://x" + path, allow_redirects=False, **kw)
        )
        body = self.successResultOf(response.content())
        return response.code, response.headers, body

    def test_page(self) -> None:
        console = Console()
        code, headers, body = self.fetch(stub(console), "/ui/")
        assert code == 200
        assert headers.getRawHeaders("content-type") == ["text/html; charset=utf-8"]
        assert headers.getRawHeaders("content-security-policy") == [CONTENT_SECURITY_POLICY]
        assert headers.getRawHeaders("x-content-type-options") == ["nosniff"]
        assert headers.getRawHeaders("referrer-policy") == ["no-referrer"]
        assert body.startswith(b"<!DOCTYPE html>")
        assert f'src="static/console.js?v={console.version}"'.encode() in body
        assert f'href="static/console.css?v={console.version}"'.encode() in body
        # No inline script: the policy allows only this origin's files.
        assert re.findall(rb"<script[^>]*>", body) == [
            f'<script type="module" src="static/console.js?v={console.version}">'.encode()
        ]

    def test_mount_point_without_slash_redirects(self) -> None:
        code, headers, _ = self.fetch(stub(), "/ui")
        assert code == 301
        assert headers.getRawHeaders("location") == ["/ui/"]

    def test_static_asset_and_revalidation(self) -> None:
        treq = stub()
        code, headers, body = self.fetch(treq, "/ui/static/console.js")
        assert code == 200
        assert headers.getRawHeaders("content-type") == ["text/javascript; charset=utf-8"]
        assert headers.getRawHeaders("cache-control") == ["no-cache"]
        assert b"import" in body
        (etag,) = headers.getRawHeaders("etag")
        code, _, body = self.fetch(treq, "/ui/static/console.js", headers={"If-None-Match": etag})
        assert (code, body) == (304, b"")
        code, headers, _ = self.fetch(treq, "/ui/static/console.css")
        assert headers.getRawHeaders("content-type") == ["text/css; charset=utf-8"]

    def test_not_found_and_method_not_allowed(self) -> None:
        treq = stub()
        for path in ("/ui/static/nope.js", "/ui/other", "/ui/static/a/b"):
            code, headers, body = self.fetch(treq, path)
            assert (code, body) == (404, b"404 page not found\n"), path
            assert headers.getRawHeaders("content-security-policy") == [CONTENT_SECURITY_POLICY]
        code, headers, _ = self.fetch(treq, "/ui/", method="POST")
        assert code == 405
        assert headers.getRawHeaders("allow") == ["GET, HEAD"]

    def test_every_link_and_import_resolves_to_an_asset(self) -> None:
        assets = load_assets()
        _, _, page = self.fetch(stub(), "/ui/")
        linked = re.findall(rb'(?:src|href)="static/([^"?]+)', page)
        assert linked and all(name.decode() in assets for name in linked)
        for name, asset in assets.items():
            if name.endswith(".js"):
                for imported in re.findall(rb'from "\./([^"]+)"', asset.body):
                    assert imported.decode() in assets, (name, imported)
            # Nothing is fetched from another host.
            assert b"http://" not in asset.body.replace(b"http://www.w3.org/2000/svg", b"")
            assert b"https://" not in asset.body

    def test_version_follows_the_assets(self) -> None:
        one = {"a.js": Asset(b"1", "text/javascript", '"x"')}
        two = {"a.js": Asset(b"2", "text/javascript", '"y"')}
        assert version_of(one) != version_of(two)
        assert Console(one).version == version_of(one)
