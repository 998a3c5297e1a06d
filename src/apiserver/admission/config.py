"""``--admission-control-config-file`` and building the admission chain from the flags.

The file is an ``AdmissionConfiguration`` (``apiserver.config.k8s.io/v1``, also ``v1alpha1``),
read as k8s.io/apiserver/pkg/admission/config.go ``ReadAdmissionConfiguration`` reads it: YAML
or JSON, decoded strictly (an unknown or duplicated field is an error); each ``plugins[]`` entry
names a plugin and gives its configuration inline (``configuration``) or in another file
(``path``), a relative path being resolved against the directory of the admission file. A
plugin's configuration is looked up by name (``configProvider.ConfigFor``); a plugin with no
entry gets none.

A file that cannot be read or decoded, or a plugin whose configuration is wrong, stops start-up:
:func:`build_admission` raises :class:`AdmissionConfigError`, whose text names the file and
kube-apiserver's error (``failed to read plugin config: ...``, ``couldn't init admission
plugin "EventRateLimit": ...``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import yaml
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime

from apiserver.admission.interface import Admission, Attributes, Operation
from apiserver.admission.plugins import ACTING, NOT_APPLICABLE, enabled_plugin_names
from apiserver.admission.plugins.always import AlwaysAdmitPlugin, AlwaysDenyPlugin
from apiserver.admission.plugins.eventratelimit import ConfigError, EventRateLimit
from apiserver.apimachinery.strict import load_yaml_noting_duplicates

GROUP = "apiserver.config.k8s.io"
API_VERSIONS = (f"{GROUP}/v1", f"{GROUP}/v1alpha1")
KIND = "AdmissionConfiguration"
_TOP_FIELDS = frozenset({"apiVersion", "kind", "plugins"})
_PLUGIN_FIELDS = frozenset({"name", "path", "configuration"})


class AdmissionConfigError(ValueError):
    """The admission configuration stops start-up; the text names the file."""


@attrs.frozen
class PluginConfig:
    """One ``plugins[]`` entry: the configuration inline, or the absolute path to it."""

    name: str
    path: str = ""
    configuration: Mapping[str, Any] | None = None


def parse_document(data: bytes) -> tuple[Any, list[str]]:
    """YAML or JSON (``sigs.k8s.io/yaml``), with the keys given twice."""
    text = data.decode("utf-8")
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text), []
        except json.JSONDecodeError:
            pass  # a YAML flow mapping
    return load_yaml_noting_duplicates(text)


def _short(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= 70 else text[:67] + "..."


def read_admission_configuration(path: str) -> list[PluginConfig]:
    """The ``plugins`` of the AdmissionConfiguration at ``path`` (``""``: none).

    Raises ``ValueError`` with kube-apiserver's text (without the file name, which the caller
    adds).
    """
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise ValueError(
            f'unable to read admission control configuration from "{path}" '
            f"[open {path}: {error.strerror.lower() if error.strerror else error}]"
        ) from None
    try:
        doc, duplicates = parse_document(data)
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as error:
        raise ValueError(f"error converting YAML to JSON: {error}") from None
    if not isinstance(doc, dict) or not doc.get("kind"):
        raise ValueError(f"Object 'Kind' is missing in '{_short(data)}'")
    kind, version = doc.get("kind"), doc.get("apiVersion")
    if kind != KIND or version not in API_VERSIONS:
        raise ValueError(
            f'no kind "{kind}" is registered for version "{version or ""}" in scheme '
            '"k8s.io/apiserver/pkg/server/options/admission.go:50"'
        )
    problems = [f'duplicate field "{key}"' for key in duplicates]
    problems += [f'unknown field "{key}"' for key in doc if key not in _TOP_FIELDS]
    raw_plugins = doc.get("plugins") or []
    if not isinstance(raw_plugins, list):
        raise ValueError(
            "json: cannot unmarshal object into Go struct field AdmissionConfiguration.plugins "
            "of type []v1.AdmissionPluginConfiguration"
        )
    base = os.path.dirname(path)
    plugins: list[PluginConfig] = []
    for index, entry in enumerate(raw_plugins):
        if not isinstance(entry, dict):
            raise ValueError(
                "json: cannot unmarshal value into Go struct field "
                "AdmissionConfiguration.plugins of type v1.AdmissionPluginConfiguration"
            )
        problems += [
            f'unknown field "plugins[{index}].{key}"' for key in entry if key not in _PLUGIN_FIELDS
        ]
        name, plugin_path = entry.get("name", ""), entry.get("path", "")
        configuration = entry.get("configuration")
        if not isinstance(name, str) or not isinstance(plugin_path, str):
            raise ValueError(
                "json: cannot unmarshal value into Go struct field "
                "AdmissionPluginConfiguration.plugins.name of type string"
            )
        if configuration is not None and not isinstance(configuration, dict):
            raise ValueError(
                f"plugins[{index}].configuration: an object is required, got "
                f"{type(configuration).__name__}"
            )
        if plugin_path and not os.path.isabs(plugin_path):
            # makeAbs: against the admission file's directory (or the working directory).
            plugin_path = os.path.join(base or os.getcwd(), plugin_path)
        plugins.append(PluginConfig(name, plugin_path, configuration))
    if problems:
        raise ValueError("strict decoding error: " + ", ".join(problems))
    return plugins


def plugin_configuration(plugins: Sequence[PluginConfig], name: str) -> Mapping[str, Any] | None:
    """``ConfigFor``: the first entry for ``name``, inline or read from its path; else None."""
    for entry in plugins:
        if entry.name != name:
            continue
        if entry.configuration is not None:
            return entry.configuration
        if entry.path:
            try:
                with open(entry.path, "rb") as handle:
                    data = handle.read()
            except OSError as error:
                raise ValueError(
                    f"Couldn't open admission plugin configuration {entry.path}: "
                    f"{error.strerror or error}"
                ) from None
            try:
                doc, _ = parse_document(data)
            except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as error:
                raise ValueError(
                    f"couldn't init admission plugin {json.dumps(name)}: "
                    f"error converting YAML to JSON: {error}"
                ) from None
            if not isinstance(doc, dict):
                raise ValueError(
                    f"couldn't init admission plugin {json.dumps(name)}: "
                    f"Object 'Kind' is missing in '{_short(data)}'"
                )
            return doc
        return None
    return None


class AdmissionChain:
    """``chainAdmissionHandler`` (k8s.io/apiserver/pkg/admission/chain.go): every plugin's
    ``admit`` in order, then every plugin's ``validate`` in order; the first refusal wins."""

    def __init__(self, plugins: Sequence[tuple[str, Admission]]) -> None:
        self.plugins = tuple(plugins)
        self._admission = tuple(plugin for _, plugin in plugins)

    def handles(self, operation: Operation) -> bool:
        return any(plugin.handles(operation) for plugin in self._admission)

    def admit(self, attributes: Attributes) -> Deferred[None] | None:
        return self._run(attributes, 0, mutating=True)

    def validate(self, attributes: Attributes) -> Deferred[None] | None:
        return self._run(attributes, 0, mutating=False)

    def _run(self, attributes: Attributes, start: int, *, mutating: bool) -> Deferred[None] | None:
        plugins = self._admission
        operation = attributes.operation
        for index in range(start, len(plugins)):
            plugin = plugins[index]
            if not plugin.handles(operation):
                continue
            waiting = plugin.admit(attributes) if mutating else plugin.validate(attributes)
            if waiting is not None:
                return waiting.addCallback(self._resume, attributes, index + 1, mutating)
        return None

    def _resume(
        self, _: None, attributes: Attributes, start: int, mutating: bool
    ) -> Deferred[None] | None:
        return self._run(attributes, start, mutating=mutating)


