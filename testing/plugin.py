"""The pytest plugin (entry point ``pytest11``): Kafka brokers as fixtures.

- ``kafka_broker``, ``kafka_broker_module``, ``kafka_broker_session``: one josefk broker
  in this process (a thread with its own ``trio.run``), per test, module or session; the
  value is its bootstrap address, a ``str`` with a ``create_topic`` helper. Settings:
  override the ``kafka_broker_config`` fixture (a dict of Kafka keys; give the override
  the scope of the broker fixture you use, or a wider one) or mark a test with
  ``@pytest.mark.kafka_broker_config({...})`` (``kafka_broker`` only).
- ``kafka_cluster``: ZooKeeper and three josefk broker processes, per module; settings
  through the ``kafka_cluster_config`` fixture (module or session scope).
- :func:`broker_fixture`, :func:`cluster_fixture`: the same at another scope or with
  other settings, e.g. ``big = cluster_fixture(scope="session", config={...})`` in a
  conftest.py.

Loaded into every pytest run where josefk is installed, so this module imports only
pytest and the standard library; a fixture imports the broker when it runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import pytest

if TYPE_CHECKING:
    from josefk.testing.cluster import KafkaCluster
    from josefk.testing.inprocess import BrokerAddress
    from josefk.testing.zookeeper import ZooKeeperServer

Scope = Literal["function", "class", "module", "package", "session"]


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python (the broker's codec) loads its schemas through a deprecated API.
    for source, function in (("kafka.protocol.schemas.load_json", "read_text"),
                             ("importlib.resources._legacy", "open_text")):
        config.addinivalue_line("filterwarnings",
                                f"ignore:{function} is deprecated:DeprecationWarning:{source}")
    config.addinivalue_line(
        "markers", "kafka_broker_config(settings): Kafka config keys (a dict) for the test's "
                   "kafka_broker, on top of the kafka_broker_config fixture")


def running_broker(data_dir: Path, config: Mapping[str, str]) -> Iterator[BrokerAddress]:
    """An in-process broker for the length of the generator; a crash fails the test."""
    from josefk.server.config.values import ConfigError
    from josefk.testing.inprocess import BrokerAddress, BrokerCrashed, InProcessBroker

    broker = InProcessBroker(data_dir, config)
    problem = None
    try:
        broker.start()
    except (ConfigError, BrokerCrashed) as e:
        problem = f"kafka_broker: {e}"
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    try:
        yield BrokerAddress(broker)
    finally:
        broker.stop()


def broker_fixture(scope: Scope = "function", config: Mapping[str, str] | None = None,
                   name: str | None = None) -> Any:
    """A fixture of an in-process broker at ``scope`` with the Kafka keys ``config``.

    Assign it in a conftest.py or test module: ``my_broker = broker_fixture("session")``.
    """

    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerAddress]:
        yield from running_broker(tmp_path_factory.mktemp("kafka-broker"), config or {})

    return pytest.fixture(scope=scope, name=name)(fixture)


@pytest.fixture(scope="session")
def kafka_broker_config() -> dict[str, str]:
    """Kafka config keys for ``kafka_broker`` and ``kafka_broker_module`` (default none:
    josefk's defaults plus a few that make one broker fast to use in tests)."""
    return {}


@pytest.fixture
def kafka_broker(request: pytest.FixtureRequest, tmp_path: Path,
                 kafka_broker_config: dict[str, str]) -> Iterator[BrokerAddress]:
    """A josefk broker for this test, in this process: its bootstrap ``"127.0.0.1:PORT"``."""
    marker = request.node.get_closest_marker("kafka_broker_config")
    config = {**kafka_broker_config, **(marker.args[0] if marker and marker.args else {}),
              **(marker.kwargs if marker else {})}
    yield from running_broker(tmp_path / "kafka-broker", config)


@pytest.fixture(scope="module")
def kafka_broker_module(tmp_path_factory: pytest.TempPathFactory,
                        kafka_broker_config: dict[str, str]) -> Iterator[BrokerAddress]:
    """A josefk broker shared by the tests of a module, in this process."""
    yield from running_broker(tmp_path_factory.mktemp("kafka-broker"), kafka_broker_config)


@pytest.fixture(scope="session")
def kafka_broker_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerAddress]:
    """A josefk broker shared by the whole session, in this process (default settings:
    for others, :func:`broker_fixture`)."""
    yield from running_broker(tmp_path_factory.mktemp("kafka-broker"), {})


@pytest.fixture(scope="session")
def kafka_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One ZooKeeper server for the session; each cluster lives under a chroot of its own."""
    from josefk.testing.jars import JarsUnavailable
    from josefk.testing.polling import WaitTimeout
    from josefk.testing.process import ProcessExited
    from josefk.testing.zookeeper import JavaUnavailable, ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    try:
        server.start()
    except JavaUnavailable as e:
        pytest.skip(str(e))
    except (JarsUnavailable, WaitTimeout, ProcessExited) as e:
        pytest.fail(f"kafka_zookeeper: {e}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def running_cluster(zookeeper: ZooKeeperServer, home: Path,
                    config: Mapping[str, str]) -> Iterator[KafkaCluster]:
    """Three broker processes for the length of the generator; all killed after."""
    from kazoo.handlers.threading import KazooTimeoutError

    from josefk.testing.cluster import KafkaCluster
    from josefk.testing.polling import WaitTimeout
    from josefk.testing.process import ProcessExited

    cluster = KafkaCluster(zookeeper.connect, home, config)
    problem = None
    try:
        cluster.start()
        yield cluster
    except (WaitTimeout, ProcessExited, KazooTimeoutError) as e:
        problem = f"kafka_cluster: {e or type(e).__name__} (ZooKeeper on {zookeeper.connect})"
    finally:
        try:
            cluster.close()
        except ProcessExited as e:
            problem = problem or f"kafka_cluster: {e}"
    if problem is not None:
        pytest.fail(problem, pytrace=False)


def cluster_fixture(scope: Scope = "module", config: Mapping[str, str] | None = None,
                    name: str | None = None) -> Any:
    """A fixture of a three-broker cluster at ``scope`` with the Kafka keys ``config``."""

    def fixture(kafka_zookeeper: ZooKeeperServer,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
        yield from running_cluster(kafka_zookeeper, tmp_path_factory.mktemp("kafka-cluster"),
                                   config or {})

    return pytest.fixture(scope=scope, name=name)(fixture)


@pytest.fixture(scope="session")
def kafka_cluster_config() -> dict[str, str]:
    """Kafka config keys every broker of ``kafka_cluster`` gets (default none)."""
    return {}


@pytest.fixture(scope="module")
def kafka_cluster(kafka_zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory,
                  kafka_cluster_config: dict[str, str]) -> Iterator[KafkaCluster]:
    """ZooKeeper and three josefk broker processes (ids 1, 2, 3), shared by a module.

    ``.bootstrap``, ``.brokers`` (id -> broker with ``.kill()``, ``.pause()``,
    ``.resume()``, ``.restart()``, ``.stop()``, ``.metrics_url``), ``.controller_id()``,
    ``.create_topic(...)``, ``.zookeeper_connect``.
    """
    yield from running_cluster(kafka_zookeeper, tmp_path_factory.mktemp("kafka-cluster"),
                               kafka_cluster_config)
