"""Cost at scale: josefk side by side with Apache Kafka 4.x as partitions and logs grow.

    .venv/bin/python -m bench.scale                  # 10, 1,000, 10,000, 50,000 partitions; 20 GiB
    .venv/bin/python -m bench.scale --quick          # smoke: 10 and 1,000 partitions; 200 MiB
    .venv/bin/python -m bench.scale --scale 0.2 --brokers kafka
    .venv/bin/python -m bench.scale --report bench/results/scale/results.json
    .venv/bin/python -m bench.scale --cluster        # three brokers, RF 3, acks=all

The brokers of bench/brokers.py (josefk ``serve``; Kafka one KRaft node from
tools/kafka/start-kraft.sh, ``-Xmx1g``), both with ``log.index.size.max.bytes=65536``,
``num.partitions=1``, ``default.replication.factor=1`` and the single-node overrides; a
fresh data dir per measure; josefk then Kafka for each partition count, then for the big
log. Every client is a librdkafka process (bench/scale_clients.py), every step bounded
by a timeout; a broker that dies or a step that fails is recorded as failed with its
reason, and a broker that died or could not create its partitions is not tried at the
larger counts.

1. Partitions (``--partitions``, default 10, 1,000, 10,000, 50,000 times ``--scale``),
   in topics of at most 2,000 partitions (one CreateTopics request each, all in flight):
   time from the first request until full Metadata shows a leader for every partition;
   full-Metadata latency (``--metadata-calls`` list_topics(), median and p99); produce
   throughput (``--messages`` values of 100 B round-robin over every partition, acks=1,
   until all acknowledged); fetch throughput (every partition assigned from the
   beginning, until all are read); the broker's VmRSS, VmHWM and open descriptors
   (/proc/<pid>, the JVM itself for Kafka) after that load. Then start-up after SIGKILL
   (right after the load, so recovery has the unflushed data) and after a clean stop
   (SIGTERM, until exit): seconds from spawn to the port accepting TCP connections and
   to a produce acknowledged on every partition (the client is built before the spawn).
2. Big log (``--biglog-scale``, default ``--scale``): 20 GiB as 10,000 segments of
   ``segment.bytes`` 2 MiB across 1,000 partitions at 1, written once per broker (8 KiB
   values, big batches): start-up after SIGKILL and after a clean stop, spawn to port
   open and to the answer of a fetch at offset 0 of partition 0; VmRSS and descriptors
   then. The data is deleted before the next broker fills its own.

3. ``--cluster``: the partition figures for three brokers, replication factor 3 and
   acks=all, against three Apache Kafka 3.9.1 brokers in ZooKeeper mode, at 10, 1,000 and
   10,000 partitions (times ``--scale``); see bench/scale_cluster.py. Results in
   bench/results/scale/cluster.

Every client step and restart also records the broker's user and sys CPU seconds over
the step (``broker_user_s``, ``broker_sys_s``) and the client's own (``client_cpu_s``):
a step whose broker idles measured the client. ``--profile STEPS`` runs py-spy
(``--gil``) on the broker during those steps: flame graphs in ``OUT/profiles``, the top
frames in results.json.

Results in ``--out`` (bench/results/scale, bench/results/scale/quick for --quick):
results.json, results.md (tables with ratios, the machine), one PNG per figure against
the partition count (bench/scale_report.py), the brokers' output in logs/; rewritten
after every step.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from bench import profiling, report, scale_report
from bench.brokers import (
    REPO,
    SINGLE_NODE_OVERRIDES,
    BrokerError,
    BrokerProcess,
    Progress,
    broker_list,
    port_open,
    prepare_run,
)
from bench.cluster_brokers import ZooKeeper, broker_config, cluster_available, kafka39_version
from bench.cpu import cpu_times
from bench.scale_cluster import ClusterTarget, measured_pid, new_target, process_state

MIB = 1 << 20
RESULTS = REPO / "bench" / "results" / "scale"
FULL_PARTITIONS = [10, 1_000, 10_000, 50_000]
CLUSTER_PARTITIONS = [10, 1_000, 10_000]
TOPIC_MAX = 2_000  # partitions per topic / CreateTopics request
MESSAGE_SIZE = 100
FILL_VALUE = 8 << 10
SEGMENT_BYTES = 2 * MIB
BIGLOG_FULL = {"segments": 10_000, "partitions": 1_000}  # x SEGMENT_BYTES = 20 GiB
OVERRIDES = {"log.index.size.max.bytes": "65536", "num.partitions": "1",
             "default.replication.factor": "1"}
# A broker log line that means the step cannot finish (the ceiling this bench looks for).
FATAL = re.compile(r".*(Too many open files|EMFILE|OutOfMemoryError|Map failed).*")


class StepError(RuntimeError):
    """A step failed; the message is its reason."""


log = Progress()


# --- the broker seen from /proc -----------------------------------------------------------


def proc_state(broker: BrokerProcess | ClusterTarget) -> dict[str, Any]:
    if isinstance(broker, ClusterTarget):
        return broker.state()
    return process_state(measured_pid(broker))


def listening(broker: BrokerProcess | ClusterTarget) -> bool:
    if isinstance(broker, ClusterTarget):
        return broker.listening()
    return port_open(broker.port, 0.05)


class LogWatch:
    """New lines of a broker's output since the last look: the first fatal one."""

    def __init__(self, broker: BrokerProcess) -> None:
        self.path = broker.log_path
        self.offset = self.path.stat().st_size if self.path.exists() else 0

    def fatal(self) -> str | None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                text = f.read(8 << 20).decode("utf-8", "replace")
        except OSError:
            return None
        cut = text.rfind("\n") + 1
        self.offset += len(text[:cut].encode())
        m = FATAL.search(text[:cut])
        return m.group(0).strip()[:400] if m else None


