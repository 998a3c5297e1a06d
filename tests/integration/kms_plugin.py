"""A KMS v2 plugin for the tests (k8s.io/kms apis/v2): Status, Encrypt, Decrypt over gRPC on
a unix socket. The "key encryption key" is AES-GCM with a per-plugin key; the key ID can be
changed and the plugin stopped, to see the server's health and error behaviour."""

from __future__ import annotations

import os
import threading
from concurrent import futures
from typing import Any

import grpc
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from apiserver.encryption.generated import kmsv1_pb2, kmsv1_pb2_grpc, kmsv2_pb2, kmsv2_pb2_grpc


class Plugin(kmsv2_pb2_grpc.KeyManagementServiceServicer):
    def __init__(self, socket_path: str, key_id: str = "key-1") -> None:
        self.socket_path = socket_path
        self.key_id = key_id
        self.kek = AESGCM(os.urandom(32))
        self.calls: list[str] = []
        self.server: Any = None
        #: Set to make Decrypt wait (in the plugin's thread) until the test clears it.
        self.hold_decrypts: threading.Event | None = None

    def Status(self, request: Any, context: Any) -> Any:
        self.calls.append("Status")
        return kmsv2_pb2.StatusResponse(version="v2", healthz="ok", key_id=self.key_id)

    def Encrypt(self, request: Any, context: Any) -> Any:
        self.calls.append("Encrypt")
        nonce = os.urandom(12)
        return kmsv2_pb2.EncryptResponse(
            ciphertext=nonce + self.kek.encrypt(nonce, request.plaintext, None),
            key_id=self.key_id,
        )

    def Decrypt(self, request: Any, context: Any) -> Any:
        self.calls.append("Decrypt")
        hold = self.hold_decrypts
        if hold is not None:
            hold.wait(30)
        data = request.ciphertext
        return kmsv2_pb2.DecryptResponse(plaintext=self.kek.decrypt(data[:12], data[12:], None))

    def decrypt_dek(self, ciphertext: bytes) -> bytes:
        return self.kek.decrypt(ciphertext[:12], ciphertext[12:], None)

    def start(self) -> Plugin:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        kmsv2_pb2_grpc.add_KeyManagementServiceServicer_to_server(self, server)
        server.add_insecure_port("unix:" + self.socket_path)
        server.start()
        self.server = server
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None


class PluginV1(kmsv1_pb2_grpc.KeyManagementServiceServicer):
    """The deprecated v1beta1 API (k8s.io/kms apis/v1beta1): Version, Encrypt, Decrypt."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.kek = AESGCM(os.urandom(32))
        self.server: Any = None

    def Version(self, request: Any, context: Any) -> Any:
        return kmsv1_pb2.VersionResponse(version="v1beta1", runtime_name="test")

    def Encrypt(self, request: Any, context: Any) -> Any:
        nonce = os.urandom(12)
        return kmsv1_pb2.EncryptResponse(
            cipher=nonce + self.kek.encrypt(nonce, request.plain, None)
        )

    def Decrypt(self, request: Any, context: Any) -> Any:
        data = request.cipher
        return kmsv1_pb2.DecryptResponse(plain=self.kek.decrypt(data[:12], data[12:], None))

    def start(self) -> PluginV1:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        kmsv1_pb2_grpc.add_KeyManagementServiceServicer_to_server(self, server)
        server.add_insecure_port("unix:" + self.socket_path)
        server.start()
        self.server = server
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop(0).wait()
            self.server = None
