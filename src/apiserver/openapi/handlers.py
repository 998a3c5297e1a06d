"""``/openapi/v3``, ``/openapi/v3/<group-version>`` and ``/openapi/v2``, as kube serves them.

kube-openapi's handler3 (pkg/handler3/handler.go) serves v3 and its handler (pkg/handler/
handler.go, wrapped in NYTimes' gziphandler) serves v2; both hand the bytes to Go's
``http.ServeContent``, whose conditional-request and range logic (net/http/fs.go) is
reproduced in :func:`serve_content` because clients and caches see it: ``Last-Modified``,
``Accept-Ranges``, ``If-None-Match`` (weak comparison, lists, ``*``), ``If-Modified-Since``,
``If-Match``/``If-Unmodified-Since`` (412), ``Range``/``If-Range`` (206, multipart, 416).

What a v3 group-version answer carries:
- ``Etag: "<SHA-512 of the JSON, upper-case hex>"``, ``Vary: Accept``, ``Content-Type:
  application/json``;
- ``?hash=<that etag>``: ``Cache-Control: public, immutable`` and ``Expires`` a year ahead;
  a stale hash: 301 to the current URL (empty body, kube's headers); no hash: the filter
  chain's ``no-cache, private``;
- a group version we do not serve: 200 with an empty body, as handler3 does.

``/openapi/v2`` also speaks gnostic protobuf (:mod:`apiserver.openapi.protobuf`), which is
what client-go's ``OpenAPISchema()`` downloads (kubectl's v2 validation fallback and
``kubectl explain --output=plaintext-openapiv2``).

Departure: the v3 protobuf encoding (``application/com.github.proto-openapi.spec.v3.v1.0+
protobuf``) is not offered, so a request that accepts nothing else gets handler3's 406;
kubectl and client-go ask v3 in JSON.
"""

from __future__ import annotations

import gzip
import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import formatdate
from typing import Any

import attrs

from apiserver.apimachinery.negotiation import parse_accept
from apiserver.gocompat.marshal import go_marshal_plain
from apiserver.http.app import RequestInfo, Router, header_value
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.openapi import documents as openapi_docs
from apiserver.openapi.protobuf import encode_document
from apiserver.version import DEFAULT_GIT_VERSION

V3_PREFIX = "/openapi/v3/"
JSON_TYPE = "application/json"
PROTOBUF_V2 = "com.github.proto-openapi.spec.v2.v1.0+protobuf"
PROTOBUF_V2_DEPRECATED = "com.github.proto-openapi.spec.v2@v1.0+protobuf"
#: What /openapi/v2 offers, in kube-openapi's order: (subtype, Content-Type answered).
V2_MEDIA_TYPES = (
    ("json", JSON_TYPE),
    (PROTOBUF_V2_DEPRECATED, "application/" + PROTOBUF_V2),
    (PROTOBUF_V2, "application/" + PROTOBUF_V2),
)
#: gziphandler's DefaultMinSize: smaller bodies go out uncompressed.
GZIP_MIN_SIZE = 1400


# --- a small header list with Go's Set/Add/Del ---------------------------------------------------


class _Headers:
    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def get(self, name: str) -> str:
        lname = name.lower()
        for key, value in self.items:
            if key.lower() == lname:
                return value
        return ""

    def delete(self, name: str) -> None:
        lname = name.lower()
        self.items = [(k, v) for k, v in self.items if k.lower() != lname]

    def set(self, name: str, value: str) -> None:
        self.delete(name)
        self.items.append((name, value))

    def add(self, name: str, value: str) -> None:
        self.items.append((name, value))

    def response(self, code: int, body: bytes = b"") -> Response:
        return Response(code, tuple(self.items), body)


# --- dates -------------------------------------------------------------------------------------

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_PARSE_FORMATS = (
    "%a, %d %b %Y %H:%M:%S GMT",  # http.TimeFormat
    "%A, %d-%b-%y %H:%M:%S GMT",  # time.RFC850
    "%a %b %d %H:%M:%S %Y",  # time.ANSIC
)


