"""EncryptionConfiguration: every validation and loading error, in kube-apiserver's words
(k8s.io/apiserver pkg/apis/apiserver/validation/validation_encryption.go,
pkg/server/options/encryptionconfig/config.go)."""

from __future__ import annotations

from pathlib import Path

import pytest

from apiserver.encryption.config import (
    EncryptionConfigError,
    build,
    decode,
    load_encryption_config,
    validate,
)

K32 = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
HEAD = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"


def problems(body: str, reload: bool = False) -> list[str]:
    return validate(decode((HEAD + body).encode()), reload)


def one_rule(providers: str, resources: str = "[events]") -> str:
    return f"resources:\n- resources: {resources}\n  providers:\n{providers}"


def test_a_good_config_has_no_problem() -> None:
    assert problems(one_rule(f"  - aesgcm: {{keys: [{{name: k, secret: {K32}}}]}}\n")) == []


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("resources: []\n", ["resources: Required value: at least one resources is required"]),
        (
            "resources:\n- resources: [events]\n",
            [
                "resources[0].providers: Required value: at least one "
                "resources[0].providers is required"
            ],
        ),
        (
            "resources:\n- providers: [identity: {}]\n",
            [
                "resources[0].resources: Required value: at least one "
                "resources[0].resources is required"
            ],
        ),
        (
            one_rule("  - {}\n"),
            [
                'resources[0].providers[0]: Invalid value: {"AESGCM":null,"AESCBC":null,'
                '"Secretbox":null,"Identity":null,"KMS":null}: provider does not contain any '
                "of the expected providers: KMS, AESGCM, AESCBC, Secretbox, Identity"
            ],
        ),
        (
            one_rule("  - {identity: {}, aescbc: {keys: []}}\n"),
            [
                'resources[0].providers[0]: Invalid value: {"AESGCM":null,"AESCBC":{"Keys":[]},'
                '"Secretbox":null,"Identity":{},"KMS":null}: more than one provider specified '
                "in a single element, should split into different list elements",
                "resources[0].providers[0].aescbc.keys: Required value: at least one keys is "
                "required",
            ],
        ),
        (
            one_rule("  - aesgcm: {keys: [{name: '', secret: ''}]}\n"),
            [
                "resources[0].providers[0].aesgcm.keys[0].name: Required value: name is a "
                "mandatory field for a key",
                "resources[0].providers[0].aesgcm.keys[0].secret: Required value: secret is a "
                "mandatory field for a key",
            ],
        ),
        (
            one_rule("  - aescbc: {keys: [{name: k, secret: 'not base64!'}]}\n"),
            [
                'resources[0].providers[0].aescbc.keys[0].secret: Invalid value: "REDACTED": '
                "secrets must be base64 encoded"
            ],
        ),
        (
            one_rule("  - aesgcm: {keys: [{name: k, secret: YWJjZGU=}]}\n"),
            [
                'resources[0].providers[0].aesgcm.keys[0].secret: Invalid value: "REDACTED": '
                "secret is not of the expected length, got 5, expected one of [16 24 32]"
            ],
        ),
        (
            one_rule("  - secretbox: {keys: [{name: k, secret: AAAAAAAAAAAAAAAAAAAAAA==}]}\n"),
            [
                'resources[0].providers[0].secretbox.keys[0].secret: Invalid value: "REDACTED": '
                "secret is not of the expected length, got 16, expected one of [32]"
            ],
        ),
    ],
)
def test_provider_and_key_problems(body: str, expected: list[str]) -> None:
    assert problems(body) == expected


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            '["Events"]',
            'resources[0].resources[0]: Invalid value: "Events": resource name '
            "should not contain capital letters",
        ),
        (
            '["*"]',
            "resources[0].resources[0]: Invalid value: \"*\": use '*.' to encrypt all the "
            "resources from core API group or *.* to encrypt all resources",
        ),
        (
            '["serviceipallocations"]',
            "resources[0].resources[0]: Invalid value: "
            '"serviceipallocations": resources which do not have REST API/s cannot be encrypted',
        ),
        (
            '["*.events.k8s.io"]',
            'resources[0].resources[0]: Invalid value: "*.events.k8s.io": '
            "'*.events.k8s.io' objects are stored using the 'events' API group in etcd. Use "
            "'events' instead in the config file",
        ),
        (
            '["deployments.extensions"]',
            "resources[0].resources[0]: Invalid value: "
            "\"deployments.extensions\": 'extensions' group has been removed and cannot be used "
            "for encryption",
        ),
        (
            '["events.*"]',
            'resources[0].resources[0]: Invalid value: "events.*": encrypting the '
            "same resource across groups is not supported",
        ),
        (
            '["events", "events"]',
            'resources[0].resources: Invalid value: ["events","events"]: '
            "the same resource cannot be specified multiple times",
        ),
        (
            '["events", "*."]',
            'resources[0].resources: Invalid value: ["events","*."]: using '
            "overlapping resources such as 'secrets' and '*.' in the same resource list is not "
            "allowed as they will be masked",
        ),
    ],
)
def test_resource_problems(resources: str, expected: str) -> None:
    assert problems(one_rule("  - identity: {}\n", resources)) == [expected]


