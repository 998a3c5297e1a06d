"""``/version`` and the ``/`` index, as kube-apiserver serves them.

``/version`` (k8s.io/apiserver/pkg/server/routes/version.go): 2-space-indented JSON, no
trailing newline, fields in apimachinery's order. ``/`` lists every registered path
(routes/index.go), ``{"paths": [...]}`` sorted, indented the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from apiserver.http.app import RequestInfo
from apiserver.http.request import HTTPRequest
from apiserver.http.response import Response
from apiserver.version import VersionInfo

JSON = ("Content-Type", "application/json")


def indented_json(value: object) -> bytes:
    """Go's ``json.MarshalIndent(v, "", "  ")``: no trailing newline."""
    return json.dumps(value, indent=2, ensure_ascii=False).encode()


def version_handler(info: VersionInfo) -> Callable[[Any, RequestInfo], Response]:
    body = indented_json(info.as_dict())
    response = Response(200, (JSON,), body)

    def handle(request: HTTPRequest, _info: RequestInfo) -> Response:
        return response

    return handle


def index_handler(paths: Callable[[], list[str]]) -> Callable[[Any, RequestInfo], Response]:
    def handle(request: HTTPRequest, _info: RequestInfo) -> Response:
        return Response(200, (JSON,), indented_json({"paths": sorted(set(paths()))}))

    return handle
