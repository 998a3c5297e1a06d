"""Accept / Content-Type negotiation, pretty printing and includeObject."""

from __future__ import annotations

import pytest

from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.negotiation import (
    AcceptClause,
    Output,
    error_prefers_protobuf,
    go_parse_media_type,
    include_object,
    negotiate_body,
    negotiate_output,
    parse_accept,
    patch_type,
    wants_pretty,
)

KUBECTL_GET = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
    "g=meta.k8s.io,application/json"
)
NOT_ACCEPTABLE = (
    "only the following media types are accepted: application/json, application/yaml, "
    "application/vnd.kubernetes.protobuf"
)
STREAM_NOT_ACCEPTABLE = (
    "only the following media types are accepted: application/json;stream=watch, "
    "application/vnd.kubernetes.protobuf;stream=watch"
)
BODY_415 = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json, application/yaml, application/vnd.kubernetes.protobuf"
)
PATCH_415 = (
    "the body of the request was in an unknown format - accepted media types include: "
    "application/json-patch+json, application/merge-patch+json, "
    "application/strategic-merge-patch+json, application/apply-patch+yaml"
)


def q(**params: str) -> dict[bytes, list[bytes]]:
    return {k.encode(): [v.encode()] for k, v in params.items()}


def get(accept: str | None) -> Output:
    return negotiate_output(accept, is_list=False, is_watch=False)


def lst(accept: str | None) -> Output:
    return negotiate_output(accept, is_list=True, is_watch=False)


def watch(accept: str | None) -> Output:
    return negotiate_output(accept, is_list=True, is_watch=True)


def error(fn, *args, **kwargs) -> StatusError:  # type: ignore[no-untyped-def]
    with pytest.raises(StatusError) as info:
        fn(*args, **kwargs)
    return info.value


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, Output("json", None, "application/json")),
        ("", Output("json", None, "application/json")),
        ("*/*", Output("json", None, "application/json")),
        ("application/json", Output("json", None, "application/json")),
        ("application/json, */*", Output("json", None, "application/json")),
        ("application/yaml", Output("yaml", None, "application/yaml")),
        ("application/json;pretty=1", Output("json", None, "application/json", None, True)),
        (
            "application/vnd.kubernetes.protobuf, application/json",
            Output("protobuf", None, "application/vnd.kubernetes.protobuf"),
        ),
        (
            "application/vnd.kubernetes.protobuf,*/*",
            Output("protobuf", None, "application/vnd.kubernetes.protobuf"),
        ),
        # Table is JSON/YAML only: the protobuf Table clause is skipped.
        (
            "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1,application/json",
            Output("json", None, "application/json"),
        ),
        ("application/json;q=0.5,application/yaml", Output("yaml", None, "application/yaml")),
        (
            "application/yaml;q=0.1,application/*;q=0.5,application/json;q=0.2",
            Output("json", None, "application/json"),
        ),
        ("application/json;stream=watch", Output("json", None, "application/json")),
        (
            "application/yaml;stream=watch,application/json",
            Output("json", None, "application/json"),
        ),
        ("application/json;sv=v2,application/yaml", Output("yaml", None, "application/yaml")),
        ("application/json;as=Foo,application/yaml", Output("yaml", None, "application/yaml")),
        (KUBECTL_GET, Output("table", "v1", "application/json", "Table")),
        (
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            Output("table", "v1beta1", "application/json", "Table"),
        ),
        (
            "application/yaml;as=Table;v=v1;g=meta.k8s.io",
            Output("table", "v1", "application/yaml", "Table"),
        ),
        (
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
            Output("partial", "v1", "application/json", "PartialObjectMetadata"),
        ),
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1beta1,application/json",
            Output("partial", "v1", "application/vnd.kubernetes.protobuf", "PartialObjectMetadata"),
        ),
        # as=Table without the meta group is skipped.
        ("application/json;as=Table,application/yaml", Output("yaml", None, "application/yaml")),
    ],
)
def test_get(accept: str | None, expected: Output) -> None:
    assert get(accept) == expected


@pytest.mark.parametrize(
    "accept",
    ["text/html", "application/*", "text/*", "application/xml, text/plain", "application"],
)
def test_router_406(accept: str) -> None:
    err = error(get, accept)
    assert (err.code, err.reason, err.message, err.details) == (
        406,
        "NotAcceptable",
        "406: Not Acceptable",
        {},
    )