def test_kms_problems() -> None:
    kms = (
        "  - kms: {apiVersion: v2, name: 'a:b', endpoint: 'tcp://x', cachesize: 5, "
        "timeout: 0s}\n"
        "  - kms: {apiVersion: v3, name: 'a:b'}\n"
        "  - kms: {name: '', endpoint: 'unix:///s', cachesize: 0}\n"
    )
    assert problems(one_rule(kms)) == [
        'resources[0].providers[0].kms.name: Invalid value: "a:b": invalid KMS provider name '
        "a:b, must not contain ':'",
        'resources[0].providers[0].kms.timeout: Invalid value: "0s": timeout should be a '
        "positive value",
        'resources[0].providers[0].kms.endpoint: Invalid value: "tcp://x": unsupported scheme '
        '"tcp" for KMS provider, only unix is supported',
        "resources[0].providers[0].kms.cachesize: Invalid value: 5: cachesize is not supported "
        "in v2",
        'resources[0].providers[1].kms.name: Invalid value: "a:b": invalid KMS provider name '
        "a:b, must not contain ':'",
        'resources[0].providers[1].kms.name: Invalid value: "a:b": duplicate KMS provider name '
        "a:b, names must be unique",
        'resources[0].providers[1].kms.endpoint: Invalid value: "": endpoint is a mandatory '
        "field for a kms",
        'resources[0].providers[1].kms.apiVersion: Invalid value: "v3": unsupported apiVersion '
        "apiVersion for KMS provider, only v1 and v2 are supported",
        "resources[0].providers[2].kms.name: Required value: name is a mandatory field for a "
        "provider",
        "resources[0].providers[2].kms.cachesize: Invalid value: 0: cachesize should be a "
        "positive value, or negative to disable",
    ]


def test_kms_v1_names_must_be_unique_only_with_reload() -> None:
    kms = "  - kms: {name: a, endpoint: 'unix:///s'}\n  - kms: {name: a, endpoint: 'unix:///s'}\n"
    assert problems(one_rule(kms)) == []
    assert problems(one_rule(kms), reload=True) == [
        'resources[0].providers[1].kms.name: Invalid value: "a": duplicate KMS provider name '
        "a, names must be unique"
    ]


def test_kms_v1_needs_its_feature_gate() -> None:
    config = decode((HEAD + one_rule("  - kms: {name: a, endpoint: 'unix:///s'}\n")).encode())
    with pytest.raises(EncryptionConfigError, match="KMSv1 is deprecated"):
        build(config, "h")


def test_a_masked_rule_is_refused_when_building() -> None:
    body = (
        "resources:\n- resources: ['*.']\n  providers: [identity: {}]\n"
        "- resources: [events]\n  providers: [identity: {}]\n"
    )
    with pytest.raises(
        EncryptionConfigError, match=r'^resource "events" is masked by earlier rule "\*\."$'
    ):
        build(decode((HEAD + body).encode()), "h")


def test_wildcards_pick_the_rule() -> None:
    body = (
        "resources:\n- resources: ['*.apps']\n  providers: [identity: {}]\n"
        f"- resources: ['*.*']\n  providers: [aesgcm: {{keys: [{{name: k, secret: {K32}}}]}}]\n"
    )
    built = build(decode((HEAD + body).encode()), "h")
    assert built.transformer_for(("apps", "deployments")) is built.transformers[("apps", "*")]
    assert built.transformer_for(("", "events")) is built.transformers[("*", "*")]


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "enc.yaml"
    path.write_text(text)
    return str(path)


def test_loading_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(EncryptionConfigError) as missing:
        load_encryption_config("/nonexistent", False)
    assert str(missing.value) == (
        "error while parsing file: error while loading file: error reading encryption "
        'provider configuration file "/nonexistent": open /nonexistent: no such file or '
        "directory"
    )
    empty = write(tmp_path, "")
    with pytest.raises(EncryptionConfigError) as blank:
        load_encryption_config(empty, False)
    assert str(blank.value) == (
        "error while parsing file: error while loading file: encryption provider "
        f'configuration file "{empty}" is empty'
    )
    unknown = write(tmp_path, HEAD + one_rule("  - identity: {}\n") + "extra: 1\n")
    with pytest.raises(EncryptionConfigError) as strict:
        load_encryption_config(unknown, False)
    assert str(strict.value) == (
        "error while parsing file: error decoding encryption provider configuration file "
        f'"{unknown}": strict decoding error: unknown field "extra"'
    )
    invalid = write(tmp_path, HEAD + "resources: []\n")
    with pytest.raises(EncryptionConfigError) as bad:
        load_encryption_config(invalid, False)
    assert str(bad.value) == (
        "error while parsing file: resources: Required value: at least one resources is required"
    )
    two = write(tmp_path, HEAD + one_rule("  - {}\n  - aesgcm: {keys: []}\n"))
    with pytest.raises(EncryptionConfigError, match=r"^error while parsing file: \[resources"):
        load_encryption_config(two, False)


def test_the_hash_is_sha256_of_the_file(tmp_path: Path) -> None:
    import hashlib

    text = HEAD + one_rule("  - identity: {}\n")
    built = load_encryption_config(write(tmp_path, text), False)
    assert built.content_hash == "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_json_configs_are_read(tmp_path: Path) -> None:
    text = (
        '{"apiVersion":"apiserver.config.k8s.io/v1","kind":"EncryptionConfiguration",'
        '"resources":[{"resources":["events"],"providers":[{"identity":{}}]}]}'
    )
    assert load_encryption_config(write(tmp_path, text), False).transformers


def test_yaml_errors_do_not_quote_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, HEAD + "resources:\n  - secret: SECRETVALUE\n bad: x\n")
    with pytest.raises(EncryptionConfigError) as info:
        load_encryption_config(path, False)
    assert "SECRETVALUE" not in str(info.value)
    assert "error converting YAML to JSON: yaml: line 5: " in str(info.value)
