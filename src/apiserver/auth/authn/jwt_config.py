"""``--authentication-config`` (``AuthenticationConfiguration``) and the legacy ``--oidc-*``
flags, turned into :class:`~apiserver.auth.authn.oidc.JWTConfig` values.

References: ``AS/pkg/apis/apiserver/{v1,v1beta1,v1alpha1}/types.go`` (the file),
``AS/pkg/apis/apiserver/validation/validation.go`` (its validation, messages as field errors
such as ``jwt[0].issuer.url: Invalid value: "http://x": URL scheme must be https``), and
``KK/pkg/kubeapiserver/options/authentication.go`` (``ToAuthenticationConfig``: the flags as a
single JWT authenticator; the username prefix defaults to ``<issuer-url>#`` unless the claim is
``email``, and ``-`` means no prefix).

Decoding is strict, as kube-apiserver's: an unknown field stops start-up. CEL expressions are
compiled with :mod:`apiserver.auth.authn.cel`; one outside the supported subset stops start-up
with a message naming the file, the field and the expression.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import attrs
import yaml

from apiserver.apimachinery.errors import (
    TOO_MANY,
    FieldError,
    aggregate_text,
    duplicate,
    invalid,
    required,
)
from apiserver.auth.authn.cel import CELSyntaxError, Program, compile_expression
from apiserver.auth.authn.common import ConfigError, read_file
from apiserver.auth.authn.oidc import ALL_SIGNING_ALGS, ClaimMapping, JWTConfig, ValidationRule
from apiserver.auth.kubeconfig import load_pem_certificates
from apiserver.gocompat import yamlguard
from apiserver.gocompat.quote import go_quote

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

GROUP = "apiserver.config.k8s.io"
VERSIONS = ("v1", "v1beta1", "v1alpha1")
KIND = "AuthenticationConfiguration"

# The fields each object may hold (strict decoding).
_FIELDS: dict[str, frozenset[str]] = {
    "root": frozenset({"apiVersion", "kind", "jwt", "anonymous"}),
    "jwt": frozenset({"issuer", "claimValidationRules", "claimMappings", "userValidationRules"}),
    "issuer": frozenset(
        {
            "url",
            "discoveryURL",
            "certificateAuthority",
            "audiences",
            "audienceMatchPolicy",
            "egressSelectorType",
        }
    ),
    "claimValidationRule": frozenset({"claim", "requiredValue", "expression", "message"}),
    "claimMappings": frozenset({"username", "groups", "uid", "extra"}),
    "prefixed": frozenset({"claim", "prefix", "expression"}),
    "uid": frozenset({"claim", "expression"}),
    "extra": frozenset({"key", "valueExpression"}),
    "userValidationRule": frozenset({"expression", "message"}),
    "anonymous": frozenset({"enabled", "conditions"}),
    "condition": frozenset({"path"}),
}


@attrs.frozen
class AnonymousConfig:
    """``anonymous``: enabled, and the only paths it applies to (empty: every path)."""

    enabled: bool
    paths: tuple[str, ...] = ()


@attrs.frozen
class AuthenticationConfig:
    jwt: tuple[JWTConfig, ...] = ()
    anonymous: AnonymousConfig | None = None


class _Decoder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.errors: list[FieldError] = []

    def unknown(self, obj: Mapping[str, Any], kind: str, where: str) -> None:
        for key in obj:
            if key not in _FIELDS[kind]:
                shown = f"{where}.{key}" if where else key
                raise ConfigError(
                    f"--authentication-config {go_quote(self.path)}: strict decoding error: "
                    f"unknown field {go_quote(shown)}"
                )

    def obj(self, value: Any, kind: str, where: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ConfigError(
                f"--authentication-config {go_quote(self.path)}: {where or 'the file'} must be "
                "an object"
            )
        self.unknown(value, kind, where)
        return value

    def lst(self, value: Any, where: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ConfigError(
                f"--authentication-config {go_quote(self.path)}: {where} must be a list"
            )
        return value

    def string(self, value: Any, where: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise ConfigError(
                f"--authentication-config {go_quote(self.path)}: {where} must be a string"
            )
        return value


def _compile(errors: list[FieldError], source: str, field: str, variable: str) -> Program | None:
    try:
        return compile_expression(source, [variable])
    except CELSyntaxError as error:
        errors.append(
            invalid(
                field,
                source,
                f"compilation failed: {error} (this server supports a subset of CEL: field "
                "selection, has(), comparisons, &&, ||, !, ?:, +, in, size(), string methods "
                "and the map/filter/all/exists macros)",
            )
        )
        return None


def _validate_url(
    errors: list[FieldError], url: str, field: str, disallowed: Sequence[str]
) -> None:
    if url in disallowed:
        errors.append(
            invalid(
                field,
                url,
                "URL must not overlap with disallowed issuers: ["
                + " ".join(sorted(disallowed))
                + "]",
            )
        )
    parts = urlsplit(url)
    if parts.scheme != "https":
        errors.append(invalid(field, url, "URL scheme must be https"))
    if parts.username is not None or parts.password is not None:
        errors.append(invalid(field, url, "URL must not contain a username or password"))
    if parts.query:
        errors.append(invalid(field, url, "URL must not contain a query"))
    if parts.fragment:
        errors.append(invalid(field, url, "URL must not contain a fragment"))


def _is_domain_prefixed_path(key: str) -> str | None:
    """IsDomainPrefixedPath: ``<dns subdomain>/<path>``; the problem, or None."""
    if not key:
        return "required"
    if "/" not in key:
        return 'must be a domain-prefixed path (such as "acme.io/foo")'
    domain, path = key.split("/", 1)
    if not domain or not path:
        return 'must be a domain-prefixed path (such as "acme.io/foo")'
    if len(domain) > 253 or not re.fullmatch(
        r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", domain
    ):
        return 'must be a domain-prefixed path (such as "acme.io/foo")'
    return None


def _is_kubernetes_key(key: str) -> bool:
    domain = key.split("/", 1)[0] if "/" in key else ""
    return domain in ("kubernetes.io", "k8s.io") or domain.endswith((".kubernetes.io", ".k8s.io"))


def _jwt(
    d: _Decoder, raw: Any, root: str, disallowed: Sequence[str], errors: list[FieldError]
) -> JWTConfig | None:
    entry = d.obj(raw, "jwt", root)
    issuer = d.obj(entry.get("issuer"), "issuer", f"{root}.issuer")
    url = d.string(issuer.get("url"), f"{root}.issuer.url")
    discovery = d.string(issuer.get("discoveryURL"), f"{root}.issuer.discoveryURL")
    if not url:
        errors.append(required(f"{root}.issuer.url"))
    else:
        _validate_url(errors, url, f"{root}.issuer.url", disallowed)
    if discovery:
        if url and url.rstrip("/") == discovery.rstrip("/"):
            errors.append(
                invalid(
                    f"{root}.issuer.discoveryURL",
                    discovery,
                    "discoveryURL must be different from URL",
                )
            )
        _validate_url(errors, discovery, f"{root}.issuer.discoveryURL", ())
    audiences = [
        d.string(a, f"{root}.issuer.audiences")
        for a in d.lst(issuer.get("audiences"), f"{root}.issuer.audiences")
    ]
    policy = d.string(issuer.get("audienceMatchPolicy"), f"{root}.issuer.audienceMatchPolicy")
    if not audiences:
        errors.append(
            required(
                f"{root}.issuer.audiences", f"at least one {root}.issuer.audiences is required"
            )
        )
    seen: set[str] = set()
    for i, audience in enumerate(audiences):
        if not audience:
            errors.append(required(f"{root}.issuer.audiences[{i}]"))
        if audience in seen:
            errors.append(duplicate(f"{root}.issuer.audiences[{i}]", audience))
        seen.add(audience)
    if len(audiences) > 1 and policy != "MatchAny":
        errors.append(
            invalid(
                f"{root}.issuer.audienceMatchPolicy",
                policy,
                "audienceMatchPolicy must be MatchAny for multiple audiences",
            )
        )
    if len(audiences) == 1 and policy and policy != "MatchAny":
        errors.append(
            invalid(
                f"{root}.issuer.audienceMatchPolicy",
                policy,
                "audienceMatchPolicy must be empty or MatchAny for single audience",
            )
        )
    ca_text = d.string(issuer.get("certificateAuthority"), f"{root}.issuer.certificateAuthority")
    ca_pem: bytes | None = None
    if ca_text:
        try:
            load_pem_certificates(ca_text.encode(), "certificateAuthority")
            ca_pem = ca_text.encode()
        except ValueError as error:
            errors.append(invalid(f"{root}.issuer.certificateAuthority", "<omitted>", str(error)))
    if issuer.get("egressSelectorType"):
        errors.append(
            invalid(
                f"{root}.issuer.egressSelectorType",
                issuer.get("egressSelectorType"),
                "egress selector is not supported when "
                "StructuredAuthenticationConfigurationEgressSelector feature gate is disabled",
            )
        )

    uses_email = False
    uses_email_verified = False

    # claimValidationRules
    required_claims: list[tuple[str, str]] = []
    claim_rules: list[ValidationRule] = []
    seen_claims: set[str] = set()
    seen_expressions: set[str] = set()
    for i, raw_rule in enumerate(
        d.lst(entry.get("claimValidationRules"), f"{root}.claimValidationRules")
    ):
        field = f"{root}.claimValidationRules[{i}]"
        rule = d.obj(raw_rule, "claimValidationRule", field)
        claim = d.string(rule.get("claim"), f"{field}.claim")
        expression = d.string(rule.get("expression"), f"{field}.expression")
        message = d.string(rule.get("message"), f"{field}.message")
        value = d.string(rule.get("requiredValue"), f"{field}.requiredValue")
        if claim and expression:
            errors.append(invalid(field, claim, "claim and expression can't both be set"))
        elif not claim and not expression:
            errors.append(required(field, "claim or expression is required"))
        elif claim:
            if message:
                errors.append(
                    invalid(f"{field}.message", message, "may not be specified when claim is set")
                )
            if claim in seen_claims:
                errors.append(duplicate(f"{field}.claim", claim))
            seen_claims.add(claim)
            required_claims.append((claim, value))
        else:
            if value:
                errors.append(
                    invalid(
                        f"{field}.requiredValue",
                        value,
                        "may not be specified when expression is set",
                    )
                )
            if expression in seen_expressions:
                errors.append(duplicate(f"{field}.expression", expression))
                continue
            seen_expressions.add(expression)
            program = _compile(errors, expression, f"{field}.expression", "claims")
            if program is not None:
                uses_email_verified = uses_email_verified or program.uses(
                    "claims", "email_verified"
                )
                claim_rules.append(ValidationRule(program, message))

    # claimMappings
    mappings = d.obj(entry.get("claimMappings"), "claimMappings", f"{root}.claimMappings")

    def prefixed(name: str, needed: bool) -> ClaimMapping:
        field = f"{root}.claimMappings.{name}"
        raw = d.obj(mappings.get(name), "prefixed", field)
        claim = d.string(raw.get("claim"), f"{field}.claim")
        expression = d.string(raw.get("expression"), f"{field}.expression")
        prefix_value = raw.get("prefix")
        prefix = None if prefix_value is None else d.string(prefix_value, f"{field}.prefix")
        if claim and expression:
            errors.append(invalid(field, "", "claim and expression can't both be set"))
        elif not claim and not expression:
            if needed:
                errors.append(required(field, "claim or expression is required"))
        elif expression:
            if prefix is not None:
                errors.append(
                    invalid(
                        f"{field}.prefix", prefix, "may not be specified when expression is set"
                    )
                )
            program = _compile(errors, expression, f"{field}.expression", "claims")
            return ClaimMapping(expression=program)
        elif prefix is None:
            errors.append(
                required(
                    f"{field}.prefix",
                    "prefix is required when claim is set. It can be set to an empty string to "
                    "disable prefixing",
                )
            )
        return ClaimMapping(claim=claim, prefix=prefix)

    username = prefixed("username", True)
    if username.expression is not None:
        uses_email = username.expression.uses("claims", "email")
        uses_email_verified = uses_email_verified or username.expression.uses(
            "claims", "email_verified"
        )
    groups = prefixed("groups", False)
    uid_raw = d.obj(mappings.get("uid"), "uid", f"{root}.claimMappings.uid")
    uid_claim = d.string(uid_raw.get("claim"), f"{root}.claimMappings.uid.claim")
    uid_expression = d.string(uid_raw.get("expression"), f"{root}.claimMappings.uid.expression")
    uid = ClaimMapping()
    if uid_claim and uid_expression:
        errors.append(
            invalid(f"{root}.claimMappings.uid", "", "claim and expression can't both be set")
        )
    elif uid_expression:
        uid = ClaimMapping(
            expression=_compile(
                errors, uid_expression, f"{root}.claimMappings.uid.expression", "claims"
            )
        )
    elif uid_claim:
        uid = ClaimMapping(claim=uid_claim)
    extra: list[tuple[str, Program]] = []
    seen_keys: set[str] = set()
    for i, raw_extra in enumerate(d.lst(mappings.get("extra"), f"{root}.claimMappings.extra")):
        field = f"{root}.claimMappings.extra[{i}]"
        item = d.obj(raw_extra, "extra", field)
        key = d.string(item.get("key"), f"{field}.key")
        value_expression = d.string(item.get("valueExpression"), f"{field}.valueExpression")
        problem = _is_domain_prefixed_path(key)
        if problem == "required":
            errors.append(required(f"{field}.key"))
        elif problem is not None:
            errors.append(invalid(f"{field}.key", key, problem))
        if key != key.lower():
            errors.append(invalid(f"{field}.key", key, "must be lowercase"))
        if _is_kubernetes_key(key):
            errors.append(
                invalid(
                    f"{field}.key",
                    key,
                    "k8s.io, kubernetes.io and their subdomains are reserved for Kubernetes use",
                )
            )
        if key in seen_keys:
            errors.append(duplicate(f"{field}.key", key))
            continue
        seen_keys.add(key)
        if not value_expression:
            errors.append(required(f"{field}.valueExpression"))
            continue
        program = _compile(errors, value_expression, f"{field}.valueExpression", "claims")
        if program is not None:
            uses_email_verified = uses_email_verified or program.uses("claims", "email_verified")
            extra.append((key, program))
    if uses_email and not uses_email_verified:
        errors.append(
            invalid(
                f"{root}.claimMappings.username.expression",
                username.expression.source if username.expression else "",
                "claims.email_verified must be used in claimMappings.username.expression or "
                "claimMappings.extra[*].valueExpression or claimValidationRules[*].expression "
                "when claims.email is used in claimMappings.username.expression",
            )
        )

    # userValidationRules
    user_rules: list[ValidationRule] = []
    seen_expressions = set()
    for i, raw_rule in enumerate(
        d.lst(entry.get("userValidationRules"), f"{root}.userValidationRules")
    ):
        field = f"{root}.userValidationRules[{i}]"
        rule = d.obj(raw_rule, "userValidationRule", field)
        expression = d.string(rule.get("expression"), f"{field}.expression")
        message = d.string(rule.get("message"), f"{field}.message")
        if not expression:
            errors.append(required(f"{field}.expression"))
            continue
        if expression in seen_expressions:
            errors.append(duplicate(f"{field}.expression", expression))
            continue
        seen_expressions.add(expression)
        program = _compile(errors, expression, f"{field}.expression", "user")
        if program is not None:
            user_rules.append(ValidationRule(program, message))

    return JWTConfig(
        issuer_url=url,
        audiences=tuple(audiences),
        discovery_url=discovery,
        ca_pem=ca_pem,
        username=username,
        groups=groups,
        uid=uid,
        extra=tuple(extra),
        required_claims=tuple(required_claims),
        claim_rules=tuple(claim_rules),
        user_rules=tuple(user_rules),
        signing_algs=ALL_SIGNING_ALGS,
    )


def parse_authentication_config(
    data: bytes, path: str, disallowed_issuers: Sequence[str] = ()
) -> AuthenticationConfig:
    """Decode and validate the file's contents; ConfigError naming ``path`` otherwise."""
    if not data.strip():
        raise ConfigError(f"--authentication-config: empty config file {go_quote(path)}")
    try:
        doc = yamlguard.load(data)
    except yaml.YAMLError as error:
        raise ConfigError(f"--authentication-config {go_quote(path)}: {error}") from None
    d = _Decoder(path)
    root = d.obj(doc, "root", "")
    api_version = root.get("apiVersion")
    kind = root.get("kind")
    if api_version not in tuple(f"{GROUP}/{v}" for v in VERSIONS) or kind != KIND:
        raise ConfigError(
            f"--authentication-config {go_quote(path)}: no kind {go_quote(str(kind or ''))} is "
            f"registered for version {go_quote(str(api_version or ''))}; expected kind "
            f"{KIND} in {', '.join(f'{GROUP}/{v}' for v in VERSIONS)}"
        )
    errors: list[FieldError] = []
    jwts = d.lst(root.get("jwt"), "jwt")
    configs: list[JWTConfig] = []
    if len(jwts) > 64:
        errors.append(FieldError(TOO_MANY, "jwt", len(jwts), "must have at most 64 items"))
    else:
        seen_issuers: set[str] = set()
        seen_discovery: set[str] = set()
        for i, raw in enumerate(jwts):
            config = _jwt(d, raw, f"jwt[{i}]", disallowed_issuers, errors)
            if config is None:
                continue
            if config.issuer_url in seen_issuers:
                errors.append(duplicate(f"jwt[{i}].issuer.url", config.issuer_url))
            seen_issuers.add(config.issuer_url)
            if config.discovery_url:
                if config.discovery_url in seen_discovery:
                    errors.append(duplicate(f"jwt[{i}].issuer.discoveryURL", config.discovery_url))
                seen_discovery.add(config.discovery_url)
            configs.append(config)
    anonymous: AnonymousConfig | None = None
    if "anonymous" in root and root["anonymous"] is not None:
        raw_anon = d.obj(root["anonymous"], "anonymous", "anonymous")
        enabled = raw_anon.get("enabled", False)
        if not isinstance(enabled, bool):
            raise ConfigError(
                f"--authentication-config {go_quote(path)}: anonymous.enabled must be a boolean"
            )
        paths: list[str] = []
        for i, raw_condition in enumerate(
            d.lst(raw_anon.get("conditions"), "anonymous.conditions")
        ):
            condition = d.obj(raw_condition, "condition", f"anonymous.conditions[{i}]")
            cond_path = d.string(condition.get("path"), f"anonymous.conditions[{i}].path")
            if not cond_path:
                errors.append(required(f"anonymous.conditions[{i}].path"))
            paths.append(cond_path)
        if not enabled and paths:
            errors.append(
                invalid(
                    "anonymous.conditions",
                    [{"path": p} for p in paths],
                    "enabled should be set to true when conditions are defined",
                )
            )
        anonymous = AnonymousConfig(enabled, tuple(paths))
    if errors:
        raise ConfigError(
            f"--authentication-config {go_quote(path)}: invalid authentication config: "
            + aggregate_text(errors)
        )
    return AuthenticationConfig(tuple(configs), anonymous)


