"""PATCH for typed objects: JSON patch, merge patch, strategic merge patch, server-side apply.

The four modules keep kube-apiserver's semantics and error texts each
(``pkg/endpoints/handlers/patch.go``); :class:`Patcher` strings them together the way the
patch handler does for one request:

1. decode the body (400s for bodies that do not decode; 413 for too many JSON patch ops);
2. apply it to the current object in the request's version (422/500 on failure; apply: 409
   conflicts);
3. strict decoding of the result (``fieldValidation``): Strict fails with the 422
   `` "" is invalid: patch: Invalid value: "<patched>": strict decoding error: ...`` (apply:
   400 ``error strict decoding YAML: ...``), Warn collects :attr:`Patcher.warnings`;
4. managed fields: an Update entry for json/merge/strategic patches, the Apply entry for apply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.apimachinery.errors import FieldError, StatusError, invalid
from apiserver.apimachinery.managedfields import VersionViews, update_managed_fields
from apiserver.apimachinery.patch.apply import (
    apply,
    conflict_error,
    decode_apply_patch,
    strict_apply_error,
    strict_apply_problem,
)
from apiserver.apimachinery.patch.jsonpatch import (
    MAX_OPERATIONS,
    apply_json_patch,
    decode_json_patch,
    json_patch,
)
from apiserver.apimachinery.patch.mergepatch import (
    decode_merge_patch,
    json_merge_patch,
    merge_patch,
)
from apiserver.apimachinery.patch.strategic import (
    decode_strategic_patch,
    go_sprint,
    strategic_merge_patch,
)
from apiserver.apimachinery.schema import Type
from apiserver.apimachinery.strict import find_strict_errors, find_unknown_fields
from apiserver.apimachinery.strict_fast import certainly_clean
from apiserver.gocompat.jsonvalues import go_json_kind
from apiserver.gocompat.marshal import go_marshal

PATCH_TYPES = {
    "application/json-patch+json": "json",
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/apply-patch+yaml": "apply",
}


def strict_errors(raw: bytes, fmt: str, schema: Type, decoded: Any = None) -> list[str]:
    """``unknown field``/``duplicate field`` problems of a create/update body
    (``sigs.k8s.io/json`` ``UnmarshalStrict``, as k8s.io/apiserver's handlers call it).

    ``fmt`` is ``json`` or ``yaml``; ``schema`` is the served type's (the resource passes it:
    this layer knows no resource).
    ``decoded``, the JSON body already decoded (dicts), lets a clean body be told apart
    quickly (:mod:`apiserver.apimachinery.strict_fast`).
    """
    if fmt != "yaml" and decoded is not None and certainly_clean(raw, decoded, schema):
        return []
    return find_strict_errors(raw, schema, content_type="yaml" if fmt == "yaml" else "json")


def patch_strict_error(value_text: str, problems: list[str]) -> StatusError:
    """The 422 of a patch whose result does not decode strictly (``errors.NewInvalid`` with an
    empty GroupKind and name: message `` "" is invalid: patch: Invalid value: ...``)."""
    error: FieldError = invalid(
        "patch", value_text, "strict decoding error: " + ", ".join(problems)
    )
    return StatusError(422, "Invalid", f' "" is invalid: {error}', {"causes": [error.cause()]})


def patch_decode_error(value_text: str, json_kind: str) -> StatusError:
    """The 422 when the patched document is not a JSON object (the codec's TypeMeta probe)."""
    message = (
        "couldn't get version/kind; json parse error: json: cannot unmarshal "
        f"{json_kind} into Go value of type struct {{ APIVersion string "
        '"json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'
    )
    error: FieldError = invalid("patch", value_text, message)
    return StatusError(422, "Invalid", f' "" is invalid: {error}', {"causes": [error.cause()]})


class Patcher:
    """One PATCH request's patch, applied (possibly several times, on conflicts) to objects.

    ``patch_type`` is ``json``, ``merge``, ``strategic`` or ``apply`` (or the media type);
    ``validation`` is the ``fieldValidation`` option (``Ignore``, ``Warn``, ``Strict``).
    """

    def __init__(
        self,
        patch_type: str,
        raw: bytes,
        *,
        manager: str,
        api_version: str,
        force: bool = False,
        validation: str = "Warn",
        schema: Type,
        kind: str = "Event",
        track_managed_fields: bool = True,
        views: VersionViews | None = None,
    ) -> None:
        self.patch_type = PATCH_TYPES.get(patch_type, patch_type)
        self.raw = raw
        self.manager = manager
        self.api_version = api_version
        self.force = force
        self.validation = validation or "Warn"
        self.schema = schema
        self.kind = kind
        self.track_managed_fields = track_managed_fields
        self.views = views
        self.warnings: list[str] = []
        self._decoded: Any = None
        self._body_problems: list[str] = []
        self._ready = False

    @property
    def strict(self) -> bool:
        return self.validation in ("Warn", "Strict")

    def _decode(self) -> Any:
        if not self._ready:
            if self.patch_type == "json":
                self._decoded, self._body_problems = decode_json_patch(
                    self.raw, validation=self.validation
                )
            elif self.patch_type == "merge":
                self._decoded, self._body_problems = decode_merge_patch(
                    self.raw, validation=self.validation
                )
            elif self.patch_type == "strategic":
                self._decoded, self._body_problems = decode_strategic_patch(
                    self.raw, validation=self.validation
                )
            elif self.patch_type == "apply":
                self._decoded = decode_apply_patch(self.raw)
                self._body_problems = []
            else:
                raise ValueError(f"{self.patch_type}: unimplemented patch type")
            self._ready = True
        return self._decoded

    def uid_in_patch(self) -> str:
        """``metadata.uid`` the patch body sets, if it says (apply/merge/strategic)."""
        decoded = self._decode()
        if isinstance(decoded, dict):
            meta = decoded.get("metadata")
            if isinstance(meta, dict) and isinstance(meta.get("uid"), str):
                return str(meta["uid"])
        return ""

    def _check_strict(self, problems: list[str], value_text: Callable[[], str]) -> None:
        if not problems or not self.strict:
            return
        if self.validation == "Strict":
            raise patch_strict_error(value_text(), problems)
        self.warnings.extend(problems)

    def apply(self, current: dict[str, Any] | None, now: str) -> dict[str, Any]:
        """The patched object (request version) with its managed fields; raises StatusError."""
        self.warnings = []
        decoded = self._decode()
        if self.patch_type == "apply":
            result = apply(
                current,
                decoded,
                self.manager,
                self.api_version,
                self.force,
                now,
                self.schema,
                kind=self.kind,
                views=self.views,
            )
            if self.strict:
                problem = strict_apply_problem(self.raw)
                if problem is not None:
                    if self.validation == "Strict":
                        raise strict_apply_error(problem)
                    self.warnings.append(problem)
            return result
        base = current or {}
        consumed: Any = None
        if self.patch_type == "json":
            patched = apply_json_patch(base, decoded)
        elif self.patch_type == "merge":
            patched = merge_patch(base, decoded)
        else:
            patched, consumed = strategic_merge_patch(base, decoded, self.schema)
        if not isinstance(patched, dict):
            raise patch_decode_error(go_marshal(patched), go_json_kind(patched))
        patched_dict: dict[str, Any] = patched
        if self.strict:
            problems = list(self._body_problems) + find_unknown_fields(patched, self.schema)
            # The value kube prints: the strategic patch as the merge left it, else the
            # patched object (written only when a Strict refusal needs it).
            self._check_strict(
                problems,
                lambda: go_sprint(consumed) if consumed is not None else go_marshal(patched),
            )
        if self.track_managed_fields:
            entries = update_managed_fields(
                current,
                patched_dict,
                self.manager,
                "Update",
                self.api_version,
                now,
                self.schema,
                views=self.views,
            )
            meta = patched_dict.setdefault("metadata", {})
            if isinstance(meta, dict):
                if entries:
                    meta["managedFields"] = entries
                else:
                    meta.pop("managedFields", None)
        return patched_dict


__all__ = [
    "MAX_OPERATIONS",
    "PATCH_TYPES",
    "Patcher",
    "apply",
    "apply_json_patch",
    "conflict_error",
    "decode_apply_patch",
    "decode_json_patch",
    "decode_merge_patch",
    "decode_strategic_patch",
    "go_sprint",
    "json_merge_patch",
    "json_patch",
    "merge_patch",
    "patch_decode_error",
    "patch_strict_error",
    "strategic_merge_patch",
    "strict_apply_error",
    "strict_apply_problem",
    "strict_errors",
]
