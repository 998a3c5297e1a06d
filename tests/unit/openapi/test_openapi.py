"""``/openapi/v3`` and ``/openapi/v2``: documents, caching headers, and kubectl's checks."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_spec_validator.validation import OpenAPIV2SpecValidator, OpenAPIV30SpecValidator
from tests.unit.fake_request import FakeRequest
from tests.unit.unit_helpers import AppResource
from treq.testing import StubTreq
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.web.http_headers import Headers

from apiserver.http.app import App, RequestInfo, Router, ServingPolicy
from apiserver.openapi import documents as openapi_docs
from apiserver.openapi import install_openapi
from apiserver.openapi.handlers import (
    OpenAPIService,
    expires_one_year,
    http_date,
    parse_http_date,
)

REFERENCE = Path(__file__).resolve().parents[4] / "shared" / "reference"
BUILT = 1_700_000_000.0  # Tue, 14 Nov 2023 22:13:20 GMT
NOW = 1_700_000_100.0
EVENTS_V1 = "apis/events.k8s.io/v1"
ITEM = "/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}"
EVENT_GVK = {"group": "events.k8s.io", "version": "v1", "kind": "Event"}


def make(events: bool = True) -> tuple[StubTreq, OpenAPIService]:
    router = Router()
    times = iter([BUILT])
    service = install_openapi(
        router, events_enabled=events, clock=lambda: next(times, NOW), git_version="v1.35.0"
    )
    return StubTreq(AppResource(App(router, Clock(), ServingPolicy()))), service


def fetch(
    treq: StubTreq, path: str, method: str = "GET", **headers: str
) -> tuple[int, Headers, bytes]:
    sent = {name.replace("_", "-"): [value] for name, value in headers.items()}
    results: list[Any] = []
    d = treq.request(method, "https://x" + path, headers=sent, allow_redirects=False)
    d.addCallback(lambda r: r.content().addCallback(lambda body: (r.code, r.headers, body)))
    d.addBoth(results.append)
    assert results, "the request did not complete synchronously"
    if isinstance(results[0], Failure):
        results[0].raiseException()
    code, response_headers, body = results[0]
    return code, response_headers, body


def header(headers: Headers, name: str) -> list[str]:
    return [v.decode() for v in headers.getRawHeaders(name.encode(), [])]


def sha(data: bytes) -> str:
    return hashlib.sha512(data).hexdigest().upper()


def urls(treq: StubTreq) -> dict[str, str]:
    _, _, body = fetch(treq, "/openapi/v3")
    return {key: value["serverRelativeURL"] for key, value in json.loads(body)["paths"].items()}


# --- /openapi/v3 ---------------------------------------------------------------------------------


def test_v3_discovery_lists_every_document_with_its_hash() -> None:
    treq, _ = make()
    code, headers, body = fetch(treq, "/openapi/v3")
    assert code == 200
    paths = json.loads(body)["paths"]
    assert sorted(paths) == [
        "api",
        "api/v1",
        "apis",
        "apis/events.k8s.io",
        "apis/events.k8s.io/v1",
        "version",
    ]
    assert body.startswith(b'{"paths":{"api":{"serverRelativeURL":"/openapi/v3/api?hash=')
    for key, entry in paths.items():
        code, _, document = fetch(treq, f"/openapi/v3/{key}")
        assert code == 200
        assert entry == {"serverRelativeURL": f"/openapi/v3/{key}?hash={sha(document)}"}
    assert header(headers, "content-type") == ["application/json"]
    assert header(headers, "etag") == [f'"{sha(body)}"']
    assert header(headers, "last-modified") == ["Tue, 14 Nov 2023 22:13:20 GMT"]
    assert header(headers, "accept-ranges") == ["bytes"]
    assert header(headers, "cache-control") == ["no-cache, private"]
    assert header(headers, "vary") == []


def test_v3_group_version_with_its_hash_is_immutable() -> None:
    treq, _ = make()
    url = urls(treq)[EVENTS_V1]
    code, headers, body = fetch(treq, url)
    assert code == 200
    assert url.endswith("?hash=" + sha(body))
    assert header(headers, "content-type") == ["application/json"]
    assert header(headers, "etag") == [f'"{sha(body)}"']
    assert header(headers, "vary") == ["Accept"]
    assert header(headers, "cache-control") == ["public, immutable"]
    assert header(headers, "expires") == ["Thu, 14 Nov 2024 22:15:00 UTC"]
    assert header(headers, "last-modified") == ["Tue, 14 Nov 2023 22:13:20 GMT"]
    assert json.loads(body)["openapi"] == "3.0.0"


def test_v3_group_version_without_hash() -> None:
    treq, _ = make()
    code, headers, _ = fetch(treq, "/openapi/v3/apis/events.k8s.io/v1")
    assert code == 200
    assert header(headers, "cache-control") == ["no-cache, private"]
    assert header(headers, "expires") == []
    assert header(headers, "vary") == ["Accept"]


def test_v3_stale_hash_redirects() -> None:
    treq, _ = make()
    url = urls(treq)[EVENTS_V1]
    code, headers, body = fetch(treq, "/openapi/v3/apis/events.k8s.io/v1?hash=0123")
    assert (code, body) == (301, b"")
    assert header(headers, "location") == [url]
    assert header(headers, "content-type") == ["application/json"]
    assert header(headers, "cache-control") == ["no-cache, private"]


def test_v3_conditional_requests() -> None:
    treq, _ = make()
    _, headers, _ = fetch(treq, "/openapi/v3/apis/events.k8s.io")
    etag = header(headers, "etag")[0]
    for value in (etag, "W/" + etag, '"other", ' + etag, "*"):
        code, headers, body = fetch(treq, "/openapi/v3/apis/events.k8s.io", If_None_Match=value)
        assert (code, body) == (304, b"")
        assert header(headers, "content-type") == []
        assert header(headers, "last-modified") == []
        assert header(headers, "etag") == [etag]
    assert fetch(treq, "/openapi/v3/apis/events.k8s.io", If_None_Match='"other"')[0] == 200
    assert (
        fetch(treq, "/openapi/v3/apis/events.k8s.io", method="POST", If_None_Match=etag)[0] == 412
    )
    since = "Tue, 14 Nov 2023 22:13:20 GMT"
    code, headers, _ = fetch(treq, "/openapi/v3", If_Modified_Since=since)
    assert code == 304 and header(headers, "last-modified") == []
    assert fetch(treq, "/openapi/v3", If_Modified_Since="Tue, 14 Nov 2023 22:13:19 GMT")[0] == 200
    assert fetch(treq, "/openapi/v3", If_Match='"other"')[0] == 412
    assert fetch(treq, "/openapi/v3", If_Unmodified_Since="Mon, 13 Nov 2023 00:00:00 GMT")[0] == 412


def test_v3_ranges() -> None:
    treq, _ = make()
    _, _, full = fetch(treq, "/openapi/v3/api")
    code, headers, body = fetch(treq, "/openapi/v3/api", Range="bytes=0-9")
    assert (code, body) == (206, full[:10])
    assert header(headers, "content-range") == [f"bytes 0-9/{len(full)}"]
    code, _, body = fetch(treq, "/openapi/v3/api", Range="bytes=-5")
    assert (code, body) == (206, full[-5:])
    code, headers, body = fetch(treq, "/openapi/v3/api", Range=f"bytes={len(full)}-")
    assert (code, body) == (416, b"invalid range: failed to overlap\n")
    assert header(headers, "content-range") == [f"bytes */{len(full)}"]
    assert fetch(treq, "/openapi/v3/api", Range="bytes=0-1", If_Range='"stale"')[0] == 200
    code, headers, body = fetch(treq, "/openapi/v3/api", Range="bytes=0-1,4-5")
    assert code == 206
    (content_type,) = header(headers, "content-type")
    boundary = content_type.removeprefix("multipart/byteranges; boundary=")
    assert (
        body
        == (
            f"--{boundary}\r\nContent-Range: bytes 0-1/{len(full)}\r\n"
            f"Content-Type: application/json\r\n\r\n{full[:2].decode()}\r\n"
            f"--{boundary}\r\nContent-Range: bytes 4-5/{len(full)}\r\n"
            f"Content-Type: application/json\r\n\r\n{full[4:6].decode()}\r\n--{boundary}--\r\n"
        ).encode()
    )


def test_v3_unknown_group_version_and_protobuf() -> None:
    treq, _ = make()
    code, headers, body = fetch(treq, "/openapi/v3/apis/apps/v1")
    assert (code, body) == (200, b"")
    assert header(headers, "vary") == ["Accept"]
    accept = "application/com.github.proto-openapi.spec.v3.v1.0+protobuf"
    assert fetch(treq, "/openapi/v3/apis/events.k8s.io/v1", Accept=accept)[0] == 406
    code, _, body = fetch(treq, "/openapi/v3/api", Accept=accept + ", application/json;q=0.5")
    assert code == 200 and json.loads(body)["paths"]


def test_v3_events_turned_off() -> None:
    treq, _ = make(events=False)
    assert sorted(urls(treq)) == ["api", "api/v1", "apis", "version"]
    assert fetch(treq, "/openapi/v3/apis/events.k8s.io/v1")[::2] == (200, b"")
    _, _, body = fetch(treq, "/openapi/v2")
    assert not any("events" in path for path in json.loads(body)["paths"])


# --- the documents -------------------------------------------------------------------------------


def _v3(treq: StubTreq, key: str) -> dict[str, Any]:
    _, _, body = fetch(treq, urls(treq)[key], Accept="application/json")
    document: dict[str, Any] = json.loads(body)
    return document


def kubectl_supports_field_validation(root: StubTreq, gvk: dict[str, str]) -> bool:
    """cli-runtime's queryParamVerifierV3 (``supportsQueryParamV3``), step by step."""
    key = ("apis/" + gvk["group"] if gvk["group"] else "api") + "/" + gvk["version"]
    paths = urls(root)
    if key not in paths:
        raise LookupError("GroupVersionNotFound")
    document = _v3(root, key)
    for item in document["paths"].values():
        operation = item.get("patch")
        if operation is None:
            continue
        extension = operation.get("x-kubernetes-group-version-kind")
        if not isinstance(extension, dict):
            continue
        if {k: extension.get(k) for k in ("group", "version", "kind")} != gvk:
            continue
        return any(
            p.get("name") == "fieldValidation" and p.get("in") == "query"
            for p in operation.get("parameters", [])
        )
    raise LookupError("Path not found for GVK")


