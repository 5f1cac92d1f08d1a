"""A child process in a session of its own, its output in a log file.

The cluster's brokers and ZooKeeper run as processes (not threads) because a test
kills and pauses them with signals, and because a crash of one must not take the
test run down with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO


class ProcessExited(RuntimeError):
    """The process ended while something waited for it to become ready."""


class ManagedProcess:
    """``command`` run with its stdout and stderr appended to ``log_path``.

    Signals go to the whole process group (a shell script's JVM included).
    """

    def __init__(self, name: str, command: Sequence[str], log_path: Path,
                 cwd: Path | None = None, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.command = list(command)
        self.log_path = log_path
        self.cwd = cwd
        self.env = dict(env) if env is not None else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.paused = False
        self._ending = False  # set once we signalled it to end
        self._log: IO[bytes] | None = None

    def __repr__(self) -> str:
        return f"<{self.name} pid={self.pid}>"

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def died(self) -> bool:
        """True when the process ended without being told to (a crash)."""
        return self.proc is not None and self.proc.poll() is not None and not self._ending

    def start(self) -> None:
        """Start the process (it must not be running)."""
        if self.running:
            raise RuntimeError(f"{self.name} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._close_log()
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - closed by _close_log
        self.proc = subprocess.Popen(
            self.command, cwd=self.cwd, env=self.env, stdin=subprocess.DEVNULL,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        self.paused = False
        self._ending = False

    def check_running(self) -> None:
        """Raise :class:`ProcessExited` with the end of the log if the process ended."""
        if self.proc is not None and self.proc.poll() is not None:
            raise ProcessExited(f"{self.name} exited with status {self.proc.returncode}; "
                                f"its output ends with:\n{self.log_tail()}")

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the process group (nothing if it has ended)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def pause(self) -> None:
        """SIGSTOP: the process stays, its sockets go silent."""
        self.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.paused:
            self.send_signal(signal.SIGCONT)
        self.paused = False

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 10.0) -> None:
        """Send ``sig`` (a stopped process is continued so it can act on it) and wait."""
        if self.proc is None:
            return
        if sig in (signal.SIGSTOP, signal.SIGCONT):
            raise ValueError("kill() ends the process: pause() and resume() stop and continue it")
        self._ending = True
        self.send_signal(sig)
        self.resume()
        self.wait(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait up to ``timeout`` seconds, then SIGKILL."""
        if not self.running:
            self.wait(0)
            return
        try:
            self.kill(signal.SIGTERM, timeout)
        except subprocess.TimeoutExpired:
            self.kill(signal.SIGKILL)

    def wait(self, timeout: float) -> None:
        """Wait for the process to end (:class:`subprocess.TimeoutExpired` after
        ``timeout``); then reap every process left in its group and close the log."""
        if self.proc is None:
            return
        self.proc.wait(timeout)
        # A script's children die with it only if they share its fate: make sure.
        self.send_signal(signal.SIGKILL)
        self._close_log()

    def log_tail(self, lines: int = 40) -> str:
        """The last lines the process wrote."""
        if self._log is not None:
            self._log.flush()
        try:
            text = self.log_path.read_bytes().decode("utf-8", "replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
