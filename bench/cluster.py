"""Replication benchmark: three josefk brokers vs three Apache Kafka 3.9.1 brokers,
both in ZooKeeper mode on one real ZooKeeper, produce with acks=all.

    .venv/bin/python -m bench.cluster          # 1 GiB x 3 alternating rounds
    .venv/bin/python -m bench.cluster --quick  # smoke test: 64 MiB, 1 round
    make bench-cluster ARGS='--rounds 5'

One ZooKeeper (tools/zookeeper/start.sh) serves the whole run. Each round starts a
fresh cluster of three brokers (ids 1-3, new data dirs, a new ZooKeeper chroot),
creates one topic (6 partitions, replication factor 3, min.insync.replicas=2),
produces an untimed warm-up (``--warmup-mib``, 64 MiB) and then ``--mib`` MiB of 1 KiB
records through one librdkafka producer (confluent-kafka, acks=all,
enable.idempotence=true, linger.ms=5, no compression, records spread evenly over the
partitions), checks that the partitions' high watermarks add up to the records
acknowledged and that every partition's three replicas hold the same bytes on disk,
and kills the cluster. Rounds alternate josefk / Kafka (``--rounds``, default 3);
the report gives per side the median MiB/s, the ratio josefk / Kafka, and the
brokers' CPU seconds per GiB acknowledged: the three broker processes' user + sys
time from /proc/<pid>/stat over the produce phase (JVM or Python, all threads).

Brokers, configuration and JVM settings: bench/cluster_brokers.py (the keys of the
cluster tests, compat_tests/cluster/harness.py; Kafka with kafka-server-start.sh's
-Xmx1G -Xms1G and G1 settings). The workload and the measurement:
bench/cluster_workload.py. Everything is on 127.0.0.1, data under ``--data-dir``
(one disk for all six brokers' logs).

Time bounds: ZooKeeper start 60 s; cluster start 150 s; topic creation until fully
in sync 60 s; the warm-up producer 150 s; the measured producer sends for at most
``--produce-seconds`` (300 s; 90 s with --quick) and then flushes for up to 30 s (a
capped round reports what was acknowledged); the check 15 s per request and 30 s for
the followers; stops are SIGKILL (20 s). No round starts after ``--budget-minutes``
(14; 4 with --quick). On the 2-core development VM (shared with other work) a default
run takes about 2-3 minutes (each josefk round ~15 s, each Kafka round ~30 s including
JVM start-up), a --quick run about 30 s; the bounds keep a broken run under ~15
minutes plus the one round in progress.

Profile: with ``--profile auto`` (the default), when josefk's median throughput is
below 0.8x Kafka's, one more josefk round (not counted) runs with py-spy attached
(--nonblocking --gil, 200 Hz, Python samples) to the broker that leads the most
partitions; its flame graph, collapsed stacks and top functions go to ``--out``
and results.md. ``--profile always`` / ``never`` force it either way.

Results: results.json and results.md in ``--out`` (default bench/results/cluster,
bench/results/cluster/quick with --quick), broker logs in its logs/, rewritten
after every round.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench import profiling, report
from bench.brokers import REPO, BrokerError, Progress, broker_list, repo_relative
from bench.cluster_brokers import (
    KAFKA_HEAP_OPTS,
    KAFKA_JVM_PERFORMANCE_OPTS,
    Cluster,
    ZooKeeper,
    broker_config,
    cluster_available,
    kafka39_version,
)
from bench.cluster_workload import (
    GIB,
    MIB,
    PRODUCER_CONFIG,
    Plan,
    WorkloadError,
    create_topic,
    produce,
    warm_up,
)
from bench.cluster_workload import check as check_offsets
from bench.cpu import process_name
from bench.report import cell, fmt

RESULTS = REPO / "bench" / "results"
LABEL = {"josefk": "josefk", "kafka": "Apache Kafka"}
START_TIMEOUT = 150.0
PROFILE_BELOW = 0.8


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 64 MiB, one round (~1-2 min)")
    parser.add_argument("--mib", type=int, default=None,
                        help="MiB produced per round (default 1024; 64 with --quick)")
    parser.add_argument("--warmup-mib", type=int, default=None,
                        help="MiB produced untimed before each measured phase, into the same "
                             "topic (default 64; 16 with --quick; 0: none)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="alternating rounds (default 3; 1 with --quick)")
    parser.add_argument("--brokers", default="josefk,kafka",
                        help="which clusters, in round order (default josefk,kafka)")
    parser.add_argument("--produce-seconds", type=float, default=None,
                        help="the producer stops sending after this (default 300; 90 quick)")
    parser.add_argument("--budget-minutes", type=float, default=None,
                        help="no round (or profile round) starts once this much time has "
                             "passed (default 14; 4 with --quick)")
    parser.add_argument("--profile", choices=("auto", "always", "never"), default="auto",
                        help="an extra josefk round under py-spy: auto = when josefk's median "
                             f"is below {PROFILE_BELOW}x Kafka's (default auto)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results directory (default bench/results/cluster, "
                             "bench/results/cluster/quick with --quick)")
    parser.add_argument("--data-dir", type=Path, default=RESULTS / "tmp",
                        help="where ZooKeeper's and the brokers' data go "
                             "(default bench/results/tmp)")
    parser.add_argument("--keep-data", action="store_true", help="keep the data dirs")
    args = parser.parse_args(argv)
    args.mib = args.mib if args.mib is not None else (64 if args.quick else 1024)
    args.warmup_mib = args.warmup_mib if args.warmup_mib is not None else (
        16 if args.quick else 64)
    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    args.budget_minutes = args.budget_minutes or (4.0 if args.quick else 14.0)
    args.produce_seconds = args.produce_seconds or (90.0 if args.quick else 300.0)
    args.out = args.out or (RESULTS / "cluster" / "quick" if args.quick
                            else RESULTS / "cluster")
    args.broker_list = broker_list(parser, args.brokers, LABEL)
    if args.mib < 1 or args.rounds < 1:
        parser.error("--mib and --rounds must be positive")
    return args


class ClusterBench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.log = Progress()
        self.plan = Plan(total_bytes=args.mib * MIB, seconds=args.produce_seconds,
                         warmup_bytes=args.warmup_mib * MIB)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.root = (args.data_dir / f"cluster-run-{stamp}").resolve()
        self.logs = args.out / "logs"
        self.zookeeper: ZooKeeper | None = None
        self.notes: list[str] = []
        self.result: dict[str, Any] = {}

    # --- ZooKeeper ------------------------------------------------------------------------

    def ensure_zookeeper(self) -> ZooKeeper:
        if self.zookeeper is not None and self.zookeeper.alive():
            return self.zookeeper
        if self.zookeeper is not None:
            self.notes.append("ZooKeeper exited during the run; a new one was started")
            self.zookeeper.stop()
        zk = ZooKeeper(self.root / f"zookeeper-{uuid.uuid4().hex[:6]}",
                       self.logs / "zookeeper.log")
        took = zk.start(60.0)
        self.log(f"ZooKeeper up on {zk.connect} after {took:.1f}s")
        self.zookeeper = zk
        return zk

    # --- one round ------------------------------------------------------------------------

    def run_round(self, kind: str, tag: str, profile: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": kind, "status": "failed"}
        try:
            zk = self.ensure_zookeeper()
        except BrokerError as exc:
            out["error"] = f"ZooKeeper did not start: {exc}"[:1500]
            self.log(f"!! {out['error'][:300]}")
            return out
        home = self.root / f"{kind}-{tag}"
        cluster = Cluster(kind, zk, home, self.logs, tag=f"-{tag}")
        out["chroot"] = cluster.chroot
        try:
            out["start_s"] = round(cluster.start(START_TIMEOUT), 1)
            # The pids whose CPU is counted: the JVMs or Pythons themselves, not a wrapper.
            out["broker_process"] = {i: process_name(pid) for i, pid in cluster.pids().items()}
            self.log(f"3 brokers up after {out['start_s']}s ({cluster.zk_connect})")
            topic = f"bench-repl-{uuid.uuid4().hex[:8]}"
            made = create_topic(cluster, topic, self.plan)
            out["leaders"] = made["leaders"]
            out["topic_ready_s"] = made["seconds"]
            self.log(f"topic {topic} in sync after {made['seconds']}s, leaders {made['leaders']}")
            spy: Any = None
            if profile:
                target = Counter(made["leaders"].values()).most_common(1)[0][0]
                spy = self._spy(cluster, target, made["leaders"])
                out["profiled_broker"] = target
            warm = 0
            if self.plan.warmup_records:
                got = warm_up(cluster, topic, self.plan)
                warm = got["records"]
                out["warmup"] = {"records": warm, "sent": got["sent"],
                                 "mib_s": round(got["bytes"] / MIB / got["seconds"], 1)}
                self.log(f"warm-up: {got['bytes'] / MIB:.0f} MiB at "
                         f"{out['warmup']['mib_s']} MiB/s (untimed)")
            self.log(f"producing {self.args.mib} MiB (acks=all) ...")
            got = produce(cluster, topic, self.plan, self.logs / f"producer-{kind}-{tag}.err",
                          during=spy, zookeeper_pid=zk.pid)
            records, nbytes, seconds = got["records"], got["bytes"], got["seconds"]
            cpu = got["broker_cpu_s"]
            out.update(
                status="ok", mib_s=nbytes / MIB / seconds if seconds > 0 else None,
                seconds=round(seconds, 3), records=records, sent=got["sent"],
                unflushed=got["unflushed"], producer_errors=got["errors"],
                broker_cpu_s=cpu, broker_cpu_total_s=round(sum(cpu.values()), 2),
                cpu_window_s=got["cpu_window_s"],
                zookeeper_cpu_s=got.get("zookeeper_cpu_s"),
                producer_cpu_s=got.get("producer_cpu_s"),
                machine_cores_busy=got.get("machine_cores_busy"),
                machine_cores_stolen=got.get("machine_cores_stolen"))
            out["cpu_s_per_gib"] = (sum(cpu.values()) / (nbytes / GIB)) if nbytes else None
            out["cores_busy"] = round(sum(cpu.values()) / got["cpu_window_s"], 2)
            out["producer_cores"] = round(got["producer_cpu_s"] / got["cpu_window_s"], 2)
            out["other_cores"] = round(
                got["machine_cores_busy"] - out["cores_busy"] - out["producer_cores"]
                - (got.get("zookeeper_cpu_s") or 0) / got["cpu_window_s"], 2)
            if records < self.plan.records:
                out["capped"] = (f"{records} of {self.plan.records} records acknowledged "
                                 f"within {self.plan.seconds:.0f}s")
            if records == 0:
                out["status"] = "failed"
                out["error"] = f"no record acknowledged; producer errors: {got['errors']}"
            out["check"] = check_offsets(cluster, topic, self.plan, warm + records,
                                         out.get("warmup", {}).get("sent", 0) + got["sent"])
            out["rss_mib"] = cluster.rss()
            if not out["check"]["ok"]:
                chk = out["check"]
                note = (f"{kind} {tag}: end offsets sum {chk['end_offsets_sum']} vs "
                        f"{chk['expected']} records acked (sent {chk['sent']}); replicas of "
                        f"equal size {chk['replicas_identical']}: {chk['replica_bytes']}")
                self.notes.append(note)
                self.log(f"!! {note}")
            self.log(f"{fmt(out['mib_s'])} MiB/s, {records} records in {seconds:.1f}s; "
                     f"broker CPU {out['broker_cpu_total_s']}s ({cpu}) = "
                     f"{fmt(out['cpu_s_per_gib'])} s/GiB; check "
                     f"{'ok' if out['check']['ok'] else 'MISMATCH'}, "
                     f"replicas identical {out['check']['replicas_identical']}, "
                     f"ISR at end {out['check']['isr_at_end']}")
            if profile and spy is not None:
                out["profile"] = spy.result
        except (BrokerError, WorkloadError, profiling.ProfilerError) as exc:
            out["status"] = "failed"
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            self.log(f"!! {out['error'][:400]}")
        except Exception as exc:  # a bench bug or a client library error: record, go on
            out["status"] = "failed"
            out["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            self.log(f"!! {out['error'][:400]}")
        finally:
            took = cluster.stop()
            self.log(f"cluster killed in {took:.1f}s")
            if not self.args.keep_data:
                shutil.rmtree(home, ignore_errors=True)
        return out

    def _spy(self, cluster: Cluster, broker_id: int, leaders: dict[int, int]) -> Any:
        out_dir = self.args.out
        bench = self

        class Spy:
            result: dict[str, Any] = {}

            def __enter__(self) -> Spy:
                raw = out_dir / "profile-josefk-leader.txt"
                self.spy = profiling.PySpy(cluster.brokers[broker_id].pid, raw)
                self.raw = raw
                return self

            def __exit__(self, *exc: object) -> None:
                self.spy.stop()
                stacks = profiling.read_folded(self.raw)
                if not stacks:
                    raise profiling.ProfilerError("py-spy recorded no samples")
                svg = out_dir / "profile-josefk-leader.svg"
                title = (f"josefk broker {broker_id} (leader of "
                         f"{sum(1 for v in leaders.values() if v == broker_id)} of 6 "
                         "partitions, follower of the rest) under acks=all produce, RF 3 "
                         "(py-spy, samples holding the GIL)")
                svg.write_text(profiling.flamegraph_svg(stacks, title))
                Spy.result = {
                    "workload": f"replicated produce, broker {broker_id}",
                    "profiler": "py-spy", "rate_hz": self.spy.rate,
                    "py_spy_samples_errors": self.spy.errors(),
                    "svg": repo_relative(svg), "raw": repo_relative(self.raw),
                    "summary": profiling.summarize(stacks, top=15).as_dict()}
                bench.log(f"py-spy: {len(stacks)} distinct stacks -> {repo_relative(svg)}")

        if profiling.py_spy_binary() is None:
            raise profiling.ProfilerError("py-spy not installed (.venv/bin/pip install py-spy)")
        return Spy()

    # --- the whole run --------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        if why := cluster_available(args.broker_list):
            print(f"cannot run the cluster benchmark: {why}", file=sys.stderr)
            return 2
        args.out.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        for old in self.logs.glob("*.log"):
            old.unlink()
        for old in self.logs.glob("*.err"):
            old.unlink()
        self.root.mkdir(parents=True, exist_ok=True)
        label = "quick" if args.quick else "default"
        machine = report.machine_info(self.root)
        machine["kafka"] = kafka39_version()
        sample = broker_config(1, 9092, Path("DATA"), "127.0.0.1:ZK/bench-KIND-HEX")
        self.result = {
            "label": label, "started": report.now_iso(), "finished": None, "machine": machine,
            "config": {"rounds": args.rounds, "order": args.broker_list, "mib": args.mib,
                       "warmup_mib": args.warmup_mib,
                       "record_size": self.plan.record_size, "records": self.plan.records,
                       "partitions": self.plan.partitions,
                       "replication_factor": self.plan.replication_factor,
                       "min_insync_replicas": self.plan.min_insync_replicas,
                       "producer": PRODUCER_CONFIG, "produce_seconds": args.produce_seconds,
                       "broker_config": sample, "kafka_heap_opts": KAFKA_HEAP_OPTS,
                       "kafka_jvm_opts": KAFKA_JVM_PERFORMANCE_OPTS,
                       "data_dir": str(self.root)},
            "rounds": [], "notes": self.notes, "profile": None}
        self.log(f"replication: {args.rounds} round(s) of {' / '.join(args.broker_list)}, "
                 f"{args.mib} MiB each; data in {self.root}; results in {repo_relative(args.out)}")
        try:
            spent = False
            for rnd in range(1, args.rounds + 1):
                this: dict[str, Any] = {}
                self.result["rounds"].append(this)
                for kind in args.broker_list:
                    self.log.prefix = f"round {rnd}/{args.rounds} · {kind} · "
                    if self._over_budget(f"round {rnd} ({kind}) and any later"):
                        spent = True
                        break
                    this[kind] = self.run_round(kind, f"r{rnd}")
                    self._write()
                if not this:
                    self.result["rounds"].pop()
                if spent:
                    break
            self.log.prefix = ""
            if self._want_profile() and not self._over_budget("the profile round"):
                self.log.prefix = "profile · josefk · "
                got = self.run_round("josefk", "profile", profile=True)
                prof = got.pop("profile", None)
                self.result["profile"] = prof or {"error": got.get("error", "no profile")}
                self.result["profile_round"] = got
        except KeyboardInterrupt:
            self.notes.append("interrupted (Ctrl-C): results are partial")
            self.log("interrupted; writing what there is")
        finally:
            self.log.prefix = ""
            if self.zookeeper is not None:
                self.zookeeper.stop()
            paths = self._write(final=True)
            if not args.keep_data:
                shutil.rmtree(self.root, ignore_errors=True)
                with contextlib.suppress(OSError):
                    self.root.parent.rmdir()
        print()
        print(markdown(self.result).split("\n## Setup")[0])
        for p in paths:
            self.log(f"wrote {repo_relative(p)}")
        return 0

    def _over_budget(self, what: str) -> bool:
        spent = time.monotonic() - self.log.began
        if spent < self.args.budget_minutes * 60:
            return False
        note = (f"time budget of {self.args.budget_minutes:g} min spent after "
                f"{spent / 60:.1f} min: {what} not run")
        self.notes.append(note)
        self.log(f"!! {note}")
        return True

    def _want_profile(self) -> bool:
        mode = self.args.profile
        if mode == "never" or "josefk" not in self.args.broker_list:
            return False
        if mode == "always":
            return True
        ratio = aggregate(self.result["rounds"])["mib_s"].get("ratio")
        return ratio is None or ratio < PROFILE_BELOW

    def _write(self, final: bool = False) -> list[Path]:
        if final:
            self.result["finished"] = report.now_iso()
            self.result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        self.result["summary"] = aggregate(self.result["rounds"])
        out = self.args.out
        paths = [out / "results.json", out / "results.md"]
        paths[0].write_text(json.dumps(self.result, indent=1, default=str) + "\n")
        paths[1].write_text(markdown(self.result))
        return paths


# --- aggregation and report ---------------------------------------------------------------------

MEASURES = {
    "mib_s": ("produce throughput, acks=all, RF 3, min ISR 2", "MiB/s", "higher"),
    "cpu_s_per_gib": ("broker CPU (3 brokers, user+sys) per GiB acked", "CPU s/GiB", "lower"),
    "cores_busy": ("broker CPU during the produce phase", "cores busy", "info"),
    "producer_cores": ("producer process CPU during the produce phase", "cores busy", "info"),
    "machine_cores_busy": ("whole machine CPU during the produce phase", "cores busy", "info"),
    "other_cores": ("of which neither brokers, producer nor ZooKeeper (other work, kernel "
                    "threads)", "cores busy", "info"),
}


def aggregate(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for key in MEASURES:
        entry: dict[str, Any] = {}
        for kind in LABEL:
            outcomes = [r[kind] for r in rounds if kind in r]
            if not outcomes:
                continue
            values = [o[key] for o in outcomes if o.get("status") == "ok"
                      and o.get(key) is not None]
            entry[kind] = {"values": values,
                           "median": statistics.median(values) if values else None,
                           "runs": len(outcomes), "failed": len(outcomes) - len(values)}
        j = entry.get("josefk", {}).get("median")
        k = entry.get("kafka", {}).get("median")
        entry["ratio"] = j / k if j is not None and k else None
        summary[key] = entry
    checks: dict[str, str] = {}
    for kind in LABEL:
        outcomes = [r[kind] for r in rounds if kind in r]
        if outcomes:
            good = sum(1 for o in outcomes if o.get("check", {}).get("ok"))
            checks[kind] = f"{good}/{len(outcomes)}"
    summary["checks"] = checks
    return summary


def markdown(result: dict[str, Any]) -> str:
    summary = result.get("summary") or aggregate(result["rounds"])
    cfg = result["config"]
    m = result["machine"]
    rounds = cfg["rounds"]
    lines = [
        f"# Replication: josefk vs Apache Kafka {m['kafka']} (ZooKeeper mode) — "
        f"{result['label']} run",
        "",
        f"{result['started']} to {result['finished']}; {rounds} round"
        f"{'' if rounds == 1 else 's'} alternating {' / '.join(cfg['order'])}, each on a fresh "
        f"three-broker cluster. Per round: {cfg['mib']} MiB of {cfg['record_size']} B records "
        f"into one topic of {cfg['partitions']} partitions, replication factor "
        f"{cfg['replication_factor']}, min.insync.replicas={cfg['min_insync_replicas']}, one "
        "librdkafka producer (acks=all, idempotent, linger.ms=5, no compression). Medians "
        "over the rounds (min–max in brackets); the ratio is josefk's median over Kafka's.",
        "",
        "| measure | unit | josefk | Apache Kafka | josefk / Kafka | better |",
        "|---|---|---|---|---|---|",
    ]
    for key, (title, unit, better) in MEASURES.items():
        entry = summary.get(key, {})
        ratio = entry.get("ratio")
        lines.append(f"| {title} | {unit} | {cell(entry.get('josefk'))} | "
                     f"{cell(entry.get('kafka'))} | "
                     f"{'–' if ratio is None else f'{ratio:.2f}'} | {better} |")
    checks = summary.get("checks", {})
    lines.append(f"| check: high watermarks = records acked, replicas equal on disk | "
                 f"rounds passed | "
                 f"{checks.get('josefk', 'not run')} | {checks.get('kafka', 'not run')} | – | – |")
    lines += ["", "## Rounds", "",
              "| round | broker | MiB/s | s | records acked | broker CPU s (1 / 2 / 3) | "
              "CPU s/GiB | ZooKeeper CPU s | high watermarks of records acked (with warm-up) | "
              "replicas equal | ISR at end | "
              "warm-up MiB/s | cluster start s | RSS MiB (1 / 2 / 3) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for i, rnd in enumerate(result["rounds"], 1):
        for kind in cfg["order"]:
            o = rnd.get(kind)
            if o is None:
                continue
            if o.get("status") != "ok":
                lines.append(f"| {i} | {LABEL[kind]} | **failed**: "
                             f"{(o.get('error') or '?')[:300]} |||||||||||||")
                continue
            cpu = o["broker_cpu_s"]
            chk = o.get("check", {})
            rss = o.get("rss_mib", {})
            lines.append(
                f"| {i} | {LABEL[kind]} | {fmt(o['mib_s'])} | {o['seconds']:.1f} | "
                f"{o['records']:,}{' (capped)' if o.get('capped') else ''} | "
                f"{' / '.join(fmt(cpu.get(b)) for b in sorted(cpu))} | "
                f"{fmt(o['cpu_s_per_gib'])} | {fmt(o.get('zookeeper_cpu_s'))} | "
                f"{chk.get('end_offsets_sum', 0):,} of {chk.get('expected', 0):,}"
                f"{'' if chk.get('hw_ok') else ' **MISMATCH**'} | "
                f"{chk.get('replicas_identical', '?')} | {chk.get('isr_at_end', '?')} | "
                f"{fmt(o.get('warmup', {}).get('mib_s'))} | {o.get('start_s')} | "
                f"{' / '.join(fmt(rss.get(b)) for b in sorted(rss))} |")
    lines += ["", "## Setup", ""]
    lines += [
        "- One ZooKeeper 3.8 server (tools/zookeeper/start.sh) for the run; each round a "
        "fresh cluster (brokers 1-3, new data dirs, new chroot), killed (SIGKILL) after "
        "the check.",
        "- Both sides get the same Kafka keys (those of compat_tests/cluster/harness.py), "
        "otherwise their defaults:",
        "",
        "```",
        "\n".join(f"{k}={v}" for k, v in cfg["broker_config"].items()),
        "```",
        "",
        "- josefk: `python -m josefk.server serve --log-level WARNING --override ...`.",
        f"- Apache Kafka {m['kafka']}: `tools/kafka39/start-zk-broker.sh server.properties "
        f"--override ...`, `KAFKA_HEAP_OPTS={cfg['kafka_heap_opts']}`, "
        f"`KAFKA_OPTS={cfg['kafka_jvm_opts']}` (what kafka-server-start.sh gives it), "
        "log4j INFO to the broker log.",
        f"- Producer: `python -m bench.clients produce` with {json.dumps(cfg['producer'])}, "
        f"{cfg['records']:,} records of {cfg['record_size']} B (no key), bounded by "
        f"{cfg['produce_seconds']:.0f} s; MiB/s = acknowledged bytes / (first send to end of "
        "flush). It connects and fetches the topic's metadata before a barrier; broker CPU is "
        "read just before the barrier opens and just after the producer reports.",
        "- CPU s/GiB = sum over the three brokers of (utime + stime) from /proc/<pid>/stat "
        "(all threads; JIT and GC threads for Kafka) over the produce phase, per GiB acked. "
        "Cores busy = those CPU seconds over the phase's wall time. ZooKeeper's CPU is shown "
        "but not counted. The producer process's CPU (Python loop plus librdkafka's threads) "
        "and the whole machine's (from /proc/stat: all but idle, iowait and steal) over the "
        f"same window show how close the {m['cores']} cores are to saturation.",
        f"- Warm-up: before the measured phase, {cfg.get('warmup_mib', 0)} MiB into the same "
        "topic with the same settings by a producer of its own, untimed (JIT, connections, "
        "producer ids).",
        "- Check: after the producer exits, the high watermarks of the 6 partitions (from "
        "their leaders) must add up to exactly the records acknowledged (warm-up + measured), "
        "and each partition's three replicas must hold the same number of bytes in their "
        "`.log` files (followers get up to 30 s to catch up).",
        "",
        "## Machine",
        "",
    ]
    disk = m["disk"]
    lines += [
        f"- CPU: {m['cpu']}, {m['cores']} cores; RAM {m['ram_gib']} GiB",
        f"- disk (all data dirs, `{disk.get('path')}`): {disk.get('device')} "
        f"{disk.get('fstype')} {disk.get('size')}"
        + (f", {disk['kind']}" if disk.get("kind") else ""),
        f"- kernel {m['kernel']}; Python {m['python']}; Java: {m['java'][0]}",
        f"- confluent-kafka {m['confluent_kafka']} / librdkafka {m['librdkafka']}; "
        f"josefk {m['josefk_commit']}",
        f"- load average at start {m['loadavg_at_start']}, at end "
        f"{m.get('loadavg_at_end', '?')}. Three brokers, ZooKeeper and the producer share "
        "the cores: the figures are for this machine only.",
    ]
    failures = [(i, kind, o["error"]) for i, r in enumerate(result["rounds"], 1)
                for kind, o in r.items() if o.get("error")]
    if failures:
        lines += ["", "## Failures", ""]
        lines += [f"- round {i}, {LABEL[kind]}: {err[:800]}" for i, kind, err in failures]
    notes = list(result.get("notes") or [])
    others = [v for kind in LABEL
              for v in summary.get("other_cores", {}).get(kind, {}).get("values", [])]
    if others and max(others) >= 0.5:
        notes.append(
            f"Up to {max(others):.2f} of the {m['cores']} cores went to work other than the "
            "brokers, the producer and ZooKeeper during the produce phases (other processes "
            "on the machine; also kernel threads doing this run's loopback and disk work). "
            "With the cores saturated, MiB/s depends on that load; CPU s/GiB much less so.")
    if notes:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in notes]
    prof = result.get("profile")
    if prof:
        lines += ["", "## Where a josefk broker spends its time", ""]
        extra = result.get("profile_round", {})
        if extra.get("status") == "ok":
            target = extra.get("profiled_broker")
            led = sum(1 for v in extra.get("leaders", {}).values() if v == target)
            lines.append(
                f"An extra josefk round, not counted above, with py-spy attached to broker "
                f"{target} (leader of {led} of the 6 partitions, follower of the others): "
                f"{fmt(extra['mib_s'])} MiB/s, broker CPU {extra['broker_cpu_s']} s.")
            lines.append("")
        lines += report._profile_markdown("profile", prof)[2:]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return ClusterBench(parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