def http_date(timestamp: float) -> str:
    """Go's ``http.TimeFormat`` (``Mon, 02 Jan 2006 15:04:05 GMT``)."""
    return formatdate(int(timestamp), usegmt=True)


def expires_one_year(now: float) -> str:
    """``time.Now().AddDate(1, 0, 0).Format(time.RFC1123)`` on a UTC host.

    Go normalises 29 February plus a year to 1 March; RFC1123 names the zone ``UTC``.
    """
    moment = datetime.fromtimestamp(int(now), UTC)
    try:
        later = moment.replace(year=moment.year + 1)
    except ValueError:
        later = moment.replace(year=moment.year + 1, month=3, day=1)
    return (
        f"{_DAYS[later.weekday()]}, {later.day:02d} {_MONTHS[later.month - 1]} {later.year} "
        f"{later.hour:02d}:{later.minute:02d}:{later.second:02d} UTC"
    )


def parse_http_date(text: str) -> int | None:
    """``http.ParseTime``: the three formats HTTP allows, as Unix seconds, or None."""
    for fmt in _PARSE_FORMATS:
        try:
            parsed = datetime.strptime(text, fmt)
        except ValueError:
            continue
        return int(parsed.replace(tzinfo=UTC).timestamp())
    return None


# --- ETags (net/http/fs.go scanETag, etagStrongMatch, etagWeakMatch) ----------------------------


def _scan_etag(text: str) -> tuple[str, str]:
    """The first entity tag at the start of ``text`` and the rest, or ("", "")."""
    text = text.strip(" \t\n\r")
    start = 0
    if text.startswith("W/"):
        start = 2
    if len(text[start:]) < 2 or text[start] != '"':
        return "", ""
    for i in range(start + 1, len(text)):
        c = ord(text[i])
        if c == 0x21 or 0x23 <= c <= 0x7E or c >= 0x80:
            continue
        if c == 0x22:
            return text[: i + 1], text[i + 1 :]
        return "", ""
    return "", ""


def _strong_match(a: str, b: str) -> bool:
    return a == b and a != "" and a[0] == '"'


def _weak_match(a: str, b: str) -> bool:
    return a.removeprefix("W/") == b.removeprefix("W/")


def _etag_list_matches(header: str, current: str, *, weak: bool) -> bool | None:
    """Whether an If-Match/If-None-Match list names ``current``: None for a bad list."""
    rest = header
    while True:
        rest = rest.strip(" \t\n\r")
        if not rest:
            return False
        if rest[0] == ",":
            rest = rest[1:]
            continue
        if rest[0] == "*":
            return True
        tag, rest = _scan_etag(rest)
        if not tag:
            return False
        if (_weak_match if weak else _strong_match)(tag, current):
            return True


# --- http.ServeContent ---------------------------------------------------------------------------


def _parse_ranges(spec: str, size: int) -> list[tuple[int, int]] | str:
    """``parseRange``: (start, length) pairs, or the error text."""
    if not spec.startswith("bytes="):
        return "invalid range"
    ranges: list[tuple[int, int]] = []
    no_overlap = False
    for part in spec[len("bytes=") :].split(","):
        part = part.strip(" \t")
        if not part:
            continue
        first, sep, last = part.partition("-")
        if not sep:
            return "invalid range"
        first, last = first.strip(" \t"), last.strip(" \t")
        if not first:
            if not last.isdigit():
                return "invalid range"
            suffix = min(int(last), size)
            ranges.append((size - suffix, suffix))
            continue
        if not first.isdigit():
            return "invalid range"
        start = int(first)
        if start >= size:
            no_overlap = True
            continue
        if not last:
            ranges.append((start, size - start))
            continue
        if not last.isdigit() or start > int(last):
            return "invalid range"
        end = min(int(last), size - 1)
        ranges.append((start, end - start + 1))
    if no_overlap and not ranges:
        return "invalid range: failed to overlap"
    return ranges


