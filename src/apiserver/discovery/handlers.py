"""The discovery endpoints: ``/api``, ``/api/v1``, ``/apis``, ``/apis/events.k8s.io[/v1]``.

Behaviour follows k8s.io/apiserver/pkg/endpoints/discovery (legacy.go, root.go, group.go,
version.go) for the plain documents and discovery/aggregated (wrapper.go, negotiation.go,
etag.go, handler.go) for the aggregated ``APIGroupDiscoveryList`` on ``/api`` and ``/apis``.

Content negotiation is kube's (endpoints/handlers/negotiation/negotiate.go over
github.com/munnerz/goautoneg), rewritten here clause for clause because its quirks decide
which document a client gets: the ``g``/``v``/``as`` parameters select the aggregated form, any
other ``as`` makes a clause unacceptable, ``pretty=1`` in the media type, ``?pretty=`` or a
curl/Wget/browser User-Agent select indented output.

Departures, on purpose:
- ``application/vnd.kubernetes.protobuf`` is negotiated like kube does, but answered in JSON
  (with a JSON Content-Type): every client that asks protobuf for discovery (client-go with a
  protobuf content type) decodes by the response's Content-Type, so they keep working.
- The legacy ``/api`` lists version ``v1`` and ``/api/v1`` lists no resources but
  ``serviceaccounts/token`` when the TokenRequest API is served: kube-apiserver always has the
  core group, clients such as the Python client read ``/api`` without tolerating a 404, and
  the aggregated ``/api`` says the same thing (group "" with v1 and the same resources).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from apiserver.apimachinery import negotiation
from apiserver.apimachinery.negotiation import (
    GroupVersionKind,
    MediaTypeOptions,
    TransformCheck,
    default_restrictions,
    negotiate_media_type,
)
from apiserver.discovery import documents as docs
from apiserver.gocompat.marshal import go_marshal_indent
from apiserver.http.app import RequestInfo, Router, header_value
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.http.status import status_body
from apiserver.protobuf import codec

JSON_TYPE = "application/json"
YAML_TYPE = "application/yaml"
PROTOBUF_TYPE = "application/vnd.kubernetes.protobuf"
#: The serializers kube's codec factories offer, in their order: the first one answers a request
#: without an Accept header. Only JSON has a stream serializer among those that matter here.
SUPPORTED_MEDIA_TYPES = (JSON_TYPE, YAML_TYPE, PROTOBUF_TYPE)
_STREAMING = {JSON_TYPE: True, YAML_TYPE: False, PROTOBUF_TYPE: True}


def negotiate(header: str, allows: TransformCheck) -> MediaTypeOptions | None:
    """``NegotiateMediaTypeOptions`` over the discovery serializers."""
    return negotiate_media_type(header, SUPPORTED_MEDIA_TYPES, _STREAMING, allows)


def _pretty(request: HTTPRequest, info: RequestInfo) -> bool:
    """negotiate.go ``isPrettyPrint``: ``?pretty=``, else a human client's User-Agent."""
    return negotiation.wants_pretty(info.query, header_value(request, b"user-agent"))


METHOD_NOT_ALLOWED_MESSAGE = "the server does not allow this method on the requested resource"


# Negotiation (negotiate.go ``NegotiateMediaTypeOptions`` over goautoneg) is
# apimachinery.negotiation's, shared with the resource handlers and OpenAPI.


def is_aggregated_discovery(convert: GroupVersionKind | None) -> bool:
    """``IsAggregatedDiscoveryGVK`` (v2, and v2beta1 which 1.32 still serves)."""
    return (
        convert is not None
        and convert.group == docs.AGGREGATED_GROUP
        and convert.version in docs.AGGREGATED_VERSIONS
        and convert.kind == docs.AGGREGATED_KIND
    )


