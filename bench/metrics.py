"""What Prometheus metrics cost josefk: throughput and broker CPU without metrics, with
``/metrics`` scraped every second, and Apache Kafka 4.x beside them (issue 29).

    .venv/bin/python -m bench.metrics            # 3 alternating rounds (~7 min, 2 cores)
    .venv/bin/python -m bench.metrics --quick    # smoke test: 30,000 records, 1 round

Three brokers per round, in turn (the order reverses every other round): ``josefk`` (no
metrics), ``josefk+metrics`` (``metrics.listener`` set and a scraper fetching ``/metrics``
every second from start to stop, as Prometheus would) and ``kafka``. Each is started,
warmed up (untimed), then measured with bench/clients.py's librdkafka processes:

- produce ``--records`` 1 KiB records, acks=1, linger 5 ms, no compression;
- consume them back from offset 0 (assign, no group).

Figures: MiB/s (median over rounds) and the broker's CPU seconds per GiB moved
(bench/cpu.py), the ratios josefk+metrics / josefk and each josefk / Kafka, and the
scrapes' time and size. Results: results.json and results.md in ``--out``
(bench/results/metrics, or .../quick).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import cpu, report
from bench.brokers import (
    REPO,
    BrokerError,
    BrokerProcess,
    Progress,
    free_port,
    prepare_run,
    repo_relative,
)
from bench.workloads import (
    ACKS1,
    KIB,
    MIB,
    W4_LIBRDKAFKA,
    Outcome,
    cpu_outcome,
    create_topic,
    delete_topic,
    failed,
    ok,
    run_client,
    unique,
)

RESULTS = REPO / "bench" / "results" / "metrics"
KINDS = ("josefk", "josefk+metrics", "kafka")
WORKLOADS = {"produce": "produce 1 KiB, acks=1, linger 5 ms",
             "consume": "consume them back from offset 0"}
SCRAPE_EVERY_S = 1.0


@dataclass
class Sizes:
    records: int = 1_000_000        # 1 KiB each: 977 MiB per produce run
    warmup_records: int = 100_000
    seconds: float = 90.0           # each client's own bound
    start_timeout: float = 120.0

    @classmethod
    def quick(cls) -> Sizes:
        return cls(records=30_000, warmup_records=10_000, seconds=30.0)


class Scraper:
    """GET ``url`` every second on a thread until stopped: each scrape's time and size."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.times_ms: list[float] = []
        self.sizes: list[int] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scraper", daemon=True)

    def __enter__(self) -> Scraper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.wait(SCRAPE_EVERY_S):
            began = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as response:
                    body = response.read()
            except OSError as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")
                continue
            self.times_ms.append((time.perf_counter() - began) * 1000)
            self.sizes.append(len(body))

    def summary(self) -> dict[str, Any]:
        times = sorted(self.times_ms)
        return {"scrapes": len(times), "errors": self.errors[:5],
                "median_ms": round(statistics.median(times), 2) if times else None,
                "max_ms": round(times[-1], 2) if times else None,
                "median_kib": round(statistics.median(self.sizes) / KIB, 1)
                if self.sizes else None}


