"""Fixtures of the compatibility suite: the broker under test and unique topics.

Which broker:

- ``--bootstrap HOST:PORT`` (or env ``JOSEFK_BOOTSTRAP``): a broker someone else runs.
  Tests that restart the broker or read its data directory skip.
- ``--kafka`` (or env ``JOSEFK_COMPAT_KAFKA=1``): Apache Kafka started by
  ``tools/kafka/start-kraft.sh`` on a free port with a fresh data directory.
- neither: josefk (``python -m josefk.server serve``) on a free port with a fresh
  data directory.

The suite must pass against Apache Kafka: that is what keeps it honest.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from kafka import KafkaAdminClient

from josefk.testing.polling import free_port

from .certs import Certs, make_certs
from .rawkafka import RawConnection

REPO = Path(__file__).resolve().parents[1]
KAFKA_LIBS = REPO / ".cache" / "kafka" / "libs"
RUN_CLASS = REPO / "tools" / "kafka" / "run-class.sh"
START_KRAFT = REPO / "tools" / "kafka" / "start-kraft.sh"

# Per-test limit (pytest-timeout) unless a test or --timeout says otherwise.
DEFAULT_TEST_TIMEOUT = 120
# How long an owned broker may take to answer Metadata after it is started.
START_TIMEOUT = {"josefk": 20.0, "kafka": 90.0}
# How long a clean (SIGTERM) stop may take before the process is killed.
STOP_TIMEOUT = 60.0


def env_flag(name: str) -> bool:
    """True when the environment variable is set to 1/true/yes."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("compat", "josefk compatibility suite")
    group.addoption(
        "--bootstrap",
        metavar="HOST:PORT",
        default=os.environ.get("JOSEFK_BOOTSTRAP") or None,
        help="run against this running broker (env JOSEFK_BOOTSTRAP); "
        "default: start josefk on a free port",
    )
    group.addoption(
        "--kafka",
        action="store_true",
        default=env_flag("JOSEFK_COMPAT_KAFKA"),
        help="start Apache Kafka (tools/kafka/start-kraft.sh) instead of josefk "
        "(env JOSEFK_COMPAT_KAFKA=1)",
    )
    group.addoption(
        "--mixed",
        choices=("kafka", "josefk"),
        default=os.environ.get("JOSEFK_COMPAT_MIXED") or None,
        help="run the cluster tests on mixed clusters of josefk and Apache Kafka 3.9.1 "
        "brokers whose first controller is of this kind (env JOSEFK_COMPAT_MIXED)",
    )
    group.addoption(
        "--broker-start-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a started broker may take to answer (default: josefk 20, kafka 90)",
    )


def pytest_configure(config: pytest.Config) -> None:
    if not config.pluginmanager.hasplugin("timeout"):
        config.addinivalue_line("markers", "timeout(seconds): per-test limit (pytest-timeout)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give every test a time limit, so a broken broker fails fast instead of hanging."""
    if not config.pluginmanager.hasplugin("timeout"):
        return
    if config.getoption("timeout", None) is not None or config.getini("timeout"):
        return
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(DEFAULT_TEST_TIMEOUT))


def probe(bootstrap: str, timeout: float = 2.0) -> int:
    """Brokers listed by Metadata (after ApiVersions); raises if the broker does not answer."""
    with RawConnection(bootstrap, timeout=timeout, client_id="compat-probe") as conn:
        return conn.broker_count()


