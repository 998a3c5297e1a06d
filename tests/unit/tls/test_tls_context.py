"""The server context factory, exercised with in-memory handshakes (no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL
from tls_helpers import (
    client_cert,
    client_context,
    common_name,
    handshake,
    issue,
    server_cert,
    write_cert,
    write_pair,
)
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator

from apiserver.tls.context import ServerContextFactory, build_server_context
from apiserver.tls.sni import SniCertKey


def peer_cn(connection: SSL.Connection) -> str:
    cert = connection.get_peer_certificate(as_cryptography=True)
    assert cert is not None
    return common_name(cert)


@pytest.fixture
def default_pair(tmp_path: Path) -> tuple[str, str]:
    ca = issue("serving-ca", ca=True, key_kind="rsa")
    leaf = issue("default.example", issuer=ca, dns=["default.example"], key_kind="rsa")
    return write_pair(tmp_path, "default", leaf, chain=[ca])


def connect(
    factory: ServerContextFactory, client_ctx: SSL.Context, server_name: bytes | None = None
) -> tuple[SSL.Connection, SSL.Connection]:
    server = factory.serverConnectionForTLS(None)
    result = handshake(server, client_ctx, server_name)
    return result.client, result.server


def test_provides_the_twisted_interface(default_pair: tuple[str, str]) -> None:
    factory = build_server_context(cert_file=default_pair[0], key_file=default_pair[1])
    assert IOpenSSLServerConnectionCreator.providedBy(factory)
    assert isinstance(factory.getContext(), SSL.Context)


def test_full_chain_is_sent(default_pair: tuple[str, str]) -> None:
    factory = build_server_context(cert_file=default_pair[0], key_file=default_pair[1])
    client, _ = connect(factory, client_context())
    chain = client.get_peer_cert_chain(as_cryptography=True)
    assert chain is not None
    assert [common_name(c) for c in chain] == ["default.example", "serving-ca"]


@pytest.mark.parametrize(
    ("http2", "offered", "expected"),
    [
        (True, [b"h2", b"http/1.1"], b"h2"),
        (True, [b"http/1.1", b"h2"], b"h2"),  # the server's preference order
        (True, [b"http/1.1"], b"http/1.1"),
        (False, [b"h2", b"http/1.1"], b"http/1.1"),
        (True, [], b""),
    ],
)
def test_alpn(
    default_pair: tuple[str, str], http2: bool, offered: list[bytes], expected: bytes
) -> None:
    factory = build_server_context(cert_file=default_pair[0], key_file=default_pair[1], http2=http2)
    assert factory.alpn_protocols == ((b"h2", b"http/1.1") if http2 else (b"http/1.1",))
    client, server = connect(factory, client_context(alpn=offered))
    assert client.get_alpn_proto_negotiated() == expected
    assert server.get_alpn_proto_negotiated() == expected


@pytest.mark.parametrize(("http2", "offered"), [(True, [b"acme-tls/1"]), (False, [b"h2"])])
def test_alpn_without_overlap_fails_like_go(
    default_pair: tuple[str, str], http2: bool, offered: list[bytes]
) -> None:
    factory = build_server_context(cert_file=default_pair[0], key_file=default_pair[1], http2=http2)
    with pytest.raises(SSL.Error):
        connect(factory, client_context(alpn=offered))


def test_h2_is_not_chosen_below_tls12(default_pair: tuple[str, str]) -> None:
    factory = build_server_context(
        cert_file=default_pair[0], key_file=default_pair[1], min_version="VersionTLS11"
    )
    ctx = client_context(
        alpn=[b"h2", b"http/1.1"], max_version=SSL.TLS1_1_VERSION, ciphers=b"DEFAULT:@SECLEVEL=0"
    )
    client, _ = connect(factory, ctx)
    assert client.get_protocol_version_name() == "TLSv1.1"
    assert client.get_alpn_proto_negotiated() == b"http/1.1"


def test_min_version_default_refuses_tls11(default_pair: tuple[str, str]) -> None:
    tls11_client = client_context(max_version=SSL.TLS1_1_VERSION, ciphers=b"DEFAULT:@SECLEVEL=0")
    lenient = build_server_context(
        cert_file=default_pair[0], key_file=default_pair[1], min_version="VersionTLS10"
    )
    client, _ = connect(lenient, tls11_client)  # the client itself can do TLS 1.1
    assert client.get_protocol_version_name() == "TLSv1.1"

    strict = build_server_context(cert_file=default_pair[0], key_file=default_pair[1])
    with pytest.raises(SSL.Error):
        connect(strict, tls11_client)
    client, _ = connect(strict, client_context(max_version=SSL.TLS1_2_VERSION))
    assert client.get_protocol_version_name() == "TLSv1.2"


def test_min_version_tls13_refuses_tls12(default_pair: tuple[str, str]) -> None:
    factory = build_server_context(
        cert_file=default_pair[0], key_file=default_pair[1], min_version="VersionTLS13"
    )
    with pytest.raises(SSL.Error):
        connect(factory, client_context(max_version=SSL.TLS1_2_VERSION))
    client, _ = connect(factory, client_context())
    assert client.get_protocol_version_name() == "TLSv1.3"


def test_cipher_suites_restrict_tls12(default_pair: tuple[str, str]) -> None:
    factory = build_server_context(
        cert_file=default_pair[0],
        key_file=default_pair[1],
        cipher_suites=["TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384"],
    )
    client, _ = connect(factory, client_context(max_version=SSL.TLS1_2_VERSION))
    assert client.get_cipher_name() == "ECDHE-RSA-AES256-GCM-SHA384"
    only_other = client_context(
        max_version=SSL.TLS1_2_VERSION, ciphers=b"ECDHE-RSA-AES128-GCM-SHA256"
    )
    with pytest.raises(SSL.Error):
        connect(factory, only_other)


def test_tls13_only_cipher_names_mean_tls13_only(default_pair: tuple[str, str]) -> None:
    factory = build_server_context(
        cert_file=default_pair[0],
        key_file=default_pair[1],
        cipher_suites=["TLS_AES_128_GCM_SHA256"],
    )
    assert factory.min_version == "VersionTLS13"
    with pytest.raises(SSL.Error):
        connect(factory, client_context(max_version=SSL.TLS1_2_VERSION))


def test_unknown_cipher_suite_is_rejected(default_pair: tuple[str, str]) -> None:
    with pytest.raises(ValueError, match="Cipher suite TLS_NOPE not supported or doesn't exist"):
        build_server_context(
            cert_file=default_pair[0], key_file=default_pair[1], cipher_suites=["TLS_NOPE"]
        )


def test_mismatched_default_pair_is_rejected(tmp_path: Path) -> None:
    cert, _ = write_pair(tmp_path, "a", server_cert("a"))
    _, key = write_pair(tmp_path, "b", server_cert("b"))
    with pytest.raises(ValueError, match="does not match"):
        build_server_context(cert_file=cert, key_file=key)


class TestClientCertificates:
    @pytest.fixture
    def cas(self, tmp_path: Path) -> dict[str, object]:
        client_ca = issue("client-ca", ca=True)
        proxy_ca = issue("proxy-ca", ca=True)
        stranger_ca = issue("stranger-ca", ca=True)
        return {
            "client_ca": client_ca,
            "proxy_ca": proxy_ca,
            "stranger_ca": stranger_ca,
            "files": [
                write_cert(tmp_path, "client-ca.crt", client_ca),
                write_cert(tmp_path, "bundle.crt", proxy_ca, client_ca),  # duplicate dropped
            ],
        }

    def test_unknown_client_certificate_does_not_fail_the_handshake(
        self, default_pair: tuple[str, str], cas: dict
    ) -> None:
        factory = build_server_context(
            cert_file=default_pair[0], key_file=default_pair[1], client_ca_files=cas["files"]
        )
        for issuer, name in ((cas["client_ca"], "alice"), (cas["stranger_ca"], "mallory")):
            cert = client_cert(name, issuer)
            _, server = connect(factory, client_context(cert=cert))
            assert peer_cn(server) == name

    def test_no_client_certificate_is_fine(self, default_pair: tuple[str, str], cas: dict) -> None:
        factory = build_server_context(
            cert_file=default_pair[0], key_file=default_pair[1], client_ca_files=cas["files"]
        )
        _, server = connect(factory, client_context())
        assert server.get_peer_certificate() is None

    def test_ca_names_are_sent_as_hints(self, default_pair: tuple[str, str], cas: dict) -> None:
        factory = build_server_context(
            cert_file=default_pair[0], key_file=default_pair[1], client_ca_files=cas["files"]
        )
        for version in (SSL.TLS1_2_VERSION, SSL.TLS1_3_VERSION):
            client, _ = connect(factory, client_context(max_version=version))
            names = client.get_client_ca_list(as_cryptography=True)
            assert [n.rfc4514_string() for n in names] == ["CN=client-ca", "CN=proxy-ca"]

    def test_without_client_ca_no_certificate_is_requested(
        self, default_pair: tuple[str, str], cas: dict
    ) -> None:
        factory = build_server_context(cert_file=default_pair[0], key_file=default_pair[1])
        _, server = connect(factory, client_context(cert=client_cert("alice", cas["client_ca"])))
        assert server.get_peer_certificate() is None
        forced = build_server_context(
            cert_file=default_pair[0], key_file=default_pair[1], request_client_cert=True
        )
        _, server = connect(forced, client_context(cert=client_cert("bob", cas["client_ca"])))
        assert peer_cn(server) == "bob"

    def test_empty_ca_file_is_an_error(self, default_pair: tuple[str, str], tmp_path: Path) -> None:
        (tmp_path / "empty.crt").write_text("")
        with pytest.raises(ValueError, match=r"empty\.crt"):
            build_server_context(
                cert_file=default_pair[0],
                key_file=default_pair[1],
                client_ca_files=[str(tmp_path / "empty.crt")],
            )


class TestSNI:
    @pytest.fixture
    def factory(self, tmp_path: Path, default_pair: tuple[str, str]) -> ServerContextFactory:
        foo = write_pair(tmp_path, "foo", server_cert("foo.example", dns=["www.foo.example"]))
        wild = write_pair(tmp_path, "wild", server_cert("wild", dns=["ignored.example"]))
        also_foo = write_pair(tmp_path, "also-foo", server_cert("foo.example"))
        ip = write_pair(tmp_path, "ip", server_cert("by-ip"))
        return build_server_context(
            cert_file=default_pair[0],
            key_file=default_pair[1],
            sni=[
                SniCertKey(*foo),
                SniCertKey(*also_foo),  # later, same extracted name: loses
                SniCertKey(
                    wild[0], wild[1], names=("*.bar.example", "www.foo.example")
                ),  # explicit wins
                SniCertKey(ip[0], ip[1], names=("127.0.0.1",)),
            ],
        )

    @pytest.mark.parametrize(
        ("server_name", "expected"),
        [
            (b"foo.example", "foo.example"),
            (b"FOO.example.", "foo.example"),
            (b"www.foo.example", "wild"),
            (b"a.bar.example", "wild"),
            (b"bar.example", "default.example"),
            (b"a.b.bar.example", "default.example"),
            (b"ignored.example", "default.example"),  # explicit names replace extracted ones
            (b"unknown.example", "default.example"),
        ],
    )
    def test_certificate_per_server_name(
        self, factory: ServerContextFactory, server_name: bytes, expected: str
    ) -> None:
        client, _ = connect(factory, client_context(alpn=[b"h2"]), server_name=server_name)
        assert peer_cn(client) == expected
        # ALPN still works after the context switch.
        assert client.get_alpn_proto_negotiated() == b"h2"

    def test_context_for(self, factory: ServerContextFactory) -> None:
        assert factory.context_for(b"foo.example") is not factory.getContext()
        assert factory.context_for(b"nothing.example") is factory.getContext()
        assert factory.context_for(None, "127.0.0.1") is not factory.getContext()
        assert factory.context_for(None, "10.1.1.1") is factory.getContext()

    def test_sni_switch_keeps_client_certificates(
        self, tmp_path: Path, default_pair: tuple[str, str]
    ) -> None:
        ca = issue("client-ca", ca=True)
        foo = write_pair(tmp_path, "foo", server_cert("foo.example"))
        factory = build_server_context(
            cert_file=default_pair[0],
            key_file=default_pair[1],
            sni=[SniCertKey(*foo)],
            client_ca_files=[write_cert(tmp_path, "ca.crt", ca)],
        )
        client, server = connect(
            factory, client_context(cert=client_cert("carol", ca)), server_name=b"foo.example"
        )
        assert peer_cn(client) == "foo.example"
        assert peer_cn(server) == "carol"

    def test_bad_sni_pair_names_the_flag(
        self, tmp_path: Path, default_pair: tuple[str, str]
    ) -> None:
        cert, _ = write_pair(tmp_path, "a", server_cert("a"))
        with pytest.raises(ValueError, match=r"invalid SNI cert keypair \[0/.*a.crt,"):
            build_server_context(
                cert_file=default_pair[0],
                key_file=default_pair[1],
                sni=[SniCertKey(cert, default_pair[1])],
            )
        with pytest.raises(OSError, match=r"none\.crt"):
            build_server_context(
                cert_file=default_pair[0],
                key_file=default_pair[1],
                sni=[SniCertKey(str(tmp_path / "none.crt"), str(tmp_path / "none.key"))],
            )


def test_reload_swaps_certificates_for_new_connections(tmp_path: Path) -> None:
    cert, key = write_pair(tmp_path, "serving", server_cert("first"))
    factory = build_server_context(cert_file=cert, key_file=key)
    old_connection = factory.serverConnectionForTLS(None)
    assert factory.reload() is False  # nothing changed

    write_pair(tmp_path, "serving", server_cert("second"))
    assert factory.reload() is True
    client, _ = connect(factory, client_context())
    assert peer_cn(client) == "second"
    # A connection created before the reload keeps its context.
    result = handshake(old_connection, client_context())
    assert peer_cn(result.client) == "first"

    # A broken file keeps the current certificates and raises.
    Path(key).write_bytes(
        issue("x", key_kind="rsa").key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(ValueError, match="does not match"):
        factory.reload()
    client, _ = connect(factory, client_context())
    assert peer_cn(client) == "second"


def test_tls13_suite_is_chosen_as_go_chooses_it(default_pair: tuple[str, str]) -> None:
    """Go's server takes AES-128-GCM first, whatever AES suite the client lists first, and
    ChaCha20-Poly1305 for a client that puts it first (no AES hardware)."""
    factory = build_server_context(cert_file=default_pair[0], key_file=default_pair[1])
    aes256_first = client_context()
    aes256_first.set_tls13_ciphersuites(
        b"TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256"
    )
    client, _ = connect(factory, aes256_first)
    assert client.get_cipher_name() == "TLS_AES_128_GCM_SHA256"
    chacha_first = client_context()
    chacha_first.set_tls13_ciphersuites(b"TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256")
    client, _ = connect(factory, chacha_first)
    assert client.get_cipher_name() == "TLS_CHACHA20_POLY1305_SHA256"
    only_256 = client_context()
    only_256.set_tls13_ciphersuites(b"TLS_AES_256_GCM_SHA384")
    client, _ = connect(factory, only_256)
    assert client.get_cipher_name() == "TLS_AES_256_GCM_SHA384"
