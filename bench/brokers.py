"""The two brokers under comparison, as processes the bench starts and stops.

- josefk: ``.venv/bin/josefk serve`` (or ``python -m josefk.server serve``) with
  ``listeners`` and ``log.dirs`` overridden.
- Apache Kafka 4.x: ``tools/kafka/start-kraft.sh DATA_DIR PORT`` (one KRaft node,
  broker and controller, JVM defaults, ``-Xmx1g``), jars from tools/kafka/fetch.sh.

Both get the single-node overrides of tools/kafka/server.properties that josefk
knows (internal topics with one replica, no initial rebalance delay); everything
else is each broker's default. Nothing here times anything except cold start.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[1]
TOOLS = REPO / "tools" / "kafka"
START_KRAFT = TOOLS / "start-kraft.sh"
RUN_CLASS = TOOLS / "run-class.sh"
KAFKA_LIBS = REPO / ".cache" / "kafka" / "libs"

# The keys of tools/kafka/server.properties that are not KRaft plumbing: josefk
# gets them too, so both brokers run the same single-node configuration.
SINGLE_NODE_OVERRIDES = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}

QUIET_CLIENT = {
    # The bench probes brokers that are still starting: no "connection refused" spam.
    "log_level": 0,
    "reconnect.backoff.ms": 10,
    "reconnect.backoff.max.ms": 100,
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def port_open(port: int, timeout: float = 0.2) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


def kafka_available() -> str | None:
    """None when Apache Kafka can be started here, else why not."""
    if not any(KAFKA_LIBS.glob("*.jar")):
        return f"no Kafka jars in {KAFKA_LIBS} (run tools/kafka/fetch.sh / make kafka-jars)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "java not found"
    return None


def prepare_run(broker_list: list[str] | str, out: Path, logs: Path, root: Path) -> str | None:
    """Make a bench run's folders (its broker logs emptied); why not, if Kafka is wanted
    and cannot start here."""
    if "kafka" in broker_list and (why := kafka_available()):
        return why
    out.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    for old in logs.glob("*.log"):
        old.unlink()
    root.mkdir(parents=True, exist_ok=True)
    return None


def repo_relative(path: Path) -> str:
    """``path`` relative to the repository when it is inside it (for reports)."""
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def josefk_args(port: int, data_dir: Path, log_level: str = "WARNING") -> list[str]:
    """``serve`` and its arguments: the port, the data dir, the single-node overrides."""
    args = ["serve", "--log-level", log_level,
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
            "--override", f"log.dirs={data_dir}"]
    for key, value in SINGLE_NODE_OVERRIDES.items():
        args += ["--override", f"{key}={value}"]
    return args


def josefk_command(port: int, data_dir: Path, log_level: str = "WARNING") -> list[str]:
    script = Path(sys.executable).with_name("josefk")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "josefk.server"]
    return head + josefk_args(port, data_dir, log_level)


def cprofile_command(port: int, data_dir: Path, stats_path: Path) -> list[str]:
    """josefk under cProfile; the stats file is written on a clean (SIGTERM) stop."""
    code = ("import cProfile, sys\n"
            "from josefk.server.cli import main\n"
            f"sys.argv = {['josefk', *josefk_args(port, data_dir)]!r}\n"
            f"cProfile.run('main()', {str(stats_path)!r})\n")
    return [sys.executable, "-c", code]


class BrokerError(RuntimeError):
    """A broker did not start, answer or stop as expected."""


class BrokerProcess:
    """One broker process on 127.0.0.1:``port`` with data in ``data_dir``.

    ``overrides`` are broker configs given to either kind (``--override K=V``, after
    the single-node ones); ``env`` is added to the environment (e.g. ``KAFKA_OPTS``);
    ``log_level`` is josefk's ``--log-level``."""

    def __init__(self, kind: str, data_dir: Path, port: int | None = None,
                 log_path: Path | None = None, command: list[str] | None = None,
                 overrides: dict[str, str] | None = None, env: dict[str, str] | None = None,
                 log_level: str = "WARNING") -> None:
        self.kind = kind
        self.overrides = dict(overrides or {})
        self.extra_env = dict(env or {})
        self.log_level = log_level
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log_path = log_path or data_dir.with_name(data_dir.name + ".log")
        self.controller_port: int | None = None
        self._command = command
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.spawned_at: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def __repr__(self) -> str:
        return f"<{self.kind} {self.bootstrap} {self.data_dir}>"

    def command(self) -> list[str]:
        if self._command is not None:
            return self._command
        if self.kind == "josefk":
            head = josefk_command(self.port, self.data_dir, self.log_level)
        else:
            head = [str(START_KRAFT), str(self.data_dir), str(self.port)]
        for key, value in self.overrides.items():
            head += ["--override", f"{key}={value}"]
        return head

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.extra_env}
        if self.kind == "kafka":
            if self.controller_port is None:
                self.controller_port = _previous_controller_port(self.data_dir) or free_port()
            env["CONTROLLER_PORT"] = str(self.controller_port)
        return env

    def format_kafka(self) -> None:
        """Format a fresh KRaft data dir as start-kraft.sh would, without starting Kafka
        (so a timed start does not include the one-off StorageTool run)."""
        assert self.kind == "kafka"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.controller_port = self.controller_port or free_port()
        config = self.data_dir / "kraft-server.properties"
        config.write_text(
            (TOOLS / "server.properties").read_text()
            + "\n# Written by bench/brokers.py as start-kraft.sh would.\n"
            + "node.id=1\n"
            + f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
              f"CONTROLLER://127.0.0.1:{self.controller_port}\n"
            + f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\n"
            + f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}\n"
            + f"log.dirs={self.data_dir}\n")
        cluster_id = "-"
        while cluster_id.startswith("-"):
            cluster_id = secrets.token_urlsafe(16)[:22]
        done = subprocess.run(
            [str(RUN_CLASS), "kafka.tools.StorageTool", "format", "--config", str(config),
             "--cluster-id", cluster_id],
            env={**os.environ, "KAFKA_HEAP_OPTS": "-Xmx256m"}, capture_output=True, text=True,
            timeout=120)
        if done.returncode != 0:
            raise BrokerError(f"StorageTool format failed: {done.stderr[-2000:]}")

    def spawn(self) -> float:
        """Start the process; returns the monotonic time just before the exec."""
        if self.proc is not None and self.proc.poll() is None:
            raise BrokerError(f"{self.kind} already running")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = self._env()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed in stop()
        self._log.write(f"\n=== start: {' '.join(self.command())}\n".encode())
        self._log.flush()
        self.spawned_at = time.monotonic()
        self.proc = subprocess.Popen(self.command(), cwd=REPO, env=env,
                                     stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        return self.spawned_at

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        if not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_bytes()[-20000:].decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])

    def wait_ready(self, timeout: float) -> float:
        """Wait until Metadata lists a broker; returns seconds since spawn."""
        from confluent_kafka.admin import AdminClient

        assert self.spawned_at is not None
        deadline = self.spawned_at + timeout
        while not port_open(self.port):
            self._check_alive()
            if time.monotonic() > deadline:
                raise BrokerError(f"{self.kind} did not open port {self.port} in {timeout:.0f}s"
                                  f"; log:\n{self.log_tail()}")
            time.sleep(0.02)
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **QUIET_CLIENT})
        while True:
            self._check_alive()
            try:
                if admin.list_topics(timeout=1).brokers:
                    return time.monotonic() - self.spawned_at
            except Exception:  # not ready yet
                pass
            if time.monotonic() > deadline:
                raise BrokerError(f"{self.kind} did not answer Metadata in {timeout:.0f}s; "
                                  f"log:\n{self.log_tail()}")
            time.sleep(0.05)

    def start(self, timeout: float) -> float:
        self.spawn()
        try:
            return self.wait_ready(timeout)
        except BaseException:
            self.stop(kill=True)
            raise

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise BrokerError(f"{self.kind} exited with status {self.proc.returncode}; "
                              f"log:\n{self.log_tail()}")

    def stop(self, kill: bool = False, timeout: float = 60.0) -> float:
        """SIGTERM (SIGKILL after ``timeout``) the process group; returns seconds taken."""
        began = time.monotonic()
        proc = self.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        return time.monotonic() - began

    # --- memory -------------------------------------------------------------------------

    def rss_mib(self) -> float:
        """Resident set of the broker process and its descendants, MiB."""
        return sum(status_kib(pid, "VmRSS") for pid in process_tree(self.pid)) / 1024

    def peak_rss_mib(self) -> float:
        """High-water mark of the broker process's resident set (VmHWM), MiB."""
        return status_kib(self.pid, "VmHWM") / 1024


def _previous_controller_port(data_dir: Path) -> int | None:
    config = data_dir / "kraft-server.properties"
    if not config.exists():
        return None
    for line in config.read_text().splitlines():
        if line.startswith("controller.quorum.voters=1@127.0.0.1:"):
            return int(line.rsplit(":", 1)[1])
    return None


def status_kib(pid: int, field: str) -> int:
    """A ``/proc/<pid>/status`` field in KiB (0 if the process is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def process_tree(root: int) -> list[int]:
    """``root`` and its live descendants (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


class Progress:
    """Progress lines stamped with the time since the run began."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.prefix = ""

    def __call__(self, message: str) -> None:
        elapsed = int(time.monotonic() - self.began)
        print(f"[{elapsed // 60:3d}:{elapsed % 60:02d}] {self.prefix}{message}", flush=True)


def broker_list(parser: argparse.ArgumentParser, text: str,
                known: Iterable[str] = ("josefk", "kafka")) -> list[str]:
    """``--brokers a,b``: the names in order; a parser error for an unknown or none."""
    names = [b.strip() for b in text.split(",") if b.strip()]
    unknown = set(names) - set(known)
    if unknown or not names:
        parser.error(f"unknown brokers: {sorted(unknown)}")
    return names
