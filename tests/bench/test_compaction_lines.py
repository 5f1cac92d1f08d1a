"""The compaction bench reads each broker's own coordinator load line from its log."""

from bench.compaction import own_load_ms

JOSEFK_LOG = """\
2026-11-29 04:53:19,496 INFO josefk.cluster.coordinator.group.partitions: loaded 0 groups \
from 49 __consumer_offsets partitions in 0 ms
2026-11-29 04:53:20,137 INFO josefk.cluster.coordinator.group.partitions: loaded \
__consumer_offsets-12 in the background in 91 ms
2026-11-29 04:53:20,137 INFO josefk.cluster.coordinator.group.partitions: loaded \
__consumer_offsets-44 in the background in 628 ms
"""

KAFKA_LOG = """\
[2026-11-29 04:52:40,101] INFO [GroupCoordinator id=1] \
Finished loading of metadata from __consumer_offsets-3 with epoch 0 in 2ms where 1ms was \
spent in the scheduler. Loaded 0 records which total to 0 bytes. \
(org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)
[2026-11-29 04:52:40,560] INFO [GroupCoordinator id=1] \
Finished loading of metadata from __consumer_offsets-44 with epoch 0 in 459ms where 3ms was \
spent in the scheduler. Loaded 1000000 records which total to 84934656 bytes. \
(org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)
"""


def test_a_background_load_is_read_for_its_own_partition() -> None:
    assert own_load_ms("josefk", JOSEFK_LOG, "__consumer_offsets-44") == 628
    assert own_load_ms("josefk", JOSEFK_LOG, "__consumer_offsets-12") == 91


def test_a_partition_loaded_before_the_port_opened_takes_the_start_up_line() -> None:
    text = ("... INFO josefk.cluster.coordinator.group.partitions: loaded 1 groups from 50 "
            "__consumer_offsets partitions in 3 ms\n")
    assert own_load_ms("josefk", text, "__consumer_offsets-44") == 3


def test_kafkas_line_is_read_for_the_partition_asked_about() -> None:
    assert own_load_ms("kafka", KAFKA_LOG, "__consumer_offsets-44") == 459
    assert own_load_ms("kafka", KAFKA_LOG, "__consumer_offsets-3") == 2
    assert own_load_ms("kafka", KAFKA_LOG, "__consumer_offsets-7") is None
    assert own_load_ms("kafka", JOSEFK_LOG, "__consumer_offsets-44") is None
