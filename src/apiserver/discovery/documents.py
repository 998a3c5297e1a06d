"""The discovery documents, as plain dicts in the field order kube-apiserver writes them.

Clients compare nothing but the decoded values, yet tests, caches and curious people compare
bytes, so every dict here is built in the order of the Go struct it stands for
(k8s.io/apimachinery/pkg/apis/meta/v1/types.go for ``APIVersions``, ``APIGroupList``,
``APIGroup``, ``APIResourceList``; k8s.io/api/apidiscovery/v2/types.go for the aggregated
``APIGroupDiscoveryList``), with Go's ``omitempty`` rules applied by hand.

Also here, because it decides which of these documents exist:
:func:`runtime_config_enables_events`, kube's ``--runtime-config`` resolution
(k8s.io/apiserver/pkg/server/resourceconfig/helpers.go) narrowed to the one API group we serve.

The encoders at the bottom reproduce what the apimachinery JSON serializer writes (compact
``json.Encoder`` output plus a newline, or ``MarshalIndent`` with two spaces and no newline
when pretty), with Go's HTML-safe escaping, and YAML as sigs.k8s.io/yaml writes it (sorted keys,
strings that would read back as something else double-quoted). They are hand-written because
the standard library's and orjson's output differ from Go's in exactly those details.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import yaml

from apiserver.gocompat.boolparse import go_parse_bool, parse_bool_error
from apiserver.gocompat.marshal import go_marshal_indent, go_marshal_plain

GROUP = "events.k8s.io"
VERSION = "v1"
GROUP_VERSION = f"{GROUP}/{VERSION}"

#: Registered versions of events.k8s.io in kube's scheme: v1beta1 is no longer served but is
#: still registered, so ``--runtime-config=events.k8s.io/v1beta1=false`` is accepted.
REGISTERED_VERSIONS = ("v1", "v1beta1")

#: The verbs of the events resource, sorted as the installer sorts them.
EVENT_VERBS = sorted(
    ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
)

#: Same value as core v1 events (pkg/controlplane/storageversionhashdata/data.go): the hash is
#: of the storage version, and events.k8s.io/v1 events are stored as core v1 events.
EVENTS_STORAGE_VERSION_HASH = "r2yiGXH7wu8="
#: ``base64(sha256("/v1/ServiceAccount")[:8])``, as kube-apiserver's discovery computes it.
SERVICE_ACCOUNTS_STORAGE_VERSION_HASH = "pbx9ZvyFpBE="
SERVICE_ACCOUNT_VERBS = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)

AGGREGATED_GROUP = "apidiscovery.k8s.io"
AGGREGATED_KIND = "APIGroupDiscoveryList"
AGGREGATED_VERSIONS = ("v2", "v2beta1")


# --- unaggregated (AS/endpoints/discovery) --------------------------------------------------


def api_versions(server_address: str) -> dict[str, Any]:
    """``GET /api``: the legacy root. kube writes no ``apiVersion`` here (legacy.go)."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


#: ``serviceaccounts/token`` as kube's installer lists it in ``/api/v1``: a subresource has
#: an empty ``singularName`` (never omitted), and the group/version of its kind, TokenRequest,
#: which is not core's.
TOKEN_REQUEST_RESOURCE: dict[str, Any] = {
    "name": "serviceaccounts/token",
    "singularName": "",
    "namespaced": True,
    "group": "authentication.k8s.io",
    "version": "v1",
    "kind": "TokenRequest",
    "verbs": ["create"],
}


def service_accounts_api_resource() -> dict[str, Any]:
    """core/v1 ``serviceaccounts`` in ``/api/v1`` (:mod:`apiserver.api.serviceaccounts`)."""
    return {
        "name": "serviceaccounts",
        "singularName": "serviceaccount",
        "namespaced": True,
        "kind": "ServiceAccount",
        "verbs": list(SERVICE_ACCOUNT_VERBS),
        "shortNames": ["sa"],
        "storageVersionHash": SERVICE_ACCOUNTS_STORAGE_VERSION_HASH,
    }


