"""Status errors and field errors, worded as apimachinery words them.

Follows k8s.io/apimachinery ``pkg/api/errors/errors.go`` (the ``New*`` constructors and their
messages) and ``pkg/util/validation/field/errors.go`` (``field.Error`` text and the cause
reasons); the exact strings are theirs.

Handlers raise :class:`StatusError`; the HTTP layer turns it into a Status body with
:meth:`StatusError.response`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from apiserver.gocompat.quote import go_quote
from apiserver.http.response import Response
from apiserver.http.status import status_response

# --- field errors ---------------------------------------------------------------------------

REQUIRED = "FieldValueRequired"
INVALID = "FieldValueInvalid"
NOT_SUPPORTED = "FieldValueNotSupported"
FORBIDDEN = "FieldValueForbidden"
TOO_LONG = "FieldValueTooLong"
TOO_MANY = "FieldValueTooMany"
DUPLICATE = "FieldValueDuplicate"
NOT_FOUND = "FieldValueNotFound"
INTERNAL = "InternalError"

_BODY = {
    REQUIRED: "Required value",
    INVALID: "Invalid value",
    NOT_SUPPORTED: "Unsupported value",
    FORBIDDEN: "Forbidden",
    TOO_LONG: "Too long",
    TOO_MANY: "Too many",
    DUPLICATE: "Duplicate value",
    NOT_FOUND: "Not found",
    INTERNAL: "Internal error",
}


class _Omit:
    """Marks a field error that prints no value (Go's ``omitValue``)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omit()


def format_value(value: Any) -> str:
    """How ``field.Error`` prints a bad value: strings quoted, numbers bare, others JSON."""
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


@attrs.frozen
class FieldError:
    """One validation problem at ``field`` (a dotted path such as ``metadata.name``)."""

    type: str
    field: str
    bad_value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """The text after ``<field>: `` (what the cause's ``message`` holds)."""
        text = _BODY.get(self.type, self.type)
        # Go never prints the value of Required, Forbidden, TooLong and Internal errors.
        if (
            self.type not in (REQUIRED, FORBIDDEN, TOO_LONG, INTERNAL)
            and self.bad_value is not OMIT
        ):
            text += ": " + format_value(self.bad_value)
        if self.detail:
            text += ": " + self.detail
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}" if self.field else self.body()

    def cause(self) -> dict[str, str]:
        return {"reason": self.type, "message": self.body(), "field": self.field}


def required(field: str, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, field, OMIT, detail)


def invalid(field: str, value: Any, detail: str = "") -> FieldError:
    return FieldError(INVALID, field, value, detail)


def forbidden(field: str, detail: str = "") -> FieldError:
    return FieldError(FORBIDDEN, field, OMIT, detail)


def too_long(field: str, max_bytes: int) -> FieldError:
    return FieldError(TOO_LONG, field, OMIT, f"may not be more than {max_bytes} bytes")


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError(DUPLICATE, field, value)


def not_supported(field: str, value: Any, valid: Sequence[str]) -> FieldError:
    detail = "supported values: " + ", ".join(go_quote(v) for v in valid) if valid else ""
    return FieldError(NOT_SUPPORTED, field, value, detail)


def aggregate_text(errors: Iterable[object]) -> str:
    """``e1`` or ``[e1, e2]`` with duplicate texts removed (utilerrors.NewAggregate).

    Each item is shown by ``str()``: field errors, exceptions and plain messages alike. The
    one copy: the authenticator and authorizer unions use it too.
    """
    texts: list[str] = []
    for error in errors:
        text = str(error)
        if text not in texts:
            texts.append(text)
    if len(texts) == 1:
        return texts[0]
    return "[" + ", ".join(texts) + "]"


# --- status errors --------------------------------------------------------------------------


