"""Certificate factories and in-memory TLS handshakes for the tls tests."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import CertificateIssuerPrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from OpenSSL import SSL

NOW = dt.datetime.now(dt.UTC)


@dataclass
class Issued:
    cert: x509.Certificate
    key: CertificateIssuerPrivateKeyTypes

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def cn(self) -> str:
        value = self.cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
        assert isinstance(value, str)
        return value


_RSA_KEYS: dict[str | None, rsa.RSAPrivateKey] = {}


def _key(kind: str, cn: str | None) -> CertificateIssuerPrivateKeyTypes:
    """A fresh EC key, or the RSA key for this CN (RSA generation is slow; one per name)."""
    if kind == "ec":
        return ec.generate_private_key(ec.SECP256R1())
    if cn not in _RSA_KEYS:
        _RSA_KEYS[cn] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return _RSA_KEYS[cn]


def issue(
    cn: str | None,
    *,
    issuer: Issued | None = None,
    ca: bool = False,
    dns: Sequence[str] = (),
    ips: Sequence[str] = (),
    eku: Sequence[x509.ObjectIdentifier] = (),
    key_kind: str = "ec",
    orgs: Sequence[str] = (),
) -> Issued:
    """A certificate for ``cn`` signed by ``issuer`` (self-signed when None)."""
    key = _key(key_kind, cn)
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in orgs]
    if cn is not None:
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    subject = x509.Name(attrs)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.cert.subject if issuer else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(NOW - dt.timedelta(hours=1))
        .not_valid_after(NOW + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns]
    names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    if eku:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(eku)), critical=False)
    signer = issuer.key if issuer else key
    return Issued(builder.sign(signer, hashes.SHA256()), key)


def server_cert(cn: str, dns: Sequence[str] = (), ips: Sequence[str] = ()) -> Issued:
    return issue(cn, dns=dns, ips=ips, eku=[ExtendedKeyUsageOID.SERVER_AUTH], key_kind="rsa")


def client_cert(cn: str, issuer: Issued, orgs: Sequence[str] = ()) -> Issued:
    return issue(cn, issuer=issuer, eku=[ExtendedKeyUsageOID.CLIENT_AUTH], orgs=orgs)


def write_pair(
    directory: Path, name: str, item: Issued, chain: Sequence[Issued] = ()
) -> tuple[str, str]:
    """Write ``<name>.crt`` (leaf + chain) and ``<name>.key``; return their paths."""
    cert_path = directory / f"{name}.crt"
    key_path = directory / f"{name}.key"
    cert_path.write_bytes(item.cert_pem() + b"".join(c.cert_pem() for c in chain))
    key_path.write_bytes(item.key_pem())
    return str(cert_path), str(key_path)


def write_cert(directory: Path, name: str, *items: Issued) -> str:
    path = directory / name
    path.write_bytes(b"".join(item.cert_pem() for item in items))
    return str(path)


def common_name(cert: x509.Certificate) -> str:
    value = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value
    assert isinstance(value, str)
    return value


@dataclass
class HandshakeResult:
    client: SSL.Connection
    server: SSL.Connection


def client_context(
    *,
    alpn: Sequence[bytes] = (),
    cert: Issued | None = None,
    max_version: int | None = None,
    min_version: int | None = None,
    ciphers: bytes | None = None,
) -> SSL.Context:
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    context.set_verify(SSL.VERIFY_NONE)
    if ciphers is not None:
        context.set_cipher_list(ciphers)
    if min_version is not None:
        context.set_min_proto_version(min_version)
    if max_version is not None:
        context.set_max_proto_version(max_version)
    if alpn:
        context.set_alpn_protos(list(alpn))
    if cert is not None:
        context.use_certificate(cert.cert)
        context.use_privatekey(cert.key)  # type: ignore[arg-type]
    return context


def handshake(
    server: SSL.Connection, client_ctx: SSL.Context, server_name: bytes | None = None
) -> HandshakeResult:
    """Run a complete handshake in memory (no sockets); SSL.Error propagates."""
    client = SSL.Connection(client_ctx, None)
    client.set_connect_state()
    if server_name is not None:
        client.set_tlsext_host_name(server_name)
    server.set_accept_state()
    client_done = server_done = False
    for _ in range(50):
        if not client_done:
            try:
                client.do_handshake()
                client_done = True
            except SSL.WantReadError:
                pass
        _pump(client, server)
        if not server_done:
            try:
                server.do_handshake()
                server_done = True
            except SSL.WantReadError:
                pass
        _pump(server, client)
        if client_done and server_done:
            # TLS 1.3: let the server see the client's Finished/Certificate.
            _drain(server)
            return HandshakeResult(client, server)
    raise AssertionError("handshake did not complete")


def _pump(source: SSL.Connection, target: SSL.Connection) -> None:
    while True:
        try:
            data = source.bio_read(65536)
        except SSL.WantReadError:
            return
        if not data:
            return
        target.bio_write(data)


def _drain(connection: SSL.Connection) -> None:
    try:
        connection.recv(1)
    except (SSL.WantReadError, SSL.ZeroReturnError):
        pass