def core_resource_list(
    token_request: bool = False, events: bool = False, service_accounts: bool = False
) -> dict[str, Any]:
    """``GET /api/v1``: the core group version. It lists ``events`` when core/v1 events are
    served (the same entry and storage version hash as events.k8s.io/v1) and
    ``serviceaccounts/token`` when the TokenRequest API is served
    (:mod:`apiserver.api.tokenrequest`), sorted by name as the installer sorts them.

    The legacy group's resource list goes out without ``apiVersion``, like ``/api``.
    """
    resources = [events_api_resource()] if events else []
    if service_accounts:
        resources.append(service_accounts_api_resource())
    if token_request:
        resources.append(dict(TOKEN_REQUEST_RESOURCE))
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}


def _group_version_for_discovery() -> dict[str, str]:
    return {"groupVersion": GROUP_VERSION, "version": VERSION}


def _events_group_body() -> dict[str, Any]:
    """An ``APIGroup`` without its TypeMeta, as it appears inside ``APIGroupList.groups``."""
    return {
        "name": GROUP,
        "versions": [_group_version_for_discovery()],
        "preferredVersion": _group_version_for_discovery(),
    }


@attrs.define(frozen=True)
class ExtraGroup:
    """A group served besides events.k8s.io (flowcontrol.apiserver.k8s.io/v1): its legacy
    ``APIResource`` list and its aggregated ``APIResourceDiscovery`` list."""

    name: str
    version: str
    resources: tuple[dict[str, Any], ...]
    aggregated: tuple[dict[str, Any], ...]

    def group_body(self) -> dict[str, Any]:
        gv = {"groupVersion": f"{self.name}/{self.version}", "version": self.version}
        return {"name": self.name, "versions": [gv], "preferredVersion": dict(gv)}

    def api_group(self) -> dict[str, Any]:
        return {"kind": "APIGroup", "apiVersion": "v1", **self.group_body()}

    def resource_list(self) -> dict[str, Any]:
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{self.name}/{self.version}",
            "resources": [dict(r) for r in self.resources],
        }

    def aggregated_item(self) -> dict[str, Any]:
        return {
            "metadata": {"name": self.name, "creationTimestamp": None},
            "versions": [
                {
                    "version": self.version,
                    "resources": [dict(r) for r in self.aggregated],
                    "freshness": "Current",
                }
            ],
        }


def api_group_list(events_enabled: bool, extra: Sequence[ExtraGroup] = ()) -> dict[str, Any]:
    """``GET /apis``. With every group turned off the list is empty, never null."""
    groups = [_events_group_body()] if events_enabled else []
    groups += [group.group_body() for group in extra]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group() -> dict[str, Any]:
    """``GET /apis/events.k8s.io``."""
    return {"kind": "APIGroup", "apiVersion": "v1", **_events_group_body()}


def events_api_resource() -> dict[str, Any]:
    """The one ``APIResource`` of events.k8s.io/v1 (no group/version/categories: omitempty)."""
    return {
        "name": "events",
        "singularName": "event",
        "namespaced": True,
        "kind": "Event",
        "verbs": list(EVENT_VERBS),
        "shortNames": ["ev"],
        "storageVersionHash": EVENTS_STORAGE_VERSION_HASH,
    }


