"""The cluster at scale: josefk against Apache Kafka 3.9.1 (ZooKeeper mode), N brokers.

    .venv/bin/python -m bench.fleet --smoke                     # 3 brokers, 300 partitions
    .venv/bin/python -m bench.fleet --brokers 5,10 --partitions 10000,100000
    .venv/bin/python -m bench.fleet --brokers 30,100 --targets josefk
    .venv/bin/python -m bench.fleet --report bench/results/fleet/results.json

One ZooKeeper for the run (bench/cluster_brokers.py). For each partition count, broker
count and target: a fresh cluster (ids 1..N, its own chroot and data dirs) started at
once (bounded by ``--timeout`` + 15 s per broker), then, in order, each step bounded by
``--timeout`` + ``--timeout-per-partition`` times the partitions:

1. create: the partitions in topics of at most ``--topic-max``, replication factor 3, in
   one CreateTopics to the controller; from its answer until every broker's Metadata
   lists every partition with a live leader (and from the request); then until every ISR
   is full.
2. create_one: one more topic of ``--one-topic`` partitions on the loaded cluster, the same.
3. shutdown: SIGTERM to the highest-id broker that is not the controller; until it exits,
   until another broker's Metadata shows it leading nothing, and in no ISR.
4. restart_clean: spawn it again; until it answers, until it is back in every ISR.
5. failover: SIGKILL the controller; until another broker names a new controller, and
   shows every partition led by a live broker (ZooKeeper notices the death only when the
   session expires: zookeeper.session.timeout.ms, 6 s, is in both kinds' figures).
6. restart_kill: spawn the killed controller once ZooKeeper dropped its registration;
   until it is back in every ISR.

Brokers' VmRSS is taken after step 2. A step that times out or fails is recorded as such
(never as a figure) and ends that cluster's run. Sizes that would not fit in memory
(estimated: Kafka's heap plus 400 MiB per broker, josefk 80 MiB plus 10 KiB per replica)
or in the descriptor limit are refused before anything starts (recorded as refused; the
other sizes run).

Results: results.json, results.md and PNGs in ``--out`` (bench/results/fleet;
bench/results/fleet/smoke for --smoke), rewritten after every cluster; broker logs in
its logs/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import report
from bench.brokers import REPO, BrokerError, Progress, broker_list
from bench.cluster_brokers import ZooKeeper, cluster_available
from bench.fleet import measures
from bench.fleet import report as fleet_report
from bench.fleet.nodes import (
    OVERRIDES,
    ZOOKEEPER_HEAP,
    Fleet,
    Size,
    available_mib,
    files_needed,
    map_warning,
    raise_nofile,
    refusal,
)

RESULTS = REPO / "bench" / "results" / "fleet"
REPLICATION = 3
START_PER_BROKER = 15.0  # seconds added to --timeout per broker for the cluster's start
log = Progress()


class Abort(Exception):
    """A step did not finish: the rest of this cluster's steps cannot run."""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fleet", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="3 brokers, 300 partitions in topics of 100 (a check, not figures)")
    parser.add_argument("--brokers", default=None, help="broker counts (default 5,10)")
    parser.add_argument("--partitions", default=None,
                        help="partitions across the cluster (default 10000,100000)")
    parser.add_argument("--targets", default="josefk,kafka", help="which kinds, in order")
    parser.add_argument("--topic-max", type=int, default=None,
                        help="partitions per topic (default 2000; 100 with --smoke)")
    parser.add_argument("--one-topic", type=int, default=None,
                        help="partitions of the create_one topic (default 100; 30 --smoke)")
    parser.add_argument("--kafka-heap", default="-Xmx512m -Xms512m",
                        help="KAFKA_HEAP_OPTS of every Kafka broker")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per step, plus")
    parser.add_argument("--timeout-per-partition", type=float, default=0.005)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench" / "results" / "tmp")
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--report", type=Path, default=None,
                        help="only rewrite results.md and the plots from this results.json")
    args = parser.parse_args(argv)
    args.broker_counts = _counts(parser, args.brokers or ("3" if args.smoke else "5,10"))
    args.partition_counts = _counts(parser, args.partitions
                                    or ("300" if args.smoke else "10000,100000"))
    args.topic_max = args.topic_max or (100 if args.smoke else 2000)
    args.one_topic = args.one_topic or (30 if args.smoke else 100)
    args.out = args.out or (RESULTS / "smoke" if args.smoke else RESULTS)
    args.target_list = broker_list(parser, args.targets)
    if min(args.broker_counts) < REPLICATION:
        parser.error(f"at least {REPLICATION} brokers (replication factor {REPLICATION})")
    return args


