"""The authorizer chain: ``--authorization-mode`` or ``--authorization-config``.

References: ``KK/pkg/kubeapiserver/options/authorization.go`` (flags to a configuration),
``KK/pkg/kubeapiserver/authorizer/{config,reload}.go`` (the chain, with a ``system:masters``
authorizer always first), ``AS/pkg/apis/apiserver/{types,validation/validation}.go`` and
``AS/pkg/apis/apiserver/load`` (the ``AuthorizationConfiguration`` file).

- Neither flag: mode ``AlwaysAllow`` (the seed's default).
- ``--authorization-mode``: the modes in order; ``ABAC`` reads ``--authorization-policy-file``;
  ``Webhook`` reads ``--authorization-webhook-config-file`` with the version and cache TTL
  flags, a 30s timeout and NoOpinion on failure. (Flag combinations are checked earlier, by
  ``apiserver.options.validate``.)
- ``--authorization-config``: ``apiVersion: apiserver.config.k8s.io/v1`` (also ``v1beta1``,
  ``v1alpha1``), ``kind: AuthorizationConfiguration``, decoded strictly (an unknown field is an
  error) and validated as the reference does, every problem reported at once with its field
  path (``authorizers[0].timeout: Invalid value: "45s": must be > 0s and <= 30s``).
  Authorizer names are DNS subdomains and unique, and a non-webhook authorizer must be named
  after its type in lower case (``rbac``, ``node``, ...); only ``Webhook`` may repeat. Webhooks
  have their own timeout, TTLs (defaults 5m and 30s), SubjectAccessReview version, failure
  policy, kubeconfig (an absolute path) and CEL match conditions (see ``cel``).
  ``connectionInfo.type: InClusterConfig`` is refused: this server is not a pod of a cluster.
  The file is re-read every minute (:class:`ConfigReloader`, as ``reload.go`` does): a valid
  new version replaces the chain (webhook caches start empty), an invalid one is logged and
  the running chain kept.
- Every problem raises ``ValueError`` naming the file; the server turns it into a start-up
  failure.

Mode ``RBAC`` is the bootstrap policy only (see ``rbac``): this server serves no RBAC objects.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import yaml
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from apiserver.apimachinery.errors import (
    FieldError,
    duplicate,
    invalid,
    not_supported,
    required,
)
from apiserver.apimachinery.validation import is_dns1123_subdomain
from apiserver.auth.authz import aggregate_messages
from apiserver.auth.authz.abac import load_policy_file
from apiserver.auth.authz.builtin import AlwaysAllow, AlwaysDeny, PrivilegedGroups
from apiserver.auth.authz.cel import CELCompileError, Program, all_match, compile_condition
from apiserver.auth.authz.node import NodeAuthorizer
from apiserver.auth.authz.rbac import RBACAuthorizer
from apiserver.auth.authz.union import Union
from apiserver.auth.authz.webhook import SARTransport, TreqTransport, WebhookAuthorizer
from apiserver.auth.interface import DENY, NO_OPINION, Authorizer
from apiserver.auth.kubeconfig import load_kubeconfig
from apiserver.gocompat import yamlguard
from apiserver.gocompat.duration import format_go_duration, parse_go_duration

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

log = Logger()

MODES = ("AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node")
CONFIG_GROUP = "apiserver.config.k8s.io"
CONFIG_VERSIONS = ("v1", "v1beta1", "v1alpha1")
CONFIG_KIND = "AuthorizationConfiguration"
FLAG_WEBHOOK_TIMEOUT = 30.0
MAX_TIMEOUT = 30.0
MAX_MATCH_CONDITIONS = 64


@attrs.frozen
class WebhookSpec:
    """One webhook's settings (``apiserver.WebhookConfiguration``)."""

    kubeconfig: str
    timeout: float = FLAG_WEBHOOK_TIMEOUT
    authorized_ttl: float = 300.0
    unauthorized_ttl: float = 30.0
    version: str = "v1beta1"
    failure_policy: str = NO_OPINION
    match_conditions: tuple[Program, ...] = ()


