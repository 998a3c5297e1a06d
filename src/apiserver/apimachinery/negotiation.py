"""Content negotiation: Accept for responses, Content-Type for bodies and patches, ``pretty``.

Follows, in request order:

1. go-restful's route matching (``Route.matchesContentType`` / ``matchesAccept``): a PATCH
   whose Content-Type names none of the four patch types, or an Accept none of whose entries
   is ``*/*`` or exactly a produced type (json, yaml, protobuf), is refused before any
   handler runs, with kube-apiserver's generic bodies ``415: Unsupported Media Type`` and
   ``406: Not Acceptable`` (``details: {}``).
2. k8s.io/apiserver ``pkg/endpoints/handlers/negotiation/negotiate.go``
   (``NegotiateMediaTypeOptions``, ``acceptMediaTypeOptions``, ``NegotiateInputSerializer``,
   ``isPrettyPrint``) with the ``github.com/munnerz/goautoneg`` Accept parser (q-values, then
   specificity, stable for short headers), and ``handlers/rest.go``
   ``AllowsMediaTypeTransform``: ``as=Table`` (json/yaml only), ``as=PartialObjectMetadata``
   and ``as=PartialObjectMetadataList``, each with ``g=meta.k8s.io`` and ``v=v1``/``v1beta1``.
3. ``handlers/response.go`` (``optionsForTransform``, ``asPartialObjectMetadata*``): the
   ``includeObject`` check and the 406 for a list/non-list mismatch.

JSON, YAML and protobuf (``application/vnd.kubernetes.protobuf``, the built-in kinds'
third serializer) are served; a Table is JSON/YAML only, as in ``AllowsMediaTypeTransform``.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable, Mapping, Sequence

import attrs

from apiserver.apimachinery.errors import StatusError, bad_request, invalid
from apiserver.apimachinery.queryparams import Query, query_str
from apiserver.gocompat.boolparse import go_parse_bool
from apiserver.http.response import NOSNIFF, Response
from apiserver.http.status import status_body
from apiserver.protobuf import codec

JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"

# What kube-apiserver's serializers offer, in its order (and so in its error texts).
KUBE_MEDIA_TYPES = (JSON, YAML, PROTOBUF)
KUBE_STREAM_MEDIA_TYPES = (JSON + ";stream=watch", PROTOBUF + ";stream=watch")
SERVED_MEDIA_TYPES = (JSON, YAML, PROTOBUF)
#: The Content-Type of a protobuf watch (the stream serializer's media type).
PROTOBUF_WATCH = PROTOBUF + ";stream=watch"

PATCH_MEDIA_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}

META_GROUP = "meta.k8s.io"
TABLE = "Table"
PARTIAL = "PartialObjectMetadata"
PARTIAL_LIST = "PartialObjectMetadataList"

OBJECT_TYPE = "*core.Event"
LIST_TYPE = "*core.EventList"

PRETTY_USER_AGENT_PREFIXES = ("curl", "Wget", "Mozilla/5.0")


def _not_acceptable(message: str) -> StatusError:
    return StatusError(406, "NotAcceptable", message)


def router_not_acceptable() -> StatusError:
    """go-restful's 406, as kube-apiserver's service error handler writes it."""
    return StatusError(406, "NotAcceptable", "406: Not Acceptable", {})


def router_unsupported_media_type() -> StatusError:
    """go-restful's 415, as kube-apiserver's service error handler writes it."""
    return StatusError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})


def unsupported_media_type(accepted: Sequence[str]) -> StatusError:
    """The handlers' 415 (``negotiation.NewUnsupportedMediaTypeError``)."""
    return StatusError(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: "
        + ", ".join(accepted),
    )


# --- Accept parsing (goautoneg) -------------------------------------------------------------


@attrs.frozen
class AcceptClause:
    """One media range of an Accept header."""

    type: str
    subtype: str
    q: float = 1.0
    params: tuple[tuple[str, str], ...] = ()

    def param_map(self) -> dict[str, str]:
        return dict(self.params)


_FLOAT_RE = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_FLOAT32_MAX = 3.4028234663852886e38


