#!/usr/bin/env python3
"""Instructions of each part of an Event create, each part driven alone under callgrind.

Usage: ``python bench/create_parts.py [--n 1000] [--tree DIR] [PART ...]``

Why: :mod:`callgrind_ir` counts a whole create in the daemon, where a change worth a few
thousand instructions drowns in the run-to-run spread (about 1 %). This builds the create
path's pieces in process as the server builds them (``EventsAPI`` over a ``Registry`` on an
in-memory store, events stored as core/v1 protobuf), prepares the body ``api_bench.py``
posts, runs under valgrind's callgrind with collection zeroed before and dumped after each
part (``callgrind_control``), and prints instructions per call of each part: the body's
decoding and strict check (``decode_body``: headers, read, ``orjson``, the generated
decoder, the duplicate check, type meta), validation, managedFields, the storage value,
the JSON answer, and ``create`` (a whole ``EventsAPI.handle`` on the in-memory store,
request object included). ``--tree`` measures another checkout. Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PARTS = ("empty", "decode_body", "validate", "managed_fields", "storage", "answer", "create")


def _parts(tree: Path) -> dict[str, Callable[[], Any]]:
    sys.path.insert(0, str(tree / "src"))
    from twisted.internet.task import Clock

    from apiserver.api.events import corev1
    from apiserver.api.events.rest import EVENTS_V1, GR, EventsAPI
    from apiserver.http.app import RequestInfo
    from apiserver.registry import codec
    from apiserver.registry.store import Registry
    from apiserver.storage.memory.store import MemoryStore

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from create_bench import BODY, PATH, FakeRequest

    # What EventsAPI reads of a request (the whole HTTPRequest contract is not needed).
    def new_request() -> Any:
        return FakeRequest(BODY)

    clock = Clock()
    clock.advance(1_700_000_000)
    store = MemoryStore(clock)
    store.start()
    registry = Registry(
        store,
        group_resource=GR,
        ttl=lambda: 3600,
        conversion=corev1.STORAGE,
        media_type="application/vnd.kubernetes.protobuf",
    )
    api = EventsAPI(registry, clock, view=EVENTS_V1)
    info = RequestInfo("POST", PATH, {}, False, True)
    manager, now = "h2load nghttp2", "2023-11-14T22:13:20Z"
    # The object as the handler has it before validation, then once created.
    fresh, _ = api._decode_body(new_request(), "Warn")
    fresh["metadata"].update(name="b-x7k2q", uid="0991341b-edf7-4592-9ad7-f8c1e81a053f")
    fresh["metadata"]["creationTimestamp"] = now
    created, _ = api._decode_body(new_request(), "Warn")
    created["metadata"]["name"] = "b-x7k2q"
    api._prepare_create(created, manager)
    written = {**created, "metadata": dict(created["metadata"])}
    created["metadata"]["resourceVersion"] = "12"
    return {
        "empty": lambda: None,
        "decode_body": lambda: api._decode_body(new_request(), "Warn"),
        "validate": lambda: api._validate_create(created),
        "managed_fields": lambda: api.create_fields.entries(fresh, manager, now),
        "storage": lambda: registry.encode(written),
        "answer": lambda: codec.encode_json(api.to_wire(created)),
        "create": lambda: api.handle(new_request(), info),
    }


def _child(tree: Path, n: int, names: list[str]) -> None:
    parts = _parts(tree)
    pid = str(os.getpid())
    for name in names:
        part = parts[name]
        for _ in range(50):
            part()
        subprocess.run(["callgrind_control", "-z", pid], capture_output=True, check=False)
        for _ in range(n):
            part()
        subprocess.run(["callgrind_control", "-d", pid], capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("parts", nargs="*", help="some of: " + ", ".join(PARTS))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    names = args.parts or list(PARTS)
    unknown = sorted(set(names) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts: {', '.join(unknown)} (known: {', '.join(PARTS)})")
    if args.child:
        _child(args.tree.resolve(), args.n, names)
        return
    prefix = os.path.join(tempfile.mkdtemp(prefix="create-parts-"), "callgrind.out")
    command = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={prefix}",
        sys.executable,
        __file__,
        "--child",
        "--n",
        str(args.n),
        "--tree",
        str(args.tree),
        *names,
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(command, env=env, check=True, capture_output=True)
    dumps = sorted(glob.glob(prefix + ".*"), key=lambda name: int(name.rsplit(".", 1)[1]))
    for name, dump in zip(names, dumps, strict=False):
        with open(dump, errors="replace") as f:
            total = next(int(line.split()[1]) for line in f if line.startswith("summary:"))
        print(f"{name:15s} {total / args.n:10,.0f} instructions/call")


if __name__ == "__main__":
    main()
