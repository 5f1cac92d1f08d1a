"""The import contracts of pyproject.toml's ``[tool.importlinter]`` hold: imports point
server → cluster → log → protocol (TYPE_CHECKING imports included), and the layers
below the server import neither trio (log, protocol) nor sockets."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# The lint-imports of the interpreter running the tests (the venv's, with the test extra).
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
LAYERS = ("josefk.server", "josefk.cluster", "josefk.log", "josefk.protocol")


def test_import_contracts_are_kept() -> None:
    if not LINT_IMPORTS.exists():
        pytest.fail(f"{LINT_IMPORTS} is missing: install the test extra (pip install -e '.[test]')")
    # lint-imports analyses whatever the names import as: it must be this working tree
    # (the editable install of `make install`), not an installed copy.
    for name in LAYERS:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        assert Path(spec.origin).resolve().is_relative_to(REPO), (name, spec.origin)
    run = subprocess.run(
        [str(LINT_IMPORTS), "--config", str(REPO / "pyproject.toml"), "--no-cache", "--no-logo"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"lint-imports failed (exit {run.returncode}):\n{output}"
    assert "0 broken" in output, output


CODE_FOLDERS = ("protocol", "server", "log", "cluster", "testing")
MAX_MODULES = 16  # a folder with more holds more than one subsystem: make packages


def _folders() -> list[Path]:
    return [d for top in CODE_FOLDERS for d in [REPO / top, *(REPO / top).rglob("*")]
            if d.is_dir() and (d / "__init__.py").exists()]


def _modules(folder: Path) -> list[str]:
    return sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "__main__"))


def test_no_folder_holds_more_than_one_subsystem() -> None:
    crowded = {str(d.relative_to(REPO)): len(_modules(d)) for d in _folders()
               if len(_modules(d)) > MAX_MODULES}
    assert not crowded, crowded


def test_no_file_name_prefix_stands_in_for_a_package() -> None:
    """Three modules of one folder named ``x_...`` (or ``x`` and ``x_...``) are package
    ``x`` waiting to be made."""
    found = {}
    for d in _folders():
        prefixes: dict[str, list[str]] = {}
        for name in _modules(d):
            prefixes.setdefault(name.split("_")[0], []).append(name)
        found.update({f"{d.relative_to(REPO)}/{p}_*": names
                      for p, names in prefixes.items() if len(names) >= 3})
    assert not found, found


def test_every_package_says_what_it_is() -> None:
    missing = [str(d.relative_to(REPO)) for d in _folders()
               if not (d / "__init__.py").read_text().lstrip().startswith('"""')]
    assert not missing, missing


def test_every_package_is_installed() -> None:
    """pyproject's package list names every package folder (a wheel would lack the rest)."""
    import tomllib

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
                 ["packages"])
    found = {"josefk." + ".".join(d.relative_to(REPO).parts) for d in _folders()}
    assert found <= listed, sorted(found - listed)
