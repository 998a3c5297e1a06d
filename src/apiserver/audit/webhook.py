"""The audit webhook backend: POSTs ``EventList`` batches to a kubeconfig's server, retrying.

Follows k8s.io/apiserver ``plugin/pkg/audit/webhook/webhook.go`` and the generic webhook client
it uses (``pkg/util/webhook/webhook.go``):

- each call of ``process_events`` is one POST of
  ``{"kind":"EventList","apiVersion":"audit.k8s.io/v1","metadata":{},"items":[...]}`` with
  ``Content-Type: application/json`` to the kubeconfig's ``server``. The items are the events
  as the versioned codec writes list items: without ``kind``/``apiVersion`` (the codec sets the
  type only on the list; ``pkg/audit/context.go`` creates events with an empty ``TypeMeta``);
- **every** error is retried (``retryOnError``, which replaces ``DefaultShouldRetry``: a 400 or
  a refused connection is worth another try, since a lost record cannot be recovered), with
  ``DefaultRetryBackoffWithInitialDelay(--audit-webhook-initial-backoff)``: k8s.io/apimachinery
  ``wait.Backoff{Duration: initial, Factor: 1.5, Jitter: 0.2, Steps: 5}`` run by
  ``ExponentialBackoffWithContext``: five tries, and before try n+1 a wait of
  ``initial * 1.5**(n-1)`` plus a uniform jitter in ``[0, 0.2 * that)``;
- each try has the client's 30 s timeout (``defaultRequestTimeout``, reading the body included);
- when the tries are exhausted the events are lost: ``audit.HandlePluginError`` counts them in
  ``apiserver_audit_error_total{plugin="webhook"}`` and logs the error with the impacted
  events.

The kubeconfig is read with :mod:`apiserver.auth.kubeconfig`, as the authentication and
authorization webhooks do (CA, client certificate, bearer token or basic auth). Batching,
throttling and truncation are the wrappers' (:func:`apiserver.audit.compose.wrap`), exactly as
``pkg/server/options/audit.go`` wraps the webhook backend in the buffered and truncating ones.

Every wait (retries, the timeout) is on the injected clock, so tests drive time by hand.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson
from twisted.internet.defer import CancelledError, Deferred, succeed
from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger
from twisted.python.failure import Failure

from apiserver.audit.interface import API_VERSION, AuditEvent, AuditMetrics, Sink, backend_options
from apiserver.auth.kubeconfig import (
    KubeconfigError,
    connection_pool,
    describe_failure,
    load_kubeconfig,
    post_json,
)
from apiserver.gocompat.marshal import html_safe
from apiserver.gocompat.quote import go_quote

if TYPE_CHECKING:
    from apiserver.options.config import ServerConfig

log = Logger()

#: ``PluginName`` (the ``plugin`` label of ``apiserver_audit_error_total``).
PLUGIN_NAME = "webhook"
#: ``DefaultInitialBackoffDelay``: the first wait before a retry, in seconds.
DEFAULT_INITIAL_BACKOFF = 10.0
#: ``DefaultRetryBackoffWithInitialDelay``: growth, jitter and number of tries.
RETRY_FACTOR = 1.5
RETRY_JITTER = 0.2
RETRY_STEPS = 5
#: ``defaultRequestTimeout`` (pkg/util/webhook/webhook.go), seconds.
REQUEST_TIMEOUT = 30.0
#: The group versions ``--audit-webhook-version`` accepts (``knownGroupVersions``).
KNOWN_VERSIONS = (API_VERSION,)


def retry_waits(
    initial: float, random: Callable[[], float] = _random.random, steps: int = RETRY_STEPS
) -> list[float]:
    """The waits between the ``steps`` tries (one fewer than the tries), in seconds.

    ``wait.Backoff.Step`` (k8s.io/apimachinery ``pkg/util/wait/backoff.go``): the base duration
    grows by the factor after each step and the jitter (``wait.Jitter``: ``d + random() *
    0.2 * d``) never feeds back into it. ``ExponentialBackoffWithContext`` stops after the
    last try without waiting.
    """
    waits: list[float] = []
    duration = initial
    for _ in range(steps - 1):
        waits.append(duration + random() * RETRY_JITTER * duration)
        duration *= RETRY_FACTOR
    return waits


def event_list_body(events: Sequence[AuditEvent], api_version: str = API_VERSION) -> bytes:
    """The JSON of the ``EventList`` one POST carries (see the module docstring)."""
    items = [
        {k: v for k, v in event.items() if k != "kind" and k != "apiVersion"}
        if "kind" in event or "apiVersion" in event
        else event
        for event in events
    ]
    # Go's json.Encoder (the codec under the REST client) ends the document with a newline.
    return html_safe(
        orjson.dumps(
            {"kind": "EventList", "apiVersion": api_version, "metadata": {}, "items": items},
            option=orjson.OPT_APPEND_NEWLINE,
        )
    )


def _event_line(event: AuditEvent) -> str:
    """One impacted event in the error log: ``audit.EventString`` (pkg/audit/format.go), the
    legacy log line, when the log backend's formatter is there; else its main fields."""
    try:
        from apiserver.audit.log import event_string
    except ImportError:
        pass
    else:
        return str(event_string(event))
    user = event.get("user") or {}
    return (
        f"AUDIT: id={go_quote(str(event.get('auditID', '')))} "
        f"stage={go_quote(str(event.get('stage', '')))} "
        f"method={go_quote(str(event.get('verb', '')))} "
        f"user={go_quote(str(user.get('username') or '<none>'))} "
        f"uri={go_quote(str(event.get('requestURI', '')))}"
    )


