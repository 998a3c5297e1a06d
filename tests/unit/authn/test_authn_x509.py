"""--client-ca-file: verification against the bundle, Go's error texts, the user mapping."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from authn_helpers import NOW, FakeRequest, chain_of, issue, result_of
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID
from twisted.internet.task import Clock

from apiserver.auth.authn.common import ConfigError
from apiserver.auth.authn.x509 import (
    UID_OID,
    CertificateError,
    ChainVerifier,
    X509Authenticator,
    certificate_identifier,
)


def clock_at(when: float = NOW) -> Clock:
    clock = Clock()
    clock.advance(when)
    return clock


CA = issue("client-ca", ca=True)


def authenticator(clock: Clock | None = None, roots: list[x509.Certificate] | None = None):  # type: ignore[no-untyped-def]
    verifier = ChainVerifier(roots or [CA.cert], clock or clock_at())
    return X509Authenticator(verifier, ("api",), chain_of=chain_of)


def test_cn_is_the_user_o_the_groups() -> None:
    leaf = issue("alice", issuer=CA, orgs=["system:masters", "dev"])
    result = result_of(authenticator().authenticate(FakeRequest(chain=[leaf.cert])))
    der = leaf.cert.public_bytes(serialization.Encoding.DER)
    assert result.user.name == "alice"
    assert result.user.groups == ("system:masters", "dev")
    assert result.user.uid == ""
    assert result.user.extra == {
        "authentication.kubernetes.io/credential-id": (
            f"X509SHA256={hashlib.sha256(der).hexdigest()}",
        )
    }
    assert result.audiences == ("api",)


def test_uid_attribute() -> None:
    leaf = issue("bob", issuer=CA, extra_attributes=[x509.NameAttribute(UID_OID, "uid-7")])
    assert result_of(authenticator().authenticate(FakeRequest(chain=[leaf.cert]))).user.uid == (
        "uid-7"
    )
    two = issue(
        "bob",
        issuer=CA,
        extra_attributes=[x509.NameAttribute(UID_OID, "a"), x509.NameAttribute(UID_OID, "b")],
    )
    with pytest.raises(CertificateError):
        authenticator().authenticate(FakeRequest(chain=[two.cert]))


def test_no_certificate_and_empty_cn_are_no_opinion() -> None:
    assert authenticator().authenticate(FakeRequest()) is None
    nameless = issue(None, issuer=CA, orgs=["g"])
    assert authenticator().authenticate(FakeRequest(chain=[nameless.cert])) is None


def test_unknown_authority_is_an_error_with_the_identifier() -> None:
    stranger_ca = issue("other-ca", ca=True)
    leaf = issue("mallory", issuer=stranger_ca, serial=4242, key_ids=True)
    with pytest.raises(CertificateError) as info:
        authenticator().authenticate(FakeRequest(chain=[leaf.cert]))
    identifier = certificate_identifier(leaf.cert)
    assert identifier.startswith("SN=4242, SKID=")
    assert ":" in identifier.split("SKID=")[1]
    assert str(info.value) == (
        f"verifying certificate {identifier} failed: x509: certificate signed by unknown authority"
    )


def test_self_signed_leaf_is_refused() -> None:
    leaf = issue("selfie")
    with pytest.raises(CertificateError, match=r"signed by unknown authority"):
        authenticator().authenticate(FakeRequest(chain=[leaf.cert]))


def test_expired_on_the_clock() -> None:
    leaf = issue("alice", issuer=CA, not_after=NOW + 60)
    auth = authenticator(clock_at(NOW + 120))
    with pytest.raises(CertificateError) as info:
        auth.authenticate(FakeRequest(chain=[leaf.cert]))
    assert "x509: certificate has expired or is not yet valid: current time " in str(info.value)
    assert " is after " in str(info.value)
    future = issue("alice", issuer=CA, not_before=NOW + 3600)
    with pytest.raises(CertificateError, match=r" is before "):
        authenticator().authenticate(FakeRequest(chain=[future.cert]))


def test_server_only_key_usage_is_refused() -> None:
    leaf = issue("web", issuer=CA, eku=[ExtendedKeyUsageOID.SERVER_AUTH])
    with pytest.raises(CertificateError, match=r"incompatible key usage"):
        authenticator().authenticate(FakeRequest(chain=[leaf.cert]))
    no_eku = issue("plain", issuer=CA, eku=None)
    assert result_of(authenticator().authenticate(FakeRequest(chain=[no_eku.cert]))).user.name == (
        "plain"
    )
    anything = issue("any", issuer=CA, eku=[ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE])
    assert result_of(authenticator().authenticate(FakeRequest(chain=[anything.cert])))


def test_intermediate_presented_by_the_client() -> None:
    intermediate = issue("intermediate", issuer=CA, ca=True)
    leaf = issue("carol", issuer=intermediate)
    result = authenticator().authenticate(FakeRequest(chain=[leaf.cert, intermediate.cert]))
    assert result_of(result).user.name == "carol"
    with pytest.raises(CertificateError):
        authenticator().authenticate(FakeRequest(chain=[leaf.cert]))


def test_intermediate_in_the_bundle_is_a_trust_anchor() -> None:
    intermediate = issue("intermediate", issuer=CA, ca=True)
    leaf = issue("dan", issuer=intermediate)
    auth = authenticator(roots=[intermediate.cert])
    assert result_of(auth.authenticate(FakeRequest(chain=[leaf.cert]))).user.name == "dan"


def test_bundle_file_errors(tmp_path: Path) -> None:
    empty = tmp_path / "empty.pem"
    empty.write_text("nothing here\n")
    with pytest.raises(ConfigError, match=r"--client-ca-file: .*empty.pem: no PEM certificate"):
        ChainVerifier.from_file(str(empty), "client-ca-file", clock_at())
    with pytest.raises(ConfigError, match=r"--client-ca-file: cannot read"):
        ChainVerifier.from_file(str(tmp_path / "absent.pem"), "client-ca-file", clock_at())
    good = tmp_path / "ca.pem"
    good.write_bytes(CA.pem())
    assert ChainVerifier.from_file(str(good), "client-ca-file", clock_at()).roots == (CA.cert,)


def test_cached_verification_still_expires() -> None:
    leaf = issue("alice", issuer=CA, not_after=NOW + 60)
    clock = clock_at()
    auth = authenticator(clock)
    request = FakeRequest(chain=[leaf.cert])
    assert result_of(auth.authenticate(request)).user.name == "alice"
    assert result_of(auth.authenticate(request)).user.name == "alice"
    clock.advance(61)
    with pytest.raises(CertificateError, match="has expired"):
        auth.authenticate(request)
