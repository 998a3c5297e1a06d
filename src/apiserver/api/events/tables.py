"""Table and PartialObjectMetadata answers (k8s.io/apiserver
``pkg/endpoints/handlers/response.go``).

Follows k8s.io/apiserver ``pkg/endpoints/handlers/response.go`` (``asTable``,
``asPartialObjectMetadata``): the server always renders every column (kubectl hides those with
a priority above 0 unless ``-o wide``); each row carries the object as PartialObjectMetadata by
default, the whole object with ``includeObject=Object``, nothing with ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from apiserver.api.events.convert import encode_object_meta
from apiserver.api.events.printer import COLUMN_DEFINITIONS, event_row
from apiserver.registry.store import Obj, metadata


def partial_object(internal: Obj, version: str | None) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": f"meta.k8s.io/{version or 'v1'}",
        "metadata": encode_object_meta(metadata(internal)),
    }


def table_for(
    items: Sequence[Obj],
    version: str | None,
    list_meta: dict[str, Any],
    include_object: str,
    now: float,
    to_v1: Callable[..., Obj],
    row_of: Callable[[Obj, float], list[Any]] = event_row,
    columns: Sequence[dict[str, Any]] = COLUMN_DEFINITIONS,
) -> dict[str, Any]:
    """The Table of ``items``: ``row_of`` gives the cells of one (the resource's printer,
    ``k8s.io/kubernetes pkg/printers/internalversion/printers.go``), ``columns`` their
    definitions."""
    rows = []
    for item in items:
        row: dict[str, Any] = {"cells": row_of(item, now)}
        if include_object == "Object":
            row["object"] = to_v1(item)
        elif include_object != "None":
            row["object"] = partial_object(item, version)
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version or 'v1'}",
        "metadata": list_meta,
        "columnDefinitions": list(columns),
        "rows": rows,
    }
