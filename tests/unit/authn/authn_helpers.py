"""Test doubles for the authenticator tests: requests, certificates, keys, a store, a clock."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from tests.unit.fake_request import FakeRequest as CompleteRequest
from tests.unit.unit_helpers import FakeStore, result_of  # noqa: F401 - shared here too

NOW = 1_800_000_000.0  # 2027-01-15, the clock every test starts at

_RSA: dict[str, rsa.RSAPrivateKey] = {}


def rsa_key(name: str = "default") -> rsa.RSAPrivateKey:
    """One RSA key per name for the whole run (generation is slow)."""
    if name not in _RSA:
        _RSA[name] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return _RSA[name]


def ec_key(curve: ec.EllipticCurve | None = None) -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(curve or ec.SECP256R1())


def pem_private(key: Any) -> bytes:
    return bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )


def pem_public(key: Any) -> bytes:
    return bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


class Issued:
    def __init__(self, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
        self.cert = cert
        self.key = key

    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)


def issue(
    cn: str | None,
    *,
    issuer: Issued | None = None,
    ca: bool = False,
    orgs: Sequence[str] = (),
    eku: Sequence[x509.ObjectIdentifier] | None = (ExtendedKeyUsageOID.CLIENT_AUTH,),
    not_before: float = NOW - 3600,
    not_after: float = NOW + 86400,
    extra_attributes: Sequence[x509.NameAttribute] = (),
    serial: int | None = None,
    key_ids: bool = False,
) -> Issued:
    """A certificate (EC P-256) signed by ``issuer``, self-signed when None."""
    key = ec.generate_private_key(ec.SECP256R1())
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    attributes.extend(extra_attributes)
    if cn is not None:
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    subject = x509.Name(attributes)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(serial or x509.random_serial_number())
        .not_valid_before(dt.datetime.fromtimestamp(not_before, dt.UTC))
        .not_valid_after(dt.datetime.fromtimestamp(not_after, dt.UTC))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
    if eku and not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(eku)), critical=False)
    if key_ids:
        builder = builder.add_extension(
            x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
        )
        signer_key = issuer.key if issuer else key
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(signer_key.public_key()),
            critical=False,
        )
    cert = builder.sign(issuer.key if issuer else key, hashes.SHA256())
    return Issued(cert, key)


class FakeRequest(CompleteRequest):
    """A request with the headers and client certificate chain the authenticators read."""

    def __init__(
        self,
        headers: dict[str, str | list[str]] | None = None,
        path: bytes = b"/api/v1/namespaces",
        chain: Sequence[x509.Certificate] = (),
    ) -> None:
        super().__init__(b"GET", path)
        for name, value in (headers or {}).items():
            values = value if isinstance(value, list) else [value]
            self.requestHeaders.setRawHeaders(name.encode(), [v.encode() for v in values])
        self.chain = list(chain)


def chain_of(request: Any) -> list[x509.Certificate]:
    return list(request.chain)
