"""The one table of every command-line flag the server accepts.

Everything else in this package (parsing, validation, ``--help``, the man page, the start-up
warnings about flags that have no effect yet) is derived from ``FLAGS``. The flag names are the
seed's (``--store-servers``, ``--nodeagent-timeout``); kube-apiserver's own spellings
(``--etcd-servers``, ``--kubelet-timeout``, ``--kubernetes-service-node-port``) are aliases, so a
kube-apiserver command line works unchanged.

Defaults are stored already parsed: durations as float seconds, lists as tuples, maps as dicts,
port ranges as ``(low, high)``, quantities as ints.

``implemented`` says whether the server acts on a flag yet. A flag that is accepted but not acted
on is never silent: ``ineffective_flags`` names the ones a user set, the server logs them at
start-up, and the man page says so. Flip ``implemented=True`` in the row when a feature lands.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs

from apiserver.options.flagtypes import TYPES, FlagType, TypeName

# Sections of --help and of the man page, in kube-apiserver's order.
GROUPS: tuple[str, ...] = (
    "Generic",
    "Etcd",
    "Secure serving",
    "Audit",
    "Features",
    "Authentication",
    "Authorization",
    "API enablement",
    "Egress selector",
    "Admission",
    "Metrics",
    "Logs",
    "Traces",
    "Misc",
    "Global",
)


@attrs.frozen
class Flag:
    """One command-line flag: its name, value type, default, place in --help, and status."""

    name: str  # canonical, without the leading dashes
    type: TypeName
    default: Any
    group: str
    help: str
    deprecated: str | None = None  # message shown when used; None if not deprecated
    aliases: tuple[str, ...] = ()  # other accepted long names (kube-apiserver's spellings)
    short: str | None = None  # one-letter shorthand (``-v``, ``-h``)
    implemented: bool = False  # whether the server acts on it yet

    @property
    def attr(self) -> str:
        """The ``ServerConfig`` attribute: dashes become underscores."""
        return self.name.replace("-", "_")

    @property
    def flag_type(self) -> FlagType:
        return TYPES[self.type]

    @property
    def repeatable(self) -> bool:
        return self.flag_type.repeatable


def _group(name: str) -> Callable[..., Flag]:
    def make(flag: str, type_: TypeName, default: Any, help_: str, **kw: Any) -> Flag:
        return Flag(name=flag, type=type_, default=default, group=name, help=help_, **kw)

    return make


_gen = _group("Generic")
_etcd = _group("Etcd")
_tls = _group("Secure serving")
_audit = _group("Audit")
_feat = _group("Features")
_authn = _group("Authentication")
_authz = _group("Authorization")
_misc = _group("Misc")

NODE_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")

FLAGS: tuple[Flag, ...] = (
    # ---- Generic --------------------------------------------------------------------------
    _gen(
        "advertise-address",
        "ip",
        "",
        "IP address advertised to the members of the cluster; it must be reachable by them. "
        "If blank, the --bind-address is used, or the host's default interface when that is "
        "unspecified.",
        implemented=True,
    ),
    _gen(
        "aggregator-reject-forwarding-redirect",
        "bool",
        True,
        "Reject redirect responses that aggregated API servers send back through this server, "
        "instead of forwarding them to the client.",
    ),
    _gen(
        "cors-allowed-origins",
        "strings",
        (),
        "Origins allowed for CORS, as regular expressions matched against the Origin header. "
        "Each must be anchored to the host (contain '^' or '//', and '$' or ':'). Empty "
        "disables CORS.",
        implemented=True,
    ),
    _gen(
        "default-not-ready-toleration-seconds",
        "int",
        300,
        "tolerationSeconds of the notReady:NoExecute toleration added to pods that have none.",
    ),
    _gen(
        "default-unreachable-toleration-seconds",
        "int",
        300,
        "tolerationSeconds of the unreachable:NoExecute toleration added to pods that have none.",
    ),
    _gen(
        "emulated-version",
        "strings",
        (),
        "Versions whose capabilities (APIs, features) the server emulates, as "
        "[component=]major.minor, e.g. kube=1.34. The emulated version must be between three "
        "minors below the binary version and the binary version. Defaults to the binary version.",
        implemented=True,
    ),
    _gen(
        "emulation-forward-compatible",
        "bool",
        False,
        "Also enable the newer versions of beta and later APIs that replace APIs enabled at the "
        "emulated version. Only allowed when the emulated version is lower than the binary "
        "version.",
    ),
    _gen(
        "external-hostname",
        "string",
        "",
        "Host name used in URLs this server generates about itself (e.g. in discovery documents).",
        implemented=True,
    ),
    _gen(
        "feature-gates",
        "boolmap",
        {},
        "Feature gates as a comma-separated list of [component:]Name=true|false pairs. "
        "Repeated flags are merged.",
        implemented=True,
    ),
    _gen(
        "goaway-chance",
        "float",
        0.0,
        "Fraction of HTTP/2 requests answered with GOAWAY so that clients reconnect and spread "
        "over the servers behind a load balancer. Between 0 (off) and 0.02; 0.001 is a good "
        "start. Useless for a single server or without a load balancer. The GOAWAY follows the "
        "response of the request that drew it; the connection closes once its open streams "
        "are done.",
        implemented=True,
    ),
    _gen(
        "livez-grace-period",
        "duration",
        0.0,
        "How long after start-up /livez reports success for post-start hooks that have not "
        "finished yet. Must not be negative.",
        implemented=True,
    ),
    _gen(
        "max-mutating-requests-inflight",
        "int",
        200,
        "Limit on mutating requests in flight. With priority and fairness it is added to "
        "--max-requests-inflight to give the total concurrency; otherwise 0 means no limit.",
        implemented=True,
    ),
    _gen(
        "max-requests-inflight",
        "int",
        400,
        "Limit on non-mutating requests in flight. With priority and fairness it is added to "
        "--max-mutating-requests-inflight to give the total concurrency; otherwise 0 means no "
        "limit.",
        implemented=True,
    ),
    _gen(
        "min-compatibility-version",
        "strings",
        (),
        "Lowest control-plane version the server stays compatible with, as "
        "[component=]major.minor. Defaults to one minor below the emulated version.",
        implemented=True,
    ),
    _gen(
        "min-request-timeout",
        "int",
        1800,
        "Minimum timeout in seconds for watch requests; each watch gets a random timeout between "
        "this value and twice it.",
        implemented=True,
    ),
    _gen(
        "request-timeout",
        "duration",
        60.0,
        "Default time a handler keeps a non-long-running request open before it times out.",
        implemented=True,
    ),
    _gen(
        "runtime-config-emulation-forward-compatible",
        "bool",
        False,
        "Install APIs enabled in --runtime-config even when they are newer than the emulated "
        "version (otherwise start-up fails). Only allowed when the emulated version is lower "
        "than the binary version.",
    ),
    _gen(
        "shutdown-delay-duration",
        "duration",
        0.0,
        "Time to keep serving after a termination signal: /readyz fails at once so that load "
        "balancers move traffic away, everything else is answered normally until the delay "
        "ends.",
        implemented=True,
    ),
    _gen(
        "shutdown-send-retry-after",
        "bool",
        False,
        "During graceful termination keep listening until in-flight requests drain, and answer "
        "new requests with 429, a Retry-After header and Connection: close.",
        implemented=True,
    ),
    _gen(
        "shutdown-watch-termination-grace-period",
        "duration",
        0.0,
        "Longest wait for active watches to end during graceful termination; 0 does not wait.",
        implemented=True,
    ),
    _gen(
        "storage-initialization-timeout",
        "duration",
        60.0,
        "Longest wait for the storage to initialize before the server reports ready anyway.",
        implemented=True,
    ),
    _gen(
        "strict-transport-security-directives",
        "strings",
        (),
        "HSTS directives for the Strict-Transport-Security header, e.g. "
        "max-age=31536000,includeSubDomains,preload. Only max-age=N, includeSubDomains and "
        "preload are allowed. Empty sends no header.",
        implemented=True,
    ),
    # ---- Etcd (the backing store) -----------------------------------------------------------
    _etcd(
        "data-dir",
        "string",
        "/var/lib/apiserver",
        "Directory of the embedded SQLite store, used when no --store-servers are given.",
        implemented=True,
    ),
    _etcd(
        "delete-collection-workers",
        "int",
        1,
        "Number of workers that delete the items of a collection in parallel.",
        implemented=True,
    ),
    _etcd(
        "enable-garbage-collector",
        "bool",
        True,
        "Enable the generic garbage collector. Must agree with the controller manager's flag of "
        "the same name.",
    ),
    _etcd(
        "encryption-provider-config",
        "string",
        "",
        "File with the encryption providers used for secrets in the store.",
        implemented=True,
    ),
    _etcd(
        "encryption-provider-config-automatic-reload",
        "bool",
        False,
        "Reload --encryption-provider-config when the file changes. KMS plugins are then no "
        "longer told apart in the health endpoints.",
        implemented=True,
    ),
    _etcd(
        "lease-reuse-duration-seconds",
        "int",
        60,
        "Seconds a store lease is reused for objects with a TTL before a new one is granted.",
        implemented=True,
    ),
    _etcd(
        "storage-backend",
        "string",
        "",
        "Storage backend: etcd3, or empty for the default (the embedded store, or etcd3 when "
        "--store-servers are given). The backend follows --store-servers; etcd3 here only "
        "makes them required.",
    ),
    _etcd(
        "storage-media-type",
        "string",
        "application/vnd.kubernetes.protobuf",
        "Media type objects are stored as: application/json, application/yaml or "
        "application/vnd.kubernetes.protobuf (the bytes kube-apiserver stores, so either can "
        "serve the other's etcd data). Stored data is read in any of the three whatever this "
        "flag says.",
        implemented=True,
    ),
    _etcd(
        "store-cafile",
        "string",
        "",
        "CA file that verifies the certificates of the store servers.",
        aliases=("etcd-cafile",),
        implemented=True,
    ),
    _etcd(
        "store-certfile",
        "string",
        "",
        "Client certificate presented to the store servers.",
        aliases=("etcd-certfile",),
        implemented=True,
    ),
    _etcd(
        "store-compaction-interval",
        "duration",
        300.0,
        "Interval between compaction requests to the store; 0 disables them.",
        aliases=("etcd-compaction-interval",),
        implemented=True,
    ),
    _etcd(
        "store-count-metric-poll-period",
        "duration",
        60.0,
        "How often the number of objects of each resource is counted; 0 disables it.",
        aliases=("etcd-count-metric-poll-period",),
        implemented=True,
    ),
    _etcd(
        "store-db-metric-poll-interval",
        "duration",
        30.0,
        "How often the store database size is polled for metrics; 0 disables it.",
        aliases=("etcd-db-metric-poll-interval",),
        implemented=True,
    ),
    _etcd(
        "store-healthcheck-timeout",
        "duration",
        2.0,
        "Timeout of the store health check.",
        aliases=("etcd-healthcheck-timeout",),
        implemented=True,
    ),
    _etcd(
        "store-keyfile",
        "string",
        "",
        "Private key of the client certificate presented to the store servers.",
        aliases=("etcd-keyfile",),
        implemented=True,
    ),
    _etcd(
        "store-prefix",
        "string",
        "/registry",
        "Prefix of every key the server writes to the store.",
        aliases=("etcd-prefix",),
        implemented=True,
    ),
    _etcd(
        "store-readycheck-timeout",
        "duration",
        2.0,
        "Timeout of the store readiness check.",
        aliases=("etcd-readycheck-timeout",),
        implemented=True,
    ),
    _etcd(
        "store-servers",
        "strings",
        (),
        "Store (etcd) servers as scheme://host:port URLs, comma separated. When given, etcd3 "
        "is used instead of the embedded store.",
        aliases=("etcd-servers",),
        implemented=True,
    ),
    _etcd(
        "store-servers-overrides",
        "strings",
        (),
        "Store servers for single resources, as group/resource#servers with the server URLs "
        "separated by semicolons, e.g. /events#http://127.0.0.1:4002.",
        aliases=("etcd-servers-overrides",),
        implemented=True,
    ),
    _etcd(
        "watch-cache",
        "bool",
        True,
        "Serve watches and resourceVersion=0 lists from a cache in memory.",
        implemented=True,
    ),
    _etcd(
        "watch-cache-sizes",
        "strings",
        (),
        "Watch cache size per resource, as resource[.group]#size. Only 0 has an effect: it "
        "turns the cache off for that resource.",
        implemented=True,
    ),
    # ---- Secure serving ---------------------------------------------------------------------
    _tls(
        "bind-address",
        "ip",
        "0.0.0.0",
        "Address to listen on for --secure-port. Blank, 0.0.0.0 or :: listen on all interfaces "
        "and address families.",
        implemented=True,
    ),
    _tls(
        "cert-dir",
        "string",
        "/var/run/kubernetes",
        "Directory for the generated self-signed certificate and key (apiserver.crt, "
        "apiserver.key). Ignored when --tls-cert-file and --tls-private-key-file are given.",
        implemented=True,
    ),
    _tls(
        "disable-http2-serving",
        "bool",
        False,
        "Serve HTTP/1.1 only (no h2 in ALPN).",
        implemented=True,
    ),
    _tls(
        "http2-max-streams-per-connection",
        "int",
        0,
        "Most concurrent HTTP/2 streams a client may open per connection; 0 uses the built-in "
        "default (100).",
        implemented=True,
    ),
    _tls(
        "permit-address-sharing",
        "bool",
        False,
        "Bind with SO_REUSEADDR, so that the address can be bound again while old connections "
        "are in TIME_WAIT. Twisted sets SO_REUSEADDR on every listening socket, so the "
        "address can always be reused, whatever this flag says.",
    ),
    _tls(
        "permit-port-sharing",
        "bool",
        False,
        "Bind with SO_REUSEPORT, so that several processes can listen on the same address and "
        "port.",
        implemented=True,
    ),
    _tls(
        "secure-port",
        "int",
        6443,
        "Port of the HTTPS endpoint with authentication and authorization. It cannot be switched "
        "off with 0.",
        implemented=True,
    ),
    _tls(
        "tls-cert-file",
        "string",
        "",
        "Default serving certificate (PEM), with any intermediate CA certificates after it. If "
        "neither this nor --tls-private-key-file is given, a self-signed pair is generated in "
        "--cert-dir.",
        implemented=True,
    ),
    _tls(
        "tls-cipher-suites",
        "strings",
        (),
        "Cipher suites for TLS 1.2 and lower, by their IANA (Go) names. Empty uses the library "
        "defaults. TLS 1.3 suites cannot be chosen.",
        implemented=True,
    ),
    _tls(
        "tls-min-version",
        "string",
        "",
        "Lowest TLS version accepted: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13. "
        "Empty means VersionTLS12.",
        implemented=True,
    ),
    _tls(
        "tls-private-key-file",
        "string",
        "",
        "Private key (PEM) of --tls-cert-file.",
        implemented=True,
    ),
    _tls(
        "tls-sni-cert-key",
        "stringarray",
        (),
        "A certificate and key pair chosen by SNI, as cert,key or cert,key:pattern,pattern "
        "(patterns are host names, optionally with a leading '*.' wildcard). Without patterns "
        "the names come from the certificate. Repeatable; for the same name the first flag "
        "wins.",
        implemented=True,
    ),
    # ---- Audit ------------------------------------------------------------------------------
    _audit(
        "audit-log-batch-buffer-size",
        "int",
        10000,
        "Events buffered before batching and writing (batch mode of the log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-batch-max-size",
        "int",
        1,
        "Most events in one batch (batch mode of the log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-batch-max-wait",
        "duration",
        0.0,
        "Longest wait before an unfilled batch is written (batch mode of the log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-batch-throttle-burst",
        "int",
        0,
        "Most batches written at once when none were written before (batch mode of the log "
        "backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-batch-throttle-enable",
        "bool",
        False,
        "Throttle the batches written (batch mode of the log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-batch-throttle-qps",
        "float",
        0.0,
        "Batches written per second on average (batch mode of the log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-compress",
        "bool",
        False,
        "Compress rotated audit log files with gzip.",
        implemented=True,
    ),
    _audit(
        "audit-log-format",
        "string",
        "json",
        "Format of the audit log: legacy (one line of text per event) or json.",
        implemented=True,
    ),
    _audit(
        "audit-log-maxage",
        "int",
        0,
        "Days to keep rotated audit log files, by the time stamp in their names; 0 keeps them.",
        implemented=True,
    ),
    _audit(
        "audit-log-maxbackup",
        "int",
        0,
        "Number of rotated audit log files to keep; 0 keeps all.",
        implemented=True,
    ),
    _audit(
        "audit-log-maxsize",
        "int",
        0,
        "Size in megabytes at which the audit log is rotated.",
        implemented=True,
    ),
    _audit(
        "audit-log-mode",
        "string",
        "blocking",
        "How events reach the log backend: batch (buffered, asynchronous), blocking (each "
        "request waits for its events) or blocking-strict (as blocking, and a failure to log "
        "the RequestReceived stage fails the request).",
        implemented=True,
    ),
    _audit(
        "audit-log-path",
        "string",
        "",
        "File the audit log is written to; '-' means standard output. When set, all requests "
        "reaching the server are logged.",
        implemented=True,
    ),
    _audit(
        "audit-log-truncate-enabled",
        "bool",
        False,
        "Truncate events and batches that are too large (log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-truncate-max-batch-size",
        "int",
        10485760,
        "Largest batch in bytes; larger batches are split (log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-truncate-max-event-size",
        "int",
        102400,
        "Largest event in bytes; larger events lose request and response objects first, and "
        "are dropped if still too large (log backend).",
        implemented=True,
    ),
    _audit(
        "audit-log-version",
        "string",
        "audit.k8s.io/v1",
        "API group and version used to serialize events to the log.",
        implemented=True,
    ),
    _audit(
        "audit-policy-file",
        "string",
        "",
        "Audit policy file. Without it nothing is audited.",
        implemented=True,
    ),
    _audit(
        "audit-webhook-batch-buffer-size",
        "int",
        10000,
        "Events buffered before batching and sending (batch mode of the webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-batch-max-size",
        "int",
        400,
        "Most events in one batch (batch mode of the webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-batch-max-wait",
        "duration",
        30.0,
        "Longest wait before an unfilled batch is sent (batch mode of the webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-batch-throttle-burst",
        "int",
        15,
        "Most batches sent at once when none were sent before (batch mode of the webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-batch-throttle-enable",
        "bool",
        True,
        "Throttle the batches sent (batch mode of the webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-batch-throttle-qps",
        "float",
        10.0,
        "Batches sent per second on average (batch mode of the webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-config-file",
        "string",
        "",
        "kubeconfig-format file describing the audit webhook.",
        implemented=True,
    ),
    _audit(
        "audit-webhook-initial-backoff",
        "duration",
        10.0,
        "Wait before retrying the first failed request to the audit webhook.",
        implemented=True,
    ),
    _audit(
        "audit-webhook-mode",
        "string",
        "batch",
        "How events reach the webhook backend: batch, blocking or blocking-strict (see "
        "--audit-log-mode).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-truncate-enabled",
        "bool",
        False,
        "Truncate events and batches that are too large (webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-truncate-max-batch-size",
        "int",
        10485760,
        "Largest batch in bytes; larger batches are split (webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-truncate-max-event-size",
        "int",
        102400,
        "Largest event in bytes; larger events lose request and response objects first, and "
        "are dropped if still too large (webhook backend).",
        implemented=True,
    ),
    _audit(
        "audit-webhook-version",
        "string",
        "audit.k8s.io/v1",
        "API group and version used to serialize events sent to the webhook.",
        implemented=True,
    ),
    # ---- Features ---------------------------------------------------------------------------
    _feat(
        "contention-profiling",
        "bool",
        False,
        "Enable block profiling as well, when profiling is on: /debug/pprof/block and "
        "/debug/pprof/mutex?seconds=N sample the stacks of waiting threads.",
        implemented=True,
    ),
    _feat(
        "debug-socket-path",
        "string",
        "",
        "Unix socket serving the profiling handlers and /debug/flags/v over plain HTTP, "
        "without authentication or authorization.",
        implemented=True,
    ),
    _feat(
        "enable-priority-and-fairness",
        "bool",
        True,
        "Queue requests by priority and fairness instead of the plain max-in-flight limits. "
        "The configuration is the stored flowcontrol.apiserver.k8s.io/v1 FlowSchemas and "
        "PriorityLevelConfigurations (kube-apiserver's bootstrap set is ensured at start); "
        "changing them reconfigures the server live.",
        implemented=True,
    ),
    _feat(
        "profiling",
        "bool",
        True,
        "Serve profiling at /debug/pprof/ on the secure port.",
        implemented=True,
    ),
    # ---- Authentication ---------------------------------------------------------------------
    _authn(
        "anonymous-auth",
        "bool",
        True,
        "Let requests that no authenticator rejects but none accepts through as the anonymous "
        "user system:anonymous in group system:unauthenticated.",
        implemented=True,
    ),
    _authn(
        "api-audiences",
        "strings",
        (),
        "Identifiers of the API; service account tokens must be bound to at least one of them. "
        "Defaults to the --service-account-issuer values when those are set.",
        implemented=True,
    ),
    _authn(
        "authentication-config",
        "string",
        "",
        "File configuring the JWT and anonymous authenticators (needs feature "
        "StructuredAuthenticationConfiguration). Cannot be combined with the --oidc-* flags if "
        "it configures JWT, nor with --anonymous-auth if it configures anonymous access.",
        implemented=True,
    ),
    _authn(
        "authentication-token-webhook-cache-ttl",
        "duration",
        120.0,
        "How long answers of the token authentication webhook are cached.",
        implemented=True,
    ),
    _authn(
        "authentication-token-webhook-config-file",
        "string",
        "",
        "kubeconfig-format file of a webhook asked to authenticate bearer tokens.",
        implemented=True,
    ),
    _authn(
        "authentication-token-webhook-version",
        "string",
        "v1beta1",
        "authentication.k8s.io TokenReview version sent to and expected from the webhook: v1 or "
        "v1beta1.",
        implemented=True,
    ),
    _authn(
        "client-ca-file",
        "string",
        "",
        "CA bundle; a client certificate signed by one of these authorities authenticates as "
        "the user named by its CommonName (groups from its Organizations).",
        implemented=True,
    ),
    _authn(
        "enable-bootstrap-token-auth",
        "bool",
        False,
        "Accept bootstrap tokens (secrets of type bootstrap.kubernetes.io/token in kube-system) "
        "for TLS bootstrapping.",
        implemented=True,
    ),
    _authn(
        "oidc-ca-file",
        "string",
        "",
        "CA bundle that verifies the OpenID issuer's certificate; the host's roots otherwise.",
        implemented=True,
    ),
    _authn(
        "oidc-client-id",
        "string",
        "",
        "Client ID (token audience) for the OpenID Connect authenticator. Required with "
        "--oidc-issuer-url.",
        implemented=True,
    ),
    _authn(
        "oidc-groups-claim",
        "string",
        "",
        "Claim holding the user's groups (a string or an array of strings).",
        implemented=True,
    ),
    _authn(
        "oidc-groups-prefix",
        "string",
        "",
        "Prefix added to every group taken from the groups claim.",
        implemented=True,
    ),
    _authn(
        "oidc-issuer-url",
        "string",
        "",
        "https URL of the OpenID issuer. When set, ID tokens it signed are accepted.",
        implemented=True,
    ),
    _authn(
        "oidc-required-claim",
        "map",
        {},
        "A claim that must be present in the ID token with the given value, as key=value. "
        "Repeatable.",
        implemented=True,
    ),
    _authn(
        "oidc-signing-algs",
        "strings",
        ("RS256",),
        "Signing algorithms accepted: RS256, RS384, RS512, ES256, ES384, ES512, PS256, PS384, "
        "PS512.",
        implemented=True,
    ),
    _authn(
        "oidc-username-claim",
        "string",
        "sub",
        "Claim used as the user name.",
        implemented=True,
    ),
    _authn(
        "oidc-username-prefix",
        "string",
        "",
        "Prefix added to user names. Unset, names from claims other than email get the issuer "
        "URL as prefix; '-' disables prefixing.",
        implemented=True,
    ),
    _authn(
        "requestheader-allowed-names",
        "strings",
        (),
        "Common names a front-proxy client certificate may have. Empty allows any certificate "
        "signed by --requestheader-client-ca-file.",
        implemented=True,
    ),
    _authn(
        "requestheader-client-ca-file",
        "string",
        "",
        "CA bundle that must have signed the client certificate of a front proxy before its "
        "identity headers are trusted.",
        implemented=True,
    ),
    _authn(
        "requestheader-extra-headers-prefix",
        "strings",
        (),
        "Header prefixes carrying extra user information (X-Remote-Extra- is usual).",
        implemented=True,
    ),
    _authn(
        "requestheader-group-headers",
        "strings",
        (),
        "Headers carrying the groups (X-Remote-Group is usual).",
        implemented=True,
    ),
    _authn(
        "requestheader-uid-headers",
        "strings",
        (),
        "Headers carrying the user's UID (X-Remote-Uid is usual). Needs feature "
        "RemoteRequestHeaderUID.",
        implemented=True,
    ),
    _authn(
        "requestheader-username-headers",
        "strings",
        (),
        "Headers carrying the user name (X-Remote-User is usual).",
        implemented=True,
    ),
    _authn(
        "service-account-extend-token-expiration",
        "bool",
        True,
        "Extend the tokens the kubelet requests for pods (expirationSeconds 3607, audiences "
        "among the API audiences) to one year, with a warnafter claim at the requested time, "
        "regardless of --service-account-max-token-expiration.",
        implemented=True,
    ),
    _authn(
        "service-account-issuer",
        "stringarray",
        (),
        "Issuer of service account tokens (the iss claim): a string or, better, an https URL. "
        "Repeatable: the first issues tokens, all are accepted.",
        implemented=True,
    ),
    _authn(
        "service-account-jwks-uri",
        "string",
        "",
        "https URL of the key set announced in the service account issuer's discovery document.",
        implemented=True,
    ),
    _authn(
        "service-account-key-file",
        "stringarray",
        (),
        "PEM file of RSA or ECDSA keys (private or public) that verify service account tokens. "
        "Repeatable. Defaults to --tls-private-key-file; required with "
        "--service-account-signing-key-file otherwise.",
        implemented=True,
    ),
    _authn(
        "service-account-lookup",
        "bool",
        True,
        "Check that the service account and token behind a token still exist in the store.",
        implemented=True,
    ),
    _authn(
        "service-account-max-token-expiration",
        "duration",
        0.0,
        "Longest validity of issued service account tokens; longer requests are shortened. 0 "
        "means no limit, otherwise between 1h and 2^32 seconds.",
        implemented=True,
    ),
    _authn(
        "service-account-signing-endpoint",
        "string",
        "",
        "Socket of an external JWT signer that signs service account tokens (needs feature "
        "ExternalServiceAccountTokenSigner). Cannot be combined with the key file flags.",
    ),
    _authn(
        "service-account-signing-key-file",
        "string",
        "",
        "Private key that signs service account tokens. With --service-account-issuer it "
        "turns on the TokenRequest API (serviceaccounts/token).",
        implemented=True,
    ),
    _authn(
        "token-auth-file",
        "string",
        "",
        'CSV file of static bearer tokens (token,user,uid[,"group1,group2"]).',
        implemented=True,
    ),
    # ---- Authorization ----------------------------------------------------------------------
    _authz(
        "authorization-config",
        "string",
        "",
        "File configuring the chain of authorizers (needs feature "
        "StructuredAuthorizationConfiguration). Cannot be combined with --authorization-mode or "
        "the --authorization-webhook-* flags.",
        implemented=True,
    ),
    _authz(
        "authorization-mode",
        "strings",
        (),
        "Ordered list of authorizers: AlwaysAllow, AlwaysDeny, ABAC, Webhook, RBAC, Node. "
        "AlwaysAllow when neither this nor --authorization-config is given. This server serves "
        "no RBAC objects: RBAC evaluates the bootstrap policy only (cluster-admin for "
        "system:masters, system:public-info-viewer, system:discovery, system:basic-user, "
        "system:monitoring).",
        implemented=True,
    ),
    _authz(
        "authorization-policy-file",
        "string",
        "",
        "ABAC policy file, one JSON object per line (mode ABAC).",
        implemented=True,
    ),
    _authz(
        "authorization-webhook-cache-authorized-ttl",
        "duration",
        300.0,
        "How long 'authorized' answers of the authorization webhook are cached.",
        implemented=True,
    ),
    _authz(
        "authorization-webhook-cache-unauthorized-ttl",
        "duration",
        30.0,
        "How long 'unauthorized' answers of the authorization webhook are cached.",
        implemented=True,
    ),
    _authz(
        "authorization-webhook-config-file",
        "string",
        "",
        "kubeconfig-format file of the authorization webhook (mode Webhook).",
        implemented=True,
    ),
    _authz(
        "authorization-webhook-version",
        "string",
        "v1beta1",
        "authorization.k8s.io SubjectAccessReview version sent to and expected from the "
        "webhook: v1 or v1beta1.",
        implemented=True,
    ),
    # ---- API enablement, egress, admission --------------------------------------------------
    Flag(
        "runtime-config",
        "configmap",
        {},
        "API enablement",
        "Turn built-in APIs on or off, as key=value pairs: group/version, "
        "group/version/resource, or api/all, api/ga, api/beta, api/alpha, with true or false "
        "(a bare key means true).",
        implemented=True,
    ),
    Flag(
        "egress-selector-config-file",
        "string",
        "",
        "Egress selector",
        "File configuring how this server reaches out to nodes, the cluster and the control plane.",
    ),
    Flag(
        "admission-control",
        "strings",
        (),
        "Admission",
        "Admission plugins to run, replacing the default set.",
        deprecated="use --enable-admission-plugins or --disable-admission-plugins instead; it "
        "will be removed in a future version",
        implemented=True,
    ),
    Flag(
        "admission-control-config-file",
        "string",
        "",
        "Admission",
        "File with the configuration of the admission plugins: an AdmissionConfiguration "
        "(apiserver.config.k8s.io/v1) whose plugins[] give each plugin's configuration inline "
        "or by path (relative to this file's directory). A bad file stops start-up.",
        implemented=True,
    ),
    Flag(
        "disable-admission-plugins",
        "strings",
        (),
        "Admission",
        "Admission plugins to turn off even though they are on by default.",
        implemented=True,
    ),
    Flag(
        "enable-admission-plugins",
        "strings",
        (),
        "Admission",
        "Admission plugins to turn on in addition to the default ones (e.g. EventRateLimit). "
        "Only EventRateLimit (which, as in kube-apiserver, limits writes of core/v1 Events "
        "only, not events.k8s.io/v1 ones), AlwaysAdmit and AlwaysDeny act on this server; the "
        "others concern "
        "objects it does not serve (NamespaceLifecycle: no Namespace resource is served, so "
        "there is no namespace to check) and are logged at start-up as not applicable.",
        implemented=True,
    ),
    # ---- Metrics ----------------------------------------------------------------------------
    Flag(
        "allow-metric-labels",
        "metriclabels",
        {},
        "Metrics",
        "Allowed values of a metric label, as metric,label='value1,value2'; other values are "
        "recorded as 'unexpected'. Repeatable.",
        implemented=True,
    ),
    Flag(
        "allow-metric-labels-manifest",
        "string",
        "",
        "Metrics",
        "File with the allowed metric label values; --allow-metric-labels takes precedence.",
        implemented=True,
    ),
    Flag(
        "disabled-metrics",
        "strings",
        (),
        "Metrics",
        "Fully qualified names of metrics that are never registered. Wins over "
        "--show-hidden-metrics-for-version.",
        implemented=True,
    ),
    Flag(
        "show-hidden-metrics-for-version",
        "string",
        "",
        "Metrics",
        "Previous minor version (major.minor) whose deprecated and hidden metrics are shown "
        "again. Only the previous minor is accepted.",
        implemented=True,
    ),
    # ---- Logs -------------------------------------------------------------------------------
    Flag(
        "log-flush-frequency",
        "duration",
        5.0,
        "Logs",
        "Longest time between log flushes.",
        implemented=True,
    ),
    Flag(
        "log-text-info-buffer-size",
        "quantity",
        0,
        "Logs",
        "Size of the buffer for info messages when the split text stream is on (alpha; needs "
        "feature LoggingAlphaOptions). 0 means no buffering.",
    ),
    Flag(
        "log-text-split-stream",
        "bool",
        False,
        "Logs",
        "Write error messages to stderr and info messages to stdout (alpha; needs feature "
        "LoggingAlphaOptions).",
    ),
    Flag(
        "logging-format",
        "string",
        "text",
        "Logs",
        "Log format. Only text is available.",
        implemented=True,
    ),
    Flag(
        "v",
        "level",
        0,
        "Logs",
        "Log verbosity; requests are logged from 3 up.",
        short="v",
        implemented=True,
    ),
    Flag(
        "vmodule",
        "vmodule",
        (),
        "Logs",
        "Per-file verbosity, as comma-separated pattern=N (text format only); the request "
        "log is the file httplog.",
        implemented=True,
    ),
    # ---- Traces -----------------------------------------------------------------------------
    Flag(
        "tracing-config-file",
        "string",
        "",
        "Traces",
        "File with the TracingConfiguration (apiserver.config.k8s.io/v1: endpoint, default "
        "localhost:4317, and samplingRatePerMillion): request and storage spans are exported "
        "there over OTLP/gRPC; a sampled W3C traceparent from system:masters or "
        "system:monitoring is the request span's parent.",
        implemented=True,
    ),
    # ---- Misc -------------------------------------------------------------------------------
    _misc(
        "allow-privileged",
        "bool",
        False,
        "Allow privileged containers.",
    ),
    _misc(
        "coordinated-leadership-lease-duration",
        "duration",
        15.0,
        "Lease duration of coordinated leader election.",
    ),
    _misc(
        "coordinated-leadership-renew-deadline",
        "duration",
        10.0,
        "Renew deadline of coordinated leader election.",
    ),
    _misc(
        "coordinated-leadership-retry-period",
        "duration",
        2.0,
        "Retry period of coordinated leader election.",
    ),
    _misc(
        "enable-aggregator-routing",
        "bool",
        False,
        "Send aggregator requests to endpoint IPs rather than to the service's cluster IP.",
    ),
    _misc(
        "enable-logs-handler",
        "bool",
        True,
        "Serve the files of /var/log at /logs (authorized like any non-resource path: "
        "system:masters only by default).",
        deprecated="the /logs handler will be removed in a future release",
        implemented=True,
    ),
    _misc(
        "endpoint-reconciler-type",
        "string",
        "lease",
        "How the endpoints of the kubernetes service are kept: master-count (deprecated), "
        "lease or none.",
    ),
    _misc(
        "event-ttl",
        "duration",
        3600.0,
        "How long events are kept.",
        implemented=True,
    ),
    _misc(
        "workers",
        "string",
        "1",
        "Number of worker processes serving the secure port (SO_REUSEPORT): a positive "
        "integer, or auto for one per CPU core. With more than one, twistd's process "
        "supervises them: it restarts a worker that dies, and SIGTERM runs the graceful "
        "shutdown in every worker. Reads scale with the cores; with the embedded store a "
        "worker and its store's writer process use about one and a half cores under creates, "
        "so on a machine of two cores a second worker adds reads but not creates. Not a "
        "kube-apiserver flag.",
        implemented=True,
    ),
    _misc(
        "max-connection-bytes-per-sec",
        "int",
        0,
        "If not 0, limit each client connection to reading this many bytes per second "
        "(kube-apiserver limits only the upgraded connections it proxies, which this server "
        "has none of; here reading any connection that overdraws its budget pauses until it "
        "is back).",
        implemented=True,
    ),
    _misc(
        "nodeagent-certificate-authority",
        "string",
        "",
        "CA file that verifies the node agents' serving certificates.",
        aliases=("kubelet-certificate-authority",),
    ),
    _misc(
        "nodeagent-client-certificate",
        "string",
        "",
        "Client certificate presented to node agents.",
        aliases=("kubelet-client-certificate",),
    ),
    _misc(
        "nodeagent-client-key",
        "string",
        "",
        "Private key of the client certificate presented to node agents.",
        aliases=("kubelet-client-key",),
    ),
    _misc(
        "nodeagent-preferred-address-types",
        "strings",
        NODE_ADDRESS_TYPES,
        "Order of node address types tried when connecting to node agents.",
        aliases=("kubelet-preferred-address-types",),
    ),
    _misc(
        "nodeagent-timeout",
        "duration",
        5.0,
        "Timeout of requests to node agents.",
        aliases=("kubelet-timeout",),
    ),
    _misc(
        "peer-advertise-ip",
        "string",
        "",
        "IP other API servers use to proxy requests to this one (needs feature "
        "UnknownVersionInteroperabilityProxy).",
    ),
    _misc(
        "peer-advertise-port",
        "string",
        "",
        "Port other API servers use to proxy requests to this one (needs feature "
        "UnknownVersionInteroperabilityProxy).",
    ),
    _misc(
        "peer-ca-file",
        "string",
        "",
        "CA bundle that verifies peer API servers' serving certificates (needs feature "
        "UnknownVersionInteroperabilityProxy).",
    ),
    _misc(
        "platform-service-node-port",
        "int",
        0,
        "If not 0, the kubernetes service is of type NodePort with this port; otherwise ClusterIP.",
        aliases=("kubernetes-service-node-port",),
    ),
    _misc(
        "proxy-client-cert-file",
        "string",
        "",
        "Client certificate this server presents to aggregated API servers and webhooks.",
    ),
    _misc(
        "proxy-client-key-file",
        "string",
        "",
        "Private key of --proxy-client-cert-file.",
    ),
    _misc(
        "service-cluster-ip-range",
        "cidrs",
        (),
        "CIDR range(s) for service cluster IPs: one, or two of different families for dual "
        "stack. Must not overlap node or pod ranges.",
    ),
    _misc(
        "service-node-port-range",
        "portrange",
        (30000, 32767),
        "Inclusive port range for NodePort services, as N1-N2 or N1+offset.",
    ),
    # ---- Global -----------------------------------------------------------------------------
    Flag(
        "help",
        "bool",
        False,
        "Global",
        "Print this help and exit.",
        short="h",
        implemented=True,
    ),
    Flag(
        "version",
        "version",
        "false",
        "Global",
        "Print the version and exit; --version=raw prints all version fields; "
        "--version=vX.Y.Z sets the version the server reports and does not exit.",
        implemented=True,
    ),
)

BY_NAME: Mapping[str, Flag] = {flag.name: flag for flag in FLAGS}
"""Canonical name -> flag."""

LONG_NAMES: Mapping[str, Flag] = {
    **{alias: flag for flag in FLAGS for alias in flag.aliases},
    **BY_NAME,
}
"""Every accepted long name (canonical and alias) -> flag."""

SHORT_NAMES: Mapping[str, Flag] = {flag.short: flag for flag in FLAGS if flag.short}
"""One-letter shorthand -> flag."""


def canonical_name(name: str) -> str:
    """``--etcd_servers`` / ``etcd-servers`` / ``store-servers`` -> ``store-servers``.

    Raises ``KeyError`` for names that are not flags.
    """
    key = name.lstrip("-").replace("_", "-")
    if key in LONG_NAMES:
        return LONG_NAMES[key].name
    if len(key) == 1 and key in SHORT_NAMES:
        return SHORT_NAMES[key].name
    raise KeyError(name)
