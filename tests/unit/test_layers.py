"""The layers of ``src/apiserver`` and what each may import (docs/architecture.md, "Layers").

Every import between top-level packages of ``apiserver`` must be listed in ``ALLOWED``; a new
edge fails this test, so that a lower layer does not quietly start depending on a higher one
(storage on HTTP, the API machinery on a resource, ...). Add an edge only with a reason, and
update docs/architecture.md in the same change.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "apiserver"

FOUNDATIONS = {"version", "gocompat", "protobuf"}

#: package -> the packages it may import (besides itself and the foundations).
ALLOWED: dict[str, set[str]] = {
    "version": set(),
    "gocompat": set(),
    "options": set(),
    "http": {"apimachinery"},
    "apimachinery": {"http"},
    "storage": set(),
    "protobuf": set(),
    "registry": {"storage", "apimachinery"},
    # Encryption at rest: transformers behind storage.value's contract, and the strict
    # decoding of its configuration file (apimachinery.strict).
    "encryption": {"storage", "apimachinery"},
    "tls": set(),
    # The request series are labelled from the resolved request info (auth.requestinfo),
    # as MonitorRequest reads RequestInfo; a request answered before the resolver ran is
    # parsed there too.
    "metrics": {"http", "auth"},
    "healthz": {"http", "apimachinery"},
    # /debug/pprof, /debug/flags, /logs: non-resource handlers behind the chain.
    "debug": {"http"},
    # Tracing: a chain stage (http) configured by --tracing-config-file (options.files).
    "tracing": {"http", "options"},
    "admission": {"apimachinery", "auth"},
    "audit": {"http", "apimachinery", "auth", "options", "tls"},
    # auth reads stored ServiceAccounts (and the Secrets, Pods, Nodes a token names) in any
    # stored format: the registry's storage codec (registry.storagecodec.decode_any).
    "auth": {"http", "apimachinery", "options", "storage", "tls", "discovery", "registry"},
    "discovery": {"http", "apimachinery"},
    # Priority and fairness / max-in-flight: a chain stage (http) that reads the resolved
    # request and the user (auth, for types only) and takes the UID source (apimachinery).
    "flowcontrol": {"http", "apimachinery"},
    "openapi": {"http", "apimachinery", "discovery"},
    # api/flowcontrol serves the bootstrap objects that apiserver.flowcontrol builds.
    "api": {
        "http",
        "apimachinery",
        "registry",
        "storage",
        "auth",
        "options",
        "admission",
        "flowcontrol",
    },
    # The operator console: served through the HTTP layer's request contract and App.write.
    "console": {"http"},
    # assembly: may import everything
}
ASSEMBLY = {
    "server",
    "service",
    "tap",
    "workers",  # the supervisor's once-only preparation for --workers (assembly)
    "cli",
    "devrun",
    "devcluster",
    "__main__",
    "logs",
    "gctune",
    "journald",
}


def package_of(path: Path) -> str:
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def _type_only(tree: ast.Module) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks: annotations only, no run-time
    dependency (the HTTP layer names the authenticated user's type that way)."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name):
            if node.test.id == "TYPE_CHECKING":
                for child in node.body:
                    inside.update(id(n) for n in ast.walk(child))
    return inside


def imported_packages(path: Path) -> set[str]:
    """The ``apiserver`` packages ``path`` imports at run time."""
    found: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    type_only = _type_only(tree)
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        for name in names:
            parts = name.split(".")
            if parts[0] == "apiserver" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_every_package_is_placed_in_a_layer() -> None:
    packages = {package_of(p) for p in SRC.rglob("*.py")} - {"__init__"}
    unplaced = packages - set(ALLOWED) - ASSEMBLY
    assert not unplaced, f"place these packages in ALLOWED or ASSEMBLY: {sorted(unplaced)}"


def test_imports_follow_the_layers() -> None:
    wrong: list[str] = []
    for path in sorted(SRC.rglob("*.py")):
        pkg = package_of(path)
        if pkg in ASSEMBLY or pkg == "__init__":
            continue
        allowed = ALLOWED[pkg] | FOUNDATIONS | {pkg}
        for target in sorted(imported_packages(path) - allowed):
            wrong.append(f"{path.relative_to(SRC)} imports apiserver.{target}")
    assert not wrong, "imports across layers not in ALLOWED:\n" + "\n".join(wrong)


def test_the_checker_finds_an_edge(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from typing import TYPE_CHECKING\n"
        "from apiserver.server import Server\n"
        "import apiserver.http.app\n"
        "if TYPE_CHECKING:\n"
        "    from apiserver.registry.store import Registry\n"
    )
    assert imported_packages(probe) == {"server", "http"}