def _accepts_gzip(request: HTTPRequest) -> bool:
    """gziphandler ``acceptsGzip``: ``gzip`` listed in Accept-Encoding with a non-zero q."""
    for coding in header_value(request, b"accept-encoding").split(","):
        name, *params = coding.split(";")
        if name.strip().lower() != "gzip":
            continue
        q = 1.0
        for param in params:
            key, _, value = param.strip().partition("=")
            if key == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        return q > 0
    return False


def serve_content(
    request: HTTPRequest,
    info: RequestInfo,
    headers: _Headers,
    body: bytes,
    modtime: float,
    *,
    compress: bool = False,
) -> Response:
    """Go's ``http.ServeContent`` for an in-memory body whose headers are already set.

    ``compress`` puts gziphandler around it (``/openapi/v2``): bodies of at least 1400
    bytes are gzipped when the client accepts it (HEAD and bodiless answers never are).
    """
    method = info.method
    seconds = int(modtime)
    headers.set("Last-Modified", http_date(seconds))
    current = headers.get("Etag")

    # If-Match, else If-Unmodified-Since (RFC 7232 section 6, checkPreconditions).
    condition: bool | None = None
    if_match = header_value(request, b"if-match")
    if if_match:
        condition = _etag_list_matches(if_match, current, weak=False)
    else:
        since = header_value(request, b"if-unmodified-since")
        parsed = parse_http_date(since) if since else None
        if parsed is not None:
            condition = seconds <= parsed
    if condition is False:
        return headers.response(412)

    if_none_match = header_value(request, b"if-none-match")
    if if_none_match:
        if _etag_list_matches(if_none_match, current, weak=True):
            if method in ("GET", "HEAD"):
                return _not_modified(headers)
            return headers.response(412)
    elif method in ("GET", "HEAD"):
        since = header_value(request, b"if-modified-since")
        parsed = parse_http_date(since) if since else None
        if parsed is not None and seconds <= parsed:
            return _not_modified(headers)

    range_spec = header_value(request, b"range")
    if range_spec and not _if_range_holds(request, method, current, seconds):
        range_spec = ""

    size = len(body)
    code = 200
    content = body
    if range_spec:
        ranges = _parse_ranges(range_spec, size)
        if isinstance(ranges, str):
            if ranges.endswith("overlap") and size == 0:
                ranges = []
            else:
                return _range_error(headers, ranges, size)
        if sum(length for _, length in ranges) > size:
            ranges = []
        if len(ranges) == 1:
            start, length = ranges[0]
            code = 206
            content = body[start : start + length]
            headers.set("Content-Range", f"bytes {start}-{start + length - 1}/{size}")
        elif len(ranges) > 1:
            code = 206
            content = _multipart(headers, body, ranges)
    headers.set("Accept-Ranges", "bytes")
    if compress and method != "HEAD" and len(content) >= GZIP_MIN_SIZE and _accepts_gzip(request):
        headers.set("Content-Encoding", "gzip")
        content = gzip.compress(content, compresslevel=6, mtime=0)
    return headers.response(code, content)


def _if_range_holds(request: HTTPRequest, method: str, current: str, seconds: int) -> bool:
    """``checkIfRange``: whether a Range request may be honoured."""
    if method not in ("GET", "HEAD"):
        return True
    value = header_value(request, b"if-range")
    if not value:
        return True
    tag, _ = _scan_etag(value)
    if tag:
        return _strong_match(tag, current)
    return parse_http_date(value) == seconds


def _not_modified(headers: _Headers) -> Response:
    """``writeNotModified``: no body headers, and no Last-Modified next to an Etag."""
    for name in ("Content-Type", "Content-Length", "Content-Encoding"):
        headers.delete(name)
    if headers.get("Etag"):
        headers.delete("Last-Modified")
    return headers.response(304)


