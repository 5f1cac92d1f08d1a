"""The scale bench's producers: one librdkafka instance per slice of whole topics."""

import pytest

from bench import scale_clients
from bench.scale_clients import Producers

# Never contacted: the instances are only built.
CONFIG = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0}


def test_topics_are_shared_out_in_slices_of_at_most_the_producer_partitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scale_clients, "PRODUCER_PARTITIONS", 4_000)
    producers = Producers(CONFIG, [["a", 2_000], ["b", 2_000], ["c", 2_000], ["d", 1_000],
                                   ["e", 1_000], ["f", 3_000]])
    assert len(producers.instances) == 3
    first, second, third = producers.instances
    assert [producers._of[t] for t in "abcdef"] == [first, first, second, second, second,
                                                    third]


def test_up_to_the_producer_partitions_one_producer_serves_every_topic() -> None:
    producers = Producers(CONFIG, [[f"t{i}", 2_000] for i in range(5)])
    assert len(producers.instances) == 1
