"""List/watch, write and delete options: decoding and the 400/422/500 texts."""

from __future__ import annotations

import json

import pytest

from apiserver.apimachinery.errors import StatusError
from apiserver.apimachinery.request_options import (
    DeleteOptions,
    ListOptions,
    WriteOptions,
    default_field_manager,
    default_watch_list,
    field_manager_or_user_agent,
    parse_delete_options,
    parse_list_options,
    parse_write_options,
    validate_create_options,
    validate_delete_options,
    validate_list_options,
    validate_patch_options,
    validate_update_options,
)


def q(**params: str | list[str]) -> dict[bytes, list[bytes]]:
    out: dict[bytes, list[bytes]] = {}
    for key, value in params.items():
        key = key.rstrip("_")
        values = value if isinstance(value, list) else [value]
        out[key.encode()] = [v.encode() for v in values]
    return out


def raised(fn, *args, **kwargs) -> StatusError:  # type: ignore[no-untyped-def]
    with pytest.raises(StatusError) as info:
        fn(*args, **kwargs)
    return info.value


# --- list options ---------------------------------------------------------------------------


def test_parse_list_options_all_fields() -> None:
    opts = parse_list_options(
        q(
            labelSelector="app=x",
            fieldSelector="type=Normal",
            resourceVersion="12",
            resourceVersionMatch="NotOlderThan",
            limit="50",
            continue_="tok",
            watch="1",
            allowWatchBookmarks="true",
            sendInitialEvents="false",
            timeoutSeconds="30",
        )
    )
    assert str(opts.label_selector) == "app=x"
    assert str(opts.field_selector) == "type=Normal"
    assert opts.resource_version == "12"
    assert opts.resource_version_match == "NotOlderThan"
    assert opts.limit == 50
    assert opts.continue_ == "tok"
    assert opts.watch is True
    assert opts.allow_watch_bookmarks is True
    assert opts.send_initial_events is False
    assert opts.timeout_seconds == 30


def test_parse_list_options_defaults() -> None:
    opts = parse_list_options({})
    assert opts == ListOptions()
    assert opts.label_selector.empty and opts.field_selector.empty
    assert opts.send_initial_events is None and opts.timeout_seconds is None
    assert parse_list_options({}, watch_path=True).watch is True
    assert parse_list_options(q(watch="")).watch is True
    assert parse_list_options(q(watch="False")).watch is False


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "x"}, 'strconv.ParseInt: parsing "x": invalid syntax'),
        ({"limit": ""}, 'strconv.ParseInt: parsing "": invalid syntax'),
        ({"timeoutSeconds": "1.5"}, 'strconv.ParseInt: parsing "1.5": invalid syntax'),
        # timeoutSeconds is converted before limit, selectors after both.
        ({"timeoutSeconds": "a", "limit": "b"}, 'strconv.ParseInt: parsing "a": invalid syntax'),
        ({"limit": "b", "labelSelector": ","}, 'strconv.ParseInt: parsing "b": invalid syntax'),
        (
            {"labelSelector": ",", "fieldSelector": "x"},
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        ({"fieldSelector": "x"}, "invalid selector: 'x'; can't understand 'x'"),
    ],
)
def test_parse_list_options_errors(params: dict[str, str], message: str) -> None:
    err = raised(parse_list_options, q(**params))
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


def test_default_watch_list() -> None:
    watch = ListOptions(watch=True)
    assert default_watch_list(watch) == ListOptions(
        watch=True, send_initial_events=True, resource_version_match="NotOlderThan"
    )
    assert default_watch_list(ListOptions(watch=True, resource_version="0")).send_initial_events
    assert (
        default_watch_list(ListOptions(watch=True, resource_version="5")).send_initial_events
        is None
    )
    assert default_watch_list(ListOptions()) == ListOptions()
    explicit = ListOptions(watch=True, send_initial_events=False)
    assert default_watch_list(explicit) is explicit


def list_error(opts: ListOptions, is_watch: bool) -> StatusError:
    return raised(validate_list_options, opts, is_watch)


