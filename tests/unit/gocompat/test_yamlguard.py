"""Bounded YAML loading (apiserver.gocompat.yamlguard), after go-yaml's decode.go."""

from __future__ import annotations

import pytest
import yaml

from apiserver.gocompat import yamlguard


def laughs(levels: int, width: int = 9) -> str:
    """The "billion laughs" document: each level repeats the previous one ``width`` times."""
    lines = ["a0: &a0 [" + ",".join(['"lol"'] * width) + "]"]
    for level in range(1, levels):
        refs = ",".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_refused_without_expanding() -> None:
    document = laughs(10)
    assert len(document) < 1024
    with pytest.raises(yaml.YAMLError, match="document contains excessive aliasing"):
        yamlguard.load(document)


def test_apply_and_multi_document_paths_are_bounded() -> None:
    with pytest.raises(yaml.YAMLError, match="excessive aliasing"):
        list(yamlguard.load_all(laughs(10)))
    with pytest.raises(yaml.YAMLError, match="excessive aliasing"):
        yamlguard.compose(laughs(10))


def test_ordinary_aliases_still_load() -> None:
    assert yamlguard.load("a: &x [1, 2]\nb: *x\nc: *x\n") == {
        "a": [1, 2],
        "b": [1, 2],
        "c": [1, 2],
    }
    # Small expansions stay under go-yaml's thresholds (100 aliased, 1,000 decoded).
    assert yamlguard.load(laughs(2))["a1"][0] == ["lol"] * 9


def test_self_containing_anchor_is_an_error() -> None:
    with pytest.raises(yaml.YAMLError, match="value contains itself"):
        yamlguard.load("a: &x [1, *x]\n")


def test_depth_is_bounded_without_recursion_error() -> None:
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(yaml.YAMLError):
        yamlguard.load(deep)
    # A pure-Python loader recurses: its RecursionError is a YAML error here.
    with pytest.raises(yaml.YAMLError):
        yamlguard.load("[" * 900 + "]" * 900, yaml.SafeLoader)


@pytest.mark.parametrize(
    ("decoded", "ratio"),
    [(1, 0.99), (400_000, 0.99), (4_000_000, 0.10), (10_000_000, 0.10)],
)
def test_allowed_ratio_matches_go(decoded: int, ratio: float) -> None:
    assert yamlguard.allowed_alias_ratio(decoded) == pytest.approx(ratio)


def test_allowed_ratio_scales_between() -> None:
    assert yamlguard.allowed_alias_ratio(2_200_000) == pytest.approx(0.99 - 0.89 * 0.5)
