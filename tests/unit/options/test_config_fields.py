"""The typed ``ServerConfig`` attributes generated from the flag table (``options/fieldgen``)."""

from __future__ import annotations

import ast
import ipaddress
import subprocess
import sys
import types
import typing
from pathlib import Path

from apiserver.options import FLAGS, ServerConfig
from apiserver.options.config_fields import ConfigFields
from apiserver.options.fieldgen import ANNOTATIONS, render_config_fields
from apiserver.options.flagtypes import TypeName

REPO = Path(__file__).resolve().parents[3]
CONFIG_FIELDS = REPO / "src" / "apiserver" / "options" / "config_fields.py"


def test_committed_module_matches_the_table() -> None:
    assert CONFIG_FIELDS.read_text() == render_config_fields(), (
        "options/config_fields.py is stale: run "
        "`python -m apiserver.options.fieldgen > src/apiserver/options/config_fields.py`"
    )


def test_generator_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "apiserver.options.fieldgen"],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={"PYTHONPATH": str(REPO / "src")},
    )
    assert result.stdout == render_config_fields()


def test_every_flag_type_has_an_annotation() -> None:
    assert set(ANNOTATIONS) == set(typing.get_args(TypeName))


def test_every_flag_is_a_property_and_nothing_else() -> None:
    props = {name for name, v in vars(ConfigFields).items() if isinstance(v, property)}
    assert props == {flag.attr for flag in FLAGS}


def _conforms(value: object, hint: object) -> bool:
    """A small isinstance for the annotations ``ANNOTATIONS`` uses."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if origin is None and isinstance(hint, type):
        return isinstance(value, hint)
    if origin is types.UnionType:
        return any(_conforms(value, arg) for arg in args)
    if origin is dict:
        return isinstance(value, dict) and all(
            _conforms(k, args[0]) and _conforms(v, args[1]) for k, v in value.items()
        )
    if origin is tuple:
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(v, args[0]) for v in value)
        return len(value) == len(args) and all(map(_conforms, value, args))
    raise AssertionError(f"unexpected annotation {hint!r}")


def test_annotations_describe_the_defaults_and_parsed_values() -> None:
    config = ServerConfig.defaults()
    for flag in FLAGS:
        prop = vars(ConfigFields)[flag.attr]
        hint = typing.get_type_hints(prop.fget)["return"]
        assert _conforms(flag.default, hint), flag.name
        assert _conforms(getattr(config, flag.attr), hint), flag.name
    parsed = ServerConfig(
        {
            "service-cluster-ip-range": (ipaddress.ip_network("10.0.0.0/24"),),
            "vmodule": (("x", 2),),
            "feature-gates": {"A": True},
        }
    )
    assert parsed.service_cluster_ip_range == (ipaddress.ip_network("10.0.0.0/24"),)
    assert parsed.vmodule == (("x", 2),)
    assert parsed.feature_gates == {"A": True}


def test_the_version_attribute_stays_the_reported_version() -> None:
    assert ServerConfig({"version": "v1.2.3"}).version == "v1.2.3"
    assert ServerConfig({"version": "raw"}).values["version"] == "raw"


def _flag_names_read_by(module_path: Path) -> set[object]:
    """The flag names ``validate.py`` spells out: ``self.v["name"]``, ``"name" in
    self.explicit`` and the first arguments of its rule helpers (``self.together(a, b)``)."""
    helpers = {"not_negative": 1, "one_of": 1, "together": 2, "needs_gate": 1}
    names: set[object] = set()
    for node in ast.walk(ast.parse(module_path.read_text())):
        if isinstance(node, ast.Subscript) and ast.unparse(node.value) == "self.v":
            if isinstance(node.slice, ast.Constant):
                names.add(node.slice.value)
        elif isinstance(node, ast.Compare) and ast.unparse(node.comparators[0]) == "self.explicit":
            if isinstance(node.left, ast.Constant):
                names.add(node.left.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            count = helpers.get(node.func.attr, 0)
            for arg in node.args[:count]:
                if isinstance(arg, ast.Constant):
                    names.add(arg.value)
    return names


def test_validation_reads_only_flags_of_the_table() -> None:
    # The validator works on the value mapping by name (its messages print the names), so a
    # misspelt name there is caught here rather than by mypy.
    names = _flag_names_read_by(REPO / "src" / "apiserver" / "options" / "validate.py")
    assert len(names) > 50
    assert names - {flag.name for flag in FLAGS} == set()
