"""A 60-second chaos run with a fixed seed, on every `make test` (`make chaos` runs longer).

Against josefk by default; with ``--kafka`` the same run against three Apache Kafka
3.9.1 brokers in ZooKeeper mode.
"""

from __future__ import annotations

import pytest

from ..cluster.conftest import need_jars, target
from .checker import load
from .nemesis import FAULTS
from .run import Options, run

SEED = 46  # its first faults: pause, kill-controller, partition, kill, kill-leader
DURATION = 60.0


@pytest.mark.timeout(600)
def test_a_minute_of_faults_loses_nothing(request: pytest.FixtureRequest, tmp_path) -> None:
    if request.config.getoption("bootstrap"):
        pytest.skip("the chaos run starts its own cluster; --bootstrap given")
    kind = target(request.config)
    need_jars(request.config, kafka=kind == "kafka")
    options = Options(target=kind, duration=DURATION, seed=SEED, faults=list(FAULTS),
                      out=tmp_path / "chaos")
    outcome = run(options)
    result = outcome.result
    print(result.report())
    print(result.summary_line(SEED))
    assert result.ok, f"{result.summary_line(SEED)}\n{result.report()}"
    # The run did real work under real faults: most sends acknowledged, faults injected.
    expected = options.producers * options.rate * DURATION
    assert result.acknowledged > expected / 3, result.report()
    faults = [e for e in load(outcome.history) if e["type"] == "nemesis"]
    assert len(faults) >= 6, faults  # three or more faults, each started and healed
