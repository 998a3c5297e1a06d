"""Bounded YAML loading (apiserver.gocompat.yamlguard), after go-yaml's decode.go."""

from __future__ import annotations

import threading
from collections.abc import Callable

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


def in_thread(function: Callable[[], object]) -> object:
    """Run ``function`` on a thread with the default stack, as the daemon's threads run, and
    give back its result or raise its exception."""
    results: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(function())
        except BaseException as error:  # handed back to the test below
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


def flow(depth: int) -> str:
    return '{"a":' * depth + '"x"' + "}" * depth


def block(depth: int) -> str:
    return "".join(" " * i + "a:\n" for i in range(depth - 1)) + " " * (depth - 1) + "a: x\n"


def sequences(depth: int) -> str:
    return "- " * depth + "x\n"


def test_libyaml_limit_is_raised_to_go_yamls() -> None:
    assert yamlguard.LIBYAML_MAX_NEST_LEVEL == yamlguard.MAX_DEPTH + 1


@pytest.mark.parametrize("depth", [999, 1025, 5000, 10000])
@pytest.mark.parametrize("shape", [flow, block, sequences])
def test_nesting_up_to_go_yamls_limit_loads(shape: Callable[[int], str], depth: int) -> None:
    document = shape(depth)
    value = in_thread(lambda: yamlguard.load(document))
    levels = 0
    while isinstance(value, dict | list):
        value = value["a"] if isinstance(value, dict) else value[0]
        levels += 1
    assert (levels, value) == (depth, "x")
    if depth == 1025:
        assert in_thread(lambda: yamlguard.compose(document)) is not None
        documents = in_thread(lambda: list(yamlguard.load_all(document)))
        assert isinstance(documents, list) and len(documents) == 1


@pytest.mark.parametrize(
    ("document", "message"),
    [
        # go-yaml scannerc.go: past max_flow_level / max_indents; parser.fail names the
        # line only past the first.
        (flow(10001), "exceeded max depth of 10000"),
        ("[" * 30000 + "]" * 30000, "exceeded max depth of 10000"),
        (sequences(10001), "exceeded max depth of 10000"),
        (block(10001), "line 10001: exceeded max depth of 10000"),
        ("x:\n  " + "[\n" * 10001 + "]" * 10001, "line 10002: exceeded max depth of 10000"),
    ],
)
def test_nesting_past_go_yamls_limit_is_its_error(document: str, message: str) -> None:
    for load in (yamlguard.load, yamlguard.compose, lambda d: list(yamlguard.load_all(d))):
        with pytest.raises(yamlguard.YAMLBoundError) as caught:
            in_thread(lambda load=load: load(document))  # type: ignore[misc]
        assert str(caught.value) == message
        assert not isinstance(caught.value, yamlguard.JSONDepthError)


def test_json_of_the_document_past_10000_levels_is_the_json_error() -> None:
    # One block level and 10,000 flow levels: go-yaml reads it, encoding/json does not.
    with pytest.raises(yamlguard.JSONDepthError) as caught:
        in_thread(lambda: yamlguard.load("x: " + flow(10000) + "\n"))
    assert str(caught.value) == "invalid character '{' exceeded max depth"
    with pytest.raises(yamlguard.JSONDepthError) as caught:
        in_thread(lambda: yamlguard.load("- " + "[" * 10000 + "]" * 10000 + "\n"))
    assert str(caught.value) == "invalid character '[' exceeded max depth"
    assert in_thread(lambda: yamlguard.load("x: " + flow(9999) + "\n")) is not None


def test_pure_python_loader_recursion_is_a_yaml_error() -> None:
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


def test_large_documents_keep_libyamls_flow_limit() -> None:
    # libyaml's cost is tokens times flow depth: past DEEP_FLOW_BYTES, a document with more
    # than 1,000 flow openers is refused at 1,001 levels (a documented deviation).
    filler = "1," * (yamlguard.DEEP_FLOW_BYTES // 2)
    with pytest.raises(yamlguard.YAMLBoundError, match="exceeded max depth of 10000"):
        in_thread(lambda: yamlguard.load("[" * 1001 + filler + "1" + "]" * 1001))
    assert in_thread(lambda: yamlguard.load("[" * 1000 + filler + "1" + "]" * 1000)) is not None
    # A small document is read to go-yaml's depth again afterwards.
    assert in_thread(lambda: yamlguard.load(flow(5000))) is not None
