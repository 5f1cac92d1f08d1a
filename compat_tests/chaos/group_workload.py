"""The groups workload: members of one consumer group, each a process of its own
(``group_member.py``), join, leave and are killed with SIGKILL while the queue
workload's producers write and the nemesis runs; an observer records the group's
committed offsets as the coordinator reports them."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kafka import KafkaAdminClient

from .history import History

REPO = Path(__file__).resolve().parents[2]
GROUP = "chaos-members"


@dataclass(frozen=True)
class GroupWorkload:
    bootstrap: str
    topic: str
    partitions: int
    min_members: int = 2
    max_members: int = 4
    churn_every_s: float = 6.0


class Member:
    """A member process and the thread relaying its events into the history."""

    def __init__(self, name: str, workload: GroupWorkload, history: History) -> None:
        self.name = name
        self.history = history
        self.process = subprocess.Popen(
            [sys.executable, "-m", "compat_tests.chaos.group_member",
             "--bootstrap", workload.bootstrap, "--topic", workload.topic,
             "--group", GROUP, "--name", name],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._relay = threading.Thread(target=self._relay_events, daemon=True)
        self._relay.start()

    def _relay_events(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = event.pop("type", "member-output")
            self.history.record(kind, process=self.name, **event)

    def stop(self, how: str, timeout: float = 30.0) -> None:
        """``leave`` (SIGTERM: the member closes and leaves the group) or ``kill``."""
        self.history.record("member-stop", process=self.name, how=how)
        self.process.send_signal(signal.SIGTERM if how == "leave" else signal.SIGKILL)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._relay.join(10)


class GroupChurn:
    """Starts members, and every few seconds adds one, stops one or kills one."""

    def __init__(self, workload: GroupWorkload, history: History, seed: int) -> None:
        self.workload = workload
        self.history = history
        self.random = random.Random(seed)
        self.members: list[Member] = []
        self._started = 0

    def _start_member(self) -> None:
        self._started += 1
        self.members.append(Member(f"m{self._started}", self.workload, self.history))

    def run(self, stop: threading.Event) -> None:
        for _ in range(self.workload.min_members + 1):
            self._start_member()
        while not stop.wait(self.workload.churn_every_s):
            count = len(self.members)
            choices = (["join"] if count < self.workload.max_members else [])
            if count > self.workload.min_members:
                choices += ["leave", "kill"]
            action = self.random.choice(choices)
            if action == "join":
                self._start_member()
            else:
                self.members.pop(self.random.randrange(count)).stop(action)

    def stop_all(self) -> None:
        for member in self.members:
            member.stop("leave")
        self.members.clear()


def observe_offsets(workload: GroupWorkload, history: History, stop: threading.Event,
                    every_s: float = 1.0) -> None:
    """``committed`` events: the group's offsets as the coordinator answers OffsetFetch."""
    admin: KafkaAdminClient | None = None
    while not stop.wait(every_s):
        try:
            if admin is None:
                admin = KafkaAdminClient(bootstrap_servers=workload.bootstrap.split(","),
                                         request_timeout_ms=5000)
            offsets = admin.list_group_offsets(GROUP)[GROUP]
        except Exception as e:  # noqa: BLE001 - an unavailable coordinator is expected
            history.record("client-error", process="observer", error=repr(e))
            continue
        history.record("committed", offsets={str(tp.partition): o.offset
                                             for tp, o in offsets.items() if o.offset >= 0})
    if admin is not None:
        admin.close()


def final_offsets(workload: GroupWorkload, history: History, timeout: float) -> None:
    """One last ``committed`` event once every member has stopped."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin = KafkaAdminClient(bootstrap_servers=workload.bootstrap.split(","),
                                     request_timeout_ms=10000)
            try:
                offsets = admin.list_group_offsets(GROUP)[GROUP]
            finally:
                admin.close()
            history.record("committed", final=True,
                           offsets={str(tp.partition): o.offset for tp, o in offsets.items()
                                    if o.offset >= 0})
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(1.0)
