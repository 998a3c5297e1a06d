"""The stored configuration of priority and fairness, kept live.

Follows k8s.io/apiserver/pkg/util/flowcontrol/apf_controller.go (the config consumer: an
informer on both resources, each change digested into new priority levels and a new
classifier, the FlowSchemas' ``Dangling`` condition written back) and
k8s.io/kubernetes/pkg/registry/flowcontrol/rest/storage_flowcontrol.go (the config
producer: :class:`~apiserver.api.flowcontrol.ensurer.Ensurer` at start, retried every second
for at most five minutes, then every minute).

Each resource is listed and then watched from the list's revision through the server's
store, so servers sharing one etcd see each other's changes. Changes that arrive together
are digested once (on the next reactor turn). The stored objects take over from the
bootstrap configuration priority and fairness starts with only once the first ensure pass
has completed, so a first start on empty storage never runs on the mandatory objects alone.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from twisted.internet import defer
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.api.flowcontrol.ensurer import Ensurer
from apiserver.api.flowcontrol.rest import FLOW_SCHEMAS, PRIORITY_LEVELS
from apiserver.apimachinery import errors
from apiserver.flowcontrol.apf import PriorityAndFairness
from apiserver.registry.store import NoChange, Obj, Registry, metadata
from apiserver.storage.interface import PausableWatch, WatchEvent

log = Logger()

#: storage_flowcontrol.go: the first ensure is retried every second for at most 5 minutes,
#: then the configuration is ensured every minute.
RETRY = 1.0
FIRST_ENSURE_DEADLINE = 300.0
ENSURE_PERIOD = 60.0
#: How long to wait before listing again after a watch ended or a list failed.
RELIST_DELAY = 1.0


def dangling_condition(level: str, missing: bool) -> dict[str, str]:
    """apf_controller.go's ``Dangling`` condition (without its transition time)."""
    if missing:
        return {
            "type": "Dangling",
            "status": "True",
            "reason": "NotFound",
            "message": "This FlowSchema references the PriorityLevelConfiguration object "
            f'named "{level}" but there is no such object',
        }
    return {
        "type": "Dangling",
        "status": "False",
        "reason": "Found",
        "message": "This FlowSchema references the PriorityLevelConfiguration object "
        f'named "{level}" and it exists',
    }


