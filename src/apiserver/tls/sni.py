"""``--tls-sni-cert-key``: parsing, certificate names, and the lookup rule.

References:

- syntax: ``k8s.io/component-base/cli/flag/namedcertkey_flag.go`` -- ``cert,key`` or
  ``cert,key:name1,name2``; the value is split at the *first* colon, spaces around parts are
  trimmed, an empty names list and anything but exactly two files are errors (the error texts
  are the reference's);
- names: ``AS/pkg/server/dynamiccertificates/named_certificates.go`` -- without explicit
  names a certificate answers to its CN (only when the CN is ``*`` or a DNS-1123 subdomain,
  optionally with a ``*.`` prefix, and not an IP) and its DNS SANs; explicit names always beat
  extracted ones, and for the same name the *earlier* flag wins;
- lookup: Go's ``tls.Config.getCertificate`` plus kube's ``GetConfigForClient``
  (``dynamiccertificates/tlsconfig.go``) -- the lower-cased SNI exactly, then with its first
  label replaced by ``*`` (so ``*.foo.com`` matches ``a.foo.com``, never ``foo.com`` or
  ``a.b.foo.com``); this is not a longest-match search. Without SNI, the local IP the client
  connected to is looked up exactly. No match: the default certificate (``None`` here).

Trailing dots in the SNI are trimmed (the spec's rule; Go clients never send them).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import NameOID

T = TypeVar("T")

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*")
_DNS1123_SUBDOMAIN_MAX = 253
_SLOPPY_IPV4 = re.compile(r"(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})")


@dataclass(frozen=True)
class SniCertKey:
    """One ``--tls-sni-cert-key`` value: the files and the explicit names (maybe none)."""

    cert_file: str
    key_file: str
    names: tuple[str, ...] = ()

    def __str__(self) -> str:
        text = f"{self.cert_file},{self.key_file}"
        if self.names:
            text += ":" + ",".join(self.names)
        return text


def parse_sni_cert_key(value: str) -> SniCertKey:
    """Parse ``cert,key`` or ``cert,key:name,...`` exactly as component-base does.

    ``ValueError`` texts: ``empty names list is not allowed`` and ``expected comma separated
    certificate and key file paths``.
    """
    names: tuple[str, ...] = ()
    head, sep, tail = value.partition(":")
    if sep:
        keycert, names_text = head.strip(), tail.strip()
        if names_text == "":
            raise ValueError("empty names list is not allowed")
        names = tuple(name.strip() for name in names_text.split(","))
    else:
        keycert = head.strip()
    files = keycert.split(",")
    if len(files) != 2:
        raise ValueError("expected comma separated certificate and key file paths")
    return SniCertKey(cert_file=files[0].strip(), key_file=files[1].strip(), names=names)


def _is_ip_sloppy(text: str) -> bool:
    """Go's ``netutils.ParseIPSloppy``: IPs, also IPv4 with leading zeros (``010.0.0.1``)."""
    try:
        ipaddress.ip_address(text)
    except ValueError:
        match = _SLOPPY_IPV4.fullmatch(text)
        return match is not None and all(int(part) <= 255 for part in match.groups())
    return True


def _is_dns1123_subdomain(text: str) -> bool:
    return len(text) <= _DNS1123_SUBDOMAIN_MAX and _DNS1123_SUBDOMAIN.fullmatch(text) is not None


def certificate_names(cert: x509.Certificate) -> list[str]:
    """The names a certificate answers to without explicit names: usable CN, then DNS SANs.

    IP SANs are ignored on purpose (SNI never carries an IP), and so is a CN that is an IP.
    """
    names: list[str] = []
    cns = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    if cns:
        cn = cns[0].value
        if isinstance(cn, bytes):
            cn = cn.decode("utf-8", "replace")
        stripped = cn[2:] if cn.startswith("*.") else cn
        if not _is_ip_sloppy(cn) and (cn == "*" or _is_dns1123_subdomain(stripped)):
            names.append(cn)
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return names
    names.extend(san.value.get_values_for_type(x509.DNSName))
    return names


