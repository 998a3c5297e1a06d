"""The example configurations in etc/, read by the loaders the server uses for their flags,
so that an example never drifts from what the server accepts.

The audit policy is also checked rule by rule in tests/unit/audit/test_policy.py. Encryption
at rest is not implemented yet: its example is checked against kube-apiserver's format
(k8s.io/apiserver/pkg/apis/apiserver/v1/types.go, EncryptionConfiguration, and the checks of
k8s.io/apiserver/pkg/apis/apiserver/validation/validation_encryption.go).
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

import pytest
import yaml

from apiserver.audit.policy import load_policy_file
from apiserver.auth.authn.jwt_config import load_authentication_config
from apiserver.auth.authn.oidc import ClaimMapping

ETC = Path(__file__).resolve().parents[2] / "etc"

#: Every YAML file in etc/ and the test that loads it.
CHECKED = {
    "audit-policy.yaml": "test_audit_policy_loads",
    "authentication-config.yaml": "test_authentication_config_loads",
    "encryption-config.yaml": "test_encryption_config_is_kube_apiservers_format",
}


def test_every_example_is_checked() -> None:
    assert sorted(p.name for p in ETC.glob("*.yaml")) == sorted(CHECKED)
    assert all(name in globals() for name in CHECKED.values())


def test_audit_policy_loads() -> None:
    policy = load_policy_file(str(ETC / "audit-policy.yaml"))
    assert policy.omit_managed_fields is True
    assert policy.rules[-1].level == "Metadata"


def test_authentication_config_loads() -> None:
    config = load_authentication_config(str(ETC / "authentication-config.yaml"))
    (jwt,) = config.jwt
    assert jwt.issuer_url == "https://issuer.example.com"
    assert jwt.audiences == ("apiserver",)
    assert jwt.username == ClaimMapping(claim="email", prefix="oidc:")
    assert jwt.groups == ClaimMapping(claim="groups", prefix="oidc:")
    assert config.anonymous is not None and config.anonymous.enabled
    assert config.anonymous.paths == ("/livez", "/readyz", "/healthz")
    # The rules evaluate as intended in the server's CEL subset, not only compile.
    (claim_rule,) = jwt.claim_rules
    assert claim_rule.expression.evaluate({"claims": {"email_verified": True}}) is True
    assert claim_rule.expression.evaluate({"claims": {}}) is False
    (user_rule,) = jwt.user_rules
    assert user_rule.expression.evaluate({"user": {"username": "oidc:a@example.com"}}) is True
    assert user_rule.expression.evaluate({"user": {"username": "system:admin"}}) is False


# Key lengths each provider accepts (validation_encryption.go: aesKeySizes, secretBoxKeySize).
_KEY_SIZES = {"aescbc": (16, 24, 32), "aesgcm": (16, 24, 32), "secretbox": (32,)}
_PROVIDERS = {"aescbc", "aesgcm", "secretbox", "identity", "kms"}


def encryption_problems(doc: Any) -> list[str]:
    """What kube-apiserver's validation would reject in an EncryptionConfiguration."""
    if not isinstance(doc, dict):
        return ["not an object"]
    problems: list[str] = []
    if doc.get("apiVersion") != "apiserver.config.k8s.io/v1":
        problems.append(f"apiVersion: {doc.get('apiVersion')!r}")
    if doc.get("kind") != "EncryptionConfiguration":
        problems.append(f"kind: {doc.get('kind')!r}")
    problems += [f"unknown field {key}" for key in set(doc) - {"apiVersion", "kind", "resources"}]
    groups = doc.get("resources") or []
    if not groups:
        problems.append("resources: Required value")
    for i, group in enumerate(groups):
        where = f"resources[{i}]"
        names = group.get("resources") or []
        if not names:
            problems.append(f"{where}.resources: Required value")
        for name in names:
            if name != name.lower() or ("*" in name and not name.startswith("*.")):
                problems.append(f"{where}.resources: Invalid value: {name!r}")
        providers = group.get("providers") or []
        if not providers:
            problems.append(f"{where}.providers: Required value")
        for j, provider in enumerate(providers):
            problems += _provider_problems(provider, f"{where}.providers[{j}]")
    return problems


def _provider_problems(provider: Any, where: str) -> list[str]:
    if not isinstance(provider, dict) or len(provider) != 1 or set(provider) - _PROVIDERS:
        return [f"{where}: exactly one provider of {sorted(_PROVIDERS)} must be set"]
    ((kind, body),) = provider.items()
    if kind not in _KEY_SIZES:
        return []
    problems: list[str] = []
    keys = (body or {}).get("keys") or []
    if not keys:
        problems.append(f"{where}.{kind}.keys: Required value")
    names: set[str] = set()
    for k, key in enumerate(keys):
        name = key.get("name", "")
        if not name or name in names:
            problems.append(f"{where}.{kind}.keys[{k}].name: missing or duplicate")
        names.add(name)
        try:
            size = len(base64.b64decode(key.get("secret", ""), validate=True))
        except binascii.Error:
            problems.append(f"{where}.{kind}.keys[{k}].secret: secrets must be base64 encoded")
            continue
        if size not in _KEY_SIZES[kind]:
            problems.append(f"{where}.{kind}.keys[{k}].secret: key of {size} bytes")
    return problems


def test_encryption_config_is_kube_apiservers_format() -> None:
    doc = yaml.safe_load((ETC / "encryption-config.yaml").read_text())
    assert encryption_problems(doc) == []
    (group,) = doc["resources"]
    assert group["resources"] == ["events"]
    # Encrypts with the first provider; identity last still reads what was stored in clear.
    assert next(iter(group["providers"][0])) in ("aescbc", "secretbox")
    assert group["providers"][-1] == {"identity": {}}


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(kind="EncryptionConfig"), "kind: 'EncryptionConfig'"),
        (
            lambda d: d["resources"][0]["providers"][0]["secretbox"]["keys"][0].update(
                secret=base64.b64encode(b"short").decode()
            ),
            "resources[0].providers[0].secretbox.keys[0].secret: key of 5 bytes",
        ),
        (
            lambda d: d["resources"][0]["providers"].insert(0, {"aescbc": {}, "identity": {}}),
            "resources[0].providers[0]: exactly one provider",
        ),
    ],
)
def test_the_encryption_check_can_fail(change: Any, problem: str) -> None:
    doc = yaml.safe_load((ETC / "encryption-config.yaml").read_text())
    change(doc)
    assert any(p.startswith(problem) for p in encryption_problems(doc))