def _go_parse_float32(text: str) -> float:
    """``strconv.ParseFloat(text, 32)``, with 0 where Go reports a syntax error."""
    lowered = text.lower()
    if lowered.lstrip("+-") in ("inf", "infinity"):
        return float("-inf") if lowered.startswith("-") else float("inf")
    if lowered == "nan":
        return float("nan")
    if not _FLOAT_RE.fullmatch(text):
        return 0.0
    value = float(text)
    if abs(value) > _FLOAT32_MAX:
        return float("inf") if value > 0 else float("-inf")
    # Rounded to the nearest float32, as ParseFloat(s, 32) returns it.
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _less(a: AcceptClause, b: AcceptClause) -> bool:
    if a.q > b.q:
        return True
    if a.type != "*" and b.type == "*":
        return True
    return a.subtype != "*" and b.subtype == "*"


def parse_accept(header: str) -> list[AcceptClause]:
    """``goautoneg.ParseAccept``: clauses sorted by q, then type/subtype specificity.

    Go sorts with ``sort.Sort``, an insertion sort for up to 12 entries; that sort is done
    here for any length.
    """
    clauses: list[AcceptClause] = []
    for raw_part in header.split(","):
        part = raw_part.strip(" ")
        pieces = part.split(";")
        media = pieces[0].split("/")
        type_ = media[0].strip(" ")
        if len(media) == 1 and type_ == "*":
            subtype = "*"
        elif len(media) == 2:
            subtype = media[1].strip(" ")
        else:
            continue
        q = 1.0
        params: dict[str, str] = {}
        for param in pieces[1:]:
            kv = param.split("=", 1)
            if len(kv) != 2:
                continue
            token = kv[0].strip(" ")
            if token == "q":
                q = _go_parse_float32(kv[1])
            else:
                params[token] = kv[1].strip(" ")
        clauses.append(AcceptClause(type_, subtype, q, tuple(params.items())))
    for i in range(1, len(clauses)):
        j = i
        while j > 0 and _less(clauses[j], clauses[j - 1]):
            clauses[j], clauses[j - 1] = clauses[j - 1], clauses[j]
            j -= 1
    return clauses


def accept_matches_route(header: str | None, produces: Sequence[str] = KUBE_MEDIA_TYPES) -> bool:
    """go-restful ``Route.matchesAccept`` (an empty Accept is ``*/*``)."""
    text = header or "*/*"
    for part in text.split(","):
        mime = part.split(";", 1)[0].strip(" ")
        if mime == "*/*" or mime in produces:
            return True
    return False


# --- output negotiation ---------------------------------------------------------------------


@attrs.frozen
class Output:
    """How to write the response.

    ``kind`` is ``json``/``yaml``/``protobuf`` (the object as is), ``table`` or ``partial``
    (PartialObjectMetadata, or PartialObjectMetadataList for lists); ``version`` is the
    ``meta.k8s.io`` version of a Table/partial (``v1``/``v1beta1``), else None; ``media_type``
    is the Content-Type to send; ``target`` is the requested kind (``Table``,
    ``PartialObjectMetadata``, ``PartialObjectMetadataList``) or None; ``pretty`` is the
    Accept parameter ``pretty=1`` (OR it with :func:`wants_pretty`).
    """

    kind: str
    version: str | None
    media_type: str
    target: str | None = None
    pretty: bool = False


def _allows_transform(media_type: str, target: tuple[str, str, str] | None) -> bool:
    """``RequestScope.AllowsMediaTypeTransform`` for a built-in resource with a printer."""
    if target is None:
        return True
    group, version, kind = target
    if group != META_GROUP or version not in ("v1", "v1beta1"):
        return False
    if kind == TABLE:
        return media_type in (JSON, YAML)
    return kind in (PARTIAL, PARTIAL_LIST)


def _accept_options(clause: AcceptClause, media_type: str) -> Output | None:
    """``acceptMediaTypeOptions``: the output this clause asks of ``media_type``, or None."""
    convert: list[str] | None = None
    pretty = False
    for key, value in clause.params:
        if key in ("as", "g", "v"):
            if convert is None:
                convert = ["", "", ""]
            convert[{"g": 0, "v": 1, "as": 2}[key]] = value
        elif key == "stream":
            # Only JSON (and protobuf) have a stream serializer; "watch" is the only schema.
            if value and (media_type == YAML or value != "watch"):
                return None
        elif key == "sv":
            if value and value != "v1":
                return None
        elif key == "pretty":
            pretty = value == "1"
    target = (convert[0], convert[1], convert[2]) if convert is not None else None
    if not _allows_transform(media_type, target):
        return None
    if target is None:
        kind = {JSON: "json", YAML: "yaml"}.get(media_type, "protobuf")
        return Output(kind, None, media_type, None, pretty)
    kind = "table" if target[2] == TABLE else "partial"
    return Output(kind, target[1], media_type, target[2], pretty)


