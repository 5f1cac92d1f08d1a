"""Fixtures of the cluster tests: a real ZooKeeper and three brokers on it.

Which brokers (the options of compat_tests/conftest.py):

- ``--kafka`` (or env ``JOSEFK_COMPAT_KAFKA=1``): three Apache Kafka 3.9.1 brokers
  in ZooKeeper mode (``tools/kafka39``), the reference.
- neither: three josefk brokers (``python -m josefk.server serve --override ...``).
- ``--bootstrap``: the cluster tests skip (they start their own brokers).

Markers:

- ``josefk_pending(reason)``: skip against josefk (never against Kafka) with the
  reason; for what josefk's cluster mode does not do yet.
- ``josefk_only(reason)``: skip against Kafka and on mixed clusters (``--mixed``): what
  only josefk does, or the module's own mixed cluster.

Nothing starts for a skipped test. ZooKeeper is one server for the session;
each cluster (one per module) lives under a chroot of its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from ..conftest import _need, env_flag
from .harness import (
    BROKER_IDS,
    CLUSTER_START_TIMEOUT,
    KAFKA39_LIBS,
    ZOOKEEPER_LIBS,
    Cluster,
    ZooKeeperServer,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "josefk_pending(reason): skip against josefk (still to do), run against Kafka"
    )
    config.addinivalue_line("markers", "josefk_only(reason): skip against Apache Kafka")


def target(config: pytest.Config) -> str:
    """``kafka`` (Apache Kafka 3.9.1, ZooKeeper mode) or ``josefk``."""
    if config.getoption("kafka") and config.getoption("mixed"):
        raise pytest.UsageError("--kafka and --mixed exclude each other")
    return "kafka" if config.getoption("kafka") else "josefk"


def broker_kinds(config: pytest.Config) -> dict[int, str]:
    """Broker id -> kind of a cluster test's three brokers: all of the target kind, or
    with ``--mixed K`` broker 1 of kind K (started first: the first controller), broker 2
    of the other kind and broker 3 josefk."""
    first = config.getoption("mixed")
    if first is None:
        return dict.fromkeys(BROKER_IDS, target(config))
    return {1: first, 2: "josefk" if first == "kafka" else "kafka", 3: "josefk"}


def first_controller(config: pytest.Config) -> int | None:
    """The broker a mixed cluster starts first, to be its controller (None: any)."""
    return 1 if config.getoption("mixed") else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Turn the josefk_pending / josefk_only markers into skips for the target broker."""
    kind = target(config)
    bootstrap = config.getoption("bootstrap")
    for item in items:
        pending = item.get_closest_marker("josefk_pending")
        only = item.get_closest_marker("josefk_only")
        if bootstrap and (pending or only or "cluster" in item.fixturenames):
            item.add_marker(pytest.mark.skip(reason="cluster tests start their own brokers; "
                                                    "--bootstrap given"))
        elif kind == "josefk" and pending is not None and not env_flag("JOSEFK_RUN_PENDING"):
            item.add_marker(pytest.mark.skip(reason=f"pending on josefk: {pending.args[0]}"))
        elif only is not None and (kind == "kafka" or config.getoption("mixed")):
            item.add_marker(pytest.mark.skip(reason=f"josefk only: {only.args[0]}"))


def need_jars(config: pytest.Config, kafka: bool) -> None:
    """Fail (--kafka) or skip (josefk, unless JOSEFK_REQUIRE_KAFKA=1) without the jars."""
    missing = [
        f"{libs} (run {tool} or make {make})"
        for libs, tool, make, wanted in (
            (ZOOKEEPER_LIBS, "tools/zookeeper/fetch.sh", "zookeeper-jars", True),
            (KAFKA39_LIBS, "tools/kafka39/fetch.sh", "kafka39-jars", kafka),
        )
        if wanted and not any(libs.glob("*.jar"))
    ]
    have_java = shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))
    problem = "; ".join(([] if have_java else ["java not found"]) + [f"no jars in {m}"
                                                                      for m in missing])
    if problem and target(config) == "kafka":
        pytest.fail(f"--kafka cluster tests: {problem}", pytrace=False)
    _need(not problem, problem, "JOSEFK_REQUIRE_KAFKA")


@pytest.fixture(scope="session")
def zookeeper(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper server for the session (clusters use chroots of their own)."""
    need_jars(request.config, kafka=False)
    home = tmp_path_factory.mktemp("zookeeper")
    server = ZooKeeperServer(home / "data", home / "zookeeper.log")
    server.start()
    try:
        yield server
    finally:
        server.stop()


def cluster_fixture(
    kinds: Callable[[pytest.Config], dict[int, str]], doc: str,
    broker_config: dict[str, str] | None = None,
) -> Callable[..., Iterator[Cluster]]:
    """A module-scoped ``cluster`` fixture: the brokers ``kinds(config)`` names.

    ``kinds`` maps broker ids to "kafka" or "josefk"; ``broker_config`` adds Kafka keys
    to every broker. The brokers run on the session's ZooKeeper and are killed after the
    module.
    """

    def fixture(
        request: pytest.FixtureRequest,
        zookeeper: ZooKeeperServer,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> Iterator[Cluster]:
        config = request.config
        chosen = kinds(config)
        need_jars(config, kafka="kafka" in chosen.values())
        timeout = config.getoption("broker_start_timeout") or max(
            CLUSTER_START_TIMEOUT[k] for k in chosen.values()
        )
        cluster = Cluster(zookeeper, tmp_path_factory.mktemp("cluster"), chosen, timeout,
                          config=broker_config)
        try:
            cluster.start(first_controller(config))
            yield cluster
        finally:
            cluster.stop()

    fixture.__doc__ = doc
    return pytest.fixture(scope="module", name="cluster")(fixture)


cluster = cluster_fixture(
    broker_kinds,
    "Three brokers of the target kind (ids 1, 2, 3), shared by a module's tests.",
)


@pytest.fixture(scope="module")
def zk(cluster: Cluster) -> KazooClient:
    """A kazoo client under the cluster's chroot."""
    return cluster.zk


@pytest.fixture
def topic(topic_name: str) -> str:
    """A fresh topic name for the test (not created)."""
    return topic_name


@pytest.fixture(autouse=True)
def _broker_still_running(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail, with its output, when a cluster broker died on its own; restore the cluster after.

    Overrides compat_tests/conftest.py's fixture of the same name, which would start
    the single-broker suite's broker.
    """
    if "cluster" not in request.fixturenames:
        yield
        return
    cluster: Cluster = request.getfixturevalue("cluster")

    def check(when: str) -> None:
        for b in cluster.brokers.values():
            if b.died:
                status = None if b.proc is None else b.proc.returncode
                b.stop()
                pytest.fail(
                    f"{b!r} died {when} this test (status {status}); its output ends with:\n"
                    f"{b.log_tail()}",
                    pytrace=False,
                )

    check("before")
    yield
    try:
        check("during")
    finally:
        cluster.restore()


@pytest.fixture
def kafka39_tools(request: pytest.FixtureRequest) -> None:
    """Kafka 3.9's command-line tools (tools/kafka39/run-class.sh) must be there."""
    need_jars(request.config, kafka=True)
