"""Client-certificate authentication (``--client-ca-file``).

Reference: ``AS/pkg/authentication/request/x509/x509.go``. The TLS handshake only *requests* a
certificate (``RequestClientCert``); this authenticator decides:

- no peer certificate: no opinion;
- the leaf is verified against the CA bundle with the presented chain as intermediates, at the
  current time (the injected clock), for the ``ClientAuth`` key usage; a failure is an error
  (401 even with anonymous on): ``verifying certificate SN=<dec>, SKID=<hex>, AKID=<hex>
  failed: <reason>``;
- an empty CN: no opinion; otherwise name = CN, groups = the Subject O values in order,
  uid = the Subject attribute ``1.3.6.1.4.1.57683.2`` (more than one is an error), extra
  ``authentication.kubernetes.io/credential-id: X509SHA256=<hex sha256 of the leaf DER>``.

Why OpenSSL's verifier (through pyOpenSSL) rather than cryptography's: cryptography's
``x509.verification`` enforces the CA/B Forum web PKI profile (it refuses certificates without
an authority key identifier, for example), which kubeadm-style and hand-made client CAs often
lack; Go's ``x509.Verify`` and OpenSSL's chain building accept them. Go semantics that OpenSSL
does not check by default are added here: the extended key usage of every certificate in the
chain must allow client authentication (no EKU extension, or anyExtendedKeyUsage, passes), and
a CA-bundle entry that is not self-signed is a trust anchor (``PARTIAL_CHAIN``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from OpenSSL import crypto
from twisted.internet.interfaces import IReactorTime

from apiserver.auth.authn.common import CREDENTIAL_ID, ConfigError, read_file
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo
from apiserver.auth.kubeconfig import load_pem_certificates
from apiserver.gocompat.timefmt import format_rfc3339
from apiserver.http.request import HTTPRequest
from apiserver.tls.peercert import peer_chain

#: Subject attribute carrying the user's UID (AllowParsingUserUIDFromCertAuth, on since 1.33).
UID_OID = x509.ObjectIdentifier("1.3.6.1.4.1.57683.2")

ChainGetter = Callable[[Any], Sequence[x509.Certificate]]

VERIFIED_CACHE_SIZE = 1024

# OpenSSL verification error codes (include/openssl/x509_vfy.h).
_UNKNOWN_AUTHORITY = {2, 7, 18, 19, 20, 21}
_NOT_YET_VALID = 9
_EXPIRED = 10


class CertificateError(AuthenticationError):
    """A presented client certificate did not verify."""


def _hex_colon(data: bytes | None) -> str:
    if not data:
        return ""
    return ":".join(f"{b:02X}" for b in data)


def certificate_identifier(cert: x509.Certificate) -> str:
    """``SN=<decimal>, SKID=<AA:BB..>, AKID=<..>`` (x509.go ``certificateIdentifier``)."""
    try:
        skid = cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    except x509.ExtensionNotFound:
        skid = None
    try:
        akid = cert.extensions.get_extension_for_class(
            x509.AuthorityKeyIdentifier
        ).value.key_identifier
    except x509.ExtensionNotFound:
        akid = None
    return f"SN={cert.serial_number}, SKID={_hex_colon(skid)}, AKID={_hex_colon(akid)}"


def _allows_client_auth(cert: x509.Certificate) -> bool:
    try:
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True
    return any(
        oid in (ExtendedKeyUsageOID.CLIENT_AUTH, ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE)
        for oid in usages
    )


class ChainVerifier:
    """Verifies client certificate chains against a CA bundle, Go ``x509.Verify`` style."""

    def __init__(self, roots: Sequence[x509.Certificate], clock: IReactorTime) -> None:
        if not roots:
            raise ValueError("no CA certificate")
        self.roots = tuple(roots)
        self.clock = clock
        self._roots = [crypto.X509.from_cryptography(cert) for cert in roots]
        self._root_ders: set[bytes] = set()
        # Verified chains, so that the requests of one connection (whose chain object
        # peercert caches) do not pay for OpenSSL's verification each time: chain ->
        # (valid from, valid until, verified chain). Only successes are kept; the bundle
        # never changes while the server runs.
        self._verified: dict[
            tuple[x509.Certificate, ...], tuple[float, float, list[x509.Certificate]]
        ] = {}
        for cert in roots:
            self._root_ders.add(cert.public_bytes(serialization.Encoding.DER))

    @classmethod
    def from_file(cls, path: str, flag: str, clock: IReactorTime) -> ChainVerifier:
        """The bundle in ``path``; ConfigError naming ``--flag`` and the file otherwise."""
        data = read_file(path, flag)
        try:
            return cls(load_pem_certificates(data, path), clock)
        except ValueError as error:
            raise ConfigError(f"--{flag}: {error}") from None

    def overlaps(self, other: ChainVerifier) -> bool:
        """Whether the two bundles share a certificate."""
        return bool(self._root_ders & other._root_ders)

    def verify(self, chain: Sequence[x509.Certificate]) -> list[x509.Certificate]:
        """The verified chain, leaf first; CertificateError with Go's wording otherwise."""
        key = tuple(chain)
        seconds = self.clock.seconds()
        hit = self._verified.get(key)
        if hit is not None and hit[0] <= seconds <= hit[1]:
            return hit[2]
        verified = self._verify(chain, seconds)
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            del self._verified[next(iter(self._verified))]
        self._verified[key] = (
            max(c.not_valid_before_utc.timestamp() for c in verified),
            min(c.not_valid_after_utc.timestamp() for c in verified),
            verified,
        )
        return verified

    def _verify(self, chain: Sequence[x509.Certificate], seconds: float) -> list[x509.Certificate]:
        leaf = chain[0]
        now = _dt.datetime.fromtimestamp(seconds, _dt.UTC)
        # A new store each time: OpenSSL keeps the first verification time a store was given
        # (X509_VERIFY_PARAM inheritance), and a store is cheap next to the verification.
        store = crypto.X509Store()
        store.set_flags(crypto.X509StoreFlags.PARTIAL_CHAIN)
        for root in self._roots:
            store.add_cert(root)
        store.set_time(now.replace(tzinfo=None))
        context = crypto.X509StoreContext(
            store,
            crypto.X509.from_cryptography(leaf),
            [crypto.X509.from_cryptography(c) for c in chain[1:]],
        )
        try:
            verified = [c.to_cryptography() for c in context.get_verified_chain()]
        except crypto.X509StoreContextError as error:
            raise CertificateError(
                f"verifying certificate {certificate_identifier(leaf)} failed: "
                + self._reason(error, now)
            ) from None
        if not all(_allows_client_auth(c) for c in verified):
            raise CertificateError(
                f"verifying certificate {certificate_identifier(leaf)} failed: "
                "x509: certificate specifies an incompatible key usage"
            )
        return verified

    @staticmethod
    def _reason(error: crypto.X509StoreContextError, now: _dt.datetime) -> str:
        code = error.errors[0] if error.errors else 0
        if code in _UNKNOWN_AUTHORITY:
            return "x509: certificate signed by unknown authority"
        if code in (_EXPIRED, _NOT_YET_VALID):
            failing = error.certificate.to_cryptography()
            if code == _EXPIRED:
                bound = failing.not_valid_after_utc
                return (
                    "x509: certificate has expired or is not yet valid: current time "
                    f"{format_rfc3339(now)} is after {format_rfc3339(bound)}"
                )
            bound = failing.not_valid_before_utc
            return (
                "x509: certificate has expired or is not yet valid: current time "
                f"{format_rfc3339(now)} is before {format_rfc3339(bound)}"
            )
        text = error.errors[2] if len(error.errors) > 2 else str(error)
        return f"x509: {text}"


