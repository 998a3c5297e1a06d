"""What a request asks for, in authorization terms: verb, group, version, namespace, resource.

Follows k8s.io/apiserver ``pkg/endpoints/request/requestinfo.go`` (``NewRequestInfo`` with the
API prefixes ``api`` and ``apis``, ``api`` being the groupless one), which every authorizer,
the audit log and priority-and-fairness read. The rules, in short:

- ``/api/<v>/<...>`` and ``/apis/<g>/<v>/<...>`` with at least one segment after the version
  are resource requests; everything else (``/healthz``, ``/api``, ``/apis/g/v``) is a
  non-resource request whose verb is the lower-cased HTTP method.
- ``watch`` and ``proxy`` right after the version are verbs of their own (``proxy`` takes no
  subresource); ``/api/v1/watch`` alone cannot be understood (a 500 from the RequestInfo
  filter, see :class:`RequestInfoError`).
- ``namespaces/<ns>/<res>/...`` names a namespaced resource unless the segment after the
  namespace is ``status`` or ``finalize`` (the namespace's own subresources).
- A GET without a name is ``list`` (``watch`` when ``?watch`` is anything but ``0``/``false``);
  a DELETE without a name is ``deletecollection``; on list and watch a
  ``fieldSelector=metadata.name=<x>`` sets the name (a valid path segment only).

The path is the decoded URL path (Go's ``URL.Path``), as the HTTP app hands it over.
"""

from __future__ import annotations

import attrs

from apiserver.apimachinery.fields import parse_field_selector
from apiserver.apimachinery.labels import SelectorParseError
from apiserver.apimachinery.validation import validate_path_segment_name

API_PREFIXES = frozenset({"api", "apis"})
GROUPLESS_PREFIXES = frozenset({"api"})
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_NO_SUBRESOURCE_VERBS = frozenset({"proxy"})
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_READ_ONLY = frozenset({"get", "list", "watch"})

_METHOD_VERBS = {
    "POST": "create",
    "GET": "get",
    "HEAD": "get",
    "PUT": "update",
    "PATCH": "patch",
    "DELETE": "delete",
}


class RequestInfoError(Exception):
    """The path looks like a resource request but cannot be read as one.

    kube-apiserver's RequestInfo filter answers such a request with a 500 (text/plain
    ``Internal Server Error: "<uri>": <message>``) before authentication.
    """


@attrs.frozen(slots=True)
class RequestInfo:
    """``request.RequestInfo``: the parsed request, shared by authorization and audit."""

    resource_request: bool
    path: str
    verb: str
    api_prefix: str = ""
    api_group: str = ""
    api_version: str = ""
    namespace: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    parts: tuple[str, ...] = ()

    @property
    def read_only(self) -> bool:
        """``get``, ``list`` or ``watch`` (``AttributesRecord.IsReadOnly``)."""
        return self.verb in _READ_ONLY


def _split_path(path: str) -> list[str]:
    trimmed = path.strip("/")
    return trimmed.split("/") if trimmed else []


def _first(query: dict[bytes, list[bytes]], key: bytes) -> str | None:
    values = query.get(key)
    if not values:
        return None
    return values[0].decode("utf-8", "replace")


def parse_request_info(
    method: str, path: str, query: dict[bytes, list[bytes]] | None = None, uri: str = ""
) -> RequestInfo:
    """``RequestInfoFactory.NewRequestInfo`` for ``method`` on the decoded ``path``.

    ``query`` is the parsed query string (``apiserver.http.app.parse_query``); ``uri`` is only
    used in the error message. Raises :class:`RequestInfoError` for ``/api/v1/watch`` and the
    like.
    """
    query = query or {}
    parts = _split_path(path)
    if len(parts) < 3 or parts[0] not in API_PREFIXES:
        return RequestInfo(False, path, method.lower())
    prefix = parts[0]
    rest = parts[1:]
    group = ""
    if prefix not in GROUPLESS_PREFIXES:
        if len(rest) < 3:
            return RequestInfo(False, path, method.lower())
        group = rest[0]
        rest = rest[1:]
    version = rest[0]
    rest = rest[1:]

    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            raise RequestInfoError(
                f"unable to determine kind and namespace from url, {uri or path}"
            )
        verb = rest[0]
        rest = rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")

    namespace = ""
    if rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]

    resource = subresource = name = ""
    if len(rest) >= 3 and verb not in _NO_SUBRESOURCE_VERBS:
        subresource = rest[2]
    if len(rest) >= 2:
        name = rest[1]
    if len(rest) >= 1:
        resource = rest[0]

    if not name and verb == "get":
        verb = _list_or_watch(query)
        name = _name_from_field_selector(query)
    if not name and verb == "delete":
        verb = "deletecollection"

    return RequestInfo(
        True,
        path,
        verb,
        prefix,
        group,
        version,
        namespace,
        resource,
        subresource,
        name,
        tuple(rest),
    )


def _list_or_watch(query: dict[bytes, list[bytes]]) -> str:
    # ListOptions.Watch converts like Convert_Slice_string_To_bool: only "0" and "false"
    # (any case) are false, so ``?watch`` and ``?watch=yes`` both watch.
    watch = _first(query, b"watch")
    if watch is None or watch == "0" or watch.lower() == "false":
        return "list"
    return "watch"


def _name_from_field_selector(query: dict[bytes, list[bytes]]) -> str:
    selector = _first(query, b"fieldSelector")
    if not selector:
        return ""
    try:
        parsed = parse_field_selector(selector)
    except SelectorParseError:
        return ""
    name = parsed.requires_exact_match("metadata.name")
    if name is None or validate_path_segment_name(name):
        return ""
    return name
