"""The untimed warm-up pass of each round, before the measured workloads.

Both brokers get it, right after their start in every round: the JVM's JIT
compiles Kafka's produce and fetch paths during it instead of during workload 1
(josefk's interpreter has nothing to warm, but the pass is the same for both, so
the page cache and the data dirs see the same history). The pass runs the
workloads' own clients and settings on a topic of its own, deleted afterwards:

- ``warmup_records`` x 1 KiB with workload 1's producer (acks=1, linger 5 ms);
- half as many with workload 2's (acks=all, idempotent);
- ``warmup_records`` x 100 B with workload 3's (linger 0);
- half as many 1 KiB records by ProducerPerformance with workload 1's settings (its
  16 KiB batches take the broker's per-request paths many more times);
- all of them read back from offset 0 by workload 4's consumer (assign).

Nothing of it is measured. Its outcome says what ran and how long it took, and
the broker's idle CPU just after it (``idle_cores``, over ``idle_seconds``): the
background load every CPU-per-GiB window also holds while a client starts.
"""

from __future__ import annotations

import time

from bench import cpu
from bench.brokers import BrokerProcess
from bench.workloads import (
    ACKS1,
    IDEMPOTENT,
    JAVA_ACKS1,
    KIB,
    PRODUCER_PERFORMANCE,
    SMALL,
    Context,
    Outcome,
    create_topic,
    delete_topic,
    failed,
    ok,
    run_client,
    run_java,
    unique,
)

SECONDS = 60.0  # each client's own bound


def warm_up(ctx: Context, broker: BrokerProcess) -> Outcome:
    """Produce and consume on a scratch topic; ok(seconds taken) or failed(why)."""
    n = ctx.sizes.warmup_records
    topic = unique("bench-warmup")
    ctx.log(f"warm-up (untimed): {n} x 1 KiB, {n // 2} x 1 KiB idempotent, {n} x 100 B, "
            f"{n // 2} x 1 KiB by ProducerPerformance, then all consumed ...")
    began = time.monotonic()
    try:
        create_topic(broker.bootstrap, topic)
        produced = 0
        for count, size, config in ((n, KIB, ACKS1), (n // 2, KIB, IDEMPOTENT),
                                    (n, 100, SMALL)):
            got = run_client("produce", {"bootstrap": broker.bootstrap, "topic": topic,
                                         "count": count, "size": size, "seconds": SECONDS,
                                         "config": config}, timeout=SECONDS + 90)
            produced += got["records"]
        run_java(PRODUCER_PERFORMANCE,
                 ["--bootstrap-server", broker.bootstrap, "--topic", topic,
                  "--num-records", str(n // 2), "--record-size", str(KIB), "--throughput", "-1",
                  "--command-property", *JAVA_ACKS1],
                 timeout=SECONDS + ctx.sizes.java_slack)
        produced += n // 2
        read = run_client("consume", {"bootstrap": broker.bootstrap, "topic": topic,
                                      "count": produced, "seconds": SECONDS},
                          timeout=SECONDS + 60)
    except Exception as exc:  # the round goes on, noted
        return failed(f"warm-up: {type(exc).__name__}: {exc}")
    finally:
        delete_topic(broker.bootstrap, topic)
    took = time.monotonic() - began
    with cpu.Meter(broker.pid) as idle:
        time.sleep(ctx.sizes.idle_seconds)
    assert idle.seconds is not None and idle.wall
    idle_cores = round(idle.seconds / idle.wall, 3)
    ctx.log(f"  warm-up: {produced} records produced, {read['records']} consumed in {took:.1f}s; "
            f"then idle at {idle_cores} cores")
    return ok(took, produced=produced, consumed=read["records"], idle_cores=idle_cores,
              idle_seconds=round(idle.wall, 2))
