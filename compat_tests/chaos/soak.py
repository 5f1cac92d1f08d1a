"""The soak (``make soak``): every workload at once on one three-broker cluster for a long
while, one fault every few minutes, and the brokers' memory, descriptors and stalls
sampled throughout.

    python -m compat_tests.chaos.soak --duration 3600 [--target kafka] [--seed N]

The queue, transactions, groups and compaction workloads each run as in ``make chaos``,
on topics of their own (``soak-<workload>``) and into histories of their own
(``<out>/<workload>/history.jsonl``); one nemesis injects the faults and writes them into
every history; at the end each workload heals, reads back and is checked by its own
checker. ``soak_sampler.py`` samples the brokers; ``soak_health.py`` fits the slopes and
draws ``soak.png``. The last line is ``soak: OK|FAILED ...``; the exit status is 1 when a
checker found an anomaly, a workload did not complete, or a broker stalled over
``MAX_STALL_S`` outside the faults aimed at it.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import checker, net, soak_health
from .ensemble import zk_node_names
from .exercises import EXERCISES, HarnessError
from .history import History, Tee
from .nemesis import ZOOKEEPER_FAULTS, Nemesis, Schedule
from .run import CHECKS, Options, chaos_cluster, client_log, usable_faults

log = logging.getLogger("chaos.soak")

WORKLOADS = ("queue", "txn", "groups", "compact")
SOAK_FAULTS = ZOOKEEPER_FAULTS
MAX_STALL_S = 1.0
# Slopes are fitted after each broker process's first minutes.
WARMUP_S = 300.0


@dataclass
class SoakOptions:
    """What to soak: which broker, how long, which faults how often, where to write."""

    target: str = "josefk"
    duration: float = 3600.0
    seed: int = 1
    out: Path = Path("chaos-runs/soak")
    zookeepers: int = 1
    faults: list[str] = field(default_factory=lambda: list(SOAK_FAULTS))
    rate: float = 20.0  # values per second per producer (queue, groups, compaction)
    schedule: Schedule = field(default_factory=lambda: Schedule((5.0, 20.0), (120.0, 240.0)))
    interval: float = 2.0  # seconds between samples


@dataclass
class SoakOutcome:
    """Each workload's check (or why it did not complete), each broker's health."""

    results: dict[str, Any]
    failures: dict[str, str]
    health: list[soak_health.BrokerHealth]
    picture: Path
    report: Path

    @property
    def ok(self) -> bool:
        stall = soak_health.worst(self.health)[2]
        return (not self.failures and all(r.ok for r in self.results.values())
                and stall <= MAX_STALL_S)


def soak(options: SoakOptions) -> SoakOutcome:
    """Run the soak, check every workload, assess the brokers, draw and write the report."""
    out = options.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    faults, notes = usable_faults(options.faults, options.zookeepers)
    # The cluster is made for ``faults`` (clock jumps need libfaketime under the brokers);
    # each workload gets none of its own, the one nemesis below injects them.
    base = Options(target=options.target, duration=options.duration, seed=options.seed,
                   faults=faults, out=out, rate=options.rate, zookeepers=options.zookeepers)
    histories = {w: History(_path(out, w)) for w in WORKLOADS}
    failures: dict[str, str] = {}
    with client_log(out / "clients.log"), chaos_cluster(base, net.available() is None) as (
            cluster, network):
        began = time.monotonic() - histories["queue"].now()
        for w, history in histories.items():
            history.record("meta", seed=options.seed, target=options.target, workload=w,
                           topic=f"soak-{w}", partitions=base.partitions, faults=faults,
                           duration=options.duration, soak=True, notes=notes)
        sampler = _sampler(out, cluster, began, options.interval)
        try:
            healed = threading.Event()
            nemesis = Nemesis(cluster, network, Tee(list(histories.values())), "soak-queue",
                              base.partitions, faults, options.seed, options.schedule,
                              zk_nodes=zk_node_names(options.zookeepers))
            workers = [threading.Thread(target=_workload, daemon=True, args=(
                dataclasses.replace(base, workload=w, topic=f"soak-{w}", healed=healed),
                cluster, network, histories[w], failures))
                for w in WORKLOADS]
            for worker in workers:
                worker.start()
            _faults(nemesis, options.duration, healed)
            for worker in workers:
                worker.join()
        finally:
            sampler.terminate()
            sampler.wait(timeout=30)
            for history in histories.values():
                history.close()
    return _conclude(options, out, failures)


def _path(out: Path, workload: str) -> Path:
    (out / workload).mkdir(exist_ok=True)
    return out / workload / "history.jsonl"


def _sampler(out: Path, cluster: Any, began: float, interval: float) -> subprocess.Popen[bytes]:
    brokers = [f"{b.broker_id}={b.bootstrap}" for b in cluster.brokers.values()]
    with (out / "sampler.log").open("ab") as errors:
        return subprocess.Popen(
            [sys.executable, "-m", "compat_tests.chaos.soak_sampler", str(cluster.home),
             str(out / "samples.jsonl"), repr(began), str(interval), *brokers],
            stdin=subprocess.DEVNULL, stdout=errors, stderr=errors)


def _workload(options: Options, cluster: Any, network: net.Network | None, history: History,
              failures: dict[str, str]) -> None:
    try:
        EXERCISES[options.workload](options, [], cluster, network, history)
    except Exception as exc:  # noqa: BLE001 - one workload failing is part of the report
        log.exception("the %s workload did not complete", options.workload)
        failures[options.workload] = f"{type(exc).__name__}: {exc}"


def _faults(nemesis: Nemesis, duration: float, healed: threading.Event) -> None:
    """The nemesis for ``duration`` seconds; ``healed`` is set once it stopped, whatever
    happened, so the workloads go on to their final reads."""
    stop = threading.Event()
    thread = threading.Thread(target=nemesis.run, args=(stop,), daemon=True)
    thread.start()
    try:
        stop.wait(duration)
    finally:
        stop.set()
        thread.join()
        healed.set()
    log.info("nemesis injected %d faults", nemesis.injected)


def _conclude(options: SoakOptions, out: Path, failures: dict[str, str]) -> SoakOutcome:
    results = {}
    for w in WORKLOADS:
        if w in failures:
            continue
        try:
            results[w] = CHECKS[w](checker.load(_path(out, w)))
        except ValueError as exc:
            failures[w] = f"not checkable: {exc}"
    events = checker.load(_path(out, "queue"))
    samples = soak_health.load_samples(out / "samples.jsonl")
    health = soak_health.assess(samples, events, min(WARMUP_S, options.duration / 5))
    lines = [r.summary_line(options.seed) for r in results.values()]
    lines += [f"{w}: did not complete: {why}" for w, why in failures.items()]
    lines += [h.line() for h in health]
    picture = out / "soak.png"
    outcome = SoakOutcome(results, failures, health, picture, out / "report.txt")
    lines.append(summary_line(outcome, options))
    soak_health.plot(samples, events, f"{options.target} soak, {options.duration:.0f} s, seed "
                     f"{options.seed}\n{lines[-1]}", picture)
    outcome.report.write_text("\n".join(
        [r.report() for r in results.values()] + lines) + "\n")
    return outcome


def summary_line(outcome: SoakOutcome, options: SoakOptions) -> str:
    clean = [w for w, r in outcome.results.items() if r.ok]
    rss, fds, stall = soak_health.worst(outcome.health)
    return (f"soak: {'OK' if outcome.ok else 'FAILED'}: {len(clean)}/{len(WORKLOADS)} workloads "
            f"without anomalies ({', '.join(clean) or 'none'}); steepest RSS slope "
            f"{rss:+.1f} MB/h, descriptors {fds:+.1f}/h; worst stall {stall * 1000:.0f} ms "
            f"(seed {options.seed})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.chaos.soak",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", choices=("josefk", "kafka"), default="josefk")
    parser.add_argument("--duration", type=float, default=3600.0, help="seconds of faults")
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    parser.add_argument("--faults", default=",".join(SOAK_FAULTS))
    parser.add_argument("--zookeepers", type=int, choices=(1, 3), default=1)
    parser.add_argument("--calm", default="120,240",
                        help="seconds between faults, MIN,MAX (default 120,240)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("kazoo", "kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    low, high = (float(x) for x in args.calm.split(","))
    options = SoakOptions(
        target=args.target, duration=args.duration, seed=seed, zookeepers=args.zookeepers,
        faults=[f.strip() for f in args.faults.split(",") if f.strip()],
        schedule=Schedule((5.0, 20.0), (low, high)),
        out=args.out or Path("chaos-runs") / f"soak-{args.target}-seed{seed}-"
                                             f"{time.strftime('%Y%m%d-%H%M%S')}")
    try:
        outcome = soak(options)
    except (HarnessError, Exception) as exc:
        print(f"soak: the run did not complete: {exc} (seed {seed}; logs in {options.out})")
        return 2
    print(outcome.report.read_text(), end="")
    print(f"report {outcome.report}, picture {outcome.picture}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
