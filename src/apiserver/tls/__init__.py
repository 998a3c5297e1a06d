"""TLS serving: context factory, self-signed certificates, SNI, client certificates.

The reference behaviour is kube-apiserver's secure serving (``AS/pkg/server/secure_serving.go``,
``AS/pkg/server/options/serving.go``, ``AS/pkg/server/dynamiccertificates/``) and the flag
parsers of ``k8s.io/component-base/cli/flag``.

Modules:

- :mod:`apiserver.tls.selfsigned` -- the ``<cert-dir>/apiserver.crt|key`` fallback pair.
- :mod:`apiserver.tls.ciphers` -- Go cipher-suite and TLS-version names to OpenSSL.
- :mod:`apiserver.tls.sni` -- ``--tls-sni-cert-key`` parsing, names and lookup.
- :mod:`apiserver.tls.context` -- the OpenSSL server connection creator used by the listener.
- :mod:`apiserver.tls.peercert` -- the client certificate of a request (HTTP/1.1 and HTTP/2).
"""
