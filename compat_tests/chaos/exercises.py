"""What a chaos run does between starting the cluster and checking the history: one
function per workload (queue, txn, groups), each running its clients and the nemesis on
threads, healing, and writing the final reads."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..cluster.harness import Cluster
from . import compaction, net
from .ensemble import zk_node_names
from .group_workload import GroupChurn, GroupWorkload, final_offsets, observe_offsets
from .history import History
from .nemesis import Nemesis
from .txn_workload import (
    Transformer,
    TxnProducerProcess,
    TxnWorkload,
    committed_consumer,
    fill_input,
    final_read_committed,
)
from .workload import (
    ProducerProcess,
    Workload,
    assigned_consumer,
    final_read,
    group_consumer,
)

if TYPE_CHECKING:
    from .run import Options

log = logging.getLogger("chaos")

TOPIC = "chaos"
# How long the cluster may take to be whole again after the last heal.
RECOVERY_TIMEOUT = 120.0
FINAL_READ_TIMEOUT = 120.0


class HarnessError(RuntimeError):
    """The run could not complete (a broker would not start, the final read stalled)."""



class _Starter:
    """Starts daemon threads and remembers what they raised."""

    def __init__(self) -> None:
        self.threads: list[threading.Thread] = []
        self.failures: list[BaseException] = []

    def __call__(self, target: Any, *args: Any) -> threading.Thread:
        def body() -> None:
            try:
                target(*args)
            except BaseException as exc:  # noqa: BLE001 - reported by the runner
                log.exception("%s failed", getattr(target, "__qualname__", target))
                self.failures.append(exc)

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        self.threads.append(thread)
        return thread


@contextlib.contextmanager
def _threads(*stops: threading.Event) -> Iterator[_Starter]:
    """Threads that all end once every event in ``stops`` is set, as it is on the way out."""
    starter = _Starter()
    try:
        yield starter
    finally:
        for stop in stops:
            stop.set()
        for thread in starter.threads:
            thread.join(timeout=60)
    if starter.failures:
        raise HarnessError(f"a workload thread failed: {starter.failures[0]!r}")





def _nemesis(options: Options, faults: list[str], cluster: Cluster,
             network: net.Network | None, history: History) -> Nemesis:
    return Nemesis(cluster, network, history, options.topic, options.partitions, faults,
                   options.seed, options.schedule, zk_nodes=zk_node_names(options.zookeepers))


def _faults_then_heal(options: Options, start: _Starter, stops: tuple[threading.Event, ...],
                      sending: list[threading.Thread], cluster: Cluster, history: History,
                      topics: dict[str, int]) -> None:
    """The nemesis (the first thread started) for the run's duration; then the heal: the
    senders stop, every broker runs again and every topic is back in sync."""
    stop_faults, stop_sends = stops
    stop_faults.wait(options.duration)
    stop_faults.set()
    start.threads[0].join()
    if options.healed is not None:  # faults injected elsewhere (the soak): wait for the heal
        options.healed.wait()
    if start.failures:
        raise HarnessError(f"a thread failed: {start.failures[0]!r}")
    history.record("phase", name="healed")
    stop_sends.set()
    for thread in sending:
        thread.join()
    cluster.restore()
    for topic, partitions in topics.items():
        cluster.wait_in_sync(topic, partitions, timeout=RECOVERY_TIMEOUT)


def _final_reads(history: History, nemesis: Nemesis, *reads: tuple[str, Any]) -> None:
    """Each ``(what, read)``: ``read()`` must reach every high watermark in time."""
    history.record("phase", name="final-read")
    for what, read in reads:
        if not read():
            raise HarnessError(f"the final read of {what} did not reach every high "
                               f"watermark within {FINAL_READ_TIMEOUT:.0f}s")
    history.record("phase", name="done")
    log.info("nemesis injected %d faults", nemesis.injected)


def _exercise(options: Options, faults: list[str], cluster: Cluster,
              network: net.Network | None, history: History) -> None:
    """Idempotent producers, a consumer by assignment and two in a group."""
    cluster.create_topic(options.topic, options.partitions, 3, {"min.insync.replicas": "2"})
    workload = Workload(",".join(b.bootstrap for b in cluster.brokers.values()), options.topic,
                        options.partitions, options.producers, options.rate,
                        max_in_flight=options.max_in_flight)
    stop_faults, stop_sends, stop_polls = threading.Event(), threading.Event(), threading.Event()
    nemesis = _nemesis(options, faults, cluster, network, history)
    producers = [ProducerProcess(i, workload, history) for i in range(options.producers)]
    with _threads(stop_faults, stop_sends, stop_polls) as start:
        start(nemesis.run, stop_faults)
        sending = [start(p.run, stop_sends) for p in producers]
        start(assigned_consumer, workload, history, stop_polls)
        for i in range(1, workload.group_consumers + 1):
            start(group_consumer, i, workload, history, stop_polls)
        _faults_then_heal(options, start, (stop_faults, stop_sends), sending, cluster, history,
                          {options.topic: options.partitions})
        stop_polls.set()
    _final_reads(history, nemesis,
                 (options.topic, lambda: final_read(workload, history, FINAL_READ_TIMEOUT)))


def _exercise_txn(options: Options, faults: list[str], cluster: Cluster,
                  network: net.Network | None, history: History) -> None:
    """Transactional producers, a read_committed consumer and the transformer under the
    nemesis; then, once healed and the transformer has caught up, the final reads."""
    workload = TxnWorkload(",".join(b.bootstrap for b in cluster.brokers.values()), options.topic,
                           options.partitions, options.producers)
    topics = {options.topic: options.partitions, workload.input_topic: 3, workload.output_topic: 3}
    for topic, partitions in topics.items():
        cluster.create_topic(topic, partitions, 3, {"min.insync.replicas": "2"})
    fill_input(workload, history)
    stop_faults, stop_sends, stop_polls = threading.Event(), threading.Event(), threading.Event()
    nemesis = _nemesis(options, faults, cluster, network, history)
    transformer = Transformer(workload, history)
    producers = [TxnProducerProcess(i, workload, history) for i in range(options.producers)]
    with _threads(stop_faults, stop_sends, stop_polls) as start:
        start(nemesis.run, stop_faults)
        sending = [start(p.run, stop_sends) for p in producers]
        transforming = start(transformer.run, stop_polls)
        start(committed_consumer, workload, history, stop_polls)
        _faults_then_heal(options, start, (stop_faults, stop_sends), sending, cluster, history,
                          topics)
        deadline = time.monotonic() + RECOVERY_TIMEOUT
        while not transformer.caught_up():
            if time.monotonic() > deadline:
                raise HarnessError("the transformer did not consume every input in time")
            time.sleep(2.0)
        stop_polls.set()
        transforming.join()
    _final_reads(history, nemesis, *(
        (topic, lambda topic=topic, n=n: final_read_committed(
            workload, topic, n, history, FINAL_READ_TIMEOUT))
        for topic, n in ((options.topic, options.partitions), (workload.output_topic, 3))))


def _exercise_groups(options: Options, faults: list[str], cluster: Cluster,
                     network: net.Network | None, history: History) -> None:
    """Group members joining, leaving and killed while producers write and the nemesis
    runs; then every member stops, the group's final offsets and the final read."""
    cluster.create_topic(options.topic, options.partitions, 3, {"min.insync.replicas": "2"})
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers.values())
    workload = Workload(bootstrap, options.topic, options.partitions, options.producers,
                        options.rate / 2, max_in_flight=options.max_in_flight)
    members = GroupWorkload(bootstrap, options.topic, options.partitions)
    churn = GroupChurn(members, history, options.seed)
    stop_faults, stop_sends, stop_churn = threading.Event(), threading.Event(), threading.Event()
    stop_observer = threading.Event()
    nemesis = _nemesis(options, faults, cluster, network, history)
    producers = [ProducerProcess(i, workload, history) for i in range(options.producers)]
    with _threads(stop_faults, stop_sends, stop_churn, stop_observer) as start:
        start(nemesis.run, stop_faults)
        sending = [start(p.run, stop_sends) for p in producers]
        churning = start(churn.run, stop_churn)
        start(observe_offsets, members, history, stop_observer)
        try:
            _faults_then_heal(options, start, (stop_faults, stop_sends), sending, cluster,
                              history, {options.topic: options.partitions})
            stop_churn.set()
            churning.join()
            time.sleep(10.0)  # the members left settle and commit what they read
        finally:  # a failed run leaves no member process behind
            stop_churn.set()
            churning.join()
            churn.stop_all()
        stop_observer.set()
    final_offsets(members, history, RECOVERY_TIMEOUT)
    _final_reads(history, nemesis,
                 (options.topic, lambda: final_read(workload, history, FINAL_READ_TIMEOUT)))


