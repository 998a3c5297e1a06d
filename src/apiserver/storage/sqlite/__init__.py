"""The embedded SQLite backend (the default store): a revisioned log like kine's, WAL mode,
group commit on one writer (a thread, or a process of its own), in-process watch fan-out.
See ``store.py``.

The names below are imported on first use (PEP 562), so the writer process, which imports
only ``writer_child`` and what it needs, does not load the store, its thread pool and the
rest of Twisted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from apiserver.storage.sqlite.schema import SCHEMA_VERSION, SchemaVersionError
    from apiserver.storage.sqlite.store import SqliteStore, SqliteWatch, prefix_end

__all__ = ["SCHEMA_VERSION", "SchemaVersionError", "SqliteStore", "SqliteWatch", "prefix_end"]


def __getattr__(name: str) -> Any:
    if name in ("SCHEMA_VERSION", "SchemaVersionError"):
        from apiserver.storage.sqlite import schema

        return getattr(schema, name)
    if name in ("SqliteStore", "SqliteWatch", "prefix_end"):
        from apiserver.storage.sqlite import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
