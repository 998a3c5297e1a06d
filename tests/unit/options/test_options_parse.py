"""Command-line syntax (pflag's), aliases, repeated flags, and ServerConfig access."""

from __future__ import annotations

import copy
import ipaddress
import pickle

import pytest

from apiserver.options import FLAGS, OptionsError, ServerConfig, parse_args
from apiserver.version import DEFAULT_GIT_VERSION


def errors_of(argv: list[str]) -> list[str]:
    with pytest.raises(OptionsError) as info:
        parse_args(argv)
    assert str(info.value) == "\n".join(info.value.errors)
    return info.value.errors


def test_no_arguments_gives_the_defaults() -> None:
    config = parse_args([])
    assert config == ServerConfig.defaults()
    assert config.explicit == frozenset()
    assert all(config.values[f.name] == f.default for f in FLAGS)
    assert config.secure_port == 6443
    assert config.version == DEFAULT_GIT_VERSION


@pytest.mark.parametrize(
    "argv",
    [
        ["--secure-port=7443"],
        ["--secure-port", "7443"],
        ["--secure_port=7443"],
        ["--secure-port=0x1d13"],
    ],
)
def test_value_forms(argv: list[str]) -> None:
    config = parse_args(argv)
    assert config.secure_port == 7443
    assert config.is_set("secure-port")
    assert config.is_set("--secure-port")
    assert not config.is_set("bind-address")


@pytest.mark.parametrize(
    ("argv", "value"),
    [
        (["--profiling"], True),
        (["--profiling=false"], False),
        (["--profiling=0"], False),
        (["--profiling=F"], False),
        (["--profiling=TRUE"], True),
        (["--profiling=t"], True),
        (["--anonymous-auth=False"], False),
        (["--anonymous-auth=1"], True),
    ],
)
def test_bool_forms(argv: list[str], value: bool) -> None:
    name = argv[0][2:].partition("=")[0]
    assert parse_args(argv).values[name] is value


def test_bool_does_not_take_the_next_argument() -> None:
    assert errors_of(["--profiling", "false"]) == [
        '"apiserver" does not take any arguments, got ["false"]'
    ]


def test_bad_bool() -> None:
    assert errors_of(["--profiling=yes"]) == [
        'invalid argument "yes" for "--profiling" flag: strconv.ParseBool: parsing "yes": '
        "invalid syntax"
    ]


@pytest.mark.parametrize("argv", [["-v=3"], ["-v", "3"], ["-v3"], ["--v=3"], ["--v", "3"]])
def test_verbosity_forms(argv: list[str]) -> None:
    config = parse_args(argv)
    assert config.v == 3
    assert config.is_set("v")


def test_short_help() -> None:
    assert parse_args(["-h"]).help is True
    assert parse_args(["--help"]).help is True
    assert parse_args(["-h=false"]).help is False


def test_short_flags_combine_like_pflag() -> None:
    config = parse_args(["-hv=4"])
    assert config.help and config.v == 4


def test_unknown_flags() -> None:
    assert errors_of(["--foo"]) == ["unknown flag: --foo"]
    assert errors_of(["--foo=bar"]) == ["unknown flag: --foo"]
    assert errors_of(["-x"]) == ["unknown shorthand flag: 'x' in -x"]
    assert errors_of(["-secure-port=1"]) == ["unknown shorthand flag: 's' in -secure-port=1"]
    assert errors_of(["---x"]) == ["bad flag syntax: ---x"]


def test_missing_values() -> None:
    assert errors_of(["--secure-port"]) == ["flag needs an argument: --secure-port"]
    assert errors_of(["-v"]) == ["flag needs an argument: 'v' in -v"]


def test_next_argument_is_taken_as_value_even_with_dashes() -> None:
    errors = errors_of(["--secure-port", "--bind-address=1.2.3.4"])
    assert errors == [
        'invalid argument "--bind-address=1.2.3.4" for "--secure-port" flag: '
        'strconv.ParseInt: parsing "--bind-address=1.2.3.4": invalid syntax'
    ]


def test_positional_arguments_are_refused() -> None:
    assert errors_of(["serve", "now"]) == [
        '"apiserver" does not take any arguments, got ["serve" "now"]'
    ]
    assert errors_of(["--", "--secure-port=1"]) == [
        '"apiserver" does not take any arguments, got ["--secure-port=1"]'
    ]
    assert errors_of(["-"]) == ['"apiserver" does not take any arguments, got ["-"]']


