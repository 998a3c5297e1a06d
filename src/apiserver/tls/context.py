"""The server TLS configuration: an OpenSSL connection creator for the secure listener.

Reference: ``AS/pkg/server/secure_serving.go`` (``tlsConfig``) and
``AS/pkg/server/dynamiccertificates/tlsconfig.go`` (``GetConfigForClient``). What it does,
and why:

- **Certificate chain**: the leaf and every further certificate of ``--tls-cert-file`` are
  sent (Go's ``tls.X509KeyPair`` keeps the whole file as the chain).
- **ALPN** ``h2``, ``http/1.1`` (``http/1.1`` only with ``--disable-http2-serving``), picked in
  the server's order like Go's ``negotiateALPN``; a client that offers ALPN but none of ours
  is refused with ``no_application_protocol``, as Go does. Twisted's ``Site`` switches to
  HTTP/2 when the TLS transport reports ``h2``. ``h2`` is not selected below TLS 1.2 (HTTP/2
  forbids it; Go would answer with ``INADEQUATE_SECURITY``, we fall back to HTTP/1.1).
- **Versions and suites**: minimum ``--tls-min-version`` (TLS 1.2 by default), maximum TLS
  1.3; TLS 1.0-1.2 suites from ``--tls-cipher-suites`` (Go's defaults otherwise, see
  :mod:`apiserver.tls.ciphers`), in Go's server preference order. OpenSSL 3 refuses TLS 1.0
  and 1.1 at its default security level, so a minimum below TLS 1.2 appends
  ``@SECLEVEL=0``, otherwise the flag could not do what it says. No renegotiation (Go's
  server has none) and no compression.
- **SNI**: a servername callback switches the connection to the context of the matching
  ``--tls-sni-cert-key`` (rule in :mod:`apiserver.tls.sni`); without SNI the local IP is
  looked up. Every context is configured identically apart from its certificate, because
  OpenSSL reads ALPN, verification and CA names from the context in force after the switch.
- **Client certificates**: with a client CA (``--client-ca-file`` and/or
  ``--requestheader-client-ca-file``) the server *requests* a certificate like Go's
  ``tls.RequestClientCert``: ``VERIFY_PEER`` without ``VERIFY_FAIL_IF_NO_PEER_CERT``, the CA
  subjects sent as hints, and a verify callback that accepts every certificate. The
  handshake never rejects a client certificate; the x509 authenticator verifies it later and
  answers 401. Without a client CA, no certificate is requested (as in the reference).

Why not ``twisted.internet.ssl.CertificateOptions``: with ``verify=True`` it installs
OpenSSL's default verification, so an unknown client certificate fails the handshake; it has
no public SNI hook; and its cached context cannot be reconfigured. pyOpenSSL is used directly
instead, with ``cryptography`` objects (no deprecated ``X509`` conversions).

:meth:`ServerContextFactory.reload` re-reads every file and swaps in new contexts for new
connections (existing connections keep theirs), like kube's dynamic serving certificates;
the caller decides when to call it (a timer on the injected clock, or a signal).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.logger import Logger
from zope.interface import implementer

from apiserver.tls import ciphers
from apiserver.tls.sni import (
    CertKey,
    NamedCertKey,
    SniCertKey,
    build_name_map,
    load_cert_key,
    load_sni_cert_key,
    lookup,
    read_file,
)

log = Logger()

H2 = b"h2"
HTTP11 = b"http/1.1"


def _accept_any_certificate(
    connection: SSL.Connection, certificate: Any, errno: int, depth: int, ok: int
) -> bool:
    """Accept every client certificate at the handshake (Go's ``RequestClientCert``)."""
    return True


def load_client_cas(
    paths: Sequence[str], read: Callable[[str], bytes] = read_file
) -> list[x509.Certificate]:
    """Every certificate in the CA bundles, in order, without exact duplicates."""
    result: list[x509.Certificate] = []
    seen: set[bytes] = set()
    for path in paths:
        data = read(path)
        try:
            certs = x509.load_pem_x509_certificates(data)
        except ValueError:
            raise ValueError(
                f"unable to load client CA file {path!r}: no valid PEM certificate"
            ) from None
        for cert in certs:
            der = cert.public_bytes(serialization.Encoding.DER)
            if der not in seen:
                seen.add(der)
                result.append(cert)
    return result


#: TLS 1.3 suites in the order Go's server picks them (crypto/tls
#: ``defaultCipherSuitesTLS13``, hardware AES): what kube-apiserver negotiates with
#: kubectl and client-go. OpenSSL's own order starts with AES-256-GCM, about a tenth more
#: CPU per byte here (``openssl speed -evp``, 8 KiB blocks). TLS 1.3 suites are not
#: configurable in Go, so ``--tls-cipher-suites`` does not change them either.
TLS13_SUITES_GO_ORDER = (
    b"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
)
#: OpenSSL's ``SSL_OP_PRIORITIZE_CHACHA`` (not exported by pyOpenSSL): a client whose first
#: choice is ChaCha20-Poly1305 (no AES hardware) gets it, as Go's server gives it
#: (``aesgcmPreferred``).
OP_PRIORITIZE_CHACHA = 1 << 21


@dataclass
class _Sources:
    """The raw bytes a state was built from, to skip reloads that change nothing."""

    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class _State:
    default: SSL.Context
    by_name: dict[str, SSL.Context]
    sources: _Sources


def _read_sources(paths: Sequence[str]) -> _Sources:
    sources = _Sources()
    for path in paths:
        if path and path not in sources.files:
            sources.files[path] = read_file(path)
    return sources


@implementer(IOpenSSLServerConnectionCreator)
class ServerContextFactory:
    """Creates server-side OpenSSL connections; pass it to ``TLSMemoryBIOFactory``/``listenSSL``.

    Build it with :func:`build_server_context`. ``getContext()`` is provided for code that
    wants an old-style context factory; it returns the current default context.
    """

    def __init__(
        self,
        *,
        cert_file: str,
        key_file: str,
        sni: Sequence[SniCertKey] = (),
        min_version: str = ciphers.DEFAULT_MIN_VERSION,
        cipher_suites: Sequence[str] = (),
        client_ca_files: Sequence[str] = (),
        http2: bool = True,
        request_client_cert: bool | None = None,
    ) -> None:
        self.cert_file = cert_file
        self.key_file = key_file
        self.sni = tuple(sni)
        self.cipher_suites = tuple(ciphers.validate_cipher_suites(cipher_suites))
        self.min_version = ciphers.effective_min_version(min_version, self.cipher_suites)
        self.client_ca_files = tuple(client_ca_files)
        self.http2 = http2
        self.request_client_cert = (
            bool(self.client_ca_files) if request_client_cert is None else request_client_cert
        )
        self.alpn_protocols: tuple[bytes, ...] = (H2, HTTP11) if http2 else (HTTP11,)
        self._cipher_string = ciphers.openssl_cipher_string(self.cipher_suites)
        if ciphers.OPENSSL_PROTOCOL_VERSIONS[self.min_version] < SSL.TLS1_2_VERSION:
            self._cipher_string = (self._cipher_string or "DEFAULT") + ":@SECLEVEL=0"
        missing = ciphers.unavailable_cipher_suites(cipher_suites)
        if missing:
            log.warn(
                "--tls-cipher-suites: not available in this OpenSSL, ignored: {names}",
                names=", ".join(missing),
            )
        self._state = self._build(self._read_all())

    # -- construction ---------------------------------------------------------------------

    def _paths(self) -> list[str]:
        paths = [self.cert_file, self.key_file]
        for spec in self.sni:
            paths += [spec.cert_file, spec.key_file]
        paths += list(self.client_ca_files)
        return paths

    def _read_all(self) -> _Sources:
        return _read_sources(self._paths())

    def _build(self, sources: _Sources) -> _State:
        read = sources.files.__getitem__
        default_pair = load_cert_key(self.cert_file, self.key_file, read)
        named: list[NamedCertKey] = []
        for index, spec in enumerate(self.sni):
            try:
                named.append(load_sni_cert_key(spec, read))
            except (OSError, ValueError) as error:
                raise ValueError(f"invalid SNI cert keypair [{index}/{spec}]: {error}") from None
        client_cas = load_client_cas(self.client_ca_files, read)
        session_id = secrets.token_hex(8).encode("ascii")

        sni_contexts = [self._make_context(item.cert_key, client_cas, session_id) for item in named]
        name_map = build_name_map([(item.names, item.explicit) for item in named])
        by_name = {name: sni_contexts[index] for name, index in name_map.items()}
        default = self._make_context(default_pair, client_cas, session_id)
        state = _State(default=default, by_name=by_name, sources=sources)
        if by_name:
            default.set_tlsext_servername_callback(self._servername_callback(state))
        return state

    def _make_context(
        self, pair: CertKey, client_cas: Sequence[x509.Certificate], session_id: bytes
    ) -> SSL.Context:
        context = SSL.Context(SSL.TLS_SERVER_METHOD)
        context.set_min_proto_version(ciphers.OPENSSL_PROTOCOL_VERSIONS[self.min_version])
        context.set_max_proto_version(SSL.TLS1_3_VERSION)
        # Idle connections (watches) give their read/write buffers back: about 30 KiB less
        # per connection, measured by bench/api_bench.py.
        context.set_mode(SSL.MODE_RELEASE_BUFFERS)
        context.set_options(
            SSL.OP_NO_COMPRESSION
            | SSL.OP_CIPHER_SERVER_PREFERENCE
            | SSL.OP_NO_RENEGOTIATION
            | OP_PRIORITIZE_CHACHA
        )
        context.set_tls13_ciphersuites(TLS13_SUITES_GO_ORDER)
        if self._cipher_string:
            context.set_cipher_list(self._cipher_string.encode("ascii"))
        context.use_certificate(pair.leaf)
        for extra in pair.chain[1:]:
            context.add_extra_chain_cert(extra)
        context.use_privatekey(pair.key)  # type: ignore[arg-type]
        context.check_privatekey()
        # Needed whenever peers may present certificates and sessions are resumed.
        context.set_session_id(session_id)
        if self.request_client_cert:
            context.set_verify(SSL.VERIFY_PEER, _accept_any_certificate)
            for ca in client_cas:
                context.add_client_ca(ca)
        else:
            context.set_verify(SSL.VERIFY_NONE)
        context.set_alpn_select_callback(self._select_alpn)
        return context

    def _servername_callback(self, state: _State) -> Any:
        def on_servername(connection: SSL.Connection) -> None:
            try:
                server_name = connection.get_servername()
                local_ip = None
                if not server_name:
                    local_ip = _local_ip(connection)
                chosen = lookup(state.by_name, server_name, local_ip)
                if chosen is not None:
                    connection.set_context(chosen)
            except Exception:
                log.failure("while choosing the certificate for SNI")

        return on_servername

    def _select_alpn(self, connection: SSL.Connection, offered: list[bytes]) -> Any:
        """Go's ``negotiateALPN``: the first of *our* protocols that the client offers.

        Returns the protocol, or ``SSL.NO_OVERLAPPING_PROTOCOLS`` to go on without ALPN.
        """
        allowed = self.alpn_protocols
        below_tls12 = connection.get_protocol_version() < SSL.TLS1_2_VERSION
        if below_tls12:
            allowed = tuple(proto for proto in allowed if proto != H2)
        for proto in allowed:
            if proto in offered:
                return proto
        if below_tls12 and H2 in self.alpn_protocols and H2 in offered:
            # h2 was withheld only because of the version: go on without ALPN (HTTP/1.1).
            return SSL.NO_OVERLAPPING_PROTOCOLS
        raise SSL.Error(
            "tls: client requested unsupported application protocols "
            f"({', '.join(p.decode('ascii', 'replace') for p in offered)})"
        )

    # -- public API -----------------------------------------------------------------------

    def serverConnectionForTLS(self, tlsProtocol: Any) -> SSL.Connection:
        """``IOpenSSLServerConnectionCreator``: a connection on the current default context."""
        return SSL.Connection(self._state.default, None)

    def getContext(self) -> SSL.Context:
        """The current default context (old-style ``ContextFactory`` API)."""
        return self._state.default

    def context_for(
        self, server_name: str | bytes | None, local_ip: str | None = None
    ) -> SSL.Context:
        """The context a handshake with this SNI (or, without SNI, this local IP) would get."""
        found = lookup(self._state.by_name, server_name, local_ip)
        return self._state.default if found is None else found

    def reload(self) -> bool:
        """Re-read every certificate, key and CA file; swap contexts if anything changed.

        Returns whether new contexts are in force. On any error the old ones stay and the
        error is raised. Connections already open keep the context they started with.
        """
        sources = self._read_all()
        if sources.files == self._state.sources.files:
            return False
        self._state = self._build(sources)
        log.info("reloaded serving certificates")
        return True


def _local_ip(connection: SSL.Connection) -> str | None:
    """The address the client connected to, via the ``TLSMemoryBIOProtocol`` in app data."""
    protocol = connection.get_app_data()
    get_host = getattr(protocol, "getHost", None)
    if get_host is None:
        return None
    host = getattr(get_host(), "host", None)
    return host if isinstance(host, str) else None


def build_server_context(
    *,
    cert_file: str,
    key_file: str,
    sni: Sequence[SniCertKey] = (),
    min_version: str = ciphers.DEFAULT_MIN_VERSION,
    cipher_suites: Sequence[str] = (),
    client_ca_files: Sequence[str] = (),
    http2: bool = True,
    request_client_cert: bool | None = None,
) -> ServerContextFactory:
    """The connection creator for the secure listener (see the module docstring).

    ``request_client_cert`` defaults to "when there is a client CA", as in kube-apiserver.
    Raises ``ValueError``/``OSError`` for unusable flags or files.
    """
    return ServerContextFactory(
        cert_file=cert_file,
        key_file=key_file,
        sni=sni,
        min_version=min_version,
        cipher_suites=cipher_suites,
        client_ca_files=client_ca_files,
        http2=http2,
        request_client_cert=request_client_cert,
    )
