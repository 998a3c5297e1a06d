"""The files named by flags that no other part of the server reads, opened at start-up.

kube-apiserver reads every file its flags name while it builds its configuration, and a
missing or malformed one stops it. The files this server acts on are read where they are
used (authentication, authorization, audit, admission, encryption, serving certificates,
the metrics allow-list); the rest are read here, so that a typo in any of them is found at
start-up too, with the flag and the file in the message:

- ``--tracing-config-file``: a ``TracingConfiguration`` (apiserver.config.k8s.io/v1,
  v1beta1 or v1alpha1; k8s.io/apiserver ``pkg/server/options/tracing.go``
  ``ReadTracingConfiguration`` and component-base ``tracing/api/v1``
  ``ValidateTracingConfiguration``), returned parsed for :mod:`apiserver.tracing`;
- ``--egress-selector-config-file``: an ``EgressSelectorConfiguration``
  (``pkg/server/egressselector/config.go``: names, protocols and transports checked);
- the PEM files of the kubelet client (``--nodeagent-certificate-authority``,
  ``--nodeagent-client-certificate``, ``--nodeagent-client-key``), the front proxy
  (``--proxy-client-cert-file``, ``--proxy-client-key-file``) and ``--peer-ca-file``: each
  must hold at least one certificate, or a private key.
"""

from __future__ import annotations

from typing import Any

import attrs
import yaml

CONFIG_GROUP = "apiserver.config.k8s.io"
TRACING_VERSIONS = ("v1", "v1beta1", "v1alpha1")
EGRESS_VERSIONS = ("v1", "v1beta1", "v1alpha1")
EGRESS_NAMES = ("cluster", "controlplane", "etcd")
DEFAULT_TRACING_ENDPOINT = "localhost:4317"


class ConfigFileError(ValueError):
    """One or more flag-named files cannot be used; the message names each flag and file."""


@attrs.frozen
class TracingConfig:
    """``TracingConfiguration``: where to send spans and how many traces to start."""

    endpoint: str = DEFAULT_TRACING_ENDPOINT
    sampling_rate_per_million: int = 0


@attrs.frozen
class ConfigFiles:
    """What the files gave that the server uses."""

    tracing: TracingConfig | None = None


