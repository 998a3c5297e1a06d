"""``metadata.managedFields`` of a created Event, memoized by the shape of the object.

Why: computing the managed fields of a create the general way (convert the object to
events.k8s.io/v1, let :func:`apiserver.apimachinery.managedfields.update_managed_fields` copy
and normalize it, compare it with the empty object, build and encode the field set) was the
largest single cost of a POST (a py-spy profile of the daemon: about a fifth of the reactor
thread's time per create). Events are created in large numbers and nearly all of them have
the same few shapes, so the answer is kept per shape.

Why it is correct. A create has no live object and, when the body carries no
``managedFields``, no previous entries, so the result is exactly one Update entry (or none)
whose ``fieldsV1`` is the set of fields the new object has that the empty object does not
(``Compare`` against the empty object, metadata stripped), and whose ``time`` is ``now``.
That set depends on the object only through:

* which keys are present at every level and in which order (struct fields, and the keys of
  ``labels``/``annotations``, which are named in the set);
* for each scalar, its type and whether it is empty (``""``, ``0``, ``False``, ``None``):
  the conversion to v1 (:func:`.convert.internal_to_v1`) and Go's normalization
  (:func:`apiserver.apimachinery.schema.go_normalize`) drop or null a value only by
  ``omitempty``/zero rules, and the empty object holds nothing but ``null`` and ``{}``
  leaves, so a leaf is "added" or "modified" according to its emptiness, never its text;
* the items of lists (``finalizers``, ``ownerReferences``): set values and list-map keys are
  named in the set, so list items enter the key whole, value and all.

:func:`shape` keeps exactly that (and nothing of the values besides), so two objects with the
same shape get the same ``fieldsV1``, and the memoized entry differs from a fresh one only by
its ``time``, which is set again on every use. The manager is part of the key. Bodies that
carry ``managedFields`` take the general path (their entries take part in the result), as
do updates, patches and apply.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

import orjson

from apiserver.apimachinery.managedfields import update_managed_fields
from apiserver.apimachinery.schema import Struct

#: Shapes kept, the oldest going first when full. A shape and its entry take about 3 KiB
#: (nested tuples of names and types, and the entry's JSON): about 3 MiB at most. Clients
#: create Events of a handful of shapes; one whose label keys never repeat only costs the
#: general computation each time, as before the memo.
MEMO_SIZE = 1024


def shape(value: Any) -> Hashable:
    """What the managed fields of a create can depend on (see the module docstring).

    Objects keep their keys in order; list items are kept whole (frozen); other values keep
    only their type and whether they are empty.
    """
    if isinstance(value, dict):
        return _dict_shape(value)
    if isinstance(value, list):
        return (list, orjson.dumps(value))
    return (type(value), not value)


def _dict_shape(value: dict[str, Any]) -> Hashable:
    # :func:`shape` of a dict with its leaves done in line: one call per nested object
    # instead of one per value (an Event has about twenty values, four objects), and a
    # string leaf, the usual value, told by one test and kept as one flat triple.
    out: list[Hashable] = []
    append = out.append
    for key, item in value.items():
        kind = type(item)
        if kind is str:
            append((key, str, not item))
        elif isinstance(item, dict):
            append((key, _dict_shape(item)))
        elif isinstance(item, list):
            append((key, list, orjson.dumps(item)))
        else:
            append((key, kind, not item))
    return tuple(out)


class CreateManagedFields:
    """The ``managedFields`` a create stores, for one API version of one resource.

    ``to_version`` converts a stored (internal) object into the version the entries are
    recorded in, as :func:`update_managed_fields` needs it.
    """

    def __init__(
        self,
        api_version: str,
        schema: Struct,
        to_version: Callable[[dict[str, Any]], dict[str, Any]],
        *,
        size: int = MEMO_SIZE,
    ) -> None:
        self.api_version = api_version
        self.schema = schema
        self.to_version = to_version
        self.size = size
        self._memo: dict[tuple[str, Hashable], bytes] = {}

    def compute(self, internal: dict[str, Any], manager: str, now: str) -> list[dict[str, Any]]:
        """The general way, as for any Update: what the memo must agree with."""
        return update_managed_fields(
            None,
            self.to_version(internal),
            manager,
            "Update",
            self.api_version,
            now,
            self.schema,
        )

    def entries(self, internal: dict[str, Any], manager: str, now: str) -> list[dict[str, Any]]:
        """The entries for creating ``internal`` by ``manager`` at ``now`` (fresh dicts)."""
        if "managedFields" in internal.get("metadata", ()):
            return self.compute(internal, manager, now)
        try:
            key = (manager, shape(internal))
        except TypeError:  # a list holding something JSON cannot say: no shortcut
            return self.compute(internal, manager, now)
        encoded = self._memo.get(key)
        if encoded is None:
            result = self.compute(internal, manager, now)
            memo = self._memo
            if len(memo) >= self.size:
                del memo[next(iter(memo))]
            memo[key] = orjson.dumps(result)
            return result
        # Decoded afresh on every use: no two objects share a dict of the memo.
        entries: list[dict[str, Any]] = orjson.loads(encoded)
        for entry in entries:
            if "time" in entry:
                entry["time"] = now
        return entries

    def __len__(self) -> int:
        return len(self._memo)
