"""Start-up: process start to the first acknowledged produce, josefk against Apache Kafka 4.x.

    .venv/bin/python -m bench.startup [--rounds 5] [--before REV]   # make bench-startup

Each round spawns each broker on an empty data dir, alternating which goes first, and runs
workload 6 of bench/workloads.py: spawn, port open, a topic created right after
(CreateTopics, confluent-kafka), one record acknowledged with acks=all. Kafka's KRaft
storage is formatted beforehand, untimed, as in bench.run. One untimed start of each broker
comes first (page cache, and josefk's bytecode: it runs with its bytecode compiled, as an
installed package does, cached in .cache/pycache). With ``--before REV`` josefk as of that
commit runs too, in the same rounds (its four folders from ``git archive`` on PYTHONPATH).
The report gives medians and the ratios to Kafka.

Then where josefk's time goes: the interpreter's start (``python -c pass``), ``import
trio``, the broker's imports, the broker's own start work (Broker(), the empty log dirs'
recovery, the listeners bound, in-process), the client's part (CreateTopics and Produce
round trips, from workload 6), and the import-time profile (bench/import_profile.py).
Results: results.json and results.md in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import import_profile, workloads
from bench.brokers import REPO, BrokerProcess, Progress, prepare_run, repo_relative
from bench.workloads import Context, Sizes

OUT = REPO / "bench" / "results" / "startup"
# As an installed josefk runs: bytecode compiled once and reused.
JOSEFK_ENV = {"PYTHONDONTWRITEBYTECODE": "",
              "PYTHONPYCACHEPREFIX": str(REPO / ".cache" / "pycache")}
BROKER_IMPORTS = "import josefk.server.cli, josefk.server.broker"
FOLDERS = ("protocol", "log", "cluster", "server")
# The broker's own start, in-process: the phases after the interpreter is up.
PHASES = """
import json, shutil, sys, tempfile, time
t0 = time.perf_counter()
import trio
t1 = time.perf_counter()
import josefk.server.cli
from josefk.server.broker import Broker
from josefk.server.config.broker import load_config
t2 = time.perf_counter()
data = tempfile.mkdtemp()
broker = Broker(load_config(None, {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": data}))
t3 = time.perf_counter()
marks = []
async def main():
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.serve)
        marks.append(time.perf_counter())
        nursery.cancel_scope.cancel()
trio.run(main)
shutil.rmtree(data)
print(json.dumps({"import trio": t1 - t0, "import the broker (after trio)": t2 - t1,
                  "Broker(config)": t3 - t2,
                  "serve(): logs loaded, listeners bound": marks[0] - t3}))
"""


def checkout(rev: str, root: Path) -> Path:
    """josefk's four folders at commit ``rev`` (``git archive``), laid out as an import path
    (``josefk/protocol``, ...) that shadows this checkout's when put on PYTHONPATH."""
    path = root / f"before-{rev}"
    if not (path / "josefk").exists():
        tree = path / "josefk"
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", rev, *FOLDERS], cwd=REPO, check=True,
                                 capture_output=True, timeout=60).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=60)
    return path


def _seconds(command: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=120)
    return time.perf_counter() - began


def _phases(env: dict[str, str]) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", PHASES], env=env, check=True,
                          capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout)


def shares(envs: dict[str, dict[str, str]], runs: int) -> dict[str, dict[str, float]]:
    """Median seconds, per josefk, of an empty program, ``import trio`` and the broker's
    imports as whole processes, and of each phase of an in-process start (PHASES); the
    contenders alternate run by run, so they share the machine's state."""
    py = sys.executable
    commands = {"python -c pass": [py, "-c", "pass"],
                "python -c 'import trio'": [py, "-c", "import trio"],
                f"python -c '{BROKER_IMPORTS}'": [py, "-c", BROKER_IMPORTS]}
    found: dict[str, dict[str, list[float]]] = {name: {} for name in envs}
    for n in range(runs):
        for name, env in (envs.items() if n % 2 == 0 else reversed(envs.items())):
            figures = {f"`{title}` (a whole process)": _seconds(command, env)
                       for title, command in commands.items()}
            figures.update({f"in-process: {k}": v for k, v in _phases(env).items()})
            for key, value in figures.items():
                found[name].setdefault(key, []).append(value)
    return {name: {k: statistics.median(v) for k, v in figures.items()}
            for name, figures in found.items()}


def cold_start(ctx: Context, name: str, env: dict[str, str] | None, root: Path, logs: Path,
               run: str) -> dict[str, Any]:
    """One workload-6 run on a fresh data dir; its outcome as a dict."""
    kind = "kafka" if name == "kafka" else "josefk"
    broker = BrokerProcess(kind, root / f"startup-{name}-{run}", log_path=logs / f"{name}.log",
                           env=env)
    try:
        got = workloads.w6_cold_start(ctx, broker)
    finally:
        shutil.rmtree(broker.data_dir, ignore_errors=True)
    cold, rss = got["w6.cold_start"], got["w7.rss_idle"]
    if cold.status != "ok":
        return {"error": cold.error}
    return {"cold_start_s": cold.value, **cold.detail,
            "rss_idle_mib": rss.value if rss.status == "ok" else None}


