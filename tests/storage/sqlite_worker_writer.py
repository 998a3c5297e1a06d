"""A worker process of a shared SQLite store (``--workers``) for ``test_sqlite_workers.py``:
``python -m tests.storage.sqlite_worker_writer DB INDEX COUNT KEYS`` creates KEYS keys
``/w/<INDEX>/<n>`` through its own store, prints each acknowledged revision, and exits."""

from __future__ import annotations

import sys

from twisted.internet import defer, reactor, task

from apiserver.storage.sqlite import SqliteStore


async def main(db: str, index: int, count: int, keys: int) -> None:
    store = SqliteStore(db, reactor, worker=(index, count), compaction_interval=0)
    await store.start()
    try:
        for n in range(keys):
            kv = await store.create(f"/w/{index}/{n:05d}".encode(), b"v")
            sys.stdout.write(f"{kv.mod_revision}\n")
        sys.stdout.flush()
    finally:
        await store.stop()


if __name__ == "__main__":
    db, index, count, keys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    task.react(lambda _reactor: defer.ensureDeferred(main(db, index, count, keys)))
