"""The console's one HTML page, a ``twisted.web.template`` document.

The page is the same for every visitor: it carries no data (everything shown is fetched by
the browser from the API with the user's token), only the layout and the links to the
static assets, stamped with their version so that a new release is not served from a stale
cache.
"""

from __future__ import annotations

from importlib import resources

from twisted.web.iweb import IRequest
from twisted.web.template import Element, Tag, XMLString, renderer


def _template() -> XMLString:
    text = resources.files("apiserver.console").joinpath("templates/index.xhtml").read_text()
    return XMLString(text)


class ConsolePage(Element):
    """``/ui/``: the shell the JavaScript modules fill in."""

    def __init__(self, version: str, template: XMLString | None = None) -> None:
        super().__init__(template if template is not None else _template())
        self.version = version

    @renderer
    def asset(self, request: IRequest | None, tag: Tag) -> Tag:
        """``<link t:render="asset" t:attr="href"...>``: the asset's URL with the version."""
        for attribute in ("src", "href"):
            value = tag.attributes.get(attribute)
            if isinstance(value, str):
                tag.attributes[attribute] = f"{value}?v={self.version}"
        return tag