def test_kubectl_field_validation_check_passes() -> None:
    treq, _ = make()
    assert kubectl_supports_field_validation(treq, EVENT_GVK) is True
    with pytest.raises(LookupError, match="Path not found"):
        kubectl_supports_field_validation(treq, {"group": "", "version": "v1", "kind": "Event"})
    off, _ = make(events=False)
    with pytest.raises(LookupError, match="GroupVersionNotFound"):
        kubectl_supports_field_validation(off, EVENT_GVK)


def test_events_document_operations() -> None:
    treq, _ = make()
    document = _v3(treq, EVENTS_V1)
    raw = json.dumps(document)
    assert "consistentWatchCache" not in raw
    actions = {}
    for path, item in document["paths"].items():
        names = [p["name"] for p in item.get("parameters", [])]
        assert names == sorted(names)
        for method, operation in item.items():
            if method == "parameters":
                continue
            assert operation["responses"]["401"] == {"description": "Unauthorized"}
            if path.endswith("/v1/"):
                assert "x-kubernetes-action" not in operation
                continue
            assert operation["x-kubernetes-group-version-kind"] == {
                "group": "events.k8s.io",
                "kind": "Event",
                "version": "v1",
            }
            actions[operation["operationId"]] = operation["x-kubernetes-action"]
    assert actions == {
        "listEventsV1EventForAllNamespaces": "list",
        "deleteEventsV1CollectionNamespacedEvent": "deletecollection",
        "listEventsV1NamespacedEvent": "list",
        "createEventsV1NamespacedEvent": "post",
        "deleteEventsV1NamespacedEvent": "delete",
        "readEventsV1NamespacedEvent": "get",
        "patchEventsV1NamespacedEvent": "patch",
        "replaceEventsV1NamespacedEvent": "put",
        "watchEventsV1EventListForAllNamespaces": "watchlist",
        "watchEventsV1NamespacedEventList": "watchlist",
        "watchEventsV1NamespacedEvent": "watch",
    }
    patch = document["paths"]["/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}"][
        "patch"
    ]
    assert [p["name"] for p in patch["parameters"]] == [
        "dryRun",
        "fieldManager",
        "fieldValidation",
        "force",
    ]
    assert sorted(patch["requestBody"]["content"]) == [
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
    ]
    assert patch["requestBody"]["required"] is True
    listing = document["paths"]["/apis/events.k8s.io/v1/events"]["parameters"]
    assert "sendInitialEvents" in [p["name"] for p in listing]
    assert document["components"]["securitySchemes"]["BearerToken"]["type"] == "apiKey"


