"""Audit, assembled from the command line: the policy, the backends and the chain's stage.

Follows k8s.io/apiserver ``pkg/server/options/audit.go`` (``AuditOptions.ApplyTo``): the
policy file is read and validated first (a bad one stops start-up, naming the file); without
``--audit-policy-file`` nothing is audited and no backend is built; the log and webhook
backends are joined (``union``); with a policy but no backend there is no audit stage either
(``WithAudit`` returns the handler unchanged when the sink is nil).

Building has no side effects: each backend is wrapped in an :class:`AuditSinkService` that the
server adds to its service tree before the listener, so backends start before the first
request and are drained (``Sink.shutdown``) after the last one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from twisted.application.service import Service
from twisted.internet.defer import Deferred, maybeDeferred
from twisted.logger import Logger

from apiserver.audit.filter import AuditStage, FilterMetrics
from apiserver.audit.interface import Sink
from apiserver.audit.log import build_log_backend, worker_log_path
from apiserver.audit.policy import Policy, load_policy_file
from apiserver.audit.webhook import build_webhook_backend

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

log = Logger()


class AuditSinkService(Service):
    """One backend as a child of the service tree (``audit-<plugin>``): ``start`` when the
    tree starts, ``shutdown`` (delivering what is queued) when it stops, waited for."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink
        self.name = f"audit-{sink.name}"

    def startService(self) -> None:
        super().startService()
        self.sink.start()

    def stopService(self) -> Deferred[None]:
        super().stopService()

        def failed(failure: Any) -> None:
            log.failure("audit backend {name} failed to shut down", failure, name=self.sink.name)

        return maybeDeferred(self.sink.shutdown).addErrback(failed)


@attrs.frozen
class Audit:
    """What :func:`build_audit` gives the server."""

    policy: Policy
    #: The chain's ``audit=`` stage; None when no backend is configured.
    stage: AuditStage | None
    sinks: tuple[Sink, ...]

    def services(self) -> list[AuditSinkService]:
        return [AuditSinkService(sink) for sink in self.sinks]


def build_audit(
    config: ServerConfig,
    reactor: Any,
    metrics: FilterMetrics,
    worker: tuple[int, int] | None = None,
) -> Audit | None:
    """The policy, the backends and the stage; None without ``--audit-policy-file``.
    ``worker`` is ``(index, count)`` in a worker process of ``--workers`` (each writes its
    own log file: :func:`apiserver.audit.log.worker_log_path`).

    Raises ``ValueError`` (naming the file) for a policy that cannot be used, and whatever
    the backends raise for their own configuration (a bad kubeconfig).
    """
    path = config.audit_policy_file
    if not path:
        if config.audit_log_path or config.audit_webhook_config_file:
            log.info("No audit policy file provided, no events will be recorded")
        return None
    policy = load_policy_file(path)
    sinks: list[Sink] = []
    for sink in (
        build_log_backend(
            config, reactor, metrics, path=worker_log_path(config.audit_log_path, worker)
        ),
        build_webhook_backend(config, reactor, metrics),
    ):
        if sink is not None:
            sinks.append(sink)
    stage = AuditStage(policy, sinks, reactor, metrics) if sinks else None
    return Audit(policy, stage, tuple(sinks))
