"""The embedded SQLite backend (the default store): a revisioned log like kine's, WAL mode,
group commit on one writer thread, in-process watch fan-out. See ``store.py``."""

from apiserver.storage.sqlite.schema import SCHEMA_VERSION, SchemaVersionError
from apiserver.storage.sqlite.store import SqliteStore, SqliteWatch, prefix_end

__all__ = ["SCHEMA_VERSION", "SchemaVersionError", "SqliteStore", "SqliteWatch", "prefix_end"]
