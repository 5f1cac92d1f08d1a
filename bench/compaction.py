"""Log compaction, josefk side by side with Apache Kafka 4.x (issue 14).

    .venv/bin/python -m bench.compaction            # 3 alternating rounds (~12-15 min, 2 cores)
    .venv/bin/python -m bench.compaction --quick    # smoke test (~2-3 min)
    .venv/bin/python -m bench.compaction --core     # josefk's cleaner core alone, in process

Both brokers are the processes of bench/brokers.py (josefk ``serve``, Kafka one KRaft
node from tools/kafka/start-kraft.sh), each with its defaults plus the single-node
overrides and ``log.cleaner.backoff.ms=1000``; A B A B over ``--rounds`` rounds, a fresh
data dir for every measure.

1. Cleaning throughput. A topic with ``cleanup.policy=compact``, ``segment.bytes`` 8 MiB
   and ``min.compaction.lag.ms`` one day (so nothing is cleaned while it is written)
   gets ``--clean-mib`` MiB (256) of records: ``--keys`` keys (20,000) written in turn,
   100-byte incompressible values, no compression (librdkafka, acks=1, linger 5 ms).
   Then IncrementalAlterConfigs sets ``min.compaction.lag.ms=0`` and the cleaner may
   start. Measured: the broker's own cleaner line for that log, MB (2^20 bytes) of log
   processed per second of the pass (Kafka's ``Log cleaner thread 0 cleaned log ...
   (... MB/sec)``, josefk's ``cleaned <log>: ... MB/s`` at INFO), summed over passes;
   and, from outside, the seconds from the alter until DescribeLogDirs stops shrinking
   (includes up to one cleaner back-off).
2. Group coordinator start-up after ``--commits`` (1,000,000) offset commits. One simple
   group (no members) commits offsets for a 100-partition topic: pipelined OffsetCommit
   v8 requests of 100 offsets each (kafka-python's protocol classes on one socket), with
   ``offsets.topic.segment.bytes`` 1 MiB. The broker is restarted (SIGTERM, spawn) and
   the time from spawn until OffsetFetch v7 answers the group's last offsets with no
   error (not COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR) is measured twice:
   *uncompacted*, with ``log.cleaner.enable=false`` (the whole history is replayed); then
   *compacted*, after a start with the cleaner on has compacted ``__consumer_offsets``
   (its partition's size no longer shrinks). The spawn-to-port-open time of each
   restart is recorded too (Kafka's JVM start).

Results: results.json, results.md and results.png in ``--out`` (default
bench/results/compaction, bench/results/compaction/quick for --quick), the brokers'
output in logs/. Medians over the rounds, ratio josefk / Kafka.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.brokers import (
    QUIET_CLIENT,
    REPO,
    SINGLE_NODE_OVERRIDES,
    BrokerError,
    BrokerProcess,
    Progress,
    broker_list,
    free_port,
    port_open,
    prepare_run,
)
from bench.compaction_report import MIB, OFFSETS_TOPIC, markdown, write
from bench.wire import Wire

RESULTS = REPO / "bench" / "results" / "compaction"
OFFSETS_PARTITIONS = 50  # offsets.topic.num.partitions, both brokers' default
COMMIT_PARTITIONS = 100
PIPELINE = 16
BACKOFF_MS = 1000
DAY_MS = 86_400_000
RETRIABLE_GROUP_ERRORS = {14, 15, 16}  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR

# Apache Kafka's log4j2 for this bench: WARN and up, plus the cleaner's pass summaries
# and the coordinator runtime's "Finished loading" lines, to stdout (the broker log).
KAFKA_LOG4J2 = """\
name = josefk-bench-compaction
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = OUT
logger.cleaner.name = org.apache.kafka.storage.internals.log.LogCleaner
logger.cleaner.level = info
logger.cleanerthread.name = org.apache.kafka.storage.internals.log.LogCleaner$CleanerThread
logger.cleanerthread.level = info
logger.oldcleaner.name = kafka.log.LogCleaner
logger.oldcleaner.level = info
logger.runtime.name = org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime
logger.runtime.level = info
"""


log = Progress()


def java_hash(text: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H",
                              text.encode("utf-16-be")):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def group_partition(group: str) -> int:
    """Kafka's ``Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions``."""
    return (java_hash(group) & 0x7FFFFFFF) % OFFSETS_PARTITIONS


