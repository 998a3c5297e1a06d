"""Encryption at rest with the real daemon (--encryption-provider-config): raw values read
straight from SQLite and from etcd (etcdctl) carry kube-apiserver's prefix and decrypt, with
an independent implementation, to the stored object; rotation and a rewrite of every event;
identity first; automatic reload; a KMS v2 plugin over gRPC, and that plugin going down; bad
configs stopping start-up."""

from __future__ import annotations

import base64
import json
import os
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.hmac import HMAC

from tests.integration.api_fixtures import event_body
from tests.integration.daemon import TWISTD, Daemon, free_port, source_env
from tests.storage.etcdserver import EtcdServer

ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")
KEY1 = bytes(range(32))
KEY2 = bytes(range(100, 132))


def b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def config(tmp_path: Path, providers: str, name: str = "enc.yaml") -> Path:
    path = tmp_path / name
    path.write_text(
        "apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n"
        "resources:\n- resources: [events]\n  providers:\n" + providers
    )
    return path


def kms_v2(socket: Path, timeout: str) -> str:
    """A KMS v2 provider named ``testkms`` on the plugin's unix socket."""
    return (
        f"  - kms: {{apiVersion: v2, name: testkms, endpoint: 'unix://{socket}', "
        f"timeout: {timeout}}}\n"
    )


def aesgcm(name: str, key: bytes) -> str:
    return f"  - aesgcm: {{keys: [{{name: {name}, secret: {b64(key)}}}]}}\n"


def post(daemon: Daemon, name: str, note: str = "secret note") -> None:
    status, _, body = daemon.get(
        "/apis/events.k8s.io/v1/namespaces/default/events",
        method="POST",
        headers={"Content-Type": "application/json"},
        body=event_body(name, note=note),
    )
    assert status == 201, body


def get_note(daemon: Daemon, name: str) -> str:
    status, _, body = daemon.get(f"/apis/events.k8s.io/v1/namespaces/default/events/{name}")
    assert status == 200, body
    return str(json.loads(body)["note"])


def sqlite_value(daemon: Daemon, name: str) -> bytes:
    db = sqlite3.connect(f"file:{daemon.data_dir / 'store.db'}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT value FROM log WHERE name = ? ORDER BY id DESC LIMIT 1",
            (f"/registry/events/default/{name}".encode(),),
        ).fetchone()
    finally:
        db.close()
    return bytes(row[0])


def open_aesgcm(value: bytes, key: bytes, name: str, key_name: str) -> bytes:
    prefix = f"k8s:enc:aesgcm:v1:{key_name}:".encode()
    assert value.startswith(prefix), value[:40]
    body = value[len(prefix) :]
    return AESGCM(key).decrypt(body[:12], body[12:], f"/registry/events/default/{name}".encode())