class StatusError(Exception):
    """An API error with the Status body kube-apiserver would send."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: tuple[tuple[str, str], ...] = (),
        list_meta: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers
        self.list_meta = list_meta

    def response(self) -> Response:
        return status_response(
            self.code, self.reason, self.message, self.details, self.headers, self.list_meta
        )

    def __repr__(self) -> str:
        return f"StatusError({self.code}, {self.reason!r}, {self.message!r})"


@attrs.frozen
class GroupResource:
    """``events.events.k8s.io`` style qualified names (schema.GroupResource.String())."""

    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


def _details(name: str, gr: GroupResource, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if gr.group:
        details["group"] = gr.group
    details["kind"] = gr.resource
    details.update(extra)
    return details


def not_found(gr: GroupResource, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{gr} "{name}" not found', _details(name, gr))


def already_exists(gr: GroupResource, name: str) -> StatusError:
    return StatusError(409, "AlreadyExists", f'{gr} "{name}" already exists', _details(name, gr))


def generate_name_conflict(gr: GroupResource, name: str, retry_after: int = 1) -> StatusError:
    message = (
        f'{gr} "{name}" already exists, the server was not able to generate a unique name '
        "for the object"
    )
    return StatusError(
        409, "AlreadyExists", message, _details(name, gr, retryAfterSeconds=retry_after)
    )


def conflict(gr: GroupResource, name: str, reason_text: str) -> StatusError:
    message = f'Operation cannot be fulfilled on {gr} "{name}": {reason_text}'
    return StatusError(409, "Conflict", message, _details(name, gr))


MODIFIED = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def invalid_error(
    kind: str, name: str, errors: Sequence[FieldError], group: str = ""
) -> StatusError:
    """422 ``<Kind> "<name>" is invalid: <errs>`` with one cause per error."""
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid: {aggregate_text(errors)}'
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    details["causes"] = [e.cause() for e in errors]
    return StatusError(422, "Invalid", message, details)


def summarize_data(data: bytes, max_length: int = 30) -> str:
    """``summarizeData`` (k8s.io/apiserver pkg/endpoints/handlers/rest.go), the tail of
    ``transformDecodeError``'s message: a JSON object's first bytes as text, else hex."""
    if not data:
        return "<empty>"
    head = data[:max_length]
    text = head.decode("utf-8", "replace") if data[:1] == b"{" else head.hex()
    return text + " ..." if len(data) > max_length else text


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def check_type_meta(obj: Mapping[str, Any], api_version: str, kind: str, version: str) -> None:
    """A JSON/YAML body's ``apiVersion`` and ``kind``, when given, must be the endpoint's:
    the 400s of the versioning decoder (k8s.io/apimachinery ``pkg/runtime/serializer/
    versioning``, the scheme's ``no kind ... is registered``) as kube-apiserver writes them."""
    found_version = obj.get("apiVersion")
    if found_version and found_version != api_version:
        raise bad_request(
            f"the API version in the data ({found_version}) does not match the expected API "
            f"version ({api_version})"
        )
    found = obj.get("kind")
    if found and found != kind:
        raise bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: '
            f'no kind "{found}" is registered for version "{api_version}" in scheme '
            '"pkg/api/legacyscheme/scheme.go:30"'
        )


def internal_error(error: str) -> StatusError:
    return StatusError(
        500,
        "InternalError",
        f"Internal error occurred: {error}",
        {"causes": [{"message": error}]},
    )


def expired(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def timeout(message: str, retry_after: int = 0) -> StatusError:
    details: dict[str, Any] = {}
    if retry_after:
        details["retryAfterSeconds"] = retry_after
    return StatusError(504, "Timeout", message, details)


def too_large_resource_version(wanted: int, current: int) -> StatusError:
    return StatusError(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {wanted}, current: {current}",
        {
            "causes": [
                {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
            ],
            "retryAfterSeconds": 1,
        },
    )


#: go-restful's 404 for a path no route serves (``ServiceErrorHandler`` in
#: k8s.io/apiserver ``pkg/server/handler.go``: ``NewGenericServerResponse``). Never raised:
#: written through ``negotiation.error_response``.
ROUTE_NOT_FOUND = StatusError(
    404, "NotFound", "the server could not find the requested resource", {}
)


def method_not_supported() -> StatusError:
    return StatusError(
        405,
        "MethodNotAllowed",
        "the server does not allow this method on the requested resource",
        {},
    )


def unsupported_media_type() -> StatusError:
    return StatusError(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})


def not_acceptable(accepted: Sequence[str]) -> StatusError:
    return StatusError(
        406,
        "NotAcceptable",
        "only the following media types are accepted: " + ", ".join(accepted),
    )


def too_many_requests(message: str) -> StatusError:
    return StatusError(429, "TooManyRequests", message)


def forbidden_error(message: str, details: dict[str, Any] | None = None) -> StatusError:
    return StatusError(403, "Forbidden", message, details)


def unauthorized(message: str = "Unauthorized") -> StatusError:
    return StatusError(401, "Unauthorized", message)
