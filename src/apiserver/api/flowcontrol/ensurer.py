"""The bootstrap configuration kept in storage: kube's APF ensurer.

Follows k8s.io/kubernetes ``pkg/registry/flowcontrol/ensurer`` (strategy.go,
flowschema.go, prioritylevelconfiguration.go) and ``pkg/registry/flowcontrol/rest/
storage_flowcontrol.go`` (``ensure``: suggested objects, then mandatory ones, then removal):

- a **mandatory** object (``exempt`` and ``catch-all``, both kinds) is created when missing,
  and its spec and ``apf.kubernetes.io/autoupdate-spec: "true"`` annotation are restored
  whenever they differ (the exempt level's ``spec.exempt``, which validation lets an
  administrator change, is kept);
- a **suggested** object is created when missing; an existing one is kept up to date only
  while its annotation says ``true`` (a missing or unreadable annotation counts as true while
  the object's generation is still 1, i.e. nobody changed its spec); the annotation is
  rewritten to what was decided;
- an object with the annotation ``true`` that the bootstrap set no longer has is deleted
  (precondition: its resourceVersion).

Several servers may run it against one etcd at once: a create that finds the object made by
another is fine, updates are compare-and-swap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from twisted.internet.interfaces import IReactorTime

from apiserver.api.flowcontrol.rest import FLOW_SCHEMAS, PRIORITY_LEVELS, Kind
from apiserver.apimachinery import errors
from apiserver.flowcontrol.bootstrap import AUTO_UPDATE, MANDATORY
from apiserver.flowcontrol.bootstrap import FLOW_SCHEMAS as BOOTSTRAP_SCHEMAS
from apiserver.flowcontrol.bootstrap import PRIORITY_LEVELS as BOOTSTRAP_LEVELS
from apiserver.gocompat.boolparse import go_parse_bool
from apiserver.registry.store import NoChange, Obj, Registry, metadata


def _parse_annotation(meta: Mapping[str, Any]) -> bool | None:
    value = (meta.get("annotations") or {}).get(AUTO_UPDATE)
    if value is None:
        return None
    return go_parse_bool(str(value))


def should_update_spec(meta: Mapping[str, Any]) -> bool:
    """strategy.go ``shouldUpdateSpec``."""
    auto = _parse_annotation(meta)
    if auto is not None:
        return auto
    return (meta.get("generation") or 0) == 1


def should_delete(meta: Mapping[str, Any]) -> bool:
    """``GetFlowSchemaRemoveCandidate``'s test: the annotation parses as true."""
    return _parse_annotation(meta) is True


class Ensurer:
    """One pass of the ensurer over both resources (:meth:`ensure`)."""

    def __init__(
        self,
        registries: Mapping[str, Registry],
        clock: IReactorTime,
        new_uid: Callable[[], str],
    ) -> None:
        self.registries = registries
        self.clock = clock
        self.new_uid = new_uid
        self.wanted: Sequence[tuple[Kind, Sequence[tuple[str, dict[str, Any]]]]] = (
            (FLOW_SCHEMAS, BOOTSTRAP_SCHEMAS),
            (PRIORITY_LEVELS, BOOTSTRAP_LEVELS),
        )

    def _now(self) -> str:
        return datetime.fromtimestamp(self.clock.seconds(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def ensure(self) -> None:
        """kube's ``ensure``: suggested, then mandatory, then removal."""
        for mandatory in (False, True):
            for kind, objects in self.wanted:
                for name, spec in objects:
                    if (name in MANDATORY) == mandatory:
                        await self._ensure_one(kind, name, spec, mandatory)
        for kind, objects in self.wanted:
            await self._remove_unwanted(kind, {name for name, _ in objects})

    async def _ensure_one(
        self, kind: Kind, name: str, spec: dict[str, Any], mandatory: bool
    ) -> None:
        registry = self.registries[kind.resource]
        current, _ = await registry.get_or_none("", name)
        if current is None:
            obj: Obj = {
                "metadata": {
                    "name": name,
                    "uid": self.new_uid(),
                    "generation": 1,
                    "creationTimestamp": self._now(),
                    "annotations": {AUTO_UPDATE: "true"},
                },
                "spec": _copy(spec),
                "status": {},
            }
            try:
                await registry.create(obj)
            except errors.StatusError as error:
                if error.code != 409:  # another server created it first
                    raise
            return

        async def try_update(current: Obj | None) -> Obj | None:
            if current is None:
                raise NoChange
            meta = metadata(current)
            wanted = spec
            live_exempt = (current.get("spec") or {}).get("exempt")
            if kind is PRIORITY_LEVELS and name == "exempt" and live_exempt is not None:
                # The exempt level's shares and lendable percent are the administrator's
                # (validation lets them change): the ensurer keeps them.
                wanted = {**spec, "exempt": live_exempt}
            auto = mandatory or should_update_spec(meta)
            annotation = "true" if auto else "false"
            update_annotation = _parse_annotation(meta) is not auto
            spec_changed = auto and current.get("spec") != wanted
            if not (update_annotation or spec_changed):
                raise NoChange
            new_meta = dict(meta)
            new_meta["annotations"] = {**(meta.get("annotations") or {}), AUTO_UPDATE: annotation}
            new = {**current, "metadata": new_meta}
            if spec_changed:
                new["spec"] = _copy(wanted)
                new_meta["generation"] = (meta.get("generation") or 1) + 1
            return new

        try:
            await registry.guaranteed_update("", name, try_update, allow_create=False)
        except errors.StatusError as error:
            if error.code != 404:  # deleted meanwhile: the next pass creates it
                raise

    async def _remove_unwanted(self, kind: Kind, wanted: set[str]) -> None:
        registry = self.registries[kind.resource]
        page = await registry.list_page(None)
        for obj in page.items:
            meta = metadata(obj)
            name = meta.get("name", "")
            if name in wanted or not should_delete(meta):
                continue
            revision = meta.get("resourceVersion")

            def unchanged(current: Obj, revision: Any = revision, name: str = name) -> None:
                if metadata(current).get("resourceVersion") != revision:
                    raise errors.conflict(kind.group_resource, name, errors.MODIFIED)

            try:
                await registry.delete("", name, unchanged)
            except errors.StatusError as error:
                if error.code not in (404, 409):
                    raise


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value
