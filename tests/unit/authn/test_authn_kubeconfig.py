"""The kubeconfig loader the webhooks share."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from authn_helpers import issue, pem_private

from apiserver.auth.kubeconfig import KubeconfigError, load_kubeconfig

CA = issue("webhook-ca", ca=True)
CLIENT = issue("apiserver", issuer=CA)


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "webhook.kubeconfig"
    path.write_text(text)
    return str(path)


def test_files_relative_to_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_bytes(CA.pem())
    (tmp_path / "c.pem").write_bytes(CLIENT.pem())
    (tmp_path / "k.pem").write_bytes(pem_private(CLIENT.key))
    path = write(
        tmp_path,
        """apiVersion: v1
kind: Config
clusters:
- name: authn
  cluster: {server: "https://authn.example/authenticate", certificate-authority: ca.pem}
users: [{name: apiserver, user: {client-certificate: c.pem, client-key: k.pem}}]
contexts: [{name: webhook, context: {cluster: authn, user: apiserver}}]
current-context: webhook
""",
    )
    target = load_kubeconfig(path)
    assert target.server == "https://authn.example/authenticate"
    assert target.ca_pem == CA.pem()
    assert target.client_cert_pem == CLIENT.pem()
    assert target.request_headers() == {}
    policy = target.tls_policy()
    assert policy.creatorForNetloc(b"authn.example", 443) is policy.creatorForNetloc(
        b"authn.example", 443
    )


def test_inline_data_and_token(tmp_path: Path) -> None:
    data = base64.b64encode(CA.pem()).decode()
    path = write(
        tmp_path,
        f"""clusters:
- name: c
  cluster: {{server: "https://h:8443/x", certificate-authority-data: {data}}}
users: [{{name: u, user: {{token: secret}}}}]
contexts: [{{name: only, context: {{cluster: c, user: u}}}}]
""",
    )
    target = load_kubeconfig(path)  # a single context needs no current-context
    assert target.ca_pem == CA.pem()
    assert target.request_headers() == {b"Authorization": [b"Bearer secret"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- a list\n", "not a kubeconfig"),
        ("current-context: nope\ncontexts: []\n", "context 'nope' not found"),
        (
            "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
            "clusters: [{name: c, cluster: {}}]\n",
            "has no server",
        ),
        (
            "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
            "clusters: [{name: c, cluster: {server: 'https://h', "
            "certificate-authority: nope.pem}}]\n",
            "certificate-authority",
        ),
        (
            "current-context: x\ncontexts: [{name: x, context: {cluster: c}}]\n"
            "clusters: [{name: c, cluster: {server: 'https://h', "
            "certificate-authority-data: bm90IGEgY2VydA==}}]\n",
            "no PEM certificate",
        ),
        ("clusters: []\n", "no current-context"),
    ],
)
def test_errors_name_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(KubeconfigError) as info:
        load_kubeconfig(path)
    assert path in str(info.value)
    assert message in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KubeconfigError, match=r"absent"):
        load_kubeconfig(str(tmp_path / "absent"))
