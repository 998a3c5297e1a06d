"""A small kubeconfig loader for the webhooks (token authentication, authorization, audit).

kube-apiserver reads a webhook's connection from a kubeconfig file
(``AS/pkg/util/webhook/webhook.go`` ``LoadKubeconfig``, through client-go's ``clientcmd``): the
current context names a cluster (``server``, ``certificate-authority[-data]``,
``insecure-skip-tls-verify``, ``tls-server-name``) and a user (``client-certificate[-data]``,
``client-key[-data]``, ``token``, ``tokenFile``, ``username``/``password``). Relative file
paths are resolved against the kubeconfig's own directory, as clientcmd does.

Why not the ``kubernetes`` client's loader: it is synchronous, pulls in urllib3, and we only
need the handful of fields above to build a treq client over TLS.

Every problem raises :class:`KubeconfigError` (a ``ValueError``) naming the file, so a bad
file stops start-up with a clear message.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from typing import Any

import attrs
import treq
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from twisted.internet import ssl
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.python.failure import Failure
from twisted.web.client import Agent, HTTPConnectionPool
from twisted.web.http_headers import Headers
from twisted.web.iweb import IPolicyForHTTPS
from zope.interface import implementer

from apiserver.gocompat import yamlguard
from apiserver.http import spans

_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


class KubeconfigError(ValueError):
    """The kubeconfig file cannot be used; the message names the file."""


@attrs.frozen
class KubeconfigTarget:
    """Where a webhook lives and how to reach it (the resolved current context)."""

    path: str
    server: str
    ca_pem: bytes | None = None  # None: the host's roots
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    token: str | None = None
    username: str | None = None
    password: str | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str = ""

    def request_headers(self) -> dict[bytes, list[bytes]]:
        """The Authorization header the user's credentials ask for (none for certificates)."""
        if self.token:
            return {b"Authorization": [b"Bearer " + self.token.encode()]}
        if self.username is not None:
            raw = f"{self.username}:{self.password or ''}".encode()
            return {b"Authorization": [b"Basic " + base64.b64encode(raw)]}
        return {}

    def tls_policy(self) -> KubeconfigTLSPolicy:
        return KubeconfigTLSPolicy(self)

    def http_client(
        self,
        reactor: Any,
        persistent: bool = True,
        pool: HTTPConnectionPool | None = None,
    ) -> treq.client.HTTPClient:
        """A treq client that speaks TLS as the kubeconfig says; ``pool`` (from
        :func:`connection_pool`) when the caller must close its idle connections itself."""
        if pool is None:
            pool = connection_pool(reactor, persistent)
        agent = Agent(reactor, contextFactory=self.tls_policy(), pool=pool)
        return treq.client.HTTPClient(agent)


def connection_pool(reactor: Any, persistent: bool = True) -> HTTPConnectionPool:
    """A connection pool that never retries a failed request by itself: the webhooks decide
    (the audit webhook with its backoff, the others by failing the request)."""
    pool = HTTPConnectionPool(reactor, persistent=persistent)
    pool.retryAutomatically = False
    return pool


def load_pem_certificates(data: bytes, what: str) -> list[x509.Certificate]:
    """Every certificate in a PEM bundle; ValueError naming ``what`` if there is none."""
    blocks = _PEM_CERT.findall(data)
    if not blocks:
        raise ValueError(f"{what}: no PEM certificate found")
    try:
        return [x509.load_pem_x509_certificate(block) for block in blocks]
    except ValueError as error:
        raise ValueError(f"{what}: invalid certificate: {error}") from None


