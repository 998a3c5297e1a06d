"""The admission flags and --admission-control-config-file (apiserver.admission.config)."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.internet.task import Clock

from apiserver.admission import CREATE, DELETE, Attributes
from apiserver.admission.config import (
    AdmissionChain,
    AdmissionConfigError,
    build_admission,
    read_admission_configuration,
)
from apiserver.admission.plugins import (
    ACTING,
    ALL_ORDERED_PLUGINS,
    DEFAULT_ON,
    NOT_APPLICABLE,
    enabled_plugin_names,
)
from apiserver.admission.plugins.always import AlwaysDenyPlugin
from apiserver.admission.plugins.eventratelimit import EventRateLimit
from apiserver.apimachinery import errors
from apiserver.options.validate import ADMISSION_PLUGINS

ERL = """apiVersion: eventratelimit.admission.k8s.io/v1alpha1
kind: Configuration
limits:
- type: Namespace
  qps: 1
  burst: 2
  cacheSize: 10
"""


def test_every_plugin_name_of_the_flags_is_ordered_and_accounted_for() -> None:
    assert sorted(ALL_ORDERED_PLUGINS) == sorted(ADMISSION_PLUGINS)
    assert len(set(ALL_ORDERED_PLUGINS)) == len(ALL_ORDERED_PLUGINS)
    assert set(NOT_APPLICABLE) | ACTING == set(ALL_ORDERED_PLUGINS)
    assert DEFAULT_ON <= set(ALL_ORDERED_PLUGINS)
    # AllOrderedPlugins: AlwaysAdmit first, the webhooks, quota and AlwaysDeny last.
    assert ALL_ORDERED_PLUGINS[0] == "AlwaysAdmit"
    assert ALL_ORDERED_PLUGINS[-6:] == (
        "MutatingAdmissionPolicy",
        "MutatingAdmissionWebhook",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionWebhook",
        "ResourceQuota",
        "AlwaysDeny",
    )
    assert ALL_ORDERED_PLUGINS.index("PodTolerationRestriction") + 1 == (
        ALL_ORDERED_PLUGINS.index("EventRateLimit")
    )


def test_enabled_names_follow_the_reference_order_not_the_flag_order() -> None:
    names = enabled_plugin_names(["AlwaysDeny", "EventRateLimit", "AlwaysAdmit"], [])
    assert names[0] == "AlwaysAdmit"
    assert names[-1] == "AlwaysDeny"
    assert names.index("EventRateLimit") < names.index("ResourceQuota")
    assert set(names) == DEFAULT_ON | {"AlwaysDeny", "EventRateLimit", "AlwaysAdmit"}


def test_defaults_and_disable() -> None:
    assert set(enabled_plugin_names([], [])) == DEFAULT_ON
    names = enabled_plugin_names([], ["NamespaceLifecycle", "ResourceQuota"])
    assert "NamespaceLifecycle" not in names and "ResourceQuota" not in names
    assert "EventRateLimit" not in names


def test_legacy_admission_control_names_exactly_the_plugins() -> None:
    assert enabled_plugin_names([], [], ["EventRateLimit", "NamespaceLifecycle"]) == [
        "NamespaceLifecycle",
        "EventRateLimit",
    ]


def test_default_set_builds_no_chain_and_notes_the_inapplicable_plugins() -> None:
    setup = build_admission(Clock())
    assert setup.admission is None
    notes = "\n".join(setup.notes)
    assert "admission plugin NamespaceLifecycle is enabled but has nothing to check" in notes
    assert "no Namespace resource is served" in notes


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_plugin_configuration_by_relative_path(tmp_path: Path) -> None:
    sub = tmp_path / "conf"
    sub.mkdir()
    write(sub, "erl.yaml", ERL)
    admission = write(
        sub,
        "admission.yaml",
        "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
        "plugins:\n- name: EventRateLimit\n  path: erl.yaml\n",
    )
    plugins = read_admission_configuration(admission)
    assert plugins[0].path == str(sub / "erl.yaml")
    setup = build_admission(Clock(), enable=["EventRateLimit"], config_file=admission)
    chain = setup.admission
    assert isinstance(chain, AdmissionChain)
    assert [name for name, _ in chain.plugins] == ["EventRateLimit"]
    plugin = chain.plugins[0][1]
    assert isinstance(plugin, EventRateLimit)
    cache = plugin.enforcers[0].cache
    assert cache is not None and cache.size == 10
    assert any("validating admission controller(s)" in note for note in setup.notes)


def test_plugin_configuration_inline_v1alpha1_and_json(tmp_path: Path) -> None:
    admission = write(
        tmp_path,
        "admission.json",
        '{"apiVersion": "apiserver.config.k8s.io/v1alpha1", "kind": "AdmissionConfiguration",'
        ' "plugins": [{"name": "EventRateLimit", "configuration": {"apiVersion":'
        ' "eventratelimit.admission.k8s.io/v1alpha1", "kind": "Configuration", "limits":'
        ' [{"type": "Server", "qps": 5, "burst": 10}]}}]}',
    )
    setup = build_admission(Clock(), enable=["EventRateLimit"], config_file=admission)
    assert setup.admission is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: Nothing\n", 'no kind "Nothing" is registered for version ""'),
        ("plugins: []\n", "Object 'Kind' is missing"),
        (
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugin: []\n",
            'strict decoding error: unknown field "plugin"',
        ),
        (
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
            "plugins:\n- name: EventRateLimit\n  path: missing.yaml\n",
            "Couldn't open admission plugin configuration",
        ),
        (
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\n"
            "plugins:\n- name: EventRateLimit\n  configuration:\n"
            "    apiVersion: eventratelimit.admission.k8s.io/v1alpha1\n"
            "    kind: Configuration\n    limits:\n    - type: Server\n      qps: 0\n"
            "      burst: 1\n",
            'couldn\'t init admission plugin "EventRateLimit": limits[0].qps: Invalid value: 0',
        ),
        (":\n  - [", "error converting YAML to JSON"),
    ],
)
def test_bad_files_stop_start_up_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, "admission.yaml", text)
    with pytest.raises(AdmissionConfigError) as raised:
        build_admission(Clock(), enable=["EventRateLimit"], config_file=path)
    assert f'admission configuration file "{path}"' in str(raised.value)
    assert message in str(raised.value)


def test_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.yaml")
    with pytest.raises(AdmissionConfigError) as raised:
        build_admission(Clock(), config_file=path)
    assert "failed to read plugin config: unable to read admission control configuration" in (
        str(raised.value)
    )
    assert path in str(raised.value)


def test_event_rate_limit_without_a_configuration_stops_start_up() -> None:
    with pytest.raises(AdmissionConfigError) as raised:
        build_admission(Clock(), enable=["EventRateLimit"])
    assert str(raised.value) == (
        'admission: couldn\'t init admission plugin "EventRateLimit": limits: Invalid value: '
        "null: must not be empty"
    )


def test_chain_runs_admit_then_validate_in_order_and_always_deny_refuses() -> None:
    setup = build_admission(Clock(), enable=["AlwaysDeny", "AlwaysAdmit"])
    chain = setup.admission
    assert isinstance(chain, AdmissionChain)
    assert [name for name, _ in chain.plugins] == ["AlwaysAdmit", "AlwaysDeny"]
    assert isinstance(chain.plugins[1][1], AlwaysDenyPlugin)
    attributes = Attributes(
        CREATE, "events.k8s.io", "v1", "events", "Event", "ns", "", {"metadata": {"name": "x"}}
    )
    assert chain.handles(DELETE)
    with pytest.raises(errors.StatusError) as raised:
        chain.admit(attributes)
    assert raised.value.code == 403
    assert raised.value.message == (
        'events.events.k8s.io "x" is forbidden: admission control is denying all modifications'
    )
    assert raised.value.details == {"name": "x", "group": "events.k8s.io", "kind": "events"}
