"""No Go-compatibility helper is defined twice: apiserver.gocompat is their one home.

The tree had two ``go_quote``, four ``strconv.ParseBool`` copies, two ``go_json_kind``, two
``go_marshal`` and RFC 3339 formatters in several modules, and the copies had drifted apart
(see tests/unit/test_gocompat.py). This reads every module of ``src/apiserver`` and fails when
one of these helpers, or any module-level ``go_*`` / ``parse_go_*`` / ``format_go_*``
function, is defined in more than one place, or outside ``apiserver.gocompat`` for the
helpers that live there; and when the tell-tale tables of a copy (Go's ``ParseBool``
spellings, ``encoding/json``'s HTML escapes) appear anywhere else.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "apiserver"
GOCOMPAT = SRC / "gocompat"

#: The helpers of apiserver.gocompat: defined there and nowhere else.
HELPERS = (
    "go_quote",
    "go_quote_char",
    "time_quote",
    "go_parse_bool",
    "parse_bool",
    "parse_bool_error",
    "parse_go_duration",
    "parse_go_duration_ns",
    "format_go_duration",
    "format_go_duration_ns",
    "go_json_kind",
    "go_json_string",
    "go_float",
    "go_marshal",
    "go_marshal_indent",
    "go_marshal_plain",
    "Pairs",
    "GoNumber",
    "GoObject",
    "to_plain",
    "format_rfc3339",
    "format_rfc3339_micro",
    "format_time_string",
    "format_unix_time_string",
    "GoValueError",
    "parse_int",
    "go_parse_int64",
    "go_json_syntax_error",
)
#: Names the copies had: gone, and not to come back.
REMOVED = (
    "parse_go_bool",
    "_go_parse_bool",
    "_go_escape",
    "_go_time",
    "go_time",
    "_go_time_quote",
    "parse_go_int",
    "go_parse_int",
    "_go_parse_int64",
)
#: Other Go-compatibility helpers with one home outside gocompat.
ELSEWHERE = {
    "parse_accept": SRC / "apimachinery" / "negotiation.py",
    "negotiate_media_type": SRC / "apimachinery" / "negotiation.py",
    "wants_pretty": SRC / "apimachinery" / "negotiation.py",
}
GO_NAMED = re.compile(r"^_?(go|parse_go|format_go)_\w+$")
#: Text that only a copy of a gocompat helper would contain.
TELLTALES = {
    '"TRUE"': GOCOMPAT / "boolparse.py",
    "u003c": GOCOMPAT / "marshal.py",
}


def _definitions(root: Path = SRC) -> dict[str, list[Path]]:
    """Module-level functions, classes and assigned names of every module, by name."""
    found: dict[str, list[Path]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            names: list[str] = []
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names = [node.name]
            elif isinstance(node, ast.Assign):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names = [node.target.id]
            for name in names:
                found[name].append(path)
    return found


def test_each_gocompat_helper_is_defined_once_in_gocompat() -> None:
    found = _definitions()
    for name in HELPERS:
        places = found.get(name, [])
        assert len(places) == 1, f"{name} defined in {places}"
        assert places[0].parent == GOCOMPAT, f"{name} defined in {places[0]}, not gocompat"
    for name in REMOVED:
        assert name not in found, f"{name} is back in {found[name]}"


def test_negotiation_helpers_have_one_home() -> None:
    found = _definitions()
    for name, home in ELSEWHERE.items():
        assert found.get(name) == [home], f"{name} defined in {found.get(name)}"


def test_no_go_named_function_is_defined_twice() -> None:
    found = _definitions()
    twice = {
        name: places
        for name, places in found.items()
        if GO_NAMED.match(name)
        and len(places) > 1
        # Two different Go type printers, each private to its decoder: not one helper.
        and name != "_go_type"
    }
    assert twice == {}


def test_no_copy_of_a_table_outside_its_module() -> None:
    for text, home in TELLTALES.items():
        holders = [path for path in sorted(SRC.rglob("*.py")) if text in path.read_text()]
        assert holders == [home], f"{text} found in {holders}"


def test_the_check_finds_a_copy(tmp_path: Path) -> None:
    """A copy written the way the old ones were is seen, as a definition in two places."""
    (tmp_path / "one.py").write_text("def go_quote(text: str) -> str:\n    return text\n")
    (tmp_path / "two.py").write_text("go_quote = repr\n_GO_TRUE = {'TRUE'}\n")
    found = _definitions(tmp_path)
    assert found["go_quote"] == [tmp_path / "one.py", tmp_path / "two.py"]
    assert GO_NAMED.match("go_quote") and GO_NAMED.match("_go_parse_bool")