def summarize(rounds: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        runs = [r[name] for r in rounds if "cold_start_s" in r[name]]
        if runs:
            out[name] = {key: {"median": statistics.median(x[key] for x in runs),
                               "min": min(x[key] for x in runs),
                               "max": max(x[key] for x in runs)}
                         for key in ("cold_start_s", "port_open_s", "topic_created_s")}
    return out


def run(args: argparse.Namespace) -> dict[str, Any]:
    log = Progress()
    out, logs, root = Path(args.out), Path(args.out) / "logs", REPO / "bench" / "results" / "tmp"
    names = args.brokers.split(",")
    if why := prepare_run(names, out, logs, root):
        raise SystemExit(f"bench.startup: {why}")
    # Who runs: josefk as checked out, josefk at --before, Apache Kafka.
    envs: dict[str, dict[str, str] | None] = {
        n: (None if n == "kafka" else JOSEFK_ENV) for n in names}
    if args.before:
        envs = {"josefk": JOSEFK_ENV, f"josefk@{args.before}": {
            **JOSEFK_ENV, "PYTHONPATH": str(checkout(args.before, root))}, **envs}
    names = list(envs)
    ctx = Context(Sizes(idle_seconds=0.5), log, out)
    load_before = os.getloadavg()
    for name, env in envs.items():
        log(f"untimed start of {name}")
        cold_start(ctx, name, env, root, logs, "warm")
    rounds = []
    for n in range(args.rounds):
        result = {}
        for name in names if n % 2 == 0 else names[::-1]:
            result[name] = cold_start(ctx, name, envs[name], root, logs, f"r{n}")
            log(f"round {n + 1}/{args.rounds} {name}: "
                + (f"{result[name]['cold_start_s']:.3f} s" if "cold_start_s" in result[name]
                   else f"FAILED {result[name]['error'][:200]}"))
        rounds.append(result)
    josefks = {name: {**os.environ, **(env or {})} for name, env in envs.items()
               if name != "kafka"}
    log("josefk's share: interpreter, imports, start-up phases")
    found: dict[str, Any] = {"rounds": rounds, "summary": summarize(rounds, names),
                             "share_s": shares(josefks, args.rounds), "imports": {}}
    for name, env in josefks.items():
        log(f"import profile of {name}")
        found["imports"][name] = import_profile.profile(BROKER_IMPORTS, args.rounds, env)
    found["machine"] = {"cpus": os.cpu_count(), "nice": os.nice(0),
                        "loadavg_before": load_before, "loadavg_after": os.getloadavg()}
    (out / "results.json").write_text(json.dumps(found, indent=2) + "\n")
    (out / "results.md").write_text(markdown(found))
    log(f"results in {repo_relative(out)}/results.md")
    return found


def _range(x: dict[str, float]) -> str:
    return f"**{x['median']:.3f}** ({x['min']:.3f}–{x['max']:.3f})"


def _table(rows: dict[str, dict[str, float]], unit: str, scale: float) -> list[str]:
    """A table with a column per contender (rows: measure -> {contender: value})."""
    names = list(dict.fromkeys(n for row in rows.values() for n in row))
    lines = [f"| {unit} | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for title, row in rows.items():
        lines.append(f"| {title} | " + " | ".join(
            f"{row[n] * scale:.0f}" if n in row else "-" for n in names) + " |")
    return lines


def markdown(found: dict[str, Any]) -> str:
    s, machine = found["summary"], found["machine"]
    names = list(s)
    lines = ["# Start-up: spawn to the first acknowledged produce", "",
             f"{len(found['rounds'])} alternating rounds, medians (min–max) in seconds; "
             f"{machine['cpus']} CPUs shared with other work, load average "
             f"{machine['loadavg_before'][0]:.1f} before, {machine['loadavg_after'][0]:.1f} "
             "after" + (f", run at nice {machine['nice']} (its brokers and clients too)"
                        if machine["nice"] else "") + ".", "",
             "| | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    titles = {"port_open_s": "port open", "topic_created_s": "topic created (CreateTopics)",
              "cold_start_s": "first produce acknowledged (acks=all)"}
    for key, title in titles.items():
        lines.append(f"| {title} | " + " | ".join(_range(s[n][key]) for n in names) + " |")
    if "kafka" in s:
        kafka = s["kafka"]["cold_start_s"]["median"]
        lines.append("| **÷ Kafka** (first ack) | " + " | ".join(
            f"**{s[n]['cold_start_s']['median'] / kafka:.2f}**" for n in names) + " |")
    if not found["share_s"]:
        return "\n".join(lines) + "\n"
    rows: dict[str, dict[str, float]] = {}
    for name, figures in found["share_s"].items():
        for key, value in figures.items():
            rows.setdefault(key, {})[name] = value
    for name in found["share_s"]:
        if name in s:
            j = {k: v["median"] for k, v in s[name].items()}
            rows.setdefault("port open → topic created (client round trips)", {})[name] = (
                j["topic_created_s"] - j["port_open_s"])
            rows.setdefault("topic created → produce acknowledged", {})[name] = (
                j["cold_start_s"] - j["topic_created_s"])
    lines += ["", "## josefk's share", "", *_table(rows, "ms (medians)", 1000)]
    for name, imports in found["imports"].items():
        lines += ["", f"## Import time of `{imports['statement']}`: {name}", "",
                  f"{imports['total_ms']:.0f} ms in all under `-X importtime` (which adds its "
                  "own overhead); medians over the runs.", "", "| group | ms |", "|---|---|"]
        lines += [f"| {k} | {v:.1f} |" for k, v in imports["groups_ms"].items() if v >= 1]
        lines += ["", "Top contributors (own time; josefk and kafka-python by package):", "",
                  "| module(s) | ms |", "|---|---|"]
        lines += [f"| {k} | {v:.1f} |" for k, v in list(imports["contributors_ms"].items())[:20]]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--brokers", default="josefk,kafka")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--before", metavar="REV",
                        help="also run josefk as of commit REV (git archive), for a before/after")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
