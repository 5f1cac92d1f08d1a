"""Producer ids: handed out from persisted blocks, so none is ever issued twice."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from josefk.log.checkpoint import write_atomic

PRODUCER_ID_FILE = "__josefk_producer_ids.json"
BLOCK_SIZE = 1000  # as Kafka's controller allocates them

logger = logging.getLogger(__name__)


class ProducerIdManager:
    """Allocates producer ids from blocks; the next block's start is persisted before
    any id of the current block is used, so a crash can skip ids but never repeat one."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / PRODUCER_ID_FILE
        self._next = self._block_end = self._load()

    def _load(self) -> int:
        try:
            return int(json.loads(self.path.read_text())["next_block_start"])
        except FileNotFoundError:
            return 0
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"corrupt producer id file {self.path}: {e}") from None

    def next_id(self) -> int:
        if self._next >= self._block_end:
            self._block_end = self._next + BLOCK_SIZE
            write_atomic(self.path, json.dumps(
                {"version": 1, "next_block_start": self._block_end}).encode())
        producer_id = self._next
        self._next += 1
        return producer_id