def test_list_validation_422_shape() -> None:
    err = list_error(ListOptions(resource_version_match="Exact"), False)
    assert err.code == 422 and err.reason == "Invalid"
    assert err.message == (
        'ListOptions.meta.k8s.io "" is invalid: resourceVersionMatch: Forbidden: '
        "resourceVersionMatch is forbidden unless resourceVersion is provided"
    )
    assert err.details == {
        "group": "meta.k8s.io",
        "kind": "ListOptions",
        "causes": [
            {
                "reason": "FieldValueForbidden",
                "message": "Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
                "is provided",
                "field": "resourceVersionMatch",
            }
        ],
    }


P = 'ListOptions.meta.k8s.io "" is invalid: '


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (
            ListOptions(resource_version_match="x", continue_="c"),
            P + "[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
            "resourceVersion is provided, resourceVersionMatch: Forbidden: resourceVersionMatch "
            "is forbidden when continue is provided, resourceVersionMatch: Unsupported value: "
            '"x": supported values: "Exact", "NotOlderThan", ""]',
        ),
        (
            ListOptions(resource_version="0", resource_version_match="Exact"),
            P + 'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
            'resourceVersion "0"',
        ),
        (
            ListOptions(send_initial_events=False),
            P + "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list",
        ),
    ],
)
def test_list_rules(opts: ListOptions, message: str) -> None:
    assert list_error(opts, False).message == message


@pytest.mark.parametrize(
    "opts",
    [
        ListOptions(),
        ListOptions(resource_version="5", resource_version_match="Exact", limit=3),
        ListOptions(resource_version="0", resource_version_match="NotOlderThan"),
    ],
)
def test_list_ok(opts: ListOptions) -> None:
    validate_list_options(opts, False)


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (
            ListOptions(watch=True, send_initial_events=True),
            P + "resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
            "resourceVersionMatch to NotOlderThan",
        ),
        (
            ListOptions(watch=True, resource_version_match="NotOlderThan"),
            P + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch "
            "unless sendInitialEvents is provided",
        ),
        (
            ListOptions(watch=True, send_initial_events=True, resource_version_match="Exact"),
            P + "[resourceVersionMatch: Forbidden: sendInitialEvents requires setting "
            "resourceVersionMatch to NotOlderThan, resourceVersionMatch: Unsupported value: "
            '"Exact": supported values: "NotOlderThan"]',
        ),
        (
            ListOptions(
                watch=True,
                send_initial_events=True,
                resource_version_match="NotOlderThan",
                continue_="x",
            ),
            P + "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue "
            "is provided",
        ),
    ],
)
def test_watch_rules(opts: ListOptions, message: str) -> None:
    assert list_error(opts, True).message == message


def test_watch_ok_after_defaulting() -> None:
    validate_list_options(default_watch_list(ListOptions(watch=True)), True)
    validate_list_options(ListOptions(watch=True, resource_version="7"), True)
    # sendInitialEvents=false without a match is refused (match must be NotOlderThan).
    with pytest.raises(StatusError):
        validate_list_options(
            default_watch_list(ListOptions(watch=True, send_initial_events=False)), True
        )


# --- write options --------------------------------------------------------------------------


def test_parse_write_options() -> None:
    opts = parse_write_options(
        q(dryRun=["All", "All"], fieldManager="kubectl", fieldValidation="Strict", force="true")
    )
    assert opts == WriteOptions(("All", "All"), "kubectl", "Strict", True)
    assert opts.is_dry_run
    empty = parse_write_options({})
    assert empty == WriteOptions()
    # Shared by every write without a query: frozen, and valid by the ordinary checks.
    assert empty is parse_write_options({})
    assert empty.dry_run == () and not empty.field_manager and not empty.field_validation
    assert empty.effective_field_validation == "Warn"
    assert not empty.is_dry_run


