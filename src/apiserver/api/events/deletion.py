"""Deletion of an event with pending finalizers, as kube-apiserver's generic store does it.

Follows k8s.io/apiserver ``pkg/registry/generic/registry/store.go``: ``Delete`` removes an
object at once unless it has finalizers; then ``updateForGracefulDeletionAndFinalizers``
only marks it (``markAsDeleting``: ``deletionTimestamp`` now, ``deletionGracePeriodSeconds``
0) and answers with the marked object. Events have no graceful-deletion strategy
(``rest.BeforeDelete`` in ``pkg/registry/rest/delete.go`` answers "not graceful"), so a DELETE
of an object already marked marks it again, which changes nothing. An update that leaves a
marked object without finalizers deletes it (``Update`` -> ``ShouldDeleteDuringUpdate`` ->
``deleteWithoutFinalizers``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from apiserver.api.events.convert import canonical_object_meta, wire_time_to_epoch
from apiserver.apimachinery.meta_time import format_seconds

Obj = dict[str, Any]


class Finalizing(Exception):
    """The object to delete has pending finalizers: it is to be marked, not removed."""


class DeleteNow(Exception):
    """The object to mark has no finalizers (any more): remove it (store.go ``errDeleteNow``)."""


class EmptiedFinalizers(Exception):
    """An update leaves a marked object without finalizers (store.go ``errEmptiedFinalizers``):
    the object is deleted instead, and ``obj``, the update's result, is the answer."""

    def __init__(self, obj: Obj) -> None:
        super().__init__("finalizers emptied")
        self.obj = obj


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def has_finalizers(obj: Obj) -> bool:
    return bool(_meta(obj).get("finalizers"))


def unless_finalizing(check: Callable[[Obj], None]) -> Callable[[Obj], None]:
    """``check`` (the DeleteOptions preconditions, checked first as ``rest.BeforeDelete``
    does), then :class:`Finalizing` when the object has pending finalizers."""

    def check_then_finalizers(current: Obj) -> None:
        check(current)
        if has_finalizers(current):
            raise Finalizing

    return check_then_finalizers


def mark_as_deleting(current: Obj, now: float) -> Obj:
    """A copy of ``current`` marked for deletion (store.go ``markAsDeleting``).

    ``generation`` is bumped when the marking is new and it is set; ``deletionTimestamp`` is
    set to ``now`` unless an earlier one is there; ``deletionGracePeriodSeconds`` becomes 0.
    Raises :class:`DeleteNow` when ``current`` has no finalizers.
    """
    if not has_finalizers(current):
        raise DeleteNow
    meta = dict(_meta(current))
    existing = meta.get("deletionTimestamp")
    if existing is None and meta.get("generation", 0) > 0:
        meta["generation"] += 1
    if existing is None or wire_time_to_epoch(existing) > now:
        meta["deletionTimestamp"] = format_seconds(now)
    meta["deletionGracePeriodSeconds"] = 0
    return {**current, "metadata": canonical_object_meta(meta)}


def should_delete_during_update(new: Obj, old: Obj) -> bool:
    """store.go ``ShouldDeleteDuringUpdate``: ``new`` has no finalizers while ``old`` is marked
    for deletion with no grace period (nil or 0)."""
    if has_finalizers(new):
        return False
    old_meta = _meta(old)
    if old_meta.get("deletionTimestamp") is None:
        return False
    return not old_meta.get("deletionGracePeriodSeconds")


__all__ = [
    "DeleteNow",
    "EmptiedFinalizers",
    "Finalizing",
    "has_finalizers",
    "mark_as_deleting",
    "should_delete_during_update",
    "unless_finalizing",
]
