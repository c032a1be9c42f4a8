"""The code obeys the ruff, mypy and import-linter configuration in pyproject.toml."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

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


# What each contract's source may import, besides itself: every other module of api and
# every other top-level package must be in its forbidden_modules.
_ALLOWED = {
    "protocol": {"api.protocol", "hot", "core"},
    "client": {"api.client", "api.protocol", "hot", "core"},
    "domain": {"broker", "tiering", "api.client", "api.protocol", "hot", "core"},
    "spark": {"spark", "tiering", "api.client", "api.protocol", "hot", "core"},
}


@pytest.mark.parametrize("contract", sorted(_ALLOWED))
def test_import_contracts_name_every_api_module(contract: str) -> None:
    # The contracts list api's modules one by one (import-linter cannot forbid "api.* except
    # api.protocol and api.client"), so a module added to api later must be added to them too.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    importlinter = config["tool"]["importlinter"]
    [found] = [c for c in importlinter["contracts"] if c["id"] == contract]
    api_modules = {f"api.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "api")])}
    assert {"api.protocol", "api.client"} <= api_modules
    packages = set(importlinter["root_packages"]) - {"api"}
    missing = (api_modules | packages) - _ALLOWED[contract] - set(found["forbidden_modules"])
    assert not missing, f"add {sorted(missing)} to forbidden_modules of the {contract!r} contract"
    # Forbidden indirectly too: a path through an allowed package is no way around it.
    assert not found.get("allow_indirect_imports", False)