def _read(flag: str, path: str, what: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ConfigFileError(
            f"--{flag}: unable to read {what} from {path!r}: {exc.strerror or exc}"
        ) from None


def _yaml(flag: str, path: str, data: bytes, kind: str, versions: tuple[str, ...]) -> Any:
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise ConfigFileError(f"--{flag}: unable to decode {path!r}: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigFileError(f"--{flag}: {path!r}: expected a {kind} object")
    api_version, doc_kind = doc.get("apiVersion"), doc.get("kind")
    allowed = [f"{CONFIG_GROUP}/{v}" for v in versions]
    if doc_kind != kind or api_version not in allowed:
        raise ConfigFileError(
            f"--{flag}: {path!r}: no kind {doc_kind!r} is registered for version "
            f"{api_version!r}: expected kind {kind} in one of {', '.join(allowed)}"
        )
    return doc


def read_tracing_config(path: str, flag: str = "tracing-config-file") -> TracingConfig:
    """``ReadTracingConfiguration`` then ``ValidateTracingConfiguration``."""
    data = _read(flag, path, "tracing configuration")
    doc = _yaml(flag, path, data, "TracingConfiguration", TRACING_VERSIONS)
    unknown = sorted(set(doc) - {"apiVersion", "kind", "endpoint", "samplingRatePerMillion"})
    if unknown:
        raise ConfigFileError(
            f"--{flag}: {path!r}: strict decoding error: unknown field "
            + ", ".join(f'"{name}"' for name in unknown)
        )
    endpoint = doc.get("endpoint", DEFAULT_TRACING_ENDPOINT)
    rate = doc.get("samplingRatePerMillion", 0)
    errors = []
    if not isinstance(endpoint, str):
        errors.append(f"endpoint: Invalid value: {endpoint!r}: must be a string")
    if isinstance(rate, bool) or not isinstance(rate, int):
        errors.append(f"samplingRatePerMillion: Invalid value: {rate!r}: must be an integer")
    elif rate < 0:
        errors.append(
            f"samplingRatePerMillion: Invalid value: {rate}: sampling rate must be positive"
        )
    elif rate > 1_000_000:
        errors.append(
            f"samplingRatePerMillion: Invalid value: {rate}: sampling rate per million must be "
            "less than or equal to one million"
        )
    if errors:
        raise ConfigFileError(
            f"--{flag}: failed to validate tracing configuration {path!r}: " + ", ".join(errors)
        )
    return TracingConfig(endpoint=str(endpoint), sampling_rate_per_million=int(rate))


def check_egress_selector_config(path: str, flag: str = "egress-selector-config-file") -> None:
    """``ReadEgressSelectorConfiguration`` then ``ValidateEgressSelectorConfiguration``."""
    data = _read(flag, path, "egress selector configuration")
    doc = _yaml(flag, path, data, "EgressSelectorConfiguration", EGRESS_VERSIONS)
    selections = doc.get("egressSelections") or []
    if not isinstance(selections, list):
        raise ConfigFileError(f"--{flag}: {path!r}: egressSelections must be a list")
    errors: list[str] = []
    seen: set[str] = set()
    for i, service in enumerate(selections):
        if not isinstance(service, dict):
            errors.append(f"egressSelections[{i}]: must be an object")
            continue
        name = str(service.get("name", "")).lower()
        connection = service.get("connection") or {}
        protocol = connection.get("proxyProtocol", "")
        transport = connection.get("transport")
        if protocol == "Direct":
            if transport is not None:
                errors.append(
                    'service.connection.transport: Invalid value: "direct": config must be '
                    "absent for direct connect"
                )
        elif protocol in ("HTTPConnect", "GRPC"):
            if not isinstance(transport, dict):
                errors.append(
                    f"service.connection.transport: Required value: transport must be set for "
                    f"{protocol}"
                )
            elif protocol == "GRPC" and not transport.get("uds"):
                errors.append("service.connection.uds: Required value: UDS must be set with GRPC")
            elif protocol == "HTTPConnect" and bool(transport.get("tcp")) == bool(
                transport.get("uds")
            ):
                errors.append(
                    "service.connection.tcp: Required value: One of TCP or UDS must be set"
                    if not transport.get("tcp")
                    else "service.connection.tcp: Invalid value: TCP and UDS cannot both be set"
                )
        else:
            errors.append(
                f'service.connection.protocol: Unsupported value: "{protocol}": supported '
                'values: "Direct", "HTTPConnect", "GRPC"'
            )
        if name in seen:
            errors.append(f'service.connection[{i}]: Duplicate value: "{name}"')
            continue
        seen.add(name)
        if name not in EGRESS_NAMES:
            errors.append(
                f'service.connection: Unsupported value: "{name}": supported values: '
                + ", ".join(f'"{n}"' for n in EGRESS_NAMES)
            )
    if errors:
        raise ConfigFileError(
            f"--{flag}: failed to validate egress selector configuration {path!r}: "
            + ", ".join(errors)
        )


def check_pem(flag: str, path: str, *, key: bool) -> None:
    """A certificate bundle (at least one certificate) or a private key in PEM."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    data = _read(flag, path, "the private key" if key else "certificates")
    try:
        if key:
            load_pem_private_key(data, password=None)
        elif not x509.load_pem_x509_certificates(data):
            raise ValueError("no certificate")
    except (ValueError, TypeError) as exc:
        what = "private key" if key else "certificates"
        raise ConfigFileError(f"--{flag}: {path!r}: no valid PEM {what}: {exc}") from None


#: (flag, is a key) of the PEM files read here.
PEM_FLAGS = (
    ("nodeagent-certificate-authority", False),
    ("nodeagent-client-certificate", False),
    ("nodeagent-client-key", True),
    ("proxy-client-cert-file", False),
    ("proxy-client-key-file", True),
    ("peer-ca-file", False),
)


def load_config_files(values: Any) -> ConfigFiles:
    """Open and check every file above that ``values`` (a flag name -> value mapping) names;
    all problems are reported at once, one per line."""
    errors: list[str] = []
    tracing: TracingConfig | None = None
    path = values.get("tracing-config-file") or ""
    if path:
        try:
            tracing = read_tracing_config(path)
        except ConfigFileError as exc:
            errors.append(str(exc))
    path = values.get("egress-selector-config-file") or ""
    if path:
        try:
            check_egress_selector_config(path)
        except ConfigFileError as exc:
            errors.append(str(exc))
    for flag, key in PEM_FLAGS:
        path = values.get(flag) or ""
        if path:
            try:
                check_pem(flag, path, key=key)
            except ConfigFileError as exc:
                errors.append(str(exc))
    if errors:
        raise ConfigFileError("\n".join(errors))
    return ConfigFiles(tracing=tracing)
