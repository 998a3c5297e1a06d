"""Impersonation headers: acting as another user (``Impersonate-User`` and friends).

Follows ``AS/pkg/endpoints/filters/impersonation.go`` (header names from
``API/authentication/v1/types.go``):

- ``Impersonate-User`` (first value), ``Impersonate-Group`` (every value),
  ``Impersonate-Extra-<key>`` (every value; the key lower-cased and %-decoded, kept as sent
  when the decoding fails), ``Impersonate-Uid`` (first value). A group, extra or uid without a
  user is refused: ``requested [<references>] without impersonating a user`` (a 400 here; the
  references printed as Go prints ``[]ObjectReference``).
- Each item is authorized for the *requesting* user with verb ``impersonate``: ``users``
  (group ``""``, name = user), ``serviceaccounts`` for ``system:serviceaccount:<ns>:<name>``
  (namespace and name, version ``v1``), ``groups``, ``userextras`` with subresource = key and
  name = value, and ``uids`` (the last two in ``authentication.k8s.io``, version ``v1``). The
  first refusal is a 403 with the usual Forbidden message for those attributes.
- The new user has the requested name, groups, extra and uid; a service account with no
  groups requested gets ``system:serviceaccounts`` and ``system:serviceaccounts:<ns>``;
  ``system:authenticated`` is appended unless a ``system:authenticated`` or
  ``system:unauthenticated`` group is present (for ``system:anonymous``:
  ``system:unauthenticated`` unless present).
- All ``Impersonate-*`` headers are removed before the request goes on.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

from apiserver.apimachinery.validation import is_dns1123_label, is_dns1123_subdomain
from apiserver.auth.interface import (
    ANONYMOUS,
    AUTHENTICATED,
    UNAUTHENTICATED,
    Attributes,
    UserInfo,
)

USER_HEADER = b"impersonate-user"
GROUP_HEADER = b"impersonate-group"
UID_HEADER = b"impersonate-uid"
EXTRA_PREFIX = b"impersonate-extra-"
AUTHENTICATION_V1 = "authentication.k8s.io/v1"
SA_PREFIX = "system:serviceaccount:"

_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PERCENT = re.compile(r"%([0-9A-Fa-f]{2})")


class ImpersonationError(Exception):
    """The impersonation headers are not usable (a 400)."""


@attrs.frozen
class ImpersonationRequest:
    """One thing to impersonate (the reference uses a ``v1.ObjectReference``)."""

    kind: str  # ServiceAccount, User, Group, UserExtra, UID
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""

    def go_repr(self) -> str:
        """``%v`` of the ObjectReference: its seven string fields separated by spaces."""
        fields = (self.kind, self.namespace, self.name, "", self.api_version, "", self.field_path)
        return "{" + " ".join(fields) + "}"

    def attributes(self, requestor: UserInfo) -> Attributes:
        """What the requestor must be allowed to do (verb ``impersonate``)."""
        group, version = "", ""
        resource, subresource = "", ""
        if self.kind == "ServiceAccount":
            resource, version = "serviceaccounts", "v1"
        elif self.kind == "User":
            resource = "users"
        elif self.kind == "Group":
            resource = "groups"
        elif self.kind == "UserExtra":
            group, version = "authentication.k8s.io", "v1"
            resource, subresource = "userextras", self.field_path
        elif self.kind == "UID":
            group, version = "authentication.k8s.io", "v1"
            resource = "uids"
        return Attributes(
            user=requestor,
            verb="impersonate",
            resource_request=True,
            namespace=self.namespace,
            api_group=group,
            api_version=version,
            resource=resource,
            subresource=subresource,
            name=self.name,
        )


def split_service_account(username: str) -> tuple[str, str] | None:
    """``serviceaccount.SplitUsername``: (namespace, name) or None."""
    if not username.startswith(SA_PREFIX):
        return None
    parts = username[len(SA_PREFIX) :].split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if is_dns1123_label(namespace) or is_dns1123_subdomain(name):
        return None
    return namespace, name


def _path_unescape(key: str) -> str:
    """Go's ``url.PathUnescape``, keeping ``key`` unchanged when it is malformed."""
    if "%" not in key or _ESCAPE.search(key):
        return key
    raw = _PERCENT.sub(lambda m: chr(int(m.group(1), 16)), key)
    try:
        return raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return raw


def _text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def has_impersonation(names: Iterable[bytes]) -> bool:
    """Whether any of the (lower-cased) header ``names`` asks for impersonation."""
    return any(name.startswith(b"impersonate-") for name in names)


def build_requests(headers: object) -> list[ImpersonationRequest]:
    """``buildImpersonationRequests`` over twisted.web ``Headers``."""
    get = headers.getRawHeaders  # type: ignore[attr-defined]
    requests: list[ImpersonationRequest] = []
    users = get(USER_HEADER) or []
    user = _text(users[0]) if users else ""
    if user:
        split = split_service_account(user)
        if split is not None:
            requests.append(ImpersonationRequest("ServiceAccount", split[1], namespace=split[0]))
        else:
            requests.append(ImpersonationRequest("User", user))
    groups = [_text(g) for g in get(GROUP_HEADER) or []]
    requests.extend(ImpersonationRequest("Group", g) for g in groups)
    has_extra = False
    for name, values in headers.getAllRawHeaders():  # type: ignore[attr-defined]
        lower = name.lower()
        if not lower.startswith(EXTRA_PREFIX):
            continue
        has_extra = True
        key = _path_unescape(_text(lower[len(EXTRA_PREFIX) :]))
        for value in values:
            requests.append(
                ImpersonationRequest(
                    "UserExtra", _text(value), api_version=AUTHENTICATION_V1, field_path=key
                )
            )
    uids = get(UID_HEADER) or []
    uid = _text(uids[0]) if uids else ""
    if uid:
        requests.append(ImpersonationRequest("UID", uid, api_version=AUTHENTICATION_V1))
    if (groups or has_extra or uid) and not user:
        shown = " ".join(r.go_repr() for r in requests)
        raise ImpersonationError(f"requested [{shown}] without impersonating a user")
    return requests


def impersonated_user(requests: list[ImpersonationRequest], groups_given: bool) -> UserInfo:
    """The user the request acts as once every item was allowed."""
    name = uid = ""
    groups: list[str] = []
    extra: dict[str, list[str]] = {}
    for item in requests:
        if item.kind == "ServiceAccount":
            name = f"{SA_PREFIX}{item.namespace}:{item.name}"
            if not groups_given:
                groups = ["system:serviceaccounts", f"system:serviceaccounts:{item.namespace}"]
        elif item.kind == "User":
            name = item.name
        elif item.kind == "Group":
            groups.append(item.name)
        elif item.kind == "UserExtra":
            extra.setdefault(item.field_path, []).append(item.name)
        elif item.kind == "UID":
            uid = item.name
    if name != ANONYMOUS:
        if AUTHENTICATED not in groups and UNAUTHENTICATED not in groups:
            groups.append(AUTHENTICATED)
    elif UNAUTHENTICATED not in groups:
        groups.append(UNAUTHENTICATED)
    return UserInfo(
        name=name,
        uid=uid,
        groups=tuple(groups),
        extra={key: tuple(values) for key, values in extra.items()},
    )


def strip_headers(headers: object) -> None:
    """Remove every ``Impersonate-*`` header."""
    names = [
        name
        for name, _ in headers.getAllRawHeaders()  # type: ignore[attr-defined]
        if name.lower().startswith(b"impersonate-")
    ]
    for name in names:
        headers.removeHeader(name)  # type: ignore[attr-defined]
