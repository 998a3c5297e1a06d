"""The on-disk layout of the embedded store, and opening a database file safely.

Layout (schema version 1):

``log``
    One row per write, ``id`` is the revision (``INTEGER PRIMARY KEY AUTOINCREMENT``, so a
    revision is never reused even after compaction deleted the newest rows' predecessors).
    The store's current revision is ``sqlite_sequence.seq`` of ``log``. Like etcd, whose
    first revision is 1 (a new cluster reports revision 1, its first write is revision 2),
    a new store starts at revision 1: ``open_writer`` seeds the sequence with 1. So a list
    of an empty store never reports ``resourceVersion`` "0", which the API reserves for
    "any version".
    ``created``/``deleted`` mark creates and delete tombstones; ``create_revision`` is the
    revision at which this incarnation of the key was created, ``prev_revision`` the id of the
    row this one replaced (0 for a create), ``lease`` the TTL in seconds (0: none). A tombstone
    has a NULL ``value``.

    Unlike kine we do not copy the previous value into every row (``old_value``): the previous
    value of a row is the row ``prev_revision`` points at, and compaction is written so that
    row survives as long as the row pointing at it can still be replayed (see
    ``store._Writer.compact``). That halves the bytes written per update and per delete.

``current``
    One row per live key: the key's latest row id, its create revision, TTL and absolute
    expiry time (on the store's clock). Written in the same transaction as the log row, so a
    latest read or a range of the live keys is an index range scan plus a primary-key lookup
    per key instead of a "newest row per name" aggregate over the log. Deleted keys have no
    row here.

``meta``
    ``compact_rev``: history below it has been forgotten (reads and watches below it get
    CompactedError).

``schema_version``
    A single row with the layout version. Created in the same transaction as the tables, so a
    crash during the first start leaves either no schema or a complete one.
"""

from __future__ import annotations

import sqlite3

from apiserver.storage.interface import StorageError

SCHEMA_VERSION = 1

_DDL_V1 = (
    """CREATE TABLE log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name BLOB NOT NULL,
        created INTEGER NOT NULL,
        deleted INTEGER NOT NULL,
        create_revision INTEGER NOT NULL,
        prev_revision INTEGER NOT NULL,
        lease INTEGER NOT NULL,
        value BLOB
    )""",
    "CREATE INDEX log_name_id ON log (name, id)",
    """CREATE TABLE current (
        name BLOB PRIMARY KEY,
        id INTEGER NOT NULL,
        create_revision INTEGER NOT NULL,
        lease INTEGER NOT NULL,
        expires REAL
    ) WITHOUT ROWID""",
    "CREATE INDEX current_expires ON current (expires) WHERE expires IS NOT NULL",
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "INSERT INTO meta (name, value) VALUES ('compact_rev', 0)",
)


class SchemaVersionError(StorageError):
    """The database file was written by a newer (or an unknown) version of the server.

    We refuse to open it rather than misread or damage it.
    """


def connect(path: str, *, readonly: bool = False) -> sqlite3.Connection:
    """A connection with the pragmas every connection of the store uses.

    ``isolation_level=None``: we issue BEGIN/COMMIT ourselves (group commit needs control of
    transaction boundaries). ``check_same_thread=False``: a connection is used by one thread at
    a time, but closed from the thread that stops the store.
    """
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30.0)
    conn.execute("PRAGMA busy_timeout = 30000")
    conn.execute("PRAGMA cache_size = -32768")
    # Temporary data (statement journals, sorts, IN lists) in memory: a multi-row insert of
    # a batch journals more pages than SQLite keeps in memory by default (64 KiB) and then
    # made, wrote and deleted a temporary file for each such statement.
    conn.execute("PRAGMA temp_store = MEMORY")
    if readonly:
        conn.execute("PRAGMA query_only = ON")
    else:
        # FULL: the WAL is fsynced at every commit, so an acknowledged write survives a crash of
        # the process and of the machine. Group commit keeps the fsync count low.
        conn.execute("PRAGMA synchronous = FULL")
    return conn


def _table_names(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    return {r[0] for r in rows}


def open_writer(path: str) -> tuple[sqlite3.Connection, int, int]:
    """Open (creating if needed) the database at ``path`` for writing.

    Returns the connection, the current revision and the compacted revision. Raises
    SchemaVersionError for a database of a newer schema version or one that is not ours.
    """
    conn = connect(path)
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StorageError(f"cannot put {path} in WAL mode (journal_mode={mode})")
        conn.execute("BEGIN IMMEDIATE")
        try:
            tables = _table_names(conn)
            if "schema_version" not in tables:
                if tables - {"sqlite_sequence"}:
                    raise SchemaVersionError(
                        f"{path} is an SQLite database but not one of this server "
                        f"(no schema_version table; tables: {', '.join(sorted(tables))})"
                    )
                for stmt in _DDL_V1:
                    conn.execute(stmt)
                conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
                conn.execute("INSERT INTO schema_version (version) VALUES (?)", (SCHEMA_VERSION,))
            else:
                row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
                version = row[0] if row else None
                if version is None:
                    raise SchemaVersionError(f"{path}: schema_version table is empty")
                if version > SCHEMA_VERSION:
                    raise SchemaVersionError(
                        f"{path} has schema version {version}, newer than this server "
                        f"supports ({SCHEMA_VERSION}); use a newer server or another --data-dir"
                    )
                # version < SCHEMA_VERSION: migrations go here when version 2 exists.
            _start_at_revision_one(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        rev, compact_rev = read_revisions(conn)
        return conn, rev, compact_rev
    except BaseException:
        conn.close()
        raise


#: The revision of a store nothing was written to (etcd's first revision).
FIRST_REVISION = 1


def _start_at_revision_one(conn: sqlite3.Connection) -> None:
    """Seed ``log``'s sequence with :data:`FIRST_REVISION` unless writes already moved it.

    Runs at every open, in the open's transaction, so it also migrates files of earlier
    versions of the server, which started at revision 0: one that was never written to has
    no sequence row yet and moves to revision 1 (no client can hold a revision above 0 of
    it); one with writes has a sequence of at least 1 and keeps its numbering. The layout
    is unchanged, so the schema version stays the same and older servers still open the file.
    """
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'log'").fetchone()
    if row is None:
        conn.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('log', ?)", (FIRST_REVISION,))
    elif row[0] < FIRST_REVISION:
        conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = 'log'", (FIRST_REVISION,))


def read_revisions(conn: sqlite3.Connection) -> tuple[int, int]:
    """(current revision, compacted revision) as seen by ``conn``'s current snapshot."""
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'log'").fetchone()
    rev = int(row[0]) if row else 0
    row = conn.execute("SELECT value FROM meta WHERE name = 'compact_rev'").fetchone()
    compact_rev = int(row[0]) if row else 0
    return rev, compact_rev