def events_resource_list() -> dict[str, Any]:
    """``GET /apis/events.k8s.io/v1``."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": GROUP_VERSION,
        "resources": [events_api_resource()],
    }


# --- aggregated (AS/endpoints/discovery/aggregated, k8s.io/api/apidiscovery/v2) --------------


def _events_resource_discovery() -> dict[str, Any]:
    """``APIResourceDiscovery``: no storageVersionHash in the aggregated form."""
    return {
        "resource": "events",
        "responseKind": {"group": "", "version": "", "kind": "Event"},
        "scope": "Namespaced",
        "singularResource": "event",
        "verbs": list(EVENT_VERBS),
        "shortNames": ["ev"],
    }


def aggregated_apis_items(
    events_enabled: bool, extra: Sequence[ExtraGroup] = ()
) -> list[dict[str, Any]]:
    """The ``items`` of the aggregated ``/apis`` document."""
    # kube orders groups by priority: events.k8s.io (17750) before flowcontrol (16100).
    extras = [group.aggregated_item() for group in extra]
    if not events_enabled:
        return extras
    return [
        {
            "metadata": {"name": GROUP, "creationTimestamp": None},
            "versions": [
                {
                    "version": VERSION,
                    "resources": [_events_resource_discovery()],
                    "freshness": "Current",
                }
            ],
        },
        *extras,
    ]


def _token_request_discovery() -> dict[str, Any]:
    """``serviceaccounts`` as aggregated discovery shows a subresource whose parent is not
    served (``ConvertGroupVersionIntoToDiscovery``): a parent with an empty responseKind and
    no verbs (``null``), holding the ``token`` subresource. client-go skips such a parent
    (no kind) and keeps ``serviceaccounts/token``, the same view as the legacy ``/api/v1``."""
    return {
        "resource": "serviceaccounts",
        "responseKind": {"group": "", "version": "", "kind": ""},
        "scope": "Namespaced",
        "singularResource": "",
        "verbs": None,
        "subresources": [
            {
                "subresource": "token",
                "responseKind": {
                    "group": TOKEN_REQUEST_RESOURCE["group"],
                    "version": TOKEN_REQUEST_RESOURCE["version"],
                    "kind": TOKEN_REQUEST_RESOURCE["kind"],
                },
                "verbs": list(TOKEN_REQUEST_RESOURCE["verbs"]),
            }
        ],
    }


def _service_accounts_discovery(token_request: bool) -> dict[str, Any]:
    """``serviceaccounts`` in the aggregated ``/api``, with its ``token`` subresource when
    TokenRequest is served."""
    entry: dict[str, Any] = {
        "resource": "serviceaccounts",
        "responseKind": {"group": "", "version": "", "kind": "ServiceAccount"},
        "scope": "Namespaced",
        "singularResource": "serviceaccount",
        "verbs": list(SERVICE_ACCOUNT_VERBS),
        "shortNames": ["sa"],
    }
    if token_request:
        entry["subresources"] = _token_request_discovery()["subresources"]
    return entry


def aggregated_api_items(
    token_request: bool = False, events: bool = False, service_accounts: bool = False
) -> list[dict[str, Any]]:
    """The ``items`` of the aggregated ``/api`` document: the core group, name "" (omitted).

    It has version v1 like ``GET /api`` says; its resources are those of ``/api/v1``
    (``resources`` is omitempty, so none are written when nothing is served), so the
    aggregated and the legacy view of the core group agree.
    """
    version: dict[str, Any] = {"version": "v1"}
    resources = [_events_resource_discovery()] if events else []
    if service_accounts:
        resources.append(_service_accounts_discovery(token_request))
    elif token_request:
        resources.append(_token_request_discovery())
    if resources:
        version["resources"] = resources
    version["freshness"] = "Current"
    return [{"metadata": {"creationTimestamp": None}, "versions": [version]}]


def aggregated_document(items: list[dict[str, Any]], version: str) -> dict[str, Any]:
    """The ``APIGroupDiscoveryList`` as served in ``version`` (v2 or v2beta1, same shape)."""
    return {
        "kind": AGGREGATED_KIND,
        "apiVersion": f"{AGGREGATED_GROUP}/{version}",
        "metadata": {},
        "items": items,
    }


def aggregated_etag(items: list[dict[str, Any]]) -> str:
    """The ETag value (unquoted) of an aggregated document.

    kube hashes ``json.Marshal`` of the v2 list *before* the serializer stamps its TypeMeta
    (aggregated/handler.go ``fetchFromCache``, etag.go ``calculateETag``): so the hashed bytes
    have no kind/apiVersion, and the tag is the same whichever version or encoding is served.
    """
    hashed = go_marshal_plain({"metadata": {}, "items": items})
    return hashlib.sha512(hashed).hexdigest().upper()


# --- --runtime-config (k8s.io/apiserver/pkg/server/resourceconfig/helpers.go) -----------------

_MATCHER_ORDER = ("api/all", "api/ga", "api/beta", "api/alpha")
#: Which of the api/* matchers select the GA version ``v1`` (``^v\d+$``): all and ga.
_MATCHES_V1 = {"api/all": True, "api/ga": True, "api/beta": False, "api/alpha": False}


def runtime_config_errors(runtime_config: Mapping[str, str]) -> list[str]:
    """Every ``--runtime-config`` entry kube-apiserver would refuse at start-up, as messages.

    Keys for groups we do not have are skipped, as kube skips unregistered groups; a key of
    events.k8s.io with a version kube never registered, a bad boolean, or an upper-case
    resource name is an error, with kube's wording.
    """
    errors: list[str] = []
    for key in _MATCHER_ORDER:
        if key in runtime_config and runtime_config[key] not in ("true", "false"):
            errors.append(f"invalid value {key}={runtime_config[key]}")
    for key, value in runtime_config.items():
        if key in _MATCHES_V1:
            continue
        tokens = key.split("/")
        if len(tokens) not in (2, 3) or tokens[0] != GROUP:
            continue
        if tokens[1] not in REGISTERED_VERSIONS:
            errors.append(f"group version {tokens[0]}/{tokens[1]} that has not been registered")
            continue
        if value != "" and go_parse_bool(value) is None:
            errors.append(f"invalid value of {key}: {value}, err: {parse_bool_error(value)}")
            continue
        if len(tokens) == 3 and tokens[2].lower() != tokens[2]:
            errors.append(
                f"invalid key {key}: group/version/resource and resource is always lowercase "
                f'plural, not "{tokens[2]}"'
            )
    return errors


def _runtime_config_bool(value: str) -> bool:
    # A bare key (no "=") counts as true (helpers.go getRuntimeConfigValue); then
    # strconv.ParseBool (an invalid value was refused by runtime_config_errors).
    return value == "" or go_parse_bool(value) is True


def runtime_config_enables_events(runtime_config: Mapping[str, str]) -> bool:
    """Whether ``--runtime-config`` leaves events.k8s.io/v1 events served.

    kube's order of precedence (helpers.go ``MergeAPIResourceConfigs``): the default (on, it is
    a GA version), then ``api/all``, ``api/ga``, ``api/beta``, ``api/alpha`` in that fixed order
    (only the first two select ``v1``), then ``events.k8s.io/v1`` itself, and last
    ``events.k8s.io/v1/events``: a resource setting beats its version's
    (storage/resource_config.go ``ResourceEnabled``). The group is served only while its one
    resource is. Raises ValueError with kube's message for an entry kube would refuse.
    """
    errors = runtime_config_errors(runtime_config)
    if errors:
        raise ValueError("; ".join(errors))
    enabled = True
    for key in _MATCHER_ORDER:
        if key in runtime_config and _MATCHES_V1[key]:
            enabled = runtime_config[key] == "true"
    version_key = GROUP_VERSION
    if version_key in runtime_config:
        enabled = _runtime_config_bool(runtime_config[version_key])
    resource_key = f"{GROUP_VERSION}/events"
    if resource_key in runtime_config:
        enabled = _runtime_config_bool(runtime_config[resource_key])
    return enabled


# --- encoders ----------------------------------------------------------------------------------


def encode_json(value: Any, *, pretty: bool = False) -> bytes:
    """What the apimachinery JSON serializer writes for an object.

    Compact output comes from ``json.Encoder.Encode`` (a newline follows); pretty output from
    ``MarshalIndent`` (no newline), as runtime/serializer/json/json.go ``doEncode`` does.
    """
    if pretty:
        return go_marshal_indent(value).encode()
    return go_marshal_plain(value) + b"\n"


class _GoYamlDumper(yaml.SafeDumper):
    """PyYAML dumper tuned to read like go-yaml v2 output (sigs.k8s.io/yaml ``JSONToYAML``)."""


def _represent_str(dumper: _GoYamlDumper, data: str) -> yaml.ScalarNode:
    # go-yaml double-quotes a string that would resolve to another type when read back
    # ("", "true", "1", "null"...); PyYAML would single-quote it.
    implicit = dumper.resolve(yaml.ScalarNode, data, (True, False))
    style = '"' if implicit != "tag:yaml.org,2002:str" else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_GoYamlDumper.add_representer(str, _represent_str)


def encode_yaml(value: Any) -> bytes:
    """The YAML serializer's output: JSON turned into YAML with keys sorted."""
    text = yaml.dump(
        value,
        Dumper=_GoYamlDumper,
        default_flow_style=False,
        sort_keys=True,
        allow_unicode=True,
    )
    return text.encode()
