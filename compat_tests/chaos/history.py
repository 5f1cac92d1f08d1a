"""The history of a chaos run: every operation and fault, one JSON object per line.

Each event has ``t`` (seconds since the run began) and ``type``. The types
(``checker.py`` reads them; readers ignore what they do not know):

- ``meta``: seed, target, topic, partitions, duration, faults.
- ``invoke`` / ``ok`` / ``fail``: a producer process sends a unique value
  ``"<process>:<seq>"`` to a partition; ``ok`` carries the acknowledged offset,
  ``fail`` the client's error (indeterminate: the value may still be in the log).
  Both carry ``latency`` in seconds.
- ``poll``: the records ``[partition, offset, value]`` one consumer poll returned,
  with the consumer's ``mode`` (``assign`` or ``group``).
- ``rebalance`` (a consumer's new assignment) and ``seek``: after either a
  consumer may resume anywhere, so the checker does not count a skip there.
- ``client-error``: an error a client reported and recovered from.
- ``nemesis``: ``f`` is ``start`` or ``stop`` of a ``fault`` on ``targets``.
- ``phase``: ``healed``, ``final-read``, ``done``.
- ``final``: every record ``[offset, value]`` of one partition, read from the
  beginning after the last heal.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import IO, Any, Protocol


class Recorder(Protocol):
    """Where events go: a :class:`History`, or a :class:`Tee` of several."""

    def record(self, type_: str, **fields: Any) -> float: ...


class History:
    """An append-only JSON-lines file, shared by the workload's threads."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[str] = open(path, "w")  # noqa: SIM115 - closed in close()
        self._lock = threading.Lock()
        self._began = time.monotonic()

    def now(self) -> float:
        """Seconds since the run began."""
        return time.monotonic() - self._began

    def record(self, type_: str, **fields: Any) -> float:
        """Append one event stamped with the current time; returns that time."""
        with self._lock:
            t = self.now()
            self._file.write(json.dumps({"t": round(t, 4), "type": type_, **fields}) + "\n")
            return t

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Tee:
    """Records each event in every one of ``histories`` (one nemesis, several workloads)."""

    def __init__(self, histories: list[History]) -> None:
        self.histories = histories

    def record(self, type_: str, **fields: Any) -> float:
        return [h.record(type_, **fields) for h in self.histories][0]