def death_reason(broker: BrokerProcess) -> str:
    """Exit status and the first fatal line of this run's output (else its last line
    that is not part of a stack trace)."""
    code = broker.proc.returncode if broker.proc is not None else None
    try:
        with open(broker.log_path, "rb") as f:
            f.seek(max(0, broker.log_path.stat().st_size - (64 << 20)))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        text = ""
    text = text[text.rfind("=== start:"):]
    if m := FATAL.search(text):
        why = m.group(0).strip()
    else:
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not
                 re.match(r"\s*(at |\.\.\. \d+ more|File \"|\^)", ln)]
        why = lines[-1] if len(lines) > 1 else "(no output)"
    return f"{broker.kind} exited with status {code}: {why[:500]}"


def hit_ceiling(got: dict[str, Any]) -> str | None:
    """A step's error that means larger counts will fail too (descriptors, memory)."""
    for step in got.values():
        if isinstance(step, dict) and FATAL.search(step.get("error", "")):
            return step["error"][:300]
    return None


# --- client processes -------------------------------------------------------------------


class Client:
    """One ``bench.scale_clients`` process, output in files (no pipe to fill up)."""

    count = 0
    live: set[Client] = set()

    def __init__(self, role: str, args: dict[str, Any], work: Path, barrier: bool = False,
                 ready_timeout: float = 60) -> None:
        Client.count += 1
        self.role = role
        stem = work / f"client-{Client.count:03d}-{role}"
        self.out_path, self.err_path = stem.with_suffix(".out"), stem.with_suffix(".err")
        self._out: IO[bytes] = open(self.out_path, "wb")  # noqa: SIM115 - closed in _close
        self._err: IO[bytes] = open(self.err_path, "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.scale_clients", role,
             json.dumps({**args, "barrier": barrier})],
            cwd=REPO, stdin=subprocess.PIPE if barrier else subprocess.DEVNULL,
            stdout=self._out, stderr=self._err, start_new_session=True)
        Client.live.add(self)
        if barrier:
            deadline = time.monotonic() + ready_timeout
            while b"ready" not in self.out_path.read_bytes():
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.kill()
                    raise StepError(f"{role} client not ready: {self._tail()}")
                time.sleep(0.01)

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()

    def _tail(self) -> str:
        """The client's last stderr line (a traceback's exception)."""
        lines = [ln.strip() for ln in self.err_path.read_text(errors="replace").splitlines()
                 if ln.strip() and not ln.startswith("%")]  # librdkafka's own log lines
        return lines[-1][-1500:] if lines else f"exit status {self.proc.returncode}"

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, 9)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        Client.live.discard(self)
        self._out.close()
        self._err.close()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def wait(self, broker: BrokerProcess, timeout: float,
             tick: Any = None) -> dict[str, Any]:
        """The client's JSON; StepError if it fails, overruns, or the broker dies or logs
        a fatal line meanwhile. ``tick()`` is called every ~10 ms."""
        deadline = time.monotonic() + timeout
        watch = LogWatch(broker)
        next_look = 0.0
        while self.proc.poll() is None:
            now = time.monotonic()
            if tick is not None:
                tick()
            if now > next_look:
                next_look = now + 0.5
                if not broker.alive():
                    self.kill()
                    raise StepError(death_reason(broker))
                if fatal := watch.fatal():
                    self.kill()
                    raise StepError(f"{broker.kind} logged: {fatal}")
            if now > deadline:
                self.kill()
                raise StepError(f"{self.role} timed out after {timeout:.0f}s")
            time.sleep(0.01)
        self._close()
        lines = [ln for ln in self.out_path.read_text().splitlines() if ln.startswith("{")]
        if self.proc.returncode != 0 or not lines:
            # The client often sees the connection drop before the broker has exited.
            for _ in range(40):
                if not broker.alive():
                    raise StepError(death_reason(broker))
                time.sleep(0.05)
            fatal = watch.fatal()
            raise StepError(f"{self.role} client failed: {self._tail()}"
                            + (f"; {broker.kind} logged: {fatal}" if fatal else ""))
        return json.loads(lines[-1])