class Round:
    """One broker of one round: started, warmed up, produce and consume measured."""

    def __init__(self, bench: Bench, kind: str, rnd: int) -> None:
        self.bench, self.kind, self.sizes, self.log = bench, kind, bench.sizes, bench.log
        process_kind = "kafka" if kind == "kafka" else "josefk"
        slug = kind.replace("+", "-")
        self.broker = BrokerProcess(process_kind, bench.root / f"{slug}-r{rnd}",
                                    log_path=bench.logs / f"{slug}.log")
        self.metrics_url: str | None = None
        if kind == "josefk+metrics":
            port = free_port()
            self.broker.overrides["metrics.listener"] = f"http://127.0.0.1:{port}"
            self.metrics_url = f"http://127.0.0.1:{port}/metrics"

    def args(self, topic: str, **more: Any) -> dict[str, Any]:
        return {"bootstrap": self.broker.bootstrap, "topic": topic,
                "seconds": self.sizes.seconds, **more}

    def run(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            started = self.broker.start(self.sizes.start_timeout)
        except BrokerError as exc:
            msg = f"{self.kind} did not start: {exc}"
            self.log(f"!! {msg[:400]}")
            self.bench.notes.append(msg[:1500])
            return {"outcomes": {w: failed(msg).as_dict() for w in WORKLOADS}}
        scraper = Scraper(self.metrics_url) if self.metrics_url else None
        try:
            self.log(f"{self.kind} up after {started:.1f}s")
            if scraper is not None:
                scraper.__enter__()
            self.traffic(unique("metrics-warmup"), self.sizes.warmup_records, measure=False)
            outcomes = self.traffic(unique("metrics"), self.sizes.records, measure=True)
            out["outcomes"] = {k: v.as_dict() for k, v in outcomes.items()}
            out["rss_mib"] = round(self.broker.rss_mib(), 1) if self.broker.alive() else None
        finally:
            if scraper is not None:
                scraper.__exit__()
                out["scrapes"] = scraper.summary()
                self.log(f"scrapes: {out['scrapes']}")
            self.log(f"{self.kind} stopped in {self.broker.stop():.1f}s")
            shutil.rmtree(self.broker.data_dir, ignore_errors=True)
        return out

    def traffic(self, topic: str, count: int, measure: bool) -> dict[str, Outcome]:
        """Produce ``count`` x 1 KiB to a new topic, then consume them back."""
        try:
            create_topic(self.broker.bootstrap, topic)
            produced = self.measured("produce", self.args(topic, count=count, size=KIB,
                                                          config=ACKS1), measure)
            records = produced["produce"].detail.get("records", 0)
            consumed = self.measured("consume", self.args(topic, count=records,
                                                          config=W4_LIBRDKAFKA), measure)
            return {**produced, **consumed}
        except Exception as exc:
            return {w: failed(f"{type(exc).__name__}: {exc}") for w in WORKLOADS}
        finally:
            delete_topic(self.broker.bootstrap, topic)

    def measured(self, role: str, args: dict[str, Any], measure: bool) -> dict[str, Outcome]:
        meter = cpu.Meter(self.broker.pid)
        with meter:
            res = run_client(role, args, timeout=self.sizes.seconds + 60)
        if not res["records"]:
            outcome = failed(f"no record moved; errors: {res['errors']}")
        else:
            outcome = ok(res["bytes"] / MIB / res["seconds"], records=res["records"],
                         seconds=round(res["seconds"], 3))
        if not measure:
            return {role: outcome}
        moved = "consumed" if role == "consume" else "produced"
        cpu_out = cpu_outcome(meter, outcome, outcome.detail.get("records", 0) * KIB, moved)
        if outcome.status == "ok":
            self.log(f"  {role}: {outcome.value:,.1f} MiB/s; broker "
                     f"{cpu_out.value or 0:.2f} CPU s/GiB")
        else:
            self.log(f"  {role}: FAILED: {(outcome.error or '')[:300]}")
        return {role: outcome, role + ".cpu": cpu_out}


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.log = Progress()
        self.sizes = Sizes.quick() if args.quick else Sizes()
        if args.records:
            self.sizes.records = args.records
        self.root = (args.data_dir / f"metrics-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
        self.logs = args.out / "logs"
        self.notes: list[str] = []
        self.result: dict[str, Any] = {}

    def run(self) -> int:
        if why := prepare_run(["josefk", "kafka"], self.args.out, self.logs, self.root):
            print(f"cannot start Apache Kafka: {why}", file=sys.stderr)
            return 2
        self.result = {
            "started": report.now_iso(), "finished": None,
            "machine": report.machine_info(self.root),
            "config": {"rounds": self.args.rounds, "sizes": asdict(self.sizes),
                       "scrape_every_s": SCRAPE_EVERY_S,
                       "client": "librdkafka (confluent-kafka)"},
            "rounds": [], "notes": self.notes}
        try:
            for rnd in range(1, self.args.rounds + 1):
                entry: dict[str, Any] = {}
                self.result["rounds"].append(entry)
                for kind in KINDS if rnd % 2 else KINDS[::-1]:
                    self.log.prefix = f"round {rnd}/{self.args.rounds} · {kind} · "
                    entry[kind] = Round(self, kind, rnd).run()
                    self.write()
        except KeyboardInterrupt:
            self.notes.append("interrupted (Ctrl-C): results are partial")
        finally:
            self.log.prefix = ""
            self.result["finished"] = report.now_iso()
            paths = self.write()
            shutil.rmtree(self.root, ignore_errors=True)
        print(markdown(self.result))
        for path in paths:
            self.log(f"wrote {repo_relative(path)}")
        return 0

    def write(self) -> list[Path]:
        out = self.args.out
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps(self.result, indent=2) + "\n")
        (out / "results.md").write_text(markdown(self.result))
        return [out / "results.json", out / "results.md"]


# --- the report -------------------------------------------------------------------------------


def _median(result: dict[str, Any], kind: str, measure: str) -> float | None:
    values = [r[kind]["outcomes"][measure]["value"] for r in result["rounds"]
              if kind in r and r[kind].get("outcomes", {}).get(measure, {}).get("status") == "ok"]
    return statistics.median(values) if values else None


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def _cell(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def markdown(result: dict[str, Any]) -> str:
    rounds = len(result["rounds"])
    lines = [
        "# Metrics cost: josefk with and without /metrics, and Apache Kafka",
        "",
        f"{rounds} round(s), started {result['started']}; "
        f"{result['config']['sizes']['records']:,} x 1 KiB records per run; /metrics "
        f"scraped every {result['config']['scrape_every_s']:g} s on josefk+metrics. "
        "Medians over the rounds; CPU is the broker process's, per GiB moved.",
        "",
        "| workload | josefk MiB/s | josefk+metrics MiB/s | Kafka MiB/s | metrics / none "
        "| josefk / Kafka | josefk+metrics / Kafka |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for workload, label in WORKLOADS.items():
        plain, scraped, kafka = (_median(result, k, workload) for k in KINDS)
        lines.append(f"| {label} | {_cell(plain)} | {_cell(scraped)} | {_cell(kafka)} | "
                     f"{_ratio(scraped, plain)} | {_ratio(plain, kafka)} | "
                     f"{_ratio(scraped, kafka)} |")
    lines += ["", "| broker CPU s/GiB | josefk | josefk+metrics | Kafka | metrics / none |",
              "|---|---:|---:|---:|---:|"]
    for workload in WORKLOADS:
        plain, scraped, kafka = (_median(result, k, workload + ".cpu") for k in KINDS)
        lines.append(f"| {workload} | {_cell(plain, 2)} | {_cell(scraped, 2)} | "
                     f"{_cell(kafka, 2)} | {_ratio(scraped, plain)} |")
    scrapes = [r["josefk+metrics"]["scrapes"] for r in result["rounds"]
               if "scrapes" in r.get("josefk+metrics", {})]
    if scrapes:
        lines += ["", "Scrapes of /metrics per round (count, median and longest time, median "
                  "size): " + "; ".join(f"{s['scrapes']}, {s['median_ms']} ms, {s['max_ms']} "
                                        f"ms, {s['median_kib']} KiB" for s in scrapes)]
    if result.get("notes"):
        lines += ["", "Notes:", *(f"- {n}" for n in result["notes"])]
    machine = result.get("machine", {})
    lines += ["", f"Machine: {machine.get('cpu', '?')}, {machine.get('cores', '?')} cores, "
              f"load at start {machine.get('loadavg_at_start', '?')}.", ""]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.metrics", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="30,000 records, 1 round")
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--records", type=int, default=None,
                        help="1 KiB records per produce run (default 1,000,000)")
    parser.add_argument("--out", type=Path, default=None,
                        help="results directory (default bench/results/metrics[/quick])")
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench" / "results" / "tmp",
                        help="the brokers' log dirs (default bench/results/tmp)")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    return args


def main(argv: list[str] | None = None) -> int:
    return Bench(parse_args(argv)).run()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