@attrs.frozen
class AuthorizerSpec:
    """One entry of the chain (``apiserver.AuthorizerConfiguration``)."""

    type: str
    name: str
    webhook: WebhookSpec | None = None


#: Builds the transport of a webhook from its kubeconfig path (tests pass a stub).
TransportFactory = Callable[[str, Any], SARTransport]


def default_transport(kubeconfig: str, reactor: Any) -> SARTransport:
    """treq over HTTPS as the kubeconfig describes (``apiserver.auth.kubeconfig``)."""
    target = load_kubeconfig(kubeconfig)
    return TreqTransport(
        target.http_client(reactor), target.server, reactor, target.request_headers()
    )


# --- from the flags ----------------------------------------------------------------------------


def specs_from_flags(config: ServerConfig) -> list[AuthorizerSpec]:
    """``--authorization-mode`` (default AlwaysAllow) as a list of entries."""
    modes = list(config.authorization_mode or ()) or ["AlwaysAllow"]
    specs: list[AuthorizerSpec] = []
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"--authorization-mode: unknown authorization mode {mode!r}")
        webhook = None
        if mode == "Webhook":
            webhook = WebhookSpec(
                kubeconfig=config.authorization_webhook_config_file,
                authorized_ttl=config.authorization_webhook_cache_authorized_ttl,
                unauthorized_ttl=config.authorization_webhook_cache_unauthorized_ttl,
                version=config.authorization_webhook_version,
            )
        specs.append(AuthorizerSpec(mode, mode.lower(), webhook))
    return specs


# --- from --authorization-config ---------------------------------------------------------------

_TOP_FIELDS = ("apiVersion", "kind", "authorizers")
_AUTHORIZER_FIELDS = ("type", "name", "webhook")
_WEBHOOK_FIELDS = (
    "timeout",
    "authorizedTTL",
    "unauthorizedTTL",
    "subjectAccessReviewVersion",
    "matchConditionSubjectAccessReviewVersion",
    "failurePolicy",
    "connectionInfo",
    "matchConditions",
)
_CONNECTION_FIELDS = ("type", "kubeConfigFile")
_CONDITION_FIELDS = ("expression",)