def test_bad_typed_values_name_the_flag() -> None:
    assert errors_of(["--request-timeout=5x"]) == [
        'invalid argument "5x" for "--request-timeout" flag: time: unknown unit "x" in '
        'duration "5x"'
    ]
    assert errors_of(["-v", "x"]) == [
        'invalid argument "x" for "-v, --v" flag: strconv.ParseInt: parsing "x": invalid syntax'
    ]
    assert errors_of(["--goaway-chance=lots"])[0].startswith(
        'invalid argument "lots" for "--goaway-chance" flag: strconv.ParseFloat'
    )
    assert errors_of(["--bind-address=nowhere"]) == [
        'invalid argument "nowhere" for "--bind-address" flag: failed to parse IP: "nowhere"'
    ]


def test_aliases_map_to_the_canonical_flag() -> None:
    config = parse_args(
        [
            "--etcd-servers=http://127.0.0.1:2379",
            "--etcd-prefix=/other",
            "--kubelet-timeout=10s",
            "--etcd_healthcheck_timeout=3s",
            "--kubernetes-service-node-port=30001",
        ]
    )
    assert config.store_servers == ("http://127.0.0.1:2379",)
    assert config.store_prefix == "/other"
    assert config.nodeagent_timeout == 10.0
    assert config.store_healthcheck_timeout == 3.0
    assert config.platform_service_node_port == 30001
    assert config.is_set("store-servers") and config.is_set("etcd-servers")
    assert "etcd-servers" not in config.values


def test_alias_errors_name_the_spelling_used() -> None:
    assert errors_of(["--kubelet-timeout=soon"])[0].startswith(
        'invalid argument "soon" for "--kubelet-timeout" flag'
    )


def test_repeated_list_flags_accumulate() -> None:
    config = parse_args(
        [
            "--store-servers=http://a:2379,http://b:2379",
            "--store-servers=http://c:2379",
            "--oidc-signing-algs=RS384",
            "--tls-sni-cert-key=a.crt,a.key",
            "--tls-sni-cert-key=b.crt,b.key:b.example.com",
            "--service-account-key-file=a.pem",
            "--service-account-key-file=b.pem",
        ]
    )
    assert config.store_servers == ("http://a:2379", "http://b:2379", "http://c:2379")
    assert config.oidc_signing_algs == ("RS384",)  # the first occurrence replaces the default
    assert config.tls_sni_cert_key == ("a.crt,a.key", "b.crt,b.key:b.example.com")
    assert config.service_account_key_file == ("a.pem", "b.pem")


def test_repeated_map_flags_merge() -> None:
    config = parse_args(
        [
            "--feature-gates=A=true,B=true",
            "--feature-gates=B=false",
            "--oidc-issuer-url=https://issuer.example",
            "--oidc-client-id=x",
            "--oidc-required-claim=a=1",
            "--oidc-required-claim=b=2",
            "--runtime-config=api/all=false",
            "--runtime-config=events.k8s.io/v1",
            "--allow-metric-labels=m1,l1='a,b'",
            "--allow-metric-labels=m2,l2=c",
        ]
    )
    assert config.feature_gates == {"A": True, "B": False}
    assert config.oidc_required_claim == {"a": "1", "b": "2"}
    assert config.runtime_config == {"api/all": "false", "events.k8s.io/v1": ""}
    assert config.allow_metric_labels == {"m1,l1": ("a", "b"), "m2,l2": ("c",)}


def test_repeated_scalar_flags_keep_the_last() -> None:
    config = parse_args(["--secure-port=1", "--secure-port=2", "--vmodule=a=1", "--vmodule=b=2"])
    assert config.secure_port == 2
    assert config.vmodule == (("b", 2),)


def test_typed_values() -> None:
    config = parse_args(
        [
            "--shutdown-delay-duration=1m30s",
            "--service-cluster-ip-range=10.96.0.0/12,fd00::/108",
            "--service-node-port-range=20000+100",
            "--log-text-info-buffer-size=64Ki",
            "--feature-gates=LoggingAlphaOptions=true",
            "--goaway-chance=0.001",
            "--vmodule=server*=4",
        ]
    )
    assert config.shutdown_delay_duration == 90.0
    assert config.service_cluster_ip_range == (
        ipaddress.ip_network("10.96.0.0/12"),
        ipaddress.ip_network("fd00::/108"),
    )
    assert config.service_node_port_range == (20000, 20100)
    assert config.log_text_info_buffer_size == 65536
    assert config.goaway_chance == 0.001
    assert config.vmodule == (("server*", 4),)


