"""The OpenAPI documents we serve: v3 per group version, and one Swagger 2.0 document.

The events documents are the official ones (shipped as package data under ``data/``, copied
from the project's reference set), brought to the shape kube-openapi's builder3 gives them in
the releases we emulate, where the reference copy differs:

- the reference's ``consistentWatchCache`` query parameter is not upstream; kube has
  ``sendInitialEvents`` (list options, 1.27+) in exactly those places, and so do we;
- every Event operation carries ``x-kubernetes-action`` and ``x-kubernetes-group-version-kind``
  (kubectl's ``fieldValidation`` support check looks for the PATCH operation by that
  extension: cli-runtime pkg/resource/query_param_verifier_v3.go);
- every operation lists the ``401 Unauthorized`` response, and request bodies carry kube's
  media types (``*/*``; the four patch types for PATCH) and ``required``;
- operation parameters are sorted by name, and ``components.securitySchemes`` has the
  ``BearerToken`` scheme, as builder3 writes them;
- ObjectMeta as in current releases and as our own types have it (apiserver.api.events.schema):
  no ``clusterName`` (removed in 1.25), ``finalizers`` a set, ``ownerReferences`` a map keyed
  by ``uid``, ``managedFields`` atomic; APIResource ``categories``/``shortNames`` atomic.

The small documents for ``/api``, ``/api/v1``, ``/apis``, ``/version`` and ``/logs`` follow
the structure of kube's (the paths, operation ids, tags and media types clients see); their
schemas reuse the reference set's where it has them.

The Swagger 2.0 document is derived from the v3 ones the way kube's two builders differ:
``#/definitions/`` references, the ``allOf`` wrappers around references flattened, defaults
pruned (genericapiserver routes/openapi.go prunes them from v2), body parameters,
``consumes``/``produces`` and ``schemes``.

All documents are marshalled with sorted keys, as Go sorts the maps they mostly consist of.
"""

from __future__ import annotations

import copy
import hashlib
import json
from functools import cache
from importlib import resources
from typing import Any

from apiserver.gocompat.marshal import go_marshal_plain

INFO = {"title": "Kubernetes", "version": "unversioned"}
OPENAPI_VERSION = "3.0.0"
META = "io.k8s.apimachinery.pkg.apis.meta.v1"
REF_V3 = "#/components/schemas/"
REF_V2 = "#/definitions/"
EVENT_GVK = {"group": "events.k8s.io", "kind": "Event", "version": "v1"}
#: kube's serializers, in the order it lists them in v2 ``produces``.
MEDIA_TYPES = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
STREAM_MEDIA_TYPES = (
    "application/json;stream=watch",
    "application/vnd.kubernetes.protobuf;stream=watch",
)
PATCH_MEDIA_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
)
UNAUTHORIZED = {"description": "Unauthorized"}
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch")

SEND_INITIAL_EVENTS = {
    "description": (
        "sendInitialEvents asks a watch to start with a synthetic ADDED event for every object "
        "that matches, followed (with allowWatchBookmarks=true) by a BOOKMARK annotated "
        '"k8s.io/initial-events-end": "true" once they have all been sent. It must be used '
        "with resourceVersionMatch=NotOlderThan and is forbidden for plain lists."
    ),
    "in": "query",
    "name": "sendInitialEvents",
    "schema": {"type": "boolean", "uniqueItems": True},
}


# --- reference data ---------------------------------------------------------------------------


@cache
def _reference(name: str) -> dict[str, Any]:
    text = resources.files("apiserver.openapi").joinpath("data").joinpath(name).read_text("utf-8")
    document: dict[str, Any] = json.loads(text)
    return document


def _events_v1_reference() -> dict[str, Any]:
    return copy.deepcopy(_reference("events-v1-openapi.json"))


def _events_group_reference() -> dict[str, Any]:
    return copy.deepcopy(_reference("events-group-openapi.json"))


def security_schemes() -> dict[str, Any]:
    """``BearerToken``, as every kube v3 document declares it."""
    return copy.deepcopy(_reference("events-group-openapi.json")["components"]["securitySchemes"])


def _schema(document: str, name: str) -> dict[str, Any]:
    schema: dict[str, Any] = copy.deepcopy(_reference(document)["components"]["schemas"][name])
    return schema