@pytest.mark.parametrize(
    "accept",
    [
        "application/json;as=Table",
        "application/json;as=Table;g=meta.k8s.io;v=v2",
        "application/json;stream=foo",
        "application/yaml;stream=watch",
        "application/json;sv=v9",
        "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1",
    ],
)
def test_handler_406(accept: str) -> None:
    err = error(get, accept)
    assert (err.code, err.reason, err.message, err.details) == (
        406,
        "NotAcceptable",
        NOT_ACCEPTABLE,
        None,
    )


def test_partial_list_forms() -> None:
    list_accept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
    single_accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
    assert lst(list_accept) == Output(
        "partial", "v1", "application/json", "PartialObjectMetadataList"
    )
    err = error(lst, single_accept)
    assert (err.code, err.reason, err.message) == (
        406,
        "NotAcceptable",
        "you requested PartialObjectMetadata, but the requested object is a list (*core.EventList)",
    )
    err = error(get, list_accept)
    assert err.message == (
        "you requested PartialObjectMetadataList, but the requested object is not a list "
        "(*core.Event)"
    )
    # Deferred check, for callers that read storage first as kube does.
    out = negotiate_output(single_accept, is_list=True, is_watch=False, check_target=False)
    assert out.target == "PartialObjectMetadata"


def test_watch() -> None:
    assert watch(None) == Output("json", None, "application/json")
    assert watch(KUBECTL_GET) == Output("table", "v1", "application/json", "Table")
    assert watch("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").kind == "partial"
    # A list form cannot apply to single watch events: they go out untransformed.
    assert watch("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1") == Output(
        "json", None, "application/json"
    )
    for accept in ("application/yaml", "application/yaml, application/json"):
        err = error(watch, accept)
        assert (err.code, err.message) == (406, STREAM_NOT_ACCEPTABLE)
    protobuf_watch = "application/vnd.kubernetes.protobuf;stream=watch"
    assert watch("application/vnd.kubernetes.protobuf") == Output("protobuf", None, protobuf_watch)
    assert watch(protobuf_watch + ", application/json") == Output("protobuf", None, protobuf_watch)
    err = error(watch, "application/vnd.kubernetes.protobuf;as=Table;g=meta.k8s.io;v=v1")
    assert err.message == NOT_ACCEPTABLE


def test_error_prefers_protobuf() -> None:
    assert error_prefers_protobuf("application/vnd.kubernetes.protobuf, application/json")
    assert error_prefers_protobuf("application/vnd.kubernetes.protobuf;stream=watch")
    assert not error_prefers_protobuf(None)
    assert not error_prefers_protobuf("application/json, application/vnd.kubernetes.protobuf")
    # A transformation is refused by the default restrictions: that clause does not count.
    assert not error_prefers_protobuf(
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
        "application/json"
    )


def test_parse_accept_sorting_and_params() -> None:
    clauses = parse_accept("*/*;q=0.8, text/*, application/json;q=0.9;v=1, text/plain , bad")
    # goautoneg's Less is not a strict order (a more specific subtype beats a higher q
    # when q is lower), and Go's insertion sort yields exactly this:
    assert [(c.type, c.subtype) for c in clauses] == [
        ("text", "plain"),
        ("application", "json"),
        ("text", "*"),
        ("*", "*"),
    ]
    assert clauses[1].params == (("v", "1"),)
    assert clauses[1].q == pytest.approx(0.9)
    assert parse_accept("*")[0] == AcceptClause("*", "*")
    # q is parsed without trimming, so "q= 0.5" is a syntax error and reads as 0.
    assert parse_accept("a/b;q= 0.5")[0].q == 0.0
    assert parse_accept("a/b;q=0.5;q=0.7")[0].q == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("query", "agent", "expected"),
    [
        ({}, None, False),
        ({}, "kubectl/v1.32.0", False),
        ({}, "curl/8.5.0", True),
        ({}, "Wget/1.21", True),
        ({}, "Mozilla/5.0 (X11)", True),
        ({}, "Mozilla/4.0", False),
        ({"pretty": "true"}, None, True),
        ({"pretty": "1"}, "kubectl", True),
        ({"pretty": "T"}, None, True),
        ({"pretty": "false"}, "curl/8", False),
        ({"pretty": "yes"}, "curl/8", False),
        ({"pretty": ""}, "curl/8", True),
        ({"pretty": ""}, "python", False),
    ],
)
def test_wants_pretty(query: dict[str, str], agent: str | None, expected: bool) -> None:
    assert wants_pretty(q(**query), agent) is expected


