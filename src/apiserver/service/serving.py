"""The serving certificate and TLS context of the listener, made when the tree starts.

With ``--tls-cert-file``/``--tls-private-key-file`` the files are read and checked while the
server is built, so a bad file stops start-up with its message, as kube-apiserver's option
validation does. Without them kube-apiserver falls back to a self-signed pair in
``--cert-dir`` (``MaybeDefaultWithSelfSignedCerts``, k8s.io/apiserver/pkg/server/options/
serving.go); writing that pair is a side effect, so it happens when this service starts,
before the listener (the next children) listens.
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.application.service import Service

from apiserver.options import ServerConfig
from apiserver.tls.context import build_server_context
from apiserver.tls.selfsigned import ensure_self_signed
from apiserver.tls.sni import parse_sni_cert_key


def default_host(bind_address: str) -> str:
    """The host a self-signed certificate names for an unspecified bind address."""
    if bind_address in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return bind_address


def self_signed_pair(config: ServerConfig) -> tuple[str, str]:
    """The self-signed pair in ``--cert-dir`` (written if missing). With ``--workers`` the
    supervising process calls this once before it starts the workers, so they all find the
    same pair rather than racing to write one each."""
    return ensure_self_signed(
        config.cert_dir,
        config.advertise_address or default_host(config.bind_address),
        config.bind_address,
        extra_names=[socket.gethostname()],
    )


class ServingCertService(Service):
    """Holds the listener's context factory; :meth:`context` is ready once started."""

    name = "serving-certs"

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._context: Any = None
        # Parsed now: a malformed --tls-sni-cert-key is a start-up error either way.
        self._sni = [parse_sni_cert_key(value) for value in config.tls_sni_cert_key]
        self.self_signed = not config.tls_cert_file and not config.tls_private_key_file
        if not self.self_signed:
            self._context = self._build(config.tls_cert_file, config.tls_private_key_file)

    def privilegedStartService(self) -> None:
        # The listener listens at privileged start, so the context is needed by then.
        super().privilegedStartService()
        self._ensure()

    def startService(self) -> None:
        super().startService()
        self._ensure()

    def context(self) -> Any:
        """The TLS context factory (after start)."""
        if self._context is None:
            raise RuntimeError("serving certificates are made when the service starts")
        return self._context

    def _ensure(self) -> None:
        if self._context is not None:
            return
        cert, key = self_signed_pair(self.config)
        self._context = self._build(cert, key)

    def _build(self, cert: str, key: str) -> Any:
        config = self.config
        return build_server_context(
            cert_file=cert,
            key_file=key,
            sni=self._sni,
            min_version=config.tls_min_version or "VersionTLS12",
            cipher_suites=list(config.tls_cipher_suites),
            client_ca_files=[f for f in (config.client_ca_file,) if f],
            http2=not config.disable_http2_serving,
            # The issue asks for client certificates to be requested (never required) even
            # without --client-ca-file, so the peer certificate is always available.
            request_client_cert=True,
        )