@attrs.frozen
class AdmissionSetup:
    """What :func:`build_admission` made: the chain (None when no plugin acts) and the
    start-up notes to log."""

    admission: Admission | None
    enabled: tuple[str, ...]
    notes: tuple[str, ...]


def build_admission(
    clock: IReactorTime,
    *,
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
    legacy: Sequence[str] = (),
    config_file: str = "",
) -> AdmissionSetup:
    """The admission chain the flags ask for (see the module doc); raises
    :class:`AdmissionConfigError` naming ``config_file`` when it cannot be built."""
    names = enabled_plugin_names(list(enable), list(disable), list(legacy))
    where = f'admission configuration file "{config_file}"' if config_file else "admission"
    try:
        plugin_configs = read_admission_configuration(config_file)
    except ValueError as error:
        raise AdmissionConfigError(f"{where}: failed to read plugin config: {error}") from None
    acting: list[tuple[str, Admission]] = []
    idle: list[str] = []
    for name in names:
        if name not in ACTING:
            idle.append(name)
            continue
        try:
            doc = plugin_configuration(plugin_configs, name)
        except ValueError as error:
            raise AdmissionConfigError(f"{where}: {error}") from None
        plugin: Admission
        if name == "EventRateLimit":
            try:
                plugin = EventRateLimit.from_config(doc, clock)
            except ConfigError as error:
                raise AdmissionConfigError(
                    f"{where}: couldn't init admission plugin {json.dumps(name)}: {error}"
                ) from None
        elif name == "AlwaysDeny":
            plugin = AlwaysDenyPlugin()
        else:
            plugin = AlwaysAdmitPlugin()
        acting.append((name, plugin))
    notes: list[str] = []
    if acting:
        order = ",".join(name for name, _ in acting)
        mutating = [name for name, _ in acting if name != "EventRateLimit"]
        if mutating:
            notes.append(
                f"Loaded {len(mutating)} mutating admission controller(s) successfully in the "
                f"following order: {','.join(mutating)}."
            )
        notes.append(
            f"Loaded {len(acting)} validating admission controller(s) successfully in the "
            f"following order: {order}."
        )
    for name in idle:
        notes.append(
            f"admission plugin {name} is enabled but has nothing to check on this server: it "
            f"concerns {NOT_APPLICABLE.get(name, 'resources this server does not serve')}"
        )
    return AdmissionSetup(AdmissionChain(acting) if acting else None, tuple(names), tuple(notes))