def _range_error(headers: _Headers, text: str, size: int) -> Response:
    """416 through ``serveError`` and ``http.Error`` (Go 1.23 drops the caching headers)."""
    if text.endswith("overlap"):
        headers.set("Content-Range", f"bytes */{size}")
    for name in ("Cache-Control", "Content-Encoding", "Etag", "Last-Modified"):
        headers.delete(name)
    headers.delete("Content-Length")
    headers.set("Content-Type", "text/plain; charset=utf-8")
    headers.set("X-Content-Type-Options", "nosniff")
    return headers.response(416, text.encode() + b"\n")


def _multipart(headers: _Headers, body: bytes, ranges: list[tuple[int, int]]) -> bytes:
    """A ``multipart/byteranges`` body as Go's mime/multipart writer lays it out."""
    boundary = secrets.token_hex(30)
    part_type = headers.get("Content-Type")
    size = len(body)
    chunks: list[bytes] = []
    for index, (start, length) in enumerate(ranges):
        opening = f"--{boundary}\r\n" if index == 0 else f"\r\n--{boundary}\r\n"
        chunks.append(
            (
                f"{opening}Content-Range: bytes {start}-{start + length - 1}/{size}\r\n"
                f"Content-Type: {part_type}\r\n\r\n"
            ).encode()
        )
        chunks.append(body[start : start + length])
    chunks.append(f"\r\n--{boundary}--\r\n".encode())
    headers.set("Content-Type", f"multipart/byteranges; boundary={boundary}")
    return b"".join(chunks)


# --- the service -------------------------------------------------------------------------------


@attrs.frozen
class ServedDocument:
    """One marshalled document, its ETag (unquoted) and when it was built."""

    body: bytes
    etag: str
    modified: float

    @classmethod
    def of(cls, document: Any, modified: float) -> ServedDocument:
        body = openapi_docs.marshal(document)
        return cls(body, openapi_docs.etag(body), modified)


def server_relative_url(key: str, etag: str) -> str:
    """handler3 ``constructServerRelativeURL``: ``/openapi/v3/<key>?hash=<etag>``."""
    return f"/openapi/v3/{key}?hash={etag}"


