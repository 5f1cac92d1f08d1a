"""The short fuzz run of ``make test`` (issue 27): ``python -m fuzz`` a few seconds per target
(the decoders under atheris, then a live broker per listener kind), 0 crashes, and inputs that
really were tried by each engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DECODER_SECONDS = 3
# Per listener kind. A live case opens its own connection (TLS handshake, SASL login, SCRAM's
# 4096 iterations): on a loaded 2-core machine one takes up to a second.
SECONDS = 8
# Far below what a working run tries in SECONDS, far above what a broken one would.
MIN_DECODER_INPUTS = 1000
MIN_CASES_PER_ENGINE = 2


@pytest.mark.timeout(300)
def test_fuzz_short(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "fuzz", "--seconds", str(SECONDS),
               "--decoder-seconds", str(DECODER_SECONDS), "--json",
               "--listeners", ",".join(LISTENERS), "--workdir", str(tmp_path)]
    proc = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=260)
    lines = [line for line in proc.stdout.splitlines() if line.startswith('{"results"')]
    assert lines, f"no results (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    results = {r["target"]: r for r in json.loads(lines[-1])["results"]}
    assert set(results) == {"decoders", *(f"live-{name}" for name in LISTENERS)}, proc.stdout
    for target, result in results.items():
        assert result["crashes"] == {}, f"{target} crashed:\n{proc.stdout}"
    assert results["decoders"]["inputs"] >= MIN_DECODER_INPUTS, proc.stdout
    for name in LISTENERS:
        notes = " ".join(results[f"live-{name}"]["notes"])
        answered = 0
        for engine in ("atheris", "hypothesis"):
            found = re.search(rf"{engine}: (\d+) cases, (\d+) answered", notes)
            assert found and int(found.group(1)) >= MIN_CASES_PER_ENGINE, (name, engine, notes)
            answered += int(found.group(2))
        assert answered >= 1, (name, notes)  # cases reached the request path
    assert proc.returncode == 0, proc.stdout
