"""The pure parts of bench/fleet: the Metadata walk (against kafka-python's decoder), the
wait conditions, the size checks and the report's cells and ratios."""

from __future__ import annotations

import uuid

from kafka.protocol.metadata import MetadataResponse

from bench.fleet import measures
from bench.fleet.__main__ import topics_for
from bench.fleet.measures import record_batches
from bench.fleet.metadata import VERSION, View, parse
from bench.fleet.nodes import JVM_OVERHEAD_MIB, ZOOKEEPER_MIB, Size, heap_mib, needed_mib, refusal
from bench.fleet.report import FIGURES, markdown, ratio, value


def _response() -> bytes:
    V = VERSION
    topic, part = MetadataResponse.MetadataResponseTopic, \
        MetadataResponse.MetadataResponseTopic.MetadataResponsePartition
    topics = [
        topic(version=V, error_code=0, name="a", topic_id=uuid.uuid4(), is_internal=False,
              partitions=[
                  part(version=V, error_code=0, partition_index=i, leader_id=i % 3 + 1,
                       leader_epoch=4, replica_nodes=[1, 2, 3], isr_nodes=[1, 2, 3][:i + 1],
                       offline_replicas=[3] if i == 2 else []) for i in range(3)]),
        topic(version=V, error_code=3, name="gone", topic_id=uuid.uuid4(), is_internal=False,
              partitions=[]),
        topic(version=V, error_code=0, name="b", topic_id=uuid.uuid4(), is_internal=True,
              partitions=[
                  part(version=V, error_code=5, partition_index=0, leader_id=-1,
                       leader_epoch=-1, replica_nodes=[2], isr_nodes=[],
                       offline_replicas=[2])]),
    ]
    brokers = [MetadataResponse.MetadataResponseBroker(
        version=V, node_id=i, host="127.0.0.1", port=9000 + i, rack="r1" if i == 2 else None)
        for i in (1, 2, 3)]
    response = MetadataResponse(version=V, throttle_time_ms=0, brokers=brokers,
                                cluster_id=None, controller_id=2, topics=topics)
    return b"\x00\x00\x00\x07" + bytes(response.encode(version=V))  # correlation id 7


def test_the_metadata_walk_reads_what_kafka_python_decodes() -> None:
    frame = _response()
    view = parse(frame, at=1.5)
    decoded = MetadataResponse.decode(frame[4:], version=VERSION)
    want = [(t.name, p.partition_index, p.leader_id, tuple(p.replica_nodes),
              tuple(p.isr_nodes))
            for t in decoded.topics for p in t.partitions]
    assert view.partitions == want
    assert len(want) == 4
    assert (view.at, view.controller, view.brokers) == (1.5, 2, frozenset({1, 2, 3}))


def _view(*partitions: tuple[str, int, int, tuple[int, ...], tuple[int, ...]],
          controller: int = 1) -> View:
    return View(0.0, controller, frozenset({1, 2, 3}), list(partitions))


def test_conditions_need_every_partition_and_look_at_each() -> None:
    expected = {"t": 2}
    full = _view(("t", 0, 1, (1, 2, 3), (1, 2, 3)), ("t", 1, 2, (2, 3, 1), (2, 3, 1)))
    half = _view(("t", 0, 1, (1, 2, 3), (1, 2, 3)))
    shrunk = _view(("t", 0, 1, (1, 2, 3), (1, 2)), ("t", 1, 2, (2, 3, 1), (2, 1)))
    assert measures.led_by(expected, {1, 2})(full)
    assert not measures.led_by(expected, {1, 3})(full)
    assert not measures.led_by(expected, {1, 2})(half)  # a partition missing
    assert measures.in_sync(expected)(full) and not measures.in_sync(expected)(shrunk)
    assert measures.out_of_isr(expected, 3)(shrunk) and not measures.out_of_isr(expected, 3)(full)
    assert measures.back_in_isr(expected, 3)(full)
    assert not measures.back_in_isr(expected, 3)(shrunk)
    assert measures.leads_none(expected, 3)(full) and not measures.leads_none(expected, 2)(full)
    assert measures.new_controller(1)(_view(controller=3))
    assert not measures.new_controller(1)(_view(controller=-1))