def negotiate_output(
    accept: str | None,
    *,
    is_list: bool,
    is_watch: bool,
    check_target: bool = True,
    object_type: str = OBJECT_TYPE,
    list_type: str = LIST_TYPE,
) -> Output:
    """The response format for a get (``is_list=False``), list or watch, or a 406.

    Order of checks: the router's Accept match (``406: Not Acceptable``), then the handler's
    negotiation (``only the following media types are accepted: ...``), then for watches the
    stream serializer (YAML has none), then -- unless ``check_target`` is False, for callers
    that do it after reading from storage, as kube does -- the list/non-list check of
    ``as=PartialObjectMetadata[List]`` (see :func:`check_target`).

    For a watch, a PartialObjectMetadataList request cannot be applied to the single objects
    of the events; kube then writes the events untransformed, and so the result is plain JSON.
    """
    if not accept_matches_route(accept):
        raise router_not_acceptable()
    output: Output | None = None
    if not accept:
        output = Output("json", None, JSON)
    else:
        for clause in parse_accept(accept):
            for media_type in KUBE_MEDIA_TYPES:
                t, s = media_type.split("/", 1)
                if not (
                    (clause.type == t and clause.subtype == s)
                    or (clause.type == t and clause.subtype == "*")
                    or (clause.type == "*" and clause.subtype == "*")
                ):
                    continue
                if media_type not in SERVED_MEDIA_TYPES:
                    continue
                output = _accept_options(clause, media_type)
                if output is not None:
                    break
            if output is not None:
                break
    if output is None:
        raise _not_acceptable(
            "only the following media types are accepted: " + ", ".join(KUBE_MEDIA_TYPES)
        )
    if is_watch:
        if output.media_type == YAML:
            raise _not_acceptable(
                "only the following media types are accepted: " + ", ".join(KUBE_STREAM_MEDIA_TYPES)
            )
        if output.target == PARTIAL_LIST:
            if output.media_type == PROTOBUF:
                return Output("protobuf", None, PROTOBUF_WATCH, None, output.pretty)
            return Output("json", None, JSON, None, output.pretty)
        if output.media_type == PROTOBUF:
            return attrs.evolve(output, media_type=PROTOBUF_WATCH)
        return output
    if check_target:
        check_output_target(output, is_list, object_type=object_type, list_type=list_type)
    return output


def check_output_target(
    output: Output, is_list: bool, *, object_type: str = OBJECT_TYPE, list_type: str = LIST_TYPE
) -> None:
    """406 when a PartialObjectMetadata form does not fit the object.

    Mirrors ``asPartialObjectMetadata`` / ``asPartialObjectMetadataList``; the type names are
    Go's ``%T`` of the internal objects."""
    if output.target == PARTIAL and is_list:
        raise _not_acceptable(
            f"you requested PartialObjectMetadata, but the requested object is a list ({list_type})"
        )
    if output.target == PARTIAL_LIST and not is_list:
        raise _not_acceptable(
            "you requested PartialObjectMetadataList, but the requested object is not a list "
            f"({object_type})"
        )


def wants_pretty(query: Query, user_agent: str | None) -> bool:
    """``isPrettyPrint``: a non-empty ``?pretty=`` decides (``strconv.ParseBool``, anything
    unparsable is false); otherwise User-Agents starting ``curl``, ``Wget`` or
    ``Mozilla/5.0`` get indented output."""
    value = query_str(query, "pretty")
    if value:
        return go_parse_bool(value) is True
    agent = user_agent or ""
    return agent.startswith(PRETTY_USER_AGENT_PREFIXES)


def include_object(query: Query) -> str:
    """``includeObject`` for Table rows: ``Metadata`` (default), ``Object`` or ``None``.

    Anything else is the 400 of ``optionsForTransform``.
    """
    value = query_str(query, "includeObject") or ""
    if value in ("", "Metadata"):
        return "Metadata"
    if value in ("Object", "None"):
        return value
    error = invalid("includeObject", value, "must be 'Metadata', 'Object', 'None', or empty")
    raise bad_request(f"Unable to convert to Table as requested: {error}")


# --- media type options for other endpoints (discovery) -----------------------------------


@attrs.frozen
class GroupVersionKind:
    group: str = ""
    version: str = ""
    kind: str = ""