class ConfigController:
    """Start/stop part: the ensurer and the config consumer for one server."""

    def __init__(
        self,
        apf: PriorityAndFairness,
        registries: Mapping[str, Registry],
        clock: IReactorTime,
        ensurer: Ensurer,
    ) -> None:
        self.apf = apf
        self.registries = registries
        self.clock = clock
        self.ensurer = ensurer
        self.objects: dict[str, dict[str, Obj]] = {name: {} for name in registries}
        self._listed: set[str] = set()
        self._watches: dict[str, PausableWatch] = {}
        self._calls: set[IDelayedCall] = set()
        self._pending: IDelayedCall | None = None
        self._loop: LoopingCall | None = None
        self._running = False
        self.ensured = False
        self._ensured_waiters: list[Deferred[None]] = []
        self._digest_waiters: list[Deferred[None]] = []
        self._first_ensure_started = 0.0
        #: How many times the configuration was digested (tests and debugging).
        self.digests = 0

    # --- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        self._running = True
        self._first_ensure_started = self.clock.seconds()
        for resource in self.registries:
            self._relist(resource)
        self._ensure_first()

    def stop(self) -> None:
        self._running = False
        for watch in list(self._watches.values()):
            watch.cancel()
        self._watches.clear()
        for call in list(self._calls):
            if call.active():
                call.cancel()
        self._calls.clear()
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
        self._pending = None
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None

    def wait_ensured(self) -> Deferred[None]:
        """Fires once the first ensure pass has completed (the ``priority-and-fairness-
        config-producer`` post-start hook); errbacks after five minutes of failures."""
        if self.ensured:
            return defer.succeed(None)
        waiter: Deferred[None] = Deferred()
        self._ensured_waiters.append(waiter)
        return waiter

    def wait_digested(self) -> Deferred[None]:
        """Fires once the stored configuration is in force (the ``priority-and-fairness-
        config-consumer`` post-start hook)."""
        if self.digests:
            return defer.succeed(None)
        waiter: Deferred[None] = Deferred()
        self._digest_waiters.append(waiter)
        return waiter

    def _later(self, delay: float, function: Any, *args: Any) -> None:
        if not self._running:
            return
        call: IDelayedCall | None = None

        def run() -> None:
            if call is not None:
                self._calls.discard(call)
            function(*args)

        call = self.clock.callLater(delay, run)
        self._calls.add(call)

    # --- the producer ----------------------------------------------------------------------

    def _ensure_first(self) -> None:
        d = defer.ensureDeferred(self.ensurer.ensure())
        d.addCallbacks(self._first_ensured, self._first_ensure_failed)

    def _first_ensured(self, _: object) -> None:
        if not self._running:
            return
        self.ensured = True
        waiters, self._ensured_waiters = self._ensured_waiters, []
        for waiter in waiters:
            waiter.callback(None)
        self._loop = LoopingCall(self._ensure_again)
        self._loop.clock = self.clock
        self._loop.start(ENSURE_PERIOD, now=False)
        self._changed()

    def _first_ensure_failed(self, failure: Failure) -> None:
        if not self._running:
            return
        log.error(
            "APF bootstrap ensurer ran into error, will retry later: {error}",
            error=failure.getErrorMessage(),
        )
        if self.clock.seconds() - self._first_ensure_started >= FIRST_ENSURE_DEADLINE:
            waiters, self._ensured_waiters = self._ensured_waiters, []
            for waiter in waiters:
                waiter.errback(RuntimeError("unable to initialize APF bootstrap configuration"))
            return
        self._later(RETRY, self._ensure_first)

    def _ensure_again(self) -> Deferred[None]:
        def failed(failure: Failure) -> None:
            log.error(
                "APF bootstrap ensurer ran into error, will retry later: {error}",
                error=failure.getErrorMessage(),
            )

        return defer.ensureDeferred(self.ensurer.ensure()).addErrback(failed)

    # --- the consumer ----------------------------------------------------------------------

    def _relist(self, resource: str) -> None:
        if not self._running:
            return
        d = defer.ensureDeferred(self._list_and_watch(resource))

        def failed(failure: Failure) -> None:
            log.warn(
                "listing {resource} failed, retrying: {error}",
                resource=resource,
                error=failure.getErrorMessage(),
            )
            self._later(RELIST_DELAY, self._relist, resource)

        d.addErrback(failed)

    async def _list_and_watch(self, resource: str) -> None:
        registry = self.registries[resource]
        page = await registry.list_page(None)
        if not self._running:
            return
        self.objects[resource] = {metadata(obj)["name"]: obj for obj in page.items}
        self._listed.add(resource)
        watch = registry.watch(None, page.revision + 1, partial(self._event, resource))
        self._watches[resource] = watch
        watch.done.addBoth(self._watch_ended, resource, watch)
        self._changed()

    def _watch_ended(self, result: object, resource: str, watch: PausableWatch) -> None:
        if self._watches.get(resource) is not watch:
            return
        del self._watches[resource]
        if isinstance(result, Failure):
            log.warn(
                "watch of {resource} ended: {error}",
                resource=resource,
                error=result.getErrorMessage(),
            )
        self._later(RELIST_DELAY, self._relist, resource)

    def _event(self, resource: str, event: WatchEvent) -> None:
        registry = self.registries[resource]
        if event.type == "PUT":
            obj = registry.decode(event.kv)
            self.objects[resource][metadata(obj)["name"]] = obj
        elif event.type == "DELETE" and event.prev_kv is not None:
            old = registry.decode(event.prev_kv)
            self.objects[resource].pop(metadata(old).get("name", ""), None)
        else:
            return
        self._changed()

    def _changed(self) -> None:
        if (
            self._pending is None
            and self.ensured
            and len(self._listed) == len(self.registries)
            and self._running
        ):
            if not self.digests:
                self._digest()  # the first time at once: readyz waits for it
                return
            self._pending = self.clock.callLater(0, self._digest)

    def _digest(self) -> None:
        """``digestConfigObjects``: reconfigure, then mark dangling FlowSchemas."""
        self._pending = None
        schemas = self.objects[FLOW_SCHEMAS.resource]
        levels = self.objects[PRIORITY_LEVELS.resource]
        self.apf.reconfigure(
            [_wire(obj) for obj in schemas.values()], [_wire(obj) for obj in levels.values()]
        )
        self.digests += 1
        waiters, self._digest_waiters = self._digest_waiters, []
        for waiter in waiters:
            waiter.callback(None)
        for name, obj in schemas.items():
            level = ((obj.get("spec") or {}).get("priorityLevelConfiguration") or {}).get(
                "name", ""
            )
            wanted = dangling_condition(level, level not in self.apf.levels)
            if _condition_differs(obj, wanted):
                defer.ensureDeferred(self._write_condition(name, wanted)).addErrback(
                    lambda f: log.warn(
                        "writing the Dangling condition failed: {error}",
                        error=f.getErrorMessage(),
                    )
                )

    async def _write_condition(self, name: str, wanted: dict[str, str]) -> None:
        registry = self.registries[FLOW_SCHEMAS.resource]
        now = datetime.fromtimestamp(self.clock.seconds(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        async def try_update(current: Obj | None) -> Obj | None:
            if current is None or not _condition_differs(current, wanted):
                raise NoChange
            status = dict(current.get("status") or {})
            conditions = [c for c in status.get("conditions") or () if c.get("type") != "Dangling"]
            conditions.append(
                {
                    "type": "Dangling",
                    "status": wanted["status"],
                    "lastTransitionTime": now,
                    "reason": wanted["reason"],
                    "message": wanted["message"],
                }
            )
            status["conditions"] = conditions
            return {**current, "status": status}

        try:
            await registry.guaranteed_update("", name, try_update, allow_create=False)
        except errors.StatusError as error:
            if error.code != 404:
                raise


def _condition_differs(obj: Obj, wanted: Mapping[str, str]) -> bool:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Dangling":
            return any(condition.get(k) != wanted[k] for k in ("status", "reason", "message"))
    return True


def _wire(obj: Obj) -> Obj:
    """What :meth:`PriorityAndFairness.reconfigure` reads (metadata and spec as stored)."""
    return obj
