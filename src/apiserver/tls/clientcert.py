"""A client CA and client certificates for local use: ``make run``'s admin and the tests.

kube-apiserver's x509 authenticator takes the user from the certificate's CN and the groups
from its O entries; a ``system:masters`` certificate is what kubeadm gives its admin. We make
the same for ``make run`` so that kubectl works without a prompt once authentication is on.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from apiserver.tls.selfsigned import write_file_atomically


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def ensure_client_ca(directory: str, name: str = "client-ca") -> tuple[str, str]:
    """``<dir>/<name>.crt`` and ``.key``, created once (an EC P-256 CA valid ten years)."""
    cert_path = os.path.join(directory, f"{name}.crt")
    key_path = os.path.join(directory, f"{name}.key")
    if os.path.exists(cert_path) and os.path.exists(key_path):
        return cert_path, key_path
    os.makedirs(directory, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _dt.datetime.now(_dt.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}@{int(now.timestamp())}")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(hours=1))
        .not_valid_after(now + _dt.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    write_file_atomically(key_path, _key_pem(key), 0o600)
    write_file_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert_path, key_path


def issue_client_cert(
    ca_cert_path: str,
    ca_key_path: str,
    directory: str,
    user: str,
    groups: Sequence[str] = (),
    days: int = 365,
) -> tuple[str, str]:
    """A client certificate for ``user`` in ``groups``: ``<dir>/<user>.crt`` and ``.key``."""
    ca_cert = x509.load_pem_x509_certificate(open(ca_cert_path, "rb").read())
    ca_key = serialization.load_pem_private_key(open(ca_key_path, "rb").read(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = _dt.datetime.now(_dt.UTC)
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(attributes))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(hours=1))
        .not_valid_after(now + _dt.timedelta(days=days))
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    safe = user.replace(":", "_").replace("/", "_")
    cert_path = os.path.join(directory, f"{safe}.crt")
    key_path = os.path.join(directory, f"{safe}.key")
    write_file_atomically(key_path, _key_pem(key), 0o600)
    write_file_atomically(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert_path, key_path