@implementer(IPolicyForHTTPS)
class KubeconfigTLSPolicy:
    """TLS towards a webhook: its CA (or the host's roots), its client certificate, TLS 1.2+.

    ``insecure-skip-tls-verify`` turns verification off, as client-go does.
    """

    def __init__(self, target: KubeconfigTarget) -> None:
        self._target = target
        self._trust_root: Any
        if target.ca_pem is not None:
            certs = load_pem_certificates(target.ca_pem, f"{target.path}: certificate-authority")
            self._trust_root = ssl.trustRootFromCertificates(
                [ssl.Certificate.loadPEM(c.public_bytes(serialization.Encoding.PEM)) for c in certs]
            )
        else:
            self._trust_root = ssl.platformTrust()
        self._client_options: dict[str, Any] = {}
        if target.client_cert_pem is not None and target.client_key_pem is not None:
            certs = load_pem_certificates(
                target.client_cert_pem, f"{target.path}: client-certificate"
            )
            try:
                key = serialization.load_pem_private_key(target.client_key_pem, password=None)
            except (ValueError, TypeError) as error:
                raise KubeconfigError(f"{target.path}: client-key: {error}") from None
            self._client_options = {"certificate": certs[0], "privateKey": key}
            if len(certs) > 1:
                from OpenSSL import crypto

                self._client_options["extraCertChain"] = [
                    crypto.X509.from_cryptography(c) for c in certs[1:]
                ]
        self._cache: dict[bytes, Any] = {}

    def creatorForNetloc(self, hostname: bytes, port: int) -> Any:
        creator = self._cache.get(hostname)
        if creator is not None:
            return creator
        if self._target.insecure_skip_tls_verify:
            creator = ssl.CertificateOptions(
                verify=False, raiseMinimumTo=ssl.TLSVersion.TLSv1_2, **self._client_options
            )
        else:
            name = self._target.tls_server_name or hostname.decode("ascii")
            creator = ssl.optionsForClientTLS(
                name,
                trustRoot=self._trust_root,
                extraCertificateOptions={
                    "raiseMinimumTo": ssl.TLSVersion.TLSv1_2,
                    **self._client_options,
                },
            )
        self._cache[hostname] = creator
        return creator


def _named(entries: Any, name: str, kind: str, path: str) -> Mapping[str, Any]:
    if not isinstance(entries, list):
        entries = []
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(kind)
            return body if isinstance(body, dict) else {}
    raise KubeconfigError(
        f"invalid kubeconfig {path!r}: {kind} {name!r} not found (named by the current context)"
    )


def _file_or_data(
    section: Mapping[str, Any], file_key: str, data_key: str, base: str, path: str
) -> bytes | None:
    data = section.get(data_key)
    if data:
        try:
            return base64.b64decode(data, validate=True)
        except (ValueError, TypeError):
            raise KubeconfigError(
                f"invalid kubeconfig {path!r}: {data_key} is not valid base64"
            ) from None
    name = section.get(file_key)
    if not name:
        return None
    full = name if os.path.isabs(name) else os.path.join(base, name)
    try:
        with open(full, "rb") as f:
            return f.read()
    except OSError as error:
        raise KubeconfigError(
            f"invalid kubeconfig {path!r}: {file_key} {full!r}: {error.strerror or error}"
        ) from None


