"""Garbage-collector settings for a long-running server.

Why: CPython's cyclic collector runs its youngest generation every 700 net allocations of
container objects. A request allocates hundreds (headers, dicts of a decoded object, Deferreds),
so with the defaults the collector runs every few requests and, worse, the full collections
walk every long-lived object (the watch cache, thousands of connections). Measured with
py-spy under bench/api_bench.py, collections were a large share of a watch fan-out.

So, once the server is built: everything allocated so far (modules, option tables, schema
documents, the route table) is moved out of the collector's sight with ``gc.freeze()``, and
the youngest generation's threshold is raised so that short-lived garbage (almost all of a
request's) is freed by reference counting long before a collection would look at it. Cycles
are still collected, only less often. Go's runtime makes the same trade with GOGC.
"""

from __future__ import annotations

import gc

#: Collections of the youngest generation happen after this many net allocations.
GEN0_THRESHOLD = 50_000
#: Older generations: as CPython's defaults.
GEN1_THRESHOLD = 20
GEN2_THRESHOLD = 20


def tune_gc() -> None:
    """Freeze what start-up allocated and space young collections out."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
