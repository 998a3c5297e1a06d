"""The flag table covers every flag of the seed (sections 5, 8, 9) with well-formed rows."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from apiserver.options import FLAGS, Flag, parse_args
from apiserver.options.flagtypes import TYPES
from apiserver.options.table import BY_NAME, GROUPS, LONG_NAMES, SHORT_NAMES, canonical_name

SEED = Path(os.environ.get("APISERVER_SEED", "/work/shared/seed/apiserver-seed.md"))

# The names the seed's sections 5, 8 and 9 mention, for checkouts without the seed file.
SEED_FLAGS_FALLBACK = """
--admission-control --admission-control-config-file --advertise-address
--aggregator-reject-forwarding-redirect --allow-metric-labels
--allow-metric-labels-manifest --allow-privileged --anonymous-auth --api-audiences
--audit-log-batch-buffer-size --audit-log-batch-max-size --audit-log-batch-max-wait
--audit-log-batch-throttle-burst --audit-log-batch-throttle-enable
--audit-log-batch-throttle-qps --audit-log-compress --audit-log-format
--audit-log-maxage --audit-log-maxbackup --audit-log-maxsize --audit-log-mode
--audit-log-path --audit-log-truncate-enabled --audit-log-truncate-max-batch-size
--audit-log-truncate-max-event-size --audit-log-version --audit-policy-file
--audit-webhook-batch-buffer-size --audit-webhook-batch-max-size
--audit-webhook-batch-max-wait --audit-webhook-batch-throttle-burst
--audit-webhook-batch-throttle-enable --audit-webhook-batch-throttle-qps
--audit-webhook-config-file --audit-webhook-initial-backoff --audit-webhook-mode
--audit-webhook-truncate-enabled --audit-webhook-truncate-max-batch-size
--audit-webhook-truncate-max-event-size --audit-webhook-version --authentication-config
--authentication-token-webhook-cache-ttl --authentication-token-webhook-config-file
--authentication-token-webhook-version --authorization-config --authorization-mode
--authorization-policy-file --authorization-webhook-cache-authorized-ttl
--authorization-webhook-cache-unauthorized-ttl --authorization-webhook-config-file
--authorization-webhook-version --bind-address --cert-dir --client-ca-file
--contention-profiling --coordinated-leadership-lease-duration
--coordinated-leadership-renew-deadline --coordinated-leadership-retry-period
--cors-allowed-origins --debug-socket-path --default-not-ready-toleration-seconds
--default-unreachable-toleration-seconds --delete-collection-workers
--disable-admission-plugins --disable-http2-serving --disabled-metrics
--egress-selector-config-file --emulated-version --emulation-forward-compatible
--enable-admission-plugins --enable-aggregator-routing --enable-bootstrap-token-auth
--enable-garbage-collector --enable-logs-handler --enable-priority-and-fairness
--encryption-provider-config --encryption-provider-config-automatic-reload
--endpoint-reconciler-type --external-hostname --feature-gates --goaway-chance --help
--http2-max-streams-per-connection --lease-reuse-duration-seconds --livez-grace-period
--log-flush-frequency --log-text-info-buffer-size --log-text-split-stream
--logging-format --max-connection-bytes-per-sec --max-mutating-requests-inflight
--max-requests-inflight --min-compatibility-version --min-request-timeout
--nodeagent-certificate-authority --nodeagent-client-certificate --nodeagent-client-key
--nodeagent-preferred-address-types --nodeagent-timeout --oidc-ca-file --oidc-client-id
--oidc-groups-claim --oidc-groups-prefix --oidc-issuer-url --oidc-required-claim
--oidc-signing-algs --oidc-username-claim --oidc-username-prefix --peer-advertise-ip
--peer-advertise-port --peer-ca-file --permit-address-sharing --permit-port-sharing
--platform-service-node-port --profiling --proxy-client-cert-file
--proxy-client-key-file --request-timeout --requestheader-allowed-names
--requestheader-client-ca-file --requestheader-extra-headers-prefix
--requestheader-group-headers --requestheader-uid-headers
--requestheader-username-headers --runtime-config
--runtime-config-emulation-forward-compatible --secure-port
--service-account-extend-token-expiration --service-account-issuer
--service-account-jwks-uri --service-account-key-file --service-account-lookup
--service-account-max-token-expiration --service-account-signing-endpoint
--service-account-signing-key-file --service-cluster-ip-range --service-node-port-range
--show-hidden-metrics-for-version --shutdown-delay-duration --shutdown-send-retry-after
--shutdown-watch-termination-grace-period --storage-backend
--storage-initialization-timeout --storage-media-type --store-cafile --store-certfile
--store-compaction-interval --store-count-metric-poll-period
--store-db-metric-poll-interval --store-healthcheck-timeout --store-keyfile
--store-prefix --store-readycheck-timeout --store-servers --store-servers-overrides
--strict-transport-security-directives --tls-cert-file --tls-cipher-suites
--tls-min-version --tls-private-key-file --tls-sni-cert-key --token-auth-file
--tracing-config-file --v --version --vmodule --watch-cache --watch-cache-sizes -h -v
""".split()

IMPLEMENTED = {
    # issue 14: observability
    "external-hostname",
    "feature-gates",
    "allow-metric-labels",
    "allow-metric-labels-manifest",
    "show-hidden-metrics-for-version",
    "contention-profiling",
    "debug-socket-path",
    "vmodule",
    "enable-logs-handler",
    "tracing-config-file",
    "emulated-version",
    "min-compatibility-version",
    "goaway-chance",
    "max-connection-bytes-per-sec",
    "admission-control",
    "admission-control-config-file",
    "disable-admission-plugins",
    "enable-admission-plugins",
    "advertise-address",
    "anonymous-auth",
    "api-audiences",
    "audit-log-batch-buffer-size",
    "audit-log-batch-max-size",
    "audit-log-batch-max-wait",
    "audit-log-batch-throttle-burst",
    "audit-log-batch-throttle-enable",
    "audit-log-batch-throttle-qps",
    "audit-log-compress",
    "audit-log-format",
    "audit-log-maxage",
    "audit-log-maxbackup",
    "audit-log-maxsize",
    "audit-log-mode",
    "audit-log-path",
    "audit-log-truncate-enabled",
    "audit-log-truncate-max-batch-size",
    "audit-log-truncate-max-event-size",
    "audit-log-version",
    "audit-webhook-batch-buffer-size",
    "audit-webhook-batch-max-size",
    "audit-webhook-batch-max-wait",
    "audit-webhook-batch-throttle-burst",
    "audit-webhook-batch-throttle-enable",
    "audit-webhook-batch-throttle-qps",
    "audit-webhook-config-file",
    "audit-webhook-initial-backoff",
    "audit-webhook-mode",
    "audit-webhook-truncate-enabled",
    "audit-webhook-truncate-max-batch-size",
    "audit-webhook-truncate-max-event-size",
    "audit-webhook-version",
    "audit-policy-file",
    "authentication-config",
    "authentication-token-webhook-cache-ttl",
    "authentication-token-webhook-config-file",
    "authentication-token-webhook-version",
    "authorization-config",
    "authorization-mode",
    "authorization-policy-file",
    "authorization-webhook-cache-authorized-ttl",
    "authorization-webhook-cache-unauthorized-ttl",
    "authorization-webhook-config-file",
    "authorization-webhook-version",
    "bind-address",
    "cert-dir",
    "client-ca-file",
    "cors-allowed-origins",
    "data-dir",
    "delete-collection-workers",
    "disable-http2-serving",
    "disabled-metrics",
    "enable-bootstrap-token-auth",
    "event-ttl",
    "help",
    "workers",
    "http2-max-streams-per-connection",
    "lease-reuse-duration-seconds",
    "livez-grace-period",
    # priority and fairness / max-in-flight (apiserver.flowcontrol)
    "enable-priority-and-fairness",
    "encryption-provider-config",
    "encryption-provider-config-automatic-reload",
    "max-requests-inflight",
    "max-mutating-requests-inflight",
    "log-flush-frequency",
    "logging-format",
    "min-request-timeout",
    "oidc-ca-file",
    "oidc-client-id",
    "oidc-groups-claim",
    "oidc-groups-prefix",
    "oidc-issuer-url",
    "oidc-required-claim",
    "oidc-signing-algs",
    "oidc-username-claim",
    "oidc-username-prefix",
    "permit-port-sharing",
    "profiling",
    "request-timeout",
    "requestheader-allowed-names",
    "requestheader-client-ca-file",
    "requestheader-extra-headers-prefix",
    "requestheader-group-headers",
    "requestheader-uid-headers",
    "requestheader-username-headers",
    "runtime-config",
    "secure-port",
    "service-account-extend-token-expiration",
    "service-account-issuer",
    "service-account-jwks-uri",
    "service-account-key-file",
    "service-account-lookup",
    "service-account-max-token-expiration",
    "service-account-signing-key-file",
    "shutdown-delay-duration",
    "shutdown-send-retry-after",
    "shutdown-watch-termination-grace-period",
    "storage-initialization-timeout",
    "storage-media-type",
    "store-cafile",
    "store-certfile",
    "store-compaction-interval",
    "store-count-metric-poll-period",
    "store-db-metric-poll-interval",
    "store-healthcheck-timeout",
    "store-keyfile",
    "store-prefix",
    "store-readycheck-timeout",
    "store-servers",
    "store-servers-overrides",
    "strict-transport-security-directives",
    "tls-cert-file",
    "tls-cipher-suites",
    "tls-min-version",
    "tls-private-key-file",
    "tls-sni-cert-key",
    "token-auth-file",
    "v",
    "version",
    "watch-cache",
    "watch-cache-sizes",
}


def seed_flag_names(text: str) -> set[str]:
    """``--name`` and ``-x`` tokens of sections 5, 8 and 9 (prefix patterns like --oidc-* not)."""
    names: set[str] = set()
    for section in re.split(r"\n## ", text):
        if section.split(".", 1)[0].strip() not in {"5", "8", "9"}:
            continue
        long = r"(?<![\w-])--([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?![\w*-])"
        names |= {"--" + m.group(1) for m in re.finditer(long, section)}
        names |= {"-" + m.group(1) for m in re.finditer(r"(?<![\w-])-([a-z])(?![\w*-])", section)}
    return names


def seed_names() -> set[str]:
    if SEED.exists():
        return seed_flag_names(SEED.read_text())
    return set(SEED_FLAGS_FALLBACK)


def test_seed_parser_finds_the_combined_rows() -> None:
    text = (
        "\n## 8. Limits\n| --store-cafile, --store-certfile, --store-keyfile | string |\n"
        "| -v, --v | int |"
    )
    assert seed_flag_names(text) == {
        "--store-cafile",
        "--store-certfile",
        "--store-keyfile",
        "-v",
        "--v",
    }


def test_fallback_list_matches_the_seed() -> None:
    if not SEED.exists():
        pytest.skip(f"{SEED} not present; the embedded list is used")
    assert seed_flag_names(SEED.read_text()) == set(SEED_FLAGS_FALLBACK)


def test_every_seed_flag_is_in_the_table() -> None:
    names = seed_names()
    long_names = {n for n in names if n.startswith("--")}
    assert len(long_names) >= 166
    missing = sorted(n for n in long_names if n[2:] not in BY_NAME)
    assert missing == []
    shorts = sorted(n[1:] for n in names if not n.startswith("--"))
    assert shorts == ["h", "v"]
    assert all(s in SHORT_NAMES for s in shorts)


def test_table_has_the_seed_flags_plus_data_dir_event_ttl_and_workers() -> None:
    seed_long = {n[2:] for n in seed_names() if n.startswith("--")}
    assert set(BY_NAME) - seed_long == {"data-dir", "event-ttl", "workers"}
    assert len(FLAGS) == len(seed_long) + 3 >= 169


def test_names_are_unique_across_canonical_names_and_aliases() -> None:
    all_names = [f.name for f in FLAGS] + [a for f in FLAGS for a in f.aliases]
    assert len(all_names) == len(set(all_names))
    assert len(LONG_NAMES) == len(all_names)


@pytest.mark.parametrize("flag", FLAGS, ids=lambda f: f.name)
def test_row_is_well_formed(flag: Flag) -> None:
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", flag.name)
    assert flag.type in TYPES
    assert TYPES[flag.type].check(flag.default), (flag.type, flag.default)
    assert flag.group in GROUPS
    assert flag.help.endswith(".")
    assert "  " not in flag.help
    assert flag.deprecated is None or flag.deprecated
    assert flag.implemented == (flag.name in IMPLEMENTED)


def test_upstream_spellings_are_aliases() -> None:
    pairs = {
        "etcd-servers": "store-servers",
        "etcd-servers-overrides": "store-servers-overrides",
        "etcd-cafile": "store-cafile",
        "etcd-certfile": "store-certfile",
        "etcd-keyfile": "store-keyfile",
        "etcd-prefix": "store-prefix",
        "etcd-compaction-interval": "store-compaction-interval",
        "etcd-count-metric-poll-period": "store-count-metric-poll-period",
        "etcd-db-metric-poll-interval": "store-db-metric-poll-interval",
        "etcd-healthcheck-timeout": "store-healthcheck-timeout",
        "etcd-readycheck-timeout": "store-readycheck-timeout",
        "kubelet-timeout": "nodeagent-timeout",
        "kubelet-certificate-authority": "nodeagent-certificate-authority",
        "kubelet-client-certificate": "nodeagent-client-certificate",
        "kubelet-client-key": "nodeagent-client-key",
        "kubelet-preferred-address-types": "nodeagent-preferred-address-types",
        "kubernetes-service-node-port": "platform-service-node-port",
    }
    for alias, canonical in pairs.items():
        assert canonical_name(alias) == canonical
        assert canonical_name("--" + alias.replace("-", "_")) == canonical


def test_canonical_name_rejects_unknown_names() -> None:
    with pytest.raises(KeyError):
        canonical_name("no-such-flag")


@pytest.mark.parametrize(
    ("name", "type_", "default"),
    [
        ("secure-port", "int", 6443),
        ("bind-address", "ip", "0.0.0.0"),
        ("cert-dir", "string", "/var/run/kubernetes"),
        ("data-dir", "string", "/var/lib/apiserver"),
        ("event-ttl", "duration", 3600.0),
        ("request-timeout", "duration", 60.0),
        ("min-request-timeout", "int", 1800),
        ("max-requests-inflight", "int", 400),
        ("max-mutating-requests-inflight", "int", 200),
        ("goaway-chance", "float", 0.0),
        ("service-node-port-range", "portrange", (30000, 32767)),
        ("service-cluster-ip-range", "cidrs", ()),
        ("store-prefix", "string", "/registry"),
        ("store-compaction-interval", "duration", 300.0),
        ("store-healthcheck-timeout", "duration", 2.0),
        ("storage-media-type", "string", "application/vnd.kubernetes.protobuf"),
        ("endpoint-reconciler-type", "string", "lease"),
        ("oidc-signing-algs", "strings", ("RS256",)),
        ("oidc-username-claim", "string", "sub"),
        ("oidc-required-claim", "map", {}),
        ("feature-gates", "boolmap", {}),
        ("runtime-config", "configmap", {}),
        ("allow-metric-labels", "metriclabels", {}),
        ("vmodule", "vmodule", ()),
        ("log-text-info-buffer-size", "quantity", 0),
        ("tls-sni-cert-key", "stringarray", ()),
        ("authentication-token-webhook-cache-ttl", "duration", 120.0),
        ("authorization-webhook-cache-authorized-ttl", "duration", 300.0),
        ("authorization-webhook-version", "string", "v1beta1"),
        ("audit-log-mode", "string", "blocking"),
        ("audit-webhook-mode", "string", "batch"),
        ("audit-log-format", "string", "json"),
        ("audit-log-version", "string", "audit.k8s.io/v1"),
        ("audit-webhook-batch-throttle-qps", "float", 10.0),
        ("audit-log-truncate-max-batch-size", "int", 10485760),
        ("anonymous-auth", "bool", True),
        ("enable-logs-handler", "bool", True),
        ("profiling", "bool", True),
        ("v", "level", 0),
        ("version", "version", "false"),
        ("help", "bool", False),
        (
            "nodeagent-preferred-address-types",
            "strings",
            ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP"),
        ),
    ],
)
def test_defaults_and_types(name: str, type_: str, default: object) -> None:
    flag = BY_NAME[name]
    assert (flag.type, flag.default) == (type_, default)
    assert parse_args([]).values[name] == default


def test_deprecated_flags() -> None:
    assert {f.name for f in FLAGS if f.deprecated} == {"admission-control", "enable-logs-handler"}


def test_shorthands() -> None:
    assert BY_NAME["v"].short == "v"
    assert BY_NAME["help"].short == "h"
    assert {f.name for f in FLAGS if f.short} == {"v", "help"}