@attrs.frozen
class MediaTypeOptions:
    """The negotiated serializer and the media type parameters that shape the answer."""

    media_type: str
    pretty: bool = False
    convert: GroupVersionKind | None = None


TransformCheck = Callable[[GroupVersionKind | None], bool]


def default_restrictions(convert: GroupVersionKind | None) -> bool:
    """``DefaultEndpointRestrictions``: no transformation (``as=``/``g=``/``v=``) at all."""
    return convert is None


def _media_type_options(
    params: dict[str, str], media_type: str, streaming: bool, allows: TransformCheck
) -> MediaTypeOptions | None:
    """``acceptMediaTypeOptions`` for an endpoint whose only restriction is ``allows`` (no
    server version: ``sv=`` refuses the clause, as ``DefaultEndpointRestrictions`` do)."""
    group = version = kind = None
    pretty = False
    for key, value in params.items():
        if key == "as":
            kind = value
        elif key == "g":
            group = value
        elif key == "v":
            version = value
        elif key == "stream":
            if value and (not streaming or value != "watch"):
                return None
        elif key == "sv":
            if value:
                return None
        elif key == "pretty":
            pretty = value == "1"
    convert = None
    if group is not None or version is not None or kind is not None:
        convert = GroupVersionKind(group or "", version or "", kind or "")
    if not allows(convert):
        return None
    return MediaTypeOptions(media_type, pretty, convert)


def negotiate_media_type(
    header: str,
    media_types: Sequence[str],
    streaming: Mapping[str, bool],
    allows: TransformCheck,
) -> MediaTypeOptions | None:
    """``NegotiateMediaTypeOptions``: the first acceptable (clause, serializer) pair, or None.

    ``media_types`` are the serializers in the endpoint's order (the first answers a request
    without Accept), ``streaming`` says which have a stream serializer, ``allows`` is the
    endpoint's ``AllowsMediaTypeTransform``. Used by discovery; the resource handlers' own
    restrictions (tables, partial metadata, ``sv=v1``) are :func:`negotiate_output`'s."""
    if not header:
        return MediaTypeOptions(media_types[0])
    for clause in parse_accept(header):
        for media_type in media_types:
            main, sub = media_type.split("/")
            if (clause.type == main and clause.subtype in (sub, "*")) or (
                clause.type == "*" and clause.subtype == "*"
            ):
                options = _media_type_options(
                    clause.param_map(), media_type, streaming[media_type], allows
                )
                if options is not None:
                    return options
    return None


@functools.lru_cache(maxsize=256)
def error_prefers_protobuf(accept: str | None) -> bool:
    """Whether an error answer is written in protobuf: ``ErrorNegotiated`` negotiates the
    Status's serializer from Accept with the default restrictions (no ``as=``), and the
    Status is protobuf when that picks protobuf (k8s.io/apiserver
    ``pkg/endpoints/handlers/responsewriters/writers.go``). Kept per Accept header."""
    if not accept or "protobuf" not in accept:
        return False
    options = negotiate_media_type(
        accept, KUBE_MEDIA_TYPES, {JSON: True, YAML: False, PROTOBUF: True}, default_restrictions
    )
    return options is not None and options.media_type == PROTOBUF


_PROTOBUF_STATUS_HEADERS = (("Content-Type", PROTOBUF), NOSNIFF)


def protobuf_error(error: StatusError) -> Response:
    """The Status of ``error`` in protobuf, what ``ErrorNegotiated`` writes when Accept picks
    the protobuf serializer."""
    body = status_body(error.code, error.reason, error.message, error.details)
    if error.list_meta:
        body["metadata"] = error.list_meta
    return Response(
        error.code, (*_PROTOBUF_STATUS_HEADERS, *error.headers), codec.encode_object(body)
    )


def error_response(error: StatusError, accept: str | None) -> Response:
    """``responsewriters.ErrorNegotiated`` for the handlers and chain stages that answer JSON
    unless the client asks for protobuf (k8s.io/apiserver
    ``pkg/endpoints/handlers/responsewriters/writers.go``): one renderer for the REST
    handlers and the chain's refusals (unknown API paths, a malformed ``?timeout=``)."""
    if error_prefers_protobuf(accept):
        return protobuf_error(error)
    return error.response()


# --- Content-Type ---------------------------------------------------------------------------

_TSPECIALS = set('()<>@,;:\\"/[]?=')


def _is_token_char(ch: str) -> bool:
    return 0x20 < ord(ch) < 0x7F and ch not in _TSPECIALS


