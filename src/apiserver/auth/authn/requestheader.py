"""Front-proxy authentication (``--requestheader-*``).

Reference: ``AS/pkg/authentication/request/headerrequest/requestheader.go`` wrapped in the
x509 ``Verifier`` (``AS/pkg/authentication/request/x509/x509.go``):

1. No client certificate: no opinion. The identity headers of a request without a verified
   front-proxy certificate are never read (a forged ``X-Remote-User`` is ignored).
2. The certificate must verify against ``--requestheader-client-ca-file`` (same rules as the
   x509 authenticator); otherwise an error.
3. With ``--requestheader-allowed-names``, the leaf CN must be one of them exactly, or the
   error ``x509: subject with cn=<CN> is not in the allowed list``.
4. username = the first non-empty value among the username headers, in flag order (none: no
   opinion); uid likewise; groups = every non-empty value of every group header (no comma
   splitting); extra = headers starting (case-insensitively) with a prefix: key = the rest,
   lowercased, then %-decoded (kept raw when that fails); values accumulate.
5. The headers are removed from the request once read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from apiserver.auth.authn.x509 import CertificateError, ChainGetter, ChainVerifier, common_name
from apiserver.auth.interface import AuthResult, UserInfo
from apiserver.http.request import HTTPRequest
from apiserver.tls.peercert import peer_chain

OVERLAP_ERROR = (
    "--requestheader-client-ca-file and --client-ca-file contain overlapping certificates; "
    "--requestheader-allowed-names must be specified to ensure regular client certificates "
    "cannot set authenticating proxy headers for arbitrary users"
)


def _unescape_extra_key(key: str) -> str:
    """%-decoding as Go's ``url.PathUnescape``; an invalid escape keeps the raw key."""
    index = key.find("%")
    while index != -1:
        hexpart = key[index + 1 : index + 3]
        if len(hexpart) != 2 or any(c not in "0123456789abcdefABCDEF" for c in hexpart):
            return key
        index = key.find("%", index + 3)
    return unquote(key, errors="replace") if "%" in key else key


class RequestHeaderAuthenticator:
    """Trusts identity headers from a verified front proxy."""

    def __init__(
        self,
        verifier: ChainVerifier,
        allowed_names: Sequence[str],
        username_headers: Sequence[str],
        uid_headers: Sequence[str],
        group_headers: Sequence[str],
        extra_prefixes: Sequence[str],
        audiences: Sequence[str] = (),
        chain_of: ChainGetter = peer_chain,
    ) -> None:
        self.verifier = verifier
        self.allowed_names = tuple(allowed_names)
        self.username_headers = tuple(h.encode("latin-1") for h in username_headers)
        self.uid_headers = tuple(h.encode("latin-1") for h in uid_headers)
        self.group_headers = tuple(h.encode("latin-1") for h in group_headers)
        self.extra_prefixes = tuple(p.lower() for p in extra_prefixes)
        self.audiences = tuple(audiences)
        self.chain_of = chain_of

    def header_names(self) -> tuple[tuple[bytes, ...], tuple[str, ...]]:
        """The exact header names and the lowercased prefixes this authenticator reads."""
        return (
            self.username_headers + self.uid_headers + self.group_headers,
            self.extra_prefixes,
        )

    def authenticate(self, request: HTTPRequest) -> AuthResult | None:
        chain = self.chain_of(request)
        if not chain:
            return None
        self.verifier.verify(chain)
        if self.allowed_names:
            cn = common_name(chain[0])
            if cn not in self.allowed_names:
                raise CertificateError(f"x509: subject with cn={cn} is not in the allowed list")
        headers = request.requestHeaders
        name = _first_value(headers, self.username_headers)
        if not name:
            return None
        uid = _first_value(headers, self.uid_headers)
        groups: list[str] = []
        for header in self.group_headers:
            for value in headers.getRawHeaders(header) or ():
                if value:
                    groups.append(value.decode("utf-8", "replace"))
        extra: dict[str, list[str]] = {}
        extra_names: list[bytes] = []
        if self.extra_prefixes:
            for raw_name, values in list(headers.getAllRawHeaders()):
                lowered = raw_name.decode("latin-1").lower()
                for prefix in self.extra_prefixes:
                    if lowered.startswith(prefix):
                        key = _unescape_extra_key(lowered[len(prefix) :])
                        extra.setdefault(key, []).extend(
                            v.decode("utf-8", "replace") for v in values
                        )
                        extra_names.append(raw_name)
                        break
        for header in (*self.username_headers, *self.uid_headers, *self.group_headers):
            headers.removeHeader(header)
        for raw_name in extra_names:
            headers.removeHeader(raw_name)
        user = UserInfo(
            name=name,
            uid=uid,
            groups=tuple(groups),
            extra={k: tuple(v) for k, v in extra.items()},
        )
        return AuthResult(user, self.audiences)


def _first_value(headers: Any, names: Sequence[bytes]) -> str:
    for header in names:
        values = headers.getRawHeaders(header)
        if values and values[0]:
            return str(values[0].decode("utf-8", "replace"))
    return ""