def _type_meta_properties() -> dict[str, Any]:
    """The ``apiVersion`` and ``kind`` properties every kube object schema has."""
    properties = _reference("events-group-openapi.json")["components"]["schemas"][
        f"{META}.APIGroup"
    ]["properties"]
    return {key: copy.deepcopy(properties[key]) for key in ("apiVersion", "kind")}


# --- the events.k8s.io/v1 document ------------------------------------------------------------


def _action(method: str, path: str) -> str:
    """builder3's ``x-kubernetes-action`` for an operation on ``path``."""
    single = path.endswith("/{name}")
    if method == "get":
        if "/watch/" in path:
            return "watch" if single else "watchlist"
        return "get" if single else "list"
    if method == "delete":
        return "delete" if single else "deletecollection"
    return {"post": "post", "put": "put", "patch": "patch"}[method]


def _fix_parameters(parameters: list[dict[str, Any]]) -> list[dict[str, Any]]:
    fixed = []
    for parameter in parameters:
        if parameter.get("name") == "consistentWatchCache":
            parameter = copy.deepcopy(SEND_INITIAL_EVENTS)
        fixed.append(parameter)
    return sorted(fixed, key=lambda p: str(p.get("name", "")))


def _request_body(method: str, body: dict[str, Any]) -> dict[str, Any]:
    schema = next(iter(body["content"].values()))["schema"]
    if method == "patch":
        return {
            "content": {media: {"schema": dict(schema)} for media in PATCH_MEDIA_TYPES},
            "required": True,
        }
    fixed: dict[str, Any] = {"content": {"*/*": {"schema": schema}}}
    if method in ("post", "put"):
        fixed["required"] = True
    return fixed


def modernize_schemas(schemas: dict[str, Any]) -> None:
    """The schema changes since the reference's release that our types follow (in place)."""
    meta = schemas[f"{META}.ObjectMeta"]["properties"]
    meta.pop("clusterName", None)
    meta["finalizers"]["x-kubernetes-list-type"] = "set"
    meta["ownerReferences"]["x-kubernetes-list-map-keys"] = ["uid"]
    meta["ownerReferences"]["x-kubernetes-list-type"] = "map"
    meta["managedFields"]["x-kubernetes-list-type"] = "atomic"
    resource = schemas[f"{META}.APIResource"]["properties"]
    for name in ("categories", "shortNames"):
        resource[name]["x-kubernetes-list-type"] = "atomic"


@cache
def _events_v1_cached() -> dict[str, Any]:
    document = _events_v1_reference()
    modernize_schemas(document["components"]["schemas"])
    for path, item in document["paths"].items():
        if "parameters" in item:
            item["parameters"] = _fix_parameters(item["parameters"])
        for method in _METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            if "parameters" in operation:
                operation["parameters"] = _fix_parameters(operation["parameters"])
            if "requestBody" in operation:
                operation["requestBody"] = _request_body(method, operation["requestBody"])
            operation["responses"].setdefault("401", dict(UNAUTHORIZED))
            if path.endswith("/v1/"):
                continue  # the discovery GET has no resource kind
            operation["x-kubernetes-action"] = _action(method, path)
            operation["x-kubernetes-group-version-kind"] = dict(EVENT_GVK)
    document["components"]["securitySchemes"] = security_schemes()
    return document


def events_v1_document() -> dict[str, Any]:
    """``/openapi/v3/apis/events.k8s.io/v1``."""
    return copy.deepcopy(_events_v1_cached())


def events_group_document() -> dict[str, Any]:
    """``/openapi/v3/apis/events.k8s.io``: the reference document as it is."""
    return _events_group_reference()


# --- the small documents ----------------------------------------------------------------------


def _content(ref: str, media_types: tuple[str, ...] = MEDIA_TYPES) -> dict[str, Any]:
    return {media: {"schema": {"$ref": REF_V3 + ref}} for media in sorted(media_types)}


def _discovery_get(
    operation_id: str,
    description: str,
    tag: str,
    ref: str,
    media_types: tuple[str, ...] = MEDIA_TYPES,
) -> dict[str, Any]:
    return {
        "get": {
            "description": description,
            "operationId": operation_id,
            "responses": {
                "200": {"content": _content(ref, media_types), "description": "OK"},
                "401": dict(UNAUTHORIZED),
            },
            "tags": [tag],
        }
    }


