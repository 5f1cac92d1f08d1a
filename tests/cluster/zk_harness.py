"""Helpers of the cluster-mode tests (imported as ``zk_harness``; tests/cluster is not a
package): a real ZooKeeper server, a TCP proxy that can cut connections, polling."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
import trio

from josefk.server.control.zk_bridge import KazooZooKeeper

REPO = Path(__file__).resolve().parents[2]
ZOOKEEPER_LIBS = REPO / ".cache" / "zookeeper" / "libs"
ZOOKEEPER_START = REPO / "tools" / "zookeeper" / "start.sh"
START_TIMEOUT_S = 30.0
SESSION_TIMEOUT_MS = 6000
CONNECTION_TIMEOUT_MS = 5000


def free_port() -> int:
    """A loopback TCP port nothing listens on (at the time of asking)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_zookeeper() -> None:
    missing = None
    if shutil.which("java") is None:
        missing = "no java on PATH"
    elif not list(ZOOKEEPER_LIBS.glob("zookeeper-*.jar")):
        missing = f"no ZooKeeper jars in {ZOOKEEPER_LIBS} (run tools/zookeeper/fetch.sh)"
    if missing is not None:
        if os.environ.get("JOSEFK_REQUIRE_KAFKA") == "1":
            pytest.fail(missing + " and JOSEFK_REQUIRE_KAFKA=1", pytrace=False)
        pytest.skip(missing)


def _ruok(port: int) -> bool:
    """ZooKeeper's four-letter health check (whitelisted by start.sh)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as s:
            s.sendall(b"ruok")
            return s.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """A standalone ZooKeeper on 127.0.0.1:``port`` (its pid is the JVM's)."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_port()
        self.data_dir = data_dir
        self.log_path = data_dir.parent / "zookeeper.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [str(ZOOKEEPER_START), str(self.port), str(self.data_dir)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ruok(self.port):
            if self.proc.poll() is not None:
                pytest.fail(f"ZooKeeper exited with status {self.proc.returncode}:\n"
                            f"{self.log_path.read_text(errors='replace')[-3000:]}",
                            pytrace=False)
            if time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"ZooKeeper did not answer on {self.hosts} within "
                            f"{START_TIMEOUT_S:.0f}s", pytrace=False)
            time.sleep(0.05)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=10)




SessionFactory = Callable[..., Awaitable[KazooZooKeeper]]


async def wait_for(predicate: Callable[[], object], timeout: float = 5.0) -> None:
    """Poll ``predicate`` (plain or async) until it is true; trio.TooSlowError after
    ``timeout`` seconds."""
    with trio.fail_after(timeout):
        while True:
            value = predicate()
            if isinstance(value, Awaitable):
                value = await value
            if value:
                return
            await trio.sleep(0.02)


class TcpProxy:
    """A loopback TCP proxy to ``target_port`` whose connections a test can cut (the
    client sees a dropped connection and reconnects through the proxy)."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self._scopes: set[trio.CancelScope] = set()

    @property
    def hosts(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as nursery:
            task_status.started()
            await trio.serve_listeners(self._handle, listeners, handler_nursery=nursery)

    def cut(self) -> int:
        """Drop every open connection; returns how many there were."""
        scopes, self._scopes = self._scopes, set()
        for scope in scopes:
            scope.cancel()
        return len(scopes)

    async def _handle(self, client: trio.SocketStream) -> None:
        with trio.CancelScope() as scope:
            self._scopes.add(scope)
            try:
                server = await trio.open_tcp_stream("127.0.0.1", self.target_port)
                async with client, server, trio.open_nursery() as nursery:
                    nursery.start_soon(self._pipe, client, server, nursery.cancel_scope)
                    nursery.start_soon(self._pipe, server, client, nursery.cancel_scope)
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                self._scopes.discard(scope)

    @staticmethod
    async def _pipe(source: trio.SocketStream, sink: trio.SocketStream,
                    done: trio.CancelScope) -> None:
        try:
            async for chunk in source:
                await sink.send_all(chunk)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        done.cancel()