def test_empty_list_value_clears_the_default() -> None:
    config = parse_args(["--oidc-signing-algs="])
    assert config.oidc_signing_algs == ()


def test_every_parse_error_is_reported_at_once() -> None:
    errors = errors_of(
        ["--foo", "--secure-port=x", "-q", "extra", "--request-timeout=1", "--goaway-chance=1"]
    )
    assert errors == [
        "unknown flag: --foo",
        'invalid argument "x" for "--secure-port" flag: strconv.ParseInt: parsing "x": '
        "invalid syntax",
        "unknown shorthand flag: 'q' in -q",
        'invalid argument "1" for "--request-timeout" flag: time: missing unit in duration "1"',
        '"apiserver" does not take any arguments, got ["extra"]',
        "--goaway-chance can not be less than 0 or greater than 0.02",
    ]


def test_deprecated_flags_warn() -> None:
    config = parse_args(["--enable-logs-handler", "--admission-control=NamespaceLifecycle"])
    assert config.warnings == (
        "Flag --enable-logs-handler has been deprecated, the /logs handler will be removed in a "
        "future release",
        "Flag --admission-control has been deprecated, use --enable-admission-plugins or "
        "--disable-admission-plugins instead; it will be removed in a future version",
    )


def test_help_and_version_skip_semantic_validation() -> None:
    assert parse_args(["--help", "--secure-port=0"]).help
    assert parse_args(["--version", "--secure-port=0"]).values["version"] == "true"
    assert errors_of(["--help", "--secure-port=x"])  # syntax errors still count
    with pytest.raises(OptionsError):
        parse_args(["--version=v1.36.0", "--secure-port=0"])  # does not exit, so validated


def test_version_override() -> None:
    config = parse_args(["--version=v1.36.2"])
    assert config.version == "v1.36.2"
    assert config.values["version"] == "v1.36.2"
    assert parse_args(["--version=false"]).version == DEFAULT_GIT_VERSION


class TestServerConfig:
    def test_is_frozen(self) -> None:
        config = parse_args([])
        with pytest.raises(AttributeError):
            config.secure_port = 1  # type: ignore[misc]
        with pytest.raises(AttributeError):
            config.anything = 1  # __setattr__ refuses it (mypy allows it: __setattr__ exists)
        with pytest.raises(TypeError):
            config.values["secure-port"] = 1  # type: ignore[index]

    def test_every_flag_is_an_attribute(self) -> None:
        config = parse_args([])
        for flag in FLAGS:
            if flag.name != "version":
                assert getattr(config, flag.attr) == flag.default, flag.name

    def test_unknown_attribute(self) -> None:
        # No __getattr__: a misspelt flag is an AttributeError here and a mypy error in src.
        with pytest.raises(AttributeError, match="secure_prot"):
            _ = parse_args([]).secure_prot  # type: ignore[attr-defined]
        assert not hasattr(ServerConfig, "__getattr__")
        assert not hasattr(parse_args([]), "__dict__")

    def test_is_set_rejects_unknown_names(self) -> None:
        with pytest.raises(KeyError):
            parse_args([]).is_set("secure-prot")

    def test_copy_and_pickle(self) -> None:
        config = parse_args(["--secure-port=1", "--feature-gates=A=true"])
        assert copy.deepcopy(config) == config
        assert copy.copy(config) == config
        restored = pickle.loads(pickle.dumps(config))
        assert restored == config and restored.is_set("secure-port")

    def test_evolve(self) -> None:
        config = ServerConfig.defaults().evolve(secure_port=1234, etcd_servers=("http://x:1",))
        assert config.secure_port == 1234
        assert config.store_servers == ("http://x:1",)
        assert config.is_set("secure-port") and config.is_set("store-servers")
        assert ServerConfig.defaults().secure_port == 6443

    def test_equality_and_repr(self) -> None:
        assert parse_args(["--secure-port=1"]) == parse_args(["--secure-port", "1"])
        assert parse_args(["--secure-port=6443"]) != parse_args([])  # explicitly set
        assert repr(parse_args(["--secure-port=1"])) == "ServerConfig(secure-port=1)"
