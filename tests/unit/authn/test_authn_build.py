"""build_authenticator: which authenticators the flags create, in which order, and start-up
errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from authn_helpers import NOW, FakeRequest, FakeStore, issue, pem_public, result_of, rsa_key
from cryptography import x509
from twisted.internet import defer
from twisted.internet.interfaces import ISSLTransport
from twisted.internet.testing import MemoryReactorClock
from zope.interface import implementer

from apiserver.auth.authn import ALWAYS_ALLOW_LOG, ReloadingJWT, build_authenticator
from apiserver.auth.authn.common import ConfigError
from apiserver.auth.authn.jwt_config import parse_authentication_config
from apiserver.auth.authn.serviceaccount import TokenSigner
from apiserver.auth.interface import AuthenticationError, AuthResult, UserInfo
from apiserver.options.config import ServerConfig


def reactor() -> MemoryReactorClock:
    clock = MemoryReactorClock()
    clock.advance(NOW)
    return clock


def config(**values: Any) -> ServerConfig:
    return ServerConfig.defaults().evolve(**values)


def token_file(tmp_path: Path) -> str:
    path = tmp_path / "tokens.csv"
    path.write_text('secret-token,alice,uid-1,"dev,ops"\n')
    return str(path)


def test_anonymous_flag_and_always_allow() -> None:
    _, allowed = build_authenticator(ServerConfig.defaults(), reactor(), FakeStore())
    assert allowed is False  # AlwaysAllow is the default mode
    _, allowed = build_authenticator(config(authorization_mode=("RBAC",)), reactor(), FakeStore())
    assert allowed is True
    _, allowed = build_authenticator(
        config(authorization_mode=("RBAC",), anonymous_auth=False), reactor(), FakeStore()
    )
    assert allowed is False
    _, allowed = build_authenticator(
        config(authorization_mode=("Node", "AlwaysAllow")), reactor(), FakeStore()
    )
    assert allowed is False
    assert "Resetting AnonymousAuth to false" in ALWAYS_ALLOW_LOG


def test_static_token(tmp_path: Path) -> None:
    authenticator, _ = build_authenticator(
        config(token_auth_file=token_file(tmp_path)), reactor(), FakeStore()
    )
    result = result_of(
        authenticator.authenticate(FakeRequest({"Authorization": "Bearer secret-token"}))
    )
    assert result.user.name == "alice"
    assert result.user.groups == ("dev", "ops", "system:authenticated")
    with pytest.raises(AuthenticationError, match=r"invalid bearer token"):
        authenticator.authenticate(FakeRequest({"Authorization": "Bearer wrong"}))
    assert authenticator.authenticate(FakeRequest()) is None


def test_bad_token_file_stops_start_up(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text("only,two\n")
    with pytest.raises(ConfigError, match=str(path)):
        build_authenticator(config(token_auth_file=str(path)), reactor(), FakeStore())


@implementer(ISSLTransport)
class FakeTLS:  # type: ignore[misc]
    def __init__(self, cert: x509.Certificate) -> None:
        self.cert = cert

    def getPeerCertificate(self) -> x509.Certificate:
        return self.cert


def tls_request(cert: x509.Certificate, headers: dict[str, Any] | None = None) -> FakeRequest:
    request = FakeRequest(headers)
    request.transport = FakeTLS(cert)
    return request


def test_front_proxy_before_x509(tmp_path: Path) -> None:
    client_ca = issue("client-ca", ca=True)
    proxy_ca = issue("proxy-ca", ca=True)
    (tmp_path / "client-ca.pem").write_bytes(client_ca.pem())
    (tmp_path / "proxy-ca.pem").write_bytes(proxy_ca.pem())
    authenticator, _ = build_authenticator(
        config(
            client_ca_file=str(tmp_path / "client-ca.pem"),
            requestheader_client_ca_file=str(tmp_path / "proxy-ca.pem"),
            requestheader_allowed_names=("aggregator",),
            requestheader_username_headers=("X-Remote-User",),
            requestheader_group_headers=("X-Remote-Group",),
        ),
        reactor(),
        FakeStore(),
    )
    proxy = issue("aggregator", issuer=proxy_ca)
    result = result_of(
        authenticator.authenticate(
            tls_request(proxy.cert, {"X-Remote-User": "bob", "X-Remote-Group": "g"})
        )
    )
    assert (result.user.name, result.user.groups) == ("bob", ("g", "system:authenticated"))
    # A regular client certificate cannot set the proxy headers.
    client = issue("carol", issuer=client_ca, orgs=["team"])
    result = result_of(
        authenticator.authenticate(tls_request(client.cert, {"X-Remote-User": "admin"}))
    )
    assert result.user.name == "carol"
    # A certificate nobody trusts is a 401.
    with pytest.raises(AuthenticationError):
        authenticator.authenticate(tls_request(issue("x", issuer=issue("ca3", ca=True)).cert))


def test_overlapping_ca_files_need_allowed_names(tmp_path: Path) -> None:
    ca = issue("shared-ca", ca=True)
    (tmp_path / "ca.pem").write_bytes(ca.pem())
    with pytest.raises(ConfigError, match=r"contain overlapping certificates"):
        build_authenticator(
            config(
                client_ca_file=str(tmp_path / "ca.pem"),
                requestheader_client_ca_file=str(tmp_path / "ca.pem"),
            ),
            reactor(),
            FakeStore(),
        )


def test_service_account_tokens(tmp_path: Path) -> None:
    key = rsa_key("sa")
    (tmp_path / "sa.pub").write_bytes(pem_public(key))
    store = FakeStore()
    store.put(
        "/registry/serviceaccounts/ci/builder",
        {"metadata": {"name": "builder", "namespace": "ci", "uid": "sa-uid"}},
    )
    issuer = "https://kubernetes.default.svc"
    authenticator, _ = build_authenticator(
        config(
            service_account_issuer=(issuer,), service_account_key_file=(str(tmp_path / "sa.pub"),)
        ),
        reactor(),
        store,
    )
    signer = TokenSigner(key, issuer)
    token = signer.sign(signer.bound_claims("ci", "builder", "sa-uid", [issuer], NOW))
    result = result_of(
        authenticator.authenticate(FakeRequest({"Authorization": f"Bearer {token}"}))
    )
    assert result.user.name == "system:serviceaccount:ci:builder"
    assert result.user.groups[-1] == "system:authenticated"
    wrong = signer.sign(signer.bound_claims("ci", "builder", "sa-uid", ["vault"], NOW))
    with pytest.raises(AuthenticationError, match=r"is invalid for the target audiences"):
        result_of(authenticator.authenticate(FakeRequest({"Authorization": f"Bearer {wrong}"})))


def test_bootstrap_tokens_only_when_enabled() -> None:
    store = FakeStore()
    request = FakeRequest({"Authorization": "Bearer abcdef.0123456789abcdef"})
    authenticator, _ = build_authenticator(ServerConfig.defaults(), reactor(), store)
    assert authenticator.authenticate(request) is None  # no token authenticator: no opinion
    authenticator, _ = build_authenticator(
        config(enable_bootstrap_token_auth=True, store_prefix="/custom"), reactor(), store
    )
    with pytest.raises(AuthenticationError, match=r"invalid bearer token"):
        result_of(authenticator.authenticate(request))
    assert store.gets == [b"/custom/secrets/kube-system/bootstrap-token-abcdef"]


AUTH_CONFIG = """apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer: {url: "https://idp.example", audiences: [kube]}
  claimMappings: {username: {claim: sub, prefix: ""}}
