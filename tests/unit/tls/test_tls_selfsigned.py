"""The self-signed fallback pair: names, chain, key format, reuse, validity."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.tls.selfsigned import ensure_self_signed, is_unspecified_bind_address

NOW = dt.datetime(2025, 3, 4, 5, 6, 7, tzinfo=dt.UTC)
UNIX = int(NOW.timestamp())


def load(cert_path: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(Path(cert_path).read_bytes())


def cn(cert: x509.Certificate) -> str:
    value = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert isinstance(value, str)
    return value


def sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return (
        ext.get_values_for_type(x509.DNSName),
        [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)],
    )


def test_paths_files_and_modes(tmp_path: Path) -> None:
    cert_dir = tmp_path / "certs" / "nested"
    cert_path, key_path = ensure_self_signed(str(cert_dir), "10.0.0.5", "0.0.0.0", now=NOW)
    assert cert_path == str(cert_dir / "apiserver.crt")
    assert key_path == str(cert_dir / "apiserver.key")
    assert stat.S_IMODE(os.stat(key_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(cert_path).st_mode) == 0o644
    assert os.stat(cert_dir).st_mode & 0o700 == 0o700
    # Atomic writes leave no temporary files behind.
    assert sorted(os.listdir(cert_dir)) == ["apiserver.crt", "apiserver.key"]


def test_chain_order_names_and_extensions(tmp_path: Path) -> None:
    cert_path, _ = ensure_self_signed(
        str(tmp_path),
        "10.0.0.5",
        "0.0.0.0",
        service_ip="10.96.0.1",
        extra_names=["myhost.example", "10.0.0.5"],
        now=NOW,
    )
    certs = load(cert_path)
    assert len(certs) == 2
    leaf, ca = certs
    assert cn(leaf) == f"10.0.0.5@{UNIX}"
    assert cn(ca) == f"10.0.0.5-ca@{UNIX}"
    assert leaf.issuer == ca.subject
    assert ca.issuer == ca.subject
    leaf.verify_directly_issued_by(ca)
    ca.verify_directly_issued_by(ca)

    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign is True
    eku = leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]

    dns, ips = sans(leaf)
    assert dns == [
        "kubernetes.default.svc",
        "kubernetes.default",
        "kubernetes",
        "localhost",
        "myhost.example",
    ]
    assert ips == ["10.0.0.5", "10.96.0.1", "127.0.0.1"]

    for cert in certs:
        assert isinstance(cert.public_key(), rsa.RSAPublicKey)
        assert cert.public_key().key_size == 2048  # type: ignore[union-attr]
    assert leaf.serial_number != ca.serial_number


def test_dns_host_and_specific_bind_address(tmp_path: Path) -> None:
    cert_path, _ = ensure_self_signed(str(tmp_path), "api.example.com", "192.168.1.10", now=NOW)
    leaf, ca = load(cert_path)
    assert cn(leaf) == f"api.example.com@{UNIX}"
    assert cn(ca) == f"api.example.com-ca@{UNIX}"
    dns, ips = sans(leaf)
    assert dns == ["api.example.com", "kubernetes.default.svc", "kubernetes.default", "kubernetes"]
    assert ips == ["192.168.1.10"]  # no localhost/127.0.0.1 for a specific bind address


def test_ipv6_host_and_unspecified_ipv6_bind(tmp_path: Path) -> None:
    cert_path, _ = ensure_self_signed(str(tmp_path), "fd00::5", "::", now=NOW)
    leaf, _ = load(cert_path)
    dns, ips = sans(leaf)
    assert "localhost" in dns
    assert ips == ["fd00::5", "127.0.0.1"]


@pytest.mark.parametrize(
    ("address", "expected"),
    [("", True), ("0.0.0.0", True), ("::", True), ("127.0.0.1", False), ("::1", False)],
)
def test_unspecified_bind_address(address: str, expected: bool) -> None:
    assert is_unspecified_bind_address(address) is expected


def test_key_is_pkcs1_and_matches_leaf(tmp_path: Path) -> None:
    cert_path, key_path = ensure_self_signed(str(tmp_path), "10.0.0.5", "", now=NOW)
    key_pem = Path(key_path).read_bytes()
    assert key_pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    assert key_pem.rstrip().endswith(b"-----END RSA PRIVATE KEY-----")
    key = serialization.load_pem_private_key(key_pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    assert key.key_size == 2048
    leaf = load(cert_path)[0]
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(
        serialization.Encoding.DER, spki
    ) == leaf.public_key().public_bytes(serialization.Encoding.DER, spki)
    # The CA's key is a different, thrown-away key.
    ca = load(cert_path)[1]
    assert ca.public_key().public_bytes(
        serialization.Encoding.DER, spki
    ) != leaf.public_key().public_bytes(serialization.Encoding.DER, spki)


def test_validity_window(tmp_path: Path) -> None:
    cert_path, _ = ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0", now=NOW)
    for cert in load(cert_path):
        assert cert.not_valid_before_utc == NOW - dt.timedelta(hours=1)
        assert cert.not_valid_after_utc == NOW - dt.timedelta(hours=1) + dt.timedelta(days=365)


def test_default_now_is_current_time(tmp_path: Path) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    cert_path, _ = ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0")
    leaf = load(cert_path)[0]
    start = leaf.not_valid_before_utc + dt.timedelta(hours=1)
    assert before - dt.timedelta(seconds=1) <= start <= dt.datetime.now(dt.UTC)


def test_serials_are_random(tmp_path: Path) -> None:
    first, _ = ensure_self_signed(str(tmp_path / "a"), "10.0.0.5", "0.0.0.0", now=NOW)
    second, _ = ensure_self_signed(str(tmp_path / "b"), "10.0.0.5", "0.0.0.0", now=NOW)
    serials = {cert.serial_number for path in (first, second) for cert in load(path)}
    assert len(serials) == 4
    assert not serials & {1, 2}


def test_existing_readable_files_are_reused_unchanged(tmp_path: Path) -> None:
    cert_path, key_path = ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0", now=NOW)
    original = Path(cert_path).read_bytes(), Path(key_path).read_bytes()
    again = ensure_self_signed(str(tmp_path), "other-host", "127.0.0.1")
    assert again == (cert_path, key_path)
    assert (Path(cert_path).read_bytes(), Path(key_path).read_bytes()) == original

    # Like certutil.CanReadCertAndKey, only readability counts, not the content.
    Path(cert_path).write_bytes(b"not a certificate")
    ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0")
    assert Path(cert_path).read_bytes() == b"not a certificate"


def test_missing_half_regenerates_both(tmp_path: Path) -> None:
    cert_path, key_path = ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0", now=NOW)
    old_cert = Path(cert_path).read_bytes()
    os.unlink(key_path)
    ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0", now=NOW)
    assert Path(key_path).exists()
    assert Path(cert_path).read_bytes() != old_cert
    leaf = load(cert_path)[0]
    key = serialization.load_pem_private_key(Path(key_path).read_bytes(), password=None)
    der = serialization.Encoding.DER
    spki = serialization.PublicFormat.SubjectPublicKeyInfo
    assert key.public_key().public_bytes(der, spki) == leaf.public_key().public_bytes(der, spki)


def test_bad_addresses_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="bind address"):
        ensure_self_signed(str(tmp_path), "10.0.0.5", "not-an-ip")
    with pytest.raises(ValueError, match="service IP"):
        ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0", service_ip="nope")
    assert not (tmp_path / "apiserver.key").exists()


def test_ip_sans_are_real_ip_entries(tmp_path: Path) -> None:
    cert_path, _ = ensure_self_signed(str(tmp_path), "10.0.0.5", "0.0.0.0", now=NOW)
    ext = load(cert_path)[0].extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert ipaddress.ip_address("10.0.0.5") in ext.value.get_values_for_type(x509.IPAddress)
    assert "10.0.0.5" not in ext.value.get_values_for_type(x509.DNSName)