def _document(paths: dict[str, Any], schemas: dict[str, Any] | None) -> dict[str, Any]:
    components: dict[str, Any] = {}
    if schemas:
        components["schemas"] = schemas
    components["securitySchemes"] = security_schemes()
    return {
        "components": components,
        "info": dict(INFO),
        "openapi": OPENAPI_VERSION,
        "paths": paths,
    }


def _array_of(ref: str, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "items": {"allOf": [{"$ref": REF_V3 + ref}], "default": {}},
        "type": "array",
    }


def _gvk(kind: str) -> list[dict[str, str]]:
    return [{"group": "", "kind": kind, "version": "v1"}]


def api_versions_schema() -> dict[str, Any]:
    """``APIVersions``, the ``/api`` document (descriptions ours)."""
    return {
        "description": "APIVersions lists the versions of the legacy core API served under /api.",
        "properties": {
            **_type_meta_properties(),
            "serverAddressByClientCIDRs": _array_of(
                f"{META}.ServerAddressByClientCIDR",
                "The addresses at which clients in each network can reach this server.",
            ),
            "versions": {
                "description": "The versions of the core API that are available.",
                "items": {"default": "", "type": "string"},
                "type": "array",
            },
        },
        "required": ["versions", "serverAddressByClientCIDRs"],
        "type": "object",
        "x-kubernetes-group-version-kind": _gvk("APIVersions"),
    }


def api_group_list_schema() -> dict[str, Any]:
    """``APIGroupList``, the ``/apis`` document (descriptions ours)."""
    return {
        "description": "APIGroupList lists the API groups served under /apis.",
        "properties": {
            **_type_meta_properties(),
            "groups": _array_of(f"{META}.APIGroup", "The API groups this server serves."),
        },
        "required": ["groups"],
        "type": "object",
        "x-kubernetes-group-version-kind": _gvk("APIGroupList"),
    }


#: The fields of ``/version`` (apimachinery version.Info); the last four exist since 1.33.
VERSION_FIELDS = (
    "major",
    "minor",
    "gitVersion",
    "gitCommit",
    "gitTreeState",
    "buildDate",
    "goVersion",
    "compiler",
    "platform",
)
EMULATION_FIELDS = (
    "emulationMajor",
    "emulationMinor",
    "minCompatibilityMajor",
    "minCompatibilityMinor",
)


def version_info_schema() -> dict[str, Any]:
    """``io.k8s.apimachinery.pkg.version.Info`` as our ``/version`` writes it."""
    properties: dict[str, Any] = {
        name: {"default": "", "type": "string"} for name in VERSION_FIELDS
    }
    for name in EMULATION_FIELDS:
        properties[name] = {"type": "string"}
    return {
        "description": "Info holds the version of the server binary and of the API it emulates.",
        "properties": dict(sorted(properties.items())),
        "required": list(VERSION_FIELDS),
        "type": "object",
    }


def api_document() -> dict[str, Any]:
    """``/openapi/v3/api``."""
    schemas = {
        f"{META}.APIVersions": api_versions_schema(),
        f"{META}.ServerAddressByClientCIDR": _schema(
            "events-group-openapi.json", f"{META}.ServerAddressByClientCIDR"
        ),
    }
    paths = {
        "/api/": _discovery_get(
            "getCoreAPIVersions", "get available API versions", "core", f"{META}.APIVersions"
        )
    }
    return _document(paths, schemas)


def api_v1_document(
    events: bool = False, service_accounts: bool = False, token_request: bool = False
) -> dict[str, Any]:
    """``/openapi/v3/api/v1``: the core group version: its discovery GET and, when core/v1
    events are served, their operations and schemas as kube publishes them (the Event part of
    kube's ``api__v1_openapi.json``, shipped under ``data/``)."""
    events_schemas = _events_v1_cached()["components"]["schemas"]
    schemas = {
        name: copy.deepcopy(events_schemas[name])
        for name in (f"{META}.APIResource", f"{META}.APIResourceList")
    }
    paths = {
        "/api/v1/": _discovery_get(
            "getCoreV1APIResources", "get available resources", "core_v1", f"{META}.APIResourceList"
        )
    }
    if events:
        core_events = copy.deepcopy(_reference("core-v1-events-openapi.json"))
        schemas.update(core_events["components"]["schemas"])
        paths.update(core_events["paths"])
    if service_accounts:
        # The ServiceAccount part of kube's ``api__v1_openapi.json`` (with the TokenRequest
        # subresource when it is served); schemas shared with events are kept as they are.
        reference = copy.deepcopy(_reference("core-v1-serviceaccounts-openapi.json"))
        for path, item in reference["paths"].items():
            if "serviceaccounts" in path and (token_request or not path.endswith("/token")):
                paths[path] = item
        for name, schema in reference["components"]["schemas"].items():
            schemas.setdefault(name, schema)
    return _document(dict(sorted(paths.items())), dict(sorted(schemas.items())))