def _counts(parser: argparse.ArgumentParser, text: str) -> list[int]:
    try:
        counts = sorted({int(c.replace("_", "")) for c in text.split(",") if c.strip()})
    except ValueError:
        parser.error(f"not a list of counts: {text!r}")
    if not counts or counts[0] < 1:
        parser.error(f"not a list of positive counts: {text!r}")
    return counts


def topics_for(partitions: int, topic_max: int) -> dict[str, int]:
    """``partitions`` in topics of at most ``topic_max``: {name: count}."""
    sizes = [topic_max] * (partitions // topic_max)
    if partitions % topic_max:
        sizes.append(partitions % topic_max)
    return {f"fleet-{i:04d}": n for i, n in enumerate(sizes)}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.root = args.data_dir / "fleet"
        self.logs = args.out / "logs"
        self.sizes = [Size(kind, b, p) for p in args.partition_counts
                      for b in args.broker_counts for kind in args.target_list]
        self.result: dict[str, Any] = {
            "config": {"smoke": args.smoke, "brokers": args.broker_counts,
                       "partitions": args.partition_counts, "targets": args.target_list,
                       "topic_max": args.topic_max, "one_topic": args.one_topic,
                       "replication": REPLICATION, "kafka_heap": args.kafka_heap,
                       "overrides": OVERRIDES, "timeout": args.timeout,
                       "timeout_per_partition": args.timeout_per_partition},
            "runs": {}, "notes": []}

    def preflight(self) -> list[str]:
        """Leave out the sizes that cannot run here, recorded as refused; why, for each.
        Warnings go to the notes."""
        nofile = raise_nofile(max(files_needed(s) for s in self.sizes))
        free = available_mib()
        self.result["notes"] += [w for s in self.sizes if (w := map_warning(s))]
        refused, kept = [], []
        for size in self.sizes:
            if why := refusal(size, self.args.kafka_heap, free, nofile):
                refused.append(why)
                self._row(size)[size.kind] = {"refused": why}
            else:
                kept.append(size)
        self.sizes = kept
        return refused

    def run(self) -> int:
        if why := cluster_available(self.args.target_list):
            print(f"cannot run: {why}", file=sys.stderr)
            return 2
        if refused := self.preflight():
            print("refused, these sizes do not fit on this machine:\n  "
                  + "\n  ".join(refused), file=sys.stderr)
            if not self.sizes:
                return 2
        for note in self.result["notes"]:
            log(f"warning: {note}")
        self.logs.mkdir(parents=True, exist_ok=True)
        for old in self.logs.glob("*.log"):
            old.unlink()
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.result["machine"] = report.machine_info(self.root)
        self.result["started"] = report.now_iso()
        os.environ.setdefault("ZK_HEAP_OPTS", ZOOKEEPER_HEAP)  # read by its start script
        zk = ZooKeeper(self.root / "zookeeper", self.logs / "zookeeper.log")
        try:
            log(f"ZooKeeper up in {zk.start():.1f}s on {zk.connect}")
            for size in self.sizes:
                self.one(size, zk)
                self.save()
        finally:
            zk.stop()
            if not self.args.keep_data:
                shutil.rmtree(self.root, ignore_errors=True)
        self.result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        self.result["finished"] = report.now_iso()
        for path in self.save():
            log(f"wrote {path}")
        print(fleet_report.markdown(self.result).split("\n## Machine")[0])
        return 0

    def save(self) -> list[Path]:
        return fleet_report.write(self.result, self.args.out)

    def _row(self, size: Size) -> dict[str, Any]:
        """The results' row of ``size`` (its brokers × partitions, every kind)."""
        return self.result["runs"].setdefault(
            size.key(), {"brokers": size.brokers, "partitions": size.partitions})

    def one(self, size: Size, zk: ZooKeeper) -> None:
        got: dict[str, Any] = {}
        self._row(size)[size.kind] = got
        log.prefix = f"{size.kind} {size.brokers} x {size.partitions:,}: "
        home = self.root / f"{size.kind}-{size.key()}"
        fleet = Fleet(size, zk, home, self.logs, self.args.kafka_heap)
        try:
            self.steps(fleet, got)
        except Abort as exc:
            got["skipped"] = f"the steps after {exc} (it did not finish)"
        except (measures.StepFailed, BrokerError, OSError) as exc:
            got["skipped"] = f"the remaining steps: {type(exc).__name__}: {exc}"
        finally:
            fleet.stop()
            if not self.args.keep_data:
                shutil.rmtree(home, ignore_errors=True)
            log.prefix = ""

    def step(self, got: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]]) -> None:
        log(f"{name} ...")
        try:
            got[name] = fn()
        except measures.StepTimeout as exc:
            got[name] = {"timeout": str(exc)}
        except (measures.StepFailed, BrokerError, OSError) as exc:
            got[name] = {"error": f"{type(exc).__name__}: {exc}"}
        log(f"{name}: {json.dumps(got[name])[:300]}")
        if "timeout" in got[name] or "error" in got[name]:
            raise Abort(name)

    def steps(self, fleet: Fleet, got: dict[str, Any]) -> None:
        size, args = fleet.size, self.args
        timeout = args.timeout + args.timeout_per_partition * size.partitions
        # JVMs starting at once on a few cores: the start's bound grows with the count.
        start_timeout = args.timeout + START_PER_BROKER * size.brokers
        self.step(got, "start", lambda: {"s": round(fleet.start(start_timeout), 3)})
        topics = topics_for(size.partitions, args.topic_max)
        self.step(got, "create", lambda: measures.create_topics(fleet, topics, REPLICATION,
                                                                timeout))
        self.step(got, "settle", lambda: {"s": measures.settle(fleet, topics, timeout)})
        one = {"fleet-one": args.one_topic}
        self.step(got, "create_one", lambda: measures.create_topics(fleet, one, REPLICATION,
                                                                    timeout))
        topics |= one
        self.step(got, "settle_one", lambda: {"s": measures.settle(fleet, topics, timeout)})
        got["rss_mib"] = fleet.rss_mib()
        ids = fleet.ids
        controller = measures.controller_of(fleet, ids[0])
        target = max(i for i in ids if i != controller)
        observer = min(i for i in ids if i not in (target, controller))
        self.step(got, "shutdown", lambda: measures.controlled_shutdown(
            fleet, target, observer, topics, timeout))
        self.step(got, "restart_clean", lambda: measures.restart(
            fleet, target, observer, topics, timeout))
        self.step(got, "settle_clean", lambda: {"s": measures.settle(fleet, topics, timeout)})
        controller = measures.controller_of(fleet, observer)
        observer = min(i for i in ids if i != controller)
        self.step(got, "failover", lambda: measures.failover(
            fleet, controller, observer, topics, timeout))
        self.step(got, "restart_kill", lambda: measures.restart(
            fleet, controller, observer, topics, timeout))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        result = json.loads(args.report.read_text())
        for path in fleet_report.write(result, args.report.parent):
            print(f"wrote {path}")
        return 0
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())