def test_sqlite_values_are_aesgcm_and_decrypt_to_the_protobuf_object(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    path = config(tmp_path, aesgcm("key1", KEY1) + "  - identity: {}\n")
    daemon = start_daemon([f"--encryption-provider-config={path}"])
    post(daemon, "e1")
    raw = sqlite_value(daemon, "e1")
    assert b"secret note" not in raw
    plain = open_aesgcm(raw, KEY1, "e1", "key1")
    assert plain.startswith(b"k8s\x00") and b"secret note" in plain
    assert get_note(daemon, "e1") == "secret note"
    _, _, body = daemon.get("/metrics")
    assert b'apiserver_storage_transformation_operations_total{resource="events"' in body


def test_rotation_with_two_keys_and_a_rewrite_of_every_event(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    path = config(tmp_path, aesgcm("key1", KEY1))
    daemon = start_daemon([f"--encryption-provider-config={path}"])
    for i in range(3):
        post(daemon, f"r{i}")
    daemon.stop()
    # Step 1-2: the new key first, the old one still listed; restart.
    config(
        tmp_path,
        f"  - aesgcm: {{keys: [{{name: key2, secret: {b64(KEY2)}}}, "
        f"{{name: key1, secret: {b64(KEY1)}}}]}}\n",
    )
    daemon.start()
    assert get_note(daemon, "r0") == "secret note"
    # Step 3: rewrite every event (kubectl get events -A -o json | kubectl replace -f -).
    _, _, body = daemon.get("/apis/events.k8s.io/v1/events")
    for item in json.loads(body)["items"]:
        name = item["metadata"]["name"]
        item.update(kind="Event", apiVersion="events.k8s.io/v1")
        status, _, answer = daemon.get(
            f"/apis/events.k8s.io/v1/namespaces/default/events/{name}",
            method="PUT",
            headers={"Content-Type": "application/json"},
            body=json.dumps(item).encode(),
        )
        assert status == 200, answer
    for i in range(3):
        open_aesgcm(sqlite_value(daemon, f"r{i}"), KEY2, f"r{i}", "key2")
    daemon.stop()
    # Step 4: the old key removed; everything still reads.
    config(tmp_path, aesgcm("key2", KEY2))
    daemon.start()
    assert [get_note(daemon, f"r{i}") for i in range(3)] == ["secret note"] * 3


def test_identity_first_writes_plaintext_and_reads_what_was_encrypted(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    path = config(tmp_path, aesgcm("key1", KEY1))
    daemon = start_daemon([f"--encryption-provider-config={path}"])
    post(daemon, "old")
    daemon.stop()
    config(tmp_path, "  - identity: {}\n" + aesgcm("key1", KEY1))
    daemon.start()
    post(daemon, "new")
    assert sqlite_value(daemon, "new").startswith(b"k8s\x00")
    assert get_note(daemon, "old") == "secret note"
    daemon.stop()
    # Without the key, the encrypted event is a 500 naming the reason, never an empty object.
    config(tmp_path, "  - identity: {}\n")
    daemon.start()
    status, _, body = daemon.get("/api/v1/namespaces/default/events/old")
    assert status == 500
    assert json.loads(body)["message"] == "Internal error occurred: no matching prefix found"


def test_automatic_reload_picks_up_a_new_key_without_a_restart(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    path = config(tmp_path, aesgcm("key1", KEY1))
    daemon = start_daemon(
        [f"--encryption-provider-config={path}", "--encryption-provider-config-automatic-reload"]
    )
    status, _, body = daemon.get("/healthz/kms-providers")
    assert status == 200, body
    post(daemon, "before")
    # An invalid change is refused and the old configuration stays.
    path.write_text("kind: Nonsense\n")
    time.sleep(0.1)
    config(
        tmp_path,
        f"  - aesgcm: {{keys: [{{name: key2, secret: {b64(KEY2)}}}, "
        f"{{name: key1, secret: {b64(KEY1)}}}]}}\n",
    )
    deadline = time.monotonic() + 75
    while time.monotonic() < deadline:
        post(daemon, name := f"after-{int(time.monotonic() * 1000)}")
        if sqlite_value(daemon, name).startswith(b"k8s:enc:aesgcm:v1:key2:"):
            break
        time.sleep(1)
    else:
        pytest.fail("the new key was not picked up:\n" + daemon.log())
    assert get_note(daemon, "before") == "secret note"
    _, _, metrics = daemon.get("/metrics")
    assert b"apiserver_encryption_config_controller_automatic_reloads_total" in metrics
    assert b'status="success"' in metrics


def test_bad_configs_stop_start_up(tmp_path: Path) -> None:
    bad = config(tmp_path, "  - aesgcm: {keys: [{name: k, secret: YWJj}]}\n")
    for flag, expected in (
        ("/nonexistent", 'error reading encryption provider configuration file "/nonexistent"'),
        (str(bad), "secret is not of the expected length, got 3, expected one of [16 24 32]"),
    ):
        result = subprocess.run(
            [
                TWISTD,
                "--nodaemon",
                "--pidfile=",
                "apiserver",
                f"--data-dir={tmp_path / 'data'}",
                f"--cert-dir={tmp_path / 'certs'}",
                f"--secure-port={free_port()}",
                f"--encryption-provider-config={flag}",
            ],
            capture_output=True,
            env=source_env(),
            cwd=tmp_path,
            timeout=60,
        )
        assert result.returncode != 0
        assert expected in result.stderr.decode() + result.stdout.decode()


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[EtcdServer]:
    if ETCD is None or ETCDCTL is None:
        pytest.skip("etcd and etcdctl (Debian etcd-server, etcd-client) are not installed")
    server = EtcdServer(str(tmp_path / "etcd"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def etcdctl_value(etcd: EtcdServer, key: str) -> bytes:
    assert ETCDCTL is not None
    out = subprocess.run(
        [ETCDCTL, f"--endpoints={etcd.client_url}", "get", key, "--print-value-only"],
        capture_output=True,
        check=True,
        env={**os.environ, "ETCDCTL_API": "3"},
        timeout=30,
    ).stdout
    return out[:-1] if out.endswith(b"\n") else out


def test_etcd_values_are_encrypted_and_readable_back(
    start_daemon: Callable[..., Daemon], tmp_path: Path, etcd: EtcdServer
) -> None:
    path = config(tmp_path, aesgcm("key1", KEY1))
    daemon = start_daemon(
        [f"--encryption-provider-config={path}", f"--store-servers={etcd.client_url}"]
    )
    post(daemon, "e1")
    raw = etcdctl_value(etcd, "/registry/events/default/e1")
    plain = open_aesgcm(raw, KEY1, "e1", "key1")
    assert b"secret note" in plain and b"secret note" not in raw
    assert get_note(daemon, "e1") == "secret note"


# --- KMS v2 ---------------------------------------------------------------------------------


def hkdf_expand(seed: bytes, info: bytes) -> bytes:
    mac = HMAC(seed, hashes.SHA256())
    mac.update(info + b"\x01")
    return mac.finalize()


def test_kms_v2_plugin_encrypts_and_its_outage_is_reported(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    from apiserver.encryption.generated import kmsv2_stored_pb2
    from tests.integration.kms_plugin import Plugin

    socket = tmp_path / "kms.sock"
    plugin = Plugin(str(socket)).start()
    try:
        path = config(tmp_path, kms_v2(socket, "2s"))
        daemon = start_daemon([f"--encryption-provider-config={path}"])
        status, _, body = daemon.get("/readyz/kms-providers")
        assert status == 200, body
        post(daemon, "k1")
        raw = sqlite_value(daemon, "k1")
        prefix = b"k8s:enc:kms:v2:testkms:"
        assert raw.startswith(prefix)
        stored = kmsv2_stored_pb2.EncryptedObject()
        stored.ParseFromString(raw[len(prefix) :])
        assert stored.keyID == "key-1"
        assert stored.encryptedDEKSourceType == 1
        seed = plugin.decrypt_dek(stored.encryptedDEKSource)
        data = stored.encryptedData
        key = hkdf_expand(seed, data[:32])
        plain = AESGCM(key).decrypt(data[32:44], data[44:], b"/registry/events/default/k1")
        assert b"secret note" in plain
        assert get_note(daemon, "k1") == "secret note"
        # The plugin goes down: the health check turns red with the reference's text.
        plugin.stop()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status, _, body = daemon.get("/healthz/kms-providers?verbose", timeout=10)
            if status != 200:
                break
            time.sleep(1)
        assert status == 500, body
        assert b"failed to perform status section of the healthz check for KMS Provider" in (
            daemon.get("/healthz?verbose", timeout=10)[2] + daemon.log().encode()
        )
        # Reads of cached DEKs still work.
        assert get_note(daemon, "k1") == "secret note"
    finally:
        plugin.stop()


def test_a_hung_kms_decrypt_delays_only_the_reads_that_need_its_dek(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """After a restart no DEK is cached: the first read of an event asks the plugin to
    Decrypt. While the plugin holds that call, the server keeps answering everything else
    (health, discovery, a create); the read answers once the plugin does."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from tests.integration.kms_plugin import Plugin

    socket = tmp_path / "kms.sock"
    plugin = Plugin(str(socket)).start()
    try:
        path = config(tmp_path, kms_v2(socket, "20s"))
        daemon = start_daemon([f"--encryption-provider-config={path}"])
        post(daemon, "before")
        daemon.stop()
        daemon.start()
        status, _, body = daemon.get("/readyz/kms-providers")
        assert status == 200, body
        hold = plugin.hold_decrypts = threading.Event()
        finished: list[str] = []
        with ThreadPoolExecutor(max_workers=1) as pool:
            reading = pool.submit(lambda: (get_note(daemon, "before"), finished.append("read")))
            deadline = time.monotonic() + 30
            while "Decrypt" not in plugin.calls and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "Decrypt" in plugin.calls
            # The Decrypt is held: the reactor still serves others, the read still waits.
            assert daemon.get("/livez", timeout=10)[0] == 200
            assert daemon.get("/apis/events.k8s.io/v1", timeout=10)[0] == 200
            post(daemon, "during")
            assert finished == []
            finished.append("others")
            hold.set()
            note, _ = reading.result(timeout=30)
        assert note == "secret note"
        assert finished == ["others", "read"]
        assert plugin.calls.count("Decrypt") == 1
    finally:
        if plugin.hold_decrypts is not None:
            plugin.hold_decrypts.set()
        plugin.stop()


def test_kms_v1_with_its_feature_gate(start_daemon: Callable[..., Daemon], tmp_path: Path) -> None:
    import struct

    from tests.integration.kms_plugin import PluginV1

    socket = tmp_path / "kms1.sock"
    plugin = PluginV1(str(socket)).start()
    try:
        path = config(tmp_path, f"  - kms: {{name: old, endpoint: 'unix://{socket}'}}\n")
        daemon = start_daemon(
            [f"--encryption-provider-config={path}", "--feature-gates=KMSv1=true"]
        )
        status, _, body = daemon.get("/healthz/kms-provider-0")
        assert status == 200, body
        post(daemon, "v1")
        raw = sqlite_value(daemon, "v1")
        prefix = b"k8s:enc:kms:v1:old:"
        assert raw.startswith(prefix)
        rest = raw[len(prefix) :]
        (size,) = struct.unpack(">H", rest[:2])
        dek = plugin.kek.decrypt(rest[2:14], rest[14 : 2 + size], None)
        data = rest[2 + size :]
        assert b"secret note" in AESGCM(dek).decrypt(
            data[:12], data[12:], b"/registry/events/default/v1"
        )
        assert get_note(daemon, "v1") == "secret note"
    finally:
        plugin.stop()