class _Decoder:
    """Strict decoding: unknown fields and wrong types are errors, reported all at once."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def mapping(self, value: Any, path: str, fields: Sequence[str]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.errors.append(f"{path or 'the document'}: expected an object")
            return {}
        for key in value:
            if key not in fields:
                where = f"{path}.{key}" if path else str(key)
                self.errors.append(f'strict decoding error: unknown field "{where}"')
        return value

    def string(self, obj: dict[str, Any], key: str, path: str) -> str:
        value = obj.get(key)
        if value is None:
            return ""
        if not isinstance(value, str):
            self.errors.append(f"{path}.{key}: expected a string, got {value!r}")
            return ""
        return value

    def duration(self, obj: dict[str, Any], key: str, path: str) -> float:
        text = self.string(obj, key, path)
        if not text:
            return 0.0
        try:
            return parse_go_duration(text)
        except ValueError:
            self.errors.append(f'{path}.{key}: time: invalid duration "{text}"')
            return 0.0

    def sequence(self, obj: dict[str, Any], key: str, path: str) -> list[Any]:
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            self.errors.append(f"{path}.{key}: expected a list")
            return []
        return value


def _validate_webhook(
    raw: dict[str, Any], path: str, decoder: _Decoder, errors: list[FieldError]
) -> WebhookSpec:
    """``ValidateWebhookConfiguration``; field paths start at the authorizer (as in Go)."""
    wpath = f"{path}.webhook"
    timeout = decoder.duration(raw, "timeout", wpath)
    authorized = decoder.duration(raw, "authorizedTTL", wpath) or 300.0
    unauthorized = decoder.duration(raw, "unauthorizedTTL", wpath) or 30.0
    if timeout == 0:
        errors.append(required(f"{path}.timeout"))
    elif timeout > MAX_TIMEOUT or timeout < 0:
        errors.append(
            invalid(f"{path}.timeout", format_go_duration(timeout), "must be > 0s and <= 30s")
        )
    for key, value in (("authorizedTTL", authorized), ("unauthorizedTTL", unauthorized)):
        if value < 0:
            errors.append(invalid(f"{path}.{key}", format_go_duration(value), "must be > 0s"))
    version = decoder.string(raw, "subjectAccessReviewVersion", wpath)
    if not version:
        errors.append(required(f"{path}.subjectAccessReviewVersion"))
    elif version not in ("v1", "v1beta1"):
        errors.append(
            not_supported(f"{path}.subjectAccessReviewVersion", version, ["v1", "v1beta1"])
        )
    conditions_raw = decoder.sequence(raw, "matchConditions", wpath)
    mc_version = decoder.string(raw, "matchConditionSubjectAccessReviewVersion", wpath)
    if not mc_version:
        if conditions_raw:
            errors.append(
                required(
                    f"{path}.matchConditionSubjectAccessReviewVersion",
                    "required if match conditions are specified",
                )
            )
    elif mc_version != "v1":
        errors.append(
            not_supported(f"{path}.matchConditionSubjectAccessReviewVersion", mc_version, ["v1"])
        )
    policy = decoder.string(raw, "failurePolicy", wpath)
    if not policy:
        errors.append(required(f"{path}.failurePolicy"))
    elif policy not in (NO_OPINION, DENY):
        errors.append(not_supported(f"{path}.failurePolicy", policy, [NO_OPINION, DENY]))
    connection = decoder.mapping(
        raw.get("connectionInfo"), f"{wpath}.connectionInfo", _CONNECTION_FIELDS
    )
    ctype = decoder.string(connection, "type", f"{wpath}.connectionInfo")
    kubeconfig = decoder.string(connection, "kubeConfigFile", f"{wpath}.connectionInfo")
    kpath = f"{path}.connectionInfo.kubeConfigFile"
    if not ctype:
        errors.append(required(f"{path}.connectionInfo.type"))
    elif ctype == "InClusterConfig":
        errors.append(
            invalid(
                f"{path}.connectionInfo.type",
                ctype,
                "not supported by this server (it does not run inside a cluster); "
                "use KubeConfigFile",
            )
        )
    elif ctype == "KubeConfigFile":
        if not kubeconfig:
            errors.append(required(kpath))
        elif not os.path.isabs(kubeconfig):
            errors.append(invalid(kpath, kubeconfig, "must be an absolute path"))
        elif not os.path.exists(kubeconfig):
            errors.append(
                invalid(
                    kpath,
                    kubeconfig,
                    f"error loading file: stat {kubeconfig}: no such file or directory",
                )
            )
        elif not os.path.isfile(kubeconfig):
            errors.append(invalid(kpath, kubeconfig, "must be a regular file"))
    else:
        errors.append(
            not_supported(
                f"{path}.connectionInfo.type", ctype, ["InClusterConfig", "KubeConfigFile"]
            )
        )
    programs: list[Program] = []
    if len(conditions_raw) > MAX_MATCH_CONDITIONS:
        errors.append(
            FieldError(
                "FieldValueTooMany",
                f"{path}.matchConditions",
                len(conditions_raw),
                f"must have at most {MAX_MATCH_CONDITIONS} items",
            )
        )
        conditions_raw = []
    seen: set[str] = set()
    for index, item in enumerate(conditions_raw):
        cpath = f"{wpath}.matchConditions[{index}]"
        condition = decoder.mapping(item, cpath, _CONDITION_FIELDS)
        expression = decoder.string(condition, "expression", cpath)
        epath = f"{path}.matchConditions[{index}].expression"
        if not expression.strip():
            errors.append(required(epath))
            continue
        if expression in seen:
            errors.append(duplicate(epath, expression))
            continue
        seen.add(expression)
        try:
            programs.append(compile_condition(expression))
        except CELCompileError as error:
            errors.append(invalid(epath, expression, f"compilation failed: {error}"))
    return WebhookSpec(
        kubeconfig=kubeconfig,
        timeout=timeout,
        authorized_ttl=authorized,
        unauthorized_ttl=unauthorized,
        version=version,
        failure_policy=policy or NO_OPINION,
        match_conditions=tuple(programs),
    )


def parse_authorization_config(data: str) -> list[AuthorizerSpec]:
    """Decode and validate an ``AuthorizationConfiguration``; ValueError lists every problem."""
    try:
        doc = yamlguard.load(data)
    except yaml.YAMLError as error:
        raise ValueError(f"failed to load AuthorizationConfiguration: {error}") from None
    decoder = _Decoder()
    top = decoder.mapping(doc, "", _TOP_FIELDS)
    api_version = top.get("apiVersion")
    kind = top.get("kind")
    if not kind:
        raise ValueError(f"Object 'Kind' is missing in '{str(data).strip()[:200]}'")
    if not api_version:
        raise ValueError(f"Object 'apiVersion' is missing in '{str(data).strip()[:200]}'")
    group, _, version = str(api_version).rpartition("/")
    if group != CONFIG_GROUP or version not in CONFIG_VERSIONS or kind != CONFIG_KIND:
        raise ValueError(
            f'no kind "{kind}" is registered for version "{api_version}" in scheme '
            '"pkg/runtime/scheme.go:100"'
        )
    errors: list[FieldError] = []
    specs: list[AuthorizerSpec] = []
    raw_authorizers = decoder.sequence(top, "authorizers", "")
    if not raw_authorizers:
        errors.append(required("authorizers", "at least one authorization mode must be defined"))
    seen_types: set[str] = set()
    seen_names: set[str] = set()
    for index, item in enumerate(raw_authorizers):
        path = f"authorizers[{index}]"
        raw = decoder.mapping(item, path, _AUTHORIZER_FIELDS)
        atype = decoder.string(raw, "type", path)
        name = decoder.string(raw, "name", path)
        if not atype:
            errors.append(required(f"{path}.type"))
            continue
        if atype not in MODES:
            errors.append(not_supported(f"{path}.type", atype, sorted(MODES)))
            continue
        if atype in seen_types and atype != "Webhook":
            errors.append(duplicate(f"{path}.type", atype))
            continue
        seen_types.add(atype)
        if not name:
            errors.append(required(f"{path}.name"))
        elif name in seen_names:
            errors.append(duplicate(f"{path}.name", name))
        else:
            problems = is_dns1123_subdomain(name)
            if problems:
                errors.append(
                    invalid(
                        f"{path}.name", name, "authorizer name is invalid: " + ", ".join(problems)
                    )
                )
        seen_names.add(name)
        webhook = None
        if atype == "Webhook":
            raw_webhook = raw.get("webhook")
            if raw_webhook is None:
                errors.append(required(f"{path}.webhook", "required when type=Webhook"))
                continue
            webhook_map = decoder.mapping(raw_webhook, f"{path}.webhook", _WEBHOOK_FIELDS)
            webhook = _validate_webhook(webhook_map, path, decoder, errors)
        elif raw.get("webhook") is not None:
            errors.append(
                invalid(f"{path}.webhook", "non-null", "may only be specified when type=Webhook")
            )
        specs.append(AuthorizerSpec(atype, name, webhook))
    if decoder.errors:
        raise ValueError(aggregate_messages(decoder.errors))
    if errors:
        raise ValueError(aggregate_messages([str(e) for e in errors]))
    naming = [
        f"expected name {spec.type.lower()} for authorizer {spec.type} instead of {spec.name}"
        for spec in specs
        if spec.type != "Webhook" and spec.name != spec.type.lower()
    ]
    if naming:
        raise ValueError(aggregate_messages(naming))
    return specs


def load_authorization_config(path: str) -> list[AuthorizerSpec]:
    """Read and validate ``--authorization-config``; ValueError names the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = handle.read()
    except OSError as error:
        raise ValueError(
            f"--authorization-config: cannot read {path}: {error.strerror or error}"
        ) from None
    try:
        return parse_authorization_config(data)
    except ValueError as error:
        raise ValueError(f"--authorization-config {path}: {error}") from None


