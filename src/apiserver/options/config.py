"""The parsed command line: a frozen ``ServerConfig`` with one attribute per flag.

Attributes are the flag names with dashes turned into underscores (``config.secure_port``,
``config.store_servers``, ``config.shutdown_delay_duration`` in float seconds). The flags the
server already acts on have typed properties below so that mypy checks their users; every other
flag is reached through ``__getattr__`` (typed ``Any``). ``values`` has every flag by its
canonical name, and ``is_set`` tells whether a flag was given on the command line, which some
rules need (kube-apiserver's ``Changed``).
"""

from __future__ import annotations

import ipaddress
import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn, cast

from apiserver.options.table import BY_NAME, FLAGS, canonical_name
from apiserver.version import DEFAULT_GIT_VERSION

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class OptionsError(Exception):
    """The command line is not acceptable. ``errors`` has every problem found, one per entry."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors: list[str] = list(errors)
        super().__init__("\n".join(self.errors))

    def __str__(self) -> str:
        return "\n".join(self.errors)


class ServerConfig:
    """Every flag's value (defaults filled in), which ones were given, and warnings to log."""

    __slots__ = ("_explicit", "_values", "_warnings")

    _values: dict[str, Any]
    _explicit: frozenset[str]
    _warnings: tuple[str, ...]

    def __init__(
        self,
        values: Mapping[str, Any] | None = None,
        explicit: Iterable[str] = (),
        warnings: Iterable[str] = (),
    ) -> None:
        merged = {flag.name: flag.default for flag in FLAGS}
        for name, value in (values or {}).items():
            merged[canonical_name(name)] = value
        object.__setattr__(self, "_values", merged)
        object.__setattr__(self, "_explicit", frozenset(canonical_name(n) for n in explicit))
        object.__setattr__(self, "_warnings", tuple(warnings))

    @classmethod
    def defaults(cls) -> ServerConfig:
        """Every flag at its default, nothing set explicitly."""
        return cls()

    def evolve(self, **changes: Any) -> ServerConfig:
        """A copy with some values replaced (by attribute name) and marked as set. No validation."""
        values = dict(self._values)
        explicit = set(self._explicit)
        for attr, value in changes.items():
            name = canonical_name(attr)
            values[name] = value
            explicit.add(name)
        return ServerConfig(values, explicit, self._warnings)

    # -- generic access ------------------------------------------------------------------------

    @property
    def values(self) -> Mapping[str, Any]:
        """Every flag's value by canonical name (``"secure-port"``)."""
        return types.MappingProxyType(self._values)

    @property
    def explicit(self) -> frozenset[str]:
        """Canonical names of the flags given on the command line."""
        return self._explicit

    @property
    def warnings(self) -> tuple[str, ...]:
        """Things to log at start-up: deprecated flags used, insecure cipher suites, ..."""
        return self._warnings

    def is_set(self, name: str) -> bool:
        """Whether the flag was given on the command line (``"secure-port"``; aliases work)."""
        return canonical_name(name) in self._explicit

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        name = attr.replace("_", "-")
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"ServerConfig has no flag {attr!r}") from None

    def __setattr__(self, attr: str, value: object) -> NoReturn:
        raise AttributeError("ServerConfig is frozen")

    def __delattr__(self, attr: str) -> NoReturn:
        raise AttributeError("ServerConfig is frozen")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerConfig):
            return NotImplemented
        return self._values == other._values and self._explicit == other._explicit

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle rebuild through __init__ (attribute setting is refused).
        return (ServerConfig, (self._values, self._explicit, self._warnings))

    def __repr__(self) -> str:
        given = ", ".join(f"{n}={self._values[n]!r}" for n in sorted(self._explicit))
        return f"ServerConfig({given})"

    # -- typed attributes of the flags the server acts on ---------------------------------------

    @property
    def version(self) -> str:
        """The version the server reports: ``--version=vX.Y.Z`` if given, else ours.

        The raw flag value (``false``, ``true``, ``raw`` or ``vX.Y.Z``) is ``values["version"]``.
        """
        raw = cast(str, self._values["version"])
        return raw if raw.startswith("v") else DEFAULT_GIT_VERSION

    @property
    def help(self) -> bool:
        return cast(bool, self._values["help"])

    @property
    def secure_port(self) -> int:
        return cast(int, self._values["secure-port"])

    @property
    def bind_address(self) -> str:
        return cast(str, self._values["bind-address"])

    @property
    def advertise_address(self) -> str:
        return cast(str, self._values["advertise-address"])

    @property
    def cert_dir(self) -> str:
        return cast(str, self._values["cert-dir"])

    @property
    def tls_cert_file(self) -> str:
        return cast(str, self._values["tls-cert-file"])

    @property
    def tls_private_key_file(self) -> str:
        return cast(str, self._values["tls-private-key-file"])

    @property
    def tls_sni_cert_key(self) -> tuple[str, ...]:
        """Raw ``cert,key[:names]`` values; see ``flagtypes``' ``parse_named_cert_key``."""
        return cast(tuple[str, ...], self._values["tls-sni-cert-key"])

    @property
    def tls_min_version(self) -> str:
        return cast(str, self._values["tls-min-version"])

    @property
    def tls_cipher_suites(self) -> tuple[str, ...]:
        return cast(tuple[str, ...], self._values["tls-cipher-suites"])

    @property
    def disable_http2_serving(self) -> bool:
        return cast(bool, self._values["disable-http2-serving"])

    @property
    def http2_max_streams_per_connection(self) -> int:
        return cast(int, self._values["http2-max-streams-per-connection"])

    @property
    def strict_transport_security_directives(self) -> tuple[str, ...]:
        return cast(tuple[str, ...], self._values["strict-transport-security-directives"])

    @property
    def cors_allowed_origins(self) -> tuple[str, ...]:
        return cast(tuple[str, ...], self._values["cors-allowed-origins"])

    @property
    def permit_address_sharing(self) -> bool:
        return cast(bool, self._values["permit-address-sharing"])

    @property
    def permit_port_sharing(self) -> bool:
        return cast(bool, self._values["permit-port-sharing"])

    @property
    def livez_grace_period(self) -> float:
        return cast(float, self._values["livez-grace-period"])

    @property
    def shutdown_delay_duration(self) -> float:
        return cast(float, self._values["shutdown-delay-duration"])

    @property
    def shutdown_send_retry_after(self) -> bool:
        return cast(bool, self._values["shutdown-send-retry-after"])

    @property
    def shutdown_watch_termination_grace_period(self) -> float:
        return cast(float, self._values["shutdown-watch-termination-grace-period"])

    @property
    def store_healthcheck_timeout(self) -> float:
        return cast(float, self._values["store-healthcheck-timeout"])

    @property
    def store_readycheck_timeout(self) -> float:
        return cast(float, self._values["store-readycheck-timeout"])

    @property
    def storage_initialization_timeout(self) -> float:
        return cast(float, self._values["storage-initialization-timeout"])

    @property
    def request_timeout(self) -> float:
        return cast(float, self._values["request-timeout"])

    @property
    def v(self) -> int:
        return cast(int, self._values["v"])

    @property
    def log_flush_frequency(self) -> float:
        return cast(float, self._values["log-flush-frequency"])

    @property
    def logging_format(self) -> str:
        return cast(str, self._values["logging-format"])

    @property
    def data_dir(self) -> str:
        return cast(str, self._values["data-dir"])

    @property
    def store_servers(self) -> tuple[str, ...]:
        return cast(tuple[str, ...], self._values["store-servers"])

    @property
    def store_prefix(self) -> str:
        return cast(str, self._values["store-prefix"])

    @property
    def storage_backend(self) -> str:
        return cast(str, self._values["storage-backend"])

    @property
    def event_ttl(self) -> float:
        return cast(float, self._values["event-ttl"])

    @property
    def profiling(self) -> bool:
        return cast(bool, self._values["profiling"])

    @property
    def service_cluster_ip_range(self) -> tuple[IPNetwork, ...]:
        return cast(tuple[IPNetwork, ...], self._values["service-cluster-ip-range"])

    @property
    def service_node_port_range(self) -> tuple[int, int]:
        return cast(tuple[int, int], self._values["service-node-port-range"])

    @property
    def feature_gates(self) -> dict[str, bool]:
        return cast(dict[str, bool], self._values["feature-gates"])


def ineffective_flags(config: ServerConfig) -> list[str]:
    """Canonical names (no dashes) of flags given with a non-default value that the server
    does not act on yet, in table order. The server logs ``flag --<name> has no effect yet``
    for each at start-up.
    """
    return [
        flag.name
        for flag in FLAGS
        if not flag.implemented
        and config.is_set(flag.name)
        and config.values[flag.name] != BY_NAME[flag.name].default
    ]