def test_include_object() -> None:
    assert include_object({}) == "Metadata"
    assert include_object(q(includeObject="")) == "Metadata"
    assert include_object(q(includeObject="Metadata")) == "Metadata"
    assert include_object(q(includeObject="Object")) == "Object"
    assert include_object(q(includeObject="None")) == "None"
    err = error(include_object, q(includeObject="x"))
    assert (err.code, err.reason, err.message) == (
        400,
        "BadRequest",
        'Unable to convert to Table as requested: includeObject: Invalid value: "x": must be '
        "'Metadata', 'Object', 'None', or empty",
    )


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        (None, "json"),
        ("", "json"),
        ("application/json", "json"),
        ("application/json; charset=utf-8", "json"),
        ("Application/JSON", "json"),
        ("application/vnd.kubernetes.protobuf", "protobuf"),
        ("application/yaml", "yaml"),
        ("application/yaml;", "yaml"),
        ('application/json; charset="utf-8"', "json"),
    ],
)
def test_negotiate_body(content_type: str | None, expected: str) -> None:
    assert negotiate_body(content_type) == expected


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/json; charset",
        "application/json;a=1;a=2",
        "application/json/x",
        "application/json, text/plain",
        "application/merge-patch+json",
    ],
)
def test_negotiate_body_415(content_type: str) -> None:
    err = error(negotiate_body, content_type)
    assert (err.code, err.reason, err.message, err.details) == (
        415,
        "UnsupportedMediaType",
        BODY_415,
        None,
    )
    # A refusal is never kept: the same header is refused again, with a fresh error.
    again = error(negotiate_body, content_type)
    assert again is not err and again.message == BODY_415


def test_negotiate_body_keeps_answers_per_content_type() -> None:
    for content_type in ("application/json", "application/yaml", None, "Application/JSON"):
        assert negotiate_body(content_type) == negotiate_body.__wrapped__(content_type)
        assert negotiate_body(content_type) == negotiate_body.__wrapped__(content_type)


@pytest.mark.parametrize(
    ("content_type", "expected"),
    [
        ("application/json-patch+json", "json"),
        ("application/merge-patch+json", "merge"),
        ("application/strategic-merge-patch+json", "strategic"),
        ("application/apply-patch+yaml", "apply"),
        ("application/merge-patch+json; charset=utf-8", "merge"),
        ("application/apply-patch+yaml;charset=utf-8", "apply"),
    ],
)
def test_patch_type(content_type: str, expected: str) -> None:
    assert patch_type(content_type) == expected


@pytest.mark.parametrize(
    "content_type",
    [None, "", "application/json", "text/plain", "Application/Merge-Patch+Json"],
)
def test_patch_type_router_415(content_type: str | None) -> None:
    err = error(patch_type, content_type)
    assert (err.code, err.reason, err.message, err.details) == (
        415,
        "UnsupportedMediaType",
        "415: Unsupported Media Type",
        {},
    )


@pytest.mark.parametrize(
    "content_type",
    [
        "application/merge-patch+json ; charset=utf-8",
        "application/json, application/merge-patch+json",
    ],
)
def test_patch_type_handler_415(content_type: str) -> None:
    err = error(patch_type, content_type)
    assert (err.code, err.message, err.details) == (415, PATCH_415, None)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("application/json", "application/json"),
        (" Application/Json ; charset=utf-8", "application/json"),
        ("application", "application"),
        ("application/json;", "application/json"),
        ("application/json; q", None),
        ("/json", None),
        ("application/", None),
        ('text/plain; a="b\\"c"', "text/plain"),
        ('text/plain; a="unterminated', None),
    ],
)
def test_go_parse_media_type(value: str, expected: str | None) -> None:
    assert go_parse_media_type(value) == expected
