"""The code obeys the ruff, mypy and import-linter configuration in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
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


def test_every_package_is_in_the_layers() -> None:
    # The one layers contract names every top-level package, so a new one must be placed.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    importlinter = config["tool"]["importlinter"]
    [contract] = importlinter["contracts"]
    assert contract["type"] == "layers"
    layered = {p.strip() for layer in contract["layers"] for p in layer.split("|")}
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()} - {"tests", "bench", "infra"}
    assert set(importlinter["root_packages"]) == packages == layered
    # forbidden indirectly too, and nothing ignored
    assert not contract.get("allow_indirect_imports", False)
    assert not contract.get("ignore_imports")
