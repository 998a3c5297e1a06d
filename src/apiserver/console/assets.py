"""The console's static assets, read once when the console is built.

They are a handful of small files shipped in the package (``static/``): one stylesheet and
the vanilla JavaScript modules, no build step and nothing fetched from elsewhere. Each is
kept in memory with its media type and a strong ETag (a hash of its bytes), so a browser
revalidates with ``If-None-Match`` and gets a 304 after the first load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from importlib import resources

import attrs

#: Media types by file suffix; a file of any other kind is not served.
MEDIA_TYPES: Mapping[str, str] = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


@attrs.frozen
class Asset:
    """One static file: its bytes, media type and ETag."""

    body: bytes
    media_type: str
    etag: str


def load_assets(package: str = "apiserver.console") -> dict[str, Asset]:
    """Every file under ``<package>/static`` whose suffix is in :data:`MEDIA_TYPES`."""
    found: dict[str, Asset] = {}
    folder = resources.files(package).joinpath("static")
    for entry in folder.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        media_type = MEDIA_TYPES.get(suffix)
        if media_type is None or not entry.is_file():
            continue
        body = entry.read_bytes()
        found[entry.name] = Asset(
            body, media_type, '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        )
    return found


def version_of(assets: Mapping[str, Asset]) -> str:
    """One short hash of every asset: the query that makes a new release's files load fresh."""
    digest = hashlib.sha256()
    for name in sorted(assets):
        digest.update(name.encode() + b"\0" + assets[name].etag.encode())
    return digest.hexdigest()[:12]