def build_name_map(entries: Sequence[tuple[Sequence[str], bool]]) -> dict[str, int]:
    """Map each name to the index of the entry that serves it.

    ``entries`` are ``(names, explicit)`` in flag order. Explicit names override extracted
    names; among entries of the same kind, the earlier one wins.
    """
    explicit: dict[str, int] = {}
    extracted: dict[str, int] = {}
    for index in range(len(entries) - 1, -1, -1):
        names, is_explicit = entries[index]
        target = explicit if is_explicit else extracted
        for name in names:
            target[name] = index
    extracted.update(explicit)
    return extracted


def normalize_local_ip(host: str) -> str:
    """The local address as Go prints it: IPv4-mapped IPv6 becomes dotted IPv4."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def lookup(
    names: Mapping[str, T],
    server_name: str | bytes | None,
    local_ip: str | None = None,
) -> T | None:
    """The entry serving this handshake, or ``None`` for the default certificate.

    ``server_name`` is the SNI as sent (``None`` or empty: no SNI); ``local_ip`` is the
    address the client connected to, used only when there is no SNI.
    """
    if isinstance(server_name, bytes):
        server_name = server_name.decode("ascii", "replace")
    if server_name:
        name = server_name.lower().rstrip(".")
        found = names.get(name)
        if found is not None:
            return found
        if name:
            labels = name.split(".")
            labels[0] = "*"
            return names.get(".".join(labels))
        return None
    if local_ip:
        return names.get(normalize_local_ip(local_ip))
    return None


@dataclass(frozen=True)
class CertKey:
    """A loaded certificate chain (leaf first) and its private key."""

    chain: tuple[x509.Certificate, ...]
    key: PrivateKeyTypes
    cert_file: str
    key_file: str

    @property
    def leaf(self) -> x509.Certificate:
        return self.chain[0]


def _public_der(key: object) -> bytes:
    public_bytes = getattr(key, "public_bytes", None)
    if public_bytes is None:
        return b""
    der: bytes = public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return der


def read_file(path: str) -> bytes:
    """The bytes of ``path`` (the default reader of the loaders below)."""
    with open(path, "rb") as handle:
        return handle.read()


def load_cert_key(
    cert_file: str, key_file: str, read: Callable[[str], bytes] = read_file
) -> CertKey:
    """Load a PEM chain and PEM key and check they belong together (Go's ``X509KeyPair``).

    ``read`` returns a file's bytes (injectable so a caller can build from one snapshot).
    Errors are ``ValueError``/``OSError`` naming the files.
    """
    if not cert_file or not key_file:
        raise ValueError(f"missing filename for serving cert ({cert_file!r}, {key_file!r})")
    cert_pem = read(cert_file)
    key_pem = read(key_file)
    try:
        chain = tuple(x509.load_pem_x509_certificates(cert_pem))
    except ValueError as error:
        raise ValueError(f"{cert_file}: failed to find any PEM certificate: {error}") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{key_file}: failed to parse private key: {error}") from None
    if _public_der(chain[0].public_key()) != _public_der(key.public_key()):
        raise ValueError(f"{cert_file}, {key_file}: tls: private key does not match public key")
    return CertKey(chain=chain, key=key, cert_file=cert_file, key_file=key_file)


@dataclass(frozen=True)
class NamedCertKey:
    """A loaded ``--tls-sni-cert-key``: its certificate and the names it serves."""

    spec: SniCertKey
    cert_key: CertKey
    names: tuple[str, ...]
    explicit: bool


def load_sni_cert_key(spec: SniCertKey, read: Callable[[str], bytes] = read_file) -> NamedCertKey:
    """Load one SNI pair and work out its names (explicit, else extracted)."""
    cert_key = load_cert_key(spec.cert_file, spec.key_file, read)
    if spec.names:
        return NamedCertKey(spec, cert_key, spec.names, explicit=True)
    extracted = tuple(certificate_names(cert_key.leaf))
    return NamedCertKey(spec, cert_key, extracted, explicit=False)
