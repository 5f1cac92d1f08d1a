"""How fast a test gets a usable broker: the ``kafka_broker`` fixture against starting
a broker process (josefk, or Apache Kafka 4.3.1 the way testcontainers does).

``python -m bench.fixture_startup`` (``make bench-fixture``), several alternating rounds
of four starts, each timed until a first produce is acknowledged (confluent-kafka,
acks=all, to a topic the produce creates):

- ``fixture``: ``kafka_broker``'s set-up in a test process that already ran one (josefk
  imported): an in-process broker on a thread (``josefk.testing.inprocess``);
- ``fixture_first``: the same in a fresh interpreter, importing josefk first (what the
  first ``kafka_broker`` of a pytest session pays; the interpreter's own start is not
  counted, pytest has paid it);
- ``josefk_process``: ``python -m josefk.server serve`` from spawn;
- ``kafka_process``: ``tools/kafka/start-kraft.sh`` on an empty data dir from spawn
  (formats the KRaft storage, then starts the JVM).

Medians and the ratios to Kafka go to bench/results/fixture/ (results.json, results.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.brokers import QUIET_CLIENT, REPO, BrokerProcess, kafka_available
from bench.report import machine_info, now_iso

OUT = REPO / "bench" / "results" / "fixture"
KINDS = ("fixture", "fixture_first", "josefk_process", "kafka_process")
LABEL = {
    "fixture": "kafka_broker fixture (josefk imported)",
    "fixture_first": "first kafka_broker of a session (imports josefk)",
    "josefk_process": "josefk process (python -m josefk.server serve)",
    "kafka_process": "Apache Kafka 4.3.1 process (start-kraft.sh: format + start)",
}
TIMEOUT_S = 120.0


def first_ack(bootstrap: str, deadline: float, alive: Any = None) -> float:
    """Produce one record until the broker acknowledges it; the monotonic time of the ack."""
    import confluent_kafka as ck

    producer = ck.Producer({"bootstrap.servers": bootstrap, **QUIET_CLIENT, "acks": "all",
                            "topic.metadata.refresh.fast.interval.ms": 10,
                            "retry.backoff.ms": 10, "retry.backoff.max.ms": 50,
                            "linger.ms": 0})
    acked: list[float] = []
    errors: list[str] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        (errors.append(str(err)) if err else acked.append(time.monotonic()))

    while not acked:
        try:
            producer.produce("fixture-bench", b"x" * 100, on_delivery=on_delivery)
        except ck.KafkaException as e:  # the topic is not there yet: ask again
            errors.append(str(e))
        while not acked and not errors:
            producer.poll(0.002)
            if alive is not None:
                alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"no acknowledged produce on {bootstrap}: {errors}")
        if errors:
            producer.poll(0.01)
        errors.clear()
    producer.flush(5)
    return acked[0]


def time_fixture(root: Path) -> dict[str, float]:
    """An in-process broker (what kafka_broker runs) until the first ack, in this process."""
    return _in_process_until_ack(root, time.monotonic())


def _in_process_until_ack(root: Path, began: float) -> dict[str, float]:
    """Start an in-process broker, wait for its first ack; seconds since ``began``."""
    from josefk.testing.inprocess import InProcessBroker

    broker = InProcessBroker(Path(tempfile.mkdtemp(dir=root)))
    broker.start()
    serving = time.monotonic()
    try:
        acked = first_ack(broker.bootstrap, began + TIMEOUT_S)
    finally:
        broker.stop()
    return {"seconds": acked - began, "serving_s": serving - began}


def time_fixture_first(root: Path) -> dict[str, float]:
    """:func:`time_fixture` in a fresh interpreter, imports of josefk included."""
    done = subprocess.run([sys.executable, "-m", "bench.fixture_startup", "--probe", str(root)],
                          cwd=REPO, capture_output=True, text=True, timeout=TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"probe failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def probe(root: Path) -> None:
    """The ``--probe`` child: confluent-kafka is imported (a test module would have),
    then the clock starts before josefk is imported."""
    import confluent_kafka  # noqa: F401

    began = time.monotonic()
    import josefk.server.broker  # noqa: F401 - what InProcessBroker.start imports
    import josefk.testing.inprocess  # noqa: F401

    imported = time.monotonic()
    timed = _in_process_until_ack(root, began)
    print(json.dumps({**timed, "import_s": imported - began}))


def time_process(kind: str, root: Path) -> dict[str, float]:
    """A broker process on an empty data dir, from spawn until the first ack."""
    broker = BrokerProcess(kind, Path(tempfile.mkdtemp(dir=root)) / "data",
                           log_path=root / f"{kind}.log")
    spawned = broker.spawn()
    try:
        acked = first_ack(broker.bootstrap, spawned + TIMEOUT_S, broker._check_alive)
    finally:
        broker.stop(kill=True)
    return {"seconds": acked - spawned}


def run(rounds: int, root: Path, with_kafka: bool) -> dict[str, list[dict[str, float]]]:
    measures = {
        "fixture": time_fixture,
        "fixture_first": time_fixture_first,
        "josefk_process": lambda r: time_process("josefk", r),
        "kafka_process": lambda r: time_process("kafka", r),
    }
    kinds = [k for k in KINDS if with_kafka or k != "kafka_process"]
    time_fixture(root)  # the in-process figure is for a process that already ran one
    out: dict[str, list[dict[str, float]]] = {k: [] for k in kinds}
    for n in range(rounds):
        for kind in (kinds if n % 2 == 0 else kinds[::-1]):
            got = measures[kind](root)
            out[kind].append(got)
            print(f"round {n + 1}/{rounds} {kind}: {got['seconds']:.3f} s", flush=True)
    return out


def summarize(samples: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    medians = {k: statistics.median(s["seconds"] for s in v) for k, v in samples.items()}
    kafka = medians.get("kafka_process")
    return {k: {"median_s": round(m, 4),
                "min_s": round(min(s["seconds"] for s in samples[k]), 4),
                "max_s": round(max(s["seconds"] for s in samples[k]), 4),
                "kafka_over_this": round(kafka / m, 1) if kafka else None}
            for k, m in medians.items()}


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Time to a usable broker: the kafka_broker fixture and broker processes",
        "",
        f"{result['when']}, {result['rounds']} alternating rounds, median (min-max) seconds "
        "until a first produce (acks=all, confluent-kafka) is acknowledged. "
        f"Machine: {result['machine'].get('cpu', '?')}, {result['machine'].get('cores')} cores, "
        f"load average at the start {result['machine'].get('loadavg_at_start')}.",
        "",
        "| start | median s | min-max s | Kafka's time / this |",
        "|---|---|---|---|",
    ]
    for kind, row in result["summary"].items():
        ratio = row["kafka_over_this"]
        lines.append(f"| {LABEL[kind]} | {row['median_s']:.3f} | {row['min_s']:.3f}-"
                     f"{row['max_s']:.3f} | {'' if ratio is None else f'{ratio:g}x'} |")
    first = result["samples"].get("fixture_first") or []
    if first:
        imports = statistics.median(s["import_s"] for s in first)
        lines += ["", f"Of the first fixture's time, importing josefk takes {imports:.3f} s "
                  "(median)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.fixture_startup",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-kafka", action="store_true", help="josefk figures only")
    parser.add_argument("--probe", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe is not None:
        probe(args.probe)
        return 0
    with_kafka = not args.no_kafka
    if with_kafka and (why := kafka_available()):
        print(f"fixture_startup: {why}; or run with --no-kafka", file=sys.stderr)
        return 2
    machine = machine_info(Path(tempfile.gettempdir()))
    when = now_iso()
    with tempfile.TemporaryDirectory(prefix="fixture-bench-") as tmp:
        samples = run(args.rounds, Path(tmp), with_kafka)
    result = {"when": when, "rounds": args.rounds, "machine": machine,
              "summary": summarize(samples), "samples": samples}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(result, indent=2) + "\n")
    (args.out / "results.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
