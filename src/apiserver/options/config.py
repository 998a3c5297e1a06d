"""The parsed command line: a frozen ``ServerConfig`` with one attribute per flag.

Attributes are the flag names with dashes turned into underscores (``config.secure_port``,
``config.store_servers``, ``config.shutdown_delay_duration`` in float seconds), each a typed
property generated from the flag table into ``config_fields`` (``python -m
apiserver.options.fieldgen``), so mypy checks every user and a misspelt name fails at once, as
a field of kube-apiserver's Go options structs would. ``values`` has every flag by its
canonical name, and ``is_set`` tells whether a flag was given on the command line, which some
rules need (kube-apiserver's ``Changed``).
"""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from apiserver.options.config_fields import ConfigFields
from apiserver.options.flagtypes import IPNetwork
from apiserver.options.table import BY_NAME, FLAGS, canonical_name
from apiserver.options.validate import parse_workers
from apiserver.version import DEFAULT_GIT_VERSION

__all__ = ["IPNetwork", "OptionsError", "ServerConfig", "ineffective_flags"]


class OptionsError(Exception):
    """The command line is not acceptable. ``errors`` has every problem found, one per entry."""

    def __init__(self, errors: Sequence[str]) -> None:
        self.errors: list[str] = list(errors)
        super().__init__("\n".join(self.errors))

    def __str__(self) -> str:
        return "\n".join(self.errors)


class ServerConfig(ConfigFields):
    """Every flag's value (defaults filled in), which ones were given, and warnings to log.

    The typed attribute of each flag comes from ``ConfigFields`` (generated from the table); there
    is no ``__getattr__``, so a misspelt name is a mypy error and an ``AttributeError``.
    """

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

    # -- the one flag whose attribute is not its raw value --------------------------------------

    @property
    def version(self) -> str:
        """The version the server reports: ``--version=vX.Y.Z`` if given, else ours.

        The raw flag value (``false``, ``true``, ``raw`` or ``vX.Y.Z``) is ``values["version"]``.
        """
        raw: str = self._values["version"]
        return raw if raw.startswith("v") else DEFAULT_GIT_VERSION

    @property
    def worker_count(self) -> int:
        """``--workers`` as a number of processes (``auto``: one per core; validated at parse
        time, so a value that slipped past validation counts as 1)."""
        return parse_workers(self._values["workers"]) or 1


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
