"""Only ``apiserver.tap`` may import the global reactor: every other module takes the
reactor (or a clock) as a parameter, so tests can run it on a fake one."""

from __future__ import annotations

import re
from pathlib import Path

import apiserver

#: ``from twisted.internet import reactor`` (alone, aliased or in a list, parenthesised or
#: not), ``from twisted.internet.reactor import ...`` and ``import twisted.internet.reactor``.
GLOBAL_REACTOR = re.compile(
    r"from\s+twisted\.internet\s+import\s+(?:\([^)]*|[^(\n]*)\breactor\b"
    r"|from\s+twisted\.internet\.reactor\b"
    r"|import\s+twisted\.internet\.reactor\b"
)

ALLOWED = {"tap.py"}


def importers(root: Path) -> list[str]:
    """Modules under ``root`` (relative paths) that import the global reactor."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative not in ALLOWED and GLOBAL_REACTOR.search(path.read_text()):
            found.append(relative)
    return found


def test_the_pattern_finds_every_form() -> None:
    for line in (
        "from twisted.internet import reactor\n",
        "    from twisted.internet import reactor as global_reactor\n",
        "from twisted.internet import defer, reactor\n",
        "from twisted.internet import (\n    defer,\n    reactor,\n)\n",
        "from twisted.internet.reactor import callLater\n",
        "import twisted.internet.reactor\n",
    ):
        assert GLOBAL_REACTOR.search(line), line
    for line in (
        "from twisted.internet import defer, task\n",
        "from twisted.internet.interfaces import IReactorTime\n",
        "from twisted.internet import defer\nreactor = None\n",
    ):
        assert not GLOBAL_REACTOR.search(line), line


def test_only_tap_imports_the_global_reactor(tmp_path: Path) -> None:
    root = Path(apiserver.__file__).parent
    assert GLOBAL_REACTOR.search((root / "tap.py").read_text())  # the one that may
    assert importers(root) == []
    # And a module that falls back to the global reactor is found.
    (tmp_path / "tap.py").write_text("from twisted.internet import reactor\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "store.py").write_text(
        "def f(reactor=None):\n    if reactor is None:\n"
        "        from twisted.internet import reactor\n"
    )
    assert importers(tmp_path) == ["sub/store.py"]
