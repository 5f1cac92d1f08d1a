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