def partition_size(bootstrap: str, topic: str, partition: int) -> int | None:
    """DescribeLogDirs: bytes of ``topic``-``partition`` on the broker, None if absent."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=15_000,
                             client_id="bench-compaction")
    try:
        for broker in admin.describe_log_dirs([topic]):
            for log_dir in broker["log_dirs"]:
                for t in log_dir["topics"]:
                    for p in t["partitions"]:
                        if t["name"] == topic and p["partition_index"] == partition:
                            return int(p["partition_size"])
    finally:
        admin.close()
    return None


def wait_settled(bootstrap: str, topic: str, partition: int, settle: float, timeout: float,
                 started: float) -> tuple[float | None, int | None, int]:
    """Poll the partition's size until it shrank and then stayed put ``settle`` seconds:
    (seconds from ``started`` to its last change, final size, polls)."""
    first = last = partition_size(bootstrap, topic, partition)
    changed_at: float | None = None
    polls = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.25)
        polls += 1
        size = partition_size(bootstrap, topic, partition)
        now = time.monotonic()
        if size != last:
            last, changed_at = size, now
        elif changed_at is not None and last is not None and first is not None \
                and last < first and now - changed_at >= settle:
            return changed_at - started, last, polls
    return (changed_at - started if changed_at else None), last, polls


# --- the brokers' cleaner lines ---------------------------------------------------------

JOSEFK_LINE = re.compile(
    r"cleaned (?P<log>\S+): (?P<read>[\d.]+) (?P<unit>B|KB|MB|GB) of log read, .*? in "
    r"(?P<secs>[\d.]+) s \(.*?\), (?P<rate>[\d.]+) MB/s")
KAFKA_LINE = re.compile(
    r"cleaned log (?P<log>\S+) \(dirty section = \[\d+, \d+\]\)\s*"
    r"(?P<mb>[\d,.]+) MB of log processed in (?P<secs>[\d,.]+) seconds "
    r"\((?P<rate>[\d,.]+) MB/sec\)")
KAFKA_LOADED = re.compile(r"Finished loading of metadata from (?P<tp>\S+) .*? in (?P<ms>\d+)ms")
# josefk's: a partition over 1 MiB loads after the port opens, smaller ones before.
JOSEFK_LOADED = re.compile(r"loaded (?P<tp>\S+) in the background in (?P<ms>\d+) ms")
JOSEFK_LOADED_AT_START = re.compile(r"loaded \d+ groups from \d+ __consumer_offsets "
                                    r"partitions in (?P<ms>\d+) ms")
UNIT = {"B": 1 / MIB, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0}


def own_load_ms(kind: str, text: str, tp: str) -> int | None:
    """The broker's own line for loading ``tp`` of ``__consumer_offsets``, in ms."""
    for m in (KAFKA_LOADED if kind == "kafka" else JOSEFK_LOADED).finditer(text):
        if m["tp"] == tp:
            return int(m["ms"])
    if kind == "josefk" and (m := JOSEFK_LOADED_AT_START.search(text)):
        return int(m["ms"])
    return None


@dataclass
class Pass:
    mib: float
    seconds: float
    rate: float


def cleaner_passes(kind: str, text: str, log_name: str) -> list[Pass]:
    out = []
    if kind == "josefk":
        for m in JOSEFK_LINE.finditer(text):
            if m["log"] == log_name:
                out.append(Pass(float(m["read"]) * UNIT[m["unit"]], float(m["secs"]),
                                float(m["rate"])))
    else:
        for m in KAFKA_LINE.finditer(text):
            if m["log"] == log_name:
                mib, secs, rate = (float(m[k].replace(",", "")) for k in ("mb", "secs", "rate"))
                # Kafka prints seconds with one decimal: take them from the rate.
                out.append(Pass(mib, mib / rate if rate > 0 else secs, rate))
    return out


