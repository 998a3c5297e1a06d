"""The server with --encryption-provider-config: a bad file stops building with the file's
name; building schedules nothing; the KMS checks are on healthz and readyz, never livez
(k8s.io/apiserver pkg/server/options/etcd.go); the reload hook and children start and stop
with the tree; without the flag the registry has no transformer at all."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from tests.unit.service.test_service_tree import StubStore, keep_h2_class, make_config
from twisted.internet.testing import MemoryReactorClock

from apiserver.server import Server

__all__ = ["keep_h2_class"]  # the fixture, imported for its use here

KEY = base64.b64encode(bytes(32)).decode()


def write_config(tmp_path: Path) -> Path:
    path = tmp_path / "config" / "enc.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
        f"resources:\n- resources: [events]\n  providers:\n  - aescbc: {{keys: [{{name: k, "
        f"secret: {KEY}}}]}}\n"
    )
    return path


def test_without_the_flag_nothing_is_installed(tmp_path: Path, keep_h2_class: Any) -> None:
    server = Server(make_config(tmp_path), MemoryReactorClock(), store=StubStore())
    assert server.encryption is None
    assert server.registry._transformer is None
    assert "encryption-kms" not in [child.name for child in server.root]


def test_a_bad_file_stops_building_naming_it(tmp_path: Path, keep_h2_class: Any) -> None:
    with pytest.raises(ValueError, match='configuration file "/nonexistent"'):
        Server(
            make_config(tmp_path, encryption_provider_config="/nonexistent"),
            MemoryReactorClock(),
            store=StubStore(),
        )


def test_reload_registers_its_hook_check_and_children(tmp_path: Path, keep_h2_class: Any) -> None:
    reactor = MemoryReactorClock()
    config = make_config(
        tmp_path,
        encryption_provider_config=str(write_config(tmp_path)),
        encryption_provider_config_automatic_reload=True,
    )
    server = Server(config, reactor, store=StubStore())
    assert reactor.getDelayedCalls() == []
    names = [child.name for child in server.root]
    assert names.index("encryption-kms") > names.index("watch-cache")
    assert "encryption-reload" in names
    assert server.registry._transformer is not None
    assert server.health.check("healthz", "kms-providers") is not None
    assert server.health.check("readyz", "kms-providers") is not None
    assert server.health.check("livez", "kms-providers") is None
    assert "start-encryption-provider-config-automatic-reload" in server.hooks.names()
    server.root.privilegedStartService()
    server.root.startService()
    assert server.hooks.finished("start-encryption-provider-config-automatic-reload")
    assert server.encryption is not None and server.encryption.controller is not None
    assert server.encryption.controller._loop is not None
    assert server.encryption.controller._loop.running
    stopped = server.root.stopService()
    reactor.advance(0)
    assert stopped.called
    assert not server.encryption.controller._loop.running
    assert reactor.getDelayedCalls() == []
    assert b"apiserver_encryption_config_controller_last_config_info" in (
        server.metrics.exposition()
    )
