"""The in-memory backend: etcd's semantics without threads, files or a server (for tests)."""

from apiserver.storage.memory.store import MemoryStore, MemoryWatch

__all__ = ["MemoryStore", "MemoryWatch"]
