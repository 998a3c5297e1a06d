"""A quick test that a JSON body has no strict-decoding problems (no unknown, no duplicate field).

Why: :func:`apiserver.apimachinery.strict.find_strict_errors` must keep members in document
order with duplicates (``json.loads`` with an ``object_pairs_hook``, in Python) to word its
problems as Go does; that was about a tenth of a create's CPU. Nearly every body has no
problem at all, and saying so needs neither order nor wording: this test answers "certainly
clean" from the body's bytes and the dicts ``orjson`` already decoded, and anything else
(a problem, or a body it cannot vouch for) goes to the full check, which stays the only
source of problem texts.

How "certainly clean" is decided:

* *No duplicate key anywhere.* Every object member in the raw text has one ``:`` outside
  strings; inside strings a ``:`` is a literal ``:``. ``orjson.dumps`` of the decoded value
  writes one ``:`` per surviving member and every string's ``:`` literally, so when the body
  escapes no ``:`` (no ``\\u003a``), the raw text has exactly as many ``:`` as the re-encoded
  value if and only if no member was dropped, i.e. no key repeated in any object (a dropped
  duplicate takes away its own ``:`` and any in its strings, never adds one).
* *No unknown field.* Without duplicates the decoded dicts hold exactly the members the full
  check walks, so walking them by schema the same way (structs' keys must be known; maps,
  lists and known fields are descended into when the value has the matching JSON kind;
  opaque and scalar values are not) finds the same unknown fields, or none.
"""

from __future__ import annotations

from typing import Any

import orjson

from apiserver.apimachinery.schema import List, Map, Struct, Type

#: Per struct type: its known field names and the fields worth descending into.
_PLANS: dict[int, tuple[Struct, frozenset[str], tuple[tuple[str, Type], ...]]] = {}


def _holds_struct(typ: Type) -> bool:
    if isinstance(typ, Struct):
        return True
    if isinstance(typ, Map):
        return _holds_struct(typ.values)
    if isinstance(typ, List):
        return _holds_struct(typ.items)
    return False


def _plan(typ: Struct) -> tuple[frozenset[str], tuple[tuple[str, Type], ...]]:
    known = _PLANS.get(id(typ))
    if known is None or known[0] is not typ:
        nested = tuple((f.name, f.type) for f in typ.fields if _holds_struct(f.type))
        known = _PLANS[id(typ)] = (typ, typ.field_names(), nested)
    return known[1], known[2]


def _no_unknown(value: Any, typ: Type) -> bool:
    """Whether no struct reachable in ``value`` (as the strict walk descends) has an unknown key."""
    if isinstance(typ, Struct):
        if not isinstance(value, dict):
            return True
        names, nested = _plan(typ)
        if not value.keys() <= names:
            return False
        for name, ftype in nested:
            item = value.get(name)
            if item is not None and not _no_unknown(item, ftype):
                return False
        return True
    if isinstance(typ, Map):
        if not isinstance(value, dict):
            return True
        return all(_no_unknown(item, typ.values) for item in value.values())
    if isinstance(typ, List):
        if not isinstance(value, list):
            return True
        return all(_no_unknown(item, typ.items) for item in value)
    return True


def no_duplicates(raw: bytes, decoded: Any) -> bool:
    """True when the JSON ``raw`` (decoded as ``decoded``) certainly repeats no key in any
    object (the first point above); False when it may (ask the full check).

    A compact body written as ``orjson`` writes it (client-go's and most clients' bodies:
    no spaces, no escapes orjson would not write) is its own re-encoding: equal bytes have
    the same members, so none was dropped, and the counts need not be taken."""
    try:
        again = orjson.dumps(decoded)
    except TypeError:
        return False
    if again == raw:
        return True
    if b"\\u003a" in raw or b"\\u003A" in raw:
        return False
    return raw.count(b":") == again.count(b":")


def certainly_clean(raw: bytes, decoded: Any, schema: Type) -> bool:
    """True when the JSON ``raw`` (decoded as ``decoded``) has no unknown and no duplicate
    field for ``schema``; False when it may have some (ask the full check)."""
    return no_duplicates(raw, decoded) and _no_unknown(decoded, schema)