# --- broker plumbing ------------------------------------------------------------------


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        stamp = time.strftime("%Y%m%d-%H%M%S")
        self.root = (args.data_dir / f"compaction-{stamp}").resolve()
        self.logs = args.out / "logs"
        self.log4j = self.root / "kafka-log4j2.properties"
        self.notes: list[str] = []

    def broker(self, kind: str, name: str, port: int | None = None,
               **overrides: str) -> BrokerProcess:
        settings = {"log.cleaner.backoff.ms": str(BACKOFF_MS)}
        settings.update({k.replace("_", "."): v for k, v in overrides.items()})
        env = {"KAFKA_OPTS": f"-Dlog4j2.configurationFile={self.log4j}"} if kind == "kafka" else {}
        return BrokerProcess(kind, self.root / f"{kind}-{name}", port,
                             log_path=self.logs / f"{kind}-{name}.log", overrides=settings,
                             env=env, log_level="INFO")

    def log_text(self, broker: BrokerProcess, since: int) -> str:
        with open(broker.log_path, "rb") as f:
            f.seek(since)
            return f.read().decode("utf-8", "replace")

    # --- 1. cleaning throughput -------------------------------------------------------

    def cleaning(self, kind: str, rnd: int) -> dict[str, Any]:
        import confluent_kafka as ck
        from confluent_kafka.admin import (
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            NewTopic,
        )

        args = self.args
        broker = self.broker(kind, f"clean-r{rnd}")
        broker.start(120)
        try:
            bootstrap = broker.bootstrap
            topic = "compacted"
            admin = AdminClient({"bootstrap.servers": bootstrap, **QUIET_CLIENT})
            admin.create_topics([NewTopic(topic, 1, 1, config={
                "cleanup.policy": "compact", "segment.bytes": str(8 * MIB),
                "min.compaction.lag.ms": str(DAY_MS)})])[topic].result(60)
            producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                    "acks": 1, "queue.buffering.max.kbytes": 256 * 1024,
                                    "batch.size": 1 << 20, **QUIET_CLIENT})
            values = [os.urandom(100) for _ in range(997)]
            record_bytes = 100 + 10 + 20  # value, key, record framing (approx.)
            count = int(args.clean_mib * MIB / record_bytes)
            began = time.monotonic()
            for i in range(count):
                key = b"key-%06d" % (i % args.keys)
                while True:
                    try:
                        producer.produce(topic, values[i % len(values)], key, partition=0)
                        break
                    except BufferError:
                        producer.poll(0.05)
                if i % 10_000 == 0:
                    producer.poll(0)
            if producer.flush(120) != 0:
                raise BrokerError("producer did not flush")
            wrote = time.monotonic() - began
            before = partition_size(bootstrap, topic, 0) or 0
            log(f"wrote {count:,} records ({args.keys:,} keys), {before / MIB:.1f} MiB in "
                f"{wrote:.1f}s; allowing the cleaner")
            mark = broker.log_path.stat().st_size
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
                ConfigEntry("min.compaction.lag.ms", "0",
                            incremental_operation=AlterConfigOpType.SET)])
            altered = time.monotonic()
            [future] = admin.incremental_alter_configs([resource]).values()
            future.result(30)
            settled, after, _ = wait_settled(bootstrap, topic, 0, settle=3 * BACKOFF_MS / 1000,
                                             timeout=args.clean_timeout, started=altered)
            time.sleep(0.5)  # the pass's line follows its last swap
            passes = cleaner_passes(kind, self.log_text(broker, mark), f"{topic}-0")
        finally:
            broker.stop()
            shutil.rmtree(broker.data_dir, ignore_errors=True)
        out: dict[str, Any] = {"records": count, "keys": args.keys, "size_before": before,
                               "size_after": after,
                               "alter_to_settled_s": None if settled is None else round(settled, 2),
                               "passes": [vars(p) for p in passes]}
        if passes:
            mib = sum(p.mib for p in passes)
            secs = sum(p.seconds for p in passes)
            out["cleaner_mib"] = round(mib, 1)
            out["cleaner_s"] = round(secs, 3)
            out["mb_s"] = round(mib / secs, 2) if secs > 0 else None
        else:
            out["error"] = "no cleaner line for the log in the broker's output"
        if settled:
            out["wall_mb_s"] = round(before / MIB / settled, 2)
        log(f"cleaner: {out.get('mb_s')} MB/s over {len(passes)} pass(es) "
            f"({out.get('cleaner_mib')} MiB in {out.get('cleaner_s')} s); "
            f"{before / MIB:.1f} -> {(after or 0) / MIB:.1f} MiB, settled "
            f"{settled if settled is None else round(settled, 1)} s after the alter")
        return out

    # --- 2. coordinator start-up -------------------------------------------------------

    def commit(self, bootstrap: str, group: str, topic: str) -> tuple[int, int, float]:
        from kafka.protocol.consumer import OffsetCommitRequest

        ctopic = OffsetCommitRequest.OffsetCommitRequestTopic
        cpart = ctopic.OffsetCommitRequestPartition
        def request(offset: int) -> OffsetCommitRequest:
            return OffsetCommitRequest(
                group_id=group, generation_id_or_member_epoch=-1, member_id="",
                group_instance_id=None, topics=[ctopic(name=topic, partitions=[
                    cpart(partition_index=p, committed_offset=offset,
                          committed_leader_epoch=-1, committed_metadata="")
                    for p in range(COMMIT_PARTITIONS)])])

        from kafka.protocol.metadata import FindCoordinatorRequest

        wire = Wire(bootstrap)
        # FindCoordinator creates __consumer_offsets; then commit offset 0 (overwritten by
        # the timed commits) until the coordinator has loaded.
        deadline = time.monotonic() + 60
        while wire.call(FindCoordinatorRequest(key=group, key_type=0), 2).error_code != 0:
            if time.monotonic() > deadline:
                raise BrokerError("FindCoordinator never answered")
            time.sleep(0.2)
        while True:
            resp = wire.call(request(0), 8)
            errors = {p.error_code for t in resp.topics for p in t.partitions} - {0}
            if not errors:
                break
            if not errors <= RETRIABLE_GROUP_ERRORS or time.monotonic() > deadline:
                raise BrokerError(f"first OffsetCommit: errors {errors}")
            time.sleep(0.2)
        requests = self.args.commits // COMMIT_PARTITIONS
        began = time.monotonic()
        deadline = began + self.args.commit_timeout
        sent = done = 0
        try:
            while done < requests:
                while sent < requests and sent - done < PIPELINE \
                        and time.monotonic() < deadline:
                    sent += 1
                    wire.send(request(sent), 8)
                if done == sent:
                    break
                resp = wire.receive()
                done += 1
                errors = {p.error_code for t in resp.topics for p in t.partitions} - {0}
                if errors:
                    raise BrokerError(f"OffsetCommit errors {errors}")
        finally:
            wire.close()
        return done * COMMIT_PARTITIONS, done, time.monotonic() - began

    def fetch_ok(self, bootstrap: str, group: str, topic: str, expect: int) -> bool:
        from kafka.protocol.consumer import OffsetFetchRequest

        ftopic = OffsetFetchRequest.OffsetFetchRequestTopic
        try:
            wire = Wire(bootstrap, timeout=10)
        except OSError:
            return False
        try:
            resp = wire.call(OffsetFetchRequest(group_id=group, topics=[ftopic(
                name=topic, partition_indexes=list(range(COMMIT_PARTITIONS)))],
                require_stable=False), 7)
        except (OSError, ConnectionError):
            return False
        finally:
            wire.close()
        if resp.error_code in RETRIABLE_GROUP_ERRORS:
            return False
        if resp.error_code != 0:
            raise BrokerError(f"OffsetFetch error {resp.error_code}")
        got = [p for t in resp.topics for p in t.partitions]
        if any(p.error_code in RETRIABLE_GROUP_ERRORS for p in got):
            return False
        offsets = {p.committed_offset for p in got}
        if len(got) != COMMIT_PARTITIONS or offsets != {expect}:
            raise BrokerError(f"OffsetFetch after restart: offsets {sorted(offsets)[:5]}, "
                              f"expected {expect}")
        return True

    def timed_start(self, broker: BrokerProcess, group: str, topic: str,
                    expect: int) -> dict[str, Any]:
        mark = broker.log_path.stat().st_size if broker.log_path.exists() else 0
        spawned = broker.spawn()
        port_s = None
        deadline = spawned + self.args.start_timeout
        try:
            while True:
                if not broker.alive():
                    raise BrokerError(f"{broker.kind} exited: {broker.log_tail(10)}")
                if time.monotonic() > deadline:
                    raise BrokerError(f"no offsets {self.args.start_timeout:.0f}s after spawn")
                if port_s is None and port_open(broker.port, 0.05):
                    port_s = time.monotonic() - spawned
                if port_s is not None and self.fetch_ok(broker.bootstrap, group, topic, expect):
                    fetched = time.monotonic() - spawned
                    break
                time.sleep(0.02)
        except BaseException:
            broker.stop(kill=True)
            raise
        out: dict[str, Any] = {"offsets_s": round(fetched, 3), "port_s": round(port_s, 3)}
        time.sleep(0.3)
        if (load_ms := own_load_ms(broker.kind, self.log_text(broker, mark),
                                   f"{OFFSETS_TOPIC}-{group_partition(group)}")) is not None:
            out["load_ms"] = load_ms
        return out

    def startup(self, kind: str, rnd: int) -> dict[str, Any]:
        args = self.args
        group, topic = "bench-group", "bench-commits"
        part = group_partition(group)
        port = free_port()
        common = {"offsets_topic_segment_bytes": str(MIB)}
        out: dict[str, Any] = {"offsets_partition": part}
        first = self.broker(kind, f"startup-r{rnd}", port, log_cleaner_enable="false", **common)
        try:
            first.start(120)
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": first.bootstrap, **QUIET_CLIENT})
            admin.create_topics([NewTopic(topic, COMMIT_PARTITIONS, 1)])[topic].result(60)
            time.sleep(1)
            records, requests, secs = self.commit(first.bootstrap, group, topic)
            size = partition_size(first.bootstrap, OFFSETS_TOPIC, part)
            out.update(commits=records, commit_requests=requests, commit_s=round(secs, 2),
                       size_uncompacted=size)
            log(f"{records:,} offset commits ({requests:,} requests) in {secs:.1f}s "
                f"({records / secs:,.0f}/s); {OFFSETS_TOPIC}-{part} is "
                f"{(size or 0) / MIB:.1f} MiB")
            first.stop()
            # Uncompacted: the cleaner off, the whole history replayed.
            out["uncompacted"] = self.timed_start(first, group, topic, requests)
            log(f"restart, uncompacted: offsets after {out['uncompacted']['offsets_s']:.2f}s "
                f"(port {out['uncompacted']['port_s']:.2f}s)")
            first.stop()
            # The cleaner on: wait until the partition stops shrinking, then restart.
            second = self.broker(kind, f"startup-r{rnd}", port, **common)
            second.start(300)
            began = time.monotonic()
            settled, after, _ = wait_settled(second.bootstrap, OFFSETS_TOPIC, part,
                                             settle=3 * BACKOFF_MS / 1000,
                                             timeout=args.clean_timeout, started=began)
            out.update(size_compacted=after,
                       compaction_settled_s=None if settled is None else round(settled, 2))
            log(f"{OFFSETS_TOPIC}-{part} compacted to {(after or 0) / MIB:.2f} MiB "
                f"(settled {settled if settled is None else round(settled, 1)}s after start)")
            second.stop()
            out["compacted"] = self.timed_start(second, group, topic, requests)
            log(f"restart, compacted: offsets after {out['compacted']['offsets_s']:.2f}s "
                f"(port {out['compacted']['port_s']:.2f}s)")
            second.stop()
        finally:
            first.stop()
            shutil.rmtree(first.data_dir, ignore_errors=True)
        return out

    # --- the run ----------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        if why := prepare_run(args.broker_list, args.out, self.logs, self.root):
            print(f"cannot start Apache Kafka: {why}", file=sys.stderr)
            return 2
        self.log4j.write_text(KAFKA_LOG4J2)
        result: dict[str, Any] = {
            "label": "quick" if args.quick else "default", "started": report.now_iso(),
            "machine": report.machine_info(self.root),
            "config": {"rounds": args.rounds, "order": args.broker_list,
                       "clean_mib": args.clean_mib, "keys": args.keys,
                       "commits": args.commits, "commit_partitions": COMMIT_PARTITIONS,
                       "overrides_both": {**SINGLE_NODE_OVERRIDES,
                                          "log.cleaner.backoff.ms": BACKOFF_MS}},
            "rounds": [], "notes": self.notes}
        import importlib.util

        spec = importlib.util.find_spec("josefk.server")
        result["machine"]["josefk_from"] = str(Path(spec.origin).resolve().parent.parent) \
            if spec and spec.origin else "?"
        log(f"compaction bench: {args.rounds} round(s) of {' / '.join(args.broker_list)}; "
            f"{args.clean_mib} MiB to clean, {args.commits:,} offset commits; data in {self.root}")
        try:
            for rnd in range(1, args.rounds + 1):
                this: dict[str, Any] = {}
                result["rounds"].append(this)
                for measure in args.measures:
                    for kind in args.broker_list:
                        log.prefix = f"round {rnd}/{args.rounds} · {measure} · {kind} · "
                        try:
                            this.setdefault(kind, {})[measure] = getattr(self, measure)(kind, rnd)
                        except Exception as exc:
                            this.setdefault(kind, {})[measure] = {"error": f"{exc}"[:2000]}
                            log(f"!! failed: {str(exc)[:600]}")
                        write(result, args.out)
        except KeyboardInterrupt:
            self.notes.append("interrupted (Ctrl-C): results are partial")
        finally:
            log.prefix = ""
            result["finished"] = report.now_iso()
            result["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
            paths = write(result, args.out)
            if not args.keep_data:
                shutil.rmtree(self.root, ignore_errors=True)
        print(markdown(result).split("\n## Machine")[0])
        for p in paths:
            log(f"wrote {p}")
        return 0


# --- josefk's cleaner core alone (no broker, no event loop) --------------------------------


def core(total: int, keys: int) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    from josefk.log.cleaner.cleaner import Cleaner, OffsetMap
    from josefk.log.cleaner.manager import LogCleanerManager
    from josefk.log.config import LogConfig
    from josefk.log.manager import LogManager

    root = Path(tempfile.mkdtemp(prefix="josefk-bench-compaction-"))
    try:
        config = LogConfig(cleanup_policy="compact", segment_bytes=16 * MIB,
                           min_cleanable_dirty_ratio=0.0)
        manager = LogManager([root], lambda _t: config)
        manager.startup()
        log_ = manager.get_or_create_log("bench", 0)
        value = os.urandom(100)
        i = 0
        while log_.size_in_bytes() < total:
            builder = DefaultRecordBatchBuilder(
                magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
            now = int(time.time() * 1000)
            for j in range(100):
                builder.append(j, timestamp=now, key=b"key-%08d" % ((i + j) % keys),
                               value=value, headers=[])
            log_.append_as_leader(bytes(builder.build()), leader_epoch=0)
            i += 100
        log_.roll()
        log_.high_watermark = log_.log_end_offset
        dirty = log_.size_in_bytes()
        cleaners = LogCleanerManager(manager)
        plan = cleaners.grab_filthiest()
        assert plan is not None
        began = time.perf_counter()
        end, stats = Cleaner(OffsetMap.for_memory(128 * MIB)).clean(
            plan, lambda group, writer: cleaners.replace(plan, group, writer))
        elapsed = time.perf_counter() - began
        cleaners.done(plan, end)
        print(f"josefk cleaner core: {dirty / MIB:.1f} MiB of dirty log ({i} records, {keys} "
              f"keys) in {elapsed:.2f} s = {dirty / MIB / elapsed:.1f} MB/s; "
              f"{log_.size_in_bytes() / MIB:.2f} MiB left")
        print(stats.summary("bench-0"))
        manager.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.compaction", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 32 MiB, 100,000 commits, one round")
    parser.add_argument("--rounds", type=int, default=None, help="default 3 (1 with --quick)")
    parser.add_argument("--brokers", default="josefk,kafka", help="round order")
    parser.add_argument("--clean-mib", type=int, default=None, help="MiB to clean (256)")
    parser.add_argument("--keys", type=int, default=20_000)
    parser.add_argument("--commits", type=int, default=None, help="offset commits (1,000,000)")
    parser.add_argument("--commit-timeout", type=float, default=240.0,
                        help="seconds the commits may take (fewer are measured if over)")
    parser.add_argument("--clean-timeout", type=float, default=240.0)
    parser.add_argument("--start-timeout", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench" / "results" / "tmp")
    parser.add_argument("--keep-data", action="store_true")
    parser.add_argument("--report", type=Path, default=None,
                        help="only rewrite results.md/.png from this results.json")
    parser.add_argument("--measures", default="cleaning,startup",
                        help="which measures, comma-separated (cleaning, startup)")
    parser.add_argument("--core", action="store_true",
                        help="only josefk's cleaner core in this process (no brokers)")
    args = parser.parse_args(argv)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.clean_mib = args.clean_mib or (32 if args.quick else 256)
    args.commits = args.commits or (100_000 if args.quick else 1_000_000)
    args.out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    args.broker_list = broker_list(parser, args.brokers)
    args.measures = [m for m in args.measures.split(",") if m]
    if not args.measures or set(args.measures) - {"cleaning", "startup"}:
        parser.error("--measures: cleaning and/or startup")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.core:
        core(args.clean_mib * MIB, args.keys)
        return 0
    if args.report:
        result = json.loads(args.report.read_text())
        for p in write(result, args.report.parent):
            print(f"wrote {p}")
        return 0
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())
