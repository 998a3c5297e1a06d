"""The standards: ruff (lint and format) and mypy are clean over the whole tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.mark.skipif(not (BIN / "ruff").exists() and not shutil.which("ruff"), reason="no ruff")
def test_ruff_clean() -> None:
    ruff = str(BIN / "ruff") if (BIN / "ruff").exists() else "ruff"
    check = run(ruff, "check", "src", "tests", "bench", "twisted")
    assert check.returncode == 0, check.stdout + check.stderr
    fmt = run(ruff, "format", "--check", "src", "tests", "bench", "twisted")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_clean() -> None:
    out = run(sys.executable, "-m", "mypy")
    assert out.returncode == 0, out.stdout + out.stderr
