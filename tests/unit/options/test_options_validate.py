"""Semantic validation: each rule refuses a bad value with a message naming the flag."""

from __future__ import annotations

import pytest

from apiserver.options import OptionsError, ServerConfig, parse_args


def errors_of(argv: list[str]) -> list[str]:
    with pytest.raises(OptionsError) as info:
        parse_args(argv)
    return info.value.errors


BAD = [
    (
        ["--secure-port=0"],
        "--secure-port 0 must be between 1 and 65535, inclusive. It cannot be turned off with 0",
    ),
    (["--secure-port=65536"], "--secure-port 65536 must be between 1 and 65535"),
    (["--goaway-chance=0.03"], "--goaway-chance can not be less than 0 or greater than 0.02"),
    (
        ["--max-requests-inflight=0", "--max-mutating-requests-inflight=0"],
        "invalid configuration: MaxRequestsInFlight=0 and MaxMutatingRequestsInFlight=0; they "
        "must add up to something positive",
    ),
    (["--goaway-chance=-0.01"], "--goaway-chance can not be less than 0 or greater than 0.02"),
    (["--goaway-chance=NaN"], "--goaway-chance can not be less than 0 or greater than 0.02"),
    (["--service-node-port-range="], "--service-node-port-range 0-0 is not a valid range"),
    (["--service-node-port-range=5-3"], "end port cannot be less than start port: 5-3"),
    (["--service-node-port-range=1-65536"], "the port range cannot be greater than 65535"),
    (
        ["--platform-service-node-port=80"],
        "--platform-service-node-port 80 is not in --service-node-port-range 30000-32767",
    ),
    (["--platform-service-node-port=-1"], "--platform-service-node-port -1 must be between 0"),
    (
        ["--service-cluster-ip-range=10.0.0.0/24,fd00::/108,10.1.0.0/24"],
        "--service-cluster-ip-range must not contain more than two entries",
    ),
    (
        ["--service-cluster-ip-range=10.0.0.0/24,10.1.0.0/24"],
        "--service-cluster-ip-range[0] and --service-cluster-ip-range[1] must be of different IP "
        "family",
    ),
    (["--service-cluster-ip-range=10.0.0.0"], "invalid CIDR address: 10.0.0.0"),
    (
        ["--authorization-config=a.yaml", "--authorization-mode=RBAC"],
        "--authorization-config can not be used together with --authorization-mode",
    ),
    (
        ["--authorization-config=a.yaml", "--authorization-webhook-version=v1"],
        "--authorization-config can not be used together",
    ),
    (["--authorization-mode=RBAC,Magic"], "--authorization-mode 'Magic' is not a valid mode"),
    (["--authorization-mode=RBAC,Node,RBAC"], "has mode specified more than once: RBAC"),
    (["--authorization-mode=ABAC"], "--authorization-mode ABAC needs --authorization-policy-file"),
    (
        ["--authorization-policy-file=p.jsonl"],
        "cannot specify --authorization-policy-file without mode ABAC",
    ),
    (
        ["--authorization-mode=Webhook"],
        "--authorization-mode Webhook needs --authorization-webhook-config-file",
    ),
    (
        ["--authorization-webhook-config-file=w.kubeconfig"],
        "cannot specify --authorization-webhook-config-file without mode Webhook",
    ),
    (["--authorization-webhook-version=v2"], "--authorization-webhook-version: invalid version"),
    (
        ["--authentication-token-webhook-version=v2"],
        "--authentication-token-webhook-version: invalid version 'v2'",
    ),
    (
        ["--service-account-signing-endpoint=/run/signer.sock", "--service-account-key-file=k.pem"],
        "--service-account-signing-endpoint can not be combined with --service-account-key-file",
    ),
    (
        [
            "--service-account-signing-endpoint=/run/s.sock",
            "--service-account-signing-key-file=k",
            "--service-account-key-file=k.pub",
        ],
        "--service-account-signing-endpoint can not be combined",
    ),
    (
        [
            "--service-account-signing-endpoint=/run/s.sock",
            "--feature-gates=ExternalServiceAccountTokenSigner=false",
        ],
        "--service-account-signing-endpoint requires the ExternalServiceAccountTokenSigner",
    ),
    (
        ["--service-account-signing-key-file=sa.key"],
        "--service-account-key-file is required when --service-account-signing-key-file is given",
    ),
    (
        ["--service-account-issuer=https://a", "--service-account-issuer=https://a"],
        "--service-account-issuer 'https://a' is already specified",
    ),
    (
        ["--service-account-max-token-expiration=30m"],
        "the service-account-max-token-expiration must be between 1 hour and 2^32 seconds",
    ),
    (
        ["--service-account-jwks-uri=http://x/jwks", "--service-account-issuer=https://x"],
        "--service-account-jwks-uri 'http://x/jwks' must be an https URL",
    ),
    (
        ["--service-account-jwks-uri=https://x/jwks"],
        "--service-account-jwks-uri requires --service-account-issuer",
    ),
    (
        ["--oidc-issuer-url=https://issuer.example"],
        "--oidc-issuer-url and --oidc-client-id should be specified together",
    ),
    (
        ["--oidc-client-id=kubernetes"],
        "--oidc-issuer-url and --oidc-client-id should be specified together",
    ),
    (
        ["--oidc-issuer-url=http://issuer.example", "--oidc-client-id=k"],
        "--oidc-issuer-url 'http://issuer.example' must be a URL with the https scheme",
    ),
    (["--oidc-signing-algs=RS256,HS256"], "--oidc-signing-algs: unsupported signing alg 'HS256'"),
    (["--tls-min-version=VersionTLS14"], "--tls-min-version: unknown tls version 'VersionTLS14'"),
    (
        ["--tls-cipher-suites=TLS_FOO"],
        "--tls-cipher-suites: Cipher suite TLS_FOO not supported or doesn't exist",
    ),
    (
        [
            "--tls-min-version=VersionTLS13",
            "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        ],
        "--tls-cipher-suites may not be specified when --tls-min-version is 'VersionTLS13'",
    ),
    (
        ["--tls-cert-file=server.crt"],
        "--tls-cert-file and --tls-private-key-file must be specified together",
    ),
    (
        ["--tls-sni-cert-key=only.crt"],
        "--tls-sni-cert-key: invalid value 'only.crt': expected comma separated certificate",
    ),
    (["--tls-sni-cert-key=a.crt,a.key:"], "--tls-sni-cert-key: invalid value"),
    (["--audit-log-mode=async"], "--audit-log-mode: invalid audit log mode 'async'"),
    (["--audit-webhook-mode=async"], "--audit-webhook-mode: invalid audit webhook mode 'async'"),
    (["--audit-log-format=xml"], "--audit-log-format: invalid audit log format 'xml'"),
    (
        ["--audit-log-version=audit.k8s.io/v1beta1"],
        "--audit-log-version: invalid audit log version",
    ),
    (["--audit-webhook-version=v1"], "--audit-webhook-version: invalid audit webhook version"),
    (["--audit-log-maxage=-1"], "--audit-log-maxage -1 can't be a negative number"),
    (["--audit-log-maxbackup=-1"], "--audit-log-maxbackup -1 can't be a negative number"),
    (["--audit-log-maxsize=-1"], "--audit-log-maxsize -1 can't be a negative number"),
    (
        ["--audit-log-path=-", "--audit-log-mode=batch", "--audit-log-batch-buffer-size=0"],
        "--audit-log-batch-buffer-size 0 must be a positive number",
    ),
    (
        [
            "--audit-log-path=-",
            "--audit-log-mode=batch",
            "--audit-log-batch-throttle-enable",
            "--audit-log-batch-throttle-burst=5",
        ],
        "--audit-log-batch-throttle-qps 0 must be a positive number when "
        "--audit-log-batch-throttle-enable is set",
    ),
    (
        ["--audit-webhook-config-file=w", "--audit-webhook-batch-max-size=0"],
        "--audit-webhook-batch-max-size 0 must be a positive number",
    ),
    (
        [
            "--audit-webhook-config-file=w",
            "--audit-webhook-truncate-enabled",
            "--audit-webhook-truncate-max-event-size=2000",
            "--audit-webhook-truncate-max-batch-size=1000",
        ],
        "--audit-webhook-truncate-max-event-size 2000 must not be greater than",
    ),
    (
        ["--audit-webhook-batch-max-wait=-1s"],
        "--audit-webhook-batch-max-wait can not be a negative",
    ),
    (["--logging-format=json"], "--logging-format: unsupported log format 'json'"),
    (
        ["--log-text-split-stream"],
        "--log-text-split-stream requires the LoggingAlphaOptions feature gate",
    ),
    (
        ["--log-text-info-buffer-size=1Mi"],
        "--log-text-info-buffer-size requires the LoggingAlphaOptions feature gate",
    ),
    (["--endpoint-reconciler-type=magic"], "--endpoint-reconciler-type: invalid value 'magic'"),
    (["--storage-backend=etcd2"], "--storage-backend invalid, allowed values: etcd3"),
    (
        ["--storage-backend=etcd3"],
        "--store-servers must be specified when --storage-backend is etcd3",
    ),
    (["--storage-media-type=text/plain"], "--storage-media-type 'text/plain' invalid"),
    (["--livez-grace-period=-1s"], "--livez-grace-period can not be a negative value"),
    (["--shutdown-delay-duration=-1s"], "--shutdown-delay-duration can not be negative value"),
    (
        ["--shutdown-watch-termination-grace-period=-1s"],
        "--shutdown-watch-termination-grace-period, if provided, can not be a negative value",
    ),
    (["--request-timeout=-1s"], "--request-timeout can not be negative value"),
    (["--storage-initialization-timeout=-1s"], "--storage-initialization-timeout can not be a neg"),
    (["--store-healthcheck-timeout=-2s"], "--store-healthcheck-timeout can not be a negative"),
    (["--event-ttl=-1h"], "--event-ttl can not be a negative value"),
    (["--workers=0"], "--workers: invalid value '0': must be auto or an integer from 1 to 256"),
    (["--workers=two"], "--workers: invalid value 'two'"),
    (["--workers=257"], "--workers: invalid value '257'"),
    (["--max-requests-inflight=-1"], "--max-requests-inflight can not be negative value"),
    (
        ["--max-mutating-requests-inflight=-1"],
        "--max-mutating-requests-inflight can not be negative value",
    ),
    (["--min-request-timeout=0"], "--min-request-timeout must be a positive number of seconds"),
    (["--http2-max-streams-per-connection=-1"], "--http2-max-streams-per-connection can not be a"),
    (
        ["--strict-transport-security-directives=max-age=1,nosniff"],
        "--strict-transport-security-directives invalid value 'nosniff', allowed values: "
        "max-age=expireTime, includeSubDomains, preload",
    ),
    (
        ["--strict-transport-security-directives=max-age=soon"],
        "--strict-transport-security-directives invalid value 'max-age=soon'",
    ),
    (
        ["--cors-allowed-origins=example.com"],
        "--cors-allowed-origins: 'example.com': regular expression does not pin to start/end of "
        "host in the origin header",
    ),
    (
        ["--cors-allowed-origins=^example\\.com"],
        "regular expression does not pin to start/end of host in the origin header",
    ),
    (["--cors-allowed-origins=*"], "--cors-allowed-origins: the wildcard '*' is not allowed"),
    (["--cors-allowed-origins=^(a$"], "--cors-allowed-origins: invalid regular expression"),
    (
        ["--show-hidden-metrics-for-version=1.33"],
        "--show-hidden-metrics-for-version must be omitted or have the value '1.34'. Only the "
        "previous minor version is allowed",
    ),
    (
        ["--watch-cache-sizes=events"],
        "--watch-cache-sizes: invalid value of watch cache size: events",
    ),
    (["--watch-cache-sizes=events#many"], "--watch-cache-sizes: invalid size of watch cache size"),
    (["--watch-cache-sizes=events#-1"], "--watch-cache-sizes: watch cache size cannot be negative"),
    (
        ["--store-servers-overrides=events#http://a:1"],
        "--store-servers-overrides invalid, must be of format: group/resource#servers",
    ),
    (
        ["--store-servers-overrides=/events#ftp://a:1"],
        "--store-servers-overrides: invalid server URL 'ftp://a:1'",
    ),
    (
        ["--store-servers=ftp://127.0.0.1:2379"],
        "--store-servers: invalid server URL 'ftp://127.0.0.1:2379': the scheme must be",
    ),
    (["--store-servers=127.0.0.1:2379"], "--store-servers: invalid server URL '127.0.0.1:2379'"),
    (
        ["--store-servers=http://:2379"],
        "--store-servers: invalid server URL 'http://:2379': a host",
    ),
    (["--store-servers=http://a:99999"], "the port is not a number between 0 and 65535"),
    (["--store-certfile=c.pem"], "--store-certfile and --store-keyfile must be specified together"),
    (["--runtime-config=notagroup=true"], "--runtime-config: invalid key 'notagroup'"),
    (["--runtime-config=api/all=maybe"], "--runtime-config: invalid value api/all=maybe"),
    (["--feature-gates=Foo=maybe"], 'invalid argument "Foo=maybe" for "--feature-gates" flag'),
    (["--feature-gates=Bad Name=true"], "--feature-gates: invalid feature gate name 'Bad Name'"),
    (
        ["--enable-admission-plugins=NoSuchPlugin"],
        "--enable-admission-plugins plugin 'NoSuchPlugin' is unknown",
    ),
    (
        ["--enable-admission-plugins=PodSecurity", "--disable-admission-plugins=PodSecurity"],
        "[PodSecurity] in --enable-admission-plugins and --disable-admission-plugins overlapped",
    ),
    (
        ["--admission-control=PodSecurity", "--enable-admission-plugins=PodSecurity"],
        "--admission-control and --enable-admission-plugins/--disable-admission-plugins flags are "
        "mutually exclusive",
    ),
    (
        ["--nodeagent-preferred-address-types=Hostname,Magic"],
        "--nodeagent-preferred-address-types: unknown address type 'Magic'",
    ),
    (
        ["--peer-ca-file=ca.pem"],
        "--peer-ca-file requires the UnknownVersionInteroperabilityProxy feature gate",
    ),
    (
        [
            "--peer-advertise-ip=not-an-ip",
            "--feature-gates=UnknownVersionInteroperabilityProxy=true",
        ],
        "--peer-advertise-ip 'not-an-ip' is not a valid IP address",
    ),
    (
        ["--peer-advertise-port=http", "--feature-gates=UnknownVersionInteroperabilityProxy=true"],
        "--peer-advertise-port 'http' is not a valid port number",
    ),
    (
        ["--emulated-version=1.20"],
        "--emulated-version: emulation version 1.20 is not between [1.32, 1.35]",
    ),
    (["--emulated-version=1.36"], "--emulated-version: emulation version 1.36 is not between"),
    (["--emulated-version=other=1.34"], "--emulated-version: unknown component 'other'"),
    (["--emulated-version=1.x"], "--emulated-version: invalid version '1.x'"),
    (
        ["--emulated-version=kube=1.33", "--min-compatibility-version=1.34"],
        "--min-compatibility-version: version 1.34 must be between [1.32, 1.33]",
    ),
    (
        ["--emulation-forward-compatible"],
        "--emulation-forward-compatible can only be true when --emulated-version is lower than the "
        "binary version 1.35",
    ),
    (
        ["--runtime-config-emulation-forward-compatible"],
        "--runtime-config-emulation-forward-compatible can only be true",
    ),
    (
        ["--encryption-provider-config-automatic-reload"],
        "--encryption-provider-config-automatic-reload must be set with "
        "--encryption-provider-config",
    ),
    (
        ["--coordinated-leadership-renew-deadline=20s"],
        "--coordinated-leadership-lease-duration must be greater than "
        "--coordinated-leadership-renew-deadline",
    ),
    (
        ["--coordinated-leadership-retry-period=0s"],
        "--coordinated-leadership-retry-period must be greater than zero",
    ),
    (["--lease-reuse-duration-seconds=0"], "--lease-reuse-duration-seconds must be at least 1"),
    (
        ["--nodeagent-client-certificate=c.pem"],
        "--nodeagent-client-certificate and --nodeagent-client-key must be specified together",
    ),
    (
        ["--proxy-client-key-file=k.pem"],
        "--proxy-client-cert-file and --proxy-client-key-file must be specified together",
    ),
    (["--advertise-address=999.1.1.1"], 'failed to parse IP: "999.1.1.1"'),
]


@pytest.mark.parametrize(("argv", "expected"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_value_is_refused_naming_the_flag(argv: list[str], expected: str) -> None:
    errors = errors_of(argv)
    assert len(errors) == 1, errors
    assert expected in errors[0]
    assert "--" in errors[0]


GOOD = [
    ["--secure-port=1"],
    ["--secure-port=65535"],
    ["--goaway-chance=0.02"],
    ["--goaway-chance=0"],
    ["--service-cluster-ip-range=10.96.0.0/12,fd00::/108"],
    ["--service-node-port-range=30000+100", "--platform-service-node-port=30050"],
    ["--authorization-config=a.yaml"],
    ["--authorization-mode=Node,RBAC"],
    ["--authorization-mode=ABAC", "--authorization-policy-file=p.jsonl"],
    [
        "--authorization-mode=Webhook",
        "--authorization-webhook-config-file=w",
        "--authorization-webhook-version=v1",
    ],
    ["--service-account-signing-endpoint=/run/signer.sock"],
    ["--service-account-signing-key-file=sa.key", "--service-account-key-file=sa.pub"],
    ["--service-account-signing-key-file=sa.key", "--tls-cert-file=c", "--tls-private-key-file=k"],
    [
        "--service-account-issuer=https://kubernetes.default.svc",
        "--service-account-issuer=legacy",
        "--service-account-jwks-uri=https://x/openid/v1/jwks",
        "--service-account-max-token-expiration=24h",
    ],
    [
        "--oidc-issuer-url=https://issuer.example",
        "--oidc-client-id=k",
        "--oidc-signing-algs=ES256,PS512",
    ],
    ["--tls-min-version=VersionTLS13"],
    [
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"
    ],
    ["--tls-cipher-suites=TLS_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"],
    [
        "--audit-log-mode=blocking-strict",
        "--audit-webhook-mode=blocking",
        "--audit-log-format=legacy",
    ],
    ["--audit-log-path=-", "--audit-log-mode=batch"],  # batch defaults of the log backend are fine
    ["--audit-webhook-config-file=w"],
    ["--logging-format=text", "--vmodule=a=1"],
    [
        "--log-text-split-stream",
        "--log-text-info-buffer-size=64Ki",
        "--feature-gates=LoggingAlphaOptions=true",
    ],
    ["--endpoint-reconciler-type=none"],
    [
        "--storage-backend=etcd3",
        "--store-servers=https://a:2379,http://b:2379,unix:///run/etcd.sock",
    ],
    ["--storage-media-type=application/json"],
    ["--strict-transport-security-directives=max-age=31536000,includeSubDomains,preload"],
    ["--cors-allowed-origins=//example\\.com$,^https://a\\.example\\.com:,^http://localhost(:|$)"],
    ["--show-hidden-metrics-for-version=1.34"],
    ["--version=v1.36.0", "--show-hidden-metrics-for-version=1.35"],
    ["--watch-cache-sizes=events#0,events.events.k8s.io#100"],
    ["--store-servers-overrides=/events#http://a:1;https://b:2,events.k8s.io/events#http://c:3"],
    ["--runtime-config=api/all=false,events.k8s.io/v1=true,v1,apps/v1/deployments=false"],
    ["--feature-gates=kube:SomeFeature=true,OtherFeature=false"],
    [
        "--enable-admission-plugins=EventRateLimit,PodSecurity",
        "--disable-admission-plugins=Priority",
    ],
    ["--nodeagent-preferred-address-types=InternalIP,Hostname"],
    [
        "--peer-ca-file=ca",
        "--peer-advertise-ip=10.0.0.1",
        "--peer-advertise-port=6443",
        "--feature-gates=UnknownVersionInteroperabilityProxy=true",
    ],
    [
        "--emulated-version=kube=1.33",
        "--min-compatibility-version=1.32",
        "--emulation-forward-compatible",
        "--runtime-config-emulation-forward-compatible",
    ],
    ["--encryption-provider-config=e.yaml", "--encryption-provider-config-automatic-reload"],
    ["--shutdown-delay-duration=0s", "--livez-grace-period=0", "--request-timeout=0s"],
    ["--bind-address=::", "--advertise-address=192.168.1.10"],
    ["--bind-address="],
]


@pytest.mark.parametrize("argv", GOOD, ids=[" ".join(a) for a in GOOD])
def test_good_values_are_accepted(argv: list[str]) -> None:
    parse_args(argv)


def test_all_validation_errors_are_reported_at_once() -> None:
    errors = errors_of(
        [
            "--secure-port=0",
            "--goaway-chance=1",
            "--tls-min-version=SSL3",
            "--authorization-config=a.yaml",
            "--authorization-mode=RBAC",
            "--audit-log-format=xml",
        ]
    )
    assert len(errors) == 5
    joined = "\n".join(errors)
    for flag in (
        "--secure-port",
        "--goaway-chance",
        "--tls-min-version",
        "--authorization-config",
        "--audit-log-format",
    ):
        assert flag in joined


def test_insecure_cipher_suites_warn() -> None:
    config = parse_args(["--tls-cipher-suites=TLS_RSA_WITH_AES_128_CBC_SHA"])
    assert config.warnings == ("Use of insecure cipher 'TLS_RSA_WITH_AES_128_CBC_SHA' detected.",)


def test_master_count_reconciler_warns() -> None:
    config = parse_args(["--endpoint-reconciler-type=master-count"])
    assert config.warnings == (
        "--endpoint-reconciler-type=master-count is deprecated; use lease instead",
    )


def test_workers_counts_processes() -> None:
    from apiserver.options.validate import parse_workers

    assert parse_workers("1") == 1
    assert parse_workers("4") == 4
    assert parse_workers("auto", cpu_count=16) == 16
    assert parse_workers("auto", cpu_count=0) == 1
    assert parse_workers("-1") is None
    assert ServerConfig.defaults().worker_count == 1
    assert ServerConfig({"workers": "3"}).worker_count == 3
