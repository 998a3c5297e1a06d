"""Post-start hooks, run once the listener is up, and the timers they leave behind.

kube-apiserver runs its PostStartHooks after the secure listener started serving
(k8s.io/apiserver/pkg/server/hooks.go ``RunPostStartHooks``); so does this child, which
comes right after the listener. Its :class:`OwnedCalls` hold the hooks' timers (the
``--storage-initialization-timeout`` wait), cancelled when the tree stops.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted.application.service import Service
from twisted.internet.interfaces import IReactorTime

from apiserver.healthz import PostStartHooks
from apiserver.service.timers import OwnedCalls


class PostStartService(Service):
    """Calls ``announce()`` (start-up notes) then runs every hook, once."""

    name = "post-start-hooks"

    def __init__(
        self,
        hooks: PostStartHooks,
        clock: IReactorTime,
        announce: Callable[[], None] = lambda: None,
    ) -> None:
        self.hooks = hooks
        self.announce = announce
        self.calls = OwnedCalls(clock)
        self._ran = False

    def startService(self) -> None:
        super().startService()
        if self._ran:
            return
        self._ran = True
        self.announce()
        self.hooks.run_all()

    def stopService(self) -> None:
        super().stopService()
        self.calls.cancel_all()
