"""Producer ids: handed out from persisted blocks, so none is ever issued twice."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from josefk.log.checkpoint import write_atomic

PRODUCER_ID_FILE = "__josefk_producer_ids.json"
BLOCK_SIZE = 1000  # as Kafka's controller allocates them
MAX_EPOCH = 32767

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

    def issued(self, producer_id: int) -> bool:
        """Whether ``producer_id`` could have come from this manager."""
        return 0 <= producer_id < self._next

    def init_idempotent(self, producer_id: int, epoch: int) -> tuple[int, int]:
        """InitProducerId for a producer without a transactional id.

        A new producer gets a new id at epoch 0. One that sends back an id we issued
        and its epoch (KIP-360, after an unknown-producer or sequence error) gets the
        epoch bumped, or a new id once the epoch is exhausted.
        """
        if producer_id >= 0 and epoch >= 0 and self.issued(producer_id) and epoch < MAX_EPOCH - 1:
            return producer_id, epoch + 1
        return self.next_id(), 0