"""


def test_authentication_config_exclusions(tmp_path: Path) -> None:
    path = tmp_path / "authn.yaml"
    path.write_text(AUTH_CONFIG)
    with pytest.raises(
        ConfigError, match=r"^authentication-config file and oidc-\* flags are mutually exclusive$"
    ):
        build_authenticator(
            config(
                authentication_config=str(path),
                oidc_issuer_url="https://other.example",
                oidc_client_id="c",
            ),
            reactor(),
            FakeStore(),
        )
    anon = tmp_path / "anon.yaml"
    anon.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n"
        "anonymous: {enabled: true, conditions: [{path: /livez}]}\n"
    )
    with pytest.raises(ConfigError, match=r"--anonymous-auth flag cannot be set"):
        build_authenticator(
            config(authentication_config=str(anon), anonymous_auth=True), reactor(), FakeStore()
        )
    # oidc flags with a file that has no jwt section are fine (the seed's rule).
    authenticator, allowed = build_authenticator(
        config(
            authentication_config=str(anon),
            oidc_issuer_url="https://other.example",
            oidc_client_id="c",
        ),
        reactor(),
        FakeStore(),
    )
    assert allowed is False
    result = result_of(authenticator.authenticate(FakeRequest(path=b"/livez")))
    assert result.user.name == "system:anonymous"
    assert authenticator.authenticate(FakeRequest(path=b"/readyz")) is None


def test_authentication_config_anonymous_without_conditions(tmp_path: Path) -> None:
    anon = tmp_path / "anon.yaml"
    anon.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AuthenticationConfiguration\n"
        "anonymous: {enabled: true}\n"
    )
    _, allowed = build_authenticator(
        config(authentication_config=str(anon)), reactor(), FakeStore()
    )
    assert allowed is True  # the file's anonymous section is not reset by AlwaysAllow


def test_bad_files_name_themselves(tmp_path: Path) -> None:
    bad = tmp_path / "authn.yaml"
    bad.write_text(AUTH_CONFIG.replace("https://idp", "http://idp"))
    with pytest.raises(ConfigError, match=str(bad)):
        build_authenticator(config(authentication_config=str(bad)), reactor(), FakeStore())
    kubeconfig = tmp_path / "webhook.yaml"
    kubeconfig.write_text("clusters: []\n")
    with pytest.raises(
        ConfigError, match=r"--authentication-token-webhook-config-file.*webhook.yaml"
    ):
        build_authenticator(
            config(authentication_token_webhook_config_file=str(kubeconfig)),
            reactor(),
            FakeStore(),
        )
    with pytest.raises(ConfigError, match=r"oidc-issuer-url and oidc-client-id"):
        build_authenticator(config(oidc_groups_claim="groups"), reactor(), FakeStore())


def test_authentication_config_reload(tmp_path: Path) -> None:
    path = tmp_path / "authn.yaml"
    path.write_text(AUTH_CONFIG)
    clock = reactor()
    data = path.read_bytes()
    made: list[str] = []

    class Offline:
        def request(self, *args: Any, **kw: Any) -> Any:
            return defer.Deferred()

    def client_factory(jwt_config: Any, _: Any) -> Any:
        made.append(jwt_config.issuer_url)
        return Offline()

    reloading = ReloadingJWT(
        str(path), parse_authentication_config(data, str(path)), data, (), (), clock, client_factory
    )
    reloading.start(60)
    assert made == ["https://idp.example"]
    clock.advance(60)
    assert made == ["https://idp.example"]  # unchanged file: nothing rebuilt
    path.write_text(AUTH_CONFIG.replace("idp.example", "idp2.example"))
    clock.advance(60)
    assert made == ["https://idp.example", "https://idp2.example"]
    assert reloading.authenticators[0].config.issuer_url == "https://idp2.example"
    path.write_text(AUTH_CONFIG.replace("https://idp", "http://idp"))  # invalid: ignored
    clock.advance(60)
    assert reloading.authenticators[0].config.issuer_url == "https://idp2.example"
    path.write_text(AUTH_CONFIG + "anonymous: {enabled: true}\n")  # anonymous may not change
    clock.advance(60)
    assert reloading.authenticators[0].config.issuer_url == "https://idp2.example"


def test_authentication_config_jwt_authenticators_are_asked(tmp_path: Path) -> None:
    """Tokens go to the configured issuers' authenticators, the reloaded ones after a
    reload (the union used to stay empty, so no JWT from the file was ever accepted)."""
    path = tmp_path / "authn.yaml"
    path.write_text(AUTH_CONFIG)
    clock = reactor()
    data = path.read_bytes()

    class Offline:
        def request(self, *args: Any, **kw: Any) -> Any:
            return defer.Deferred()

    reloading = ReloadingJWT(
        str(path),
        parse_authentication_config(data, str(path)),
        data,
        (),
        (),
        clock,
        lambda *_: Offline(),
    )
    asked: list[tuple[str, str]] = []

    def answering(name: str) -> Any:
        def authenticate_token(token: str, audiences: tuple[str, ...]) -> Any:
            asked.append((name, token))
            return AuthResult(UserInfo(name=f"user-of-{name}"), ())

        return authenticate_token

    reloading.authenticators[0].authenticate_token = answering("first")  # type: ignore[method-assign]
    result = reloading.authenticate_token("t1", ())
    assert isinstance(result, AuthResult) and result.user.name == "user-of-first"
    reloading.start(60)
    path.write_text(AUTH_CONFIG.replace("idp.example", "idp2.example"))
    clock.advance(60)
    reloading.authenticators[0].authenticate_token = answering("second")  # type: ignore[method-assign]
    result = reloading.authenticate_token("t2", ())
    assert isinstance(result, AuthResult) and result.user.name == "user-of-second"
    assert asked == [("first", "t1"), ("second", "t2")]
    reloading.stop()