def load_authentication_config(
    path: str, disallowed_issuers: Sequence[str] = ()
) -> AuthenticationConfig:
    return parse_authentication_config(
        read_file(path, "authentication-config"), path, disallowed_issuers
    )


OIDC_FLAGS = (
    "oidc-issuer-url",
    "oidc-client-id",
    "oidc-ca-file",
    "oidc-username-claim",
    "oidc-username-prefix",
    "oidc-groups-claim",
    "oidc-groups-prefix",
    "oidc-required-claim",
    "oidc-signing-algs",
)


def oidc_flags_set(config: ServerConfig) -> bool:
    """Whether any ``--oidc-*`` flag was given (``areFlagsConfigured``)."""
    return any(config.is_set(name) for name in OIDC_FLAGS)


def jwt_from_flags(config: ServerConfig) -> JWTConfig | None:
    """The ``--oidc-*`` flags as one JWT authenticator (``ToAuthenticationConfig``)."""
    issuer = config.oidc_issuer_url
    client_id = config.oidc_client_id
    if oidc_flags_set(config) and not (issuer and client_id):
        raise ConfigError(
            "oidc-issuer-url and oidc-client-id must be specified together when any oidc-* "
            "flags are set"
        )
    if not issuer:
        return None
    username_claim = config.oidc_username_claim or "sub"
    prefix = config.oidc_username_prefix
    if prefix == "" and username_claim != "email":
        prefix = issuer + "#"
    if prefix == "-":
        prefix = ""
    groups = ClaimMapping()
    if config.oidc_groups_claim:
        groups = ClaimMapping(claim=config.oidc_groups_claim, prefix=config.oidc_groups_prefix)
    ca_pem: bytes | None = None
    if config.oidc_ca_file:
        ca_pem = read_file(config.oidc_ca_file, "oidc-ca-file")
        try:
            load_pem_certificates(ca_pem, config.oidc_ca_file)
        except ValueError as error:
            raise ConfigError(f"--oidc-ca-file: {error}") from None
    algs = tuple(config.oidc_signing_algs) or ("RS256",)
    for alg in algs:
        if alg not in ALL_SIGNING_ALGS:
            raise ConfigError(f"oidc: unsupported signing alg: {go_quote(alg)}")
    required_claims = tuple(sorted(dict(config.oidc_required_claim or {}).items()))
    return JWTConfig(
        issuer_url=issuer,
        audiences=(client_id,),
        ca_pem=ca_pem,
        username=ClaimMapping(claim=username_claim, prefix=prefix),
        groups=groups,
        required_claims=required_claims,
        signing_algs=algs,
    )
