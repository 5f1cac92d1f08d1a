"""60-second chaos runs with a fixed seed, on every `make test` (`make chaos` runs longer):
the queue workload, the transactions workload and the groups workload.

Against josefk by default; with ``--kafka`` the same runs against three Apache Kafka
3.9.1 brokers in ZooKeeper mode.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..cluster.conftest import need_jars, target
from .checker import load
from .nemesis import DEFAULT_FAULTS, ZOOKEEPER_FAULTS
from .run import Options, Outcome, run

SEED = 46  # its first faults: pause, kill-controller, partition, kill, kill-leader
DURATION = 60.0


def _run(request: pytest.FixtureRequest, tmp_path: Any, workload: str,
         faults: tuple[str, ...] = DEFAULT_FAULTS) -> Outcome:
    if request.config.getoption("bootstrap"):
        pytest.skip("the chaos run starts its own cluster; --bootstrap given")
    kind = target(request.config)
    need_jars(request.config, kafka=kind == "kafka")
    outcome = run(Options(target=kind, duration=DURATION, seed=SEED, faults=list(faults),
                          out=tmp_path / "chaos", workload=workload))
    print(outcome.result.report())
    print(outcome.result.summary_line(SEED))
    assert outcome.result.ok, f"{outcome.result.summary_line(SEED)}\n{outcome.result.report()}"
    faults = [e for e in load(outcome.history) if e["type"] == "nemesis"]
    assert len(faults) >= 4, faults  # two or more faults, each started and healed
    return outcome


@pytest.mark.timeout(600)
def test_a_minute_of_faults_loses_nothing(request: pytest.FixtureRequest, tmp_path) -> None:
    result = _run(request, tmp_path, "queue").result
    # The run did real work under real faults: most sends acknowledged.
    options = Options()
    assert result.acknowledged > options.producers * options.rate * DURATION / 3
    assert len([w for w in result.windows if w.healed]) >= 3, result.report()


@pytest.mark.timeout(900)
def test_a_minute_of_faults_keeps_transactions_whole(request: pytest.FixtureRequest,
                                                     tmp_path) -> None:
    """Transactional producers (some aborting on purpose), a read_committed consumer and
    an exactly-once transformer that crashes now and then, through the same faults."""
    result = _run(request, tmp_path, "txn").result
    assert result.committed > 50 and result.aborted > 5, result.report()
    assert result.inputs == 2000, result.report()


@pytest.mark.timeout(900)
def test_a_minute_of_faults_and_member_churn_keeps_group_offsets(
        request: pytest.FixtureRequest, tmp_path) -> None:
    """Members joining, leaving and SIGKILLed while the cluster suffers every fault, the
    ZooKeeper ones too: offsets never go back, nothing below a commit is skipped, one
    owner per generation."""
    result = _run(request, tmp_path, "groups", ZOOKEEPER_FAULTS).result
    assert result.members >= 4 and result.generations >= 3, result.report()
    assert result.commits > 50 and result.delivered > 1000, result.report()
