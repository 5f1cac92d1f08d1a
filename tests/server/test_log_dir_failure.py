"""One broker (in-process) with two log directories, the second on a FUSE file system
switched to return EIO: the failed directory goes offline (KAFKA_STORAGE_ERROR for its
partitions, DescribeLogDirs and the OfflineLogDirectoryCount gauge say so), the other
one serves on, and when the last directory fails the broker halts."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaStorageError

from josefk.testing.inprocess import BrokerAddress, InProcessBroker
from josefk.testing.polling import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server" / "metrics"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from metrics_scrape import scrape, value  # noqa: E402

from compat_tests.chaos import disk  # noqa: E402

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(disk.available() is not None, reason=disk.available() or "")]

OFFLINE_DIRS = "kafka_log_logmanager_offlinelogdirectorycount"


@pytest.fixture
def eio(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the backing directory, the EIO-on-demand file system over it)."""
    with disk.eio_fs(tmp_path) as dirs:
        yield dirs


@pytest.fixture
def halts() -> list[int]:
    """The broker's halts (recorded: a real one would end the test process)."""
    return []


@pytest.fixture
def broker(tmp_path: Path, eio: tuple[Path, Path], halts: list[int]
           ) -> Iterator[BrokerAddress]:
    server = InProcessBroker(tmp_path / "healthy", {
        "log.dirs": f"{tmp_path / 'healthy'},{eio[1]}", "metrics.port": "0"})
    server.start()
    server.broker.log_dir_failures.halt = halts.append
    try:
        yield BrokerAddress(server)
    finally:
        server.stop()


def test_a_failing_dir_goes_offline_and_the_broker_serves_the_other(
        broker: BrokerAddress, eio: tuple[Path, Path], halts: list[int], tmp_path: Path
) -> None:
    josefk = broker.broker.broker
    host, port = josefk.metrics_address
    url = f"http://{host}:{port}"
    broker.create_topic("t", partitions=4)
    manager = josefk.log_manager
    wait_until(lambda: len(manager.logs) == 4, 10, "four logs")
    in_eio = sorted(p for (t, p) in manager.logs if manager.dir_of(t, p) == eio[1])
    in_healthy = sorted(p for (t, p) in manager.logs if manager.dir_of(t, p) != eio[1])
    assert in_eio and in_healthy
    assert value(scrape(url), OFFLINE_DIRS) == 0

    disk.set_eio(eio[0], True)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=1, retries=0)
    try:
        with pytest.raises(KafkaStorageError):
            producer.send("t", b"lost", partition=in_eio[0]).get(timeout=10)
        wait_until(lambda: manager.failures.offline_dirs == [eio[1]], 10, "the dir offline")
        wait_until(lambda: manager.is_offline("t", in_eio[0]), 10, "its partitions offline")
        # Still refused (the log is out of service), and the other directory serves.
        with pytest.raises(KafkaStorageError):
            producer.send("t", b"refused", partition=in_eio[-1]).get(timeout=10)
        producer.send("t", b"kept", partition=in_healthy[0]).get(timeout=10)
    finally:
        producer.close(timeout=5)
    assert value(scrape(url), OFFLINE_DIRS) == 1
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        [answer] = admin.describe_log_dirs()
    finally:
        admin.close()
    errors = {Path(d["log_dir"]): d["error_code"] for d in answer["log_dirs"]}
    assert errors == {eio[1]: 56, tmp_path / "healthy": 0}
    assert halts == []  # one directory is still online

    # The last one fails too: the broker halts (Kafka's Exit.halt(1)).
    manager.failures.report(tmp_path / "healthy", "Error while testing", OSError(5, "EIO"))
    wait_until(lambda: halts == [1], 10, "a halt")
