"""Go cipher-suite names, their OpenSSL spellings, validation and TLS versions."""

from __future__ import annotations

import pytest
from OpenSSL import SSL
from twisted.internet.ssl import TLSVersion

from apiserver.tls import ciphers

# Go's tls.CipherSuites() (TLS 1.0-1.2 part), tls.InsecureCipherSuites(), and TLS 1.3.
GO_SECURE_TLS12 = [
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
]
GO_INSECURE = [
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
]
GO_TLS13 = ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]
ALIASES = ["TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305", "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305"]


def test_mapping_covers_exactly_go_names_and_aliases() -> None:
    assert set(ciphers.CIPHER_SUITES) == set(GO_SECURE_TLS12 + GO_INSECURE + ALIASES)
    assert ciphers.INSECURE_CIPHER_SUITES == frozenset(GO_INSECURE)
    assert ciphers.TLS13_CIPHER_SUITES == frozenset(GO_TLS13)
    for alias, name in ciphers.CIPHER_SUITE_ALIASES.items():
        assert ciphers.CIPHER_SUITES[alias] == ciphers.CIPHER_SUITES[name]


def test_every_mapped_openssl_name_is_a_real_openssl_suite() -> None:
    unavailable = []
    for go_name, openssl_name in ciphers.CIPHER_SUITES.items():
        context = SSL.Context(SSL.TLS_SERVER_METHOD)
        try:
            context.set_cipher_list(f"{openssl_name}:@SECLEVEL=0".encode())
        except SSL.Error:
            unavailable.append(go_name)
            continue
        offered = SSL.Connection(context, None).get_cipher_list()
        # The TLS 1.3 suites always come along; the one TLS 1.2 suite must be ours.
        assert [c for c in offered if not c.startswith("TLS_")] == [openssl_name], go_name
    # Only RC4 and 3DES may be missing (cryptography's OpenSSL builds them out); a typo in
    # any other OpenSSL name would show up here.
    assert all("RC4" in name or "3DES" in name for name in unavailable), unavailable
    assert sorted(unavailable) == sorted(ciphers.unavailable_cipher_suites(ciphers.CIPHER_SUITES))


def test_validate_accepts_go_names_and_canonicalises_aliases() -> None:
    names = GO_SECURE_TLS12 + GO_INSECURE + GO_TLS13
    assert ciphers.validate_cipher_suites(names) == names
    assert ciphers.validate_cipher_suites(ALIASES) == [
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    ]


@pytest.mark.parametrize(
    "bad",
    [
        "TLS_FOO",
        "ECDHE-RSA-AES128-GCM-SHA256",  # an OpenSSL name is not a Go name
        "tls_ecdhe_rsa_with_aes_128_gcm_sha256",  # case matters
        "",
    ],
)
def test_unknown_name_message(bad: str) -> None:
    with pytest.raises(ValueError) as info:
        ciphers.validate_cipher_suites(["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", bad])
    assert str(info.value) == f"Cipher suite {bad} not supported or doesn't exist"


def test_insecure_suites_keep_the_given_spelling() -> None:
    given = ["TLS_RSA_WITH_RC4_128_SHA", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]
    given += ["TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", *ALIASES]
    assert ciphers.insecure_cipher_suites(given) == [
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    ]
    assert ciphers.insecure_cipher_suites(GO_SECURE_TLS12 + GO_TLS13) == []


def test_cipher_string_uses_go_preference_order_and_dedupes() -> None:
    names = [
        "TLS_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_AES_128_GCM_SHA256",
    ]
    assert ciphers.openssl_cipher_string(names) == (
        "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-RSA-CHACHA20-POLY1305:AES128-SHA"
    )


def test_default_cipher_string_is_gos_default_list() -> None:
    assert ciphers.openssl_cipher_string([]) == ":".join(
        [
            "ECDHE-ECDSA-AES128-GCM-SHA256",
            "ECDHE-RSA-AES128-GCM-SHA256",
            "ECDHE-ECDSA-AES256-GCM-SHA384",
            "ECDHE-RSA-AES256-GCM-SHA384",
            "ECDHE-ECDSA-CHACHA20-POLY1305",
            "ECDHE-RSA-CHACHA20-POLY1305",
            "ECDHE-ECDSA-AES128-SHA",
            "ECDHE-RSA-AES128-SHA",
            "ECDHE-ECDSA-AES256-SHA",
            "ECDHE-RSA-AES256-SHA",
        ]
    )


def test_cipher_string_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match="Cipher suite nope not supported or doesn't exist"):
        ciphers.openssl_cipher_string(["nope"])


def test_only_tls13_names_raise_the_minimum_to_tls13() -> None:
    assert ciphers.openssl_cipher_string(GO_TLS13) == ""
    assert ciphers.effective_min_version("VersionTLS12", GO_TLS13) == "VersionTLS13"
    assert ciphers.effective_min_version("VersionTLS12", GO_SECURE_TLS12) == "VersionTLS12"
    assert ciphers.effective_min_version("", []) == "VersionTLS12"


def test_only_unavailable_suites_is_an_error() -> None:
    if ciphers.openssl_supports("RC4-SHA"):
        pytest.skip("this OpenSSL still has RC4")
    with pytest.raises(ValueError, match="TLS_RSA_WITH_RC4_128_SHA"):
        ciphers.effective_min_version("VersionTLS12", ["TLS_RSA_WITH_RC4_128_SHA"])


def test_tls_versions() -> None:
    assert ciphers.TLS_VERSIONS == {
        "VersionTLS10": TLSVersion.TLSv1_0,
        "VersionTLS11": TLSVersion.TLSv1_1,
        "VersionTLS12": TLSVersion.TLSv1_2,
        "VersionTLS13": TLSVersion.TLSv1_3,
    }
    assert ciphers.tls_version("") is TLSVersion.TLSv1_2
    assert ciphers.openssl_protocol_version("VersionTLS11") == SSL.TLS1_1_VERSION
    assert ciphers.openssl_protocol_version("") == SSL.TLS1_2_VERSION
    with pytest.raises(ValueError) as info:
        ciphers.tls_version("VersionTLS14")
    assert str(info.value) == 'unknown tls version "VersionTLS14"'
    with pytest.raises(ValueError, match="unknown tls version"):
        ciphers.effective_min_version("TLS1.2", [])
