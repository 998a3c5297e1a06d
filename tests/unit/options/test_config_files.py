"""Files named by flags are opened at start-up; a missing or bad one names the flag and the
file (apiserver.options.files), and the start-up "no effect yet" list is exact."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from apiserver.options import ineffective_flags, parse_args
from apiserver.options.files import ConfigFileError, TracingConfig, load_config_files


def values(*argv: str) -> dict[str, object]:
    return dict(parse_args(list(argv)).values)


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_nothing_named_nothing_read() -> None:
    assert load_config_files(values()).tracing is None


def test_tracing_configuration_is_read_and_validated(tmp_path: Path) -> None:
    good = write(
        tmp_path,
        "t.yaml",
        "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
        "endpoint: 127.0.0.1:4318\nsamplingRatePerMillion: 1000000\n",
    )
    loaded = load_config_files(values(f"--tracing-config-file={good}")).tracing
    assert loaded == TracingConfig("127.0.0.1:4318", 1_000_000)
    default = write(
        tmp_path,
        "d.yaml",
        "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: TracingConfiguration\n",
    )
    assert load_config_files(values(f"--tracing-config-file={default}")).tracing == TracingConfig()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: TracingConfiguration\napiVersion: v1\n", "no kind"),
        (
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
            "samplingRatePerMillion: -1\n",
            "sampling rate must be positive",
        ),
        (
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\n"
            "samplingRatePerMillion: 1000001\n",
            "less than or equal to one million",
        ),
        (
            "apiVersion: apiserver.config.k8s.io/v1\nkind: TracingConfiguration\nendpont: x\n",
            'unknown field "endpont"',
        ),
        ("{", "unable to decode"),
    ],
)
def test_a_bad_tracing_file_names_the_flag_and_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigFileError) as caught:
        load_config_files(values(f"--tracing-config-file={path}"))
    assert "--tracing-config-file" in str(caught.value)
    assert path in str(caught.value)
    assert message in str(caught.value)


def test_every_missing_file_is_reported_at_once(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing")
    with pytest.raises(ConfigFileError) as caught:
        load_config_files(
            {
                "tracing-config-file": f"{missing}.yaml",
                "egress-selector-config-file": f"{missing}-egress.yaml",
                "nodeagent-client-certificate": f"{missing}.crt",
                "proxy-client-key-file": f"{missing}.key",
                "peer-ca-file": f"{missing}-ca.crt",
            }
        )
    text = str(caught.value)
    for flag in (
        "--tracing-config-file",
        "--egress-selector-config-file",
        "--nodeagent-client-certificate",
        "--proxy-client-key-file",
        "--peer-ca-file",
    ):
        assert flag in text
    assert text.count("No such file") == 5


def test_egress_selector_configuration_is_validated(tmp_path: Path) -> None:
    head = "apiVersion: apiserver.config.k8s.io/v1beta1\nkind: EgressSelectorConfiguration\n"
    good = write(
        tmp_path,
        "e.yaml",
        head + "egressSelections:\n- name: cluster\n  connection:\n    proxyProtocol: Direct\n",
    )
    load_config_files(values(f"--egress-selector-config-file={good}"))
    bad = write(
        tmp_path,
        "b.yaml",
        head + "egressSelections:\n- name: moon\n  connection:\n    proxyProtocol: GRPC\n",
    )
    with pytest.raises(ConfigFileError) as caught:
        load_config_files(values(f"--egress-selector-config-file={bad}"))
    assert "transport must be set for GRPC" in str(caught.value)
    assert 'Unsupported value: "moon"' in str(caught.value)


def _pem_pair(tmp_path: Path) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "proxy")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    cert_path = tmp_path / "p.crt"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path = tmp_path / "p.key"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(cert_path), str(key_path)


def test_pem_files_must_hold_what_their_flag_says(tmp_path: Path) -> None:
    cert, key = _pem_pair(tmp_path)
    load_config_files(values(f"--proxy-client-cert-file={cert}", f"--proxy-client-key-file={key}"))
    with pytest.raises(ConfigFileError, match="--proxy-client-key-file"):
        load_config_files(
            values(f"--proxy-client-cert-file={cert}", f"--proxy-client-key-file={cert}")
        )
    with pytest.raises(ConfigFileError, match="--peer-ca-file"):
        load_config_files({"peer-ca-file": key})


def test_flags_that_act_are_not_listed_as_having_no_effect(tmp_path: Path) -> None:
    config = parse_args(
        [
            "--external-hostname=api.example.com",
            "--feature-gates=ExternalServiceAccountTokenSigner=false",
            "--show-hidden-metrics-for-version=1.34",
            "--allow-metric-labels=apiserver_request_total,code='200'",
            "--allow-privileged=true",
            "--permit-address-sharing=true",
        ]
    )
    # Twisted always sets SO_REUSEADDR: the flag changes nothing, so it is listed.
    assert ineffective_flags(config) == ["permit-address-sharing", "allow-privileged"]
