"""Helpers for fuzzing the daemon with schemathesis over the official events.k8s.io/v1 document.

The official document (``tests/reference/events-v1-openapi.json``, a copy of
``/openapi/v3/apis/events.k8s.io/v1`` of a real cluster) is the contract that generated clients
are built from. It under-describes what kube-apiserver really answers, so the fuzz run works
on an in-memory copy with these documented adjustments (the file itself is never changed):

* ``consistentWatchCache`` is dropped: it is not a parameter of any upstream release (see
  the reference folder's README), so neither kube-apiserver nor we read it.
* every operation gets a ``default`` response of ``io.k8s.apimachinery.pkg.apis.meta.v1.Status``:
  kube-apiserver answers every error (400, 404, 409, 410, 415, 422, 504, ...) with a Status
  object (``apiserver: pkg/endpoints/handlers/responsewriters/status.go``), but its OpenAPI
  generator only lists the success codes (and 401). With the ``default`` entry
  ``status_code_conformance`` still runs, and ``response_schema_conformance`` checks the body
  of every error against the Status schema — stricter than dropping the check.
* ``metav1.Time`` and ``metav1.MicroTime`` are ``nullable``: both encode the zero time as
  ``null`` (``apimachinery: pkg/apis/meta/v1/time.go``, ``micro_time.go`` MarshalJSON), and
  events.k8s.io/v1 always emits ``deprecatedFirstTimestamp``/``deprecatedLastTimestamp``
  (k8s.io/api ``core/v1/types.go``), so every real event carries ``null`` where the document
  says ``type: string``
  (``eventTime`` is ``null`` in a watch BOOKMARK and on events written through core v1 without
  one). Only ``nullable`` is added.
* ``watch`` is removed from the list operations and the deprecated ``/watch/`` operations are
  left out of generation: a watch answers a stream of newline-delimited WatchEvent documents
  that ends only at ``timeoutSeconds`` (default 30 to 60 minutes), which neither a fuzzer nor a
  single-document schema check can handle. Fixed watch cases in the test cover them instead.

:func:`enrich_for_fuzzing` goes further, for a second run that gets past the option checks
into the storage path; every change there states what kube-apiserver documents or does.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from schemathesis import Case, CheckContext, Response
from schemathesis.checks import not_a_server_error

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "events-v1-openapi.json"
"""The official document, kept in the repository (tests/reference/README.md says where from)."""

SCHEMAS = "#/components/schemas/"
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
STATUS_REF = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Status"
HTTP_METHODS = ("get", "put", "post", "delete", "patch", "head", "options")

KUBE_UNWRAPPED_500 = "500 Status without a reason"
"""kube-apiserver answers some request errors with 500 on purpose.

Errors that a decoder returns unwrapped reach ``responsewriters.ErrorNegotiated`` as plain Go
errors, which ``apierrors.ErrorToAPIStatus`` turns into code 500 with reason ``""``
(StatusReasonUnknown), e.g. a DELETE body that is not a JSON object (``couldn't get
version/kind; json parse error: ...``, ``apiserver: pkg/endpoints/handlers/delete.go``) or a
create whose body sets ``metadata.resourceVersion`` (``resourceVersion should not be set on
objects to be created``, ``apiserver: pkg/storage/etcd3/store.go``). The daemon
mirrors those; an unexpected failure in it answers reason ``InternalError`` instead (like
kube's panic recovery and ``apierrors.NewInternalError``), which the check still flags.
"""


def reference_path() -> Path:
    """The official document kept in tests/reference/."""
    return REFERENCE


def load_reference() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(reference_path().read_text())
    return data


def _drop_params(params: list[dict[str, Any]], names: set[str]) -> list[dict[str, Any]]:
    return [p for p in params if p.get("name") not in names]


def prepare_document(document: dict[str, Any]) -> dict[str, Any]:
    """Return the adjusted copy described in the module docstring."""
    doc = copy.deepcopy(document)
    status_response = {
        "description": "Status: how kube-apiserver reports every error",
        "content": {"application/json": {"schema": {"$ref": STATUS_REF}}},
    }
    for time_type in ("Time", "MicroTime"):
        schema = doc["components"]["schemas"].get(META + time_type)
        if schema is not None:  # the review documents have no MicroTime
            schema["nullable"] = True
    for path, item in doc["paths"].items():
        dropped = {"consistentWatchCache"}
        if "/watch/" not in path:
            dropped.add("watch")
        if "parameters" in item:
            item["parameters"] = _drop_params(item["parameters"], dropped)
        for method in HTTP_METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            if "parameters" in operation:
                operation["parameters"] = _drop_params(operation["parameters"], dropped)
            operation["responses"].setdefault("default", copy.deepcopy(status_response))
    return doc


def is_kube_unwrapped_500(response: Response) -> bool:
    """True for a 500 Status with an empty reason: see :data:`KUBE_UNWRAPPED_500`."""
    if response.status_code != 500:
        return False
    try:
        body = json.loads(response.content)
    except ValueError:
        return False
    return (
        isinstance(body, dict)
        and body.get("kind") == "Status"
        and body.get("code") == 500
        and not body.get("reason")
        and isinstance(body.get("message"), str)
    )


def not_a_server_error_but_kube(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """``not_a_server_error``, except for the 500s kube-apiserver answers by design."""
    if is_kube_unwrapped_500(response):
        return None
    return not_a_server_error(ctx, response, case)


SEED_NAMESPACE = "default"
SEED_NAME = "seed"
MICRO_TIME_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z$"
"""``metav1.MicroTime`` on the wire: RFC 3339 with exactly six fraction digits
(k8s.io/apimachinery ``pkg/apis/meta/v1/micro_time.go``); the
server emits UTC ``Z``. Other shapes are a 400 decode error, which the first run covers."""

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$"
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?$"

# Valid values that kube-apiserver lists in each parameter's description (its OpenAPI
# generator emits no ``enum`` for these string options).
OPTION_ENUMS: dict[str, list[str]] = {
    "dryRun": ["All"],
    "fieldValidation": ["Ignore", "Warn", "Strict"],
    "propagationPolicy": ["Foreground", "Background", "Orphan"],
    "resourceVersionMatch": ["Exact", "NotOlderThan"],
}
OPTION_EXAMPLES: dict[str, Any] = {"fieldManager": "fuzz", "timeoutSeconds": 5, "limit": 5}


def seed_event(namespace: str = SEED_NAMESPACE, name: str = SEED_NAME) -> dict[str, Any]:
    """A valid events.k8s.io/v1 Event: the example body, and what the fixture stores first."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": namespace, "labels": {"fuzz": "yes"}},
        "eventTime": "2026-01-02T03:04:05.123456Z",
        "reportingController": "example.com/fuzzer",
        "reportingInstance": "fuzzer-1",
        "action": "Probe",
        "reason": "Fuzzed",
        "type": "Normal",
        "note": "seed event",
        "regarding": {"kind": "Pod", "namespace": namespace, "name": "pod-1"},
    }


