"""The health checks' own loop: the ``log`` check's flush loop, stopped with the tree.

:class:`apiserver.healthz.LogCheck` starts its flush loop on the first probe (as
k8s.io/apiserver/pkg/server/healthz ``LogHealthz`` does); this early child stops it when the
tree stops. Started early, it is stopped late, so the checks answer while the rest shuts down.
"""

from __future__ import annotations

from twisted.application.service import Service

from apiserver.healthz import LogCheck


class HealthService(Service):
    name = "healthz"

    def __init__(self, log_check: LogCheck) -> None:
        self.log_check = log_check

    def stopService(self) -> None:
        super().stopService()
        self.log_check.stop()
