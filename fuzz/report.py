"""What a fuzz target reports, where crashing inputs are kept, and the fuzzer processes."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CRASH_DIR = REPO / "fuzz-crashes"


@dataclass
class Result:
    """One target's run: inputs tried, distinct crashes (signature -> saved input), RSS."""

    target: str
    seconds: float = 0.0
    inputs: int = 0
    crashes: dict[str, str] = field(default_factory=dict)
    rss_start_kb: int | None = None
    rss_end_kb: int | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def rss_growth_kb(self) -> int | None:
        if self.rss_start_kb is None or self.rss_end_kb is None:
            return None
        return self.rss_end_kb - self.rss_start_kb

    def to_json(self) -> dict[str, object]:
        return {**asdict(self), "rss_growth_kb": self.rss_growth_kb}

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Result:
        data = {k: v for k, v in data.items() if k != "rss_growth_kb"}
        return cls(**data)  # type: ignore[arg-type]

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json()))
        tmp.replace(path)

    def crash(self, signature: str, data: bytes, detail: str, crash_dir: Path = CRASH_DIR) -> None:
        """Count a crash once per signature; keep every distinct input that caused it."""
        path = save_input(self.target, data, f"{signature}\n\n{detail}", crash_dir)
        self.crashes.setdefault(signature, str(path))


def save_input(target: str, data: bytes, detail: str, crash_dir: Path = CRASH_DIR) -> Path:
    """``fuzz-crashes/<target>-<sha1>.bin`` (the input) and ``.txt`` (what went wrong)."""
    crash_dir.mkdir(parents=True, exist_ok=True)
    name = f"{target}-{hashlib.sha1(data).hexdigest()[:16]}"
    path = crash_dir / f"{name}.bin"
    path.write_bytes(data)
    (crash_dir / f"{name}.txt").write_text(detail)
    return path


def exception_signature(exc: BaseException) -> str:
    """The exception's type and the innermost frame it was raised in: distinct bugs apart."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
    return f"{type(exc).__name__} at {where}"


def run_child(module: str, args: list[str], name: str, workdir: Path, timeout: float) -> Result:
    """Run a fuzzer process (``python -m module args --result FILE``) and read its result; one
    that ends without a result (libFuzzer's own timeout or memory limit, a native crash) or
    overruns ``timeout`` is a crash."""
    result_path, log_path = workdir / f"{name}.json", workdir / f"{name}.log"
    command = [sys.executable, "-m", module, *args, "--result", str(result_path)]
    try:
        with open(log_path, "wb") as log:
            code = subprocess.run(command, cwd=REPO, stdin=subprocess.DEVNULL, stdout=log,
                                  stderr=subprocess.STDOUT, timeout=timeout).returncode
        why = f"fuzzer process exited with {code} without a result"
    except subprocess.TimeoutExpired:
        why = f"fuzzer process ran past {timeout:.0f} s"
    if result_path.exists():
        return Result.from_json(json.loads(result_path.read_text()))
    result = Result(name)
    tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
    result.crash(why, tail.encode(), f"{why}; its output ({log_path}) ends with:\n{tail}")
    return result