# --- building ----------------------------------------------------------------------------------


def _build_one(
    spec: AuthorizerSpec, config: ServerConfig, reactor: Any, transport: TransportFactory
) -> Authorizer:
    if spec.type == "AlwaysAllow":
        return AlwaysAllow()
    if spec.type == "AlwaysDeny":
        return AlwaysDeny()
    if spec.type == "RBAC":
        return RBACAuthorizer()
    if spec.type == "Node":
        return NodeAuthorizer()
    if spec.type == "ABAC":
        path = config.authorization_policy_file
        if not path:
            raise ValueError("authorization mode ABAC needs --authorization-policy-file")
        return load_policy_file(path)
    assert spec.webhook is not None
    webhook = spec.webhook
    matcher = all_match(list(webhook.match_conditions)) if webhook.match_conditions else None
    return WebhookAuthorizer(
        transport(webhook.kubeconfig, reactor),
        reactor,
        version=webhook.version,
        authorized_ttl=webhook.authorized_ttl,
        unauthorized_ttl=webhook.unauthorized_ttl,
        timeout=webhook.timeout,
        decision_on_error=webhook.failure_policy,
        matcher=matcher,
        name=spec.name,
    )


def build_chain(
    specs: Sequence[AuthorizerSpec],
    config: ServerConfig,
    reactor: Any,
    transport: TransportFactory = default_transport,
) -> Authorizer | None:
    """The union with the ``system:masters`` authorizer first; None when it always allows.

    A chain whose first configured authorizer is AlwaysAllow allows every request whatever
    comes after it, so no authorizer is needed at all (the filter's fast path).
    """
    if specs and specs[0].type == "AlwaysAllow":
        return None
    authorizers: list[Authorizer] = [PrivilegedGroups()]
    authorizers.extend(_build_one(spec, config, reactor, transport) for spec in specs)
    return Union(authorizers)


