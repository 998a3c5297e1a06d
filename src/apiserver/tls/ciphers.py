"""``--tls-cipher-suites`` and ``--tls-min-version``: Go names, translated for OpenSSL.

Reference: ``k8s.io/component-base/cli/flag/ciphersuites_flag.go``. It accepts every name in
Go's ``tls.CipherSuites()`` and ``tls.InsecureCipherSuites()`` plus two legacy aliases
(``TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305``, ``TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305``); any
other name fails with ``Cipher suite <x> not supported or doesn't exist``. The insecure ones
(RC4, 3DES, CBC-SHA256) only earn a warning. TLS versions are ``VersionTLS10`` to
``VersionTLS13`` (``unknown tls version "<x>"`` otherwise).

TLS 1.3 suites: Go's ``tls.CipherSuites()`` *does* list ``TLS_AES_128_GCM_SHA256``,
``TLS_AES_256_GCM_SHA384`` and ``TLS_CHACHA20_POLY1305_SHA256``, so kube-apiserver accepts
them on the command line, but Go's TLS 1.3 suites are not configurable and the names have no
effect. We do the same: they validate, map to no OpenSSL name, and the TLS 1.3 suites stay
OpenSSL's defaults (the same three as Go's). A list made of nothing but TLS 1.3 names leaves
no suite for TLS 1.0-1.2; :func:`effective_min_version` then raises the minimum to TLS 1.3,
which is how such a Go server behaves (no TLS 1.2 handshake can succeed).

OpenSSL availability: the OpenSSL that ``cryptography`` bundles has no RC4 or 3DES. Those names
still validate (kube-apiserver accepts them), :func:`unavailable_cipher_suites` reports them so
the caller can warn, and :func:`openssl_cipher_string` leaves them out. Suites are emitted in
Go's server preference order (``cipherSuitesPreferenceOrder``), since Go ignores the order of
``--tls-cipher-suites`` and the client's, and we set ``OP_CIPHER_SERVER_PREFERENCE``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from OpenSSL import SSL
from twisted.internet.ssl import TLSVersion

#: Go IANA name -> OpenSSL name, in Go's server preference order for TLS 1.0-1.2.
_TLS12_SUITES: tuple[tuple[str, str], ...] = (
    # AEADs with ECDHE
    ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ("TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305"),
    ("TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256", "ECDHE-RSA-CHACHA20-POLY1305"),
    # CBC with ECDHE
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "ECDHE-ECDSA-AES128-SHA"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "ECDHE-RSA-AES128-SHA"),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "ECDHE-ECDSA-AES256-SHA"),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", "ECDHE-RSA-AES256-SHA"),
    # AEADs without ECDHE
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", "AES128-GCM-SHA256"),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", "AES256-GCM-SHA384"),
    # CBC without ECDHE
    ("TLS_RSA_WITH_AES_128_CBC_SHA", "AES128-SHA"),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", "AES256-SHA"),
    # 3DES
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", "ECDHE-RSA-DES-CBC3-SHA"),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", "DES-CBC3-SHA"),
    # CBC-SHA256
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "ECDHE-ECDSA-AES128-SHA256"),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", "ECDHE-RSA-AES128-SHA256"),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", "AES128-SHA256"),
    # RC4
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", "ECDHE-ECDSA-RC4-SHA"),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", "ECDHE-RSA-RC4-SHA"),
    ("TLS_RSA_WITH_RC4_128_SHA", "RC4-SHA"),
)

#: Go's TLS 1.3 suite names: accepted, not configurable (see the module docstring).
TLS13_CIPHER_SUITES: frozenset[str] = frozenset(
    {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}
)

#: Legacy spellings kept by component-base, resolved to the canonical Go name.
CIPHER_SUITE_ALIASES: dict[str, str] = {
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
}

#: Every TLS 1.0-1.2 suite Go knows (plus the aliases) -> its OpenSSL name.
CIPHER_SUITES: dict[str, str] = dict(_TLS12_SUITES)
CIPHER_SUITES.update({alias: CIPHER_SUITES[name] for alias, name in CIPHER_SUITE_ALIASES.items()})

#: Go's ``tls.InsecureCipherSuites()``: RC4, 3DES and the CBC-SHA256 suites.
INSECURE_CIPHER_SUITES: frozenset[str] = frozenset(
    {
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    }
)

#: Go's default TLS 1.0-1.2 suites when ``--tls-cipher-suites`` is not given (Go 1.23+:
#: ECDHE only, AEAD first, no RSA key exchange, no 3DES).
DEFAULT_CIPHER_SUITES: tuple[str, ...] = (
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
)

#: ``--tls-min-version`` names -> Twisted's ``TLSVersion``.
TLS_VERSIONS: dict[str, TLSVersion] = {
    "VersionTLS10": TLSVersion.TLSv1_0,
    "VersionTLS11": TLSVersion.TLSv1_1,
    "VersionTLS12": TLSVersion.TLSv1_2,
    "VersionTLS13": TLSVersion.TLSv1_3,
}

#: ``--tls-min-version`` names -> OpenSSL protocol versions (``SSL_CTX_set_min_proto_version``).
OPENSSL_PROTOCOL_VERSIONS: dict[str, int] = {
    "VersionTLS10": SSL.TLS1_VERSION,
    "VersionTLS11": SSL.TLS1_1_VERSION,
    "VersionTLS12": SSL.TLS1_2_VERSION,
    "VersionTLS13": SSL.TLS1_3_VERSION,
}

#: kube-apiserver's default minimum (``secure_serving.go`` sets TLS 1.2 on the base config).
DEFAULT_MIN_VERSION = "VersionTLS12"

_ORDER = {name: index for index, (name, _) in enumerate(_TLS12_SUITES)}


def _canonical(name: str) -> str:
    return CIPHER_SUITE_ALIASES.get(name, name)


def validate_cipher_suites(names: Iterable[str]) -> list[str]:
    """The canonical Go names of ``names``; ``ValueError`` at the first unknown one.

    The message is component-base's: ``Cipher suite <x> not supported or doesn't exist``.
    """
    result: list[str] = []
    for name in names:
        if name not in CIPHER_SUITES and name not in TLS13_CIPHER_SUITES:
            raise ValueError(f"Cipher suite {name} not supported or doesn't exist")
        result.append(_canonical(name))
    return result


def insecure_cipher_suites(names: Iterable[str]) -> list[str]:
    """The names (as given) that Go lists as insecure, for the start-up warning."""
    return [name for name in names if _canonical(name) in INSECURE_CIPHER_SUITES]


@functools.cache
def openssl_supports(openssl_name: str) -> bool:
    """Whether the OpenSSL linked by pyOpenSSL can use this TLS 1.0-1.2 suite at all.

    Probed at security level 0 so that only availability (RC4/3DES compiled in) counts.
    """
    context = SSL.Context(SSL.TLS_SERVER_METHOD)
    try:
        context.set_cipher_list(f"{openssl_name}:@SECLEVEL=0".encode("ascii"))
    except SSL.Error:
        return False
    return True


def unavailable_cipher_suites(names: Iterable[str]) -> list[str]:
    """The valid names (as given) this OpenSSL cannot offer; the caller should warn."""
    return [
        name
        for name in names
        if name in CIPHER_SUITES and not openssl_supports(CIPHER_SUITES[name])
    ]


def openssl_cipher_string(names: Sequence[str]) -> str:
    """The OpenSSL cipher list for ``--tls-cipher-suites`` (Go's defaults when empty).

    Validates like :func:`validate_cipher_suites`, drops TLS 1.3 names and suites this
    OpenSSL lacks, deduplicates and orders by Go's preference. Returns ``""`` when no TLS
    1.0-1.2 suite is left (see :func:`effective_min_version`).
    """
    canonical = validate_cipher_suites(names) if names else list(DEFAULT_CIPHER_SUITES)
    wanted = {name for name in canonical if name in _ORDER}
    ordered = sorted(wanted, key=_ORDER.__getitem__)
    return ":".join(
        CIPHER_SUITES[name] for name in ordered if openssl_supports(CIPHER_SUITES[name])
    )


def tls_version(name: str) -> TLSVersion:
    """Twisted's ``TLSVersion`` for a ``--tls-min-version`` value (empty: the default).

    ``ValueError`` with component-base's message ``unknown tls version "<x>"`` otherwise.
    """
    if name == "":
        name = DEFAULT_MIN_VERSION
    try:
        return TLS_VERSIONS[name]
    except KeyError:
        raise ValueError(f'unknown tls version "{name}"') from None


def openssl_protocol_version(name: str) -> int:
    """OpenSSL's protocol version number for a ``--tls-min-version`` value."""
    tls_version(name)  # same validation and message
    return OPENSSL_PROTOCOL_VERSIONS[name or DEFAULT_MIN_VERSION]


def effective_min_version(min_version: str, cipher_suites: Sequence[str]) -> str:
    """The minimum version actually enforced: TLS 1.3 when the suites leave nothing older.

    Go with only TLS 1.3 names in ``CipherSuites`` can complete no TLS 1.0-1.2 handshake; with
    OpenSSL an empty TLS 1.2 cipher list is an error, so we refuse the old versions instead.
    When the list is empty only because this OpenSSL lacks the requested suites (RC4, 3DES),
    that is a ``ValueError`` naming them: silently serving TLS 1.3 only would surprise.
    """
    min_version = min_version or DEFAULT_MIN_VERSION
    tls_version(min_version)
    if cipher_suites and not openssl_cipher_string(cipher_suites):
        missing = unavailable_cipher_suites(cipher_suites)
        if missing:
            raise ValueError(
                "none of the TLS 1.0-1.2 cipher suites in --tls-cipher-suites is available "
                f"in this OpenSSL: {', '.join(missing)}"
            )
        return "VersionTLS13"
    return min_version
