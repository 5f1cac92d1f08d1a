"""Where a Python process's start-up goes: ``python -X importtime`` over several runs,
medians, grouped (the interpreter's own modules, trio and its dependencies, kafka-python,
each josefk package) and the largest single contributors.

    .venv/bin/python -m bench.import_profile ["import josefk.server.broker"] [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass

TRIO_AND_DEPS = frozenset({"trio", "attr", "attrs", "outcome", "sniffio", "sortedcontainers",
                           "idna"})


@dataclass(frozen=True)
class ImportRow:
    self_us: int
    cumulative_us: int
    depth: int
    name: str


def parse_importtime(stderr: str) -> list[ImportRow]:
    """The rows of ``-X importtime`` output, in its order (each after its children)."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cumulative_us, name = line.split(":", 1)[1].split("|")
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append(ImportRow(int(self_us), int(cumulative_us), depth, name.strip()))
    return rows


def group_of(module: str) -> str:
    """The group a module's own import time counts in."""
    top = module.split(".")[0]
    if module.startswith("josefk."):
        return ".".join(module.split(".")[:2])
    if top in TRIO_AND_DEPS:
        return "trio and its dependencies"
    if top in sys.stdlib_module_names or top.startswith("_") or top in ("encodings", "site"):
        return "Python's standard library"
    return top


def contributor_of(module: str) -> str:
    """A finer key for the top list: josefk's and kafka-python's modules by package, the
    others by top-level name."""
    parts = module.split(".")
    if parts[0] == "josefk":
        return ".".join(parts[:4])
    if parts[0] == "kafka":
        return ".".join(parts[:3])
    return parts[0]


def profile(statement: str, runs: int, env: dict[str, str] | None = None
            ) -> dict[str, object]:
    """Median milliseconds of own import time per group and per contributor, and the
    median total, over ``runs`` runs of ``python -X importtime -c statement``."""
    env = env or dict(os.environ)
    subprocess.run([sys.executable, "-c", statement], env=env, check=True,
                   capture_output=True, timeout=120)  # bytecode compiled, files cached
    groups: defaultdict[str, list[int]] = defaultdict(list)
    contributors: defaultdict[str, list[int]] = defaultdict(list)
    totals = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", statement], env=env,
                              check=True, capture_output=True, text=True, timeout=120)
        rows = parse_importtime(done.stderr)
        by_group: Counter[str] = Counter()
        by_contributor: Counter[str] = Counter()
        for row in rows:
            by_group[group_of(row.name)] += row.self_us
            by_contributor[contributor_of(row.name)] += row.self_us
        for key, value in by_group.items():
            groups[key].append(value)
        for key, value in by_contributor.items():
            contributors[key].append(value)
        totals.append(sum(r.self_us for r in rows))

    def medians(table: dict[str, list[int]]) -> dict[str, float]:
        found = {k: statistics.median(v + [0] * (runs - len(v))) / 1000
                 for k, v in table.items()}
        return dict(sorted(found.items(), key=lambda kv: -kv[1]))

    return {"statement": statement, "runs": runs, "total_ms": statistics.median(totals) / 1000,
            "groups_ms": medians(groups), "contributors_ms": medians(contributors)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("statement", nargs="?", default="import josefk.server.broker")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    found = profile(args.statement, args.runs)
    print(f"{found['statement']}: {found['total_ms']:.0f} ms of imports "
          f"(median of {args.runs})")
    for title, key in (("groups", "groups_ms"), ("top contributors", "contributors_ms")):
        print(f"\n{title}:")
        for name, ms in list(found[key].items())[:args.top]:  # type: ignore[attr-defined]
            print(f"  {ms:8.1f} ms  {name}")


if __name__ == "__main__":
    main()
