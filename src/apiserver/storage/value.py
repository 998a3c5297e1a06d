"""The transformation of stored values: what the registry calls between the serializer and
the store (k8s.io/apiserver ``pkg/storage/value/transformer.go``).

A transformer turns the serializer's bytes into the bytes written to the store
(``to_storage``) and back (``from_storage``); the store key is the authenticated data, so a
value copied under another key does not decrypt. ``from_storage`` also says whether the value
is *stale*: read by a provider or key other than the one that writes now, so an update must
rewrite it even when the object did not change (how a storage migration re-encrypts).

The encryption providers themselves live in :mod:`apiserver.encryption`; the storage layer
knows only this contract. Without ``--encryption-provider-config`` no transformer is
installed and the registry calls nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from twisted.internet.defer import Deferred


class ValueTransformError(Exception):
    """A stored value that cannot be transformed (decrypted, or encrypted on write)."""


class TransformPending(Exception):
    """The transformation needs an answer from elsewhere first (a KMS plugin's Decrypt of a
    data key not cached yet, a KMS v1 Encrypt of a new one): ``ready`` fires, with None,
    once it came (or failed); the caller waits for it and transforms again, which then
    succeeds or raises the plugin's error.

    Go's transformers block their goroutine on the plugin call (k8s.io/apiserver
    ``pkg/storage/value/encrypt/envelope/kmsv2/envelope.go``); here a blocking call would
    stall the reactor and every other request with it, so the registry and the watch
    delivery wait for ``ready`` instead (docs/encryption.md, "KMS calls").
    """

    def __init__(self, ready: Deferred[None]) -> None:
        super().__init__("waiting for the KMS plugin")
        self.ready = ready


class ValueTransformer(Protocol):
    """Go's ``value.Transformer`` with the store key as the authenticated data."""

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        """(plain bytes, stale) of the stored ``data``; raises :class:`ValueTransformError`,
        or :class:`TransformPending` to be called again later."""
        ...

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        """The bytes to store for ``data``; raises :class:`ValueTransformError`, or
        :class:`TransformPending` to be called again later."""
        ...


__all__ = ["TransformPending", "ValueTransformError", "ValueTransformer"]