class Broker:
    """The broker under test.

    ``bootstrap`` always works. ``data_dir``, ``restart`` and ``stop``/``start``
    only when the suite started the broker itself (``owned``).
    """

    def __init__(
        self,
        kind: str,
        bootstrap: str,
        command: list[str] | None = None,
        data_dir: Path | None = None,
        log_path: Path | None = None,
        start_timeout: float = 20.0,
    ) -> None:
        self.kind = kind
        self.bootstrap = bootstrap
        self.command = command
        self.data_dir = data_dir
        self.log_path = log_path
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.last_start_seconds: float | None = None

    @property
    def owned(self) -> bool:
        """True when the suite started this broker (it can restart it and read its files)."""
        return self.command is not None

    def __repr__(self) -> str:
        return f"<Broker {self.kind} {self.bootstrap}>"

    def log_tail(self, lines: int = 60) -> str:
        """The last lines the broker process wrote to stdout/stderr."""
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_bytes().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def start(self) -> None:
        """Start the broker process and wait until it answers Metadata with a broker."""
        assert self.command is not None and self.log_path is not None
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("broker already running")
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log.write(f"\n=== start: {' '.join(self.command)}\n".encode())
        self._log.flush()
        began = time.monotonic()
        self.proc = subprocess.Popen(
            self.command,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait_ready(began)
        self.last_start_seconds = time.monotonic() - began

    def _wait_ready(self, began: float) -> None:
        assert self.proc is not None
        deadline = began + self.start_timeout
        last_error: Exception | None = None
        while True:
            code = self.proc.poll()
            if code is not None:
                pytest.fail(
                    f"{self.kind} broker exited with status {code} before answering on "
                    f"{self.bootstrap}; its output ends with:\n{self.log_tail()}",
                    pytrace=False,
                )
            try:
                if probe(self.bootstrap) > 0:
                    return
                last_error = None
            except (OSError, ConnectionError, AssertionError, ValueError) as exc:
                last_error = exc
            if time.monotonic() > deadline:
                self.stop(kill=True)
                pytest.fail(
                    f"{self.kind} broker did not answer Metadata with a broker on "
                    f"{self.bootstrap} within {self.start_timeout:.0f}s "
                    f"(last error: {last_error!r}); its output ends with:\n{self.log_tail()}",
                    pytrace=False,
                )
            time.sleep(0.1)

    def stop(self, kill: bool = False) -> None:
        """SIGTERM (clean shutdown, SIGKILL after a grace period) or SIGKILL the broker."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            sig = signal.SIGKILL if kill else signal.SIGTERM
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=10 if kill else STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
                if not kill:
                    raise AssertionError(
                        f"{self.kind} broker ignored SIGTERM for {STOP_TIMEOUT:.0f}s; "
                        f"killed it. Output ends with:\n{self.log_tail()}"
                    ) from None
        if proc is not None:
            # Anything left in the process group (a josefk worker, say) goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def restart(self, kill: bool = False) -> None:
        """Stop (SIGTERM, or SIGKILL when ``kill``) and start again on the same port and data."""
        if not self.owned:
            raise RuntimeError("cannot restart a broker the suite did not start")
        self.stop(kill=kill)
        self.start()


def broker_command(kind: str, data_dir: Path, port: int,
                   overrides: dict[str, str] | None = None,
                   properties: Path | None = None) -> list[str]:
    """The command starting a broker of ``kind`` on 127.0.0.1:``port`` with ``data_dir``;
    ``overrides`` as ``--override key=value`` (start-kraft.sh passes them to Kafka too),
    ``properties`` a josefk server.properties."""
    if kind == "kafka":
        command = [str(START_KRAFT), str(data_dir), str(port)]
    else:
        command = [sys.executable, "-m", "josefk.server", "serve",
                   *([str(properties)] if properties is not None else []),
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                   "--override", f"log.dirs={data_dir}"]
    for key, value in (overrides or {}).items():
        command += ["--override", f"{key}={value}"]
    return command


def own_kind(config: pytest.Config, why: str) -> str:
    """The kind of broker a test starts for itself (it skips with --bootstrap)."""
    if config.getoption("bootstrap"):
        pytest.skip(f"needs a broker of its own ({why}); --bootstrap given")
    return "kafka" if config.getoption("kafka") else "josefk"


@contextlib.contextmanager
def running(broker: Broker) -> Iterator[Broker]:
    """``broker`` started, and stopped after."""
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()


@contextlib.contextmanager
def broker_of_its_own(config: pytest.Config, tmp: Path, why: str,
                      overrides: dict[str, str] | None = None) -> Iterator[Broker]:
    """A broker of the suite's kind in ``tmp``, started with ``overrides`` for one test or
    module (``why`` says what it needs that the shared broker lacks)."""
    kind = own_kind(config, why)
    data_dir, port = tmp / "data", free_port()
    data_dir.mkdir()
    with running(Broker(kind, f"127.0.0.1:{port}",
                        broker_command(kind, data_dir, port, overrides), data_dir,
                        tmp / "broker.log", start_timeout=START_TIMEOUT[kind])) as broker:
        yield broker


def _owned_broker(config: pytest.Config, tmp: Path) -> Broker:
    kind = "kafka" if config.getoption("kafka") else "josefk"
    port = free_port()
    data_dir = tmp / "data"
    data_dir.mkdir()
    if kind == "kafka":
        if not any(KAFKA_LIBS.glob("*.jar")):
            raise pytest.UsageError(
                f"--kafka needs Apache Kafka's jars in {KAFKA_LIBS}: run tools/kafka/fetch.sh "
                "(make kafka-jars)"
            )
        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            raise pytest.UsageError("--kafka needs java on PATH (or JAVA_HOME)")
    command = broker_command(kind, data_dir, port)
    timeout = config.getoption("broker_start_timeout") or START_TIMEOUT[kind]
    return Broker(
        kind=kind,
        bootstrap=f"127.0.0.1:{port}",
        command=command,
        data_dir=data_dir,
        log_path=tmp / "broker.log",
        start_timeout=timeout,
    )


@pytest.fixture(scope="session")
def broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broker]:
    """The broker under test, shared by the whole session."""
    config = request.config
    bootstrap = config.getoption("bootstrap")
    if bootstrap and config.getoption("kafka"):
        raise pytest.UsageError("--bootstrap and --kafka exclude each other")
    if bootstrap:
        external = Broker(kind="external", bootstrap=bootstrap)
        try:
            count = probe(bootstrap, timeout=10.0)
        except Exception as exc:
            pytest.fail(f"no broker answers on {bootstrap}: {exc!r}", pytrace=False)
        if count < 1:
            pytest.fail(f"Metadata from {bootstrap} lists no broker", pytrace=False)
        yield external
        return
    owned = _owned_broker(config, tmp_path_factory.mktemp("broker"))
    try:
        owned.start()
        yield owned
    finally:
        owned.stop()


@pytest.fixture(autouse=True)
def _broker_still_running(broker: Broker) -> Iterator[None]:
    """Fail at once, with its output, when a broker the suite started has died."""

    def check(when: str) -> None:
        if broker.owned and (broker.proc is None or broker.proc.poll() is not None):
            status = None if broker.proc is None else broker.proc.returncode
            pytest.fail(
                f"{broker.kind} broker is not running {when} this test (status {status}); "
                f"its output ends with:\n{broker.log_tail()}",
                pytrace=False,
            )

    check("before")
    yield
    check("after")


@pytest.fixture
def owned_broker(broker: Broker) -> Broker:
    """The broker, when the suite started it (restart, data dir); skips for --bootstrap."""
    if not broker.owned:
        pytest.skip("needs a broker the suite started itself (restart/data dir); --bootstrap given")
    return broker


def unique_topic_name(prefix: str = "compat") -> str:
    """A topic name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A fresh topic name derived from the test's name (not created)."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name.removeprefix("test_")).strip("-")
    return unique_topic_name(f"compat-{base[:60]}")


@pytest.fixture
def admin(broker: Broker) -> Iterator[KafkaAdminClient]:
    """A kafka-python admin client on the broker."""
    client = KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        client_id="compat-admin",
        request_timeout_ms=15_000,
    )
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def make_topic(admin: KafkaAdminClient, topic_name: str) -> Callable[..., str]:
    """Create a topic (unique name unless given) and wait until it has leaders."""
    counter = iter(range(1_000))

    def create(
        partitions: int = 1, configs: dict[str, str] | None = None, name: str | None = None
    ) -> str:
        n = next(counter)
        name = name or (topic_name if n == 0 else f"{topic_name}-{n}")
        spec: dict[str, Any] = {"num_partitions": partitions, "configs": configs or {}}
        result = admin.create_topics({name: spec}, timeout_ms=15_000, wait_for_metadata=True)
        [created] = result["topics"]
        assert created["error_code"] == 0, created
        return name

    return create


