"""KMS v2 with a fake plugin on a Clock (k8s.io/apiserver envelope/kmsv2/envelope.go and the
kmsv2PluginProbe of encryptionconfig/config.go), and the automatic reload controller
(encryptionconfig/controller/controller.go)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock

from apiserver.encryption.build import build_encryption
from apiserver.encryption.config import load_encryption_config
from apiserver.encryption.dynamic import DynamicTransformers, ReloadController
from apiserver.encryption.generated import kmsv2_stored_pb2
from apiserver.encryption.kmsv2 import KMSv2Provider, grpc_target
from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.transformers import GrpcTransformError, hkdf_expand
from apiserver.storage.value import ValueTransformError

AD = b"/registry/events/ns/a"


class FakePlugin:
    def __init__(self) -> None:
        self.key_id = "k1"
        self.kek = AESGCM(os.urandom(32))
        self.down = False
        self.calls: list[str] = []

    def status(self) -> Deferred[tuple[str, str, str]]:
        self.calls.append("Status")
        if self.down:
            return fail(
                GrpcTransformError("rpc error: code = Unavailable desc = down", "Unavailable")
            )
        return succeed(("v2", "ok", self.key_id))

    def encrypt(self, uid: str, plaintext: bytes) -> Deferred[tuple[bytes, str, dict[str, bytes]]]:
        self.calls.append("Encrypt")
        nonce = os.urandom(12)
        return succeed((nonce + self.kek.encrypt(nonce, plaintext, None), self.key_id, {}))

    def decrypt(
        self, uid: str, ciphertext: bytes, key_id: str, annotations: dict[str, bytes]
    ) -> Deferred[bytes]:
        self.calls.append("Decrypt")
        if self.down:
            return fail(
                GrpcTransformError("rpc error: code = Unavailable desc = down", "Unavailable")
            )
        return succeed(self.kek.decrypt(ciphertext[:12], ciphertext[12:], None))

    def close(self) -> None:
        self.calls.append("close")


def provider() -> tuple[KMSv2Provider, FakePlugin, Clock, EncryptionMetrics]:
    clock = Clock()
    clock.advance(1_000_000)
    plugin = FakePlugin()
    metrics = EncryptionMetrics(clock)
    return KMSv2Provider("p", plugin, clock, metrics), plugin, clock, metrics


def outcome(d: Deferred[Any]) -> Any:
    results: list[Any] = []
    d.addBoth(results.append)
    assert results
    return results[0]


def test_writes_wait_for_the_first_status_then_use_an_hkdf_seed() -> None:
    kms, plugin, _, _ = provider()
    with pytest.raises(ValueTransformError, match="got unexpected nil transformer"):
        kms.to_storage(b"data", AD, "events")
    assert outcome(kms.check()) is None
    stored = kms.to_storage(b"data", AD, "events")
    obj = kmsv2_stored_pb2.EncryptedObject()
    obj.ParseFromString(stored)
    assert obj.keyID == "k1" and obj.encryptedDEKSourceType == 1
    seed = plugin.kek.decrypt(obj.encryptedDEKSource[:12], obj.encryptedDEKSource[12:], None)
    data = obj.encryptedData
    key = hkdf_expand(seed, data[:32])
    assert AESGCM(key).decrypt(data[32:44], data[44:], AD) == b"data"
    assert kms.from_storage(stored, AD, "events") == (b"data", False)


def test_a_new_key_id_rotates_the_seed_and_old_data_is_stale() -> None:
    kms, plugin, clock, _ = provider()
    outcome(kms.check())
    old = kms.to_storage(b"data", AD, "events")
    plugin.key_id = "k2"
    clock.advance(21)
    assert outcome(kms.check()) is None
    assert kms.state is not None and kms.state.key_id == "k2"
    assert kms.from_storage(old, AD, "events") == (b"data", True)


def test_cached_deks_are_read_while_the_plugin_is_down_and_writes_expire() -> None:
    kms, plugin, clock, metrics = provider()
    outcome(kms.check())
    stored = kms.to_storage(b"data", AD, "events")
    fresh = KMSv2Provider("p", plugin, clock, metrics)
    fresh.state = kms.state
    assert fresh.from_storage(stored, AD, "events") == (b"data", False)
    assert metrics.cache_misses == 1
    plugin.down = True
    assert fresh.from_storage(stored, AD, "events") == (b"data", False)
    clock.advance(21)
    failure = outcome(kms.check())
    assert "failed to perform status section of the healthz check for KMS Provider p" in str(
        failure.value
    )
    clock.advance(181)
    with pytest.raises(ValueTransformError, match='encryptedDEKSource with keyID hash "sha256:'):
        kms.to_storage(b"data", AD, "events")
    other = KMSv2Provider("p", plugin, clock, metrics)
    other.state = kms.state
    with pytest.raises(GrpcTransformError, match="failed to decrypt DEK, error: rpc error"):
        other.from_storage(stored, AD, "events")


def test_health_results_are_kept_20s_when_good_and_3s_when_not() -> None:
    kms, plugin, clock, _ = provider()
    outcome(kms.check())
    outcome(kms.check())
    assert plugin.calls.count("Status") == 1
    clock.advance(20)
    plugin.down = True
    outcome(kms.check())
    outcome(kms.check())
    assert plugin.calls.count("Status") == 2
    clock.advance(3)
    outcome(kms.check())
    assert plugin.calls.count("Status") == 3


def test_the_loop_polls_every_minute_and_every_10s_while_failing() -> None:
    kms, plugin, clock, _ = provider()
    kms.start()
    assert plugin.calls.count("Status") == 1
    clock.advance(60)
    assert plugin.calls.count("Status") == 2
    plugin.down = True
    clock.advance(60)
    clock.advance(10)
    assert plugin.calls.count("Status") == 4
    kms.close()
    assert not clock.getDelayedCalls()


def test_grpc_targets() -> None:
    assert grpc_target("unix:///run/kms.sock") == "unix:/run/kms.sock"
    assert grpc_target("unix:///@abstract") == "unix-abstract:abstract"


HEAD = "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"


def write(path: Path, key_names: list[str]) -> None:
    keys = ", ".join(
        f"{{name: {name}, secret: {base64.b64encode(bytes([i]) * 32).decode()}}}"
        for i, name in enumerate(key_names)
    )
    path.write_text(
        HEAD + f"resources:\n- resources: [events]\n  providers:\n  - aesgcm: {{keys: [{keys}]}}\n"
    )


def test_the_reload_controller_applies_valid_changes_and_keeps_the_old_config(
    tmp_path: Path,
) -> None:
    path = tmp_path / "enc.yaml"
    write(path, ["k1"])
    clock = Clock()
    encryption = build_encryption(str(path), True, clock)
    assert encryption is not None and encryption.controller is not None
    assert [name for name, _ in encryption.health_checks()] == ["kms-providers"]
    transformer = encryption.transformer_for()
    swapped: list[int] = []
    encryption.dynamic.on_change(lambda: swapped.append(1))
    encryption.controller.start()
    assert transformer.to_storage(b"x", AD).startswith(b"k8s:enc:aesgcm:v1:k1:")
    path.write_text("kind: Nonsense\n")
    clock.advance(60)
    assert swapped == []
    assert encryption.metrics.reloads[("failure", "")] >= 1
    write(path, ["k2", "k1"])
    clock.advance(60)
    assert swapped == [1]
    assert transformer.to_storage(b"x", AD).startswith(b"k8s:enc:aesgcm:v1:k2:")
    assert encryption.metrics.reloads[("success", "")] == 1
    encryption.controller.stop()
    encryption.dynamic.close()
    assert not clock.getDelayedCalls()


def test_without_reload_and_without_kms_there_is_no_check_and_no_controller(
    tmp_path: Path,
) -> None:
    path = tmp_path / "enc.yaml"
    write(path, ["k1"])
    built = load_encryption_config(str(path), False)
    assert DynamicTransformers(built, Clock()).health_checks() == []
    encryption = build_encryption(str(path), False, Clock())
    assert encryption is not None and encryption.controller is None
    assert not isinstance(encryption.controller, ReloadController)