def common_name(cert: x509.Certificate) -> str:
    values = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(values[0].value) if values else ""


def user_from_certificate(cert: x509.Certificate) -> UserInfo | None:
    """CommonNameUserConversion, with the UID attribute and the credential id."""
    name = common_name(cert)
    if not name:
        return None
    groups = tuple(
        str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    )
    uids = cert.subject.get_attributes_for_oid(UID_OID)
    if len(uids) > 1:
        raise CertificateError("x509: the certificate subject has more than one UID")
    uid = str(uids[0].value) if uids else ""
    digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
    return UserInfo(
        name=name, uid=uid, groups=groups, extra={CREDENTIAL_ID: (f"X509SHA256={digest}",)}
    )


class X509Authenticator:
    """The ``--client-ca-file`` request authenticator."""

    def __init__(
        self,
        verifier: ChainVerifier,
        audiences: Sequence[str] = (),
        chain_of: ChainGetter = peer_chain,
    ) -> None:
        self.verifier = verifier
        self.audiences = tuple(audiences)
        self.chain_of = chain_of
        self._users: dict[x509.Certificate, tuple[AuthResult | None, float]] = {}
        #: Told the verified leaf's expiry (seconds since the epoch) on every request:
        #: ``apiserver_client_certificate_expiration_seconds`` (x509.go's
        #: ``clientCertificateExpirationHistogram``); None: nobody listens.
        self.observe_expiry: Callable[[float], None] | None = None

    def authenticate(self, request: HTTPRequest) -> AuthResult | None:
        chain = self.chain_of(request)
        if not chain:
            return None
        verified = self.verifier.verify(chain)
        leaf = verified[0]
        cached = self._users.get(leaf)
        if cached is None:
            user = user_from_certificate(leaf)
            result = None if user is None else AuthResult(user, self.audiences)
            if len(self._users) >= VERIFIED_CACHE_SIZE:
                del self._users[next(iter(self._users))]
            cached = self._users[leaf] = (result, leaf.not_valid_after_utc.timestamp())
        if self.observe_expiry is not None:
            self.observe_expiry(cached[1])
        return cached[0]