@pytest.mark.parametrize(
    ("opts", "errors"),
    [
        (WriteOptions(dry_run=("x",)), 'dryRun: Unsupported value: ["x"]: supported values: "All"'),
        (WriteOptions(dry_run=("",)), 'dryRun: Unsupported value: [""]: supported values: "All"'),
        (
            WriteOptions(dry_run=("All", "No")),
            'dryRun: Unsupported value: ["All","No"]: supported values: "All"',
        ),
        (
            WriteOptions(field_validation="x"),
            'fieldValidation: Unsupported value: "x": supported values: "", "Ignore", '
            '"Strict", "Warn"',
        ),
        (
            WriteOptions(field_manager="m" * 129),
            "fieldManager: Too long: may not be more than 128 bytes",
        ),
        (
            WriteOptions(field_manager="abc\x07"),
            'fieldManager: Invalid value: "abc\\a": invalid character U+0007 (at position 3)',
        ),
        (
            WriteOptions(field_manager="é\u200b"),
            'fieldManager: Invalid value: "é\\u200b": invalid character U+200B (at position 2)',
        ),
    ],
)
def test_create_update_errors(opts: WriteOptions, errors: str) -> None:
    assert raised(validate_create_options, opts).message == (
        f'CreateOptions.meta.k8s.io "" is invalid: {errors}'
    )
    err = raised(validate_update_options, opts)
    assert err.message == f'UpdateOptions.meta.k8s.io "" is invalid: {errors}'
    assert err.details is not None and err.details["kind"] == "UpdateOptions"


def test_write_options_ok() -> None:
    for opts in (
        parse_write_options({}),
        WriteOptions(),
        WriteOptions(dry_run=("All",), field_manager="m" * 128, field_validation="Ignore"),
        WriteOptions(field_manager="a b"),
    ):
        validate_create_options(opts)
        validate_update_options(opts)


def test_patch_options() -> None:
    validate_patch_options(WriteOptions(field_manager="x", force=True), "apply")
    validate_patch_options(WriteOptions(), "merge")
    assert raised(validate_patch_options, parse_write_options({}), "apply").message == (
        'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for '
        "apply patch"
    )
    assert raised(validate_patch_options, WriteOptions(force=False), "json").message == (
        'PatchOptions.meta.k8s.io "" is invalid: force: Forbidden: may not be specified for '
        "non-apply patch"
    )
    err = raised(validate_patch_options, WriteOptions(force=True, dry_run=("y",)), "strategic")
    assert err.message == (
        'PatchOptions.meta.k8s.io "" is invalid: [force: Forbidden: may not be specified for '
        'non-apply patch, dryRun: Unsupported value: ["y"]: supported values: "All"]'
    )
    assert [c["field"] for c in err.details["causes"]] == ["force", "dryRun"]  # type: ignore[index]


@pytest.mark.parametrize(
    ("agent", "manager"),
    [
        ("kubectl/v1.32.0 (linux/amd64) kubernetes/abc", "kubectl"),
        ("OpenAPI-Generator/31.0.0/python", "OpenAPI-Generator"),
        ("", ""),
        ("no-slash at all", "no-slash at all"),
        ("a\tb\x00c/1", "abc"),
        ("x" * 200, "x" * 128),
        ("é" * 70, "é" * 64),
    ],
)
def test_default_field_manager(agent: str, manager: str) -> None:
    assert default_field_manager(agent) == manager
    assert default_field_manager(agent) == default_field_manager.__wrapped__(agent) == manager


def test_field_manager_or_user_agent() -> None:
    assert field_manager_or_user_agent("mine", "kubectl/1") == "mine"
    assert field_manager_or_user_agent("", "kubectl/1") == "kubectl"


# --- delete options -------------------------------------------------------------------------


def test_delete_options_from_query() -> None:
    opts = parse_delete_options(
        q(
            gracePeriodSeconds="0",
            orphanDependents="false",
            propagationPolicy="Orphan",
            dryRun="All",
        )
    )
    assert opts == DeleteOptions(0, None, None, False, "Orphan", ("All",))
    assert parse_delete_options({}) == DeleteOptions()
    err = raised(parse_delete_options, q(gracePeriodSeconds="soon"))
    assert (err.code, err.message) == (400, 'strconv.ParseInt: parsing "soon": invalid syntax')


def test_delete_options_from_body_ignores_query() -> None:
    body = json.dumps(
        {
            "kind": "DeleteOptions",
            "apiVersion": "events.k8s.io/v1",
            "gracePeriodSeconds": 5,
            "preconditions": {"uid": "u-1", "resourceVersion": "42"},
            "propagationPolicy": "Background",
            "dryRun": ["All"],
            "unknown": {"x": 1},
        }
    ).encode()
    opts = parse_delete_options(q(gracePeriodSeconds="1", propagationPolicy="Orphan"), body)
    assert opts == DeleteOptions(5, "u-1", "42", None, "Background", ("All",))
    assert opts.is_dry_run


