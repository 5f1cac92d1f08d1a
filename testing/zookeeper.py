"""A standalone Apache ZooKeeper server for ``kafka_cluster``, started with ``java``."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

from josefk.testing.jars import zookeeper_libs
from josefk.testing.polling import free_port, wait_until
from josefk.testing.process import ManagedProcess

# A short tick lets sessions as short as 2 ticks, and expiry is checked every tick:
# a killed broker's registration goes within a second of its session timeout.
TICK_MS = 500
START_TIMEOUT_S = 60.0
# ZooKeeper logs WARN and up (logback's own default is DEBUG, thousands of lines).
LOGBACK = """<configuration>
  <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{36}: %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="OUT"/></root>
</configuration>
"""


class JavaUnavailable(RuntimeError):
    """No ``java`` to run ZooKeeper with."""


def java_command() -> str:
    """``$JAVA_HOME/bin/java`` if there is one, else ``java`` on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise JavaUnavailable("kafka_cluster needs Java 11 or later (java on the PATH or "
                              "JAVA_HOME) to run ZooKeeper")
    return found


class ZooKeeperServer:
    """ZooKeeper on a free port of 127.0.0.1 with its data in ``home``."""

    def __init__(self, home: Path, port: int | None = None) -> None:
        self.home = home
        self.port = port or free_port()
        self.process: ManagedProcess | None = None

    @property
    def connect(self) -> str:
        """``host:port`` for ``zookeeper.connect`` (add a chroot)."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the JVM and wait until ZooKeeper answers ``ruok``."""
        java = java_command()
        libs = zookeeper_libs()
        data = self.home / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.home / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_MS}\ndataDir={data}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,stat\n")
        logback = self.home / "logback.xml"
        logback.write_text(LOGBACK)
        command = [java, "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                   "-Djava.awt.headless=true", f"-Dlogback.configurationFile={logback}",
                   "-cp", f"{libs}/*", "org.apache.zookeeper.server.ZooKeeperServerMain",
                   str(config)]
        self.process = ManagedProcess("zookeeper", command, self.home / "zookeeper.log")
        self.process.start()
        try:
            wait_until(self._answers, timeout, f"ZooKeeper on {self.connect} to answer ruok")
        except BaseException:
            self.stop()
            raise

    def _answers(self) -> bool:
        assert self.process is not None
        self.process.check_running()
        with socket.create_connection(("127.0.0.1", self.port), timeout=1.0) as sock:
            sock.sendall(b"ruok")
            return sock.recv(4) == b"imok"

    def stop(self) -> None:
        """Kill the server (its data is a test's, thrown away)."""
        if self.process is not None:
            self.process.kill()
