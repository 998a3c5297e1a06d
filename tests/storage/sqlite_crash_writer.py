"""Crash-test helper: writes to a SqliteStore until killed, printing every acknowledgement.

Run as ``python -m tests.storage.sqlite_crash_writer DB_PATH [thread|process]`` (where the
store's writer runs; default thread). Keeps several writes in
flight (so group commit batches them). Each key is created, and every third one is then
updated; a line goes to stdout, flushed, only after the store acknowledged the write:

    READY
    C <key> <revision>
    U <key> <revision> <value>

The test kills the process with SIGKILL at a random moment and checks that every
acknowledged write is in the database.
"""

from __future__ import annotations

import itertools
import sys

from twisted.internet import reactor
from twisted.python.failure import Failure

from apiserver.storage.interface import KeyValue
from apiserver.storage.sqlite import SqliteStore

IN_FLIGHT = 16


def main(path: str, writer: str = "thread") -> None:
    store = SqliteStore(path, reactor=reactor, compaction_interval=0, writer=writer)
    counter = itertools.count()
    out = sys.stdout

    def failed(failure: Failure) -> None:
        out.write(f"ERROR {failure.getErrorMessage()}\n")
        out.flush()
        reactor.stop()  # type: ignore[misc]

    def write_one() -> None:
        i = next(counter)
        key = b"/crash/%08d" % i

        def created(kv: KeyValue) -> None:
            out.write(f"C {key.decode()} {kv.mod_revision}\n")
            out.flush()
            if i % 3 == 0:
                value = b"updated-%d" % i
                store.update(key, value, kv.mod_revision).addCallbacks(
                    lambda kv2: updated(kv2, value), failed
                )
            else:
                write_one()

        def updated(kv: KeyValue, value: bytes) -> None:
            out.write(f"U {key.decode()} {kv.mod_revision} {value.decode()}\n")
            out.flush()
            write_one()

        store.create(key, b"value-%d" % i).addCallbacks(created, failed)

    def started(_: object) -> None:
        out.write("READY\n")
        out.flush()
        for _ in range(IN_FLIGHT):
            write_one()

    store.start().addCallbacks(started, failed)
    reactor.run()  # type: ignore[misc]


if __name__ == "__main__":
    main(*sys.argv[1:3])