def _json_patch_schema() -> dict[str, Any]:
    """RFC 6902 documents, which kube-apiserver accepts as ``application/json-patch+json``."""
    return {
        "type": "array",
        "maxItems": 4,
        "items": {
            "type": "object",
            "required": ["op", "path"],
            "properties": {
                "op": {
                    "type": "string",
                    "enum": ["add", "remove", "replace", "move", "copy", "test"],
                },
                "path": {"type": "string"},
                "from": {"type": "string"},
                "value": {},
            },
        },
    }


def enrich_for_fuzzing(document: dict[str, Any]) -> dict[str, Any]:
    """:func:`prepare_document` plus what kube-apiserver documents in prose or in newer documents.

    * string options get the valid values their descriptions list as ``enum`` (negative
      generation still sends other values); without that, almost every POST/PUT stops at
      ``dryRun: Unsupported value: [""]`` (422) before reaching validation or storage;
    * path ``namespace``/``name`` get DNS label/subdomain patterns and the seed event's
      coordinates as examples, so the examples phase reads, patches, replaces and deletes a
      real object;
    * MicroTime gets its exact wire pattern (see :data:`MICRO_TIME_PATTERN`);
    * PATCH gets the four media types kube-apiserver serves (the 1.27+ group document and
      ``apiserver: pkg/endpoints/installer.go`` list json-patch, merge-patch, strategic-merge-patch
      and apply-patch+yaml) besides the document's ``application/json`` (which it answers 415);
    * request bodies get a valid example event (POST's with ``generateName``, so it is created).
    """
    doc = prepare_document(document)
    schemas = doc["components"]["schemas"]
    schemas[META + "MicroTime"] = {
        "type": "string",
        "pattern": MICRO_TIME_PATTERN,
        "nullable": True,
    }
    event = seed_event()
    for item in doc["paths"].values():
        params = list(item.get("parameters", []))
        for method in HTTP_METHODS:
            if method in item:
                params.extend(item[method].get("parameters", []))
        for param in params:
            name = param.get("name")
            schema = param.setdefault("schema", {})
            if name in OPTION_ENUMS:
                schema["enum"] = OPTION_ENUMS[name]
                param["example"] = OPTION_ENUMS[name][0]
            elif name in OPTION_EXAMPLES:
                param["example"] = OPTION_EXAMPLES[name]
            elif name == "namespace" and param.get("in") == "path":
                schema["pattern"] = DNS_LABEL_PATTERN
                param["example"] = SEED_NAMESPACE
            elif name == "name" and param.get("in") == "path":
                schema["pattern"] = DNS_SUBDOMAIN_PATTERN
                param["example"] = SEED_NAME
        for method in ("post", "put"):
            body = item.get(method, {}).get("requestBody")
            if body is not None:
                example = copy.deepcopy(event)
                if method == "post":
                    # A fresh name on every run of the example, so it gets to storage.
                    example["metadata"] = {"generateName": "fuzz-", "namespace": SEED_NAMESPACE}
                body["content"]["application/json"]["example"] = example
        patch = item.get("patch")
        if patch is not None:
            content = patch["requestBody"]["content"]
            object_schema = {"$ref": SCHEMAS + META + "Patch"}
            content["application/merge-patch+json"] = {
                "schema": object_schema,
                "example": {"metadata": {"labels": {"patched": "merge"}}},
            }
            content["application/strategic-merge-patch+json"] = {
                "schema": object_schema,
                "example": {"metadata": {"labels": {"patched": "strategic"}}},
            }
            content["application/json-patch+json"] = {
                "schema": _json_patch_schema(),
                "example": [{"op": "add", "path": "/metadata/labels/patched", "value": "json"}],
            }
            content["application/apply-patch+yaml"] = {
                "schema": {"$ref": SCHEMAS + "io.k8s.api.events.v1.Event"},
                "example": copy.deepcopy(event),
            }
    return doc
