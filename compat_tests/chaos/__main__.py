"""``python -m compat_tests.chaos``: one chaos run (``make chaos``).

The last line is ``chaos: N acknowledged, L lost, D duplicated, R reordered,
I inconsistent, S poll-skips (seed X)`` (``--workload txn``, ``groups``, ``compact``:
``chaos txn: ...`` and so on, with that checker's counts); the exit status is 1 when any
deciding anomaly is not 0, and 2 when the run itself could not complete. The soak, every
workload at once for an hour, is ``python -m compat_tests.chaos.soak`` (``make soak``).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import pytest

from .exercises import HarnessError
from .nemesis import DEFAULT_FAULTS, FAULTS, NEEDS_ENSEMBLE
from .run import Options, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m compat_tests.chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--target",
        choices=("josefk", "kafka"),
        default="josefk",
        help="josefk, or Apache Kafka 3.9.1 in ZooKeeper mode",
    )
    parser.add_argument("--duration", type=float, default=300.0, help="seconds of faults")
    parser.add_argument("--seed", type=int, default=None, help="default: from the clock")
    parser.add_argument(
        "--faults", default=",".join(DEFAULT_FAULTS),
        help=f"comma-separated, from {','.join(FAULTS)}; or all (every one this machine can "
             "inject; zk-node-kill with --zookeepers 3)"
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="directory for the history, timeline, report and broker logs "
        "(default chaos-runs/<target>-seed<N>-<time>)",
    )
    parser.add_argument("--max-in-flight", type=int, default=1,
                        help="producer requests in flight per connection (librdkafka "
                             "duplicates on leader changes above 1: see workload.py)")
    parser.add_argument("--workload", choices=("queue", "txn", "groups", "compact"),
                        default="queue",
                        help="queue: idempotent producers; txn: transactions, read_committed "
                             "and consume-transform-produce; groups: members joining, "
                             "leaving and killed; compact: keys overwritten and deleted in "
                             "a compacted topic")
    parser.add_argument("--zookeepers", type=int, choices=(1, 3), default=1,
                        help="one ZooKeeper, or an ensemble of three (for zk-node-kill)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("kazoo", "kafka"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    faults = [f.strip() for f in args.faults.split(",") if f.strip()]
    if faults == ["all"]:
        faults = [f for f in FAULTS if args.zookeepers > 1 or f not in NEEDS_ENSEMBLE]
    out = args.out or Path("chaos-runs") / (
        f"{args.target}-{args.workload}-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    options = Options(target=args.target, duration=args.duration, seed=seed, faults=faults,
                      out=out, max_in_flight=args.max_in_flight, workload=args.workload,
                      zookeepers=args.zookeepers)
    try:
        outcome = run(options)
    except (HarnessError, Exception, pytest.fail.Exception) as exc:
        print(f"chaos: the run did not complete: {exc} (seed {seed}; logs in {out})")
        return 2
    print(outcome.result.report())
    print(f"history {outcome.history}, timeline {outcome.timeline}")
    for note in outcome.notes:
        print(f"note: {note}")
    print(outcome.result.summary_line(seed))
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