class WebhookSink:
    """The webhook :class:`~apiserver.audit.interface.Sink` (``backend`` in webhook.go).

    ``process_events`` answers a Deferred that fires True once the receiver answered 2xx,
    False once every try failed (counted and logged). It never errbacks. ``shutdown`` fires
    when every call in flight (retries included) has finished, which is what lets the
    buffered wrapper's shutdown deliver its last batch before the process exits.
    """

    name = PLUGIN_NAME

    def __init__(
        self,
        client: Any,
        initial_backoff: float,
        clock: IReactorTime,
        metrics: AuditMetrics,
        *,
        url: str,
        headers: Mapping[bytes, list[bytes]] | None = None,
        api_version: str = API_VERSION,
        timeout: float = REQUEST_TIMEOUT,
        random: Callable[[], float] = _random.random,
        close: Callable[[], object] | None = None,
    ) -> None:
        self.client = client
        self.initial_backoff = float(initial_backoff)
        self.clock = clock
        self.metrics = metrics
        self.url = url
        self.headers = dict(headers or {})
        self.api_version = api_version
        self.timeout = timeout
        self.random = random
        self._close = close
        self._in_flight = 0
        self._idle: list[Deferred[None]] = []

    def start(self) -> None:
        """Nothing to start (``Run`` returns at once in webhook.go)."""

    def process_events(self, events: Sequence[AuditEvent]) -> Deferred[bool]:
        if not events:
            return succeed(True)
        try:
            body = event_list_body(events, self.api_version)
        except (TypeError, ValueError) as error:  # not JSON-ready: nothing to retry
            self._give_up(events, f"failed to encode the events: {error}")
            return succeed(False)
        result: Deferred[bool] = Deferred()
        self._in_flight += 1
        self._try(body, events, retry_waits(self.initial_backoff, self.random), result)
        return result

    def _try(
        self,
        body: bytes,
        events: Sequence[AuditEvent],
        waits: list[float],
        result: Deferred[bool],
    ) -> None:
        def delivered(_: bytes) -> None:
            self._finish(result, True)

        def failed(failure: Failure) -> None:
            # retryOnError: whatever went wrong, try again while tries remain.
            if waits:
                self.clock.callLater(waits.pop(0), self._try, body, events, waits, result)
                return
            self._give_up(events, self._describe(failure))
            self._finish(result, False)

        try:
            posted = post_json(self.client, self.clock, self.url, body, self.timeout, self.headers)
        except Exception:
            failed(Failure())
            return
        posted.addCallbacks(delivered, failed)

    def _describe(self, failure: Failure) -> str:
        reasons = getattr(failure.value, "reasons", None) or []
        if failure.check(CancelledError) or any(r.check(CancelledError) for r in reasons):
            # The request timer fired (post_json cancels on timeout), as http.Client.Timeout.
            return (
                f"Post {go_quote(self.url)}: context deadline exceeded "
                "(Client.Timeout exceeded while awaiting headers)"
            )
        return describe_failure(failure)

    def _give_up(self, events: Sequence[AuditEvent], error: str) -> None:
        """``audit.HandlePluginError``: count the lost events and log them."""
        self.metrics.error(self.name, len(events))
        lines = "\n".join(_event_line(event) for event in events)
        log.error(
            "Error in audit plugin '{plugin}' affecting {count} audit events: {error}\n"
            "Impacted events:\n{lines}",
            plugin=self.name,
            count=len(events),
            error=error,
            lines=lines,
        )

    def _finish(self, result: Deferred[bool], ok: bool) -> None:
        self._in_flight -= 1
        result.callback(ok)
        if self._in_flight == 0:
            idle, self._idle = self._idle, []
            for d in idle:
                d.callback(None)

    def shutdown(self) -> Deferred[None]:
        """Fire when no call is in flight (its retries included), then drop idle connections.

        webhook.go's ``Shutdown`` does nothing because its calls are synchronous; here a
        call in flight is a Deferred, so waiting for it is what keeps a batch from being
        abandoned when the wrappers drain at shutdown.
        """
        d: Deferred[None] = Deferred()
        if self._in_flight == 0:
            d.callback(None)
        else:
            self._idle.append(d)
        if self._close is not None:
            close = self._close

            def closed(_: None) -> Any:
                return close()

            d.addCallback(closed)
            d.addCallback(lambda _: None)
        return d


