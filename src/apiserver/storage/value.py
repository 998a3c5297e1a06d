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

from typing import Protocol


class ValueTransformError(Exception):
    """A stored value that cannot be transformed (decrypted, or encrypted on write)."""


class ValueTransformer(Protocol):
    """Go's ``value.Transformer`` with the store key as the authenticated data."""

    def from_storage(self, data: bytes, key: bytes) -> tuple[bytes, bool]:
        """(plain bytes, stale) of the stored ``data``; raises :class:`ValueTransformError`."""
        ...

    def to_storage(self, data: bytes, key: bytes) -> bytes:
        """The bytes to store for ``data``; raises :class:`ValueTransformError`."""
        ...


__all__ = ["ValueTransformError", "ValueTransformer"]