@pytest.mark.skipif(not (REFERENCE / "events-v1-openapi.json").exists(), reason="no reference")
def test_schemas_are_the_official_ones() -> None:
    treq, _ = make()
    reference = json.loads((REFERENCE / "events-v1-openapi.json").read_text())
    served = _v3(treq, EVENTS_V1)["components"]["schemas"]
    meta = served["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["properties"]
    assert "clusterName" not in meta
    assert meta["finalizers"]["x-kubernetes-list-type"] == "set"
    assert meta["ownerReferences"]["x-kubernetes-list-map-keys"] == ["uid"]
    openapi_docs.modernize_schemas(reference["components"]["schemas"])
    assert served == reference["components"]["schemas"]
    group = json.loads((REFERENCE / "events-group-openapi.json").read_text())
    assert _v3(treq, "apis/events.k8s.io") == group


def _real_errors(errors: list[Any]) -> list[str]:
    # kube's documents put ``"default": {}`` next to references to schemas with required
    # fields (the official events.k8s.io document does too): those are not our errors.
    return [
        str(e.message)
        for e in errors
        if not (e.validator == "required" and list(e.schema_path)[:1] == ["allOf"])
    ]


def test_v3_documents_are_valid_openapi() -> None:
    documents = openapi_docs.v3_documents(events_enabled=True, logs_enabled=True)
    for key, document in documents.items():
        errors = list(OpenAPIV30SpecValidator(document).iter_errors())
        assert _real_errors(errors) == [], key


def test_small_documents() -> None:
    treq, _ = make()
    api = _v3(treq, "api")
    assert api["paths"]["/api/"]["get"]["operationId"] == "getCoreAPIVersions"
    apis = _v3(treq, "apis")
    assert apis["paths"]["/apis/"]["get"]["operationId"] == "getAPIVersions"
    version = _v3(treq, "version")
    content = version["paths"]["/version/"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["application/json"]
    info = version["components"]["schemas"]["io.k8s.apimachinery.pkg.version.Info"]
    assert "emulationMajor" in info["properties"] and "emulationMajor" not in info["required"]
    core = _v3(treq, "api/v1")
    assert list(core["paths"]) == ["/api/v1/"]
    logs = openapi_docs.v3_documents(events_enabled=False, logs_enabled=True)["logs"]
    assert sorted(logs["paths"]) == ["/logs/", "/logs/{logpath}"]


def test_marshal_is_go_json() -> None:
    assert openapi_docs.marshal({"b": "<&>", "a": [1, True, None]}) == (
        b'{"a":[1,true,null],"b":"\\u003c\\u0026\\u003e"}'
    )


# --- /openapi/v2 ---------------------------------------------------------------------------------


def _refs(value: Any) -> set[str]:
    if isinstance(value, dict):
        found = {value["$ref"]} if isinstance(value.get("$ref"), str) else set()
        for item in value.values():
            found |= _refs(item)
        return found
    if isinstance(value, list):
        return set().union(*(_refs(item) for item in value)) if value else set()
    return set()


def _has_key(value: Any, key: str) -> bool:
    if isinstance(value, dict):
        return key in value or any(_has_key(item, key) for item in value.values())
    if isinstance(value, list):
        return any(_has_key(item, key) for item in value)
    return False


def test_v2_is_valid_swagger() -> None:
    treq, _ = make()
    code, headers, body = fetch(treq, "/openapi/v2")
    assert code == 200
    document = json.loads(body)
    assert list(OpenAPIV2SpecValidator(document).iter_errors()) == []
    assert document["swagger"] == "2.0"
    assert document["info"] == {"title": "Kubernetes", "version": "v1.35.0"}
    assert "io.k8s.api.events.v1.Event" in document["definitions"]
    assert not _has_key(document["definitions"], "default")
    for ref in _refs(document):
        assert ref.startswith("#/definitions/")
        assert ref.removeprefix("#/definitions/") in document["definitions"]
    patch = document["paths"]["/apis/events.k8s.io/v1/namespaces/{namespace}/events/{name}"][
        "patch"
    ]
    assert patch["x-kubernetes-group-version-kind"] == {
        "group": "events.k8s.io",
        "kind": "Event",
        "version": "v1",
    }
    assert patch["parameters"][0] == {
        "in": "body",
        "name": "body",
        "required": True,
        "schema": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"},
    }
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]
    assert patch["consumes"][0] == "application/json-patch+json"
    assert patch["schemes"] == ["https"]
    assert header(headers, "vary") == ["Accept-Encoding", "Accept"]
    assert header(headers, "etag") == [f'"{sha(body)}"']
    assert header(headers, "content-type") == ["application/json"]


class _Request(FakeRequest):
    def __init__(self, **headers: str) -> None:
        super().__init__(
            headers={
                name.replace("_", "-").encode(): [value.encode()] for name, value in headers.items()
            }
        )


def _info(path: str, method: str = "GET") -> RequestInfo:
    return RequestInfo(method, path, {}, False, False)


def test_v2_gzip_and_negotiation() -> None:
    _, service = make()
    response = service.handle_v2(_Request(Accept_Encoding="gzip, deflate"), _info("/openapi/v2"))
    assert response.code == 200
    assert response.header("Content-Encoding") == "gzip"
    assert gzip.decompress(response.body) == service.v2.body
    plain = service.handle_v2(_Request(), _info("/openapi/v2"))
    assert plain.header("Content-Encoding") is None and plain.body == service.v2.body
    head = service.handle_v2(_Request(Accept_Encoding="gzip"), _info("/openapi/v2", "HEAD"))
    assert head.header("Content-Encoding") is None
    refused = service.handle_v2(_Request(Accept_Encoding="gzip;q=0"), _info("/openapi/v2"))
    assert refused.header("Content-Encoding") is None
    response = service.handle_v2(_Request(Accept="text/html"), _info("/openapi/v2"))
    assert (response.code, response.body) == (406, b"")
    assert [v for k, v in response.headers if k == "Vary"] == ["Accept-Encoding", "Accept"]
    etag = f'"{service.v2.etag}"'
    response = service.handle_v2(_Request(If_None_Match=etag), _info("/openapi/v2"))
    assert response.code == 304


def _fields(data: bytes) -> list[tuple[int, Any]]:
    """A protobuf message as (field number, value) pairs: varints as int, the rest as bytes."""
    fields: list[tuple[int, Any]] = []
    position = 0

    def varint() -> int:
        nonlocal position
        shift = result = 0
        while True:
            byte = data[position]
            position += 1
            result |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return result

    while position < len(data):
        key = varint()
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            fields.append((number, varint()))
        elif wire_type == 2:
            length = varint()
            fields.append((number, data[position : position + length]))
            position += length
        elif wire_type == 1:
            fields.append((number, data[position : position + 8]))
            position += 8
        else:
            raise AssertionError(f"unexpected wire type {wire_type}")
    return fields


def _one(data: bytes, number: int) -> Any:
    (value,) = [v for n, v in _fields(data) if n == number]
    return value


def _all(data: bytes, number: int) -> list[Any]:
    return [v for n, v in _fields(data) if n == number]


def _named(data: bytes, number: int) -> dict[str, bytes]:
    return {_one(entry, 1).decode(): _one(entry, 2) for entry in _all(data, number)}


def test_v2_protobuf_is_gnostics_document() -> None:
    _, service = make()
    for accept in (
        "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
        "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
    ):
        response = service.handle_v2(_Request(Accept=accept), _info("/openapi/v2"))
        assert response.code == 200
        assert response.header("Content-Type") == (
            "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        )
        assert response.header("Etag") == f'"{service.v2.etag}"'
    document = response.body
    assert _one(document, 1) == b"2.0"  # swagger
    info = _one(document, 2)
    assert (_one(info, 1), _one(info, 2)) == (b"Kubernetes", b"v1.35.0")
    paths = _named(_one(document, 8), 2)
    assert set(paths) == set(json.loads(service.v2.body)["paths"])
    patch = _one(paths[ITEM], 8)  # PathItem.patch
    assert _one(patch, 5) == b"patchEventsV1NamespacedEvent"  # operation_id
    extensions = _named(patch, 13)  # Operation.vendor_extension -> Any
    gvk = yaml.safe_load(_one(extensions["x-kubernetes-group-version-kind"], 2))
    assert gvk == {"group": "events.k8s.io", "kind": "Event", "version": "v1"}
    names = []
    for item in _all(patch, 8):  # ParametersItem -> Parameter
        parameter = _one(item, 1)
        if _all(parameter, 1):  # body parameter
            names.append(_one(_one(parameter, 1), 2).decode())
            continue
        query = _one(_one(parameter, 2), 3)  # NonBodyParameter.query_parameter_sub_schema
        assert _one(query, 2) == b"query"
        names.append(_one(query, 4).decode())
    assert names == ["body", "dryRun", "fieldManager", "fieldValidation", "force"]
    definitions = _named(_one(document, 9), 1)
    event = definitions["io.k8s.api.events.v1.Event"]
    assert _one(_one(event, 22), 1) == b"object"  # TypeItem
    properties = _named(_one(event, 25), 1)
    assert _one(properties["metadata"], 1) == (
        b"#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    )
    assert _all(event, 19) == [b"eventTime"]  # required
    security = _named(_one(document, 13), 1)["BearerToken"]
    api_key = _one(security, 2)
    assert (_one(api_key, 1), _one(api_key, 2), _one(api_key, 3)) == (
        b"apiKey",
        b"authorization",
        b"header",
    )


# --- dates ---------------------------------------------------------------------------------------


def test_dates() -> None:
    assert http_date(BUILT) == "Tue, 14 Nov 2023 22:13:20 GMT"
    assert parse_http_date("Tue, 14 Nov 2023 22:13:20 GMT") == int(BUILT)
    assert parse_http_date("Tuesday, 14-Nov-23 22:13:20 GMT") == int(BUILT)
    assert parse_http_date("Tue Nov 14 22:13:20 2023") == int(BUILT)
    assert parse_http_date("yesterday") is None
    # Go's AddDate(1, 0, 0) turns 29 February into 1 March.
    leap = 1_709_208_000.0  # Thu, 29 Feb 2024 12:00:00 UTC
    assert expires_one_year(leap) == "Sat, 01 Mar 2025 12:00:00 UTC"