def build_webhook_backend(config: ServerConfig, reactor: Any, metrics: AuditMetrics) -> Sink | None:
    """The webhook backend ``--audit-webhook-*`` describe, wrapped; None without a config file.

    As ``AuditWebhookOptions.newUntruncatedBackend`` and ``ApplyTo`` (pkg/server/options/
    audit.go), the webhook is wrapped in the buffered backend (``--audit-webhook-mode``,
    ``--audit-webhook-batch-*``) and the truncating one (``--audit-webhook-truncate-*``).
    """
    sink = new_webhook_sink(config, reactor, metrics)
    if sink is None:
        return None
    from apiserver.audit.compose import wrap  # the batching/truncating wrappers

    return wrap(sink, backend_options(config, "webhook"), reactor, metrics)


def new_webhook_sink(
    config: ServerConfig, reactor: Any, metrics: AuditMetrics
) -> WebhookSink | None:
    """The unwrapped :class:`WebhookSink` of ``--audit-webhook-*``; None without a config file.

    The kubeconfig is read and checked here (``pluginwebhook.NewBackend``), so a missing or
    invalid file stops start-up with an error naming the flag and the file; nothing is sent
    and no connection is made until events arrive. ``--audit-webhook-version`` accepts only
    ``audit.k8s.io/v1`` (``validateGroupVersionString``).
    """
    values = config.values
    path = str(values["audit-webhook-config-file"] or "")
    if not path:
        return None
    version = str(values["audit-webhook-version"])
    if version not in KNOWN_VERSIONS:
        allowed = "[" + " ".join(go_quote(v) for v in KNOWN_VERSIONS) + "]"
        raise ValueError(
            f"--audit-webhook-version: invalid group version {go_quote(version)}, "
            f"allowed versions are {allowed}"
        )
    try:
        target = load_kubeconfig(path)
    except KubeconfigError as error:
        raise ValueError(
            f"--audit-webhook-config-file: initializing audit webhook: {error}"
        ) from None
    # The pool is kept so shutdown can close its idle connections.
    pool = connection_pool(reactor)
    return WebhookSink(
        target.http_client(reactor, pool=pool),
        float(values["audit-webhook-initial-backoff"]),
        reactor,
        metrics,
        url=target.server,
        headers=target.request_headers(),
        api_version=version,
        close=pool.closeCachedConnections,
    )