def build_authorizer(
    config: ServerConfig, reactor: Any, transport: TransportFactory = default_transport
) -> Authorizer | None:
    """The chain the command line asks for (see the module docstring)."""
    path = config.authorization_config
    specs = load_authorization_config(path) if path else specs_from_flags(config)
    return build_chain(specs, config, reactor, transport)


class ConfigReloader:
    """Re-reads ``--authorization-config`` every ``interval`` seconds and applies changes.

    ``apply`` receives the new chain (None for an always-allow one). Reading or validation
    errors are logged; the chain in force stays.
    """

    def __init__(
        self,
        path: str,
        config: ServerConfig,
        reactor: Any,
        apply: Callable[[Authorizer | None], None],
        transport: TransportFactory = default_transport,
        interval: float = 60.0,
    ) -> None:
        self.path = path
        self.config = config
        self.reactor = reactor
        self.apply = apply
        self.transport = transport
        self.interval = interval
        self.digest = self._digest()
        self._loop: LoopingCall | None = None

    def _digest(self) -> bytes | None:
        try:
            with open(self.path, "rb") as handle:
                return hashlib.sha256(handle.read()).digest()
        except OSError:
            return None

    def start(self) -> None:
        loop = LoopingCall(self.check)
        loop.clock = self.reactor
        loop.start(self.interval, now=False)
        self._loop = loop

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def check(self) -> None:
        """Reload when the file's content changed."""
        digest = self._digest()
        if digest is None or digest == self.digest:
            return
        try:
            specs = load_authorization_config(self.path)
            chain = build_chain(specs, self.config, self.reactor, self.transport)
        except ValueError as error:
            log.error("error reloading authorization configuration: {error}", error=error)
            return
        self.digest = digest
        self.apply(chain)
        log.info("reloaded authorization configuration from {path}", path=self.path)