@attrs.define
class OpenAPIService:
    """The marshalled documents and the three handlers that serve them."""

    groups: dict[str, ServedDocument]
    discovery: ServedDocument
    v2: ServedDocument
    clock: Callable[[], float]
    _v2_protobuf: bytes | None = None

    @classmethod
    def build(
        cls,
        *,
        events_enabled: bool,
        logs_enabled: bool = False,
        git_version: str = DEFAULT_GIT_VERSION,
        clock: Callable[[], float] = time.time,
        core_events: bool = False,
        service_accounts: bool = False,
        token_request: bool = False,
        reviews: bool = False,
    ) -> OpenAPIService:
        now = clock()
        documents = openapi_docs.v3_documents(
            events_enabled=events_enabled,
            logs_enabled=logs_enabled,
            core_events=core_events,
            service_accounts=service_accounts,
            token_request=token_request,
            reviews=reviews,
        )
        groups = {key: ServedDocument.of(doc, now) for key, doc in documents.items()}
        paths = {
            key: {"serverRelativeURL": server_relative_url(key, served.etag)}
            for key, served in groups.items()
        }
        body = go_marshal_plain({"paths": paths}, sort_keys=True)
        discovery = ServedDocument(body, openapi_docs.etag(body), now)
        v2 = ServedDocument.of(openapi_docs.swagger_v2(documents, git_version), now)
        return cls(groups, discovery, v2, clock)

    def handle_discovery(self, request: HTTPRequest, info: RequestInfo) -> Response:
        """handler3 ``HandleDiscovery``: ``{"paths": {...}}`` whatever the Accept header."""
        headers = _Headers()
        headers.set("Etag", f'"{self.discovery.etag}"')
        headers.set("Content-Type", JSON_TYPE)
        return serve_content(request, info, headers, self.discovery.body, self.discovery.modified)

    def handle_group_version(self, request: HTTPRequest, info: RequestInfo) -> Response:
        """handler3 ``HandleGroupVersion`` for ``/openapi/v3/<key>``."""
        key = info.path[len(V3_PREFIX) :]
        headers = _Headers()
        headers.add("Vary", "Accept")
        clauses = parse_accept(header_value(request, b"accept") or "*/*")
        if not clauses:
            return headers.response(200)
        for clause in clauses:
            if clause.type not in ("application", "*") or clause.subtype not in ("json", "*"):
                continue
            served = self.groups.get(key)
            if served is None:
                return headers.response(200)
            headers.set("Content-Type", JSON_TYPE)
            headers.set("Etag", f'"{served.etag}"')
            wanted = _first_query(info, b"hash")
            if wanted:
                if wanted != served.etag:
                    headers.set("Location", server_relative_url(key, served.etag))
                    return headers.response(301)
                headers.set("Vary", "Accept")
                headers.set("Cache-Control", "public, immutable")
                headers.set("Expires", expires_one_year(self.clock()))
            return serve_content(request, info, headers, served.body, served.modified)
        return headers.response(406)

    def v2_protobuf(self) -> bytes:
        """The gnostic protobuf form of the v2 document, built on first use."""
        if self._v2_protobuf is None:
            self._v2_protobuf = encode_document(json.loads(self.v2.body))
        return self._v2_protobuf

    def handle_v2(self, request: HTTPRequest, info: RequestInfo) -> Response:
        """kube-openapi handler ``RegisterOpenAPIVersionedService`` inside gziphandler.

        JSON, or gnostic protobuf under either of its two media types (the answer always
        names the new one); the ETag is the JSON's for both, as kube-openapi's is.
        """
        headers = _Headers()
        headers.add("Vary", "Accept-Encoding")
        headers.add("Vary", "Accept")
        for clause in parse_accept(header_value(request, b"accept") or "*/*"):
            for subtype, returned in V2_MEDIA_TYPES:
                if clause.type not in ("application", "*") or clause.subtype not in (subtype, "*"):
                    continue
                headers.set("Content-Type", returned)
                headers.set("Etag", f'"{self.v2.etag}"')
                body = self.v2.body if subtype == "json" else self.v2_protobuf()
                return serve_content(request, info, headers, body, self.v2.modified, compress=True)
        return headers.response(406)


def _first_query(info: RequestInfo, name: bytes) -> str:
    values = info.query.get(name)
    return values[0].decode("utf-8", "replace") if values else ""


def install_openapi(
    router: Router,
    *,
    events_enabled: bool,
    logs_enabled: bool = False,
    git_version: str = DEFAULT_GIT_VERSION,
    clock: Callable[[], float] = time.time,
    core_events: bool = False,
    service_accounts: bool = False,
    token_request: bool = False,
    reviews: bool = False,
) -> OpenAPIService:
    """Register ``/openapi/v3``, the ``/openapi/v3/`` prefix and ``/openapi/v2``.

    ``events_enabled`` adds the events.k8s.io documents (and their paths to v2);
    ``core_events`` the core/v1 Event operations to ``api/v1`` (and to v2);
    ``service_accounts`` the ServiceAccount ones (with ``token_request``, the TokenRequest
    subresource); ``reviews`` the ``authentication.k8s.io/v1`` and ``authorization.k8s.io/v1``
    documents;
    ``logs_enabled`` (``--enable-logs-handler``) adds ``logs``; ``git_version`` becomes the v2
    ``info.version``; ``clock`` dates ``Last-Modified`` (the build time) and ``Expires``.
    Every method is answered, as kube-openapi's handlers do not look at it.
    """
    service = OpenAPIService.build(
        events_enabled=events_enabled,
        logs_enabled=logs_enabled,
        git_version=git_version,
        clock=clock,
        core_events=core_events,
        service_accounts=service_accounts,
        token_request=token_request,
        reviews=reviews,
    )
    router.add("/openapi/v3", service.handle_discovery)
    router.add_prefix(V3_PREFIX, service.handle_group_version)
    router.add("/openapi/v2", service.handle_v2)
    return service
