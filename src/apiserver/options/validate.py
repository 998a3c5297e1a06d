"""Semantic checks of the parsed flags: ranges, allowed names, and flags that exclude each other.

The rules and, where the reference gives them, the wording follow kube-apiserver's option
validation (apiserver ``pkg/server/options``, kube-apiserver ``cmd/kube-apiserver/app/options``,
component-base ``cli/flag``, ``metrics``, ``logs``) so that operators recognise the messages.
Every message names the flag it is about; where kube-apiserver's text does not, the flag is put
in front (``--tls-min-version: unknown tls version "x"``). All problems are returned, not just the
first.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
from collections.abc import Mapping, Set
from typing import Any
from urllib.parse import urlsplit

from apiserver.gocompat.boolparse import parse_bool
from apiserver.gocompat.duration import format_go_duration
from apiserver.options.flagtypes import FlagValueError, format_go_float, parse_named_cert_key
from apiserver.options.table import NODE_ADDRESS_TYPES
from apiserver.version import DEFAULT_GIT_VERSION, parse_semver

# -- reference lists -------------------------------------------------------------------------

AUTHORIZATION_MODES = ("AlwaysAllow", "AlwaysDeny", "ABAC", "Webhook", "RBAC", "Node")
OIDC_SIGNING_ALGS = (
    "RS256",
    "RS384",
    "RS512",
    "ES256",
    "ES384",
    "ES512",
    "PS256",
    "PS384",
    "PS512",
)
TLS_VERSIONS = ("VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13")

# Go crypto/tls names (tls.CipherSuites() and tls.InsecureCipherSuites()), plus the two
# pre-RFC-8446 names component-base keeps as aliases. TLS 1.3 suites are accepted as names, as
# kube-apiserver accepts them, but TLS 1.3 suites are not configurable so they change nothing.
SECURE_CIPHER_SUITES = (
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
)
INSECURE_CIPHER_SUITES = (
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
)
AUDIT_MODES = ("batch", "blocking", "blocking-strict")
AUDIT_FORMATS = ("legacy", "json")
AUDIT_VERSIONS = ("audit.k8s.io/v1",)
WEBHOOK_VERSIONS = ("v1", "v1beta1")
ENDPOINT_RECONCILERS = ("master-count", "lease", "none")
STORAGE_BACKENDS = ("etcd3",)
STORAGE_MEDIA_TYPES = (
    "application/json",
    "application/vnd.kubernetes.protobuf",
    "application/yaml",
)
LOGGING_FORMATS = ("text",)
STORE_URL_SCHEMES = ("http", "https", "unix", "unixs")

# kube-apiserver 1.35's admission plugins (AllOrderedPlugins).
ADMISSION_PLUGINS = (
    "AlwaysAdmit",
    "AlwaysDeny",
    "AlwaysPullImages",
    "CertificateApproval",
    "CertificateSigning",
    "CertificateSubjectRestriction",
    "ClusterTrustBundleAttest",
    "DefaultIngressClass",
    "DefaultStorageClass",
    "DefaultTolerationSeconds",
    "DenyServiceExternalIPs",
    "EventRateLimit",
    "ExtendedResourceToleration",
    "ImagePolicyWebhook",
    "LimitPodHardAntiAffinityTopology",
    "LimitRanger",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionWebhook",
    "NamespaceAutoProvision",
    "NamespaceExists",
    "NamespaceLifecycle",
    "NodeRestriction",
    "OwnerReferencesPermissionEnforcement",
    "PersistentVolumeClaimResize",
    "PodNodeSelector",
    "PodSecurity",
    "PodTolerationRestriction",
    "PodTopologyLabels",
    "Priority",
    "ResourceQuota",
    "RuntimeClass",
    "ServiceAccount",
    "StorageObjectInUseProtection",
    "TaintNodesByCondition",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
)

# Defaults (Kubernetes 1.35) of the gates some flags depend on. Gates not listed here are
# accepted as given; the server only knows the ones it consults.
FEATURE_GATE_DEFAULTS: Mapping[str, bool] = {
    "ExternalServiceAccountTokenSigner": True,
    "LoggingAlphaOptions": False,
    "LoggingBetaOptions": True,
    "RemoteRequestHeaderUID": True,
    "StructuredAuthenticationConfiguration": True,
    "StructuredAuthorizationConfiguration": True,
    "TokenRequestServiceAccountUIDValidation": True,
    "UnknownVersionInteroperabilityProxy": False,
}

# Service-account token lifetimes (``pkg/serviceaccount/claims.go``): what the kubelet asks for
# a projected token, and how long such a token lives with --service-account-extend-token-expiration.
WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS = 60 * 60 + 7
EXPIRATION_EXTENSION_SECONDS = 24 * 365 * 60 * 60

# Emulation may go back this many minors from the binary version (KEP-4330).
EMULATION_MINOR_SKEW = 3


def feature_enabled(gates: Mapping[str, bool], name: str) -> bool:
    """Whether gate ``name`` is on, given ``--feature-gates`` (with or without ``kube:``)."""
    for key in (name, f"kube:{name}"):
        if key in gates:
            return bool(gates[key])
    return FEATURE_GATE_DEFAULTS.get(name, False)


_FEATURE_NAME = re.compile(r"(?:[A-Za-z0-9-]+:)?[A-Za-z][A-Za-z0-9]*")
_RUNTIME_CONFIG_KEY = re.compile(
    r"api/(?:all|ga|beta|alpha|legacy)|v1|api/v1|"
    r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?/v[0-9]+(?:(?:alpha|beta)[0-9]+)?(?:/[a-z0-9.-]+)?"
)
_WATCH_CACHE_RESOURCE = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?")
_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")
_EMULATION_COMPONENTS = ("kube",)


class _Checker:
    def __init__(self, values: Mapping[str, Any], explicit: Set[str]) -> None:
        self.v = values
        self.explicit = explicit
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self.gates: Mapping[str, bool] = values["feature-gates"]
        reported = values["version"]
        git_version = reported if str(reported).startswith("v") else DEFAULT_GIT_VERSION
        self.binary = (parse_semver(git_version) or (1, 35, 0))[:2]

    def err(self, message: str) -> None:
        self.errors.append(message)

    # -- generic helpers -------------------------------------------------------------------------

    def not_negative(self, name: str, message: str | None = None) -> None:
        value = self.v[name]
        if value < 0:
            self.err(message or f"--{name} can not be a negative value")

    def one_of(self, name: str, allowed: tuple[str, ...], what: str | None = None) -> None:
        value = self.v[name]
        if value not in allowed:
            self.err(
                f"--{name}: invalid {what or 'value'} {value!r}, allowed values are "
                + ", ".join(allowed)
            )

    def together(self, first: str, second: str) -> None:
        if bool(self.v[first]) != bool(self.v[second]):
            self.err(f"--{first} and --{second} must be specified together")

    def needs_gate(self, name: str, gate: str) -> None:
        if self.v[name] and not feature_enabled(self.gates, gate):
            self.err(f"--{name} requires the {gate} feature gate to be turned on")

    # -- the rules ------------------------------------------------------------------------------

    def run(self) -> None:
        for rule in (
            self.serving,
            self.tls,
            self.server_run,
            self.node_ports,
            self.service_cidrs,
            self.authentication,
            self.service_accounts,
            self.oidc,
            self.authorization,
            self.audit,
            self.storage,
            self.admission,
            self.metrics,
            self.logs,
            self.api_enablement,
            self.feature_gates,
            self.emulation,
            self.misc,
        ):
            rule()

    def serving(self) -> None:
        port = self.v["secure-port"]
        if not 1 <= port <= 65535:
            self.err(
                f"--secure-port {port} must be between 1 and 65535, inclusive. "
                "It cannot be turned off with 0"
            )
        self.not_negative("http2-max-streams-per-connection")
        self.together("tls-cert-file", "tls-private-key-file")
        for value in self.v["tls-sni-cert-key"]:
            try:
                parse_named_cert_key(value)
            except FlagValueError as exc:
                self.err(f"--tls-sni-cert-key: invalid value {value!r}: {exc}")

    def tls(self) -> None:
        version = self.v["tls-min-version"]
        if version and version not in TLS_VERSIONS:
            self.err(
                f"--tls-min-version: unknown tls version {version!r}, allowed values are "
                + ", ".join(TLS_VERSIONS)
            )
        suites = self.v["tls-cipher-suites"]
        for suite in suites:
            if suite in INSECURE_CIPHER_SUITES:
                self.warnings.append(f"Use of insecure cipher '{suite}' detected.")
            elif suite not in SECURE_CIPHER_SUITES:
                self.err(
                    f"--tls-cipher-suites: Cipher suite {suite} not supported or doesn't exist"
                )
        if suites and version == "VersionTLS13":
            self.err(
                "--tls-cipher-suites may not be specified when --tls-min-version is 'VersionTLS13'"
            )

    def server_run(self) -> None:
        chance = self.v["goaway-chance"]
        if math.isnan(chance) or not 0 <= chance <= 0.02:
            self.err("--goaway-chance can not be less than 0 or greater than 0.02")
        self.not_negative("livez-grace-period")
        self.not_negative("request-timeout", "--request-timeout can not be negative value")
        self.not_negative(
            "max-requests-inflight", "--max-requests-inflight can not be negative value"
        )
        self.not_negative(
            "max-mutating-requests-inflight",
            "--max-mutating-requests-inflight can not be negative value",
        )
        # k8s.io/apiserver/pkg/server/options/feature.go (ApplyTo): priority and fairness
        # shares the sum of the two limits among its levels.
        read_only, mutating = (
            self.v["max-requests-inflight"],
            self.v["max-mutating-requests-inflight"],
        )
        if self.v["enable-priority-and-fairness"] and read_only + mutating <= 0:
            self.err(
                "--max-requests-inflight and --max-mutating-requests-inflight (with "
                "--enable-priority-and-fairness): "
                f"invalid configuration: MaxRequestsInFlight={read_only} and "
                f"MaxMutatingRequestsInFlight={mutating}; they must add up to something positive"
            )
        if self.v["min-request-timeout"] <= 0:
            self.err(
                f"--min-request-timeout must be a positive number of seconds, got "
                f"{self.v['min-request-timeout']}"
            )
        self.not_negative(
            "shutdown-delay-duration", "--shutdown-delay-duration can not be negative value"
        )
        self.not_negative(
            "shutdown-watch-termination-grace-period",
            "--shutdown-watch-termination-grace-period, if provided, can not be a negative value",
        )
        for name in (
            "storage-initialization-timeout",
            "store-healthcheck-timeout",
            "store-readycheck-timeout",
            "nodeagent-timeout",
            "event-ttl",
            "max-connection-bytes-per-sec",
            "default-not-ready-toleration-seconds",
            "default-unreachable-toleration-seconds",
            "authentication-token-webhook-cache-ttl",
            "authorization-webhook-cache-authorized-ttl",
            "authorization-webhook-cache-unauthorized-ttl",
            "log-flush-frequency",
        ):
            self.not_negative(name)
        self._hsts()
        self._cors()

    def _hsts(self) -> None:
        for directive in self.v["strict-transport-security-directives"]:
            if not directive.strip():
                self.err("--strict-transport-security-directives: empty value is not allowed")
            elif directive in ("includeSubDomains", "preload"):
                continue
            elif not re.fullmatch(r"max-age=[0-9]+", directive):
                self.err(
                    f"--strict-transport-security-directives invalid value {directive!r}, "
                    "allowed values: max-age=expireTime, includeSubDomains, preload"
                )

    def _cors(self) -> None:
        for origin in self.v["cors-allowed-origins"]:
            if origin == "*":
                self.err(
                    "--cors-allowed-origins: the wildcard '*' is not allowed, use a regular "
                    "expression pinned to the host, e.g. //example\\.com$"
                )
                continue
            try:
                re.compile(origin)
            except re.error as exc:
                self.err(f"--cors-allowed-origins: invalid regular expression {origin!r}: {exc}")
                continue
            if not ("^" in origin or "//" in origin) or not ("$" in origin or ":" in origin):
                self.err(
                    f"--cors-allowed-origins: {origin!r}: regular expression does not pin to "
                    "start/end of host in the origin header"
                )

    def node_ports(self) -> None:
        low, high = self.v["service-node-port-range"]
        if (low, high) == (0, 0) or low < 1:
            self.err(
                f"--service-node-port-range {low}-{high} is not a valid range of ports; "
                "use N1-N2 with 1 <= N1 <= N2 <= 65535"
            )
        port = self.v["platform-service-node-port"]
        if not 0 <= port <= 65535:
            self.err(
                f"--platform-service-node-port {port} must be between 0 and 65535, inclusive. "
                "If 0, the kubernetes service is of type ClusterIP"
            )
        elif port > 0 and not low <= port <= high:
            self.err(
                f"--platform-service-node-port {port} is not in --service-node-port-range "
                f"{low}-{high}"
            )

    def service_cidrs(self) -> None:
        cidrs = self.v["service-cluster-ip-range"]
        if len(cidrs) > 2:
            self.err("--service-cluster-ip-range must not contain more than two entries")
        elif len(cidrs) == 2 and cidrs[0].version == cidrs[1].version:
            self.err(
                "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of "
                "different IP family"
            )

    def authentication(self) -> None:
        for name in ("authentication-token-webhook-version",):
            value = self.v[name]
            if value not in WEBHOOK_VERSIONS:
                self.err(f"--{name}: invalid version {value!r}, valid values are v1 and v1beta1")
        self.needs_gate("authentication-config", "StructuredAuthenticationConfiguration")
        self.needs_gate("requestheader-uid-headers", "RemoteRequestHeaderUID")

    def service_accounts(self) -> None:
        endpoint = self.v["service-account-signing-endpoint"]
        key_files = self.v["service-account-key-file"]
        signing_key = self.v["service-account-signing-key-file"]
        if endpoint and (key_files or signing_key):
            self.err(
                "--service-account-signing-endpoint can not be combined with "
                "--service-account-key-file or --service-account-signing-key-file "
                "(they are mutually exclusive)"
            )
        self.needs_gate("service-account-signing-endpoint", "ExternalServiceAccountTokenSigner")
        if signing_key and not key_files and not self.v["tls-private-key-file"]:
            self.err(
                "--service-account-key-file is required when --service-account-signing-key-file "
                "is given (it defaults to --tls-private-key-file, which is not set either)"
            )
        seen: set[str] = set()
        for issuer in self.v["service-account-issuer"]:
            if not issuer:
                self.err("--service-account-issuer: empty issuer is not allowed")
            elif issuer in seen:
                self.err(f"--service-account-issuer {issuer!r} is already specified")
            elif ":" in issuer:
                parts = urlsplit(issuer)
                if not parts.scheme or not (parts.netloc or parts.path):
                    self.err(
                        f"--service-account-issuer {issuer!r} contained a ':' but was not a "
                        "valid URL"
                    )
            seen.add(issuer)
        self._token_expiration()
        jwks = self.v["service-account-jwks-uri"]
        if jwks:
            parts = urlsplit(jwks)
            if parts.scheme != "https" or not parts.netloc:
                self.err(f"--service-account-jwks-uri {jwks!r} must be an https URL")
            if not self.v["service-account-issuer"]:
                self.err("--service-account-jwks-uri requires --service-account-issuer")

    def _token_expiration(self) -> None:
        """``completeServiceAccountOptions``: the range of the maximum (an error), then, with
        the extension on, the two warnings kube-apiserver logs when the maximum would stop the
        3607 s transition tokens from being extended, or is shorter than the extended year."""
        expiration = self.v["service-account-max-token-expiration"]
        if expiration == 0:
            return
        if not 3600 <= expiration <= 2**32:
            self.err(
                "--service-account-max-token-expiration: the service-account-max-token-expiration "
                "must be between 1 hour and 2^32 seconds"
            )
            return
        if not self.v["service-account-extend-token-expiration"]:
            return
        shown = format_go_duration(expiration)
        if expiration < WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS:
            self.warnings.append(
                "service-account-extend-token-expiration is true, in order to correctly trigger "
                "safe transition logic, service-account-max-token-expiration must be set longer "
                f"than {WARN_ONLY_BOUND_TOKEN_EXPIRATION_SECONDS} seconds (currently {shown})"
            )
        if expiration < EXPIRATION_EXTENSION_SECONDS:
            self.warnings.append(
                "service-account-extend-token-expiration is true, enabling tokens valid up to "
                f"{EXPIRATION_EXTENSION_SECONDS} seconds, which is longer than "
                f"service-account-max-token-expiration set to {shown}"
            )

    def oidc(self) -> None:
        issuer, client_id = self.v["oidc-issuer-url"], self.v["oidc-client-id"]
        if bool(issuer) != bool(client_id):
            self.err("--oidc-issuer-url and --oidc-client-id should be specified together")
        if issuer:
            parts = urlsplit(issuer)
            if parts.scheme != "https" or not parts.netloc:
                self.err(f"--oidc-issuer-url {issuer!r} must be a URL with the https scheme")
            elif parts.fragment or "#" in issuer:
                self.err(f"--oidc-issuer-url {issuer!r} must not contain a fragment")
        for alg in self.v["oidc-signing-algs"]:
            if alg not in OIDC_SIGNING_ALGS:
                self.err(
                    f"--oidc-signing-algs: unsupported signing alg {alg!r}, allowed values are "
                    + ", ".join(OIDC_SIGNING_ALGS)
                )
        for claim in self.v["oidc-required-claim"]:
            if not claim:
                self.err("--oidc-required-claim: the claim name must not be empty")
        if issuer and not self.v["oidc-username-claim"]:
            self.err("--oidc-username-claim must not be empty when --oidc-issuer-url is set")

    def authorization(self) -> None:
        modes = self.v["authorization-mode"]
        webhook_flags = sorted(
            name for name in self.explicit if name.startswith("authorization-webhook-")
        )
        if self.v["authorization-config"]:
            if "authorization-mode" in self.explicit or webhook_flags:
                self.err(
                    "--authorization-config can not be used together with --authorization-mode "
                    "or the --authorization-webhook-* flags"
                )
            self.needs_gate("authorization-config", "StructuredAuthorizationConfiguration")
        for mode in modes:
            if mode not in AUTHORIZATION_MODES:
                self.err(
                    f"--authorization-mode {mode!r} is not a valid mode, allowed values are "
                    + ", ".join(AUTHORIZATION_MODES)
                )
        duplicates = sorted({m for m in modes if modes.count(m) > 1})
        if duplicates:
            self.err(
                f"--authorization-mode {','.join(modes)} has mode specified more than once: "
                + ", ".join(duplicates)
            )
        if not self.v["authorization-config"]:
            if "ABAC" in modes and not self.v["authorization-policy-file"]:
                self.err("--authorization-mode ABAC needs --authorization-policy-file")
            if "Webhook" in modes and not self.v["authorization-webhook-config-file"]:
                self.err("--authorization-mode Webhook needs --authorization-webhook-config-file")
            if self.v["authorization-policy-file"] and "ABAC" not in modes:
                self.err("cannot specify --authorization-policy-file without mode ABAC")
            if self.v["authorization-webhook-config-file"] and "Webhook" not in modes:
                self.err("cannot specify --authorization-webhook-config-file without mode Webhook")
        version = self.v["authorization-webhook-version"]
        if version not in WEBHOOK_VERSIONS:
            self.err(
                f"--authorization-webhook-version: invalid version {version!r}, valid values "
                "are v1 and v1beta1"
            )

    def audit(self) -> None:
        log_on = bool(self.v["audit-log-path"])
        webhook_on = bool(self.v["audit-webhook-config-file"])
        fmt = self.v["audit-log-format"]
        if fmt not in AUDIT_FORMATS:
            self.err(
                f"--audit-log-format: invalid audit log format {fmt!r}, allowed formats are "
                + ", ".join(AUDIT_FORMATS)
            )
        for backend, enabled in (("log", log_on), ("webhook", webhook_on)):
            prefix = f"audit-{backend}"
            mode = self.v[f"{prefix}-mode"]
            if mode not in AUDIT_MODES:
                self.err(
                    f"--{prefix}-mode: invalid audit {backend} mode {mode!r}, allowed modes are "
                    + ", ".join(AUDIT_MODES)
                )
            version = self.v[f"{prefix}-version"]
            if version not in AUDIT_VERSIONS:
                self.err(
                    f"--{prefix}-version: invalid audit {backend} version {version!r}, allowed "
                    "versions are " + ", ".join(AUDIT_VERSIONS)
                )
            self.not_negative(f"{prefix}-batch-max-wait")
            if enabled and mode == "batch":
                for option in ("buffer-size", "max-size"):
                    name = f"{prefix}-batch-{option}"
                    if self.v[name] <= 0:
                        self.err(f"--{name} {self.v[name]} must be a positive number")
                if self.v[f"{prefix}-batch-throttle-enable"]:
                    for option in ("qps", "burst"):
                        name = f"{prefix}-batch-throttle-{option}"
                        if self.v[name] <= 0:
                            shown = _number(self.v[name])
                            self.err(
                                f"--{name} {shown} must be a positive number when "
                                f"--{prefix}-batch-throttle-enable is set"
                            )
            if enabled and self.v[f"{prefix}-truncate-enabled"]:
                batch = self.v[f"{prefix}-truncate-max-batch-size"]
                event = self.v[f"{prefix}-truncate-max-event-size"]
                if batch <= 0:
                    self.err(
                        f"--{prefix}-truncate-max-batch-size {batch} must be a positive number"
                    )
                if event <= 0:
                    self.err(
                        f"--{prefix}-truncate-max-event-size {event} must be a positive number"
                    )
                elif event > batch > 0:
                    self.err(
                        f"--{prefix}-truncate-max-event-size {event} must not be greater than "
                        f"--{prefix}-truncate-max-batch-size {batch}"
                    )
        self.not_negative("audit-webhook-initial-backoff")
        for name in ("audit-log-maxage", "audit-log-maxbackup", "audit-log-maxsize"):
            if self.v[name] < 0:
                self.err(f"--{name} {self.v[name]} can't be a negative number")

    def storage(self) -> None:
        backend = self.v["storage-backend"]
        if backend and backend not in STORAGE_BACKENDS:
            self.err(
                f"--storage-backend invalid, allowed values: {', '.join(STORAGE_BACKENDS)}. If "
                "not specified, the embedded store is used, or etcd3 when --store-servers is set"
            )
        if backend == "etcd3" and not self.v["store-servers"]:
            self.err("--store-servers must be specified when --storage-backend is etcd3")
        media = self.v["storage-media-type"]
        if media not in STORAGE_MEDIA_TYPES:
            self.err(
                f"--storage-media-type {media!r} invalid, allowed values: "
                + ", ".join(STORAGE_MEDIA_TYPES)
            )
        for server in self.v["store-servers"]:
            problem = _store_url_problem(server)
            if problem:
                self.err(f"--store-servers: invalid server URL {server!r}: {problem}")
        override_format = (
            "--store-servers-overrides invalid, must be of format: group/resource#servers, "
            "where servers are URLs, semicolon separated"
        )
        for override in self.v["store-servers-overrides"]:
            tokens = override.split("#")
            if len(tokens) != 2 or len(tokens[0].split("/")) != 2 or not tokens[1]:
                self.err(f"{override_format}; got {override!r}")
                continue
            for server in tokens[1].split(";"):
                problem = _store_url_problem(server)
                if problem:
                    self.err(f"--store-servers-overrides: invalid server URL {server!r}: {problem}")
        self.together("store-certfile", "store-keyfile")
        if (
            self.v["encryption-provider-config-automatic-reload"]
            and not self.v["encryption-provider-config"]
        ):
            self.err(
                "--encryption-provider-config-automatic-reload must be set with "
                "--encryption-provider-config"
            )
        for entry in self.v["watch-cache-sizes"]:
            tokens = entry.split("#")
            if len(tokens) != 2 or not _WATCH_CACHE_RESOURCE.fullmatch(tokens[0]):
                self.err(
                    f"--watch-cache-sizes: invalid value of watch cache size: {entry} (want "
                    "resource[.group]#size)"
                )
                continue
            size = int(tokens[1]) if re.fullmatch(r"[+-]?[0-9]+", tokens[1]) else None
            if size is None:
                self.err(f"--watch-cache-sizes: invalid size of watch cache size: {entry}")
            elif size < 0:
                self.err(f"--watch-cache-sizes: watch cache size cannot be negative: {entry}")
        self.not_negative("delete-collection-workers")
        if self.v["lease-reuse-duration-seconds"] < 1:
            self.err("--lease-reuse-duration-seconds must be at least 1")
        for name in (
            "store-compaction-interval",
            "store-count-metric-poll-period",
            "store-db-metric-poll-interval",
        ):
            self.not_negative(name)

    def admission(self) -> None:
        enable, disable = self.v["enable-admission-plugins"], self.v["disable-admission-plugins"]
        legacy = self.v["admission-control"]
        if "admission-control" in self.explicit and (
            "enable-admission-plugins" in self.explicit
            or "disable-admission-plugins" in self.explicit
        ):
            self.err(
                "--admission-control and --enable-admission-plugins/--disable-admission-plugins "
                "flags are mutually exclusive"
            )
        for name, plugins in (
            ("admission-control", legacy),
            ("enable-admission-plugins", enable),
            ("disable-admission-plugins", disable),
        ):
            for plugin in plugins:
                if plugin not in ADMISSION_PLUGINS:
                    self.err(f"--{name} plugin {plugin!r} is unknown")
        overlap = sorted(set(enable) & set(disable))
        if overlap:
            self.err(
                f"[{','.join(overlap)}] in --enable-admission-plugins and "
                "--disable-admission-plugins overlapped"
            )

    def metrics(self) -> None:
        wanted = self.v["show-hidden-metrics-for-version"]
        major, minor = self.binary
        valid = f"{major}.{minor - 1}"
        if wanted and wanted != valid:
            self.err(
                f"--show-hidden-metrics-for-version must be omitted or have the value '{valid}'. "
                "Only the previous minor version is allowed"
            )

    def logs(self) -> None:
        fmt = self.v["logging-format"]
        if fmt not in LOGGING_FORMATS:
            self.err(f'--logging-format: unsupported log format {fmt!r}, only "text" is supported')
        alpha = feature_enabled(self.gates, "LoggingAlphaOptions")
        if self.v["log-text-split-stream"] and not alpha:
            self.err("--log-text-split-stream requires the LoggingAlphaOptions feature gate")
        if self.v["log-text-info-buffer-size"] and not alpha:
            self.err("--log-text-info-buffer-size requires the LoggingAlphaOptions feature gate")
        self.not_negative("log-text-info-buffer-size")
        if self.v["vmodule"] and fmt != "text":
            self.err("--vmodule is only supported with --logging-format=text")

    def api_enablement(self) -> None:
        for key, value in self.v["runtime-config"].items():
            if not _RUNTIME_CONFIG_KEY.fullmatch(key):
                self.err(
                    f"--runtime-config: invalid key {key!r}, want api/all, api/ga, api/beta, "
                    "api/alpha, <group>/<version> or <group>/<version>/<resource>"
                )
            if value != "":
                try:
                    parse_bool(value)
                except FlagValueError:
                    self.err(f"--runtime-config: invalid value {key}={value}, want true or false")

    def feature_gates(self) -> None:
        for name in self.gates:
            if not _FEATURE_NAME.fullmatch(name):
                self.err(f"--feature-gates: invalid feature gate name {name!r}")

    def emulation(self) -> None:
        major, minor = self.binary
        emulated = self._component_versions("emulated-version")
        compat = self._component_versions("min-compatibility-version")
        floor = (major, max(minor - EMULATION_MINOR_SKEW, 0))
        emu = emulated.get("kube", (major, minor))
        if "kube" in emulated and not floor <= emu <= (major, minor):
            self.err(
                f"--emulated-version: emulation version {emu[0]}.{emu[1]} is not between "
                f"[{floor[0]}.{floor[1]}, {major}.{minor}]"
            )
        if "kube" in compat:
            low = compat["kube"]
            if not floor <= low <= emu:
                self.err(
                    f"--min-compatibility-version: version {low[0]}.{low[1]} must be between "
                    f"[{floor[0]}.{floor[1]}, {emu[0]}.{emu[1]}] (the emulated version)"
                )
        for name in ("emulation-forward-compatible", "runtime-config-emulation-forward-compatible"):
            if self.v[name] and emu >= (major, minor):
                self.err(
                    f"--{name} can only be true when --emulated-version is lower than the "
                    f"binary version {major}.{minor}"
                )

    def _component_versions(self, name: str) -> dict[str, tuple[int, int]]:
        result: dict[str, tuple[int, int]] = {}
        for entry in self.v[name]:
            component, eq, version = entry.partition("=")
            if not eq:
                component, version = "kube", entry
            component = component.strip()
            if component not in _EMULATION_COMPONENTS:
                self.err(f"--{name}: unknown component {component!r} in {entry!r}")
                continue
            match = _MAJOR_MINOR.fullmatch(version.strip())
            if match is None:
                self.err(f"--{name}: invalid version {version!r}, want major.minor like 1.34")
                continue
            result[component] = (int(match.group(1)), int(match.group(2)))
        return result

    def misc(self) -> None:
        if parse_workers(self.v["workers"]) is None:
            self.err(
                f"--workers: invalid value {self.v['workers']!r}: "
                f"must be auto or an integer from 1 to {MAX_WORKERS}"
            )
        reconciler = self.v["endpoint-reconciler-type"]
        if reconciler not in ENDPOINT_RECONCILERS:
            self.err(
                f"--endpoint-reconciler-type: invalid value {reconciler!r}, allowed values are "
                + ", ".join(ENDPOINT_RECONCILERS)
            )
        elif reconciler == "master-count":
            self.warnings.append(
                "--endpoint-reconciler-type=master-count is deprecated; use lease instead"
            )
        types = self.v["nodeagent-preferred-address-types"]
        if not types:
            self.err("--nodeagent-preferred-address-types must not be empty")
        for kind in types:
            if kind not in NODE_ADDRESS_TYPES:
                self.err(
                    f"--nodeagent-preferred-address-types: unknown address type {kind!r}, "
                    "allowed values are " + ", ".join(NODE_ADDRESS_TYPES)
                )
        self.together("nodeagent-client-certificate", "nodeagent-client-key")
        self.together("proxy-client-cert-file", "proxy-client-key-file")
        for name in ("peer-ca-file", "peer-advertise-ip", "peer-advertise-port"):
            self.needs_gate(name, "UnknownVersionInteroperabilityProxy")
        peer_ip = self.v["peer-advertise-ip"]
        if peer_ip:
            try:
                ipaddress.ip_address(peer_ip)
            except ValueError:
                self.err(f"--peer-advertise-ip {peer_ip!r} is not a valid IP address")
        peer_port = self.v["peer-advertise-port"]
        if peer_port and not (peer_port.isdigit() and 1 <= int(peer_port) <= 65535):
            self.err(f"--peer-advertise-port {peer_port!r} is not a valid port number")
        lease = self.v["coordinated-leadership-lease-duration"]
        renew = self.v["coordinated-leadership-renew-deadline"]
        retry = self.v["coordinated-leadership-retry-period"]
        for name, value in (
            ("coordinated-leadership-lease-duration", lease),
            ("coordinated-leadership-renew-deadline", renew),
            ("coordinated-leadership-retry-period", retry),
        ):
            if value <= 0:
                self.err(f"--{name} must be greater than zero")
        if lease > 0 and renew > 0 and lease <= renew:
            self.err(
                "--coordinated-leadership-lease-duration must be greater than "
                "--coordinated-leadership-renew-deadline"
            )
        if renew > 0 and retry > 0 and renew <= retry:
            self.err(
                "--coordinated-leadership-renew-deadline must be greater than "
                "--coordinated-leadership-retry-period"
            )


#: Most worker processes ``--workers`` accepts (a typo such as 1000 is refused, not forked).
MAX_WORKERS = 256


def parse_workers(value: str, cpu_count: int | None = None) -> int | None:
    """``--workers``: ``auto`` is one per core (``os.cpu_count()``, at least 1), otherwise an
    integer from 1 to :data:`MAX_WORKERS`; None when the value is neither."""
    text = str(value).strip()
    if text == "auto":
        return max(1, cpu_count if cpu_count is not None else (os.cpu_count() or 1))
    if not text.isdigit():
        return None
    count = int(text)
    return count if 1 <= count <= MAX_WORKERS else None


def _number(value: float) -> str:
    return format_go_float(value) if isinstance(value, float) else str(value)


def _store_url_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme not in STORE_URL_SCHEMES:
        return "the scheme must be http, https or unix"
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            return "a host is required"
        try:
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            return "the port is not a number between 0 and 65535"
    elif not (parts.netloc or parts.path):
        return "a socket path is required"
    return None


def validate(values: Mapping[str, Any], explicit: Set[str]) -> tuple[list[str], list[str]]:
    """Check parsed values; return ``(errors, warnings)``. ``explicit`` are the flags given."""
    checker = _Checker(values, explicit)
    checker.run()
    return checker.errors, checker.warnings
