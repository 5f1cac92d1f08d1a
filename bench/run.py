"""josefk side by side with Apache Kafka: one command, every workload, both brokers.

    .venv/bin/python -m bench.run            # the full comparison (~15-20 min, 2 cores)
    .venv/bin/python -m bench.run --quick    # smoke test (~2 min)

Each round starts josefk, runs every workload, stops it; then the same with
Apache Kafka 4.x (one KRaft node from tools/kafka/start-kraft.sh): A B A B over
``--rounds`` rounds. Both brokers run on 127.0.0.1 with their log dirs side by
side under ``--data-dir`` (one disk), with default configs plus the single-node
overrides of tools/kafka/server.properties. The report gives the median of each
measure per broker and the ratio josefk / Kafka, measured in the same run.

Workloads (sizes scale with ``--scale``; see bench/README.md for the details):

1. produce 1 KiB records, acks=1, linger 5 ms, no compression: librdkafka and
   Kafka's ProducerPerformance;
2. the same with acks=all and idempotence;
3. 100 B records, linger 0, several librdkafka producers (request-rate bound);
4. consume from offset 0 of a 2 GiB topic: librdkafka (assign) and
   ConsumerPerformance (consumer group);
5. end-to-end latency p50 / p99 / p99.9 at a fixed 20 MB/s;
6. cold start: process start to the first acknowledged produce;
7. broker RSS idle, and at the end of workload 1.

Workloads 1-5 also give the broker's CPU seconds (utime + stime from /proc, all
threads) per GiB moved over each client run (bench/cpu.py), after an untimed
warm-up pass that both brokers get after each start (bench/warmup.py).

Then josefk alone under a profiler (py-spy, else cProfile) for workloads 1, 3 and
4. Results: results.json, results.md, results.png and profile-w*.svg in ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import profiling, report, workloads
from bench.brokers import (
    REPO,
    SINGLE_NODE_OVERRIDES,
    BrokerError,
    BrokerProcess,
    Progress,
    broker_list,
    cprofile_command,
    free_port,
    prepare_run,
    repo_relative,
)
from bench.warmup import warm_up
from bench.workloads import Context, Outcome, Sizes, failed, ok

RESULTS = REPO / "bench" / "results"
ALL_WORKLOADS = (1, 2, 3, 4, 5, 6, 7)
PROFILED = {"w1": "workload 1: produce 1 KiB, acks=1, linger 5 ms (librdkafka)",
            "w3": "workload 3: 100 B records, linger 0, several producers",
            "w4": "workload 4: consume the big topic from offset 0 (librdkafka)"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: --scale 0.05, one round, short idle (~2 min)")
    parser.add_argument("--scale", type=float, default=None,
                        help="multiplies record counts, topic size and durations (default 1; "
                             "0.05 with --quick)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="alternating rounds (default 5; 1 with --quick)")
    parser.add_argument("--workloads", default=",".join(map(str, ALL_WORKLOADS)),
                        help="which workloads, e.g. 1,4,6 (default all)")
    parser.add_argument("--brokers", default="josefk,kafka",
                        help="which brokers, in round order (default josefk,kafka)")
    parser.add_argument("--profiler", choices=("py-spy", "cprofile", "none"),
                        default=os.environ.get("BENCH_PROFILER", "py-spy"),
                        help="profile josefk under workloads 1, 3, 4 (env BENCH_PROFILER; "
                             "py-spy falls back to cprofile when it cannot attach)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results directory (default bench/results, "
                             "bench/results/quick with --quick)")
    parser.add_argument("--data-dir", type=Path, default=RESULTS / "tmp",
                        help="where both brokers' log dirs go (default bench/results/tmp)")
    parser.add_argument("--keep-data", action="store_true", help="keep the log dirs")
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="an untimed produce + consume pass on each broker after its start "
                             "in every round, before workloads 1-5 (bench/warmup.py; default on)")
    args = parser.parse_args(argv)
    args.scale = args.scale if args.scale is not None else (0.05 if args.quick else 1.0)
    args.rounds = args.rounds if args.rounds is not None else (1 if args.quick else 5)
    args.out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    args.workload_set = {int(w) for w in args.workloads.split(",") if w.strip()}
    args.broker_list = broker_list(parser, args.brokers)
    if not args.workload_set <= set(ALL_WORKLOADS):
        parser.error("workloads are 1 to 7")
    return args


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.log = Progress()
        self.sizes = Sizes.for_scale(args.scale, quick=args.quick)
        self.ctx = Context(sizes=self.sizes, log=self.log, results_dir=args.out)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.root = (args.data_dir / f"run-{stamp}").resolve()
        self.logs = args.out / "logs"
        self.mains: dict[str, BrokerProcess] = {}
        self.notes: list[str] = []
        self.result: dict[str, Any] = {}

    # --- brokers --------------------------------------------------------------------------

    def main_broker(self, kind: str) -> BrokerProcess:
        """The broker of the main workloads: one data dir per kind, kept over the rounds
        (so the big topic of workload 4 is written once), restarted every round."""
        if kind not in self.mains:
            self.mains[kind] = BrokerProcess(kind, self.root / f"{kind}-main", free_port(),
                                             log_path=self.logs / f"{kind}-main.log")
        return self.mains[kind]

    def ensure_running(self, broker: BrokerProcess, before: str) -> None:
        if broker.alive():
            return
        if broker.proc is not None:
            note = (f"{broker.kind} exited (status {broker.proc.returncode}) before {before}; "
                    f"restarted. Log: {broker.log_tail(8)}")
            self.notes.append(note)
            self.log(f"!! {note}")
            broker.stop()
        broker.start(self.sizes.start_timeout)

    # --- one round ------------------------------------------------------------------------

    def run_round(self, kind: str, rnd: int) -> dict[str, dict[str, Any]]:
        """One broker's round: {measure key: outcome}, plus "warmup" when it ran."""
        selected = self.args.workload_set
        out: dict[str, Outcome] = {}
        if selected & {6, 7}:
            cold = BrokerProcess(kind, self.root / f"{kind}-cold-r{rnd}",
                                 log_path=self.logs / f"{kind}-cold.log")
            self.log("w6: cold start on an empty data dir ...")
            got = workloads.w6_cold_start(self.ctx, cold)
            shutil.rmtree(cold.data_dir, ignore_errors=True)
            if 6 in selected:
                out["w6.cold_start"] = got["w6.cold_start"]
                workloads._report(self.ctx, "w6.cold_start", got["w6.cold_start"])
            if 7 in selected:
                out["w7.rss_idle"] = got["w7.rss_idle"]
                workloads._report(self.ctx, "w7.rss_idle", got["w7.rss_idle"])
        main_work = sorted(selected & {1, 2, 3, 4, 5})
        if not main_work:
            return {k: v.as_dict() for k, v in out.items()}
        broker = self.main_broker(kind)
        try:
            started = broker.start(self.sizes.start_timeout)
            self.log(f"{kind} up on {broker.bootstrap} after {started:.1f}s")
        except BrokerError as exc:
            msg = f"{kind} did not start: {exc}"
            self.log(f"!! {msg[:400]}")
            for w in main_work:
                for key in workloads.MEASURES:
                    if key.startswith(f"w{w}."):
                        out[key] = failed(msg)
            broker.stop(kill=True)
            return {k: v.as_dict() for k, v in out.items()}
        try:
            if self.args.warmup:
                out["warmup"] = warm_up(self.ctx, broker)
                if out["warmup"].status != "ok":
                    self.notes.append(f"{kind} round {rnd}: {out['warmup'].error}")
            for w in main_work:
                try:
                    self.ensure_running(broker, f"workload {w}")
                except BrokerError as exc:
                    for key in workloads.MEASURES:
                        if key.startswith(f"w{w}."):
                            out[key] = failed(f"broker could not be restarted: {exc}")
                    continue
                got = getattr(workloads, f"w{w}")(self.ctx, broker)
                out.update(got)
                if w == 1 and 7 in selected:
                    if broker.alive():
                        out["w7.rss_after_w1"] = ok(broker.rss_mib(),
                                                    peak_mib=round(broker.peak_rss_mib(), 1))
                    else:
                        out["w7.rss_after_w1"] = failed("broker not running after workload 1")
                    workloads._report(self.ctx, "w7.rss_after_w1", out["w7.rss_after_w1"])
        finally:
            stopped = broker.stop()
            self.log(f"{kind} stopped in {stopped:.1f}s")
        return {k: v.as_dict() for k, v in out.items()}

    # --- profiling ------------------------------------------------------------------------

    def profile(self) -> dict[str, Any]:
        """josefk alone, under py-spy (attached) or cProfile, for workloads 1, 3 and 4."""
        wanted = [w for w in ("w1", "w3", "w4") if int(w[1]) in self.args.workload_set]
        if self.args.profiler == "none" or "josefk" not in self.args.broker_list or not wanted:
            return {}
        self.log.prefix = "profile · josefk · "
        profiler = self.args.profiler
        if profiler == "py-spy" and profiling.py_spy_binary() is None:
            self.notes.append("py-spy not installed: profiled with cProfile instead")
            profiler = "cprofile"
        out: dict[str, Any] = {}
        broker = self.main_broker("josefk")
        for name in wanted:
            self.log(f"{name} under {profiler} ...")
            try:
                if profiler == "py-spy":
                    try:
                        out[name] = self._profile_py_spy(broker, name)
                        continue
                    except profiling.ProfilerError as exc:
                        self.notes.append(f"py-spy failed ({exc}); fell back to cProfile")
                        self.log(f"!! py-spy failed: {exc}; falling back to cProfile")
                        profiler = "cprofile"
                out[name] = self._profile_cprofile(broker, name)
            except Exception as exc:
                out[name] = {"workload": PROFILED[name], "profiler": profiler,
                             "error": f"{type(exc).__name__}: {exc}"}
                self.log(f"!! profiling {name} failed: {exc}")
            finally:
                broker.stop()
        return out

    def _profile_run(self, broker: BrokerProcess, name: str) -> dict[str, Outcome]:
        if name == "w1":
            return workloads.w1(self.ctx, broker, clients=("librdkafka",))
        if name == "w3":
            return workloads.w3(self.ctx, broker)
        return workloads.w4(self.ctx, broker, clients=("librdkafka",))

    def _profile_py_spy(self, broker: BrokerProcess, name: str) -> dict[str, Any]:
        self.ensure_running(broker, f"profiling {name}")
        if name == "w4":
            workloads.w4_prepare(self.ctx, broker)  # untimed, before the profiler attaches
        raw = self.args.out / f"profile-{name}.txt"
        spy = profiling.PySpy(broker.pid, raw)
        try:
            outcomes = self._profile_run(broker, name)
        finally:
            spy.stop()
        stacks = profiling.read_folded(raw)
        if not stacks:
            raise profiling.ProfilerError("py-spy recorded no samples")
        svg = self.args.out / f"profile-{name}.svg"
        svg.write_text(profiling.flamegraph_svg(
            stacks, f"josefk under {PROFILED[name]} (py-spy, samples holding the GIL)"))
        summary = profiling.summarize(stacks)
        counts = spy.errors()
        return {"workload": PROFILED[name], "profiler": "py-spy", "rate_hz": spy.rate,
                "py_spy_samples_errors": counts,
                "svg": repo_relative(svg), "raw": repo_relative(raw), "summary": summary.as_dict(),
                "outcomes": {k: v.as_dict() for k, v in outcomes.items()}}

    def _profile_cprofile(self, broker: BrokerProcess, name: str) -> dict[str, Any]:
        broker.stop()
        stats = self.args.out / f"profile-{name}.pstats"
        stats.unlink(missing_ok=True)
        profiled = BrokerProcess("josefk", broker.data_dir, broker.port,
                                 log_path=self.logs / "josefk-cprofile.log",
                                 command=cprofile_command(broker.port, broker.data_dir, stats))
        profiled.start(self.sizes.start_timeout)
        try:
            if name == "w4":
                workloads.w4_prepare(self.ctx, profiled)
            outcomes = self._profile_run(profiled, name)
        finally:
            profiled.stop()
        if not stats.exists():
            raise profiling.ProfilerError("cProfile wrote no stats (broker did not stop cleanly)")
        return {"workload": PROFILED[name], "profiler": "cprofile", "stats": repo_relative(stats),
                "summary": profiling.summarize_cprofile(stats),
                "outcomes": {k: v.as_dict() for k, v in outcomes.items()}}

    # --- the whole run --------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        if why := prepare_run(args.broker_list, args.out, self.logs, self.root):
            print(f"cannot start Apache Kafka: {why}", file=sys.stderr)
            return 2
        label = "quick" if args.quick else ("default" if args.scale == 1 else f"scale {args.scale}")
        self.result = {
            "label": label, "started": report.now_iso(), "finished": None,
            "machine": report.machine_info(self.root),
            "config": {"rounds": args.rounds, "order": args.broker_list, "scale": args.scale,
                       "workloads": sorted(args.workload_set), "profiler": args.profiler,
                       "warmup": args.warmup,
                       "data_dir": str(self.root),
                       "sizes": {k: v for k, v in vars(self.sizes).items()},
                       "overrides_both": dict(SINGLE_NODE_OVERRIDES)},
            "rounds": [], "notes": self.notes, "profiles": {}}
        self.log(f"josefk vs Apache Kafka: {args.rounds} round(s) of "
                 f"{' / '.join(args.broker_list)}, workloads {sorted(args.workload_set)}, "
                 f"scale {args.scale}; data in {self.root}; results in {args.out}")
        try:
            for rnd in range(1, args.rounds + 1):
                this: dict[str, Any] = {}
                self.result["rounds"].append(this)
                for kind in args.broker_list:
                    self.log.prefix = f"round {rnd}/{args.rounds} · {kind} · "
                    this[kind] = self.run_round(kind, rnd)
                    self._write()
            self.result["profiles"] = self.profile()
        except KeyboardInterrupt:
            self.notes.append("interrupted (Ctrl-C): results are partial")
            self.log("interrupted; writing what there is")
        finally:
            for broker in self.mains.values():
                broker.stop()
            self.log.prefix = ""
            paths = self._write(final=True)
            if not args.keep_data:
                shutil.rmtree(self.root, ignore_errors=True)
                with contextlib.suppress(OSError):
                    self.root.parent.rmdir()
        self._print_summary()
        for p in paths:
            self.log(f"wrote {repo_relative(p)}")
        return 0

    def _write(self, final: bool = False) -> list[Path]:
        if final:
            self.result["finished"] = report.now_iso()
            self.result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
        return report.write_all(self.result, self.args.out)

    def _print_summary(self) -> None:
        print()
        print(report.markdown(self.result).split("\n## Machine")[0])


def main(argv: list[str] | None = None) -> int:
    return Bench(parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