def review_documents() -> dict[str, dict[str, Any]]:
    """``/openapi/v3/apis/authentication.k8s.io/v1`` and ``.../authorization.k8s.io/v1``: the
    official documents as kube publishes them (:mod:`apiserver.api.reviews`)."""
    documents: dict[str, dict[str, Any]] = {}
    for group in ("authentication.k8s.io", "authorization.k8s.io"):
        short = group.split(".")[0]
        documents[f"apis/{group}"] = _group_document(group, short)
        documents[f"apis/{group}/v1"] = copy.deepcopy(_reference(f"{short}-v1-openapi.json"))
    return documents


def _group_document(group: str, short: str) -> dict[str, Any]:
    """``/openapi/v3/apis/<group>``: the group's discovery GET, shaped as kube's builder
    writes every group's (the events.k8s.io one with the group's names)."""
    document = _events_group_reference()
    operation = document["paths"].pop("/apis/events.k8s.io/")
    operation["get"]["operationId"] = f"get{short.capitalize()}APIGroup"
    operation["get"]["tags"] = [short]
    document["paths"] = {f"/apis/{group}/": operation}
    return document


def apis_document() -> dict[str, Any]:
    """``/openapi/v3/apis``."""
    schemas = {f"{META}.APIGroupList": api_group_list_schema()}
    for name in ("APIGroup", "GroupVersionForDiscovery", "ServerAddressByClientCIDR"):
        schemas[f"{META}.{name}"] = _schema("events-group-openapi.json", f"{META}.{name}")
    paths = {
        "/apis/": _discovery_get(
            "getAPIVersions", "get available API versions", "apis", f"{META}.APIGroupList"
        )
    }
    return _document(paths, schemas)


def version_document() -> dict[str, Any]:
    """``/openapi/v3/version``."""
    schemas = {"io.k8s.apimachinery.pkg.version.Info": version_info_schema()}
    paths = {
        "/version/": _discovery_get(
            "getCodeVersion",
            "get the version information for this server",
            "version",
            "io.k8s.apimachinery.pkg.version.Info",
            ("application/json",),
        )
    }
    return _document(paths, schemas)


def logs_document() -> dict[str, Any]:
    """``/openapi/v3/logs`` (``--enable-logs-handler``)."""
    paths = {
        "/logs/": {
            "get": {
                "operationId": "logFileListHandler",
                "responses": {"401": dict(UNAUTHORIZED)},
                "tags": ["logs"],
            }
        },
        "/logs/{logpath}": {
            "get": {
                "operationId": "logFileHandler",
                "responses": {"401": dict(UNAUTHORIZED)},
                "tags": ["logs"],
            },
            "parameters": [
                {
                    "description": "path to the log",
                    "in": "path",
                    "name": "logpath",
                    "required": True,
                    "schema": {"type": "string", "uniqueItems": True},
                }
            ],
        },
    }
    return _document(paths, None)


def v3_documents(
    *,
    events_enabled: bool,
    logs_enabled: bool = False,
    core_events: bool = False,
    service_accounts: bool = False,
    token_request: bool = False,
    reviews: bool = False,
) -> dict[str, dict[str, Any]]:
    """Every v3 document by its ``/openapi/v3`` key (the path without its leading slash)."""
    documents = {
        "api": api_document(),
        "api/v1": api_v1_document(core_events, service_accounts, token_request),
        "apis": apis_document(),
        "version": version_document(),
    }
    if events_enabled:
        documents["apis/events.k8s.io"] = events_group_document()
        documents["apis/events.k8s.io/v1"] = events_v1_document()
    if logs_enabled:
        documents["logs"] = logs_document()
    if reviews:
        documents.update(review_documents())
    return dict(sorted(documents.items()))


# --- marshalling --------------------------------------------------------------------------------


def marshal(document: Any) -> bytes:
    """The document as Go's ``json.Marshal`` writes it (compact, keys sorted, HTML-safe)."""
    return go_marshal_plain(document, sort_keys=True)