# --- the broker's side of a step: its CPU time, and py-spy when asked -----------------------


class StepMeter:
    """The broker's user and sys CPU seconds over a step (was the step the broker's work
    or the client's?) and, for the steps named by ``--profile``, a py-spy profile of it
    (``--gil``: the broker's Python work; its system calls show as sys time)."""

    def __init__(self, broker: BrokerProcess | ClusterTarget, name: str, profile_dir: Path | None
                 ) -> None:
        self.pid = None if isinstance(broker, ClusterTarget) else measured_pid(broker)
        self.began = time.monotonic()
        self.cpu = cpu_times(self.pid) if self.pid else (0.0, 0.0)
        self.name = name
        self.raw = profile_dir / f"{name}.folded" if profile_dir and self.pid else None
        self.spy: profiling.PySpy | None = None
        self.spy_error: str | None = None
        # Attached from a thread: py-spy takes a while, and a restart's clock is running.
        self._attach = threading.Thread(target=self._start_spy, daemon=True)
        if self.raw is not None:
            self._attach.start()

    def _start_spy(self) -> None:
        assert self.raw is not None and self.pid is not None
        self.raw.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.spy = profiling.PySpy(self.pid, self.raw, rate=100)
        except profiling.ProfilerError as exc:
            self.spy_error = str(exc)[:300]

    def result(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step_wall_s": round(time.monotonic() - self.began, 3)}
        if self.pid:
            user, system = cpu_times(self.pid)
            out["broker_user_s"] = round(user - self.cpu[0], 2)
            out["broker_sys_s"] = round(system - self.cpu[1], 2)
        if self.raw is not None:
            self._attach.join(30)
            out["profile"] = self._profile()
        return out

    def _profile(self) -> dict[str, Any]:
        if self.spy is None:
            return {"error": self.spy_error or "py-spy did not attach"}
        try:
            raw = self.spy.stop()
        except profiling.ProfilerError as exc:
            return {"error": str(exc)[:300]}
        stacks = profiling.read_folded(raw)
        svg = raw.with_suffix(".svg")
        svg.write_text(profiling.flamegraph_svg(stacks, f"{self.name} (py-spy --gil)"))
        summary = profiling.summarize(stacks, top=10).as_dict()
        return {"svg": svg.name, "samples": summary["samples"], "self": summary["self"],
                "inclusive": summary["inclusive"]}


# --- the bench --------------------------------------------------------------------------


def topics_for(prefix: str, partitions: int) -> list[list[Any]]:
    """[[name, count]]: ``partitions`` in topics of at most TOPIC_MAX."""
    out, left, i = [], partitions, 0
    while left > 0:
        out.append([f"{prefix}-{i:03d}", min(TOPIC_MAX, left)])
        left -= TOPIC_MAX
        i += 1
    return out


def du(path: Path, prefix: str) -> tuple[int, int]:
    """(segment files, their bytes) of the ``prefix`` topics in a log dir."""
    count = size = 0
    for f in path.glob(f"{prefix}-*/*.log"):
        count += 1
        with contextlib.suppress(OSError):
            size += f.stat().st_size
    return count, size


class Scale:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.root = (args.data_dir / f"scale-{time.strftime('%Y%m%d-%H%M%S')}").resolve()
        self.logs = args.out / "logs"
        self.work = self.root / "clients"
        self.result: dict[str, Any] = {}
        self.zookeeper: ZooKeeper | None = None
        # A cluster's topics have three replicas, written with acks=all.
        self.replicas, self.acks = (3, "all") if args.cluster else (1, 1)
        self.count = 0  # the partition count being measured (names the profiles)

    def timeout(self, partitions: int) -> float:
        return self.args.timeout + self.args.timeout_per_partition * partitions

    def broker(self, kind: str, name: str, **extra: str) -> Any:
        """One broker, or with --cluster three (a ClusterTarget)."""
        if self.zookeeper is not None:
            return new_target(kind, self.zookeeper, self.root / f"{kind}-{name}", self.logs,
                              tag=f"-{name}")
        return BrokerProcess(kind, self.root / f"{kind}-{name}", log_path=self.logs /
                             f"{kind}-{name}.log", overrides={**OVERRIDES, **extra})

    def start(self, broker: Any) -> float:
        if broker.kind == "kafka" and isinstance(broker, BrokerProcess):
            broker.format_kafka()
        try:
            return broker.start(self.args.timeout)
        except BrokerError as exc:
            raise StepError(str(exc)[:1500]) from None

    def check(self, broker: BrokerProcess) -> None:
        if not broker.alive():
            raise StepError(death_reason(broker))

    def client(self, broker: BrokerProcess, role: str, timeout: float,
               **args: Any) -> dict[str, Any]:
        self.check(broker)
        meter = self.meter(broker, role)
        c = Client(role, {"bootstrap": broker.bootstrap, "timeout": timeout, **args}, self.work)
        try:
            got = c.wait(broker, timeout + 30)
        finally:
            measured = meter.result()  # py-spy stopped whatever happened
        return {**got, **measured}

    def meter(self, broker: BrokerProcess | ClusterTarget, step: str) -> StepMeter:
        profiled = step in self.args.profile
        return StepMeter(broker, f"{broker.kind}-{self.count}-{step}",
                         self.args.out / "profiles" if profiled else None)

    def restart(self, broker: BrokerProcess, how: str, role: str, timeout: float,
                done_key: str, **args: Any) -> dict[str, Any]:
        """Stop (SIGKILL or SIGTERM until exit), then time a start from spawn to the port
        open and to the probe client's ``done_key`` time."""
        out: dict[str, Any] = {}
        if how == "kill":
            broker.stop(kill=True)
            if isinstance(broker, ClusterTarget):
                out["registrations_gone_s"] = round(broker.wait_unregistered(timeout), 3)
        else:
            self.check(broker)
            began = time.monotonic()
            broker.stop(timeout=timeout)
            out["stop_s"] = round(time.monotonic() - began, 3)
            if broker.proc is None and out["stop_s"] >= timeout:
                out["stop_note"] = f"no exit {timeout:.0f}s after SIGTERM: killed"
        probe = Client(role, {"bootstrap": broker.bootstrap, "timeout": timeout,
                              "acks": self.acks, **args}, self.work, barrier=True)
        spawned = broker.spawn()
        probe.go()
        meter = self.meter(broker, f"restart_{how}")
        listen: list[float] = []

        def tick() -> None:
            if not listen and listening(broker):
                listen.append(time.monotonic() - spawned)

        try:
            got = probe.wait(broker, timeout + 30, tick)
        except StepError as exc:
            meter.result()
            raise StepError(f"{exc} (listening after {listen[0]:.2f}s)" if listen
                            else str(exc)) from None
        while not listen and time.monotonic() - spawned < timeout:
            tick()  # answered before the first look at the port
        out["listen_s"] = round(listen[0], 3) if listen else None
        out["ready_s"] = round(got[done_key] / 1e9 - spawned, 3)
        out.update(proc_state(broker))
        out.update(meter.result())
        out["probe"] = {k: v for k, v in got.items() if not k.endswith("_ns")}
        return out

    def step(self, into: dict[str, Any], name: str, fn: Any) -> bool:
        """Run one step into ``into[name]``; False when it failed."""
        try:
            into[name] = fn()
            log(f"{name}: {scale_report.brief(name, into[name])}")
            return True
        except (StepError, BrokerError, OSError) as exc:
            into[name] = {"error": str(exc)[:2000]}
            log(f"{name}: failed: {str(exc)[:400]}")
            return False
        finally:
            scale_report.write(self.result, self.args.out, draw=False)

    # --- 1. partitions ------------------------------------------------------------------

    def partitions(self, kind: str, n: int, into: dict[str, Any]) -> str | None:
        """Every measure at ``n`` partitions; why larger counts are pointless, if so."""
        args = self.args
        timeout = self.timeout(n)
        self.count = n
        topics = topics_for("scale", n)
        broker = self.broker(kind, f"p{n}")
        try:
            if not self.step(into, "start", lambda: {"ready_s": round(self.start(broker), 3)}):
                return f"did not start at {n:,} partitions"
            if not self.step(into, "create", lambda: self.client(
                    broker, "create", timeout, topics=topics,
                    replication_factor=self.replicas)):
                return f"failed to create {n:,} partitions: {into['create']['error'][:200]}"
            self.step(into, "metadata", lambda: scale_report.metadata_summary(self.client(
                broker, "metadata", timeout, calls=args.metadata_calls)))
            messages = max(args.messages, n)
            produced = self.step(into, "produce", lambda: self.client(
                broker, "produce", timeout, topics=topics, messages=messages,
                size=MESSAGE_SIZE, acks=self.acks))
            if produced:
                expect = into["produce"]["acked"] + into["produce"]["warm_up"]
                self.step(into, "fetch", lambda: self.client(
                    broker, "fetch", timeout, topics=topics, expect=expect))
            if not broker.alive():
                into["load"] = {"error": death_reason(broker)}
                return into["load"]["error"]
            if why := hit_ceiling(into):
                into["load"] = {"error": f"skipped after: {why}"}
                return why
            self.step(into, "load", lambda: proc_state(broker))
            for how in () if args.no_restarts else ("kill", "clean"):
                if not self.step(into, f"restart_{how}", lambda how=how: self.restart(
                        broker, how, "probe-produce", timeout, "all_acked_ns", topics=topics)) \
                        and not broker.alive():
                    return into[f"restart_{how}"]["error"][:300]
            return hit_ceiling(into)
        finally:
            broker.stop(kill=True)
            if not args.keep_data:
                shutil.rmtree(broker.data_dir, ignore_errors=True)

    # --- 2. big log ---------------------------------------------------------------------

    def biglog(self, kind: str, into: dict[str, Any]) -> None:
        cfg = self.result["config"]["biglog"]
        parts, total = cfg["partitions"], cfg["bytes"]
        topics = topics_for("biglog", parts)
        timeout = self.timeout(parts) + total / (5 * MIB)
        broker = self.broker(kind, "biglog")
        try:
            free = shutil.disk_usage(self.root).free
            if free < total * 1.3 + (2 << 30):
                into["fill"] = {"error": f"{free / 2**30:.1f} GiB free for "
                                         f"{total / 2**30:.1f} GiB"}
                return
            if not self.step(into, "start", lambda: {"ready_s": round(self.start(broker), 3)}):
                return
            if not self.step(into, "create", lambda: self.client(
                    broker, "create", self.timeout(parts), topics=topics,
                    config={"segment.bytes": SEGMENT_BYTES})):
                return
            if not self.step(into, "fill", lambda: self.client(
                    broker, "fill", timeout, topics=topics, bytes=total, size=FILL_VALUE)):
                return

            def loaded() -> dict[str, Any]:
                segments, size = du(broker.data_dir, "biglog")
                return {**proc_state(broker), "segments": segments, "log_bytes": size}

            self.step(into, "load", loaded)
            for how in ("kill", "clean"):
                if not self.step(into, f"restart_{how}", lambda how=how: self.restart(
                        broker, how, "probe-fetch", timeout, "fetched_ns",
                        topic=topics[0][0], partition=0)) and not broker.alive():
                    return
        finally:
            broker.stop(kill=True)
            if not self.args.keep_data:
                shutil.rmtree(broker.data_dir, ignore_errors=True)

    # --- the run ------------------------------------------------------------------------

    def run(self) -> int:
        args = self.args
        why = (cluster_available(args.broker_list) if args.cluster else None) or prepare_run(
            [] if args.cluster else args.broker_list, args.out, self.logs, self.root)
        if why:
            print(f"cannot start Apache Kafka: {why}", file=sys.stderr)
            return 2
        self.work.mkdir(parents=True, exist_ok=True)
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft < hard:  # the brokers inherit it (josefk raises its own too)
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        machine = report.machine_info(self.root)
        machine["nofile_limit"] = list(resource.getrlimit(resource.RLIMIT_NOFILE))
        with contextlib.suppress(OSError):
            machine["vm_max_map_count"] = int(Path("/proc/sys/vm/max_map_count").read_text())
        segments = max(1, round(BIGLOG_FULL["segments"] * args.biglog_scale))
        self.result = {
            "label": "quick" if args.quick else f"scale {args.scale:g}",
            "started": report.now_iso(), "machine": machine,
            "config": {"order": args.broker_list, "partitions": args.partition_list,
                       "scale": args.scale, "biglog_scale": args.biglog_scale,
                       "topic_max": TOPIC_MAX, "messages": args.messages,
                       "message_size": MESSAGE_SIZE, "metadata_calls": args.metadata_calls,
                       "timeout": args.timeout,
                       "timeout_per_partition": args.timeout_per_partition,
                       "overrides_both": (_cluster_keys() if args.cluster
                                          else {**SINGLE_NODE_OVERRIDES, **OVERRIDES}),
                       "brokers": 3 if args.cluster else 1,
                       "replication_factor": self.replicas, "acks": self.acks,
                       "kafka_version": kafka39_version() if args.cluster else None,
                       "biglog": {"bytes": segments * SEGMENT_BYTES, "segments": segments,
                                  "partitions": max(1, round(BIGLOG_FULL["partitions"]
                                                             * args.biglog_scale)),
                                  "segment_bytes": SEGMENT_BYTES, "value_size": FILL_VALUE}},
            "partitions": {}, "biglog": {}, "notes": []}
        given_up: dict[str, str] = {}
        log(f"scale bench: {' / '.join(args.broker_list)}; partitions "
            f"{', '.join(f'{n:,}' for n in args.partition_list)}; big log "
            f"{self.result['config']['biglog']}; data in {self.root}")
        try:
            if args.cluster:
                self.zookeeper = ZooKeeper(self.root / "zookeeper", self.logs / "zookeeper.log")
                self.zookeeper.start()
            for n in args.partition_list if "partitions" in args.dims else []:
                row = self.result["partitions"].setdefault(str(n), {})
                for kind in args.broker_list:
                    log.prefix = f"{n:,} partitions · {kind} · "
                    if kind in given_up:
                        row[kind] = {"skipped": given_up[kind]}
                        log(f"skipped: {given_up[kind]}")
                        continue
                    row[kind] = {}
                    if why := self.partitions(kind, n, row[kind]):
                        given_up[kind] = why
            for kind in args.broker_list if "biglog" in args.dims else []:
                log.prefix = f"big log · {kind} · "
                self.biglog(kind, self.result["biglog"].setdefault(kind, {}))
        except KeyboardInterrupt:
            self.result["notes"].append("interrupted (Ctrl-C): results are partial")
        finally:
            for client in list(Client.live):  # in their own sessions: Ctrl-C missed them
                client.kill()
            if self.zookeeper is not None:
                self.zookeeper.stop()
            log.prefix = ""
            self.result["finished"] = report.now_iso()
            machine["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
            paths = scale_report.write(self.result, args.out)
            if not args.keep_data:
                shutil.rmtree(self.root, ignore_errors=True)
        print(scale_report.markdown(self.result).split("\n## Machine")[0])
        for p in paths:
            log(f"wrote {p}")
        return 0


def _cluster_keys() -> dict[str, str]:
    """The configuration both clusters' brokers get (bench/cluster_brokers.py)."""
    keys = broker_config(1, 0, Path("-"), "zookeeper")
    return {k: v for k, v in keys.items() if k not in ("broker.id", "listeners", "log.dirs",
                                                      "zookeeper.connect")}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cluster", action="store_true",
                        help="three brokers with replication factor 3 and acks=all (Kafka "
                             "3.9.1 in ZooKeeper mode); partitions only, default 10, 1,000 "
                             "and 10,000 times --scale")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 10 and 1,000 partitions, a 200 MiB big log")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies the partition counts and the big log (default 1)")
    parser.add_argument("--partitions", default=None,
                        help="partition counts, e.g. 10,1000,10000 (overrides --scale's)")
    parser.add_argument("--biglog-scale", type=float, default=None,
                        help="big log size: 20 GiB, 10,000 segments, 1,000 partitions times "
                             "this (default --scale; 0.01 with --quick)")
    parser.add_argument("--dims", default="partitions,biglog",
                        help="which dimensions: partitions, biglog (default both)")
    parser.add_argument("--brokers", default="josefk,kafka", help="which, in order")
    parser.add_argument("--messages", type=int, default=None,
                        help="messages produced and fetched (default 300,000; 50,000 with "
                             "--quick; at least one per partition)")
    parser.add_argument("--metadata-calls", type=int, default=20)
    parser.add_argument("--no-restarts", action="store_true",
                        help="partitions: stop after the load (no kill/clean restarts)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds a step may take, plus --timeout-per-partition")
    parser.add_argument("--timeout-per-partition", type=float, default=0.03)
    parser.add_argument("--profile", default="",
                        help="py-spy (--gil) on the broker during these steps, e.g. "
                             "produce,restart_kill: flame graphs in OUT/profiles, the top "
                             "frames in results.json (create, metadata, produce, fetch, "
                             "restart_kill, restart_clean)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--data-dir", type=Path, default=REPO / "bench" / "results" / "tmp")
    parser.add_argument("--keep-data", action="store_true",
                        help="keep the brokers' data dirs (the big logs too: mind the disk)")
    parser.add_argument("--report", type=Path, default=None,
                        help="only rewrite results.md and the plots from this results.json")
    args = parser.parse_args(argv)
    if args.partitions:
        args.partition_list = [int(p.replace("_", "")) for p in args.partitions.split(",")]
    elif args.quick:
        args.partition_list = [10, 1_000]
    else:
        full = CLUSTER_PARTITIONS if args.cluster else FULL_PARTITIONS
        args.partition_list = sorted({max(1, round(n * args.scale)) for n in full})
    if args.biglog_scale is None:
        args.biglog_scale = 0.01 if args.quick else args.scale
    if args.messages is None:
        args.messages = 50_000 if args.quick else 300_000
    results = RESULTS / "cluster" if args.cluster else RESULTS
    args.out = args.out or (results / "quick" if args.quick else results)
    args.dims = {d.strip() for d in args.dims.split(",") if d.strip()}
    args.profile = {s.strip() for s in args.profile.split(",") if s.strip()}
    if args.cluster:
        args.dims = {"partitions"}
    args.broker_list = broker_list(parser, args.brokers)
    if args.dims - {"partitions", "biglog"} or not args.dims:
        parser.error("dimensions are partitions and biglog")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report:
        result = json.loads(args.report.read_text())
        for p in scale_report.write(result, args.report.parent):
            print(f"wrote {p}")
        return 0
    return Scale(args).run()


if __name__ == "__main__":
    sys.exit(main())
