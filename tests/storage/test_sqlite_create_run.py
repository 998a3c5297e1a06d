"""The SQLite writer folds consecutive creates of a batch into multi-row statements
(``_Writer.create_run``); these tests hold it to exactly what the op-by-op path gives:
results, errors, revisions, watch events and the rows left on disk."""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apiserver.storage.interface import KeyExistsError
from apiserver.storage.sqlite import schema
from apiserver.storage.sqlite import writer as store_module

Step = tuple[str, bytes, bytes]


def _ops(steps: list[Step]) -> list[store_module.Work]:
    ops = []
    for kind, key, value in steps:
        if kind == "create":
            ops.append(store_module.Work(store_module._Writer.create, (key, value, 0, None)))
        elif kind == "create-ttl":
            ops.append(store_module.Work(store_module._Writer.create, (key, value, 30, 99.5)))
        elif kind == "update":
            ops.append(store_module.Work(store_module._Writer.update, (key, value, 0, 0, None)))
        else:
            ops.append(store_module.Work(store_module._Writer.delete, (key, 0)))
    return ops


def _outcome(op: store_module.Work) -> Any:
    if op.error is not None:
        err = op.error
        return (type(err).__name__, str(err), getattr(err, "revision", None))
    return op.result


def _run(path: str, batches: list[list[Step]], fold: bool) -> tuple[Any, ...]:
    """Every batch through a fresh writer on ``path``; what a caller and a reader can see."""
    conn, rev, compact = schema.open_writer(path)
    writer = store_module._Writer(conn, rev, compact)
    saved = store_module._CREATE
    if not fold:
        store_module._CREATE = object()  # type: ignore[assignment]  # nothing matches: each op alone
    try:
        outcomes, events = [], []
        for steps in batches:
            ops = _ops(steps)
            events.append(writer.run_batch(ops))
            outcomes.append([_outcome(op) for op in ops])
        rows = (
            conn.execute("SELECT * FROM log ORDER BY id").fetchall(),
            conn.execute("SELECT * FROM current ORDER BY name").fetchall(),
            schema.read_revisions(conn),
        )
    finally:
        store_module._CREATE = saved
        conn.close()
    return outcomes, events, rows


def _same(batches: list[list[Step]]) -> tuple[Any, ...]:
    with tempfile.TemporaryDirectory() as tmp:
        folded = _run(str(Path(tmp) / "folded.db"), batches, fold=True)
        alone = _run(str(Path(tmp) / "alone.db"), batches, fold=False)
    assert folded == alone
    return folded


def test_a_run_of_creates_matches_op_by_op_across_statement_chunks() -> None:
    size = store_module.ROWS_PER_STATEMENT * 2 + 37
    first = [("create", b"/e/%04d" % i, b"v%d" % i) for i in range(size)]
    # Existing keys in the middle of a run, and TTL creates (their expiry row) among them.
    second = [("create", b"/e/%04d" % i, b"w") for i in range(0, size, 50)]
    second += [("create-ttl", b"/t/%d" % i, b"x") for i in range(5)]
    second += [("create", b"/f/%d" % i, b"y") for i in range(3)]
    outcomes, events, rows = _same([first, second])
    assert [kv.mod_revision for kv in outcomes[0]] == list(range(2, size + 2))
    assert len(events[0]) == size
    refused = [o for o in outcomes[1] if isinstance(o, tuple)]
    assert len(refused) == len(range(0, size, 50))
    assert all(o[0] == KeyExistsError.__name__ for o in refused)
    assert len(rows[0]) == size + 8 and len(rows[1]) == size + 8


def test_a_key_created_twice_in_one_run_fails_the_second() -> None:
    outcomes, _, _ = _same(
        [[("create", b"/k", b"1"), ("create", b"/j", b"2"), ("create", b"/k", b"3")]]
    )
    assert outcomes[0][2][0] == KeyExistsError.__name__
    assert outcomes[0][0].mod_revision == 2 and outcomes[0][1].mod_revision == 3


def test_a_failed_statement_rolls_the_whole_batch_back(tmp_path: Path) -> None:
    conn, rev, compact = schema.open_writer(str(tmp_path / "store.db"))
    writer = store_module._Writer(conn, rev, compact)
    conn.execute(
        "CREATE TRIGGER refuse BEFORE INSERT ON current WHEN NEW.name = x'2f62' "
        "BEGIN SELECT RAISE(ABORT, 'refused'); END"
    )
    ops = _ops([("create", b"/a", b"1"), ("create", b"/b", b"2"), ("create", b"/c", b"3")])
    with pytest.raises(sqlite3.IntegrityError):
        writer.run_batch(ops)
    assert conn.execute("SELECT count(*) FROM log").fetchone()[0] == 0
    assert writer.events == [] and writer.rev == rev
    conn.close()


keys = st.sampled_from([b"/a", b"/b", b"/c", b"/d", b"/e"])
step = st.tuples(
    st.sampled_from(["create", "create", "create-ttl", "update", "delete"]),
    keys,
    st.binary(max_size=4),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(step, min_size=1, max_size=12), min_size=1, max_size=4))
def test_any_batch_gives_what_op_by_op_gives(batches: list[list[Step]]) -> None:
    _same(batches)
