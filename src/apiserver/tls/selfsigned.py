"""The self-signed serving certificate kube-apiserver falls back to.

Reference: ``SecureServingOptions.MaybeDefaultWithSelfSignedCerts``
(``AS/pkg/server/options/serving.go``) and ``GenerateSelfSignedCertKeyWithFixtures``
(``CG/util/cert/cert.go``):

- readable ``<cert-dir>/apiserver.crt`` and ``apiserver.key`` are reused as they are (the
  reference only checks that both files can be opened, not what is in them);
- otherwise a throwaway CA (CN ``<host>-ca@<unix>``, IsCA) signs a leaf (CN
  ``<host>@<unix>``, EKU serverAuth), both RSA-2048 with random serials, valid from one hour
  ago for one year;
- SANs: the host (an IP SAN when it parses as an IP, else a DNS SAN), the service IP, the
  names ``kubernetes.default.svc``, ``kubernetes.default``, ``kubernetes``, then ``localhost``
  when the bind address is unspecified or else the bind IP;
- ``.crt`` holds the leaf PEM followed by the CA PEM, ``.key`` the PKCS#1
  ``RSA PRIVATE KEY`` (mode 0600, the certificate 0644, the directory 0755).

Deliberate additions: with an unspecified bind address ``127.0.0.1`` is added next to
``localhost`` (clients that dial the loopback IP verify against it), and ``extra_names``
(the host name, as passed by the caller) are added, each as an IP or DNS SAN. Both files are
written atomically (a temporary file in the same directory, then ``rename``) so that a crash
never leaves a half-written key behind.

Written with ``cryptography`` directly: it is the library the rest of the project uses for
certificates, and the generation is a handful of builder calls.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import ipaddress
import os
import tempfile
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from twisted.logger import Logger

log = Logger()

#: ``--tls-cert-file``'s pair name in ``--cert-dir`` (kube-apiserver's ``PairName``).
PAIR_NAME = "apiserver"
#: The names every kube-apiserver self-signed certificate carries.
SERVICE_DNS_NAMES: tuple[str, ...] = ("kubernetes.default.svc", "kubernetes.default", "kubernetes")

_RSA_BITS = 2048
_BACKDATE = _dt.timedelta(hours=1)
_MAX_AGE = _dt.timedelta(days=365)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def _parse_ip(value: str) -> IPAddress | None:
    """The IP in ``value`` (brackets and IPv4-mapped forms accepted), or None."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def is_unspecified_bind_address(bind_address: str) -> bool:
    """True for ``""``, ``0.0.0.0`` and ``::`` (Go's ``net.IP.IsUnspecified`` plus empty)."""
    if bind_address.strip() == "":
        return True
    ip = _parse_ip(bind_address)
    return ip is not None and ip.is_unspecified


def can_read_cert_and_key(cert_path: str, key_path: str) -> bool:
    """Both files exist and can be opened for reading (``certutil.CanReadCertAndKey``)."""
    for path in (cert_path, key_path):
        try:
            with open(path, "rb"):
                pass
        except OSError:
            return False
    return True


def self_signed_names(
    host: str,
    bind_address: str,
    service_ip: str | None = None,
    extra_names: Sequence[str] = (),
) -> tuple[list[str], list[IPAddress]]:
    """The DNS and IP SANs of the self-signed leaf, in the reference's order, deduplicated.

    Raises ``ValueError`` for a service IP or a specified bind address that is not an IP.
    """
    dns: list[str] = []
    ips: list[IPAddress] = []

    def add(name: str) -> None:
        name = name.strip()
        if not name:
            return
        ip = _parse_ip(name)
        if ip is not None:
            if ip not in ips:
                ips.append(ip)
        elif name not in dns:
            dns.append(name)

    add(host)
    if service_ip:
        if _parse_ip(service_ip) is None:
            raise ValueError(f"invalid service IP {service_ip!r}")
        add(service_ip)
    for name in SERVICE_DNS_NAMES:
        add(name)
    if is_unspecified_bind_address(bind_address):
        add("localhost")
        add("127.0.0.1")
    else:
        if _parse_ip(bind_address) is None:
            raise ValueError(f"invalid bind address {bind_address!r}")
        add(bind_address)
    for name in extra_names:
        add(name)
    return dns, ips


def generate_self_signed_cert_key(
    host: str,
    dns_names: Sequence[str],
    ip_addresses: Sequence[IPAddress],
    now: _dt.datetime | None = None,
) -> tuple[bytes, bytes]:
    """A fresh (certificate chain PEM, PKCS#1 key PEM) pair: leaf then CA, see module doc.

    ``dns_names``/``ip_addresses`` are the complete SAN lists (see :func:`self_signed_names`).
    """
    if now is None:
        now = _dt.datetime.now(_dt.UTC)
    elif now.tzinfo is None:
        now = now.replace(tzinfo=_dt.UTC)
    unix = int(now.timestamp())
    not_before = now - _BACKDATE
    not_after = not_before + _MAX_AGE

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=_RSA_BITS)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-ca@{unix}")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = rsa.generate_private_key(public_exponent=65537, key_size=_RSA_BITS)
    general_names: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    general_names += [x509.IPAddress(ip) for ip in ip_addresses]
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{unix}")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
            critical=False,
        )
    )
    if general_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(general_names), critical=False)
    leaf = builder.sign(ca_key, hashes.SHA256())

    cert_pem = leaf.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(
        serialization.Encoding.PEM
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,  # PKCS#1 "RSA PRIVATE KEY"
        serialization.NoEncryption(),
    )
    return cert_pem, key_pem


def write_file_atomically(path: str, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` with ``mode`` via a temporary file and ``rename``.

    The temporary file gets its final mode before any byte is written, so a key is never
    readable by others, not even for a moment.
    """
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{os.path.basename(path)}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def ensure_self_signed(
    cert_dir: str,
    host: str,
    bind_address: str,
    service_ip: str | None = None,
    extra_names: Sequence[str] = (),
    now: _dt.datetime | None = None,
) -> tuple[str, str]:
    """Return ``(<cert_dir>/apiserver.crt, <cert_dir>/apiserver.key)``, generating them if needed.

    ``host`` is the advertise address, ``service_ip`` the first IP of the service CIDR,
    ``extra_names`` further SANs (IPs or DNS names). Only called when neither
    ``--tls-cert-file`` nor ``--tls-private-key-file`` is set (the caller decides that).
    """
    cert_path = os.path.join(cert_dir, f"{PAIR_NAME}.crt")
    key_path = os.path.join(cert_dir, f"{PAIR_NAME}.key")
    if can_read_cert_and_key(cert_path, key_path):
        return cert_path, key_path

    dns_names, ip_addresses = self_signed_names(host, bind_address, service_ip, extra_names)
    cert_pem, key_pem = generate_self_signed_cert_key(host, dns_names, ip_addresses, now)
    os.makedirs(cert_dir, mode=0o755, exist_ok=True)
    write_file_atomically(key_path, key_pem, 0o600)
    write_file_atomically(cert_path, cert_pem, 0o644)
    log.info("Generated self-signed cert ({cert}, {key})", cert=cert_path, key=key_path)
    return cert_path, key_path
