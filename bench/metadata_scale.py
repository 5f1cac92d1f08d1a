"""Cost at scale: topic creation and full Metadata as partitions grow, josefk and
Apache Kafka 4.x side by side (each broker alone, one after the other).

For each topic of ``--per`` partitions (``--topics`` of them, one replica):

- create: CreateTopics (confluent-kafka AdminClient) until a full Metadata shows
  every new partition with a leader;
- metadata: the median of ``--calls`` full Metadata requests (``list_topics``) right
  after, while the broker may still be creating the logs;
- on disk: until every new partition has its ``partition.metadata`` and
  ``leader-epoch-checkpoint`` (both brokers create logs after answering);
- settled: the median of ``--calls`` full Metadata requests after that.

Both brokers get ``log.index.size.max.bytes=65536``. Figures only: the disk and
CPUs are shared with whatever else runs.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench.brokers import QUIET_CLIENT, BrokerProcess

OVERRIDES = {"log.index.size.max.bytes": "65536"}


def _metadata_ms(admin: AdminClient, calls: int) -> float:
    times = []
    for _ in range(calls):
        began = time.monotonic()
        admin.list_topics(timeout=60)
        times.append(time.monotonic() - began)
    return statistics.median(times) * 1000


def _on_disk(data: Path, topic: str, count: int) -> bool:
    return all(len(list(data.glob(f"{topic}-*/{name}"))) >= count
               for name in ("partition.metadata", "leader-epoch-checkpoint"))


def run(kind: str, topics: int, per: int, calls: int, root: Path) -> None:
    data = root / kind / "data"
    broker = BrokerProcess(kind, data, overrides=OVERRIDES)
    if kind == "kafka":
        broker.format_kafka()
    broker.start(120)
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **QUIET_CLIENT})
        for i in range(topics):
            name = f"t{i}"
            began = time.monotonic()
            for future in admin.create_topics([NewTopic(name, per, 1)],
                                              request_timeout=600).values():
                future.result()
            while True:
                topic = admin.list_topics(timeout=60).topics.get(name)
                if topic and len(topic.partitions) == per and all(
                        p.leader >= 0 for p in topic.partitions.values()):
                    break
                time.sleep(0.01)
            created = time.monotonic() - began
            during = _metadata_ms(admin, calls)
            while not _on_disk(data, name, per):
                time.sleep(0.5)
            on_disk = time.monotonic() - began
            settled = _metadata_ms(admin, calls)
            print(f"{kind:6} partitions={per * (i + 1):6d} create={created:7.3f}s "
                  f"metadata={during:6.1f}ms on_disk={on_disk:6.2f}s "
                  f"settled_metadata={settled:6.1f}ms", flush=True)
    finally:
        broker.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.metadata_scale", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", default="josefk,kafka")
    parser.add_argument("--topics", type=int, default=3)
    parser.add_argument("--per", type=int, default=2000, help="partitions per topic")
    parser.add_argument("--calls", type=int, default=30, help="Metadata calls per median")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-metadata-"))
    try:
        for kind in args.brokers.split(","):
            run(kind, args.topics, args.per, args.calls, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
