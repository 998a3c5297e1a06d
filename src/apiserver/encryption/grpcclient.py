"""The gRPC side of the KMS plugins: an insecure channel on a unix socket, calls with the
provider's timeout, Go's gRPC status texts and code names, latency metrics.

Follows k8s.io/apiserver ``envelope/grpc_service.go`` and ``kmsv2/grpc_service.go``
(``WaitForReady``, per-call timeout, authority ``localhost`` for v2) and k8s.io/kms
``pkg/util/util.go`` (``unix:///path``; ``unix:///@name`` is an abstract socket). The
channel is made at the first call, so building the server opens nothing. An asynchronous
call is a gRPC future whose result is handed to the reactor (``callFromThread``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from twisted.internet.defer import Deferred, fail

from apiserver.encryption.metrics import EncryptionMetrics
from apiserver.encryption.transformers import GrpcTransformError

#: grpc-python's StatusCode names to Go's ``codes.Code.String()``.
GO_CODE_NAMES = {
    "OK": "OK",
    "CANCELLED": "Canceled",
    "UNKNOWN": "Unknown",
    "INVALID_ARGUMENT": "InvalidArgument",
    "DEADLINE_EXCEEDED": "DeadlineExceeded",
    "NOT_FOUND": "NotFound",
    "ALREADY_EXISTS": "AlreadyExists",
    "PERMISSION_DENIED": "PermissionDenied",
    "RESOURCE_EXHAUSTED": "ResourceExhausted",
    "FAILED_PRECONDITION": "FailedPrecondition",
    "ABORTED": "Aborted",
    "OUT_OF_RANGE": "OutOfRange",
    "UNIMPLEMENTED": "Unimplemented",
    "INTERNAL": "Internal",
    "UNAVAILABLE": "Unavailable",
    "DATA_LOSS": "DataLoss",
    "UNAUTHENTICATED": "Unauthenticated",
}


def grpc_target(endpoint: str) -> str:
    """``util.ParseEndpoint``: ``unix:///path`` is the socket ``/path``; ``unix:///@name`` an
    abstract socket."""
    path = urlsplit(endpoint).path
    if path.startswith("/@"):
        return "unix-abstract:" + path[2:]
    return "unix:" + path


class GrpcClient:
    """One plugin connection; ``stub_class`` is the generated client stub."""

    def __init__(
        self,
        endpoint: str,
        name: str,
        timeout: float,
        reactor: Any,
        metrics: EncryptionMetrics,
        stub_class: Callable[[Any], Any],
        service: str,
        authority: str | None = None,
    ) -> None:
        self.endpoint = endpoint
        self.name = name
        self.timeout = timeout
        self.reactor = reactor
        self.metrics = metrics
        self.stub_class = stub_class
        self.service = service
        self.authority = authority
        self._channel: Any = None
        self._stub: Any = None

    def stub(self) -> Any:
        if self._stub is None:
            import grpc

            options = [("grpc.default_authority", self.authority)] if self.authority else []
            self._channel = grpc.insecure_channel(grpc_target(self.endpoint), options=options)
            self._stub = self.stub_class(self._channel)
        return self._stub

    def error(self, error: Exception, method: str, started: float) -> GrpcTransformError:
        """Go's ``rpc error: code = <Code> desc = <details>`` for a gRPC failure."""
        code_of = getattr(error, "code", None)
        code, message = "Unknown", str(error)
        if callable(code_of):
            code = GO_CODE_NAMES.get(code_of().name, "Unknown")
            details = error.details() if hasattr(error, "details") else ""
            message = f"rpc error: code = {code} desc = {details}"
        self.metrics.kms_operation(self.name, method, code, time.perf_counter() - started)
        return GrpcTransformError(message, code)

    def call(self, method: str, request: Any) -> Deferred[Any]:
        """An asynchronous call, its answer fired on the reactor."""
        started = time.perf_counter()
        full = f"/{self.service}/{method}"
        d: Deferred[Any] = Deferred()
        try:
            future = getattr(self.stub(), method).future(
                request, timeout=self.timeout, wait_for_ready=True
            )
        except Exception as error:
            return fail(self.error(error, full, started))

        def done(finished: Any) -> None:
            try:
                response = finished.result()
            except Exception as error:
                self.reactor.callFromThread(d.errback, self.error(error, full, started))
                return
            self.metrics.kms_operation(self.name, full, "OK", time.perf_counter() - started)
            self.reactor.callFromThread(d.callback, response)

        future.add_done_callback(done)
        return d

    def close(self) -> None:
        if self._channel is not None:
            self._channel.close()
        self._channel = self._stub = None


__all__ = ["GO_CODE_NAMES", "GrpcClient", "grpc_target"]