def _exercise_compact(options: Options, faults: list[str], cluster: Cluster,
                      network: net.Network | None, history: History) -> None:
    """One idempotent producer overwriting and deleting keys of a compacted topic while the
    cleaner runs and the nemesis strikes; then the final read of what compaction left."""
    cluster.create_topic(options.topic, options.partitions, 3, compaction.TOPIC_CONFIG)
    workload = Workload(",".join(b.bootstrap for b in cluster.brokers.values()),
                        options.topic, options.partitions, 1, options.rate,
                        max_in_flight=options.max_in_flight)
    stop_faults, stop_sends = threading.Event(), threading.Event()
    nemesis = _nemesis(options, faults, cluster, network, history)
    producer = ProducerProcess(0, workload, history, compaction.keyed)
    with _threads(stop_faults, stop_sends) as start:
        start(nemesis.run, stop_faults)
        sending = [start(producer.run, stop_sends)]
        _faults_then_heal(options, start, (stop_faults, stop_sends), sending, cluster, history,
                          {options.topic: options.partitions})
    _final_reads(history, nemesis, (options.topic, lambda: final_read(
        workload, history, FINAL_READ_TIMEOUT, compaction.final_row)))


EXERCISES: dict[str, Any] = {"queue": _exercise, "txn": _exercise_txn,
                             "groups": _exercise_groups, "compact": _exercise_compact}