def test_delete_options_yaml_and_null_body() -> None:
    body = b"apiVersion: v1\nkind: DeleteOptions\norphanDependents: true\n"
    assert parse_delete_options({}, body, "yaml").orphan_dependents is True
    assert parse_delete_options({}, b"null") == DeleteOptions()
    assert parse_delete_options({}, b'{"gracePeriodSeconds":null}') == DeleteOptions()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "couldn't get version/kind; json parse error: unexpected end of JSON input"),
        (
            b"x",
            "couldn't get version/kind; json parse error: invalid character 'x' looking for "
            "beginning of value",
        ),
        (
            b'{"kind":5}',
            "couldn't get version/kind; json parse error: json: cannot unmarshal number into Go "
            "struct field .kind of type string",
        ),
        (b'{"apiVersion":"a/b/c"}', "unexpected GroupVersion string: a/b/c"),
        (
            b'{"gracePeriodSeconds":"5"}',
            "json: cannot unmarshal string into Go struct field DeleteOptions.gracePeriodSeconds "
            "of type int64",
        ),
        (
            b'{"gracePeriodSeconds":1.5}',
            "json: cannot unmarshal number 1.5 into Go struct field "
            "DeleteOptions.gracePeriodSeconds of type int64",
        ),
        (
            b'{"orphanDependents":"yes"}',
            "json: cannot unmarshal string into Go struct field DeleteOptions.orphanDependents "
            "of type bool",
        ),
        (
            b'{"propagationPolicy":1}',
            "json: cannot unmarshal number into Go struct field DeleteOptions.propagationPolicy "
            "of type v1.DeletionPropagation",
        ),
        (
            b'{"dryRun":"All"}',
            "json: cannot unmarshal string into Go struct field DeleteOptions.dryRun of type "
            "[]string",
        ),
        (
            b'{"preconditions":{"uid":7}}',
            "json: cannot unmarshal number into Go struct field "
            "Preconditions.preconditions.uid of type types.UID",
        ),
        (
            # Interpret (the kind/apiVersion probe) meets the array first.
            b"[]",
            "couldn't get version/kind; json parse error: json: cannot unmarshal array into Go "
            'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
            'Kind string "json:\\"kind,omitempty\\"" }',
        ),
    ],
)
def test_delete_body_errors_are_500_without_reason(body: bytes, message: str) -> None:
    err = raised(parse_delete_options, {}, body)
    assert (err.code, err.reason, err.message) == (500, "", message)
    assert err.details is None


def test_delete_body_of_another_kind() -> None:
    err = raised(parse_delete_options, {}, b'{"kind":"Pod","apiVersion":"v1"}')
    assert err.code == 500
    assert err.message.startswith('no kind "Pod" is registered for version "v1" in scheme ')


D = 'DeleteOptions.meta.k8s.io "" is invalid: '


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (
            DeleteOptions(propagation_policy="Sideways"),
            D + 'propagationPolicy: Unsupported value: "Sideways": supported values: '
            '"Foreground", "Background", "Orphan", "nil"',
        ),
        (
            DeleteOptions(orphan_dependents=True, propagation_policy="Orphan"),
            D + 'propagationPolicy: Invalid value: "Orphan": orphanDependents and '
            "deletionPropagation cannot be both set",
        ),
        (
            DeleteOptions(dry_run=("Some",)),
            D + 'dryRun: Unsupported value: ["Some"]: supported values: "All"',
        ),
    ],
)
def test_delete_validation(opts: DeleteOptions, message: str) -> None:
    err = raised(validate_delete_options, opts)
    assert (err.code, err.message) == (422, message)


def test_delete_validation_ok() -> None:
    validate_delete_options(DeleteOptions())
    validate_delete_options(DeleteOptions(5, "u", "1", True, None, ("All",)))
    validate_delete_options(DeleteOptions(propagation_policy="Foreground"))