def _consume_token(v: str) -> tuple[str, str]:
    i = 0
    while i < len(v) and _is_token_char(v[i]):
        i += 1
    return v[:i], v[i:]


def _consume_value(v: str) -> tuple[str, str]:
    if not v:
        return "", v
    if v[0] != '"':
        return _consume_token(v)
    buf: list[str] = []
    i = 1
    while i < len(v):
        ch = v[i]
        if ch == '"':
            return "".join(buf), v[i + 1 :]
        if ch == "\\" and i + 1 < len(v) and v[i + 1] in _TSPECIALS:
            buf.append(v[i + 1])
            i += 2
            continue
        if ch in "\r\n":
            return "", v
        buf.append(ch)
        i += 1
    return "", v


def go_parse_media_type(value: str) -> str | None:
    """``mime.ParseMediaType``: the lower-cased ``type[/subtype]``, or None on an error."""
    base = value.split(";", 1)[0]
    media = base.lower().strip()
    typ, rest = _consume_token(media)
    if not typ:
        return None
    if rest:
        if not rest.startswith("/"):
            return None
        sub, rest = _consume_token(rest[1:])
        if not sub or rest:
            return None
    v = value[len(base) :]
    seen: set[str] = set()
    while v:
        v = v.lstrip()
        if not v:
            break
        original = v
        if not v.startswith(";"):
            key = ""
        else:
            rest = v[1:].lstrip()
            key, rest = _consume_token(rest)
            key = key.lower()
            if key:
                rest = rest.lstrip()
                if rest.startswith("="):
                    rest = rest[1:].lstrip()
                    val, rest2 = _consume_value(rest)
                    if val == "" and rest2 == rest:
                        key = ""
                    else:
                        rest = rest2
                else:
                    key = ""
        if not key:
            if original.strip() == ";":
                break
            return None
        if key in seen:
            return None
        seen.add(key)
        v = rest
    return media


@functools.lru_cache(maxsize=256)
def negotiate_body(content_type: str | None) -> str:
    """``NegotiateInputSerializer`` for create/update/delete bodies: ``json``, ``yaml`` or
    ``protobuf`` (every built-in kind has a protobuf serializer).

    No Content-Type means JSON (the API routes consume ``*/*``); anything else is the
    handler's 415. Answers are kept per Content-Type (a pure function of it; clients send
    the same few); a 415 is raised anew each time, never kept.
    """
    media = go_parse_media_type(content_type) if content_type else JSON
    if media == JSON:
        return "json"
    if media == YAML:
        return "yaml"
    if media == PROTOBUF:
        return "protobuf"
    raise unsupported_media_type(KUBE_MEDIA_TYPES)


def _content_type_matches_route(content_type: str, consumes: Sequence[str]) -> bool:
    """go-restful ``Route.matchesContentType`` for a PATCH route (no body type means
    ``application/octet-stream``)."""
    text = content_type or "application/octet-stream"
    for part in text.split(","):
        mime = part.split(";", 1)[0].strip(" ")
        if mime in consumes:
            return True
    return False


def patch_type(content_type: str | None) -> str:
    """The patch flavour of a PATCH body: ``json``, ``merge``, ``strategic`` or ``apply``.

    The router refuses other types with ``415: Unsupported Media Type``; what passes it but
    is still not exactly one of the four (the handler cuts at the first ``;`` and does not
    trim) gets the handler's longer 415.
    """
    text = content_type or ""
    if not _content_type_matches_route(text, tuple(PATCH_MEDIA_TYPES)):
        raise router_unsupported_media_type()
    idx = text.find(";")
    if idx > 0:
        text = text[:idx]
    kind = PATCH_MEDIA_TYPES.get(text)
    if kind is None:
        raise unsupported_media_type(tuple(PATCH_MEDIA_TYPES))
    return kind


__all__ = [
    "KUBE_MEDIA_TYPES",
    "AcceptClause",
    "GroupVersionKind",
    "MediaTypeOptions",
    "Output",
    "TransformCheck",
    "accept_matches_route",
    "check_output_target",
    "default_restrictions",
    "error_prefers_protobuf",
    "error_response",
    "go_parse_media_type",
    "include_object",
    "negotiate_body",
    "negotiate_media_type",
    "negotiate_output",
    "parse_accept",
    "patch_type",
    "protobuf_error",
    "router_not_acceptable",
    "router_unsupported_media_type",
    "unsupported_media_type",
    "wants_pretty",
]