def test_topics_split_the_partitions() -> None:
    assert topics_for(300, 100) == {"fleet-0000": 100, "fleet-0001": 100, "fleet-0002": 100}
    assert sum(topics_for(100_001, 2000).values()) == 100_001
    assert len(topics_for(100_001, 2000)) == 51


def test_sizes_that_do_not_fit_are_refused() -> None:
    assert heap_mib("-Xmx512m -Xms512m") == 512 and heap_mib("-Xmx1G") == 1024
    kafka10 = Size("kafka", 10, 10_000)
    assert needed_mib(kafka10, "-Xmx512m") == 10 * (512 + JVM_OVERHEAD_MIB) + ZOOKEEPER_MIB
    why = refusal(kafka10, "-Xmx512m", free_mib=8_000, nofile=65_536)
    assert why is not None and "MemAvailable 8,000 MiB" in why
    assert refusal(kafka10, "-Xmx512m", free_mib=20_000, nofile=65_536) is None
    # 100,000 partitions x 3 on 5 Kafka brokers: 60,000 open segments each.
    why = refusal(Size("kafka", 5, 100_000), "-Xmx512m", free_mib=20_000, nofile=20_000)
    assert why is not None and "RLIMIT_NOFILE" in why
    assert refusal(Size("josefk", 100, 100_000), "", free_mib=20_000, nofile=20_000) is None


def _result(josefk: dict, kafka: dict) -> dict:
    return {"config": {"smoke": True, "topic_max": 100, "replication": 3,
                       "kafka_heap": "-Xmx512m", "overrides": {"num.partitions": "1"}},
            "runs": {"3x300": {"brokers": 3, "partitions": 300, "josefk": josefk,
                               "kafka": kafka}}}


def test_a_timeout_is_never_a_figure() -> None:
    leaders = next(f for f in FIGURES if f.field == "leaders_s")
    exits = next(f for f in FIGURES if f.field == "exit_s")
    josefk = {"failover": {"timeout": "every partition led: not seen in 120s"},
              "shutdown": {"exit_s": 1.0, "moved_s": 0.5},
              "skipped": "the steps after failover (it did not finish)"}
    kafka = {"failover": {"controller_s": 6.5, "leaders_s": 7.0},
             "shutdown": {"exit_s": 4.0, "moved_s": 1.0}}
    assert value(leaders, josefk) is None and value(leaders, kafka) == 7.0
    assert ratio(value(exits, josefk), value(exits, kafka)) == "0.25"
    assert ratio(None, 7.0) == "–" and ratio(1.0, None) == "–"
    md = markdown(_result(josefk, kafka))
    row = next(line for line in md.splitlines() if line.startswith(f"| {leaders.label}"))
    assert "*timeout* / 7.00 (–)" in row
    restart = next(f for f in FIGURES if f.step == "restart_kill")
    row = next(line for line in md.splitlines() if line.startswith(f"| {restart.label}"))
    assert "*skipped* / *not run* (–)" in row
    assert "SMOKE" in md and "every partition led: not seen in 120s" in md


def test_topics_go_in_requests_of_at_most_ten_thousand_records() -> None:
    topics = {f"t{i}": 2000 for i in range(5)} | {"one": 100}
    batches = record_batches(topics)
    assert [list(b) for b in batches] == [["t0", "t1", "t2", "t3"], ["t4", "one"]]
    assert all(sum(1 + n for n in b.values()) <= 10_000 for b in batches)
    assert record_batches({"huge": 20_000, "small": 1}) == [{"huge": 20_000}, {"small": 1}]