def _need(binary_ok: bool, what: str, env: str) -> None:
    if binary_ok:
        return
    if env_flag(env):
        pytest.fail(f"{what} ({env}=1)")
    pytest.skip(what)


@pytest.fixture
def kcat() -> str:
    """Path of the kcat binary; skips without it unless JOSEFK_REQUIRE_KCAT=1."""
    path = shutil.which("kcat") or shutil.which("kafkacat")
    _need(path is not None, "kcat not installed (apt-get install kcat)", "JOSEFK_REQUIRE_KCAT")
    assert path is not None
    return path


@pytest.fixture
def kafka_tools() -> Path:
    """tools/kafka/run-class.sh, when Kafka's jars and java are there.

    Skips without them unless JOSEFK_REQUIRE_KAFKA=1.
    """
    have_jars = any(KAFKA_LIBS.glob("*.jar"))
    _need(
        have_jars, f"no Kafka jars in {KAFKA_LIBS} (tools/kafka/fetch.sh)", "JOSEFK_REQUIRE_KAFKA"
    )
    have_java = shutil.which("java") is not None or bool(os.environ.get("JAVA_HOME"))
    _need(have_java, "java not found", "JOSEFK_REQUIRE_KAFKA")
    return RUN_CLASS


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """The session's test certificates (see compat_tests/certs.py)."""
    return make_certs(tmp_path_factory.mktemp("certs"))