def load_kubeconfig(path: str) -> KubeconfigTarget:
    """Read ``path`` and resolve its current context. KubeconfigError on any problem."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as error:
        raise KubeconfigError(f"invalid kubeconfig {path!r}: {error.strerror or error}") from None
    try:
        doc = yamlguard.load(raw)
    except yaml.YAMLError as error:
        raise KubeconfigError(f"invalid kubeconfig {path!r}: {error}") from None
    if not isinstance(doc, dict):
        raise KubeconfigError(f"invalid kubeconfig {path!r}: not a kubeconfig (a YAML map)")
    current = doc.get("current-context") or ""
    contexts = doc.get("contexts") or []
    if not current:
        # clientcmd with no current context finds no configuration; a file with exactly one
        # context is unambiguous, so accept it (what users of a webhook file expect).
        if isinstance(contexts, list) and len(contexts) == 1 and isinstance(contexts[0], dict):
            current = contexts[0].get("name") or ""
        if not current:
            raise KubeconfigError(f"invalid kubeconfig {path!r}: no current-context is set")
    context = _named(contexts, current, "context", path)
    cluster_name = context.get("cluster") or ""
    user_name = context.get("user") or ""
    cluster = _named(doc.get("clusters"), cluster_name, "cluster", path)
    user: Mapping[str, Any] = _named(doc.get("users"), user_name, "user", path) if user_name else {}
    server = cluster.get("server") or ""
    if not server:
        raise KubeconfigError(
            f"invalid kubeconfig {path!r}: cluster {cluster_name!r} has no server"
        )
    if not str(server).startswith(("https://", "http://")):
        raise KubeconfigError(
            f"invalid kubeconfig {path!r}: server {server!r} is not an http(s) URL"
        )
    base = os.path.dirname(os.path.abspath(path))
    ca = _file_or_data(cluster, "certificate-authority", "certificate-authority-data", base, path)
    cert = _file_or_data(user, "client-certificate", "client-certificate-data", base, path)
    key = _file_or_data(user, "client-key", "client-key-data", base, path)
    if (cert is None) != (key is None):
        raise KubeconfigError(
            f"invalid kubeconfig {path!r}: client-certificate and client-key must be given together"
        )
    token = user.get("token") or None
    token_file = user.get("tokenFile")
    if token is None and token_file:
        full = token_file if os.path.isabs(token_file) else os.path.join(base, token_file)
        try:
            with open(full, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError as error:
            raise KubeconfigError(
                f"invalid kubeconfig {path!r}: tokenFile {full!r}: {error.strerror or error}"
            ) from None
    insecure = bool(cluster.get("insecure-skip-tls-verify", False))
    if insecure and ca is not None:
        raise KubeconfigError(
            f"invalid kubeconfig {path!r}: specifying a root certificates file with the "
            "insecure flag is not allowed"
        )
    target = KubeconfigTarget(
        path=path,
        server=str(server),
        ca_pem=ca,
        client_cert_pem=cert,
        client_key_pem=key,
        token=token,
        username=user.get("username"),
        password=user.get("password"),
        insecure_skip_tls_verify=insecure,
        tls_server_name=str(cluster.get("tls-server-name") or ""),
    )
    try:
        target.tls_policy()  # parse the certificates now, so errors stop start-up
    except KubeconfigError:
        raise
    except ValueError as error:
        raise KubeconfigError(f"invalid kubeconfig {path!r}: {error}") from None
    return target


def describe_failure(failure: Failure) -> str:
    """A readable reason for a failed HTTP exchange (Agent wraps transport errors in lists)."""
    reasons = getattr(failure.value, "reasons", None)
    if reasons:
        return "; ".join(r.getErrorMessage() for r in reasons)
    return failure.getErrorMessage()


class WebhookHTTPError(Exception):
    """A webhook answered with a status outside 2xx, or could not be reached."""

    def __init__(self, message: str, code: int = 0, retry_after: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.retry_after = retry_after


def post_json(
    client: Any,
    clock: IReactorTime,
    url: str,
    body: bytes,
    timeout: float,
    headers: Mapping[bytes, list[bytes]] | None = None,
) -> Deferred[bytes]:
    """POST ``body`` as JSON; fires with the response body of a 2xx answer.

    Errbacks with :class:`WebhookHTTPError` for other statuses (``code`` set), and with the
    transport's error when the webhook cannot be reached. ``timeout`` (seconds, on ``clock``)
    cancels the request, as the Go client's ``Timeout`` does.
    """
    all_headers = Headers(
        {b"Content-Type": [b"application/json"], b"Accept": [b"application/json, */*"]}
    )
    for name, values in (headers or {}).items():
        all_headers.setRawHeaders(name, values)
    span = spans.start("POST", url) if spans.start is not None else None
    if span is not None:
        for name, values in span.headers.items():
            all_headers.setRawHeaders(name, values)
    d: Deferred[Any] = client.request("POST", url, headers=all_headers, data=body)
    timer: IDelayedCall | None = None
    if timeout > 0:
        timer = clock.callLater(timeout, d.cancel)

    answered = [0]

    def got(response: Any) -> Deferred[bytes]:
        answered[0] = response.code
        content: Deferred[bytes] = treq.content(response)

        def check(data: bytes) -> bytes:
            if not 200 <= response.code < 300:
                retry = response.headers.hasHeader(b"retry-after")
                text = data.decode("utf-8", "replace").strip()
                raise WebhookHTTPError(
                    f"the server responded with the status code {response.code} but did not "
                    f"return more information: {text[:200]}".rstrip(": "),
                    response.code,
                    retry,
                )
            return data

        return content.addCallback(check)

    def done(result: Any) -> Any:
        if timer is not None and timer.active():
            timer.cancel()
        if span is not None:
            span.end(answered[0])
        return result

    def failed(failure: Failure) -> Failure:
        if timer is not None and timer.active():
            timer.cancel()
        if span is not None:
            span.end(answered[0])
        return failure

    d.addCallback(got)
    d.addCallbacks(done, failed)
    return d