def encode(value: Any, options: MediaTypeOptions, pretty: bool) -> tuple[str, bytes]:
    """The body and base Content-Type for a negotiated serializer (protobuf answered as JSON)."""
    if options.media_type == YAML_TYPE:
        return YAML_TYPE, docs.encode_yaml(value)
    return JSON_TYPE, docs.encode_json(value, pretty=pretty or options.pretty)


def status_response(
    request: HTTPRequest,
    info: RequestInfo,
    code: int,
    reason: str,
    message: str,
    details: dict[str, Any] | None,
) -> Response:
    """A failure ``Status`` written the way ``responsewriters.ErrorNegotiated`` writes it.

    When the Accept header cannot be satisfied either, kube falls back to ``WriteRawJSON``:
    indented JSON without a newline.
    """
    status = status_body(code, reason, message, details)
    options = negotiate(header_value(request, b"accept"), default_restrictions)
    if options is None:
        return Response(code, (("Content-Type", JSON_TYPE),), go_marshal_indent(status).encode())
    if options.media_type == PROTOBUF_TYPE:
        # A Status has a protobuf message (unlike the discovery documents answered in JSON).
        return Response(code, (("Content-Type", PROTOBUF_TYPE),), codec.encode_object(status))
    content_type, body = encode(status, options, _pretty(request, info))
    return Response(code, (("Content-Type", content_type),), body)


def not_acceptable(request: HTTPRequest, info: RequestInfo) -> Response:
    """406 from ``NegotiateOutputMediaType`` (``WriteRawJSON``: indented, no newline)."""
    status = status_body(
        406,
        "NotAcceptable",
        "only the following media types are accepted: " + ", ".join(SUPPORTED_MEDIA_TYPES),
    )
    return Response(406, (("Content-Type", JSON_TYPE),), go_marshal_indent(status).encode())


def write_object(request: HTTPRequest, info: RequestInfo, value: Any) -> Response:
    """``responsewriters.WriteObjectNegotiated`` with the default restrictions, status 200."""
    options = negotiate(header_value(request, b"accept"), default_restrictions)
    if options is None:
        return not_acceptable(request, info)
    content_type, body = encode(value, options, _pretty(request, info))
    return Response(200, (("Content-Type", content_type),), body)


# --- handlers ----------------------------------------------------------------------------------

Handler = Callable[[Any, RequestInfo], Response]


def get_only(handler: Handler) -> Handler:
    """A go-restful ``GET`` route: any other method (HEAD included) is a 405 Status."""

    def handle(request: HTTPRequest, info: RequestInfo) -> Response:
        if info.method != "GET":
            return status_response(
                request, info, 405, "MethodNotAllowed", METHOD_NOT_ALLOWED_MESSAGE, {}
            )
        return handler(request, info)

    return handle


def static_handler(build: Callable[[], Any]) -> Handler:
    """A plain discovery document, negotiated per request."""

    def handle(request: HTTPRequest, info: RequestInfo) -> Response:
        return write_object(request, info, build())

    return handle


@attrs.define
class AggregatedDocument:
    """One aggregated document (its items never change while we run) and its ETag."""

    items: list[dict[str, Any]]
    etag: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.etag = docs.aggregated_etag(self.items)

    def respond(self, request: HTTPRequest, info: RequestInfo) -> Response:
        """aggregated/handler.go ``serveHTTP`` then etag.go ``ServeHTTPWithETag``."""
        options = negotiate(header_value(request, b"accept"), is_aggregated_discovery)
        if options is None or options.convert is None:
            # Cannot happen behind aggregated_wrapper, which routes here only when it is set.
            return not_acceptable(request, info)
        quoted = f'"{self.etag}"'
        headers: list[tuple[str, str]] = [
            ("Etag", quoted),
            ("Vary", "Accept"),
            ("Cache-Control", "public"),
        ]
        if header_value(request, b"if-none-match") == quoted:
            return Response(304, tuple(headers))
        document = docs.aggregated_document(self.items, options.convert.version)
        base, body = encode(document, options, _pretty(request, info))
        content_type = base + _gvk_params(options.convert)
        return Response(200, (*headers, ("Content-Type", content_type)), body)


