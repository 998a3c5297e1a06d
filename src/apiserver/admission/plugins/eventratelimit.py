"""The EventRateLimit admission plugin (k8s.io/kubernetes plugin/pkg/admission/eventratelimit).

What it limits, as ``admission.go`` decides (``Plugin.Validate``): validating admission of
CREATE and UPDATE (``admission.NewHandler(admission.Create, admission.Update)``; a PATCH or an
apply is an UPDATE, or a CREATE when it creates) whose kind's GroupKind is the **core** ``Event``
(``api.Kind("Event")``, group ""), so only the ``/api/v1`` view of events is limited; a request
through ``events.k8s.io/v1`` carries the GroupKind ``events.k8s.io/Event`` and passes untouched.
Dry-run requests pass too (they never reach storage). The decision is made from the
:class:`~apiserver.admission.Attributes` alone, so whichever REST handler serves the core view
only has to describe its requests with group "" and kind "Event".

Each configured limit (``limitenforcer.go``) keeps token buckets (:class:`TokenBucket`) by key:
``Server`` one bucket for everything, ``Namespace`` the request's namespace, ``User`` the user
name (the empty key without a user), ``SourceAndObject`` the event's ``source.component``,
``source.host`` and ``involvedObject`` kind, namespace, name, uid and apiVersion run together.
The keyed ones sit in an LRU cache of ``cacheSize`` buckets (4096 when 0). Every limit is
charged on every request, and a refusal names each limit that had no token left: 429
``TooManyRequests``, ``Too many requests: `` and the aggregate of the enforcers' own
``Too many requests: limit reached on type <Type> for key <key>`` messages.

The configuration (``eventratelimit.admission.k8s.io/v1alpha1`` ``Configuration``, read by
``config.go`` ``LoadConfiguration`` and checked by ``apis/eventratelimit/validation``) has no
defaults beyond the cache size; with no configuration at all the plugin refuses to start
(``limits: Invalid value: null: must not be empty``), as kube-apiserver's does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
from twisted.internet.interfaces import IReactorTime

from apiserver.admission.interface import CREATE, UPDATE, Attributes, Operation
from apiserver.admission.ratelimit import LRUCache, TokenBucket
from apiserver.apimachinery import errors

PLUGIN_NAME = "EventRateLimit"
API_VERSION = "eventratelimit.admission.k8s.io/v1alpha1"
KIND = "Configuration"
LIMIT_TYPES = ("Server", "Namespace", "User", "SourceAndObject")
#: ``defaultCacheSize`` in limitenforcer.go.
DEFAULT_CACHE_SIZE = 4096
_INT32 = (-(2**31), 2**31 - 1)


class ConfigError(ValueError):
    """The plugin's configuration cannot be used (the text is kube-apiserver's)."""


@attrs.frozen
class Limit:
    """One ``limits[]`` entry."""

    type: str
    qps: int
    burst: int
    cache_size: int = 0


def _go_repr(value: Any) -> str:
    """A value as ``field.Invalid`` prints it (%#v-like for what a Configuration holds)."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[]" if not value else str(value)
    return str(value)


def _int32(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        kind = "string" if isinstance(value, str) else type(value).__name__
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigError(
                f"json: cannot unmarshal {kind} into Go struct field Limit.limits.{field} "
                "of type int32"
            )
    if not _INT32[0] <= value <= _INT32[1]:
        raise ConfigError(
            f"json: cannot unmarshal number {value} into Go struct field Limit.limits.{field} "
            "of type int32"
        )
    return int(value)


def parse_configuration(doc: Mapping[str, Any] | None) -> list[Limit]:
    """Decode and validate a Configuration document (None: no configuration given).

    Raises :class:`ConfigError` with kube-apiserver's text: the decoder's, then every
    validation error at once (``field.ErrorList.ToAggregate``).
    """
    limits: list[Limit] = []
    raw_limits: Any = None
    if doc is not None:
        if not isinstance(doc, Mapping):
            raise ConfigError("couldn't get version/kind; json parse error: not an object")
        kind, version = doc.get("kind"), doc.get("apiVersion")
        if not kind:
            raise ConfigError("Object 'Kind' is missing in configuration")
        if version != API_VERSION or kind != KIND:
            raise ConfigError(
                f'no kind "{kind}" is registered for version "{version or ""}" in scheme '
                '"k8s.io/kubernetes/plugin/pkg/admission/eventratelimit/config.go:32"'
            )
        raw_limits = doc.get("limits")
        if raw_limits is not None and not isinstance(raw_limits, list):
            raise ConfigError(
                "json: cannot unmarshal object into Go struct field Configuration.limits of "
                "type []v1alpha1.Limit"
            )
        for item in raw_limits or ():
            if not isinstance(item, Mapping):
                raise ConfigError(
                    "json: cannot unmarshal value into Go struct field Configuration.limits of "
                    "type v1alpha1.Limit"
                )
            limit_type = item.get("type", "")
            if not isinstance(limit_type, str):
                raise ConfigError(
                    "json: cannot unmarshal number into Go struct field Limit.limits.type of "
                    "type v1alpha1.LimitType"
                )
            limits.append(
                Limit(
                    limit_type,
                    _int32(item.get("qps", 0), "qps"),
                    _int32(item.get("burst", 0), "burst"),
                    _int32(item.get("cacheSize", 0), "cacheSize"),
                )
            )
    problems = validate(limits, raw_limits)
    if problems:
        raise ConfigError(problems[0] if len(problems) == 1 else f"[{', '.join(problems)}]")
    return limits


def validate(limits: Sequence[Limit], raw: Any = None) -> list[str]:
    """``validation.ValidateConfiguration``: each problem as its ``field.Error`` text."""
    problems: list[str] = []
    if not limits:
        problems.append(f"limits: Invalid value: {_go_repr(raw)}: must not be empty")
    supported = ", ".join(f'"{t}"' for t in sorted(LIMIT_TYPES))
    for index, limit in enumerate(limits):
        path = f"limits[{index}]"
        if limit.type not in LIMIT_TYPES:
            problems.append(
                f'{path}.type: Unsupported value: "{limit.type}": supported values: {supported}'
            )
        if limit.burst <= 0:
            problems.append(f"{path}.burst: Invalid value: {limit.burst}: must be positive")
        if limit.qps <= 0:
            problems.append(f"{path}.qps: Invalid value: {limit.qps}: must be positive")
        if limit.type != "Server" and limit.cache_size < 0:
            problems.append(
                f"{path}.cacheSize: Invalid value: {limit.cache_size}: must not be negative"
            )
    return problems


def _server_key(attributes: Attributes) -> str:
    return ""


def _namespace_key(attributes: Attributes) -> str:
    return attributes.namespace


def _user_key(attributes: Attributes) -> str:
    user = attributes.user
    return user.name if user is not None else ""


def _source_and_object_key(attributes: Attributes) -> str:
    obj = attributes.obj
    if obj is None:
        return ""
    source = obj.get("source") or {}
    involved = obj.get("involvedObject") or {}
    return "".join(
        str(part or "")
        for part in (
            source.get("component"),
            source.get("host"),
            involved.get("kind"),
            involved.get("namespace"),
            involved.get("name"),
            involved.get("uid"),
            involved.get("apiVersion"),
        )
    )


_KEYS: dict[str, Callable[[Attributes], str]] = {
    "Server": _server_key,
    "Namespace": _namespace_key,
    "User": _user_key,
    "SourceAndObject": _source_and_object_key,
}


class LimitEnforcer:
    """One limit type's buckets (``limitEnforcer``)."""

    __slots__ = ("_bucket", "_cache", "_key", "limit_type")

    def __init__(self, limit: Limit, clock: IReactorTime) -> None:
        self.limit_type = limit.type

        def bucket() -> TokenBucket:
            return TokenBucket(float(limit.qps), limit.burst, clock)

        self._key = _KEYS[limit.type]
        self._bucket: TokenBucket | None = None
        self._cache: LRUCache[TokenBucket] | None = None
        if limit.type == "Server":
            self._bucket = bucket()
        else:
            self._cache = LRUCache(limit.cache_size or DEFAULT_CACHE_SIZE, bucket)

    def accept(self, attributes: Attributes) -> str | None:
        """None when a token was taken, else the refusal's text."""
        key = self._key(attributes)
        cache = self._cache
        bucket = self._bucket if cache is None else cache.get(key)
        assert bucket is not None
        if bucket.try_accept():
            return None
        return f"Too many requests: limit reached on type {self.limit_type} for key {key}"

    @property
    def cache(self) -> LRUCache[TokenBucket] | None:
        return self._cache


def _aggregate(messages: list[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: one message alone, several in brackets,
    duplicates once."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


class EventRateLimit:
    """The plugin: validating only, CREATE and UPDATE of core Events (module doc)."""

    def __init__(self, limits: Sequence[Limit], clock: IReactorTime) -> None:
        self.enforcers = [LimitEnforcer(limit, clock) for limit in limits]

    @classmethod
    def from_config(cls, doc: Mapping[str, Any] | None, clock: IReactorTime) -> EventRateLimit:
        return cls(parse_configuration(doc), clock)

    def handles(self, operation: Operation) -> bool:
        return operation == CREATE or operation == UPDATE

    def admit(self, attributes: Attributes) -> None:
        return None

    def validate(self, attributes: Attributes) -> None:
        if attributes.kind != "Event" or attributes.group != "" or attributes.dry_run:
            return
        refusals = [
            refusal
            for refusal in [enforcer.accept(attributes) for enforcer in self.enforcers]
            if refusal is not None
        ]
        if refusals:
            raise errors.too_many_requests("Too many requests: " + _aggregate(refusals))
