"""The code obeys the ruff, mypy and import-linter configuration in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check() -> None:
    res = _run(sys.executable, "-m", "ruff", "check", ".")
    assert res.returncode == 0, res.stdout + res.stderr


def test_ruff_format() -> None:
    res = _run(sys.executable, "-m", "ruff", "format", "--check", ".")
    assert res.returncode == 0, res.stdout + res.stderr


def test_mypy_strict() -> None:
    res = _run(sys.executable, "-m", "mypy")
    assert res.returncode == 0, res.stdout + res.stderr


def test_import_layers() -> None:
    # The lint-imports console script, run from this interpreter (it has no ``-m`` entry).
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    res = _run(sys.executable, "-c", code, "--no-cache")
    assert res.returncode == 0, res.stdout + res.stderr