def _gvk_params(convert: GroupVersionKind) -> str:
    # responsewriters.generateMediaTypeWithGVK: only the parameters that are set, in g, v, as order.
    text = ""
    if convert.group:
        text += ";g=" + convert.group
    if convert.version:
        text += ";v=" + convert.version
    if convert.kind:
        text += ";as=" + convert.kind
    return text


def aggregated_wrapper(legacy: Handler, aggregated: AggregatedDocument) -> Handler:
    """aggregated/wrapper.go: the aggregated document when the Accept header asks for it."""

    def handle(request: HTTPRequest, info: RequestInfo) -> Response:
        options = negotiate(header_value(request, b"accept"), is_aggregated_discovery)
        if options is not None and is_aggregated_discovery(options.convert):
            return aggregated.respond(request, info)
        return legacy(request, info)

    return handle


def _with_slash(router: Router, path: str, handler: Handler) -> None:
    # go-restful's "/" route and the non-restful muxes both answer "<path>" and "<path>/".
    router.add(path, handler)
    router.add(path + "/", handler)


def _events_enabled(groups_enabled: dict[str, bool]) -> bool:
    keys: Iterable[str] = (docs.GROUP_VERSION, docs.GROUP)
    return all(groups_enabled.get(key, True) for key in keys)


def install_discovery(
    router: Router,
    *,
    groups_enabled: dict[str, bool],
    server_address: Callable[[], str],
    token_request: bool = False,
    core_events: bool = False,
    extra_groups: Sequence[docs.ExtraGroup] = (),
    service_accounts: bool = False,
) -> None:
    """Register every discovery path on ``router``.

    ``groups_enabled`` maps ``events.k8s.io/v1`` (or the bare group name) to whether it is
    served; a missing key means served, kube's default for a GA version. When it is off, the
    group's paths are not registered at all (so they get the router's 404 Status), ``/apis``
    lists no group and the aggregated ``/apis`` has no items. ``server_address`` gives the
    ``host:port`` advertised in ``/api`` (kube's ``--advertise-address`` and secure port).
    ``token_request`` says whether ``serviceaccounts/token`` is served: ``/api/v1`` and the
    aggregated ``/api`` then list it; ``core_events`` likewise for core/v1 ``events`` and
    ``service_accounts`` for core/v1 ``serviceaccounts``.

    Paths answered: ``/api`` and ``/api/v1`` (GET only, as go-restful routes), ``/apis`` (any
    method, as the aggregator's plain handler), ``/apis/events.k8s.io`` (any method),
    ``/apis/events.k8s.io/v1`` (GET only); each also with a trailing slash.
    """
    events = _events_enabled(groups_enabled)

    legacy_root = static_handler(lambda: docs.api_versions(server_address()))
    api_aggregated = AggregatedDocument(
        docs.aggregated_api_items(token_request, core_events, service_accounts)
    )
    _with_slash(router, "/api", get_only(aggregated_wrapper(legacy_root, api_aggregated)))
    core = static_handler(
        lambda: docs.core_resource_list(token_request, core_events, service_accounts)
    )
    _with_slash(router, "/api/v1", get_only(core))

    apis_aggregated = AggregatedDocument(docs.aggregated_apis_items(events, extra_groups))
    apis_legacy = static_handler(lambda: docs.api_group_list(events, extra_groups))
    _with_slash(router, "/apis", aggregated_wrapper(apis_legacy, apis_aggregated))
    for extra in extra_groups:
        _with_slash(router, f"/apis/{extra.name}", static_handler(extra.api_group))
        _with_slash(
            router,
            f"/apis/{extra.name}/{extra.version}",
            get_only(static_handler(extra.resource_list)),
        )

    if not events:
        return
    _with_slash(router, f"/apis/{docs.GROUP}", static_handler(docs.api_group))
    _with_slash(
        router, f"/apis/{docs.GROUP_VERSION}", get_only(static_handler(docs.events_resource_list))
    )