def etag(data: bytes) -> str:
    """kube-openapi's ``computeETag``: SHA-512 of the bytes served, upper-case hex."""
    return hashlib.sha512(data).hexdigest().upper()


# --- Swagger 2.0 ------------------------------------------------------------------------------


def schema_v2(schema: Any) -> Any:
    """A v3 schema as a Swagger 2.0 definition."""
    if isinstance(schema, list):
        return [schema_v2(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    converted: dict[str, Any] = {}
    all_of = schema.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and set(all_of[0]) == {"$ref"}:
        converted["$ref"] = all_of[0]["$ref"].replace(REF_V3, REF_V2)
    for key, value in schema.items():
        if key == "default" or (key == "allOf" and "$ref" in converted):
            continue
        if key == "$ref" and isinstance(value, str):
            converted[key] = value.replace(REF_V3, REF_V2)
        elif key == "properties" and isinstance(value, dict):
            converted[key] = {name: schema_v2(prop) for name, prop in value.items()}
        elif key in ("items", "additionalProperties", "allOf", "anyOf", "oneOf", "not"):
            converted[key] = schema_v2(value)
        else:
            converted[key] = value
    return converted


def _parameter_v2(parameter: dict[str, Any]) -> dict[str, Any]:
    converted = {key: value for key, value in parameter.items() if key != "schema"}
    converted.update(parameter.get("schema", {}))
    return converted


def _produces(operation: dict[str, Any]) -> list[str]:
    media: set[str] = set()
    for response in operation.get("responses", {}).values():
        media.update(response.get("content", {}))
    return [m for m in (*MEDIA_TYPES, *STREAM_MEDIA_TYPES) if m in media]


def _operation_v2(operation: dict[str, Any]) -> dict[str, Any]:
    converted: dict[str, Any] = {}
    parameters: list[dict[str, Any]] = []
    body = operation.get("requestBody")
    produces = _produces(operation)
    if body is not None:
        content = body["content"]
        consumes = [m for m in PATCH_MEDIA_TYPES if m in content] or list(content)
        schema = next(iter(content.values()))["schema"]
        parameter: dict[str, Any] = {"in": "body", "name": "body", "schema": schema_v2(schema)}
        if body.get("required"):
            parameter["required"] = True
        parameters.append(parameter)
    elif produces and not operation.get("x-kubernetes-action"):
        consumes = list(produces)  # the discovery routes consume what they produce
    else:
        consumes = ["*/*"]
    parameters.extend(_parameter_v2(p) for p in operation.get("parameters", []))
    for key, value in operation.items():
        if key in ("requestBody", "parameters"):
            continue
        if key == "responses":
            converted[key] = {code: _response_v2(r) for code, r in value.items()}
        else:
            converted[key] = value
    if produces:
        converted["consumes"] = consumes
        converted["produces"] = produces
    elif body is not None:
        converted["consumes"] = consumes
    if parameters:
        converted["parameters"] = parameters
    converted["schemes"] = ["https"]
    return converted


def _response_v2(response: dict[str, Any]) -> dict[str, Any]:
    converted = {"description": response.get("description", "")}
    content = response.get("content")
    if content:
        preferred = content.get("application/json") or next(iter(content.values()))
        converted["schema"] = schema_v2(preferred["schema"])
    return converted


def swagger_v2(documents: dict[str, dict[str, Any]], git_version: str) -> dict[str, Any]:
    """``/openapi/v2``: every path and definition of the v3 ``documents``, in Swagger 2.0."""
    paths: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for document in documents.values():
        for name, schema in document.get("components", {}).get("schemas", {}).items():
            definitions[name] = schema_v2(schema)
        for path, item in document["paths"].items():
            converted: dict[str, Any] = {}
            for key, value in item.items():
                if key == "parameters":
                    converted[key] = [_parameter_v2(p) for p in value]
                elif key in _METHODS:
                    converted[key] = _operation_v2(value)
                else:
                    converted[key] = value
            paths[path] = converted
    scheme = next(iter(security_schemes().values()))
    return {
        "definitions": dict(sorted(definitions.items())),
        "info": {"title": "Kubernetes", "version": git_version.split("-")[0]},
        "paths": dict(sorted(paths.items())),
        "security": [{"BearerToken": []}],
        "securityDefinitions": {"BearerToken": scheme},
        "swagger": "2.0",
    }
